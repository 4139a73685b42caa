//! The admin endpoints over the real pipeline: the embedded API server over loopback, real
//! informers, real compiled plugins, and the admin server read over HTTP like a scraper would.
//! Authentication and per-tenant authorization are [`auth`]'s.

mod auth;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use informant_devserver::{DevServer, DevServerConfig};
use informant_runtime::admin::{AdminServer, AdminState};
use informant_runtime::plugin::exec::supervisor::PluginState;
use informant_runtime::plugin::id::PluginId;
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_runtime::runtime::{Replica, ReplicaState, RuntimeOptions};
use informant_runtime::tenancy::{Tenancy, TenantPolicy};
use informant_tests::http::{free_addr, get, get_until};
use informant_tests::plugins::{PluginEnv, fast_restarts, wasm};
use informant_tests::{GUARD, configmap, create_namespaces, guarded};
use openmetrics_parser::{MetricsExposition, OpenMetricsType, OpenMetricsValue};

/// The hostile test plugin in `mode`, watching every ConfigMap.
fn hostile(mode: &str, tag: &str) -> String {
    format!(
        "[limits]\ndeadline-ms = 2000\nmemory-mib = 16\n[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[config]\nmode = \"{mode}\"\ntag = \"{tag}\"\n"
    )
}

/// Quick restarts, quarantine at the third trap; top-level plugins and tenant `team-a`.
fn config() -> HostConfig {
    let tenants = BTreeMap::from([("team-a".to_string(), Arc::new(TenantPolicy::operator()))]);
    HostConfig {
        restart: fast_restarts(),
        tenancy: Tenancy::new(true, tenants),
        ..Default::default()
    }
}

/// One parsed scrape, with lookups that fail the test naming what is missing.
pub(crate) struct Scrape {
    pub(crate) text: String,
    pub(crate) parsed: MetricsExposition<OpenMetricsType, OpenMetricsValue>,
}

impl Scrape {
    pub(crate) async fn take(addr: SocketAddr) -> Scrape {
        let (status, content_type, text) = get(addr, "/metrics").await;
        assert_eq!(status, 200, "{text}");
        assert!(
            content_type.starts_with("application/openmetrics-text"),
            "{content_type}"
        );
        // A strict OpenMetrics parser: families declared before their samples, one type each,
        // well-formed labels, unique label sets, histogram buckets with `le`, `# EOF` last.
        let parsed = openmetrics_parser::openmetrics::parse_openmetrics(&text)
            .unwrap_or_else(|e| panic!("/metrics is not valid OpenMetrics text: {e}\n{text}"));
        Scrape { text, parsed }
    }

    pub(crate) fn sample(&self, family: &str, labels: &[(&str, &str)]) -> &OpenMetricsValue {
        let fam = self
            .parsed
            .families
            .get(family)
            .unwrap_or_else(|| panic!("no family {family} in\n{}", self.text));
        let mut found = fam.iter_samples().filter(|s| {
            let set = s.get_labelset().expect("samples are bound to their family");
            labels
                .iter()
                .all(|(k, v)| set.get_label_value(k) == Some(*v))
        });
        let one = found
            .next()
            .unwrap_or_else(|| panic!("no {family}{labels:?} in\n{}", self.text));
        assert!(found.next().is_none(), "{family}{labels:?} is ambiguous");
        &one.value
    }

    /// A counter's or gauge's value.
    pub(crate) fn value(&self, family: &str, labels: &[(&str, &str)]) -> f64 {
        match self.sample(family, labels) {
            OpenMetricsValue::Counter(c) => c.value.as_f64(),
            OpenMetricsValue::Gauge(g) => g.as_f64(),
            other => panic!("{family} is not a counter or gauge: {other:?}"),
        }
    }

    /// A histogram's observation count, checked against its `+Inf` bucket.
    pub(crate) fn histogram_count(&self, family: &str, labels: &[(&str, &str)]) -> u64 {
        match self.sample(family, labels) {
            OpenMetricsValue::Histogram(h) => {
                let count = h.count.expect("histograms carry _count");
                let inf = h
                    .buckets
                    .iter()
                    .find(|b| b.upper_bound == f64::INFINITY)
                    .expect("a +Inf bucket");
                assert_eq!(
                    inf.count.as_f64() as u64,
                    count,
                    "+Inf bucket equals _count"
                );
                let mut last = 0.0;
                for b in &h.buckets {
                    assert!(b.count.as_f64() >= last, "buckets are cumulative");
                    last = b.count.as_f64();
                }
                count
            }
            other => panic!("{family} is not a histogram: {other:?}"),
        }
    }
}

/// Scrapes until `pred` holds. The endpoint offers no change signal to wait on, so this polls
/// it (the condition is the point; the interval only spares the CPU), failing after [`GUARD`].
pub(crate) async fn scrape_until(
    addr: SocketAddr,
    what: &str,
    pred: impl Fn(&Scrape) -> bool,
) -> Scrape {
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        let scrape = Scrape::take(addr).await;
        if pred(&scrape) {
            return scrape;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}; last scrape:\n{}",
            scrape.text
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub(crate) async fn start_admin(env: &PluginEnv) -> (Arc<AdminState>, AdminServer) {
    let state = AdminState::new(env.factory.clone(), Some(env.host.clone()));
    let server = AdminServer::start(SocketAddr::from(([127, 0, 0, 1], 0)), state.clone())
        .await
        .expect("admin server starts");
    (state, server)
}

const ECHO: &[(&str, &str)] = &[("plugin", "echo"), ("tenant", "")];
const FLAKY: &[(&str, &str)] = &[("plugin", "flaky"), ("tenant", "team-a")];
const CONFIGMAPS: &[(&str, &str)] = &[("informer", "v1 configmaps")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_what_the_plugins_handled_and_failed() {
    let env = PluginEnv::start(config()).await;
    create_namespaces(&env.server, &["a", "team-a"]);
    let ignoring = hostile("echo", "echo").replace(
        "kind = \"ConfigMap\"\n",
        "kind = \"ConfigMap\"\nignore = [\"metadata.annotations\", \"metadata.resourceVersion\"]\n",
    );
    env.install(None, "echo", "hostile", &ignoring);
    env.install(
        Some("team-a"),
        "flaky",
        "hostile",
        &hostile("flaky", "flaky"),
    );
    let (state, admin) = start_admin(&env).await;
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    state.record_reconcile(&report);
    state.startup_complete();

    // flaky traps on every third event its instance sees, and each trap recreates the instance:
    // of 9 events it fails the 3rd, 6th and 9th, and the third trap quarantines it.
    const N: usize = 9;
    for i in 0..N {
        env.server
            .create(configmap("a", &format!("cm{i}"), "v"))
            .unwrap();
    }
    env.logs
        .wait_until("echo to log every object", || {
            env.logs.json_of("echo").len() == N
        })
        .await;
    let flaky_id = PluginId {
        tenant: "team-a".into(),
        name: "flaky".into(),
    };
    let flaky = env.host.supervisor(&flaky_id).expect("flaky loaded");
    guarded(
        "flaky's quarantine",
        flaky
            .subscribe_state()
            .wait_for(|s| *s == PluginState::Quarantined),
    )
    .await
    .unwrap();

    // Counters move just after the log line or state change that announced them (the listener's
    // last of all, once the handler returns): wait for them to catch up.
    let m = scrape_until(admin.addr(), "every event counted as delivered", |m| {
        m.value("informant_plugin_events_dispatched", ECHO) == N as f64
            && ["echo", "team-a/flaky"].iter().all(|h| {
                let l = [("informer", "v1 configmaps"), ("handler", *h)];
                m.value("informant_listener_events_delivered", &l) == N as f64
            })
    })
    .await;
    let echoed = env.logs.json_of("echo").len() as f64;
    assert_eq!(m.value("informant_plugin_events_dispatched", ECHO), echoed);
    assert_eq!(m.value("informant_plugin_events_received", ECHO), N as f64);
    assert_eq!(m.value("informant_plugin_events_failed", ECHO), 0.0);
    assert_eq!(m.value("informant_plugin_events_dropped", ECHO), 0.0);
    assert_eq!(m.value("informant_plugin_backlog", ECHO), 0.0);
    assert_eq!(
        m.histogram_count("informant_plugin_handler_duration_seconds", ECHO),
        N as u64
    );
    let state_of = |labels: &[(&str, &str)], s: &str| {
        let mut l = labels.to_vec();
        l.push(("state", s));
        m.value("informant_plugin_state", &l)
    };
    assert_eq!(state_of(ECHO, "running"), 1.0);
    assert_eq!(state_of(ECHO, "quarantined"), 0.0);

    // flaky: every event reached it; three failed; what it handled is what it logged.
    assert_eq!(m.value("informant_plugin_events_received", FLAKY), N as f64);
    assert_eq!(
        m.value("informant_plugin_events_dispatched", FLAKY),
        N as f64
    );
    assert_eq!(m.value("informant_plugin_events_failed", FLAKY), 3.0);
    env.logs
        .wait_until("flaky's lines for the events it handled", || {
            env.logs.json_of("flaky").len() == N - 3
        })
        .await;
    assert_eq!(
        m.histogram_count("informant_plugin_handler_duration_seconds", FLAKY),
        N as u64
    );
    assert_eq!(state_of(FLAKY, "quarantined"), 1.0);
    assert_eq!(state_of(FLAKY, "running"), 0.0);
    assert_eq!(state_of(FLAKY, "backing-off"), 0.0);

    // The informer and the per-listener view of the same events.
    assert_eq!(m.value("informant_informer_synced", CONFIGMAPS), 1.0);
    assert_eq!(m.value("informant_informer_objects", CONFIGMAPS), N as f64);
    assert_eq!(m.value("informant_informer_lists", CONFIGMAPS), 1.0);
    assert_eq!(
        m.value("informant_informer_relists_after_gone", CONFIGMAPS),
        0.0
    );
    for handler in ["echo", "team-a/flaky"] {
        let l = [("informer", "v1 configmaps"), ("handler", handler)];
        assert_eq!(m.value("informant_listener_events_received", &l), N as f64);
        assert_eq!(m.value("informant_listener_events_delivered", &l), N as f64);
        assert_eq!(m.value("informant_listener_backlog", &l), 0.0);
    }

    // /plugins agrees.
    let (status, content_type, body) = get(admin.addr(), "/plugins").await;
    assert_eq!(status, 200);
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}"
    );
    let json: serde_json::Value = serde_json::from_str(&body).expect("/plugins is JSON");
    let plugins = json["plugins"].as_array().expect("a plugins array");
    assert_eq!(plugins.len(), 2, "{body}");
    let find = |name: &str| {
        plugins
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {body}"))
    };
    let (echo, flaky_json) = (find("echo"), find("flaky"));
    assert_eq!(echo["tenant"], "");
    assert_eq!(echo["state"], "running");
    assert_eq!(echo["handled"], N);
    assert_eq!(echo["failed"], 0);
    assert_eq!(echo["backlog"], 0);
    assert_eq!(flaky_json["tenant"], "team-a");
    assert_eq!(flaky_json["state"], "quarantined");
    assert_eq!(flaky_json["handled"], N - 3);
    assert_eq!(flaky_json["failed"], 3);
    assert!(
        flaky_json["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("a/cm8")),
        "{body}"
    );
    let version = echo["version"].as_str().expect("a version");
    assert!(
        version.len() == 64 && version.bytes().all(|b| b.is_ascii_hexdigit()),
        "sha256 of the wasm: {version}"
    );

    // A partition during which an object is deleted, then compacted history: the resumed watch
    // gets 410 Gone and relists; the delete reaches echo, and quarantined flaky drops it.
    let faults = env.server.faults();
    faults.pause();
    env.server
        .delete("v1", "ConfigMap", Some("a"), "cm0")
        .unwrap();
    faults.compact();
    faults.close_watches();
    faults.resume();
    env.logs
        .wait_until("echo to see the delete found by the relist", || {
            env.logs
                .json_of("echo")
                .iter()
                .any(|l| l["key"] == "a/cm0" && l["fsu"] == true)
        })
        .await;
    let m = scrape_until(admin.addr(), "the relist's delete counted", |m| {
        m.value("informant_plugin_events_dispatched", ECHO) == (N + 1) as f64
            && m.value("informant_plugin_events_dropped", FLAKY) == 1.0
    })
    .await;
    assert!(m.value("informant_informer_relists_after_gone", CONFIGMAPS) >= 1.0);
    assert!(m.value("informant_informer_watch_restarts", CONFIGMAPS) >= 1.0);
    assert!(m.value("informant_informer_lists", CONFIGMAPS) >= 2.0);
    assert_eq!(
        m.value("informant_informer_objects", CONFIGMAPS),
        (N - 1) as f64
    );
    assert_eq!(
        m.value("informant_plugin_events_received", FLAKY),
        (N + 1) as f64
    );
    assert_eq!(
        m.value("informant_plugin_events_dispatched", FLAKY),
        N as f64
    );

    // echo ignores annotations (and resourceVersion): an annotation-only update is projected by
    // its change filter (counted) and never reaches it. A create queued behind it shows that.
    let mut annotated = configmap("a", "cm1", "v");
    annotated["metadata"]["annotations"] = serde_json::json!({"note": "ignored"});
    env.server.update(annotated).unwrap();
    env.server.create(configmap("a", "behind", "v")).unwrap();
    env.logs
        .wait_until("echo to see the create behind the update", || {
            env.logs
                .json_of("echo")
                .iter()
                .any(|l| l["key"] == "a/behind")
        })
        .await;
    let cm1: Vec<_> = env
        .logs
        .json_of("echo")
        .into_iter()
        .filter(|l| l["key"] == "a/cm1")
        .collect();
    assert_eq!(cm1.len(), 1, "only its create reached echo: {cm1:?}");
    let filter = [(
        "filter",
        "ignore metadata.annotations, metadata.resourceVersion",
    )];
    let m = scrape_until(admin.addr(), "the filter's evaluation", |m| {
        m.value("informant_change_filter_evaluations", &filter) >= 1.0
    })
    .await;
    assert_eq!(m.value("informant_change_filter_errors", &filter), 0.0);
    assert_eq!(m.value("informant_plugin_events_retried", ECHO), 0.0);

    admin.shutdown().await;
    env.host.shutdown().await;
    env.factory.stop();
}

/// Startup as `informant run` does it (the library's `Replica`, no leader election): the admin
/// server is up before anything loads and reports why it is not ready, then ready; a plugin
/// dropped on disk that cannot load makes it unready (found by the hot reloader) until removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_waits_for_sync_and_for_every_plugin_on_disk() {
    informant_tests::init_tracing();
    let server = DevServer::start(DevServerConfig::default())
        .await
        .expect("start API server");
    create_namespaces(&server, &["a", "team-a"]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(wasm("hostile"), dir.path().join("echo.wasm")).unwrap();
    std::fs::write(dir.path().join("echo.toml"), hostile("echo", "echo")).unwrap();
    let addr = free_addr();
    // The informers' initial list cannot complete while the server is paused.
    server.faults().pause();
    let replica = Replica::start(
        server.client(),
        RuntimeOptions {
            plugins: Some(dir.path().to_path_buf()),
            admin: Some(addr),
            config: config(),
            ..Default::default()
        },
        None,
    )
    .expect("replica");

    // Discovery cannot answer either: the first reconcile is stuck resolving the plugin's kind.
    let body = get_until(
        addr,
        "/readyz",
        "the admin server during startup",
        |s, _| s == 503,
    )
    .await;
    assert!(body.contains("starting"), "{body}");
    assert!(body.contains("no reconcile has completed"), "{body}");
    let (status, _, body) = get(addr, "/healthz").await;
    assert_eq!(
        (status, body.as_str()),
        (200, "ok\n"),
        "alive while not ready"
    );
    // The plugin host is busy in its first reconcile: /metrics answers all the same.
    let (status, _, _) = get(addr, "/metrics").await;
    assert_eq!(status, 200, "/metrics during startup");
    assert_eq!(*replica.state().borrow(), ReplicaState::Starting);

    server.faults().resume();
    get_until(addr, "/readyz", "ready after sync", |s, b| {
        s == 200 && b == "ok\n"
    })
    .await;
    assert!(guarded("the replica to run", replica.wait_running()).await);
    let m = Scrape::take(addr).await;
    assert_eq!(m.value("informant_informer_synced", CONFIGMAPS), 1.0);

    // A plugin on disk that cannot load makes the process unready, naming it, until it goes.
    std::fs::write(
        dir.path().join("garbage.wasm"),
        b"\0asm\x01\0\0\0this is not a component",
    )
    .unwrap();
    std::fs::write(dir.path().join("garbage.toml"), hostile("echo", "x")).unwrap();
    get_until(addr, "/readyz", "the broken plugin in /readyz", |s, b| {
        s == 503 && b.contains("plugin `garbage` is on disk but not loaded")
    })
    .await;
    let (_, _, plugins) = get(addr, "/plugins").await;
    let plugins: serde_json::Value = serde_json::from_str(&plugins).unwrap();
    let states: Vec<(&str, &str)> = plugins["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| Some((p["name"].as_str()?, p["state"].as_str()?)))
        .collect();
    assert_eq!(states, [("echo", "running"), ("garbage", "refused")]);
    let why = plugins["plugins"][1]["refused"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("garbage"), "{plugins}");

    std::fs::remove_file(dir.path().join("garbage.wasm")).unwrap();
    std::fs::remove_file(dir.path().join("garbage.toml")).unwrap();
    get_until(
        addr,
        "/readyz",
        "ready once the broken plugin is gone",
        |s, b| s == 200 && b == "ok\n",
    )
    .await;

    guarded("a clean shutdown", replica.shutdown())
        .await
        .expect("shutdown");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "the admin server still answers after shutdown"
    );
    server.shutdown().await;
}
