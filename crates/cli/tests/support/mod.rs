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

/// Starts `cmd` (uncoloured, killed when dropped) and keeps its stdout and stderr lines as they
/// come.
pub fn spawn_logged(mut cmd: Command) -> (Child, Arc<Mutex<Vec<String>>>) {
    let mut child = cmd
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
    (child, lines)
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
        let state = ["--state-dir".to_string(), state.display().to_string()];
        Host::start_with(dir, &state, &[("RUST_LOG", "info")]).await
    }

    /// Starts `informant run` on `dir`'s kubeconfig and plugins with `args` more and `env` set,
    /// and waits until it is ready.
    pub async fn start_with(dir: &Path, args: &[String], env: &[(&str, &str)]) -> Host {
        let mut run = Command::new(env!("CARGO_BIN_EXE_informant"));
        // On loopback, unauthenticated: these tests read /metrics and /plugins directly.
        run.arg("run")
            .arg("--kubeconfig")
            .arg(dir.join("kubeconfig"))
            .arg("--admin-auth=none");
        Host::spawn(run, dir, args, env).await
    }

    /// Starts `informant dev` on `dir`'s plugins with the state in `state`, its embedded API
    /// server on `listen` seeded from `seed`, and waits until it is ready.
    pub async fn dev(dir: &Path, state: &Path, listen: SocketAddr, seed: &Path) -> Host {
        let mut dev = Command::new(env!("CARGO_BIN_EXE_informant"));
        dev.arg("dev")
            .arg("--listen")
            .arg(listen.to_string())
            .arg("--kubeconfig-out")
            .arg(dir.join("dev-kubeconfig"))
            .arg("--seed")
            .arg(seed);
        let state = ["--state-dir".to_string(), state.display().to_string()];
        Host::spawn(dev, dir, &state, &[("RUST_LOG", "info")]).await
    }

    /// `command` (`run` or `dev` with its own arguments) on `dir`'s plugins with `args` more
    /// and `env` set, once ready.
    async fn spawn(
        mut command: Command,
        dir: &Path,
        args: &[String],
        env: &[(&str, &str)],
    ) -> Host {
        let admin = free_addr();
        command
            .arg("--plugins")
            .arg(dir.join("plugins"))
            .args(args)
            .arg("--admin")
            .arg(admin.to_string())
            .arg("--cache-dir")
            .arg(dir.join("compile-cache"))
            .envs(env.iter().copied());
        let (child, lines) = spawn_logged(command);
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

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("running")
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
