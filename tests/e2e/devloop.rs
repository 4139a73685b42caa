//! The dev loop: a plugin crate in a temporary directory is built by the dev builder and run by
//! the plugin host against the embedded API server; editing its source (or a path dependency
//! outside the sources) swaps the new behaviour in without a restart, and breaking it keeps the
//! old version running while the compiler's error is reported.

use std::path::{Path, PathBuf};

use informant_dev::{
    BuildError, Builder, DevEvent, DevLoop, DevLoopConfig, Lang, Polyglot, SdkDependency,
    polyglot_sdk, scaffold, scaffold_polyglot,
};
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_runtime::plugin::load::reload::Reloader;
use informant_runtime::plugin::load::status::ReconcileReport;
use informant_tests::plugins::PluginEnv;
use informant_tests::{GUARD, configmap};
use tokio::sync::mpsc;

/// A plugin whose log lines say which version of the source produced them.
fn source(version: &str) -> String {
    format!(
        r#"use informant_sdk::{{Event, HandlerError, Plugin}};

pub struct Echo;

impl Plugin for Echo {{
    fn init(_config: serde_json::Value) -> Result<Self, HandlerError> {{
        Ok(Echo)
    }}

    fn on_added(&mut self, ev: &Event) -> Result<(), HandlerError> {{
        informant_sdk::info!("{version} added {{}}", ev.meta().key());
        Ok(())
    }}
}}

informant_sdk::export_plugin!(Echo);
"#
    )
}

/// The wasm target directory the other plugin tests build in, so dependencies build once.
fn shared_target_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/wasm-plugins")
}

/// A dev loop building `sources` into `env`'s plugins directory (dependencies shared with the
/// other plugin tests), and its events.
async fn start_loop(
    env: &PluginEnv,
    sources: &Path,
    polyglot: Polyglot,
) -> (DevLoop, mpsc::UnboundedReceiver<DevEvent>) {
    let (tx, events) = mpsc::unbounded_channel();
    let dev_loop = DevLoop::start(
        DevLoopConfig {
            sources: sources.to_path_buf(),
            builder: Builder {
                target_dir: shared_target_dir(),
                out_dir: env.dir().to_path_buf(),
                color: false,
                polyglot,
            },
        },
        tx,
    )
    .await
    .unwrap();
    (dev_loop, events)
}

struct Dev {
    env: PluginEnv,
    crate_dir: PathBuf,
    events: mpsc::UnboundedReceiver<DevEvent>,
    reports: mpsc::UnboundedReceiver<ReconcileReport>,
    _sources: tempfile::TempDir,
    _dev_loop: DevLoop,
    _reloader: Reloader,
}

impl Dev {
    /// A copy of a plugin crate (the `informant new` scaffold with the `v1` source), built by
    /// the dev loop into the host's plugins directory and loaded.
    async fn start(name: &str) -> Dev {
        Dev::start_with(name, |crate_dir| {
            std::fs::write(crate_dir.join("src/lib.rs"), source("v1")).unwrap()
        })
        .await
    }

    /// As [`Dev::start`], with the scaffolded crate shaped by `edit` before the first build.
    async fn start_with(name: &str, edit: impl FnOnce(&Path)) -> Dev {
        let env = PluginEnv::start(HostConfig::default()).await;
        let sources = tempfile::tempdir().unwrap();
        let crate_dir = scaffold(name, sources.path(), SdkDependency::detect())
            .unwrap()
            .dir;
        edit(&crate_dir);
        let (dev_loop, mut events) = start_loop(&env, sources.path(), Polyglot::default()).await;
        match next_outcome(&mut events).await {
            DevEvent::Built { changed: true, .. } => {}
            other => panic!("the first build: {other:?}"),
        }
        let report = env.reconcile().await;
        assert_eq!(report.loaded.len(), 1, "{:?}", report.errors);
        let (report_tx, reports) = mpsc::unbounded_channel();
        let reloader = Reloader::start(env.host.clone(), Some(report_tx)).unwrap();
        Dev {
            env,
            crate_dir,
            events,
            reports,
            _sources: sources,
            _dev_loop: dev_loop,
            _reloader: reloader,
        }
    }

    fn has_line(&self, line: &str) -> bool {
        self.env.logs.lines().iter().any(|l| l.message == line)
    }

    /// Waits for a build that installs a new version (`what` names it in a failure), then for
    /// the reload that swaps it in; returns that reload's report.
    async fn expect_swap(&mut self, what: &str) -> ReconcileReport {
        match next_outcome(&mut self.events).await {
            DevEvent::Built { changed: true, .. } => {}
            other => panic!("{what}: {other:?}"),
        }
        let report = tokio::time::timeout(GUARD, self.reports.recv())
            .await
            .expect("timed out waiting for the reload")
            .unwrap();
        assert_eq!(report.replaced.len(), 1, "{what}: {report:?}");
        report
    }

    /// Creates a ConfigMap and waits for the plugin's line about it.
    async fn create_and_expect(&self, name: &str, line: &str) {
        self.env
            .server
            .create(configmap("default", name, "x"))
            .unwrap();
        self.env.logs.wait_until(line, || self.has_line(line)).await;
    }
}

/// The next build outcome (`Built` or `Failed`), skipping progress events.
async fn next_outcome(events: &mut mpsc::UnboundedReceiver<DevEvent>) -> DevEvent {
    loop {
        let e = tokio::time::timeout(GUARD * 10, events.recv())
            .await
            .expect("timed out waiting for a build")
            .expect("the dev loop ended");
        if matches!(e, DevEvent::Built { .. } | DevEvent::Failed { .. }) {
            return e;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_source_is_rebuilt_and_handles_the_next_event_without_a_restart() {
    // Crate names differ per test: cargo puts each crate's component at one path per name.
    let mut dev = Dev::start("echo-edit").await;
    dev.create_and_expect("first", "v1 added default/first")
        .await;
    let informers = dev.env.factory.informers();

    std::fs::write(dev.crate_dir.join("src/lib.rs"), source("v2")).unwrap();
    let report = dev.expect_swap("the rebuild").await;
    assert!(
        report.loaded.is_empty() && report.removed.is_empty(),
        "{report:?}"
    );

    dev.create_and_expect("second", "v2 added default/second")
        .await;
    assert!(!dev.has_line("v1 added default/second"));
    // The same informers kept watching: swapped, not restarted.
    let after = dev.env.factory.informers();
    assert!(
        after.len() == informers.len()
            && after
                .iter()
                .all(|a| informers.iter().any(|b| std::sync::Arc::ptr_eq(a, b))),
        "the swap kept the plugin's informers"
    );
    assert_eq!(dev.env.host.status().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_source_reports_the_compiler_error_and_the_old_version_keeps_running() {
    let mut dev = Dev::start("echo-break").await;
    let installed = std::fs::read(dev.env.dir().join("echo-break.wasm")).unwrap();

    let broken = source("v2").replace("Ok(Echo)", "Ok(Echo + 1)");
    std::fs::write(dev.crate_dir.join("src/lib.rs"), broken).unwrap();
    match next_outcome(&mut dev.events).await {
        DevEvent::Failed {
            error: BuildError::Compile { diagnostics, .. },
            ..
        } => {
            assert!(diagnostics.contains("error[E0369]"), "{diagnostics}");
            assert!(diagnostics.contains("src/lib.rs"), "{diagnostics}");
        }
        other => panic!("expected a compile error: {other:?}"),
    }
    assert_eq!(
        std::fs::read(dev.env.dir().join("echo-break.wasm")).unwrap(),
        installed,
        "a failed build installs nothing"
    );
    dev.create_and_expect("after-break", "v1 added default/after-break")
        .await;

    // Fixing it swaps the fix in.
    std::fs::write(dev.crate_dir.join("src/lib.rs"), source("v3")).unwrap();
    dev.expect_swap("the fixed build").await;
    dev.create_and_expect("after-fix", "v3 added default/after-fix")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_path_dependency_outside_the_sources_is_rebuilt_into_the_plugin() {
    // A crate beside the sources, used by path as a plugin uses the SDK or a team's shared code.
    let shared = tempfile::tempdir().unwrap();
    let greeting = shared.path().join("greeting");
    std::fs::create_dir_all(greeting.join("src")).unwrap();
    std::fs::write(
        greeting.join("Cargo.toml"),
        "[package]\nname = \"greeting\"\nversion = \"0.1.0\"\nedition = \"2024\"\n",
    )
    .unwrap();
    let version = |v: &str| format!("pub const VERSION: &str = \"{v}\";\n");
    std::fs::write(greeting.join("src/lib.rs"), version("dep-v1")).unwrap();

    let mut dev = Dev::start_with("echo-dep", |crate_dir| {
        let cargo = crate_dir.join("Cargo.toml");
        let text = std::fs::read_to_string(&cargo).unwrap().replace(
            "[dependencies]\n",
            &format!(
                "[dependencies]\ngreeting = {{ path = {:?} }}\n",
                greeting.display().to_string()
            ),
        );
        std::fs::write(cargo, text).unwrap();
        let lib = source("v1").replace(
            r#""v1 added {}", ev.meta().key()"#,
            r#""{} added {}", greeting::VERSION, ev.meta().key()"#,
        );
        assert!(lib.contains("greeting::VERSION"));
        std::fs::write(crate_dir.join("src/lib.rs"), lib).unwrap();
    })
    .await;
    dev.create_and_expect("first", "dep-v1 added default/first")
        .await;

    std::fs::write(greeting.join("src/lib.rs"), version("dep-v2")).unwrap();
    dev.expect_swap("the rebuild after the dependency changed")
        .await;
    dev.create_and_expect("second", "dep-v2 added default/second")
        .await;
}

/// Copies the JS SDK without its `node_modules`, as a user's checkout before `npm install`.
fn js_sdk_without_toolchain(to: &Path) -> PathBuf {
    let from = polyglot_sdk(Lang::Js).expect("guest-sdk-js");
    let sdk = to.join("guest-sdk-js");
    std::fs::create_dir_all(sdk.join("src")).unwrap();
    for f in ["package.json", "package-lock.json", "build.mjs"] {
        std::fs::copy(from.join(f), sdk.join(f)).unwrap();
    }
    for e in std::fs::read_dir(from.join("src")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), sdk.join("src").join(e.file_name())).unwrap();
    }
    sdk
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_typescript_sources_build_beside_a_rust_crate_and_swap_on_save() {
    // The loop installs the JS toolchain itself; the shared install says whether npm can.
    let (Some(_), Some(_)) = (
        informant_tests::toolchains::python(),
        informant_tests::toolchains::js_sdk(),
    ) else {
        return;
    };
    let env = PluginEnv::start(HostConfig::default()).await;
    let sources = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let py_sdk = polyglot_sdk(Lang::Python).expect("guest-sdk-py");
    // The JS toolchain is missing, so the loop installs it (from npm) into its cache dir.
    let js_sdk = js_sdk_without_toolchain(scratch.path());
    let js_toolchains = scratch.path().join("toolchains");
    let rs = scaffold("side-rs", sources.path(), SdkDependency::detect())
        .unwrap()
        .dir;
    let py = scaffold_polyglot(Lang::Python, "side-py", sources.path(), &py_sdk).unwrap();
    let ts = scaffold_polyglot(Lang::Js, "side-ts", sources.path(), &js_sdk).unwrap();
    for (dir, name, greeting) in [
        (&rs, "side-rs", "rs-v1"),
        (&py, "side-py", "py-v1"),
        (&ts, "side-ts", "ts-v1"),
    ] {
        let manifest = dir.join(format!("{name}.toml"));
        let text = std::fs::read_to_string(&manifest).unwrap();
        assert!(text.contains(r#"greeting = "hello""#), "{text}");
        std::fs::write(
            &manifest,
            text.replace(r#""hello""#, &format!("{greeting:?}")),
        )
        .unwrap();
    }
    // The Python toolchain is the one every test shares; the JS one goes to the scratch dir.
    let python = informant_tests::plugins::target_dir();
    std::fs::create_dir_all(&js_toolchains).unwrap();
    std::os::unix::fs::symlink(
        python.join("py-toolchain"),
        js_toolchains.join("py-toolchain"),
    )
    .unwrap();
    let polyglot = Polyglot {
        js_sdk: Some(js_sdk.clone()),
        toolchains: Some(js_toolchains.clone()),
        ..Polyglot::detect()
    };
    let (_dev_loop, mut events) = start_loop(&env, sources.path(), polyglot).await;
    // The first round: progress for each, the JS toolchain installed before its build.
    let mut seen = Vec::new();
    while seen
        .iter()
        .filter(|e| matches!(e, DevEvent::Built { .. } | DevEvent::Failed { .. }))
        .count()
        < 3
    {
        let e = tokio::time::timeout(GUARD * 10, events.recv())
            .await
            .expect("timed out waiting for the first builds")
            .expect("the dev loop ended");
        seen.push(e);
    }
    let order: Vec<String> = seen
        .iter()
        .map(|e| match e {
            DevEvent::InstallingToolchain { lang, .. } => format!("install {}", lang.name()),
            DevEvent::Building { id, index, total } => format!("building {index}/{total} {id}"),
            DevEvent::Built {
                id, changed: true, ..
            } => format!("built {id}"),
            other => panic!("the first round: {other:?}"),
        })
        .collect();
    assert_eq!(
        order,
        [
            "building 1/3 side-py",
            "built side-py",
            "building 2/3 side-rs",
            "built side-rs",
            "install TypeScript/JS",
            "building 3/3 side-ts",
            "built side-ts",
        ]
    );
    assert!(
        js_toolchains
            .join("js-toolchain/node_modules/@bytecodealliance/componentize-js")
            .is_dir()
    );
    let report = env.reconcile().await;
    assert_eq!(report.loaded.len(), 3, "{:?}", report.errors);
    let (report_tx, mut reports) = mpsc::unbounded_channel();
    let _reloader = Reloader::start(env.host.clone(), Some(report_tx)).unwrap();

    let has = |line: &str| env.logs.lines().iter().any(|l| l.message == line);
    let create_and_expect = |name: &'static str, lines: Vec<String>| {
        env.server.create(configmap("default", name, "x")).unwrap();
        let logs = &env.logs;
        async move {
            for line in lines {
                logs.wait_until(&line, || logs.lines().iter().any(|l| l.message == line))
                    .await;
            }
        }
    };
    let lines = |name: &str, versions: [&str; 3]| {
        versions
            .map(|v| format!("{v} added ConfigMap default/{name}"))
            .to_vec()
    };
    create_and_expect("first", lines("first", ["rs-v1", "py-v1", "ts-v1"])).await;

    // Saving the Python plugin rebuilds it alone and swaps it in.
    let plugin_py = py.join("plugin.py");
    let text = std::fs::read_to_string(&plugin_py).unwrap();
    let edited = text.replace(
        r#"log.info(f"{self.greeting} {what}"#,
        r#"log.info(f"py-v2 {what}"#,
    );
    assert_ne!(edited, text);
    std::fs::write(&plugin_py, edited).unwrap();
    match next_outcome(&mut events).await {
        DevEvent::Built {
            id, changed: true, ..
        } if id.name == "side-py" => {}
        other => panic!("the Python rebuild: {other:?}"),
    }
    let report = tokio::time::timeout(GUARD, reports.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.replaced.len(), 1, "{report:?}");
    create_and_expect("second", lines("second", ["rs-v1", "py-v2", "ts-v1"])).await;
    assert!(!has("py-v1 added ConfigMap default/second"));

    // A TypeScript error is reported with esbuild's words; the running version stays.
    let installed = std::fs::read(env.dir().join("side-ts.wasm")).unwrap();
    let plugin_ts = ts.join("src/plugin.ts");
    let text = std::fs::read_to_string(&plugin_ts).unwrap();
    std::fs::write(&plugin_ts, text.replace("private say(", "private say(((")).unwrap();
    match next_outcome(&mut events).await {
        DevEvent::Failed {
            id,
            error: BuildError::Compile { diagnostics, .. },
        } if id.name == "side-ts" => {
            assert!(diagnostics.contains("plugin.ts"), "{diagnostics}");
            assert!(
                diagnostics.contains("ERROR") || diagnostics.contains("error"),
                "{diagnostics}"
            );
        }
        other => panic!("expected the TypeScript error: {other:?}"),
    }
    assert_eq!(
        std::fs::read(env.dir().join("side-ts.wasm")).unwrap(),
        installed
    );
    create_and_expect("third", lines("third", ["rs-v1", "py-v2", "ts-v1"])).await;

    // A Python error at import is componentize-py's traceback; the running version stays.
    std::fs::write(
        &plugin_py,
        "from informant import Plugin\n\nclass Broken(Plugin:\n",
    )
    .unwrap();
    match next_outcome(&mut events).await {
        DevEvent::Failed {
            id,
            error: BuildError::Compile { diagnostics, .. },
        } if id.name == "side-py" => {
            assert!(diagnostics.contains("SyntaxError"), "{diagnostics}");
        }
        other => panic!("expected the Python error: {other:?}"),
    }
    create_and_expect("fourth", lines("fourth", ["rs-v1", "py-v2", "ts-v1"])).await;
    assert_eq!(env.host.status().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_plugin_that_loops_while_building_is_killed_and_the_next_one_still_builds() {
    if informant_tests::toolchains::python().is_none() {
        return;
    }
    // componentize-py runs a plugin's module-level code at build time: this one never returns.
    let env = PluginEnv::start(HostConfig::default()).await;
    let sources = tempfile::tempdir().unwrap();
    let py_sdk = polyglot_sdk(Lang::Python).expect("guest-sdk-py");
    let looping = scaffold_polyglot(Lang::Python, "a-loops", sources.path(), &py_sdk).unwrap();
    let text = std::fs::read_to_string(looping.join("plugin.py")).unwrap();
    std::fs::write(
        looping.join("plugin.py"),
        format!("{text}\nwhile True:\n    pass\n"),
    )
    .unwrap();
    // The plugin after it in the round: a Rust crate, as its build is not under the Python
    // limit, which a busy machine's normal Python build could exceed.
    scaffold("b-fine", sources.path(), SdkDependency::detect()).unwrap();
    let limit = std::time::Duration::from_secs(20);
    let polyglot = Polyglot {
        toolchains: Some(informant_tests::plugins::target_dir()),
        build_timeout: Some(limit),
        ..Polyglot::detect()
    };
    let (_dev_loop, mut events) = start_loop(&env, sources.path(), polyglot).await;
    match next_outcome(&mut events).await {
        DevEvent::Failed {
            id,
            error: BuildError::Compile { diagnostics, .. },
        } if id.name == "a-loops" => {
            assert!(diagnostics.contains("killed after 20s"), "{diagnostics}")
        }
        other => panic!("expected the looping build to be killed: {other:?}"),
    }
    match next_outcome(&mut events).await {
        DevEvent::Built {
            id, changed: true, ..
        } if id.name == "b-fine" => {}
        other => panic!("the next plugin: {other:?}"),
    }
    let report = env.reconcile().await;
    assert_eq!(report.loaded.len(), 1, "{report:?}");
    assert!(!env.dir().join("a-loops.wasm").exists());
}
