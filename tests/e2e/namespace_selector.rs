//! `namespace-selector` over the real pipeline: namespaces labelled and unlabelled on the
//! embedded API server, a real compiled plugin echoing what it is delivered, a tenant's grant
//! bounding what a selector matches, a host that may not list namespaces.

use std::path::Path;

use informant_devserver::{DevServer, DevServerConfig};
use informant_runtime::config;
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_runtime::runtime::{Runtime, RuntimeOptions};
use informant_tests::http::{free_addr, get, get_until};
use informant_tests::plugins::{Logs, PluginEnv, fast_restarts, wasm};
use informant_tests::rbac::{HOST, reader_rules, rule};
use informant_tests::{configmap, guarded};
use serde_json::{Value, json};

fn namespace(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

fn echo(selector: &str) -> String {
    format!(
        "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace-selector = \"{selector}\"\n[config]\nmode = \"echo\"\ntag = \"sel\"\n"
    )
}

/// `(type, key, initial)` of what `plugin` was delivered, in order.
fn seen(env: &PluginEnv, plugin: &str) -> Vec<(String, String, bool)> {
    env.logs
        .json_of(plugin)
        .iter()
        .map(|v| {
            (
                v["type"].as_str().unwrap_or_default().to_string(),
                v["key"].as_str().unwrap_or_default().to_string(),
                v["initial"].as_bool().unwrap_or_default(),
            )
        })
        .collect()
}

/// Replaces the namespace's labels (an unconditional update).
fn relabel(env: &PluginEnv, name: &str, labels: Value) {
    env.server
        .update(namespace(name, labels))
        .expect("relabelled");
}

/// Waits until `p` was delivered exactly `want`, in order.
async fn wait(env: &PluginEnv, what: &str, want: &[(&str, &str, bool)]) {
    let want: Vec<_> = want
        .iter()
        .map(|(t, k, i)| (t.to_string(), k.to_string(), *i))
        .collect();
    env.logs.wait_until(what, || seen(env, "p") == want).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_gaining_the_label_brings_its_objects_in_and_losing_it_deletes_them() {
    let env = PluginEnv::start(HostConfig::default()).await;
    env.server
        .create(namespace("a", json!({"team": "a"})))
        .unwrap();
    env.server
        .create(namespace("b", json!({"team": "b"})))
        .unwrap();
    env.server
        .create(namespace("prod", json!({"team": "a", "env": "prod"})))
        .unwrap();
    for ns in ["a", "b", "prod"] {
        env.server.create(configmap(ns, "cm", "v")).unwrap();
    }
    env.install(None, "p", "hostile", &echo("team=a,env!=prod"));
    // A selector that does not parse: refused at load, naming the file, field and reason.
    env.install(None, "bad", "hostile", &echo("team in (a"));
    let report = env.reconcile().await;
    assert_eq!(report.loaded.len(), 1, "{:?}", report.errors);
    let (_, e) = &report.errors[0];
    let text = format!("{e}: {:?}", std::error::Error::source(e));
    assert!(
        text.contains("bad.toml")
            && text.contains("namespace-selector")
            && text.contains("team in (a"),
        "{text}"
    );

    // Only `a`'s object: `b` does not match, `prod` is excluded by `env!=prod`.
    wait(&env, "a's object, initial", &[("added", "a/cm", true)]).await;

    // `b` gains the label: its object comes in as added.
    relabel(&env, "b", json!({"team": "a"}));
    wait(
        &env,
        "b's object added",
        &[("added", "a/cm", true), ("added", "b/cm", false)],
    )
    .await;

    // `a` loses it: its object goes as deleted.
    relabel(&env, "a", json!({"team": "x"}));
    wait(
        &env,
        "a's object deleted",
        &[
            ("added", "a/cm", true),
            ("added", "b/cm", false),
            ("deleted", "a/cm", false),
        ],
    )
    .await;
    // Then nothing of `a` arrives, while `b`'s objects do (the last one created is a barrier:
    // one informer's events reach the plugin in order).
    env.server.create(configmap("a", "late", "v")).unwrap();
    env.server.create(configmap("prod", "late", "v")).unwrap();
    env.server.create(configmap("b", "late", "v")).unwrap();
    wait(
        &env,
        "a's object deleted, b's new one added",
        &[
            ("added", "a/cm", true),
            ("added", "b/cm", false),
            ("deleted", "a/cm", false),
            ("added", "b/late", false),
        ],
    )
    .await;
}

const TENANTS: &str = r#"
operator-plugins = true
[tenants.a]
namespaces = ["team-a*"]
resources = ["v1/ConfigMap"]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_grant_bounds_what_its_selector_matches() {
    let config = config::parse(TENANTS, Path::new("informant.toml")).expect("valid config");
    let env = PluginEnv::start(config).await;
    for ns in ["team-a1", "team-b1", "team-a2"] {
        env.server
            .create(namespace(ns, json!({"selected": "yes"})))
            .unwrap();
        env.server.create(configmap(ns, "cm", "v")).unwrap();
    }
    env.install(Some("a"), "p", "hostile", &echo("selected=yes"));
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    env.logs
        .wait_until("team-a1 and team-a2's objects", || {
            seen(&env, "p").len() == 2
        })
        .await;
    // New namespaces matching the selector, outside the grant and inside it: only the granted
    // one's objects arrive.
    env.server
        .create(namespace("team-b2", json!({"selected": "yes"})))
        .unwrap();
    env.server.create(configmap("team-b2", "cm", "v")).unwrap();
    env.server
        .create(configmap("team-b1", "more", "v"))
        .unwrap();
    env.server
        .create(namespace("team-a3", json!({"selected": "yes"})))
        .unwrap();
    env.server.create(configmap("team-a3", "cm", "v")).unwrap();
    env.logs
        .wait_until("team-a3's object", || seen(&env, "p").len() == 3)
        .await;
    let mut keys: Vec<String> = seen(&env, "p").into_iter().map(|(_, k, _)| k).collect();
    keys.sort();
    assert_eq!(keys, ["team-a1/cm", "team-a2/cm", "team-a3/cm"]);
}

/// `name`'s entry in `/plugins`.
async fn status_of(addr: std::net::SocketAddr, name: &str) -> Value {
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

/// A selector plugin on a host that may read ConfigMaps but not list Namespaces: it shows
/// `waiting` for that permission (it delivers nothing meanwhile), not `running`; once granted it
/// runs and gets its selection, without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selection_the_host_may_not_list_namespaces_for_waits_until_granted() {
    let server = DevServer::start(DevServerConfig::default())
        .await
        .expect("start API server");
    server.create(namespace("a", json!({"team": "a"}))).unwrap();
    server.create(namespace("b", json!({"team": "b"}))).unwrap();
    for ns in ["a", "b"] {
        server.create(configmap(ns, "cm", "v")).unwrap();
    }
    server.restrict(HOST, reader_rules());
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(wasm("hostile"), dir.path().join("p.wasm")).unwrap();
    std::fs::write(dir.path().join("p.toml"), echo("team=a")).unwrap();
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

    get_until(addr, "/readyz", "ready with namespaces refused", |s, _| {
        s == 200
    })
    .await;
    let p = status_of(addr, "p").await;
    assert_eq!(p["state"], "waiting", "{p}");
    assert_eq!(p["waiting"]["for"], "forbidden", "{p}");
    assert_eq!(p["waiting"]["resource"], "v1 namespaces", "{p}");
    let reason = p["waiting"]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("forbidden: namespaces is forbidden"),
        "{reason}"
    );
    assert!(logs.json_of("p").is_empty(), "{:?}", logs.json_of("p"));

    // Granted: the Namespace informer's next attempt lists them (a refusal is retried no
    // sooner than 30 s), the selection comes in, and the plugin runs.
    let mut wider = reader_rules();
    wider.push(rule(&["get", "list", "watch"], "namespaces"));
    server.restrict(HOST, wider);
    logs.wait_until("a's object once namespaces may be listed", || {
        logs.keys_of("p", "sel").contains("a/cm")
    })
    .await;
    let p = status_of(addr, "p").await;
    assert_eq!(p["state"], "running", "{p}");
    assert!(p["waiting"].is_null(), "{p}");
    // Then as usual: `a`'s objects, never `b`'s (the last one a barrier).
    server.create(configmap("b", "late", "v")).unwrap();
    server.create(configmap("a", "late", "v")).unwrap();
    logs.wait_until("a's late object", || {
        logs.keys_of("p", "sel").contains("a/late")
    })
    .await;
    let keys: Vec<String> = logs.keys_of("p", "sel").into_iter().collect();
    assert_eq!(keys, ["a/cm", "a/late"]);
    runtime.stop().await;
    server.shutdown().await;
}
