//! Traces over OTLP/HTTP: a span per event a plugin takes, child spans for its writes and
//! outbound requests, the request carrying the event's trace as `traceparent`; nothing of it
//! while traces are off; a stuck collector never holds up delivery.
//!
//! Traces are process-wide (the CLI turns them on for the whole host), so the tests that turn
//! them on run in a child process of this test binary: a tracer installed here would trace
//! every other test running beside it.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use informant_devserver::audit::AllowRule;
use informant_runtime::config;
use informant_runtime::telemetry::{self, ExportConfig, Traces};
use informant_tests::create_namespaces;
use informant_tests::otlp::{Collector, ExportedSpan};
use informant_tests::plugins::PluginEnv;
use informant_tests::receiver::{Answer, Receiver, labelled, poster};
use std::sync::atomic::Ordering;

/// Set in the child process that runs a test's body.
const CHILD: &str = "INFORMANT_TRACES_TEST_CHILD";

/// A `traceparent` a plugin makes up.
const FORGED: &str = "00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-bbbbbbbbbbbbbbbb-01";

/// Runs `body` in a child process of this test binary (running just `test`), or, in that
/// child, runs it.
fn in_own_process(test: &str, body: impl AsyncFnOnce()) {
    if std::env::var_os(CHILD).is_some() {
        let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
        return runtime.block_on(body());
    }
    let out = Command::new(std::env::current_exe().expect("the test binary"))
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("run the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{test} in its own process: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `traceparent` header values in a request head.
fn traceparents(head: &str) -> Vec<String> {
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| k.trim().eq_ignore_ascii_case("traceparent"))
        .map(|(_, v)| v.trim().to_string())
        .collect()
}

#[test]
fn each_event_is_a_trace_with_its_write_and_request_as_children() {
    in_own_process(
        "traces::each_event_is_a_trace_with_its_write_and_request_as_children",
        traced_event_shape,
    );
}

async fn traced_event_shape() {
    let collector = Collector::start(true).await;
    let traces = Traces::start(ExportConfig {
        delay: Duration::from_millis(50),
        ..ExportConfig::new(collector.endpoint())
    })
    .expect("traces on");
    let mut hook = Receiver::start(Answer::Ok { location: 1 }).await;
    let origin = hook.origin();
    let cfg = format!(
        "[tenants.team-a]\nnamespaces = [\"team-a\"]\nimpersonate = \"system:serviceaccount:team-a:hooks\"\nallowed-outbound-hosts = [\"{origin}\"]\n[[tenants.team-a.write]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nverbs = [\"apply\"]\n"
    );
    let env = PluginEnv::start(config::parse(&cfg, Path::new("informant.toml")).unwrap()).await;
    create_namespaces(&env.server, &["team-a"]);
    env.server.allow_impersonated(
        "system:serviceaccount:team-a:hooks",
        vec![AllowRule {
            verbs: vec!["patch".into()],
            resource: "configmaps".into(),
            namespace: Some("team-a".into()),
            ..AllowRule::default()
        }],
    );
    // Writes `out-NAME`, then POSTs with a `traceparent` of its own making.
    let manifest = poster(
        std::slice::from_ref(&origin),
        "team-a",
        &format!("{origin}/hook"),
        10_000,
    )
    .replace("mode = \"post\"", "mode = \"write-post\"")
    .replace(
        "[config]\n",
        "[[write]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nverbs = [\"apply\"]\nnamespace = \"team-a\"\n[config]\n",
    ) + &format!(
        "traceparent = \"{FORGED}\"\nwrites = [{{ op = \"apply\", namespace = \"team-a\", name = \"out-$NAME\", object = {{ data = {{ k = \"v\" }} }} }}]\n"
    );
    env.install(Some("team-a"), "tracer", "hostile", &manifest);
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);

    let keys = ["team-a/go-1", "team-a/go-2"];
    for key in keys {
        let name = key.split_once('/').unwrap().1;
        env.server.create(labelled("team-a", name)).unwrap();
    }
    // The requests, as the receiver got them, by the key in their body.
    let mut heads = std::collections::BTreeMap::new();
    while heads.len() < keys.len() {
        let (head, body) = informant_tests::guarded("the plugin's requests", hook.requests.recv())
            .await
            .expect("receiver running");
        heads.insert(body["key"].as_str().unwrap_or_default().to_string(), head);
    }
    for key in keys {
        env.logs
            .wait_until(&format!("the plugin's outcome for {key}"), || {
                env.logs
                    .json_of("tracer")
                    .iter()
                    .any(|l| l["key"] == key && l["status"] == 200)
            })
            .await;
    }
    traces.flush();
    let of_key = |spans: &[ExportedSpan], key: &str| -> Option<ExportedSpan> {
        spans
            .iter()
            .find(|s| s.name == "event" && s.attr("key") == key)
            .cloned()
    };
    let children = |spans: &[ExportedSpan], parent: &ExportedSpan| -> Vec<ExportedSpan> {
        spans
            .iter()
            .filter(|s| s.parent_span_id == parent.span_id)
            .cloned()
            .collect()
    };
    let spans = collector
        .wait_until("each event's span with its two children", |spans| {
            keys.iter()
                .all(|k| of_key(spans, k).is_some_and(|e| children(spans, &e).len() >= 2))
        })
        .await;

    let mut traces_seen = std::collections::BTreeSet::new();
    for key in keys {
        let event = of_key(&spans, key).unwrap();
        assert_eq!(event.service, "informant");
        assert_eq!(
            event.parent_span_id, "",
            "an event's span is a root: {event:?}"
        );
        for (attr, want) in [
            ("plugin", "tracer"),
            ("tenant", "team-a"),
            ("kind", "v1/ConfigMap"),
            ("key", key),
            ("outcome", "done"),
            ("event.type", "added"),
        ] {
            assert_eq!(event.attr(attr), want, "{attr} of {event:?}");
        }
        assert!(
            traces_seen.insert(event.trace_id.clone()),
            "a trace per event"
        );
        let kids = children(&spans, &event);
        let names: Vec<&str> = kids.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        let write = kids
            .iter()
            .find(|s| s.name == "kube.apply")
            .expect("the write's span");
        let name = key.split_once('/').unwrap().1;
        assert_eq!(write.attr("name"), format!("out-{name}"));
        assert_eq!(write.attr("outcome"), "ok");
        let post = kids
            .iter()
            .find(|s| s.name == "HTTP POST")
            .expect("the request's span");
        assert_eq!(post.attr("http.response.status_code"), "200");
        for child in &kids {
            assert_eq!(child.trace_id, event.trace_id);
            assert!(
                event.start <= child.start && child.end <= event.end,
                "a host call inside its event: {child:?} in {event:?}"
            );
        }
        assert!(write.end <= post.start, "the write, then the request");
        // The host's traceparent replaced the plugin's: the request's own span, in the event's
        // trace.
        let head = &heads[key];
        assert_eq!(
            traceparents(head),
            [format!("00-{}-{}-01", event.trace_id, post.span_id)],
            "{head}"
        );
    }
    assert_eq!(traces.stats().dropped.load(Ordering::Relaxed), 0);
    assert_eq!(traces.stats().failed.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn with_traces_off_a_request_goes_out_with_the_plugins_own_headers() {
    assert!(!telemetry::enabled(), "this test process exports no traces");
    let mut hook = Receiver::start(Answer::Ok { location: 1 }).await;
    let origin = hook.origin();
    let env = PluginEnv::start(Default::default()).await;
    create_namespaces(&env.server, &["off"]);
    let manifest = poster(
        std::slice::from_ref(&origin),
        "off",
        &format!("{origin}/hook"),
        10_000,
    ) + &format!("traceparent = \"{FORGED}\"\n");
    env.install(None, "untraced", "hostile", &manifest);
    env.reconcile().await;
    env.server.create(labelled("off", "one")).unwrap();
    let (head, _) = informant_tests::guarded("the plugin's request", hook.requests.recv())
        .await
        .expect("receiver running");
    assert_eq!(traceparents(&head), [FORGED], "{head}");
}

#[test]
fn a_stuck_collector_never_holds_up_delivery() {
    in_own_process(
        "traces::a_stuck_collector_never_holds_up_delivery",
        stuck_collector,
    );
}

async fn stuck_collector() {
    // Reads the first export and never answers: the exporter thread waits out its timeout
    // (longer than this test) while spans pile up behind it.
    let collector = Collector::start(false).await;
    let traces = Traces::start(ExportConfig {
        max_queue: 8,
        max_batch: 4,
        delay: Duration::from_millis(10),
        timeout: Duration::from_secs(600),
        ..ExportConfig::new(collector.endpoint())
    })
    .expect("traces on");
    let env = PluginEnv::start(Default::default()).await;
    create_namespaces(&env.server, &["stuck"]);
    env.install(
        None,
        "echo",
        "hostile",
        "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"stuck\"\n[config]\nmode = \"echo\"\ntag = \"e\"\n",
    );
    env.reconcile().await;
    const N: usize = 200;
    for i in 0..N {
        env.server
            .create(informant_tests::configmap("stuck", &format!("c{i}"), "v"))
            .unwrap();
    }
    env.logs
        .wait_until("every event handled", || {
            env.logs.keys_of("echo", "e").len() == N
        })
        .await;
    collector
        .wait_until("the exporter's first request", |spans| !spans.is_empty())
        .await;
    let stats = traces.stats();
    assert_eq!(
        stats.exported.load(Ordering::Relaxed),
        0,
        "and got no answer"
    );
    assert!(
        stats.dropped.load(Ordering::Relaxed) >= (N - 8 - 4) as u64,
        "spans past the queue are dropped and counted: {}",
        stats.dropped.load(Ordering::Relaxed)
    );
    // Turning traces off waits for the stuck export no longer than its bound.
    let started = std::time::Instant::now();
    drop(traces);
    assert!(started.elapsed() < telemetry::export::SHUTDOWN_BOUND + Duration::from_secs(5));
}

/// An echo plugin on namespace `ns` in `env`, and `n` ConfigMaps there, each handled.
async fn echo_events(env: &PluginEnv, ns: &str, n: usize) {
    create_namespaces(&env.server, &[ns]);
    env.install(
        None,
        &format!("echo-{ns}"),
        "hostile",
        &format!(
            "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"{ns}\"\n[config]\nmode = \"echo\"\ntag = \"{ns}\"\n"
        ),
    );
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    for i in 0..n {
        env.server
            .create(informant_tests::configmap(ns, &format!("c{i}"), "v"))
            .unwrap();
    }
    let plugin = format!("echo-{ns}");
    env.logs
        .wait_until("every event handled", || {
            env.logs.keys_of(&plugin, ns).len() == n
        })
        .await;
}

/// The value of header `name` in a request head.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
}

#[test]
fn traces_reach_an_https_collector_with_their_headers() {
    in_own_process(
        "traces::traces_reach_an_https_collector_with_their_headers",
        https_collector,
    );
}

async fn https_collector() {
    let collector = Collector::start_tls().await;
    let env = PluginEnv::start(Default::default()).await;
    let endpoint = collector
        .endpoint()
        .replace("https://", "https://tracer:s%3Acret@");
    // Not trusting the collector's CA: every export fails in the handshake, and nothing is
    // sent in the clear instead.
    let untrusted = Traces::start(ExportConfig {
        delay: Duration::from_millis(20),
        ..ExportConfig::new(&endpoint)
    })
    .expect("traces on");
    echo_events(&env, "untrusted", 3).await;
    let stats = untrusted.stats();
    // An event's span ends just after its outcome is logged: flushed until all three failed.
    informant_tests::guarded("the three spans' export to fail", async {
        while stats.failed.load(Ordering::Relaxed) < 3 {
            untrusted.flush();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert_eq!(stats.exported.load(Ordering::Relaxed), 0);
    assert_eq!(collector.requests(), 0, "nothing reached the collector");
    drop(untrusted);

    // Trusting it (as OTEL_EXPORTER_OTLP_CERTIFICATE names it), with the spec's header
    // variable and a header flag.
    let mut config = ExportConfig {
        delay: Duration::from_millis(20),
        ..ExportConfig::new(&endpoint)
    };
    let ca = collector.ca_file().display().to_string();
    config
        .apply_env(|name| match name {
            "OTEL_EXPORTER_OTLP_CERTIFICATE" => Some(ca.clone()),
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS" => Some("x-scope=team%20a,x-api-key=one".into()),
            _ => None,
        })
        .unwrap();
    config.add_header("x-api-key=two").unwrap();
    let traces = Traces::start(config).expect("traces on over https");
    echo_events(&env, "trusted", 3).await;
    traces.flush();
    let spans = collector
        .wait_until("the three events' spans", |spans| {
            spans.iter().filter(|s| s.name == "event").count() >= 3
        })
        .await;
    assert!(spans.iter().all(|s| s.service == "informant"));
    assert!(
        spans
            .iter()
            .filter(|s| s.name == "event")
            .all(|s| s.attr("plugin") == "echo-trusted"),
        "{spans:?}"
    );
    let heads = collector.heads();
    assert!(!heads.is_empty());
    for head in &heads {
        assert!(head.starts_with("POST /v1/traces "), "{head}");
        assert_eq!(header(head, "x-scope"), Some("team a"), "{head}");
        assert_eq!(
            header(head, "x-api-key"),
            Some("two"),
            "the flag wins: {head}"
        );
        // base64("tracer:s:cret"): the URL's user info, decoded, as Basic authentication.
        assert_eq!(
            header(head, "authorization"),
            Some("Basic dHJhY2VyOnM6Y3JldA=="),
            "{head}"
        );
    }
    assert_eq!(traces.stats().failed.load(Ordering::Relaxed), 0);
    // `/metrics` counts what the pipeline did, as host series.
    let state =
        informant_runtime::admin::AdminState::new(env.factory.clone(), Some(env.host.clone()));
    let text = informant_runtime::admin::metrics::render(
        &state,
        &informant_runtime::admin::scope::Scope::Everything,
    )
    .unwrap();
    let exported = traces.stats().exported.load(Ordering::Relaxed);
    assert!(
        text.contains(&format!(
            "informant_trace_spans_exported_total {exported}\n"
        )) && text.contains("informant_trace_spans_dropped_total 0\n"),
        "{text}"
    );
}

#[test]
fn a_sampling_ratio_of_zero_sends_no_spans() {
    in_own_process(
        "traces::a_sampling_ratio_of_zero_sends_no_spans",
        ratio_zero,
    );
}

async fn ratio_zero() {
    let collector = Collector::start(true).await;
    let env = PluginEnv::start(Default::default()).await;
    let traces = Traces::start(ExportConfig {
        delay: Duration::from_millis(20),
        sampling: telemetry::Sampling::ratio(0.0, "test").unwrap(),
        ..ExportConfig::new(collector.endpoint())
    })
    .expect("traces on");
    echo_events(&env, "unsampled", 20).await;
    traces.flush();
    assert_eq!(collector.requests(), 0, "{:?}", collector.spans());
    let stats = traces.stats();
    for (what, n) in [
        ("exported", &stats.exported),
        ("failed", &stats.failed),
        ("dropped", &stats.dropped),
    ] {
        assert_eq!(n.load(Ordering::Relaxed), 0, "{what}");
    }
    drop(traces);
    // The same host and collector at a ratio of 1: the events are traced, so the silence above
    // was the sampler's.
    let traces = Traces::start(ExportConfig {
        delay: Duration::from_millis(20),
        ..ExportConfig::new(collector.endpoint())
    })
    .expect("traces on");
    echo_events(&env, "sampled", 5).await;
    traces.flush();
    collector
        .wait_until("the sampled events' spans", |spans| {
            spans
                .iter()
                .filter(|s| s.name == "event" && s.attr("plugin") == "echo-sampled")
                .count()
                == 5
        })
        .await;
}

#[test]
fn each_admission_request_is_a_span_with_its_decision() {
    in_own_process(
        "traces::each_admission_request_is_a_span_with_its_decision",
        traced_admission,
    );
}

async fn traced_admission() {
    use informant_runtime::admission::AdmissionOptions;
    use informant_runtime::runtime::{Runtime, RuntimeOptions};
    use informant_runtime::tls::ServerTls;
    use informant_tests::admission::{Webhook, review};
    use serde_json::json;

    let collector = Collector::start(true).await;
    let traces = Traces::start(ExportConfig {
        delay: Duration::from_millis(50),
        ..ExportConfig::new(collector.endpoint())
    })
    .expect("traces on");
    let server = informant_devserver::DevServer::start(Default::default())
        .await
        .expect("API server");
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        informant_tests::plugins::wasm("admit"),
        dir.path().join("deny.wasm"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("deny.toml"),
        "[[admit]]\nname = \"deny\"\napi-version = \"v1\"\nkind = \"ConfigMap\"\n\
         [config]\nmode = \"deny-label\"\n",
    )
    .unwrap();
    let runtime = Runtime::start(
        server.client(),
        RuntimeOptions {
            plugins: Some(dir.path().to_path_buf()),
            config: config::parse("operator-plugins = true\n", Path::new("informant.toml"))
                .unwrap(),
            admission: Some(AdmissionOptions {
                addr: "127.0.0.1:0".parse().unwrap(),
                tls: ServerTls::SelfSigned,
                register: None,
                cert_secret: None,
                record: None,
            }),
            ..Default::default()
        },
    )
    .await
    .expect("runtime");
    let webhook = Webhook::new(
        runtime.admission_addr().unwrap(),
        &runtime.admission_ca_bundle().unwrap(),
    );
    for (uid, labels) in [("u-deny", json!({"deny": "no"})), ("u-allow", json!({}))] {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": uid, "namespace": "default", "labels": labels}});
        webhook
            .review("/admit/deny/deny", &review(uid, "CREATE", &object))
            .await;
    }
    traces.flush();
    let spans = collector
        .wait_until("both requests' spans", |spans| {
            spans.iter().filter(|s| s.name == "admission").count() >= 2
        })
        .await;
    for (uid, decision) in [("u-deny", "deny"), ("u-allow", "allow")] {
        let span = spans
            .iter()
            .find(|s| s.name == "admission" && s.attr("uid") == uid)
            .unwrap_or_else(|| panic!("no span for {uid}: {spans:?}"));
        assert_eq!(
            span.parent_span_id, "",
            "a request's span is a root: {span:?}"
        );
        for (attr, want) in [
            ("plugin", "deny"),
            ("hook", "deny"),
            ("operation", "CREATE"),
            ("kind", "v1/ConfigMap"),
            ("decision", decision),
        ] {
            assert_eq!(span.attr(attr), want, "{attr} of {span:?}");
        }
    }
    runtime.stop().await;
    server.shutdown().await;
}
