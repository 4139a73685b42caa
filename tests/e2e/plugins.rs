//! Real compiled plugins against the embedded API server: containment of hostile plugins, bad
//! input, hot reload under load, and the example plugins.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use informant_runtime::plugin::load::host_config::HostConfig;

use informant_runtime::plugin::id::PluginId;

use informant_runtime::plugin::exec::supervisor::PluginState;

use informant_runtime::plugin::load::status::ReconcileReport;

use informant_runtime::plugin::load::reload::Reloader;
use informant_tests::plugins::{PluginEnv, fast_restarts as quick_restart_policy};
use informant_tests::{configmap, create_namespaces, guarded};

fn fast_restarts() -> HostConfig {
    HostConfig {
        restart: quick_restart_policy(),
        ..Default::default()
    }
}

fn hostile(mode: &str, tag: &str) -> String {
    format!(
        "[limits]\ndeadline-ms = 50\nmemory-mib = 16\n[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[config]\nmode = \"{mode}\"\ntag = \"{tag}\"\n"
    )
}

fn id(name: &str) -> PluginId {
    PluginId {
        tenant: String::new(),
        name: name.into(),
    }
}

/// `(key, rv)` of every echo line with this tag, in log order.
fn echoed(env: &PluginEnv, plugin: &str, tag: &str) -> Vec<(String, u64, bool)> {
    env.logs
        .json_of(plugin)
        .iter()
        .filter(|v| v["tag"] == tag)
        .map(|v| {
            (
                v["key"].as_str().unwrap_or_default().to_string(),
                v["rv"].as_str().and_then(|r| r.parse().ok()).unwrap_or(0),
                v["initial"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

/// The next reload report satisfying `pred`. Earlier ones (a reconcile that ran between two file
/// writes, or an idempotent extra one) may only report errors, never load, swap or remove.
async fn report_where(
    reports: &mut tokio::sync::mpsc::UnboundedReceiver<ReconcileReport>,
    what: &str,
    pred: impl Fn(&ReconcileReport) -> bool,
) -> ReconcileReport {
    loop {
        let report = guarded(what, reports.recv())
            .await
            .expect("reloader running");
        if pred(&report) {
            return report;
        }
        assert!(
            report.loaded.is_empty() && report.replaced.is_empty() && report.removed.is_empty(),
            "unexpected while waiting for {what}: {report:?}"
        );
    }
}

async fn wait_state(env: &PluginEnv, name: &str, want: PluginState) {
    let sup = env.host.supervisor(&id(name)).expect("plugin loaded");
    let mut rx = sup.subscribe_state();
    guarded(
        &format!("{name} to be {want:?}"),
        rx.wait_for(|s| *s == want),
    )
    .await
    .expect("state channel");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_plugins_are_contained_and_others_receive_every_event() {
    let env = PluginEnv::start(fast_restarts()).await;
    create_namespaces(&env.server, &["a", "load"]);
    env.install(None, "echo", "hostile", &hostile("echo", "echo"));
    env.install(None, "spin", "hostile", &hostile("spin", "spin"));
    env.install(None, "hog", "hostile", &hostile("hog", "hog"));
    env.install(None, "flaky", "hostile", &hostile("flaky", "flaky"));
    env.install(None, "keep", "hostile", &hostile("keep", "keep"));
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.loaded.len(), 5);

    for i in 0..12 {
        env.server
            .create(configmap("a", &format!("cm{i}"), "v"))
            .unwrap();
    }
    env.logs
        .wait_until("echo to see all 12 objects", || {
            echoed(&env, "echo", "echo")
                .iter()
                .map(|e| e.0.clone())
                .collect::<BTreeSet<_>>()
                .len()
                == 12
        })
        .await;
    let echo = echoed(&env, "echo", "echo");
    assert_eq!(echo.len(), 12, "each object exactly once: {echo:?}");

    wait_state(&env, "spin", PluginState::Quarantined).await;
    wait_state(&env, "hog", PluginState::Quarantined).await;
    wait_state(&env, "flaky", PluginState::Quarantined).await;
    // An object handle lives for its own call only: used later, it is a trap, not a read.
    wait_state(&env, "keep", PluginState::Quarantined).await;
    let status: BTreeMap<String, _> = env
        .host
        .status()
        .into_iter()
        .map(|s| (s.name.clone(), s))
        .collect();
    assert!(
        status["spin"]
            .last_error
            .as_deref()
            .unwrap()
            .contains("deadline"),
        "{:?}",
        status["spin"]
    );
    assert!(
        status["hog"]
            .last_error
            .as_deref()
            .unwrap()
            .contains("trapped"),
        "{:?}",
        status["hog"]
    );
    assert!(
        status["flaky"]
            .last_error
            .as_deref()
            .unwrap()
            .contains("trapped"),
        "{:?}",
        status["flaky"]
    );
    assert!(
        status["flaky"].handled >= 2,
        "flaky handled some events between traps: {:?}",
        status["flaky"]
    );
    let keep = &status["keep"];
    let error = keep.last_error.as_deref().unwrap();
    assert!(
        error.contains("trapped") && error.contains("after its event was done"),
        "{keep:?}"
    );
    assert!(keep.handled >= 2, "{keep:?}");
    assert_eq!(status["echo"].state, PluginState::Running);
    assert_eq!(status["echo"].failed, 0);

    // The quarantined ones stay out of the way: later events still reach echo at once.
    env.server.create(configmap("a", "late", "v")).unwrap();
    env.logs
        .wait_until("echo to see the late object", || {
            echoed(&env, "echo", "echo").iter().any(|e| e.0 == "a/late")
        })
        .await;
}

/// Events a plugin keeps past their turn are its own memory, not the host's: before WIT 0.7.0
/// each held an `object` handle in the host's table, and a cap had to stop a hoarder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_hoarding_events_holds_nothing_of_the_hosts() {
    let env = PluginEnv::start(fast_restarts()).await;
    create_namespaces(&env.server, &["a", "load"]);
    env.install(None, "hoard", "hostile", &hostile("hoard", "hoard"));
    env.install(None, "echo", "hostile", &hostile("echo", "echo"));
    env.reconcile().await;
    let n = 2_000;
    env.server
        .seed((0..n).map(|i| configmap("a", &format!("cm{i}"), "v")))
        .unwrap();
    // One more after them: the hoarder takes it only once it reported how the others ended.
    env.logs
        .wait_until("both plugins to see every object", || {
            echoed(&env, "hoard", "hoard").len() == n && echoed(&env, "echo", "echo").len() == n
        })
        .await;
    env.server.create(configmap("a", "last", "v")).unwrap();
    env.logs
        .wait_until("both plugins to see the last object", || {
            echoed(&env, "hoard", "hoard").len() == n + 1
                && echoed(&env, "echo", "echo").len() == n + 1
        })
        .await;
    let hoard = env.host.supervisor(&id("hoard")).unwrap();
    assert!(hoard.handled() >= n as u64, "{}", hoard.handled());
    assert_eq!(hoard.failed(), 0, "{:?}", hoard.last_error());
    assert_eq!(hoard.state(), PluginState::Running);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wasi_grants_nothing() {
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["a", "load"]);
    env.install(None, "fs", "hostile", &hostile("fs", "fs"));
    env.reconcile().await;
    env.server.create(configmap("a", "x", "v")).unwrap();
    env.logs
        .wait_until("the fs probe", || !env.logs.json_of("fs").is_empty())
        .await;
    let line = &env.logs.json_of("fs")[0];
    assert!(
        line["fs"].as_str().unwrap().starts_with("Err("),
        "no filesystem: {line}"
    );
    assert_eq!(line["env"], 0, "no environment: {line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_plugins_are_refused_with_clear_errors_and_the_host_keeps_running() {
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["a", "load"]);
    env.install(None, "good", "hostile", &hostile("echo", "good"));
    std::fs::write(
        env.dir().join("garbage.wasm"),
        b"\0asm\x01\0\0\0this is not a component",
    )
    .unwrap();
    std::fs::write(env.dir().join("garbage.toml"), hostile("echo", "x")).unwrap();
    env.install(
        None,
        "unknown-field",
        "hostile",
        &format!(
            "{}colour = \"red\"\n",
            hostile("echo", "x").replace("[config]", "[limits.x]\n[config]")
        ),
    );
    env.install(
        None,
        "bad-selector",
        "hostile",
        "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nlabel-selector = \"app in (web\"\n",
    );
    env.install(
        None,
        "unknown-kind",
        "hostile",
        "[[watch]]\napi-version = \"v1\"\nkind = \"Pdo\"\n",
    );
    std::fs::write(env.dir().join("lonely.toml"), hostile("echo", "x")).unwrap();
    // Its watch is set up before `init` fails: the refusal must not leave that informer behind.
    env.install(
        None,
        "init-fails",
        "hostile",
        "[[watch]]\napi-version = \"v1\"\nkind = \"Secret\"\n",
    );

    let report = env.reconcile().await;
    assert_eq!(report.loaded, vec![id("good")]);
    let errors: BTreeMap<String, String> = report
        .errors
        .iter()
        .map(|(i, e)| (i.to_string(), e.to_string()))
        .collect();
    for (plugin, needles) in [
        (
            "garbage",
            &["garbage.wasm", "not a valid WebAssembly component"][..],
        ),
        (
            "unknown-field",
            &["unknown-field.toml", "unknown field `x`"],
        ),
        (
            "bad-selector",
            &[
                "bad-selector.toml",
                "line 4",
                "invalid label selector `app in (web`",
            ],
        ),
        (
            "unknown-kind",
            &["unknown-kind", "unknown resource `v1` `Pdo`"],
        ),
        ("lonely", &["lonely.wasm", "missing the component"]),
        (
            "init-fails",
            &["init returned an error", "config `mode` is required"],
        ),
    ] {
        let e = errors
            .get(plugin)
            .unwrap_or_else(|| panic!("no error for {plugin}: {errors:?}"));
        for n in needles {
            assert!(e.contains(n), "{plugin}: `{e}` lacks `{n}`");
        }
    }
    let kinds: Vec<String> = env
        .factory
        .informers()
        .iter()
        .map(|i| i.store().api_resource().kind.clone())
        .collect();
    assert_eq!(kinds, ["ConfigMap"], "refused plugins hold no informer");
    env.server.create(configmap("a", "x", "v")).unwrap();
    env.logs
        .wait_until("the good plugin's event", || {
            !echoed(&env, "good", "good").is_empty()
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_reload_under_load_swaps_versions_without_loss_or_overlap() {
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["a", "load"]);
    env.install(None, "echo", "hostile", &hostile("echo", "v1"));
    env.reconcile().await;
    let (reports_tx, mut reports) = tokio::sync::mpsc::unbounded_channel();
    let _reloader = Reloader::start(env.host.clone(), Some(reports_tx)).unwrap();

    let keys = 1_000;
    let updates = 10_000;
    let swaps = [(updates / 3, "v2"), (2 * updates / 3, "v3")];
    let mut reports_seen = 0;
    let mut finals: BTreeMap<String, u64> = BTreeMap::new();
    let take_report = |report: ReconcileReport, seen: &mut usize| {
        assert!(
            report.errors.is_empty() && report.loaded.is_empty() && report.removed.is_empty(),
            "{report:?}"
        );
        // An extra reconcile from trailing file events finds nothing to do.
        if !report.replaced.is_empty() {
            assert_eq!(
                report.replaced,
                vec![id("echo")],
                "one swap per manifest change"
            );
            *seen += 1;
        }
    };
    // Paced (2 writes per ms) so the stream keeps flowing while each reload happens.
    let mut pace = tokio::time::interval(Duration::from_millis(1));
    for i in 0..updates {
        if let Some((n, (_, tag))) = swaps.iter().enumerate().find(|(_, (at, _))| *at == i) {
            // The previous swap must be done, so the two don't merge into one reload.
            while reports_seen < n {
                take_report(
                    guarded("the previous reload", reports.recv())
                        .await
                        .unwrap(),
                    &mut reports_seen,
                );
            }
            std::fs::write(env.dir().join("echo.toml"), hostile("echo", tag)).unwrap();
        }
        if let Ok(report) = reports.try_recv() {
            take_report(report, &mut reports_seen);
        }
        let key = format!("k{}", i % keys);
        let obj = configmap("load", &key, &i.to_string());
        let written = if i < keys {
            env.server.create(obj).unwrap()
        } else {
            env.server.update(obj).unwrap()
        };
        let rv = written["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        finals.insert(format!("load/{key}"), rv);
        if i % 2 == 0 {
            pace.tick().await;
        }
    }
    while reports_seen < 2 {
        take_report(
            guarded("the last reload", reports.recv()).await.unwrap(),
            &mut reports_seen,
        );
    }
    assert_eq!(
        reports_seen, 2,
        "the v2 swap happened mid-stream, not merged with v3"
    );

    assert_eq!(finals.len(), keys);
    env.logs
        .wait_until("v3 to reach the final state of every key", || {
            let mut last: BTreeMap<String, u64> = BTreeMap::new();
            for (k, rv, _) in echoed(&env, "echo", "v3") {
                last.insert(k, rv);
            }
            finals.iter().all(|(k, rv)| last.get(k) == Some(rv))
        })
        .await;

    // Versions never overlap: after a version's first line, no older version speaks again.
    let order: Vec<String> = env
        .logs
        .json_of("echo")
        .iter()
        .map(|v| v["tag"].as_str().unwrap_or_default().to_string())
        .collect();
    for (old, new) in [("v1", "v2"), ("v2", "v3"), ("v1", "v3")] {
        let first_new = order
            .iter()
            .position(|t| t == new)
            .expect("new version spoke");
        assert!(
            !order[first_new..].iter().any(|t| t == old),
            "{old} handled an event after {new} took over"
        );
    }
    // Each new version started with init and a replay of the whole cache.
    for tag in ["v2", "v3"] {
        let initial: BTreeSet<String> = echoed(&env, "echo", tag)
            .into_iter()
            .filter(|e| e.2)
            .map(|e| e.0)
            .collect();
        assert_eq!(initial.len(), keys, "{tag} replayed every cached object");
    }
    // Per key, each version sees increasing resourceVersions: nothing out of order, no duplicates.
    for tag in ["v1", "v2", "v3"] {
        let mut last: BTreeMap<String, u64> = BTreeMap::new();
        for (k, rv, _) in echoed(&env, "echo", tag) {
            if let Some(prev) = last.insert(k.clone(), rv) {
                assert!(prev < rv, "{tag}: {k} went from {prev} to {rv}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_plugin_dropped_into_the_directory_is_loaded_and_replayed() {
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["a", "load"]);
    env.server
        .seed((0..5).map(|i| configmap("a", &format!("cm{i}"), "v")))
        .unwrap();
    env.reconcile().await;
    let (reports_tx, mut reports) = tokio::sync::mpsc::unbounded_channel();
    let _reloader = Reloader::start(env.host.clone(), Some(reports_tx)).unwrap();
    env.install(None, "late", "hostile", &hostile("echo", "late"));
    report_where(&mut reports, "the load", |r| r.loaded == vec![id("late")]).await;
    env.logs
        .wait_until("the replay", || {
            echoed(&env, "late", "late").iter().filter(|e| e.2).count() == 5
        })
        .await;
    // A broken replacement is refused, naming the file; the old version keeps handling events.
    std::fs::write(env.dir().join("late.wasm"), b"not wasm at all").unwrap();
    let report = report_where(&mut reports, "the refusal", |r| !r.errors.is_empty()).await;
    let (failed, error) = &report.errors[0];
    assert_eq!(failed, &id("late"));
    assert!(error.to_string().contains("late.wasm"), "{error}");
    env.server
        .create(configmap("a", "after-broken", "v"))
        .unwrap();
    env.logs
        .wait_until("the old version to handle a new event", || {
            echoed(&env, "late", "late")
                .iter()
                .any(|e| e.0 == "a/after-broken")
        })
        .await;
    // Removing it unregisters it and releases its informer.
    std::fs::remove_file(env.dir().join("late.wasm")).unwrap();
    std::fs::remove_file(env.dir().join("late.toml")).unwrap();
    report_where(&mut reports, "the removal", |r| {
        r.removed == vec![id("late")]
    })
    .await;
    assert!(env.host.status().is_empty());
    assert!(
        env.factory.informers().is_empty(),
        "the unused informer was released"
    );
}
