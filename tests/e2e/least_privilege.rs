//! The host run as a least-privilege identity, against the embedded API server enforcing RBAC
//! for it as kube-apiserver would: it may list and watch ConfigMaps and Deployments and nothing
//! else. A wildcard plugin watches exactly what it may and reports the rest once; plugins
//! naming permitted kinds load and handle events without waiting for anyone; a plugin naming
//! a refused kind waits visibly while the API server sees no storm of LISTs; `/readyz` is 200
//! once the plugins run, and not before.

use std::time::Instant;

use informant_devserver::{DevServer, DevServerConfig};
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_runtime::runtime::{Runtime, RuntimeOptions};
use informant_tests::host_log::HostLog;
use informant_tests::http::{free_addr, get, get_until};
use informant_tests::plugins::{Logs, fast_restarts};
use informant_tests::rbac::{HOST, echo, reader_rules, rule};
use informant_tests::{configmap, create_namespaces, guarded};
use serde_json::{Value, json};

fn deployment(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
}

/// One plugin's entry in `/plugins`.
async fn plugin(addr: std::net::SocketAddr, name: &str) -> Value {
    let (status, _, body) = get(addr, "/plugins").await;
    assert_eq!(status, 200, "{body}");
    let all: Value = serde_json::from_str(&body).unwrap();
    all["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}

/// LISTs the server refused the host so far, as `resource` each.
fn refused_lists(server: &DevServer) -> Vec<String> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.user.as_deref() == Some(HOST) && r.verb == "list" && !r.allowed)
        .map(|r| r.resource)
        .collect()
}

/// Host warnings about what it may not read.
fn forbidden_warnings(log: &HostLog) -> Vec<String> {
    log.lines("")
        .into_iter()
        .filter(|l| l.level == tracing::Level::WARN)
        .map(|l| format!("{} {:?}", l.message, l.fields))
        .filter(|l| {
            let l = l.to_lowercase();
            l.contains("forbidden") || l.contains("rbac") || l.contains("permitted")
        })
        .collect()
}

/// A wildcard plugin beside two named-kind plugins, under an identity that may read only
/// ConfigMaps and Deployments. The wildcard plugin sorts first: loading plugins one after
/// another, waiting for each one's informers, would hold the other two behind it.
#[tokio::test]
async fn a_least_privilege_host_watches_what_it_may_and_is_ready_when_its_plugins_run() {
    let (log, _guard) = HostLog::capture();
    let server = DevServer::start(DevServerConfig::default())
        .await
        .expect("start API server");
    create_namespaces(&server, &["team-a"]);
    server.restrict(HOST, reader_rules());
    let dir = tempfile::tempdir().unwrap();
    echo(dir.path(), "all-kinds", "*", "*");
    echo(dir.path(), "cms", "v1", "ConfigMap");
    echo(dir.path(), "deps", "apps/v1", "Deployment");
    let addr = free_addr();
    let plugin_logs = tokio::sync::broadcast::channel(4096).0;
    let logs = Logs::record(plugin_logs.subscribe());

    let started = Instant::now();
    let client = server.client_as(HOST);
    let options = RuntimeOptions {
        plugins: Some(dir.path().to_path_buf()),
        admin: Some(addr),
        plugin_logs: Some(plugin_logs),
        config: HostConfig {
            restart: fast_restarts(),
            ..Default::default()
        },
        ..Default::default()
    };
    let runtime = tokio::spawn(async move { Runtime::start(client, options).await });

    // Never ready before the plugins run: at the first 200, all three are loaded.
    get_until(addr, "/readyz", "ready", |s, _| s == 200).await;
    let ready_after = started.elapsed();
    for name in ["all-kinds", "cms", "deps"] {
        let p = plugin(addr, name).await;
        assert_eq!(p["state"], "running", "{name} at the first ready: {p}");
    }
    let runtime = guarded("the runtime to start", runtime)
        .await
        .unwrap()
        .expect("runtime starts");

    server
        .create(configmap("team-a", "after-ready", "1"))
        .unwrap();
    server.create(deployment("team-a", "web")).unwrap();
    logs.wait_until("each plugin to handle its new object", || {
        logs.keys_of("cms", "cms").contains("team-a/after-ready")
            && logs.keys_of("deps", "deps").contains("team-a/web")
            && logs
                .keys_of("all-kinds", "all-kinds")
                .contains("team-a/after-ready")
            && logs
                .keys_of("all-kinds", "all-kinds")
                .contains("team-a/web")
    })
    .await;
    let handled_after = started.elapsed();
    eprintln!(
        "least privilege: /readyz 200 after {ready_after:?}; a new ConfigMap and Deployment handled by every plugin after {handled_after:?} from start"
    );

    // The wildcard watches exactly the readable kinds, and says which it leaves out.
    let every = plugin(addr, "all-kinds").await;
    assert_eq!(
        every["expanded"],
        json!(["apps/v1/Deployment", "v1/ConfigMap"]),
        "{every}"
    );
    let left_out: Vec<&str> = every["not-permitted"]
        .as_array()
        .unwrap_or_else(|| panic!("no not-permitted in {every}"))
        .iter()
        .filter_map(|n| n["resource"].as_str())
        .collect();
    for kind in ["v1/Secret", "v1/Namespace", "v1/Pod", "apps/v1/StatefulSet"] {
        assert!(left_out.contains(&kind), "{kind} not in {left_out:?}");
    }
    let secret = every["not-permitted"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["resource"] == "v1/Secret")
        .unwrap();
    assert!(
        secret["reason"]
            .as_str()
            .unwrap()
            .contains("the host may not list secrets at the cluster scope"),
        "{secret}"
    );

    // Not a storm: kinds left out are never listed, and what is refused is said once.
    let refused = refused_lists(&server);
    let warnings = forbidden_warnings(&log);
    eprintln!(
        "least privilege: {} refused LISTs and {} warnings about refusals in {:?}: {refused:?}",
        refused.len(),
        warnings.len(),
        started.elapsed()
    );
    assert!(
        !refused.iter().any(|r| r == "secrets" || r == "pods"),
        "a kind left out was listed: {refused:?}"
    );
    assert!(refused.len() <= 2, "{refused:?}");
    assert!(warnings.len() < 5, "{warnings:#?}");
    let left_out_said = log
        .lines("wildcard watch leaves out kinds")
        .into_iter()
        .filter(|l| l.field("plugin") == "all-kinds")
        .count();
    assert_eq!(left_out_said, 1, "{warnings:#?}");

    // RBAC granted later: the next re-discovery watches the kind.
    let mut wider = reader_rules();
    wider.push(rule(&["get", "list", "watch"], "secrets"));
    server.restrict(HOST, wider);
    server
        .create(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "team-a"}, "data": {}}))
        .unwrap();
    let host = runtime.host.clone().expect("a plugin host");
    guarded("a re-discovery", host.rediscover())
        .await
        .expect("re-discovery");
    logs.wait_until("the wildcard plugin to see the Secret", || {
        logs.keys_of("all-kinds", "all-kinds").contains("team-a/s")
    })
    .await;
    let every = plugin(addr, "all-kinds").await;
    assert!(
        every["expanded"]
            .as_array()
            .unwrap()
            .contains(&json!("v1/Secret")),
        "{every}"
    );
    assert!(
        !every["not-permitted"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["resource"] == "v1/Secret"),
        "{every}"
    );
    let said = log
        .lines("wildcard watch leaves out kinds")
        .into_iter()
        .filter(|l| l.field("plugin") == "all-kinds")
        .count();
    assert_eq!(said, 2, "the change is said once more");

    runtime.stop().await;
    server.shutdown().await;
}

/// A plugin naming a kind the host may not list: it waits, saying why, while the other plugin
/// handles its events and the process is ready; the refused list is not retried in a loop.
#[tokio::test]
async fn a_named_kind_the_host_may_not_list_waits_visibly_without_a_storm() {
    let (log, _guard) = HostLog::capture();
    let server = DevServer::start(DevServerConfig::default())
        .await
        .expect("start API server");
    create_namespaces(&server, &["team-a"]);
    server.restrict(HOST, reader_rules());
    let dir = tempfile::tempdir().unwrap();
    echo(dir.path(), "cms", "v1", "ConfigMap");
    echo(dir.path(), "secrets", "v1", "Secret");
    let addr = free_addr();
    let plugin_logs = tokio::sync::broadcast::channel(4096).0;
    let logs = Logs::record(plugin_logs.subscribe());
    let runtime = guarded(
        "the runtime to start",
        Runtime::start(
            server.client_as(HOST),
            RuntimeOptions {
                plugins: Some(dir.path().to_path_buf()),
                admin: Some(addr),
                plugin_logs: Some(plugin_logs),
                config: HostConfig {
                    restart: fast_restarts(),
                    ..Default::default()
                },
                ..Default::default()
            },
        ),
    )
    .await
    .expect("runtime starts");

    let body = get_until(addr, "/readyz", "ready with a refused kind", |s, _| {
        s == 200
    })
    .await;
    assert!(body.contains("forbidden"), "the refusal is noted: {body}");
    let waiting = plugin(addr, "secrets").await;
    assert_eq!(waiting["state"], "waiting", "{waiting}");
    assert_eq!(waiting["waiting"]["for"], "forbidden", "{waiting}");
    let reason = waiting["waiting"]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("forbidden: secrets is forbidden: User \"system:serviceaccount:informant:informant\" cannot list resource \"secrets\""),
        "{reason}"
    );

    for i in 0..5 {
        server
            .create(configmap("team-a", &format!("cm-{i}"), "1"))
            .unwrap();
    }
    logs.wait_until("the other plugin to handle its events", || {
        (0..5).all(|i| {
            logs.keys_of("cms", "cms")
                .contains(&format!("team-a/cm-{i}"))
        })
    })
    .await;

    let refused = refused_lists(&server);
    let warnings = forbidden_warnings(&log);
    eprintln!(
        "named refused kind: {} refused LISTs, {} warnings: {warnings:#?}",
        refused.len(),
        warnings.len()
    );
    assert!(
        refused.iter().filter(|r| *r == "secrets").count() <= 1,
        "{refused:?}"
    );
    let said = warnings.iter().filter(|w| w.contains("secrets")).count();
    assert_eq!(said, 1, "{warnings:#?}");

    runtime.stop().await;
    server.shutdown().await;
}
