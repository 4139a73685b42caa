//! The execution core under a hostile tenant, through the whole startup path (`Replica`, as
//! `informant run` starts it): a plugin blocked in a host call (a WASI sleep, not wasm code)
//! fails at its deadline like a spinning one, and while it is blocked on several watches at
//! once, another tenant's plugin gets every event, `/healthz` answers, a new plugin of a third
//! tenant loads, and shutdown ends within the largest deadline plus a second. A plugin that
//! hangs in `init` is refused at its deadline, and one dropped in during that slow reconcile
//! loads with no further change.

use std::path::Path;
use std::time::{Duration, Instant};

use informant_devserver::{DevServer, DevServerConfig};
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_runtime::runtime::{Replica, RuntimeOptions};
use informant_tests::http::{free_addr, get, get_until};
use informant_tests::plugins::{Logs, never_quarantined, wasm};
use informant_tests::{configmap, create_namespaces, guarded, plugin_entry};
use serde_json::{Value, json};
use tokio::sync::broadcast;

const DEADLINE_MS: u64 = 500;

/// Tenants `team-a`, `team-b`, `team-c`, each granted its own namespace; failures never
/// quarantine (so the sleeper stays busy) and restart at once.
fn config() -> HostConfig {
    let text = r#"
[tenants.team-a]
namespaces = ["team-a"]
[tenants.team-b]
namespaces = ["team-b"]
[tenants.team-c]
namespaces = ["team-c"]
"#;
    let mut config =
        informant_runtime::config::parse(text, Path::new("informant.toml")).expect("config");
    config.restart = never_quarantined();
    config
}

/// A manifest for the hostile plugin in `mode`, watching `kinds` in `namespace`.
fn manifest(mode: &str, tag: &str, namespace: &str, kinds: &[(&str, &str)]) -> String {
    let mut m = format!("[limits]\ndeadline-ms = {DEADLINE_MS}\nmemory-mib = 16\n");
    for (api_version, kind) in kinds {
        m.push_str(&format!(
            "[[watch]]\napi-version = \"{api_version}\"\nkind = \"{kind}\"\nnamespace = \"{namespace}\"\n"
        ));
    }
    m.push_str(&format!("[config]\nmode = \"{mode}\"\ntag = \"{tag}\"\n"));
    m
}

fn install(dir: &Path, tenant: &str, name: &str, manifest: &str) {
    let dir = dir.join(tenant);
    std::fs::create_dir_all(&dir).unwrap();
    // Manifest first: the reloader must never see the component without it.
    std::fs::write(dir.join(format!("{name}.toml")), manifest).unwrap();
    std::fs::copy(wasm("hostile"), dir.join(format!("{name}.wasm"))).unwrap();
}

fn object(kind: &str, ns: &str, name: &str) -> Value {
    match kind {
        "ConfigMap" => configmap(ns, name, "v"),
        "Secret" => json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": ns}, "data": {"k": "dg=="}}),
        _ => json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": ns}}),
    }
}

/// Keys echoed by the plugins tagged `tag`.
fn echoed(logs: &Logs, plugin: &str, tag: &str) -> Vec<String> {
    logs.json_of(plugin)
        .into_iter()
        .filter(|l| l["tag"] == tag)
        .filter_map(|l| l["key"].as_str().map(str::to_string))
        .collect()
}

async fn start(dir: &Path, server: &DevServer) -> (Replica, Logs, std::net::SocketAddr) {
    let logs = broadcast::channel(1 << 16).0;
    let recorded = Logs::record(logs.subscribe());
    let addr = free_addr();
    let replica = Replica::start(
        server.client(),
        RuntimeOptions {
            plugins: Some(dir.to_path_buf()),
            admin: Some(addr),
            config: config(),
            plugin_logs: Some(logs),
            ..Default::default()
        },
        None,
    )
    .expect("replica");
    (replica, recorded, addr)
}

async fn server() -> DevServer {
    informant_tests::init_tracing();
    let server = DevServer::start(DevServerConfig::default())
        .await
        .expect("start API server");
    create_namespaces(&server, &["team-a", "team-b", "team-c"]);
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_blocked_in_a_host_call_fails_at_its_deadline_and_holds_up_nobody() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    let kinds = [
        ("v1", "ConfigMap"),
        ("v1", "Secret"),
        ("v1", "ServiceAccount"),
    ];
    install(
        dir.path(),
        "team-a",
        "sleeper",
        &manifest("sleep", "a", "team-a", &kinds),
    );
    install(
        dir.path(),
        "team-b",
        "echo",
        &manifest("echo", "b", "team-b", &kinds[..1]),
    );
    let (replica, logs, addr) = start(dir.path(), &server).await;
    assert!(guarded("the replica to run", replica.wait_running()).await);

    // The sleeper gets one event on each of its three watches: three listeners waiting on it.
    for (_, kind) in kinds {
        server.create(object(kind, "team-a", "bait")).unwrap();
    }
    let plugins = get_until(
        addr,
        "/plugins",
        "the sleeper to miss its deadline",
        |_, b| plugin_entry(b, "sleeper")["failed"].as_u64() >= Some(1),
    )
    .await;
    let sleeper = plugin_entry(&plugins, "sleeper");
    let error = sleeper["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!("missed its {DEADLINE_MS}ms deadline")),
        "{sleeper}"
    );

    // Meanwhile, another tenant's plugin receives every event.
    const N: usize = 50;
    for i in 0..N {
        server
            .create(configmap("team-b", &format!("b{i}"), "v"))
            .unwrap();
    }
    logs.wait_until("team-b's plugin to echo every event", || {
        (0..N).all(|i| echoed(&logs, "echo", "b").contains(&format!("team-b/b{i}")))
    })
    .await;
    let (status, _, body) = get(addr, "/healthz").await;
    assert_eq!((status, body.as_str()), (200, "ok\n"));

    // A new plugin of a third tenant loads (hot reload) and gets its events.
    install(
        dir.path(),
        "team-c",
        "late",
        &manifest("echo", "c", "team-c", &kinds[..1]),
    );
    get_until(addr, "/plugins", "team-c's plugin to load", |_, b| {
        plugin_entry(b, "late")["state"] == "running"
    })
    .await;
    server.create(configmap("team-c", "c0", "v")).unwrap();
    logs.wait_until("team-c's plugin to echo its event", || {
        echoed(&logs, "late", "c").contains(&"team-c/c0".to_string())
    })
    .await;

    // Keep the sleeper blocked (each failure restarts it on the next event), then shut down.
    for i in 0..3 {
        server
            .create(object("Secret", "team-a", &format!("more{i}")))
            .unwrap();
    }
    let started = Instant::now();
    guarded("shutdown", replica.shutdown())
        .await
        .expect("shutdown");
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(DEADLINE_MS) + Duration::from_secs(1),
        "shutdown took {took:?} with a plugin blocked in a host call"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_hanging_in_init_is_refused_at_its_deadline_and_one_dropped_in_meanwhile_loads() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    let cms = [("v1", "ConfigMap")];
    install(
        dir.path(),
        "team-b",
        "echo",
        &manifest("echo", "b", "team-b", &cms),
    );
    // A plugin whose init sleeps makes the very first reconcile slow.
    let sleepy = manifest("sleep-init", "a", "team-a", &cms).replace(
        &format!("deadline-ms = {DEADLINE_MS}"),
        "deadline-ms = 3000",
    );
    install(dir.path(), "team-a", "sleepy", &sleepy);
    let (replica, logs, addr) = start(dir.path(), &server).await;

    // Its informer is claimed: the reconcile is in the sleepy plugin's init. Drop another in.
    get_until(addr, "/metrics", "the sleepy plugin's informer", |_, b| {
        b.contains(r#"informant_informer_synced{informer="v1 configmaps in team-a"}"#)
    })
    .await;
    install(
        dir.path(),
        "team-c",
        "late",
        &manifest("echo", "c", "team-c", &cms),
    );

    assert!(guarded("the replica to run", replica.wait_running()).await);
    let body = get_until(addr, "/readyz", "the sleepy plugin refused", |_, b| {
        b.contains("plugin `team-a/sleepy` is on disk but not loaded")
    })
    .await;
    assert!(
        body.contains("init") && body.contains("missed its 3s deadline"),
        "{body}"
    );
    // Loaded by the reconcile after the slow one, with no further change.
    get_until(
        addr,
        "/plugins",
        "the plugin dropped in meanwhile to load",
        |_, b| plugin_entry(b, "late")["state"] == "running",
    )
    .await;
    server.create(configmap("team-c", "c0", "v")).unwrap();
    server.create(configmap("team-b", "b0", "v")).unwrap();
    logs.wait_until("both well-behaved plugins to echo", || {
        echoed(&logs, "late", "c").contains(&"team-c/c0".to_string())
            && echoed(&logs, "echo", "b").contains(&"team-b/b0".to_string())
    })
    .await;
    guarded("shutdown", replica.shutdown())
        .await
        .expect("shutdown");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_event_of_a_batch_has_its_own_deadline_and_one_stuck_event_loses_none_after_it() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    let kinds = [("v1", "ConfigMap")];
    // Each event naps 300 ms of its 500 ms deadline: a batch of several takes far longer than
    // one deadline, and must not fail for it.
    install(
        dir.path(),
        "team-a",
        "napper",
        &manifest("nap", "a", "team-a", &kinds),
    );
    let (replica, logs, addr) = start(dir.path(), &server).await;
    assert!(guarded("the replica to run", replica.wait_running()).await);

    // While the first nap runs, the rest queue up and go to the plugin in one call; the stuck
    // object in the middle misses its deadline there.
    let names: Vec<String> = (0..4)
        .map(|i| format!("n{i}"))
        .chain(["stuck-1".to_string()])
        .chain((4..8).map(|i| format!("n{i}")))
        .collect();
    for name in &names {
        server.create(configmap("team-a", name, "v")).unwrap();
    }
    let want: Vec<String> = names
        .iter()
        .filter(|n| !n.starts_with("stuck-"))
        .map(|n| format!("team-a/{n}"))
        .collect();
    logs.wait_until("the napper to echo every object but the stuck one", || {
        let echoed = echoed(&logs, "napper", "a");
        want.iter().all(|k| echoed.contains(k))
    })
    .await;
    let echoed = echoed(&logs, "napper", "a");
    assert_eq!(
        echoed, want,
        "in order, each once, none after the stuck one lost"
    );
    // The last echo is logged just before its outcome is reported.
    let plugins = get_until(
        addr,
        "/plugins",
        "the napper to report 8 handled",
        |_, b| plugin_entry(b, "napper")["handled"] == 8,
    )
    .await;
    let napper = plugin_entry(&plugins, "napper");
    assert_eq!(napper["failed"], 1, "only the stuck event failed: {napper}");
    let error = napper["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("team-a/stuck-1") && error.contains("deadline"),
        "{napper}"
    );
    guarded("shutdown", replica.shutdown())
        .await
        .expect("shutdown");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_taking_events_out_of_turn_gets_each_counted_once_and_holds_up_nobody() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    let kinds = [("v1", "ConfigMap")];
    // In every event it asks `events.next` for the next one without reporting the one in hand.
    install(
        dir.path(),
        "team-a",
        "grabber",
        &manifest("grab", "a", "team-a", &kinds),
    );
    install(
        dir.path(),
        "team-b",
        "echo",
        &manifest("echo", "b", "team-b", &kinds),
    );
    let (replica, logs, addr) = start(dir.path(), &server).await;
    assert!(guarded("the replica to run", replica.wait_running()).await);

    const N: usize = 40;
    for i in 0..N {
        server
            .create(configmap("team-a", &format!("a{i}"), "v"))
            .unwrap();
        server
            .create(configmap("team-b", &format!("b{i}"), "v"))
            .unwrap();
    }
    // Every event of the grabber ends exactly once: failed when it asked for the next one
    // without reporting it, handled when the report it made landed on it.
    let plugins = get_until(
        addr,
        "/plugins",
        "the grabber to settle every event",
        |_, b| {
            let g = plugin_entry(b, "grabber");
            g["handled"].as_u64().unwrap_or(0) + g["failed"].as_u64().unwrap_or(0) >= N as u64
        },
    )
    .await;
    let grabber = plugin_entry(&plugins, "grabber");
    let (handled, failed) = (
        grabber["handled"].as_u64().unwrap(),
        grabber["failed"].as_u64().unwrap(),
    );
    assert_eq!(handled + failed, N as u64, "each counted once: {grabber}");
    assert!(failed >= 1, "{grabber}");
    assert!(
        grabber["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("without reporting how this one ended"),
        "{grabber}"
    );
    assert_eq!(
        grabber["state"], "running",
        "a guest error, not a trap: {grabber}"
    );
    // The other tenant got every one of its events meanwhile.
    logs.wait_until("team-b's plugin to echo every event", || {
        let echoed = echoed(&logs, "echo", "b");
        (0..N).all(|i| echoed.contains(&format!("team-b/b{i}")))
    })
    .await;
    guarded("shutdown", replica.shutdown())
        .await
        .expect("shutdown");
    server.shutdown().await;
}
