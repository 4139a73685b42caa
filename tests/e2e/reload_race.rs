//! No change to the plugins directory is lost while a reconcile runs. Through the whole startup
//! path (`Replica`, as `informant run` starts it), a plugin is dropped in at each stage of a slow
//! reconcile: during the first reconcile's scan and compile, while other plugins hang in `init`
//! (into an existing tenant directory and into one created meanwhile, and completing a pair
//! whose `.wasm` the reconcile saw alone), while a replaced version finishes its in-flight event
//! before the swap, right after a reload of another plugin, and while a reconcile started by a
//! config reload hangs. Each is loaded with no further change and handles an event, and another
//! tenant's events flow throughout. A config changed while the first reconcile hangs applies
//! too: the tenant it grants gets its plugins.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use informant_devserver::{DevServer, DevServerConfig};
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_runtime::runtime::{Replica, RuntimeOptions};
use informant_tests::http::{free_addr, get_until};
use informant_tests::plugins::{Logs, never_quarantined, wasm};
use informant_tests::{configmap, create_namespaces, guarded, plugin_entry};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use tokio::sync::{broadcast, watch};

/// The deadline of the plugins hanging in `init`: how long each slow reconcile lasts.
const HANG_MS: u64 = 3000;

/// Every tenant the tests use, each granted its own namespace; `team-e` is granted only by
/// the config reload of [`a_plugin_dropped_in_while_a_config_reload_reconciles_loads`].
const TENANTS: &[&str] = &["team-a", "team-b", "team-c", "team-d", "team-z"];

fn config_text(tenants: &[&str]) -> String {
    tenants
        .iter()
        .map(|t| format!("[tenants.{t}]\nnamespaces = [\"{t}\"]\n"))
        .collect()
}

/// The host config from `text`; failures restart at once and never quarantine, so a plugin
/// blocked in its events stays blocked on each new one.
fn host_config(text: &str) -> HostConfig {
    let mut config =
        informant_runtime::config::parse(text, Path::new("informant.toml")).expect("config");
    config.restart = never_quarantined();
    config
}

/// The hostile plugin in `mode`, tagged `tag`, watching `kind` (`v1`) in `namespace`.
fn manifest(mode: &str, tag: &str, namespace: &str, kind: &str, deadline_ms: u64) -> String {
    format!(
        "[limits]\ndeadline-ms = {deadline_ms}\nmemory-mib = 16\n[[watch]]\napi-version = \"v1\"\nkind = \"{kind}\"\nnamespace = \"{namespace}\"\n[config]\nmode = \"{mode}\"\ntag = \"{tag}\"\n"
    )
}

/// An echo plugin of `tenant` (watching ConfigMaps in its namespace), tagged with its name.
fn echo(tenant: &str, name: &str) -> String {
    manifest("echo", name, tenant, "ConfigMap", 500)
}

/// Drops `NAME.wasm` then `NAME.toml` into `tenant`'s directory (created if missing), in the
/// order a careless `cp *` may: the component before its manifest.
fn drop_in(dir: &Path, tenant: &str, name: &str, manifest: &str) {
    let dir = dir.join(tenant);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(wasm("hostile"), dir.join(format!("{name}.wasm"))).unwrap();
    std::fs::write(dir.join(format!("{name}.toml")), manifest).unwrap();
}

/// `n` plugins of `tenant` whose `init` hangs past its [`HANG_MS`] deadline, watching `kind` in
/// the tenant's namespace: every reconcile that tries them lasts that long.
fn hang_in_init(dir: &Path, tenant: &str, prefix: &str, kind: &str, n: usize) {
    for i in 0..n {
        drop_in(
            dir,
            tenant,
            &format!("{prefix}{i}"),
            &manifest("sleep-init", prefix, tenant, kind, HANG_MS),
        );
    }
}

/// A replica over a plugins directory and an API server, with another tenant's events flowing.
struct Setup {
    server: DevServer,
    dir: tempfile::TempDir,
    replica: Replica,
    logs: Logs,
    addr: std::net::SocketAddr,
    flow: Flow,
}

impl Setup {
    async fn server() -> DevServer {
        informant_tests::init_tracing();
        let server = DevServer::start(DevServerConfig::default())
            .await
            .expect("start API server");
        create_namespaces(&server, TENANTS);
        create_namespaces(&server, &["team-e"]);
        server
    }

    /// Starts the replica over `dir` (already holding team-z's steady echo plugin and whatever
    /// else the test put there), then the flow of team-z's events.
    async fn start(
        server: DevServer,
        dir: tempfile::TempDir,
        config: HostConfig,
        config_path: Option<PathBuf>,
    ) -> Setup {
        let logs = broadcast::channel(1 << 16).0;
        let recorded = Logs::record(logs.subscribe());
        let addr = free_addr();
        let replica = Replica::start(
            server.client(),
            RuntimeOptions {
                plugins: Some(dir.path().to_path_buf()),
                admin: Some(addr),
                config,
                config_path,
                plugin_logs: Some(logs),
                ..Default::default()
            },
            None,
        )
        .expect("replica");
        let flow = Flow::start(server.client());
        Setup {
            server,
            dir,
            replica,
            logs: recorded,
            addr,
            flow,
        }
    }

    fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Waits until the reconcile has claimed `informer` (`v1 configmaps in team-a`): it is in
    /// the `init` of the plugin watching it.
    async fn claimed(&self, informer: &str) {
        let series = format!("informant_informer_synced{{informer=\"{informer}\"}}");
        get_until(
            self.addr,
            "/metrics",
            &format!("{informer} claimed"),
            |_, b| b.contains(&series),
        )
        .await;
    }

    /// Waits until `name` of `tenant` runs, with no further change to the directory, then makes
    /// sure it handles an event.
    async fn loads_and_handles(&self, tenant: &str, name: &str) {
        get_until(
            self.addr,
            "/plugins",
            &format!("{tenant}/{name} to load with no further change"),
            |_, b| plugin_entry(b, name)["state"] == "running",
        )
        .await;
        let key = format!("{tenant}/for-{name}");
        self.server
            .create(configmap(tenant, &format!("for-{name}"), "v"))
            .unwrap();
        self.logs
            .wait_until(&format!("{name} to handle {key}"), || {
                self.logs.keys_of(name, name).contains(&key)
            })
            .await;
    }

    /// Stops the flow of team-z's events, checks its plugin saw each, and shuts down.
    async fn finish(self) {
        let sent = self.flow.stop().await;
        assert!(sent > 0, "team-z's events flowed");
        let want: BTreeSet<String> = (0..sent).map(|i| format!("team-z/z{i}")).collect();
        self.logs
            .wait_until("team-z's plugin to see every one of its events", || {
                self.logs.keys_of("steady", "steady").is_superset(&want)
            })
            .await;
        guarded("shutdown", self.replica.shutdown())
            .await
            .expect("shutdown");
        self.server.shutdown().await;
    }
}

/// Another tenant's events, one every 25 ms, while the reconciles under test run.
struct Flow {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<usize>,
}

impl Flow {
    fn start(client: kube::Client) -> Flow {
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let api: Api<ConfigMap> = Api::namespaced(client, "team-z");
            let mut pace = tokio::time::interval(Duration::from_millis(25));
            let mut sent = 0;
            loop {
                tokio::select! {
                    _ = pace.tick() => {}
                    _ = stopped.changed() => return sent,
                }
                let cm = serde_json::from_value(configmap("team-z", &format!("z{sent}"), "v"))
                    .expect("a ConfigMap");
                api.create(&PostParams::default(), &cm)
                    .await
                    .expect("create team-z's ConfigMap");
                sent += 1;
            }
        });
        Flow { stop, task }
    }

    /// How many were sent.
    async fn stop(self) -> usize {
        self.stop.send_replace(true);
        guarded("the flow to stop", self.task)
            .await
            .expect("flow task")
    }
}

/// A plugins directory holding team-z's steady echo plugin.
fn plugins_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    drop_in(dir.path(), "team-z", "steady", &echo("team-z", "steady"));
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_dropped_in_during_the_first_reconcile_load() {
    let server = Setup::server().await;
    let dir = plugins_dir();
    hang_in_init(dir.path(), "team-a", "sleepy", "ConfigMap", 5);
    // Seen alone by the first reconcile; its manifest comes while that reconcile hangs.
    std::fs::create_dir_all(dir.path().join("team-b")).unwrap();
    std::fs::copy(wasm("hostile"), dir.path().join("team-b/half.wasm")).unwrap();
    let text = config_text(TENANTS);
    let s = Setup::start(server, dir, host_config(&text), None).await;

    // The first reconcile is scanning or compiling.
    drop_in(s.dir(), "team-b", "early", &echo("team-b", "early"));
    // It hangs in the sleepy plugins' `init`.
    s.claimed("v1 configmaps in team-a").await;
    drop_in(s.dir(), "team-b", "hanging", &echo("team-b", "hanging"));
    drop_in(s.dir(), "team-c", "newdir", &echo("team-c", "newdir"));
    std::fs::write(s.dir().join("team-b/half.toml"), echo("team-b", "half")).unwrap();

    assert!(guarded("the replica to run", s.replica.wait_running()).await);
    for (tenant, name) in [
        ("team-b", "early"),
        ("team-b", "hanging"),
        ("team-c", "newdir"),
        ("team-b", "half"),
    ] {
        s.loads_and_handles(tenant, name).await;
    }
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_dropped_in_while_a_hot_reload_hangs_in_init_load() {
    let server = Setup::server().await;
    let dir = plugins_dir();
    drop_in(dir.path(), "team-b", "before", &echo("team-b", "before"));
    let text = config_text(TENANTS);
    let s = Setup::start(server, dir, host_config(&text), None).await;
    assert!(guarded("the replica to run", s.replica.wait_running()).await);
    s.loads_and_handles("team-b", "before").await;

    // A hot reload whose new plugins hang in `init`; a half pair waits beside them.
    std::fs::copy(wasm("hostile"), s.dir().join("team-b/half.wasm")).unwrap();
    hang_in_init(s.dir(), "team-a", "slow", "Secret", 5);
    s.claimed("v1 secrets in team-a").await;
    drop_in(s.dir(), "team-b", "hanging", &echo("team-b", "hanging"));
    drop_in(s.dir(), "team-d", "newdir", &echo("team-d", "newdir"));
    std::fs::write(s.dir().join("team-b/half.toml"), echo("team-b", "half")).unwrap();

    for (tenant, name) in [
        ("team-b", "hanging"),
        ("team-d", "newdir"),
        ("team-b", "half"),
    ] {
        s.loads_and_handles(tenant, name).await;
    }
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_dropped_in_during_a_swap_and_right_after_a_reload_load() {
    let server = Setup::server().await;
    let dir = plugins_dir();
    // Sleeps in every event until its deadline: swapping it waits for its event in flight.
    let holder = |tag: &str| manifest("sleep", tag, "team-a", "ServiceAccount", HANG_MS);
    drop_in(dir.path(), "team-a", "holder", &holder("holder"));
    drop_in(
        dir.path(),
        "team-b",
        "reloaded",
        &echo("team-b", "reloaded"),
    );
    let text = config_text(TENANTS);
    let s = Setup::start(server, dir, host_config(&text), None).await;
    assert!(guarded("the replica to run", s.replica.wait_running()).await);
    s.loads_and_handles("team-b", "reloaded").await;

    // The holder is in an event; its replacement waits for that event, unregistered meanwhile.
    s.server
        .create(
            serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "bait", "namespace": "team-a"}}),
        )
        .unwrap();
    let labels = r#"{plugin="holder",tenant="team-a"}"#;
    get_until(s.addr, "/metrics", "the holder in its event", |_, b| {
        b.contains(&format!(
            "informant_plugin_events_received_total{labels} 1\n"
        )) && b.contains(&format!("informant_plugin_backlog{labels} 0\n"))
            && b.contains(&format!("informant_plugin_events_failed_total{labels} 0\n"))
    })
    .await;
    std::fs::write(s.dir().join("team-a/holder.toml"), holder("holder-2")).unwrap();
    get_until(s.addr, "/plugins", "the swap under way", |_, b| {
        plugin_entry(b, "holder").is_null()
    })
    .await;
    drop_in(s.dir(), "team-b", "swapping", &echo("team-b", "swapping"));
    s.loads_and_handles("team-b", "swapping").await;

    // Right after a reload of another plugin: its new version replayed the cache.
    std::fs::write(
        s.dir().join("team-b/reloaded.toml"),
        echo("team-b", "reloaded").replace("tag = \"reloaded\"", "tag = \"reloaded-2\""),
    )
    .unwrap();
    s.logs
        .wait_until("the reloaded plugin's replay", || {
            !s.logs.keys_of("reloaded", "reloaded-2").is_empty()
        })
        .await;
    drop_in(s.dir(), "team-b", "after", &echo("team-b", "after"));
    s.loads_and_handles("team-b", "after").await;
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_dropped_in_while_a_config_reload_reconciles_loads() {
    let server = Setup::server().await;
    let dir = plugins_dir();
    // Refused until the config grants team-e; then they hang in `init`.
    hang_in_init(dir.path(), "team-e", "granted", "ConfigMap", 5);
    let config_dir = tempfile::tempdir().unwrap();
    let path = config_dir.path().join("informant.toml");
    let text = config_text(TENANTS);
    std::fs::write(&path, &text).unwrap();
    let s = Setup::start(server, dir, host_config(&text), Some(path.clone())).await;
    assert!(guarded("the replica to run", s.replica.wait_running()).await);

    let granted = format!("{text}{}", config_text(&["team-e"]));
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, granted).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    s.claimed("v1 configmaps in team-e").await;
    drop_in(
        s.dir(),
        "team-b",
        "during-config",
        &echo("team-b", "during-config"),
    );
    s.loads_and_handles("team-b", "during-config").await;
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_changed_during_the_first_reconcile_applies() {
    let server = Setup::server().await;
    let dir = plugins_dir();
    hang_in_init(dir.path(), "team-a", "sleepy", "ConfigMap", 5);
    // Refused until the config grants team-e.
    drop_in(dir.path(), "team-e", "granted", &echo("team-e", "granted"));
    let config_dir = tempfile::tempdir().unwrap();
    let path = config_dir.path().join("informant.toml");
    let text = config_text(TENANTS);
    std::fs::write(&path, &text).unwrap();
    let s = Setup::start(server, dir, host_config(&text), Some(path.clone())).await;

    s.claimed("v1 configmaps in team-a").await;
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, format!("{text}{}", config_text(&["team-e"]))).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    assert!(guarded("the replica to run", s.replica.wait_running()).await);
    s.loads_and_handles("team-e", "granted").await;
    s.finish().await;
}
