//! Refusals that heal by themselves, through the whole startup path: a plugin watching a kind
//! whose CRD is not installed yet waits (shown in `/plugins` and `/readyz`, logged once) and
//! loads when the CRD is created, with no file touched; a host started before its API server
//! loads its plugins once the server is up, and never stops meanwhile; a `--watch` of a kind
//! not served yet does not end the runtime, and its events are logged once it is served.

use std::path::Path;

use informant_devserver::{DevServer, DevServerConfig};
use informant_runtime::runtime::{Replica, ReplicaState, Runtime, RuntimeOptions};
use informant_tests::host_log::HostLog;
use informant_tests::http::{free_addr, get, get_until};
use informant_tests::plugins::{Logs, wasm};
use informant_tests::{configmap, guarded, plugin_entry};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tokio::sync::broadcast;

/// The hostile test plugin echoing every event of `api_version`/`kind`.
fn echo(dir: &Path, name: &str, api_version: &str, kind: &str) {
    let manifest = format!(
        "[[watch]]\napi-version = \"{api_version}\"\nkind = \"{kind}\"\n[config]\nmode = \"echo\"\ntag = \"{name}\"\n"
    );
    // Manifest first: the reloader must never see the component without it.
    std::fs::write(dir.join(format!("{name}.toml")), manifest).unwrap();
    std::fs::copy(wasm("hostile"), dir.join(format!("{name}.wasm"))).unwrap();
}

/// Creates the CRD of `kind` (plural `{kind}s`, lowercase) in group `example.com` through the
/// API server's HTTP API, as `kubectl apply` would.
async fn create_crd(client: kube::Client, kind: &str) {
    let plural = format!("{}s", kind.to_lowercase());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.com")},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(client)
        .create(&PostParams::default(), &crd)
        .await
        .expect("create the CRD");
}

/// Keys the echo plugin `name` saw added.
fn added(logs: &Logs, name: &str) -> Vec<String> {
    logs.json_of(name)
        .into_iter()
        .filter(|l| l["type"] == "added")
        .filter_map(|l| l["key"].as_str().map(str::to_string))
        .collect()
}

fn replica(client: kube::Client, dir: &Path, admin: std::net::SocketAddr) -> (Replica, Logs) {
    let logs = broadcast::channel(1 << 12).0;
    let recorded = Logs::record(logs.subscribe());
    let replica = Replica::start(
        client,
        RuntimeOptions {
            plugins: Some(dir.to_path_buf()),
            admin: Some(admin),
            plugin_logs: Some(logs),
            ..Default::default()
        },
        None,
    )
    .expect("replica");
    (replica, recorded)
}

/// Current-thread: the host log capture sees every task.
#[tokio::test]
async fn a_plugin_waiting_for_its_crd_loads_when_the_crd_is_created() {
    let (host_log, _capture) = HostLog::capture();
    let server = DevServer::start(DevServerConfig::default())
        .await
        .expect("start API server");
    let dir = tempfile::tempdir().unwrap();
    echo(dir.path(), "widgets", "example.com/v1", "Widget");
    echo(dir.path(), "configmaps", "v1", "ConfigMap");
    let addr = free_addr();
    let (replica, logs) = replica(server.client(), dir.path(), addr);
    assert!(guarded("the replica to run", replica.wait_running()).await);

    // Waiting, retried (several attempts), and ready all the same: the other plugin works.
    let plugins = get_until(addr, "/plugins", "the plugin retried twice", |_, b| {
        plugin_entry(b, "widgets")["waiting"]["attempts"]
            .as_u64()
            .is_some_and(|n| n >= 3)
    })
    .await;
    let widgets = plugin_entry(&plugins, "widgets");
    assert_eq!(widgets["state"], "waiting", "{widgets}");
    assert_eq!(widgets["waiting"]["for"], "kind", "{widgets}");
    assert_eq!(widgets["waiting"]["kind"], "Widget", "{widgets}");
    assert!(
        widgets["waiting"]["reason"]
            .as_str()
            .unwrap()
            .contains("example.com/v1"),
        "{widgets}"
    );
    assert_eq!(plugin_entry(&plugins, "configmaps")["state"], "running");
    let (status, _, body) = get(addr, "/readyz").await;
    assert_eq!(
        status, 200,
        "a plugin waiting for a kind does not make the host unready: {body}"
    );
    assert!(
        body.starts_with("ok\n") && body.contains("plugin `widgets` waits for kind `Widget`"),
        "{body}"
    );
    let (_, _, metrics) = get(addr, "/metrics").await;
    assert!(
        metrics.contains(
            "informant_plugin_waiting_attempts{plugin=\"widgets\",tenant=\"\",waiting_for=\"example.com/v1/Widget\"} "
        ),
        "{metrics}"
    );
    // Logged once, not once per attempt.
    let waiting = |name: &str| {
        host_log
            .lines("plugin waiting")
            .into_iter()
            .filter(|l| l.field("plugin") == name)
            .count()
    };
    assert_eq!(waiting("widgets"), 1);

    // The CRD appears: the plugin loads and sees a widget, no file touched.
    create_crd(server.client(), "Widget").await;
    server
        .create(json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w1", "namespace": "default"}}))
        .unwrap();
    logs.wait_until("the widget's Added event", || {
        added(&logs, "widgets").contains(&"default/w1".to_string())
    })
    .await;
    let plugins = get_until(addr, "/plugins", "the plugin running", |_, b| {
        plugin_entry(b, "widgets")["state"] == "running"
    })
    .await;
    assert_eq!(plugin_entry(&plugins, "widgets")["waiting"], Value::Null);
    let (status, _, body) = get(addr, "/readyz").await;
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    assert_eq!(waiting("widgets"), 1, "waiting was logged once in all");
    let loaded = host_log.lines("plugin loaded");
    assert_eq!(
        loaded
            .iter()
            .filter(|l| l.field("plugin") == "widgets")
            .count(),
        1,
        "{loaded:?}"
    );
    assert!(
        host_log.lines("plugin not loaded").is_empty(),
        "a wait is not an error"
    );

    guarded("a clean shutdown", replica.shutdown())
        .await
        .expect("shutdown");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_started_before_its_api_server_loads_its_plugins_once_it_is_up() {
    informant_tests::init_tracing();
    let dir = tempfile::tempdir().unwrap();
    echo(dir.path(), "configmaps", "v1", "ConfigMap");
    // Nothing listens there yet.
    let api = free_addr();
    let client =
        kube::Client::try_from(kube::Config::new(format!("http://{api}").parse().unwrap()))
            .unwrap();
    let admin = free_addr();
    let (replica, logs) = replica(client, dir.path(), admin);
    let mut state = replica.state();

    // It starts, and says what it waits for; unready meanwhile, since it cannot work.
    let plugins = get_until(admin, "/plugins", "the plugin waiting", |_, b| {
        plugin_entry(b, "configmaps")["state"] == "waiting"
    })
    .await;
    assert_eq!(
        plugin_entry(&plugins, "configmaps")["waiting"]["for"],
        "api-server",
        "{plugins}"
    );
    let body = get_until(admin, "/readyz", "unready naming the wait", |s, b| {
        s == 503 && b.contains("plugin `configmaps` waits for the API server")
    })
    .await;
    assert!(body.contains("discovery"), "{body}");
    assert!(guarded("the replica to run", replica.wait_running()).await);

    let server = DevServer::start(DevServerConfig {
        listen: api,
        ..Default::default()
    })
    .await
    .expect("start the API server on the reserved address");
    server.create(configmap("default", "c1", "v")).unwrap();
    logs.wait_until("the ConfigMap's Added event", || {
        added(&logs, "configmaps").contains(&"default/c1".to_string())
    })
    .await;
    get_until(admin, "/readyz", "ready once loaded", |s, b| {
        s == 200 && b == "ok\n"
    })
    .await;
    assert_eq!(
        *state.borrow_and_update(),
        ReplicaState::Running,
        "the replica never stopped"
    );
    assert!(!state.has_changed().unwrap());

    guarded("a clean shutdown", replica.shutdown())
        .await
        .expect("shutdown");
    server.shutdown().await;
}

/// Current-thread: the host log capture sees every task.
#[tokio::test]
async fn a_watch_of_a_kind_not_served_yet_waits_then_logs_its_events() {
    let (host_log, _capture) = HostLog::capture();
    let server = DevServer::start(DevServerConfig::default())
        .await
        .expect("start API server");
    let runtime = guarded(
        "the runtime to start",
        Runtime::start(
            server.client(),
            RuntimeOptions {
                watches: vec!["example.com/v1/Gadget".into(), "v1/ConfigMap".into()],
                ..Default::default()
            },
        ),
    )
    .await
    .expect("a kind not served yet does not stop the runtime");
    let waits = host_log.lines("--watch waits");
    assert_eq!(waits.len(), 1, "{waits:?}");
    assert_eq!(waits[0].field("watch"), "example.com/v1/Gadget");

    create_crd(server.client(), "Gadget").await;
    server
        .create(json!({"apiVersion": "example.com/v1", "kind": "Gadget",
            "metadata": {"name": "g1", "namespace": "default"}}))
        .unwrap();
    let event = host_log
        .wait_for("the gadget's event", |l| {
            l.message == "event" && l.field("resource") == "example.com/v1/Gadget"
        })
        .await;
    assert_eq!(event.field("key"), "default/g1");
    assert_eq!(event.field("event"), "Added");
    assert_eq!(
        host_log.lines("--watch waits").len(),
        1,
        "waiting was logged once"
    );

    guarded("the runtime to stop", runtime.stop()).await;
    server.shutdown().await;
}
