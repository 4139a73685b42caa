//! A real OCI registry on loopback for the tests: Debian's `docker-registry` (distribution v2)
//! over TLS, with a certificate signed by a CA made now, and basic auth from an htpasswd file
//! (bcrypt, by apache2-utils' `htpasswd`) — or, when either tool is missing, a skip with the
//! reason (a failure under `INFORMANT_REQUIRE_ALL=1`).

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use informant_test_tools::need;

/// The one login the registry accepts.
pub const USER: &str = "informant";
/// Its password.
pub const PASSWORD: &str = "s3cret:with-colon";

/// A running registry; stopped when dropped.
pub struct LocalRegistry {
    /// `127.0.0.1:PORT`: the registry part of references to it.
    pub addr: String,
    /// The CA (PEM) its certificate is signed by.
    pub ca_file: PathBuf,
    dir: tempfile::TempDir,
    child: Child,
}

impl LocalRegistry {
    /// Starts one and waits until it accepts connections; `None` after a skip.
    pub fn start() -> Option<LocalRegistry> {
        let registry = need("docker-registry", Some("DOCKER_REGISTRY"))?;
        let htpasswd = need("htpasswd", None)?;
        let dir = tempfile::tempdir().expect("a registry directory");
        let path = |name: &str| dir.path().join(name);

        let tls = crate::loopback_tls::LoopbackTls::new("informant test registry CA");
        std::fs::write(path("ca.pem"), &tls.ca_pem).unwrap();
        std::fs::write(path("cert.pem"), tls.leaf_pem + &tls.ca_pem).unwrap();
        std::fs::write(path("key.pem"), &tls.key_pem).unwrap();

        let out = Command::new(htpasswd)
            .args(["-Bbn", USER, PASSWORD])
            .output()
            .expect("run htpasswd");
        assert!(out.status.success(), "htpasswd: {out:?}");
        std::fs::write(path("htpasswd"), &out.stdout).unwrap();

        // A port the kernel just handed out; the registry binds it a moment later.
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let addr = format!("127.0.0.1:{port}");
        let config = format!(
            "version: 0.1\n\
             log:\n  level: warn\n\
             storage:\n  filesystem:\n    rootdirectory: {root}\n\
             http:\n  addr: {addr}\n  tls:\n    certificate: {cert}\n    key: {key}\n\
             auth:\n  htpasswd:\n    realm: informant-test\n    path: {htpasswd}\n",
            root = path("storage").display(),
            cert = path("cert.pem").display(),
            key = path("key.pem").display(),
            htpasswd = path("htpasswd").display(),
        );
        std::fs::write(path("config.yml"), config).unwrap();
        let log = std::fs::File::create(path("registry.log")).unwrap();
        let child = Command::new(registry)
            .arg("serve")
            .arg(path("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start docker-registry");
        let mut running = LocalRegistry {
            addr,
            ca_file: path("ca.pem"),
            dir,
            child,
        };
        running.wait_listening();
        Some(running)
    }

    /// Waits until the registry accepts a connection (it binds after reading its config).
    fn wait_listening(&mut self) {
        let addr: SocketAddr = self.addr.parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("docker-registry exited ({status}):\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "docker-registry did not listen on {} in 20 s:\n{}",
                self.addr,
                self.log()
            );
            std::thread::yield_now();
        }
    }

    /// What the registry logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// A dockerconfigjson logging in to this registry as `user` with `password`.
    pub fn docker_config(&self, user: &str, password: &str) -> PathBuf {
        use base64::Engine;
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        let path = self.dir.path().join(format!("docker-config-{user}.json"));
        let mut f = std::fs::File::create(&path).unwrap();
        write!(
            f,
            "{}",
            serde_json::json!({"auths": {self.addr.clone(): {"auth": auth}}})
        )
        .unwrap();
        path
    }
}

impl Drop for LocalRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
