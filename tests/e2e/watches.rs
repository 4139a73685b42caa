//! What a `[[watch]]` selects, against the embedded API server with real compiled plugins:
//! several namespaces in one watch (one shared informer each, every one inside the grant).

use std::collections::BTreeSet;
use std::path::Path;

use informant_runtime::config;
use informant_runtime::plugin::PluginError;
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_tests::plugins::PluginEnv;
use informant_tests::{create_namespaces, guarded};
use serde_json::{Value, json};

const CONFIG: &str = r#"
operator-plugins = true
[tenants.a]
namespaces = ["team-a", "team-a-*"]
resources = ["v1/ConfigMap"]
"#;

fn host_config() -> HostConfig {
    config::parse(CONFIG, Path::new("informant.toml")).expect("test config is valid")
}

fn configmap(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "demo"}},
        "data": {"k": "v"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_with_two_namespaces_sees_both_and_nothing_else() {
    guarded("a watch over two namespaces", async {
        let env = PluginEnv::start(host_config()).await;
        let namespaces = ["x", "y", "z", "team-a", "team-b"];
        create_namespaces(&env.server, &namespaces);
        for ns in namespaces {
            env.server.create(configmap(ns, "before")).unwrap();
        }
        // The probes run when the `probe` object arrives: cache queries see both namespaces.
        env.install(
            None,
            "two",
            "hostile",
            "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespaces = [\"x\", \"y\"]\n\
             [config]\nmode = \"snoop\"\ntag = \"two\"\n\
             [[config.probes]]\nop = \"list\"\n\
             [[config.probes]]\nop = \"list\"\nnamespace = \"y\"\nselector = \"app=demo\"\n\
             [[config.probes]]\nop = \"by-index\"\nindex = \"label\"\nvalue = \"app=demo\"\n\
             [[config.probes]]\nop = \"get\"\nnamespace = \"x\"\nname = \"before\"\n\
             [[config.probes]]\nop = \"get\"\nnamespace = \"z\"\nname = \"before\"\n",
        );
        // Shares the `x` informer with `two`.
        env.install(
            None,
            "only-x",
            "hostile",
            "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"x\"\n[config]\nmode = \"echo\"\ntag = \"x\"\n",
        );
        env.install(
            None,
            "all",
            "hostile",
            "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[config]\nmode = \"echo\"\ntag = \"all\"\n",
        );
        // A tenant naming a namespace outside its grant is refused at load, naming which one.
        env.install(
            Some("a"),
            "greedy",
            "hostile",
            "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespaces = [\"team-a\", \"team-b\"]\n[config]\nmode = \"echo\"\ntag = \"greedy\"\n",
        );
        let report = env.reconcile().await;
        assert_eq!(report.loaded.len(), 3, "{report:?}");
        assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
        let (id, err) = &report.errors[0];
        assert_eq!(id.name, "greedy");
        assert!(matches!(err, PluginError::Refused { .. }), "{err}");
        let text = err.to_string();
        for needle in [
            "greedy.toml",
            "field `watch[0].namespaces[1]`",
            "namespace `team-b` is outside the namespaces tenant `a` was granted",
        ] {
            assert!(text.contains(needle), "`{text}` lacks `{needle}`");
        }

        let informers: BTreeSet<String> = env
            .factory
            .informers()
            .iter()
            .filter(|i| i.store().api_resource().kind == "ConfigMap")
            .map(|i| i.description().to_string())
            .collect();
        assert_eq!(
            informers.len(),
            3,
            "one informer per namespace (`x` shared) and one for all: {informers:?}"
        );

        for ns in ["z", "team-b", "y", "x"] {
            env.server.create(configmap(ns, "live")).unwrap();
        }
        env.logs
            .wait_until("both live objects", || {
                let seen = env.logs.keys_of("two", "two");
                seen.contains("x/live") && seen.contains("y/live")
            })
            .await;
        // Created once both live objects are in their caches (informers are not ordered
        // with each other).
        env.server.create(configmap("x", "probe")).unwrap();
        env.logs
            .wait_until("the probes", || {
                env.logs.json_of("two").iter().any(|v| v["probes"].is_array())
            })
            .await;
        env.logs
            .wait_until("`all` to see the live objects", || {
                let seen = env.logs.keys_of("all", "all");
                seen.contains("z/live") && seen.contains("x/probe")
            })
            .await;
        let want: BTreeSet<String> = ["x/before", "y/before", "x/live", "y/live", "x/probe"]
            .into_iter()
            .map(String::from)
            .collect();
        assert_eq!(env.logs.keys_of("two", "two"), want);
        let probes = env
            .logs
            .json_of("two")
            .into_iter()
            .find(|v| v["probes"].is_array())
            .unwrap();
        let keys = |i: usize| -> BTreeSet<String> {
            probes["probes"][i]["ok"]
                .as_array()
                .unwrap_or_else(|| panic!("probe {i}: {}", probes["probes"][i]))
                .iter()
                .map(|k| k.as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(keys(0), want, "list across both namespaces");
        assert_eq!(
            keys(1),
            ["y/before", "y/live"].into_iter().map(String::from).collect(),
            "list in one of them"
        );
        assert_eq!(keys(2), want, "by-index across both namespaces");
        assert_eq!(keys(3), BTreeSet::from(["x/before".to_string()]));
        assert_eq!(keys(4), BTreeSet::new(), "an unwatched namespace holds nothing");
        let only_x = env.logs.keys_of("only-x", "x");
        assert!(only_x.iter().all(|k| k.starts_with("x/")), "{only_x:?}");
    })
    .await;
}

fn deployment(name: &str, labels: Value, replicas: u64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
}

/// `(type, key, rv)` of every echo line of a plugin, in order.
fn seen(env: &PluginEnv, plugin: &str) -> Vec<(String, String, String)> {
    env.logs
        .json_of(plugin)
        .iter()
        .filter(|v| v["type"].is_string())
        .map(|v| {
            let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            (s("type"), s("key"), s("rv"))
        })
        .collect()
}

fn filtered(name: &str, extra: &str) -> String {
    format!(
        "[[watch]]\napi-version = \"apps/v1\"\nkind = \"Deployment\"\n{extra}\n[config]\nmode = \"echo\"\ntag = \"{name}\"\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jq_filter_on_spec_suppresses_a_label_only_update_and_passes_a_spec_change() {
    guarded("change filters", async {
        let env = PluginEnv::start(host_config()).await;
        env.server
            .create(deployment("web", json!({"tier": "a"}), 1))
            .unwrap();
        env.install(None, "spec", "hostile", &filtered("spec", "jq-filter = \".spec\""));
        env.install(
            None,
            "ignore",
            "hostile",
            &filtered(
                "ignore",
                "ignore = [\"metadata.labels\", \"metadata.resourceVersion\", \"status\"]",
            ),
        );
        // Fails on every object (`web` is no number): the update passes, counted.
        env.install(
            None,
            "failing",
            "hostile",
            &filtered("failing", "jq-filter = \".spec.template.metadata.labels.app | tonumber\""),
        );
        env.install(None, "all", "hostile", &filtered("all", ""));
        // Refused at load: a program that would never end, and a tenant's jq filter.
        env.install(None, "endless", "hostile", &filtered("endless", "jq-filter = \"def f: f; f\""));
        env.install(
            Some("a"),
            "tenant-jq",
            "hostile",
            "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"team-a\"\njq-filter = \".data\"\n[config]\nmode = \"echo\"\n",
        );
        let report = env.reconcile().await;
        assert_eq!(report.loaded.len(), 4, "{report:?}");
        let errors: Vec<(String, String)> = report
            .errors
            .iter()
            .map(|(id, e)| (id.name.clone(), e.to_string()))
            .collect();
        assert_eq!(errors.len(), 2, "{errors:?}");
        for (name, needles) in [
            (
                "endless",
                &["endless.toml", "line 4", "field `watch[0].jq-filter`", "`def` is not allowed"][..],
            ),
            (
                "tenant-jq",
                &["tenant-jq.toml", "field `watch[0].jq-filter`", "only operator plugins may use jq filters"],
            ),
        ] {
            let (_, text) = errors.iter().find(|(n, _)| n == name).unwrap();
            for n in needles {
                assert!(text.contains(n), "{name}: `{text}` lacks `{n}`");
            }
        }

        // A label-only update, then a marker object: per handler, a passed update of `web`
        // would be queued ahead of the marker's Added.
        let labelled = env
            .server
            .update(deployment("web", json!({"tier": "b"}), 1))
            .unwrap();
        let label_rv = labelled["metadata"]["resourceVersion"].as_str().unwrap().to_string();
        env.server
            .create(deployment("marker", json!({}), 1))
            .unwrap();
        let saw = |plugin: &str, kind: &str, key: &str| {
            seen(&env, plugin).iter().any(|(t, k, _)| t == kind && k == key)
        };
        env.logs
            .wait_until("every plugin to see the marker", || {
                ["spec", "ignore", "failing", "all"]
                    .iter()
                    .all(|p| saw(p, "added", "default/marker"))
            })
            .await;
        let label_update = ("updated".to_string(), "default/web".to_string(), label_rv);
        for p in ["all", "failing"] {
            assert!(seen(&env, p).contains(&label_update), "{p}: {:?}", seen(&env, p));
        }
        for p in ["spec", "ignore"] {
            assert!(
                !seen(&env, p).iter().any(|(t, _, _)| t == "updated"),
                "{p} was woken by a label-only update: {:?}",
                seen(&env, p)
            );
        }

        let scaled = env
            .server
            .update(deployment("web", json!({"tier": "b"}), 3))
            .unwrap();
        let spec_rv = scaled["metadata"]["resourceVersion"].as_str().unwrap().to_string();
        let spec_update = ("updated".to_string(), "default/web".to_string(), spec_rv);
        env.logs
            .wait_until("the spec change to reach the filtered plugins", || {
                ["spec", "ignore"]
                    .iter()
                    .all(|p| seen(&env, p).contains(&spec_update))
            })
            .await;
        let stats = env.host.change_filter_stats();
        let failing = stats
            .iter()
            .find(|(d, _, _)| d.contains("tonumber"))
            .expect("the failing filter is live");
        assert!(failing.2 >= 1, "its failures are counted: {stats:?}");
    })
    .await;
}

/// An operator's filter that passes every load-time check but explodes (4^24 outputs) beside a
/// plugin without one, on the same ConfigMaps: the other plugin gets each of 50 updates
/// promptly, and the exploding filter, cut at its budget, passes its own updates on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exploding_jq_filter_holds_back_no_other_plugin() {
    const N: usize = 50;
    guarded("an exploding change filter", async {
        let env = PluginEnv::start(host_config()).await;
        let watch = |tag: &str, extra: &str| {
            format!(
                "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"default\"\n{extra}\n[config]\nmode = \"echo\"\ntag = \"{tag}\"\n"
            )
        };
        let program = format!("[{}] | length", vec!["(.,.,.,.)"; 24].join(" | "));
        env.install(
            None,
            "explode",
            "hostile",
            &watch("explode", &format!("jq-filter = \"{program}\"")),
        );
        env.install(None, "other", "hostile", &watch("other", ""));
        let report = env.reconcile().await;
        assert_eq!(report.loaded.len(), 2, "{report:?}");
        let names: Vec<String> = (0..N).map(|i| format!("c{i:02}")).collect();
        for n in &names {
            env.server.create(configmap("default", n)).unwrap();
        }
        let count = |plugin: &str, kind: &str| {
            seen(&env, plugin).iter().filter(|(t, _, _)| t == kind).count()
        };
        env.logs
            .wait_until("both plugins to see every ConfigMap added", || {
                count("explode", "added") == N && count("other", "added") == N
            })
            .await;

        // One update per object, so no two coalesce: each is an event of its own.
        let started = std::time::Instant::now();
        for n in &names {
            let mut cm = configmap("default", n);
            cm["data"]["k"] = json!("changed");
            env.server.update(cm).unwrap();
        }
        env.logs
            .wait_until("the other plugin to see every update", || {
                count("other", "updated") == N
            })
            .await;
        let other_took = started.elapsed();
        env.logs
            .wait_until("the exploding filter to pass its updates on", || {
                count("explode", "updated") == N
            })
            .await;
        eprintln!(
            "other plugin: {N} updates in {other_took:?}; the exploding filter's: {:?}",
            started.elapsed()
        );
        assert!(
            other_took < std::time::Duration::from_secs(10),
            "the other plugin took {other_took:?} for {N} updates"
        );
        let stats = env.host.change_filter_stats();
        let (_, _, errors) = stats
            .iter()
            .find(|(d, _, _)| d.contains("(.,.,.,.)"))
            .expect("the exploding filter is live");
        assert_eq!(*errors, N as u64, "every update passed over budget is counted: {stats:?}");
    })
    .await;
}
