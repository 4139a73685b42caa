//! Tenancy against the embedded API server with real compiled plugins: a tenant's plugin tries
//! to see another tenant's objects through every query and every index, and by every trick at
//! load time; one tenant's spinning plugin does not hold up another's deliveries; a changed
//! config applies without a restart to exactly the tenants it changes.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use informant_runtime::config::{self, ConfigWatcher};
use informant_runtime::plugin::PluginError;
use informant_runtime::plugin::exec::supervisor::RestartPolicy;
use informant_runtime::plugin::id::PluginId;
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_runtime::plugin::load::reload::Reloader;
use informant_runtime::plugin::load::status::ReconcileReport;
use informant_tests::plugins::PluginEnv;
use informant_tests::{GUARD, create_namespaces, guarded};
use serde_json::{Value, json};
use tokio::sync::mpsc;

const CONFIG: &str = r#"
operator-plugins = true
[tenants.a]
namespaces = ["team-a", "team-a-*"]
resources = ["v1/ConfigMap", "v1/Namespace"]
max-memory-mib = 32
[tenants.b]
namespaces = ["team-b"]
resources = ["v1/ConfigMap"]
max-plugins = 1
"#;

fn host_config() -> HostConfig {
    config::parse(CONFIG, Path::new("informant.toml")).expect("test config is valid")
}

fn id(tenant: &str, name: &str) -> PluginId {
    PluginId {
        tenant: tenant.into(),
        name: name.into(),
    }
}

/// A ConfigMap with labels, data and an owner, so every index has something to find.
fn object(ns: &str, name: &str, team: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {"team": team, "app": "shared"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                "uid": format!("owner-{team}"), "controller": false}]},
        "data": {"color": "blue"}})
}

fn echo_manifest(tag: &str) -> String {
    format!(
        "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[config]\nmode = \"echo\"\ntag = \"{tag}\"\n"
    )
}

/// Every probe the snooping plugin runs, with what the grant must make of it.
fn probes() -> Vec<(Value, Expect)> {
    use Expect::*;
    vec![
        (
            json!({"op": "get", "namespace": "team-b", "name": "b1"}),
            Forbidden,
        ),
        (
            json!({"op": "get", "namespace": "team-b", "name": "no-such"}),
            Forbidden,
        ),
        (json!({"op": "get", "name": "b1"}), Forbidden), // cluster-scoped: not granted
        (json!({"op": "list", "namespace": "team-b"}), Forbidden),
        (
            json!({"op": "list", "namespace": "team-b", "selector": "team=b"}),
            Forbidden,
        ),
        (json!({"op": "list", "selector": "team=b"}), Objects(&[])),
        (
            json!({"op": "list", "selector": "app=shared"}),
            Objects(OWN),
        ),
        (json!({"op": "list"}), Objects(OWN)),
        (
            json!({"op": "by-index", "index": "namespace", "value": "team-b"}),
            Objects(&[]),
        ),
        (
            json!({"op": "by-index", "index": "label", "value": "team=b"}),
            Objects(&[]),
        ),
        (
            json!({"op": "by-index", "index": "label", "value": "app=shared"}),
            Objects(OWN),
        ),
        (
            json!({"op": "by-index", "index": "owner", "value": "owner-b"}),
            Objects(&[]),
        ),
        (
            json!({"op": "by-index", "index": "color", "value": "blue"}),
            Objects(OWN),
        ),
        (
            json!({"op": "list", "kind": "Namespace", "version": "v1"}),
            NotWatched,
        ),
        (
            json!({"op": "get", "namespace": "team-a", "name": "a1"}),
            Objects(&["team-a/a1"]),
        ),
    ]
}

/// All of tenant a's objects (the probe included): everything it may see.
const OWN: &[&str] = &["team-a-dev/a2", "team-a/a1", "team-a/probe"];

#[derive(Debug)]
enum Expect {
    Forbidden,
    NotWatched,
    Objects(&'static [&'static str]),
}

fn snoop_manifest() -> String {
    let mut m = String::from(
        "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[watch.indexes]\ncolor = \"data.color\"\n[config]\nmode = \"snoop\"\ntag = \"snoop\"\n",
    );
    for (p, _) in probes() {
        m.push_str("[[config.probes]]\n");
        for (k, v) in p.as_object().unwrap() {
            m.push_str(&format!("{k} = {v}\n"));
        }
    }
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_sees_nothing_of_another_tenant() {
    guarded("tenancy isolation", async {
        let env = PluginEnv::start(host_config()).await;
        create_namespaces(&env.server, &["team-a", "team-a-dev", "team-b"]);
        env.server.create(object("team-a", "a1", "a")).unwrap();
        env.server.create(object("team-a-dev", "a2", "a")).unwrap();
        env.server.create(object("team-b", "b1", "b")).unwrap();
        env.server.create(object("team-b", "b2", "b")).unwrap();

        env.install(Some("a"), "a-snoop", "hostile", &snoop_manifest());
        env.install(Some("b"), "b-echo", "hostile", &echo_manifest("b"));
        env.install(None, "operator", "hostile", &echo_manifest("op"));
        let report = env.reconcile().await;
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert_eq!(report.loaded.len(), 3);

        // Both tenants and the operator watch every ConfigMap: one shared watch serves them all.
        let configmap_informers = env
            .factory
            .informers()
            .iter()
            .filter(|i| i.store().api_resource().kind == "ConfigMap")
            .count();
        assert_eq!(configmap_informers, 1, "tenants share the informer");

        env.server.create(object("team-a", "probe", "a")).unwrap();
        env.logs
            .wait_until("the snoop's probe results", || {
                env.logs
                    .json_of("a-snoop")
                    .iter()
                    .any(|v| v["probes"].is_array())
            })
            .await;
        let results = env
            .logs
            .json_of("a-snoop")
            .into_iter()
            .find(|v| v["probes"].is_array())
            .unwrap();
        let results = results["probes"].as_array().unwrap();
        assert_eq!(results.len(), probes().len(), "every probe answered");
        let mut forbidden_messages = Vec::new();
        for ((probe, expect), got) in probes().iter().zip(results) {
            let err = got["err"].as_str();
            match expect {
                Expect::Forbidden => {
                    let e = err.unwrap_or_else(|| panic!("{probe} answered {got}"));
                    assert!(e.starts_with("forbidden: "), "{probe} -> {e}");
                    assert!(
                        !e.contains("b1") && !e.contains("no-such"),
                        "{probe} -> {e}"
                    );
                    forbidden_messages.push((probe.clone(), e.to_string()));
                }
                Expect::NotWatched => {
                    let e = err.unwrap_or_else(|| panic!("{probe} answered {got}"));
                    assert!(e.starts_with("not watched: "), "{probe} -> {e}");
                }
                Expect::Objects(want) => {
                    let keys: Vec<&str> = got["ok"]
                        .as_array()
                        .unwrap_or_else(|| panic!("{probe} failed: {got}"))
                        .iter()
                        .map(|k| k.as_str().unwrap())
                        .collect::<BTreeSet<_>>()
                        .into_iter()
                        .collect();
                    assert_eq!(keys, *want, "{probe}");
                }
            }
        }
        // An existing and a missing object in the other namespace are refused alike.
        assert_eq!(forbidden_messages[0].1, forbidden_messages[1].1);

        // The operator sees everything, so what the snoop did not see really was there.
        env.logs
            .wait_until("the operator's replay", || {
                env.logs.keys_of("operator", "op").contains("team-b/b2")
            })
            .await;

        // B keeps receiving all of its events, and nothing of a's.
        for i in 0..20 {
            env.server
                .create(object("team-b", &format!("b-live-{i}"), "b"))
                .unwrap();
            env.server
                .create(object("team-a", &format!("a-live-{i}"), "a"))
                .unwrap();
        }
        env.logs
            .wait_until("b's live events", || {
                env.logs.keys_of("b-echo", "b").contains("team-b/b-live-19")
            })
            .await;
        env.logs
            .wait_until("a's live events", || {
                env.logs
                    .keys_of("a-snoop", "snoop")
                    .contains("team-a/a-live-19")
            })
            .await;
        let b_seen = env.logs.keys_of("b-echo", "b");
        let want_b: BTreeSet<String> = ["team-b/b1".to_string(), "team-b/b2".to_string()]
            .into_iter()
            .chain((0..20).map(|i| format!("team-b/b-live-{i}")))
            .collect();
        assert_eq!(b_seen, want_b, "b sees exactly its own objects");
        let a_seen = env.logs.keys_of("a-snoop", "snoop");
        assert!(
            a_seen
                .iter()
                .all(|k| k.starts_with("team-a/") || k.starts_with("team-a-dev/")),
            "a was shown another tenant's object: {a_seen:?}"
        );
        assert_eq!(a_seen.len(), 3 + 20);
        env.host.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_time_tricks_are_refused_and_the_victim_keeps_running() {
    guarded("tenancy refusals", async {
        let mut cfg = host_config();
        cfg.tenancy.operator_plugins = false;
        let env = PluginEnv::start(cfg).await;
        create_namespaces(&env.server, &["team-a", "team-a-dev", "team-b", "team-c"]);
        env.server.create(object("team-b", "b1", "b")).unwrap();
        env.install(Some("b"), "b-echo", "hostile", &echo_manifest("b"));
        // Tenant b may run one plugin: a second one is over quota.
        env.install(Some("b"), "b-extra", "hostile", &echo_manifest("b2"));
        let watch = |extra: &str| {
            format!("[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n{extra}[config]\nmode = \"echo\"\n")
        };
        let refusals: Vec<(&str, String, &[&str])> = vec![
            ("claims-b", format!("tenant = \"b\"\n{}", watch("")), &["field `tenant`", "directory it sits in"]),
            ("b-namespace", watch("namespace = \"team-b\"\n"), &["watch[0]", "namespace `team-b` is outside", "tenant `a`"]),
            (
                "cluster",
                "[[watch]]\napi-version = \"v1\"\nkind = \"Namespace\"\n[config]\nmode = \"echo\"\n".into(),
                &["`v1/Namespace` is cluster-scoped", "tenant `a`"],
            ),
            (
                "deployments",
                "[[watch]]\napi-version = \"apps/v1\"\nkind = \"Deployment\"\n[config]\nmode = \"echo\"\n".into(),
                &["`apps/v1/Deployment` is not among the resources tenant `a` was granted"],
            ),
            (
                "greedy",
                format!("[limits]\nmemory-mib = 64\n{}", watch("")),
                &["limits.memory-mib", "above tenant `a`'s ceiling of 32 MiB"],
            ),
            // Matched by the glob `team-a-*`, but no namespace: it used to get 404s for ever.
            (
                "dotdot",
                watch("namespace = \"team-a-x/../team-b\"\n"),
                &["field `watch[0].namespace`", "not a namespace name", "`/`"],
            ),
            (
                "many-watches",
                "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n".repeat(300)
                    + "[config]\nmode = \"echo\"\n",
                &["field `watch`", "300 [[watch]] tables", "at most 16", "limits.max-watches"],
            ),
            (
                "many-indexes",
                watch(&format!(
                    "[watch.indexes]\n{}",
                    (0..200).map(|i| format!("i{i} = \"data.k{i}\"\n")).collect::<String>()
                )),
                &["watch.indexes", "200 field indexes", "at most 16", "max-field-indexes"],
            ),
        ];
        for (name, manifest, _) in &refusals {
            env.install(Some("a"), name, "hostile", manifest);
        }
        // Links: to b's plugin from a's directory, a tenant directory that is a link to b's,
        // and an operator-level plugin (the operator's are disabled here).
        let dir = env.dir();
        std::os::unix::fs::symlink(dir.join("b/b-echo.wasm"), dir.join("a/stolen.wasm")).unwrap();
        std::os::unix::fs::symlink(dir.join("b/b-echo.toml"), dir.join("a/stolen.toml")).unwrap();
        std::os::unix::fs::symlink(dir.join("b"), dir.join("a-twin")).unwrap();
        env.install(None, "top", "hostile", &echo_manifest("top"));
        // A sparse 64 GiB component: it used to be allocated by its claimed length, aborting
        // the host.
        std::fs::File::create(dir.join("a/huge.wasm"))
            .unwrap()
            .set_len(64 << 30)
            .unwrap();
        std::fs::write(dir.join("a/huge.toml"), watch("")).unwrap();

        let report = env.reconcile().await;
        assert_eq!(report.loaded, vec![id("b", "b-echo")]);
        let error_of = |id: &PluginId| -> String {
            report
                .errors
                .iter()
                .find(|(i, _)| i == id)
                .map(|(_, e)| e.to_string())
                .unwrap_or_else(|| panic!("no error for {id}: {:?}", report.errors))
        };
        for (name, _, needles) in &refusals {
            let e = error_of(&id("a", name));
            assert!(e.contains(&format!("a/{name}.toml")), "names the file: {e}");
            for n in *needles {
                assert!(e.contains(n), "{name}: `{e}` lacks `{n}`");
            }
        }
        let e = error_of(&id("a", "stolen"));
        assert!(e.contains("link") && e.contains("outside tenant `a`'s directory"), "{e}");
        let e = error_of(&id("a", "huge"));
        assert!(
            e.contains("a/huge.wasm") && e.contains("68719476736 bytes") && e.contains("limits.max-wasm-mib"),
            "{e}"
        );
        let e = error_of(&id("a-twin", "*"));
        assert!(e.contains("tenant directory `a-twin` is a link"), "{e}");
        let e = error_of(&id("b", "b-extra"));
        assert!(e.contains("maximum of 1 plugins"), "{e}");
        let e = error_of(&id("", "top"));
        assert!(e.contains("operator-plugins = true"), "{e}");
        assert!(
            report
                .errors
                .iter()
                .all(|(_, e)| matches!(e, PluginError::Refused { .. } | PluginError::Manifest { .. })),
            "{:?}",
            report.errors
        );

        // Nothing was opened for the refused manifests: one ConfigMap informer, no index.
        let informers = env.factory.informers();
        assert_eq!(informers.len(), 1, "{:?}", informers.iter().map(|i| i.description()).collect::<Vec<_>>());
        assert_eq!(informers[0].store().field_index_count(), 0);

        // The victim is unaffected: it keeps receiving all of its events.
        for i in 0..10 {
            env.server
                .create(object("team-b", &format!("live-{i}"), "b"))
                .unwrap();
        }
        env.logs
            .wait_until("b's events", || {
                env.logs.keys_of("b-echo", "b").len() == 11
            })
            .await;
        assert_eq!(env.host.status().len(), 1, "nothing else was loaded");
        env.host.shutdown().await;
    })
    .await;
}

/// Tenant a may see cluster-scoped objects and declares few indexes; b holds the secrets.
const ODD_CONFIG: &str = r#"
[tenants.a]
namespaces = ["team-a", "team-a-*"]
resources = ["v1/ConfigMap"]
cluster-scoped = true
max-field-indexes = 2
[tenants.b]
namespaces = ["team-b"]
resources = ["v1/ConfigMap"]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_spelling_of_a_key_or_an_index_crosses_a_grant() {
    guarded("odd spellings", async {
        let cfg = config::parse(ODD_CONFIG, Path::new("informant.toml")).unwrap();
        let env = PluginEnv::start(cfg).await;
        create_namespaces(&env.server, &["team-a", "team-a-dev", "team-b", "team-c"]);
        env.server.create(object("team-a", "a1", "a")).unwrap();
        env.server.create(object("team-b", "b1", "b")).unwrap();
        // b declares `color` first, as something else than a's `color`, plus one of its own.
        let b_manifest = "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[watch.indexes]\ncolor = \"metadata.name\"\nb-only = \"data.color\"\n[config]\nmode = \"echo\"\ntag = \"b\"\n";
        env.install(Some("b"), "b-echo", "hostile", b_manifest);
        let report = env.reconcile().await;
        assert_eq!(report.loaded, vec![id("b", "b-echo")], "{:?}", report.errors);

        let probes = [
            // The name of b's object spelled as a cluster-scoped name.
            json!({"op": "get", "name": "team-b/b1"}),
            json!({"op": "get", "namespace": "team-a-x/../team-b", "name": "b1"}),
            json!({"op": "list", "namespace": "team-a-x/../team-b"}),
            json!({"op": "get", "namespace": "team-a", "name": "../team-b/b1"}),
            json!({"op": "by-index", "index": "color", "value": "blue"}),
            json!({"op": "by-index", "index": "b-only", "value": "blue"}),
            json!({"op": "by-index", "index": "namespace", "value": ""}),
            json!({"op": "list"}),
        ];
        let mut manifest = String::from(
            "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[watch.indexes]\ncolor = \"data.color\"\n[config]\nmode = \"snoop\"\ntag = \"snoop\"\n",
        );
        for p in &probes {
            manifest.push_str("[[config.probes]]\n");
            for (k, v) in p.as_object().unwrap() {
                manifest.push_str(&format!("{k} = {v}\n"));
            }
        }
        env.install(Some("a"), "a-snoop", "hostile", &manifest);
        // Two more indexes would take tenant a over its ceiling of 2.
        let more = "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[watch.indexes]\nx = \"data.x\"\ny = \"data.y\"\n[config]\nmode = \"echo\"\n";
        env.install(Some("a"), "z-more", "hostile", more);
        let report = env.reconcile().await;
        assert_eq!(report.loaded, vec![id("a", "a-snoop")], "a's `color` does not collide with b's");
        let (_, e) = &report.errors[0];
        assert!(
            e.to_string().contains("would declare 3 field indexes together; at most 2"),
            "{e}"
        );

        env.server.create(object("team-a", "probe", "a")).unwrap();
        env.logs
            .wait_until("the snoop's probe results", || {
                env.logs.json_of("a-snoop").iter().any(|v| v["probes"].is_array())
            })
            .await;
        let lines = env.logs.json_of("a-snoop");
        let results = lines.iter().find(|v| v["probes"].is_array()).unwrap()["probes"]
            .as_array()
            .unwrap()
            .clone();
        let err = |i: usize| results[i]["err"].as_str().unwrap_or_else(|| panic!("{}: {}", probes[i], results[i])).to_string();
        let ok = |i: usize| -> Vec<String> {
            let mut keys: Vec<String> = results[i]["ok"]
                .as_array()
                .unwrap_or_else(|| panic!("{}: {}", probes[i], results[i]))
                .iter()
                .map(|k| k.as_str().unwrap().to_string())
                .collect();
            keys.sort();
            keys
        };
        assert!(err(0).starts_with("forbidden: `team-b/b1` is not an object name"), "{}", err(0));
        assert!(err(1).starts_with("forbidden: `team-a-x/../team-b` is not a namespace name"), "{}", err(1));
        assert!(err(2).contains("not a namespace name"), "{}", err(2));
        assert!(err(3).contains("is not an object name"), "{}", err(3));
        assert_eq!(ok(4), ["team-a/a1", "team-a/probe"], "a's own `color`, not b's");
        assert_eq!(
            err(5),
            "unknown index: unknown index `b-only` (this plugin's indexes on `ConfigMap`: namespace, label, owner, color)",
            "nothing of b's indexes shows"
        );
        assert_eq!(ok(6), Vec::<String>::new());
        assert_eq!(ok(7), ["team-a/a1", "team-a/probe"]);

        // b still gets its events, and its `color` answers by its own definition.
        env.server.create(object("team-b", "b2", "b")).unwrap();
        env.logs
            .wait_until("b's live event", || {
                env.logs.keys_of("b-echo", "b").contains("team-b/b2")
            })
            .await;
        env.host.shutdown().await;
        // Unloaded plugins let go of their indexes.
        for informer in env.factory.informers() {
            assert_eq!(informer.store().field_index_count(), 0, "{}", informer.description());
        }
    })
    .await;
}

/// A hard link in a's directory to b's component (or to the operator's) would run someone
/// else's code under a's grant: it is refused, since the file is not owned by the owner of a's
/// directory. And it freezes nothing: b's own name, in the directory b owns, keeps loading, and
/// b's update (written in place, through the very file a links to) is loaded. Needs files of
/// two owners (root); skips, saying so, otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hard_link_to_another_tenants_plugin_neither_loads_nor_freezes_it() {
    guarded("hard links", async {
        let env = PluginEnv::start(host_config()).await;
        let dir = env.dir();
        let probe = dir.join("probe");
        std::fs::write(&probe, b"").unwrap();
        let can_chown = std::os::unix::fs::chown(&probe, Some(4242), None).is_ok();
        std::fs::remove_file(&probe).unwrap();
        if !can_chown {
            eprintln!("skipped: needs to chown files to another uid (run as root)");
            return;
        }
        let chown = |path: &Path, uid: u32| std::os::unix::fs::chown(path, Some(uid), None).unwrap();
        let (a_uid, b_uid) = (4001, 4002);
        create_namespaces(&env.server, &["team-a", "team-a-dev", "team-b", "team-c"]);
        env.server.create(object("team-b", "b1", "b")).unwrap();
        env.install(Some("b"), "b-echo", "hostile", &echo_manifest("b"));
        env.install(None, "op", "hostile", &echo_manifest("op"));
        std::fs::create_dir_all(dir.join("a")).unwrap();
        chown(&dir.join("a"), a_uid);
        for p in ["b", "b/b-echo.wasm", "b/b-echo.toml"] {
            chown(&dir.join(p), b_uid);
        }
        let mut loaded = env.reconcile().await.loaded;
        loaded.sort();
        assert_eq!(loaded, vec![id("", "op"), id("b", "b-echo")]);

        for (twin, target) in [("twin", "b/b-echo.wasm"), ("op-twin", "op.wasm")] {
            std::fs::hard_link(dir.join(target), dir.join(format!("a/{twin}.wasm"))).unwrap();
            std::fs::write(dir.join(format!("a/{twin}.toml")), echo_manifest(twin)).unwrap();
            chown(&dir.join(format!("a/{twin}.toml")), a_uid);
        }
        let report = env.reconcile().await;
        assert!(report.loaded.is_empty(), "{:?}", report.loaded);
        let mut refused: Vec<&PluginId> = report.errors.iter().map(|(i, _)| i).collect();
        refused.sort();
        assert_eq!(refused, [&id("a", "op-twin"), &id("a", "twin")], "{:?}", report.errors);
        for (who, owner) in [(id("a", "twin"), b_uid), (id("a", "op-twin"), 0)] {
            let (_, e) = report.errors.iter().find(|(i, _)| *i == who).unwrap();
            let expected = format!(
                "it has 2 hard links and is owned by uid {owner}, not by uid {a_uid} who owns tenant `a`'s directory"
            );
            assert!(e.to_string().contains(&expected), "{e}");
        }

        // b updates its plugin in place, through the file a's link shares: it loads.
        let wasm = std::fs::read(dir.join("b/b-echo.wasm")).unwrap();
        std::fs::write(dir.join("b/b-echo.wasm"), &wasm).unwrap();
        std::fs::write(dir.join("b/b-echo.toml"), echo_manifest("b-v2")).unwrap();
        let report = env.reconcile().await;
        assert_eq!(report.replaced, vec![id("b", "b-echo")], "{:?}", report.errors);
        env.server.create(object("team-b", "b2", "b")).unwrap();
        env.logs
            .wait_until("b's updated version's live event", || {
                env.logs.keys_of("b-echo", "b-v2").contains("team-b/b2")
            })
            .await;
        let mut running: Vec<PluginId> = env
            .host
            .status()
            .into_iter()
            .map(|s| id(&s.tenant, &s.name))
            .collect();
        running.sort();
        assert_eq!(running, vec![id("", "op"), id("b", "b-echo")]);
        env.host.shutdown().await;
    })
    .await;
}

/// One account owning every directory (as here, the test's own): a's hard link to b's plugin
/// is refused in a's directory, saying why, in the reconcile's report and in `/plugins`; so is
/// b's own name, since its owner cannot tell the two names apart (b's running version keeps
/// running); once the link is gone, b's files load again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_one_owner_for_every_directory_a_hard_link_to_another_tenants_plugin_is_refused() {
    guarded("a hard link under one owner", async {
        let env = PluginEnv::start(host_config()).await;
        let dir = env.dir();
        create_namespaces(&env.server, &["team-a", "team-b"]);
        env.install(Some("b"), "b-echo", "hostile", &echo_manifest("b"));
        std::fs::create_dir_all(dir.join("a")).unwrap();
        assert_eq!(env.reconcile().await.loaded, [id("b", "b-echo")]);

        std::fs::hard_link(dir.join("b/b-echo.wasm"), dir.join("a/twin.wasm")).unwrap();
        std::fs::write(dir.join("a/twin.toml"), echo_manifest("twin")).unwrap();
        let report = env.reconcile().await;
        assert!(report.loaded.is_empty(), "{:?}", report.loaded);
        let refused: Vec<&PluginId> = report.errors.iter().map(|(i, _)| i).collect();
        assert_eq!(refused, [&id("a", "twin"), &id("b", "b-echo")], "{:?}", report.errors);
        // As `/plugins` lists them.
        let status: Vec<Value> = env
            .host
            .status()
            .iter()
            .chain(&env.host.refused())
            .map(|s| serde_json::to_value(s).unwrap())
            .collect();
        let of = |tenant: &str, name: &str| {
            status
                .iter()
                .find(|s| s["tenant"] == tenant && s["name"] == name)
                .unwrap_or_else(|| panic!("{tenant}/{name} not in {status:?}"))
                .clone()
        };
        let (twin, b) = (of("a", "twin"), of("b", "b-echo"));
        assert_eq!(twin["state"], "refused", "{twin}");
        assert_eq!(b["state"], "running", "b's loaded version keeps running: {b}");
        for (who, s) in [("a", &twin), ("b", &b)] {
            let reason = s["refused"].as_str().unwrap_or_default();
            assert!(
                reason.contains("it has 2 hard links, and uid")
                    && reason.contains(&format!(
                        "who owns tenant `{who}`'s directory, owns the plugins directory's top level too"
                    ))
                    && reason.contains("copy the file instead of linking it"),
                "{reason}"
            );
        }

        std::fs::remove_file(dir.join("a/twin.wasm")).unwrap();
        std::fs::remove_file(dir.join("a/twin.toml")).unwrap();
        std::fs::write(dir.join("b/b-echo.toml"), echo_manifest("b-v2")).unwrap();
        let report = env.reconcile().await;
        assert_eq!(report.replaced, [id("b", "b-echo")], "{:?}", report.errors);
        assert!(env.host.status().iter().all(|s| s.refused.is_none()));
        assert!(env.host.refused().is_empty(), "{:?}", env.host.refused());
        env.host.shutdown().await;
    })
    .await;
}

/// a keeps a link to b's directory in its own while the host starts, then removes it (a
/// recursive watch shared one kernel watch between the link and b's directory, and lost it
/// with the link). b's directory is still watched: b's new plugin, then its manifest change,
/// are picked up on their own, with no change anywhere else to wake the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_to_another_tenants_directory_removed_after_start_blinds_nothing() {
    guarded("a link planted and removed", async {
        let env = PluginEnv::start(host_config()).await;
        let dir = env.dir();
        create_namespaces(&env.server, &["team-a", "team-b"]);
        std::fs::create_dir_all(dir.join("a")).unwrap();
        std::fs::create_dir_all(dir.join("b")).unwrap();
        std::os::unix::fs::symlink(dir.join("b"), dir.join("a/b-link")).unwrap();
        env.reconcile().await;
        let (reports_tx, mut reports) = mpsc::unbounded_channel();
        let _reloader = Reloader::start(env.host.clone(), Some(reports_tx)).unwrap();

        std::fs::remove_file(dir.join("a/b-link")).unwrap();
        let report = reports.recv().await.unwrap();
        assert!(
            report.loaded.is_empty() && report.errors.is_empty(),
            "{report:?}"
        );

        env.install(Some("b"), "b-echo", "hostile", &echo_manifest("b"));
        // Written in two steps: a reconcile between them finds the pair incomplete.
        while !reports
            .recv()
            .await
            .unwrap()
            .loaded
            .contains(&id("b", "b-echo"))
        {}
        env.server.create(object("team-b", "b1", "b")).unwrap();
        env.logs
            .wait_until("b's plugin's event", || {
                env.logs.keys_of("b-echo", "b").contains("team-b/b1")
            })
            .await;
        std::fs::write(dir.join("b/b-echo.toml"), echo_manifest("b-v2")).unwrap();
        while !reports
            .recv()
            .await
            .unwrap()
            .replaced
            .contains(&id("b", "b-echo"))
        {}
        env.host.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_tenant_does_not_hold_up_another() {
    guarded("tenant starvation", async {
        const N: usize = 100;
        // Failures never quarantine here, so a's plugin spins to its deadline on every event.
        let cfg = HostConfig {
            restart: RestartPolicy {
                initial_backoff: Duration::from_millis(1),
                max_backoff: Duration::from_millis(1),
                quarantine_after: u32::MAX,
                healthy_after: 1,
            },
            ..host_config()
        };
        let env = PluginEnv::start(cfg).await;
        create_namespaces(&env.server, &["team-a", "team-a-dev", "team-b", "team-c"]);
        env.install(
            Some("a"),
            "a-spin",
            "hostile",
            "[limits]\ndeadline-ms = 200\n[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[config]\nmode = \"spin\"\n",
        );
        env.install(Some("b"), "b-echo", "hostile", &echo_manifest("b"));
        let report = env.reconcile().await;
        assert!(report.errors.is_empty(), "{:?}", report.errors);

        // Interleaved writes: every one of b's events arrives behind one of a's.
        for i in 0..N {
            env.server
                .create(object("team-a", &format!("a-{i}"), "a"))
                .unwrap();
            env.server
                .create(object("team-b", &format!("b-{i}"), "b"))
                .unwrap();
        }
        env.logs
            .wait_until("all of b's events", || {
                env.logs.keys_of("b-echo", "b").len() == N
            })
            .await;
        // a needs N x 200 ms = 20 s for its queue; b is done while a is still far behind.
        let spin = env.host.supervisor(&id("a", "a-spin")).unwrap();
        let a_done = (spin.handled() + spin.failed()) as usize;
        let a_backlog: usize = env
            .host
            .status()
            .iter()
            .find(|s| s.name == "a-spin")
            .map(|s| s.backlog)
            .unwrap();
        assert!(
            a_done < N && a_backlog > 0,
            "b finished while a had handled {a_done} of {N} (backlog {a_backlog})"
        );
        // And a does spin to its deadline. Failure counts have no change signal: poll them
        // (the condition is the point; the interval only spares the CPU).
        while spin.failed() == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        env.host.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_tenant_is_paced_by_its_budget_and_loses_nothing() {
    guarded("tenant rate budget", async {
        // More distinct keys than the budget's burst: keys never coalesce with each other, so
        // at least KEYS calls must be paced.
        const KEYS: usize = 25;
        const ROUNDS: usize = 8;
        const PER_SECOND: u64 = 10;
        // The budget is a tenant setting: give a a small one on top of the shared config.
        let text = CONFIG.replace(
            "max-memory-mib = 32\n",
            &format!("max-memory-mib = 32\nevents-per-second = {PER_SECOND}\n"),
        );
        let env =
            PluginEnv::start(config::parse(&text, Path::new("informant.toml")).unwrap()).await;
        create_namespaces(&env.server, &["team-a", "team-a-dev", "team-b", "team-c"]);
        env.install(Some("a"), "a-echo", "hostile", &echo_manifest("a"));
        env.install(Some("b"), "b-echo", "hostile", &echo_manifest("b"));
        let report = env.reconcile().await;
        assert!(report.errors.is_empty(), "{:?}", report.errors);

        let mut last_rv = std::collections::BTreeMap::new();
        let started = std::time::Instant::now();
        for round in 0..ROUNDS {
            for k in 0..KEYS {
                for ns in ["team-a", "team-b"] {
                    let mut o = object(ns, &format!("k{k}"), "x");
                    o["data"]["round"] = json!(round.to_string());
                    let written = if round == 0 {
                        env.server.create(o).unwrap()
                    } else {
                        env.server.update(o).unwrap()
                    };
                    let rv = written["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap()
                        .to_string();
                    last_rv.insert(format!("{ns}/k{k}"), rv);
                }
            }
        }
        let reached = |plugin: &str, tag: &str, ns: &str| {
            let lines = env.logs.json_of(plugin);
            last_rv
                .iter()
                .filter(|(k, _)| k.starts_with(&format!("{ns}/")))
                .all(|(k, rv)| {
                    lines.iter().any(|v| {
                        v["tag"] == tag && v["key"] == k.as_str() && v["rv"] == rv.as_str()
                    })
                })
        };
        env.logs
            .wait_until("b's final states", || reached("b-echo", "b", "team-b"))
            .await;
        env.logs
            .wait_until("a's final states, paced", || {
                reached("a-echo", "a", "team-a")
            })
            .await;
        let paced_for = started.elapsed();
        let a_calls = env.logs.json_of("a-echo").len() as u64;
        assert!(
            a_calls < (KEYS * ROUNDS) as u64,
            "over budget, a's queue coalesces: {a_calls} calls for {} updates",
            KEYS * ROUNDS
        );
        // A bucket of PER_SECOND tokens a second with a burst of PER_SECOND cannot have allowed
        // more calls than that in the time taken (a lower bound: a slow machine only adds time).
        let least = Duration::from_millis(1000 * a_calls.saturating_sub(PER_SECOND) / PER_SECOND);
        assert!(
            a_calls >= KEYS as u64 && paced_for >= least,
            "{a_calls} calls in {paced_for:?}: the budget allows them in no less than {least:?}"
        );
        env.host.shutdown().await;
    })
    .await;
}

/// Publishes `text` as the kubelet updates a mounted ConfigMap: the file is a link through
/// `..data`, and an update writes a new directory and swaps `..data` to it by a rename, so no
/// event names `informant.toml` itself.
fn kubelet_publish(dir: &Path, text: &str, generation: u32) {
    let data = format!("..2026_11_21_{generation}");
    std::fs::create_dir(dir.join(&data)).unwrap();
    std::fs::write(dir.join(&data).join("informant.toml"), text).unwrap();
    std::os::unix::fs::symlink(&data, dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    let file = dir.join("informant.toml");
    if std::fs::symlink_metadata(&file).is_err() {
        std::os::unix::fs::symlink("..data/informant.toml", file).unwrap();
    }
}

/// Writes `text` to `path` as editors do: a new file renamed over the old one.
fn replace_file(path: &Path, text: &str) {
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

async fn next_report(reports: &mut mpsc::UnboundedReceiver<ReconcileReport>) -> ReconcileReport {
    tokio::time::timeout(GUARD, reports.recv())
        .await
        .expect("timed out waiting for the config reload")
        .expect("the config watcher ended")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_config_applies_without_a_restart_to_exactly_the_tenants_it_changes() {
    guarded("config reload", async {
        let config_dir = tempfile::tempdir().unwrap();
        let path = config_dir.path().join("informant.toml");
        kubelet_publish(config_dir.path(), CONFIG, 1);
        let env = PluginEnv::start(config::load(&path).unwrap()).await;
        create_namespaces(&env.server, &["team-a", "team-a-dev", "team-b", "team-c"]);
        for team in ["a", "b", "c"] {
            let ns = format!("team-{team}");
            env.server
                .create(object(&ns, &format!("{team}1"), team))
                .unwrap();
            env.install(
                Some(team),
                &format!("{team}-echo"),
                "hostile",
                &echo_manifest(team),
            );
        }
        let report = env.reconcile().await;
        assert_eq!(report.loaded, vec![id("a", "a-echo"), id("b", "b-echo")]);
        let b_version = env.host.supervisor(&id("b", "b-echo")).unwrap();
        let (tx, mut reports) = mpsc::unbounded_channel();
        let _watcher = ConfigWatcher::start(&path, env.host.clone(), Some(tx)).unwrap();

        // A config that does not validate changes nothing.
        let overlapping = format!("{CONFIG}[tenants.c]\nnamespaces = [\"team-b\"]\n");
        kubelet_publish(config_dir.path(), &overlapping, 2);
        let r = next_report(&mut reports).await;
        let e = r
            .config_error
            .as_deref()
            .expect("the overlapping grant is refused");
        assert!(
            e.contains("informant.toml")
                && e.contains("tenants.c.namespaces")
                && e.contains("overlaps"),
            "{e}"
        );
        assert!(
            r.loaded.is_empty() && r.removed.is_empty() && r.replaced.is_empty(),
            "{r:?}"
        );

        // Tenant a revoked, c granted, b unchanged.
        let granted_c = r#"
operator-plugins = true
[tenants.b]
namespaces = ["team-b"]
resources = ["v1/ConfigMap"]
max-plugins = 1
[tenants.c]
namespaces = ["team-c"]
"#;
        kubelet_publish(config_dir.path(), granted_c, 3);
        let r = next_report(&mut reports).await;
        assert_eq!(r.config_error, None);
        assert_eq!(r.loaded, vec![id("c", "c-echo")], "{r:?}");
        assert_eq!(r.removed, vec![id("a", "a-echo")], "{r:?}");
        assert!(r.replaced.is_empty(), "b's plugin is not touched: {r:?}");
        let (_, e) = r
            .errors
            .iter()
            .find(|(i, _)| *i == id("a", "a-echo"))
            .unwrap();
        assert!(e.to_string().contains("tenant `a` has no grant"), "{e}");
        assert!(std::sync::Arc::ptr_eq(
            &b_version,
            &env.host.supervisor(&id("b", "b-echo")).unwrap()
        ));
        for team in ["a", "b", "c"] {
            env.server
                .create(object(&format!("team-{team}"), &format!("{team}2"), team))
                .unwrap();
        }
        let keys = |plugin: &str, tag: &str| env.logs.keys_of(plugin, tag);
        env.logs
            .wait_until("b's and c's new objects", || {
                keys("b-echo", "b").len() == 2 && keys("c-echo", "c").len() == 2
            })
            .await;
        assert_eq!(
            keys("c-echo", "c"),
            BTreeSet::from(["team-c/c1".into(), "team-c/c2".into()])
        );
        let b_lines = env.logs.json_of("b-echo");
        assert_eq!(
            b_lines.iter().filter(|v| v["key"] == "team-b/b1").count(),
            1,
            "no second replay for b"
        );
        assert!(
            !keys("a-echo", "a").contains("team-a/a2"),
            "a's plugin stopped with its grant"
        );

        // From here edited in place, as on a host: the link is replaced by a file.
        // Narrowed: c's grant no longer covers the ConfigMaps its plugin watches, so the running
        // version goes too rather than keep the access it was loaded with.
        replace_file(
            &path,
            &granted_c.replace(
                "namespaces = [\"team-c\"]",
                "namespaces = [\"team-c\"]\nresources = [\"apps/v1/*\"]",
            ),
        );
        let r = next_report(&mut reports).await;
        assert_eq!(r.config_error, None);
        assert_eq!(r.removed, vec![id("c", "c-echo")], "{r:?}");
        let (_, e) = r
            .errors
            .iter()
            .find(|(i, _)| *i == id("c", "c-echo"))
            .unwrap();
        assert!(
            e.to_string()
                .contains("`v1/ConfigMap` is not among the resources tenant `c` was granted"),
            "{e}"
        );
        let running: Vec<PluginId> = env.host.running().into_iter().map(|r| r.id).collect();
        assert_eq!(running, vec![id("b", "b-echo")]);

        // Raising the memory ceiling past what the engine was sized for needs a restart.
        replace_file(
            &path,
            &format!("{granted_c}[limits]\nmax-memory-mib = 4096\n"),
        );
        let r = next_report(&mut reports).await;
        let e = r.config_error.expect("refused");
        assert!(
            e.contains("limits.max-memory-mib") && e.contains("needs a restart"),
            "{e}"
        );
        env.host.shutdown().await;
    })
    .await;
}
