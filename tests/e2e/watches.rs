//! What a `[[watch]]` selects, against the embedded API server with real compiled plugins:
//! several namespaces in one watch (one shared informer each, every one inside the grant).

use std::collections::BTreeSet;
use std::path::Path;

use informant_runtime::config;
use informant_runtime::plugin::{HostConfig, PluginError};
use informant_tests::guarded;
use informant_tests::plugins::PluginEnv;
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

fn keys_of(lines: &[Value], tag: &str) -> BTreeSet<String> {
    lines
        .iter()
        .filter(|v| v["tag"] == tag && v["key"].is_string())
        .map(|v| v["key"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_with_two_namespaces_sees_both_and_nothing_else() {
    guarded("a watch over two namespaces", async {
        let env = PluginEnv::start(host_config()).await;
        for ns in ["x", "y", "z", "team-a", "team-b"] {
            env.server
                .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
                .unwrap();
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
                let seen = keys_of(&env.logs.json_of("two"), "two");
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
                let seen = keys_of(&env.logs.json_of("all"), "all");
                seen.contains("z/live") && seen.contains("x/probe")
            })
            .await;
        let want: BTreeSet<String> = ["x/before", "y/before", "x/live", "y/live", "x/probe"]
            .into_iter()
            .map(String::from)
            .collect();
        assert_eq!(keys_of(&env.logs.json_of("two"), "two"), want);
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
        let only_x = keys_of(&env.logs.json_of("only-x"), "x");
        assert!(only_x.iter().all(|k| k.starts_with("x/")), "{only_x:?}");
    })
    .await;
}
