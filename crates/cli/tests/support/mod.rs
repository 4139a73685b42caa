//! What the tests of `informant run --state-dir` share: the embedded API server with a plugins
//! directory, and the real binary run against it with its log lines kept.

// Each test crate that includes this module uses part of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use informant_devserver::{DevServer, DevServerConfig};
use informant_tests::create_namespaces;
use informant_tests::http::{free_addr, get_until};
use parking_lot::Mutex;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The embedded API server (namespace `demo`) and a directory holding the kubeconfig, the
/// plugins (one, `NAME.wasm` + `NAME.toml`) and the state.
pub struct Setup {
    pub server: DevServer,
    pub dir: tempfile::TempDir,
}

impl Setup {
    /// The test program `package` installed as plugin `name` with `manifest`.
    pub async fn new(name: &str, package: &str, manifest: &str) -> Setup {
        let server = DevServer::start(DevServerConfig::default()).await.unwrap();
        create_namespaces(&server, &["demo"]);
        let dir = tempfile::tempdir().unwrap();
        let plugins = dir.path().join("plugins");
        std::fs::create_dir_all(&plugins).unwrap();
        std::fs::copy(
            informant_tests::plugins::wasm(package),
            plugins.join(format!("{name}.wasm")),
        )
        .unwrap();
        std::fs::write(plugins.join(format!("{name}.toml")), manifest).unwrap();
        server
            .write_kubeconfig(&dir.path().join("kubeconfig"))
            .unwrap();
        Setup { server, dir }
    }

    /// The state directory.
    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// `informant run` on this setup, once ready.
    pub async fn host(&self) -> Host {
        Host::start(self.dir.path(), &self.state_dir()).await
    }
}

/// One `informant run --state-dir` process, its log lines kept as they come.
pub struct Host {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    /// Its admin server.
    pub admin: SocketAddr,
}

impl Host {
    /// The value of the `/metrics` sample line starting with `prefix`.
    pub async fn metric(&self, prefix: &str) -> Option<f64> {
        let (_, _, body) = informant_tests::http::get(self.admin, "/metrics").await;
        body.lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    }

    /// Starts `informant run` on `dir`'s kubeconfig and plugins with the state in `state`, and
    /// waits until it is ready.
    pub async fn start(dir: &Path, state: &Path) -> Host {
        let admin = free_addr();
        let mut child = Command::new(env!("CARGO_BIN_EXE_informant"))
            .arg("run")
            .arg("--kubeconfig")
            .arg(dir.join("kubeconfig"))
            .arg("--plugins")
            .arg(dir.join("plugins"))
            .arg("--state-dir")
            .arg(state)
            .arg("--admin")
            .arg(admin.to_string())
            .arg("--admin-auth=none")
            .arg("--cache-dir")
            .arg(dir.join("compile-cache"))
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("run informant");
        let lines = Arc::new(Mutex::new(Vec::new()));
        for out in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn tokio::io::AsyncRead + Send + Unpin>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let lines = lines.clone();
            tokio::spawn(async move {
                let mut reader = BufReader::new(out).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    lines.lock().push(line);
                }
            });
        }
        get_until(admin, "/readyz", "the host to be ready", |s, _| s == 200).await;
        Host {
            child,
            lines,
            admin,
        }
    }

    /// The JSON object each log line carries (a plugin's line is one), in order.
    pub fn json_lines(&self) -> Vec<Value> {
        self.lines
            .lock()
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(&l[l.find("{\"")?..]).ok())
            .collect()
    }

    /// Every log line so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().clone()
    }

    /// Log lines containing `text`.
    pub fn logged(&self, text: &str) -> Vec<String> {
        self.lines
            .lock()
            .iter()
            .filter(|l| l.contains(text))
            .cloned()
            .collect()
    }

    /// SIGTERM, as Kubernetes stops a pod, and a clean exit.
    pub async fn stop(mut self) {
        let pid = self.child.id().expect("running") as i32;
        // SAFETY: `kill` with a pid this test started and still holds.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let status = informant_tests::guarded("the host to exit", self.child.wait())
            .await
            .unwrap();
        assert!(
            status.success(),
            "exit: {status}\n{}",
            self.lines().join("\n")
        );
    }

    /// SIGKILL: a crash, an OOM kill.
    pub async fn kill(mut self) {
        self.child.start_kill().unwrap();
        let _ = informant_tests::guarded("the host to die", self.child.wait()).await;
    }
}
