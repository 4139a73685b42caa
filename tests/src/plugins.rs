//! Plugin test support: the plugins' components (Rust ones from the build step, Python and JS
//! ones built here), a host over the embedded API server, and a recorder of plugin log lines.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use informant_dev::js::JsToolchain;
use informant_dev::python;
use informant_dev::toolchain::BUILD_TIMEOUT;
use informant_devserver::{DevServer, DevServerConfig};
use informant_runtime::informer::{FactoryOptions, InformerFactory, InitialList};
use informant_runtime::plugin::exec::engine::{EngineOptions, PluginEngine};
use informant_runtime::plugin::exec::supervisor::RestartPolicy;
use informant_runtime::plugin::imports::log::PluginLog;
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_runtime::plugin::load::loader::PluginHost;
use informant_runtime::plugin::load::rediscover;
use informant_runtime::plugin::load::rediscover::Rediscoverer;
use informant_runtime::plugin::load::status::ReconcileReport;
use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use crate::{GUARD, toolchains};
use tokio::sync::{broadcast, watch};

/// The path of `package`'s component, built by `informant-test-programs`' build step.
pub fn wasm(package: &str) -> PathBuf {
    let path = informant_test_programs::component(package)
        .unwrap_or_else(|| panic!("`{package}` is not among the test programs"));
    PathBuf::from(path)
}

/// The cargo target directory (`CARGO_TARGET_DIR`, else the workspace's `target/`): built test
/// components and the Python toolchain are cached there across runs.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => workspace_root().join("target"),
    }
}

fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
}

/// The component of the Python plugin in `dir` (relative to the workspace root), built with
/// componentize-py (installed into `target/py-toolchain` from PyPI if missing); see [`cached`].
/// `None` after a printed skip when it is not built and the toolchain cannot be had.
pub fn python_wasm(dir: &str) -> Option<PathBuf> {
    let root = workspace_root();
    let (sdk, wit) = (root.join("guest-sdk-py"), root.join("wit"));
    let inputs = [
        sdk.clone(),
        sdk.join("informant"),
        wit.clone(),
        wit.join("deps"),
        root.join(dir),
    ];
    cached(dir, python::REQUIREMENTS.as_bytes(), &inputs, |out| {
        let tc = toolchains::python()?;
        tc.build(&wit, &sdk, &root.join(dir), out, BUILD_TIMEOUT)
            .unwrap_or_else(|e| panic!("{e}"));
        Some(())
    })
}

/// The component of the TypeScript/JavaScript plugin in `dir` (relative to the workspace root),
/// built by the dev loop's JS toolchain (the SDK's `build.mjs`: esbuild + componentize-js); see
/// [`cached`]. `None` after a printed skip when it is not built and the toolchain cannot be had.
pub fn js_wasm(dir: &str) -> Option<PathBuf> {
    let root = workspace_root();
    let sdk = root.join("guest-sdk-js");
    let lock =
        std::fs::read(sdk.join("package-lock.json")).expect("guest-sdk-js/package-lock.json");
    let inputs = [
        sdk.clone(),
        sdk.join("src"),
        root.join("wit"),
        root.join("wit/deps"),
        root.join(dir).join("src"),
    ];
    cached(dir, &lock, &inputs, |out| {
        let sdk = toolchains::js_sdk()?;
        JsToolchain::ensure(&sdk, &target_dir().join("js-toolchain"))
            .and_then(|tc| tc.build(&root.join("wit"), &sdk, &root.join(dir), out, BUILD_TIMEOUT))
            .unwrap_or_else(|e| panic!("{e}"));
        Some(())
    })
}

/// `target/polyglot-plugins/NAME-HASH.wasm`, built by `build` unless it exists: HASH covers the
/// toolchain pins and the files directly in each of `inputs` (not tests), so a change to the
/// plugin, its SDK or `wit/` rebuilds it and nothing else does. Builds are serialized, so each
/// runs once per change even when tests ask concurrently. `None` when `build` skipped.
fn cached(
    dir: &str,
    pins: &[u8],
    inputs: &[PathBuf],
    build: impl FnOnce(&Path) -> Option<()>,
) -> Option<PathBuf> {
    static BUILDS: Mutex<()> = Mutex::new(());
    let mut hasher = Sha256::new();
    hasher.update(pins);
    for d in inputs {
        hash_dir(&mut hasher, d);
    }
    let hash: String = hasher.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let name = Path::new(dir).file_name().expect("plugin dir name");
    let out = target_dir()
        .join("polyglot-plugins")
        .join(format!("{}-{hash}.wasm", name.to_string_lossy()));
    let _serial = BUILDS.lock();
    if !out.is_file() {
        std::fs::create_dir_all(out.parent().unwrap()).expect("polyglot-plugins dir");
        build(&out)?;
        assert!(out.is_file(), "building {dir} wrote no {}", out.display());
    }
    Some(out)
}

/// Feeds the names and contents of `dir`'s files (not subdirectories, not tests) to `hasher`.
fn hash_dir(hasher: &mut Sha256, dir: &Path) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("test"))
        })
        .collect();
    files.sort();
    for f in files {
        hasher.update(f.file_name().unwrap().as_encoded_bytes());
        hasher.update(std::fs::read(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display())));
    }
}

/// Restarts within milliseconds and quarantine at the third consecutive failure, so failure
/// handling plays out quickly in tests.
pub fn fast_restarts() -> RestartPolicy {
    RestartPolicy {
        initial_backoff: std::time::Duration::from_millis(5),
        max_backoff: std::time::Duration::from_millis(50),
        quarantine_after: 3,
        healthy_after: 10,
    }
}

/// Restarts at once and never quarantines: a plugin blocked in its events stays blocked on each
/// new one, for tests of what a stuck plugin holds back.
pub fn never_quarantined() -> RestartPolicy {
    RestartPolicy {
        initial_backoff: std::time::Duration::from_millis(5),
        max_backoff: std::time::Duration::from_millis(20),
        quarantine_after: u32::MAX,
        healthy_after: 10,
    }
}

/// Every plugin log line since it was created, with condition waits.
#[derive(Clone)]
pub struct Logs {
    lines: Arc<Mutex<Vec<PluginLog>>>,
    count: Arc<watch::Sender<usize>>,
}

impl Logs {
    /// Records every line sent on `rx` from now on.
    pub fn record(mut rx: broadcast::Receiver<PluginLog>) -> Self {
        let logs = Logs {
            lines: Arc::default(),
            count: Arc::new(watch::channel(0).0),
        };
        let me = logs.clone();
        tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(line) => {
                        me.lines.lock().push(line);
                        me.count.send_modify(|c| *c += 1);
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        panic!("the test's log recorder lagged and lost {n} plugin log lines")
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                }
            }
        });
        logs
    }

    /// A copy of all lines so far.
    pub fn lines(&self) -> Vec<PluginLog> {
        self.lines.lock().clone()
    }

    /// Lines of one plugin, parsed as JSON (non-JSON lines are skipped).
    pub fn json_of(&self, plugin: &str) -> Vec<serde_json::Value> {
        self.lines
            .lock()
            .iter()
            .filter(|l| &*l.plugin == plugin)
            .filter_map(|l| serde_json::from_str(&l.message).ok())
            .collect()
    }

    /// The `key`s of the JSON lines of `plugin` tagged `tag` (as the test plugins echo events).
    pub fn keys_of(&self, plugin: &str, tag: &str) -> std::collections::BTreeSet<String> {
        self.json_of(plugin)
            .iter()
            .filter(|v| v["tag"] == tag)
            .filter_map(|v| v["key"].as_str().map(str::to_string))
            .collect()
    }

    /// Waits until `pred` holds (it may query these logs), failing the test after [`GUARD`].
    pub async fn wait_until(&self, what: &str, pred: impl Fn() -> bool) {
        let ok = crate::wait_for_change(&self.count, pred).await;
        let lines = self.lines();
        assert!(
            ok,
            "timed out waiting for {what}; last lines: {:?}",
            &lines[lines.len().saturating_sub(5)..]
        );
    }
}

/// The embedded API server, a factory and a plugin host over a temporary plugins directory.
pub struct PluginEnv {
    /// The API server.
    pub server: DevServer,
    /// Informers.
    pub factory: Arc<InformerFactory>,
    /// The plugin host.
    pub host: Arc<PluginHost>,
    /// Plugin log lines.
    pub logs: Logs,
    dir: tempfile::TempDir,
    /// Re-expands wildcard watches as CRDs come and go, as the runtime does.
    _rediscoverer: Rediscoverer,
}

impl PluginEnv {
    /// Starts everything with an empty plugins directory.
    pub async fn start(config: HostConfig) -> Self {
        Self::start_with(config, false).await
    }

    /// [`PluginEnv::start`], with every plugin write sent as `dryRun=All` when asked.
    pub async fn start_with(config: HostConfig, dry_run_writes: bool) -> Self {
        crate::init_tracing();
        let server = DevServer::start(DevServerConfig::default())
            .await
            .expect("start API server");
        let factory = Arc::new(InformerFactory::new(
            server.client(),
            FactoryOptions {
                initial_list: InitialList::Paginated,
                ..Default::default()
            },
        ));
        let dir = tempfile::tempdir().expect("plugins dir");
        let engine = Arc::new(PluginEngine::new(EngineOptions::default()).expect("engine"));
        let config = HostConfig {
            log_buffer: 1 << 20,
            ..config
        };
        let host = Arc::new(
            PluginHost::new(dir.path().to_path_buf(), engine, factory.clone(), config)
                .with_dry_run_writes(dry_run_writes),
        );
        let logs = Logs::record(host.subscribe_logs());
        let rediscoverer = Rediscoverer::start(host.clone(), rediscover::PERIOD);
        PluginEnv {
            server,
            factory,
            host,
            logs,
            dir,
            _rediscoverer: rediscoverer,
        }
    }

    /// The plugins directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `NAME.toml` and copies `package`'s component to `NAME.wasm` (in `tenant/` if given).
    pub fn install(&self, tenant: Option<&str>, name: &str, package: &str, manifest: &str) {
        self.install_component(tenant, name, &wasm(package), manifest);
    }

    /// Writes `NAME.toml` and copies the component at `component` to `NAME.wasm` (in `tenant/`
    /// if given), as for a component built from another language's sources.
    pub fn install_component(
        &self,
        tenant: Option<&str>,
        name: &str,
        component: &Path,
        manifest: &str,
    ) {
        let dir = match tenant {
            Some(t) => self.dir().join(t),
            None => self.dir().to_path_buf(),
        };
        std::fs::create_dir_all(&dir).expect("tenant dir");
        std::fs::write(dir.join(format!("{name}.toml")), manifest).expect("write manifest");
        std::fs::copy(component, dir.join(format!("{name}.wasm"))).expect("copy wasm");
    }

    /// Reconciles and waits for every informer to sync.
    pub async fn reconcile(&self) -> ReconcileReport {
        let report = self.host.reconcile().await;
        self.factory
            .wait_for_sync(GUARD)
            .await
            .expect("informers sync");
        report
    }
}
