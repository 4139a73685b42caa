//! Python plugins (componentize-py, built from source here and cached under the target dir)
//! loaded by the host exactly like Rust ones: side by side with Rust plugins, through create,
//! update and delete, querying the cache; a guest exception fails that event for that plugin
//! only, and a spinning Python plugin is stopped at its deadline like a Rust one. A TypeScript
//! plugin (esbuild + componentize-js) logs create, update and delete beside its Rust original,
//! and TypeScript plugins query the cache and fail only the event they throw on.

use std::collections::BTreeMap;
use std::path::Path;

use informant_runtime::plugin::load::host_config::HostConfig;

use informant_runtime::plugin::id::PluginId;

use informant_runtime::plugin::exec::supervisor::PluginState;

use informant_runtime::plugin::load::status::PluginStatus;
use informant_tests::plugins::{PluginEnv, fast_restarts, js_wasm, python_wasm};
use informant_tests::{configmap, create_namespaces, guarded};
use serde_json::{Value, json};

fn hostile_manifest(mode: &str, tag: &str, deadline_ms: u64) -> String {
    format!(
        "[limits]\ndeadline-ms = {deadline_ms}\nmemory-mib = 64\n[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[config]\nmode = \"{mode}\"\ntag = \"{tag}\"\n"
    )
}

/// An example plugin's own manifest, with summaries after every event.
fn label_policy_manifest(plugin: &str) -> String {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../plugins/{plugin}/{plugin}.toml"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(text.contains("summary-every = 100"), "{}", path.display());
    text.replace("summary-every = 100", "summary-every = 1")
}

fn status(env: &PluginEnv) -> BTreeMap<String, PluginStatus> {
    env.host
        .status()
        .into_iter()
        .map(|s| (s.name.clone(), s))
        .collect()
}

/// `(event, key, cached, value)` of every echo line of `plugin`.
fn echoed(env: &PluginEnv, plugin: &str) -> Vec<(String, String, bool, Value)> {
    env.logs
        .json_of(plugin)
        .iter()
        .filter(|v| v["tag"].is_string())
        .map(|v| {
            (
                v["event"].as_str().unwrap_or_default().into(),
                v["key"].as_str().unwrap_or_default().into(),
                v["cached"].as_bool().unwrap_or(false),
                v["value"].clone(),
            )
        })
        .collect()
}

fn lines_with(env: &PluginEnv, plugin: &str, field: &str) -> Vec<Value> {
    env.logs
        .json_of(plugin)
        .into_iter()
        .filter(|v| v.get(field).is_some())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_plugins_run_beside_rust_ones() {
    let Some(label_policy_py) = python_wasm("plugins/label-policy-py") else {
        return;
    };
    let Some(hostile) = python_wasm("tests/plugins/hostile-py") else {
        return;
    };
    let env = PluginEnv::start(HostConfig {
        restart: fast_restarts(),
        ..Default::default()
    })
    .await;
    create_namespaces(&env.server, &["demo"]);
    env.server.create(configmap("demo", "pre", "0")).unwrap();
    env.install(
        None,
        "label-policy",
        "label-policy",
        &label_policy_manifest("label-policy"),
    );
    env.install_component(
        None,
        "label-policy-py",
        &label_policy_py,
        &label_policy_manifest("label-policy-py"),
    );
    env.install_component(
        None,
        "echo-py",
        &hostile,
        &hostile_manifest("echo", "echo", 1000),
    );
    env.install_component(
        None,
        "raise-py",
        &hostile,
        &hostile_manifest("raise", "raise", 1000),
    );
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.loaded.len(), 4, "{report:?}");
    let logs = &env.logs;

    // The replay, then create, update and delete, each seen with a cache query that agrees.
    logs.wait_until("echo-py's replay of demo/pre", || {
        echoed(&env, "echo-py").contains(&("added".into(), "demo/pre".into(), true, json!("0")))
    })
    .await;
    // Each policy has handled the create before the update: a plugin still busy with its
    // replay would get both as one coalesced event, one violation instead of two.
    let violations_of = |plugin: &str| {
        lines_with(&env, plugin, "violation")
            .iter()
            .filter(|l| l["violation"]["name"] == "cm")
            .count()
    };
    env.server.create(configmap("demo", "cm", "1")).unwrap();
    logs.wait_until("echo-py and both policies to see the create", || {
        echoed(&env, "echo-py").contains(&("added".into(), "demo/cm".into(), true, json!("1")))
            && violations_of("label-policy") == 1
            && violations_of("label-policy-py") == 1
    })
    .await;
    env.server.update(configmap("demo", "cm", "2")).unwrap();
    logs.wait_until("echo-py to see the update", || {
        echoed(&env, "echo-py").contains(&("updated".into(), "demo/cm".into(), true, json!("2")))
    })
    .await;
    env.server
        .delete("v1", "ConfigMap", Some("demo"), "cm")
        .unwrap();
    logs.wait_until("echo-py to see the delete", || {
        echoed(&env, "echo-py").contains(&("deleted".into(), "demo/cm".into(), false, json!("2")))
    })
    .await;

    // A guest exception fails that event for raise-py only; everyone gets the next event.
    let mut bad = configmap("demo", "bad", "x");
    bad["metadata"]["labels"]["boom"] = json!("1");
    env.server.create(bad).unwrap();
    env.server.create(configmap("demo", "after", "y")).unwrap();
    for plugin in ["echo-py", "raise-py"] {
        logs.wait_until(&format!("{plugin} to see demo/after"), || {
            echoed(&env, plugin).iter().any(|e| e.1 == "demo/after")
        })
        .await;
    }
    let st = status(&env);
    let raise = &st["raise-py"];
    assert_eq!(
        (raise.failed, raise.state),
        (1, PluginState::Running),
        "{raise:?}"
    );
    let error = raise.last_error.as_deref().unwrap_or_default();
    assert!(error.contains("ValueError: boom on demo/bad"), "{error}");
    assert!(echoed(&env, "raise-py").iter().all(|e| e.1 != "demo/bad"));
    assert!(echoed(&env, "echo-py").iter().any(|e| e.1 == "demo/bad"));
    for plugin in ["echo-py", "label-policy", "label-policy-py"] {
        assert_eq!(st[plugin].failed, 0, "{:?}", st[plugin]);
    }

    // The Python port logs exactly the Rust plugin's violations, and the same summary of the
    // cache once both have caught up (demo/pre, demo/bad and demo/after lack `team`).
    let expected =
        json!({"v1/ConfigMap": {"missing:team": 3}, "apps/v1/Deployment": {"missing:team": 0}});
    // A summary counts the cache, which may be ahead of the plugin's events: wait for the
    // fifth violation (demo/after's) too before comparing.
    let violations = |p| lines_with(&env, p, "violation");
    logs.wait_until("both label policies to summarize the final cache", || {
        ["label-policy", "label-policy-py"].iter().all(|p| {
            violations(p).len() >= 5
                && lines_with(&env, p, "summary")
                    .iter()
                    .any(|l| l["summary"] == expected)
        })
    })
    .await;
    assert_eq!(violations("label-policy-py"), violations("label-policy"));
    assert_eq!(
        violations("label-policy").len(),
        5,
        "{:?}",
        violations("label-policy")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_python_plugin_is_stopped_at_its_deadline() {
    let Some(hostile) = python_wasm("tests/plugins/hostile-py") else {
        return;
    };
    let env = PluginEnv::start(HostConfig {
        restart: fast_restarts(),
        ..Default::default()
    })
    .await;
    create_namespaces(&env.server, &["a"]);
    env.install_component(
        None,
        "spin-py",
        &hostile,
        &hostile_manifest("spin", "spin", 100),
    );
    env.install_component(
        None,
        "echo-py",
        &hostile,
        &hostile_manifest("echo", "echo", 1000),
    );
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    for i in 0..4 {
        env.server
            .create(configmap("a", &format!("cm{i}"), "v"))
            .unwrap();
    }
    let id = PluginId {
        tenant: String::new(),
        name: "spin-py".into(),
    };
    let mut state = env
        .host
        .supervisor(&id)
        .expect("spin-py loaded")
        .subscribe_state();
    guarded(
        "spin-py to be quarantined",
        state.wait_for(|s| *s == PluginState::Quarantined),
    )
    .await
    .expect("state channel");
    let st = status(&env);
    let error = st["spin-py"].last_error.as_deref().unwrap_or_default();
    assert!(error.contains("deadline"), "{:?}", st["spin-py"]);
    assert_eq!(st["spin-py"].handled, 0, "{:?}", st["spin-py"]);

    env.server.create(configmap("a", "late", "v")).unwrap();
    env.logs
        .wait_until("echo-py to see every object", || {
            let seen: std::collections::BTreeSet<_> =
                echoed(&env, "echo-py").into_iter().map(|e| e.1).collect();
            seen.len() == 5 && seen.contains("a/late")
        })
        .await;
    assert_eq!(status(&env)["echo-py"].failed, 0);
}

fn deployment(replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "demo", "labels": {"app": "web"}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_kubediff_runs_beside_the_rust_one() {
    let Some(kubediff_ts) = js_wasm("plugins/kubediff-ts") else {
        return;
    };
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["demo"]);
    let rust_manifest = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/kubediff/kubediff.toml"),
    )
    .unwrap();
    let ts_manifest = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/kubediff-ts/kubediff-ts.toml"),
    )
    .unwrap();
    env.install(None, "kubediff", "kubediff", &rust_manifest);
    env.install_component(None, "kubediff-ts", &kubediff_ts, &ts_manifest);
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.loaded.len(), 2, "{report:?}");
    let ts = || env.logs.json_of("kubediff-ts");
    let web = |event: &str| {
        ts().into_iter()
            .find(|l| l["event"] == event && l["name"] == "web")
    };

    env.server.create(deployment(1)).unwrap();
    env.logs
        .wait_until("kubediff-ts to log the create", || web("added").is_some())
        .await;
    assert_eq!(
        web("added").unwrap(),
        json!({"event": "added", "apiVersion": "apps/v1", "kind": "Deployment", "namespace": "demo", "name": "web"})
    );
    env.server.update(deployment(3)).unwrap();
    env.logs
        .wait_until("kubediff-ts to log the update", || web("updated").is_some())
        .await;
    let changed = web("updated").unwrap()["changed"].clone();
    assert!(
        changed
            .as_array()
            .unwrap()
            .contains(&json!("/spec/replicas")),
        "{changed}"
    );
    assert!(
        !changed.to_string().contains("resourceVersion"),
        "{changed}"
    );
    // The Rust kubediff saw the same change.
    env.logs
        .wait_until("the Rust kubediff to log the update", || {
            env.logs.json_of("kubediff").iter().any(|l| {
                l["changes"]
                    .as_array()
                    .is_some_and(|cs| cs.iter().any(|c| c["path"] == "/spec/replicas"))
            })
        })
        .await;
    env.server
        .delete("apps/v1", "Deployment", Some("demo"), "web")
        .unwrap();
    env.logs
        .wait_until("kubediff-ts to log the delete", || web("deleted").is_some())
        .await;
    let st = status(&env);
    assert_eq!(
        (st["kubediff-ts"].failed, st["kubediff"].failed),
        (0, 0),
        "{st:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_plugins_query_the_cache_and_a_throw_fails_only_that_event() {
    let Some(hostile) = js_wasm("tests/plugins/hostile-ts") else {
        return;
    };
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["demo"]);
    env.install_component(
        None,
        "echo-ts",
        &hostile,
        &hostile_manifest("echo", "echo", 1000),
    );
    env.install_component(
        None,
        "raise-ts",
        &hostile,
        &hostile_manifest("raise", "raise", 1000),
    );
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);

    env.server.create(configmap("demo", "cm", "1")).unwrap();
    env.logs
        .wait_until("echo-ts to see the create", || {
            echoed(&env, "echo-ts").contains(&("added".into(), "demo/cm".into(), true, json!("1")))
        })
        .await;
    env.server
        .delete("v1", "ConfigMap", Some("demo"), "cm")
        .unwrap();
    env.logs
        .wait_until("echo-ts to see the delete", || {
            echoed(&env, "echo-ts").contains(&(
                "deleted".into(),
                "demo/cm".into(),
                false,
                json!("1"),
            ))
        })
        .await;

    let mut bad = configmap("demo", "bad", "x");
    bad["metadata"]["labels"]["boom"] = json!("1");
    env.server.create(bad).unwrap();
    env.server.create(configmap("demo", "after", "y")).unwrap();
    for plugin in ["echo-ts", "raise-ts"] {
        env.logs
            .wait_until(&format!("{plugin} to see demo/after"), || {
                echoed(&env, plugin).iter().any(|e| e.1 == "demo/after")
            })
            .await;
    }
    let st = status(&env);
    let raise = &st["raise-ts"];
    assert_eq!(
        (raise.failed, raise.state),
        (1, PluginState::Running),
        "{raise:?}"
    );
    let error = raise.last_error.as_deref().unwrap_or_default();
    assert!(error.contains("TypeError: boom on demo/bad"), "{error}");
    assert_eq!(st["echo-ts"].failed, 0, "{:?}", st["echo-ts"]);
}

/// A `label`-mode test plugin (`hostile-py` or `hostile-ts`) applies `by=TAG` to a `go-*`
/// ConfigMap through the host, and its undeclared delete is refused with `denied_prefix`.
async fn writes_through_the_kube_import(component: &Path, tag: &str, denied_prefix: &str) {
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["demo"]);
    let manifest = format!(
        "[limits]\ndeadline-ms = 5000\n[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"demo\"\n\
         [[write]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nverbs = [\"apply\"]\nnamespace = \"demo\"\n\
         [config]\nmode = \"label\"\ntag = \"{tag}\"\n"
    );
    env.install_component(None, "labeller", component, &manifest);
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    env.server.create(configmap("demo", "go-1", "1")).unwrap();
    env.logs
        .wait_until("the labeller's writes", || {
            !lines_with(&env, "labeller", "applied").is_empty()
        })
        .await;
    let line = &lines_with(&env, "labeller", "applied")[0];
    assert_eq!(line["applied"]["by"], tag, "{line}");
    let delete = line["delete"].as_str().unwrap();
    assert!(
        delete.starts_with(&format!(
            "{denied_prefix}`delete` of `v1/ConfigMap` in namespace `demo` is not declared"
        )),
        "{delete}"
    );
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(env.server.client(), "demo");
    let stored = cms.get("go-1").await.expect("not deleted");
    assert_eq!(
        stored
            .metadata
            .labels
            .unwrap_or_default()
            .get("by")
            .map(String::as_str),
        Some(tag)
    );
}

#[tokio::test]
async fn a_python_plugin_writes_through_the_kube_import_within_its_manifest() {
    let Some(component) = python_wasm("tests/plugins/hostile-py") else {
        return;
    };
    writes_through_the_kube_import(&component, "py", "Denied: ").await;
}

#[tokio::test]
async fn a_typescript_plugin_writes_through_the_kube_import_within_its_manifest() {
    let Some(component) = js_wasm("tests/plugins/hostile-ts") else {
        return;
    };
    writes_through_the_kube_import(&component, "ts", "denied: ").await;
}

/// A `metrics`-mode test plugin (`hostile-py` or `hostile-ts`): its counter and histogram reach
/// `/metrics` with the host's labels, and the host's refusal reaches it as the SDK's error
/// (`refused_prefix` names its class or kind).
async fn metrics_through_the_import(component: &Path, tag: &str, refused_prefix: &str) {
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["demo"]);
    let (_state, admin) = crate::admin::start_admin(&env).await;
    let manifest = format!(
        "[limits]\ndeadline-ms = 5000\n[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"demo\"\n\
         [config]\nmode = \"metrics\"\ntag = \"{tag}\"\n"
    );
    env.install_component(None, "counter", component, &manifest);
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    env.server.create(configmap("demo", "go-1", "1")).unwrap();
    env.logs
        .wait_until("the plugin's metric calls", || {
            !lines_with(&env, "counter", "refused").is_empty()
        })
        .await;
    let line = &lines_with(&env, "counter", "refused")[0];
    let refused = line["refused"].as_str().unwrap();
    assert!(
        refused.starts_with(refused_prefix) && refused.contains("`plugin`"),
        "{refused}"
    );
    assert_eq!(
        (&line["deleted"], &line["group"]),
        (&json!(true), &json!(1)),
        "{line}"
    );
    let scrape = crate::admin::scrape_until(admin.addr(), "the plugin's series", |s| {
        s.parsed
            .families
            .contains_key("informant_plugin_polyglot_checks")
    })
    .await;
    let labels = [("plugin", "counter"), ("tenant", "")];
    let mut named = labels.to_vec();
    named.push(("name", "go-1"));
    assert_eq!(
        scrape.value("informant_plugin_polyglot_checks", &named),
        2.0
    );
    assert_eq!(
        scrape.histogram_count("informant_plugin_polyglot_sizes", &labels),
        1
    );
    assert!(
        !scrape.text.contains("polyglot_temp") && !scrape.text.contains("evil"),
        "{}",
        scrape.text
    );
    env.host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_plugin_keeps_metrics_through_the_import() {
    let Some(component) = python_wasm("tests/plugins/hostile-py") else {
        return;
    };
    metrics_through_the_import(&component, "py", "InvalidLabel: ").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typescript_plugin_keeps_metrics_through_the_import() {
    let Some(component) = js_wasm("tests/plugins/hostile-ts") else {
        return;
    };
    metrics_through_the_import(&component, "ts", "invalid-label: ").await;
}
