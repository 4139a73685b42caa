//! Metrics from plugins (the `metrics` import) over the real pipeline: real compiled plugins
//! make the calls, the admin server is scraped over loopback and parsed strictly as OpenMetrics
//! every time, so the exposition stays valid whatever the plugins wrote or tried.

use std::path::Path;
use std::time::Instant;

use informant_runtime::config;
use informant_runtime::plugin::HostConfig;
use informant_tests::plugins::PluginEnv;
use informant_tests::{configmap, create_namespaces, guarded};
use serde_json::{Value, json};

use crate::admin::{Scrape, scrape_until, start_admin};

const CONFIG: &str = r#"
[tenants.a]
namespaces = ["team-a"]
resources = ["v1/ConfigMap"]
[tenants.b]
namespaces = ["team-b"]
resources = ["v1/ConfigMap"]
"#;

fn host_config() -> HostConfig {
    config::parse(CONFIG, Path::new("informant.toml")).expect("test config is valid")
}

/// `v` as a TOML inline value (JSON strings, numbers and arrays are TOML already).
fn inline(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let fields: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k} = {}", inline(v)))
                .collect();
            format!("{{ {} }}", fields.join(", "))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(inline).collect::<Vec<_>>().join(", ")),
        other => other.to_string(),
    }
}

/// The hostile plugin in `metrics` mode, making `calls` on each new `go-*` ConfigMap.
fn metrics_manifest(tag: &str, calls: &[Value]) -> String {
    let calls: Vec<String> = calls.iter().map(inline).collect();
    format!(
        "[limits]\ndeadline-ms = 10000\n[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[config]\nmode = \"metrics\"\ntag = \"{tag}\"\nmetrics = [{}]\n",
        calls.join(", ")
    )
}

fn echo_manifest(tag: &str) -> String {
    format!(
        "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[config]\nmode = \"echo\"\ntag = \"{tag}\"\n"
    )
}

/// The results `plugin` logged for the object `key` (one entry per call), once it has.
async fn results(env: &PluginEnv, plugin: &str, key: &str) -> Vec<Value> {
    let of = || {
        env.logs
            .json_of(plugin)
            .into_iter()
            .find(|v| v["key"] == key && v["metrics"].is_array())
    };
    env.logs
        .wait_until(&format!("{plugin}'s metric calls for {key}"), || {
            of().is_some()
        })
        .await;
    of().unwrap()["metrics"].as_array().unwrap().clone()
}

/// Whether any series on the scrape carries `plugin="NAME"`.
fn has_series_of(scrape: &Scrape, plugin: &str) -> bool {
    scrape.text.contains(&format!("plugin=\"{plugin}\""))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugins_metrics_carry_its_labels_and_stay_its_own() {
    guarded("plugin metrics", async {
        let env = PluginEnv::start(host_config()).await;
        create_namespaces(&env.server, &["team-a", "team-b"]);
        let (_state, admin) = start_admin(&env).await;
        let shared = json!([["result", "ok"], ["name", "shared"]]);
        env.install(
            Some("a"),
            "a-m",
            "hostile",
            &metrics_manifest(
                "a",
                &[
                    json!({"op": "counter", "name": "checks_total", "help": "Checks \"run\"\nper object \\ all", "labels": shared, "value": 2}),
                    json!({"op": "histogram", "name": "latency_seconds", "help": "Latency.", "labels": [["name", "$NAME"]], "buckets": [0.1, 1.0], "value": 0.5}),
                    json!({"op": "gauge", "name": "depth", "help": "Depth.", "labels": [["name", "$NAME"]], "group": "$NAME", "value": 3}),
                ],
            ),
        );
        // b uses a's names: its own series, never a's; a's type binds b too.
        env.install(
            Some("b"),
            "b-m",
            "hostile",
            &metrics_manifest(
                "b",
                &[
                    json!({"op": "delete", "name": "checks_total", "labels": shared}),
                    json!({"op": "delete", "name": "latency_seconds", "labels": [["name", "go-a"]]}),
                    json!({"op": "delete-group", "group": "go-a"}),
                    json!({"op": "counter", "name": "depth", "help": "", "value": 1}),
                    json!({"op": "gauge", "name": "depth", "labels": [["name", "go-a"]], "value": 99}),
                    json!({"op": "counter", "name": "checks", "help": "b's help", "labels": shared, "value": 5}),
                    json!({"op": "delete", "name": "checks", "labels": shared}),
                    json!({"op": "counter", "name": "checks", "labels": shared, "value": 5}),
                ],
            ),
        );
        let report = env.reconcile().await;
        assert!(report.errors.is_empty(), "{:?}", report.errors);

        env.server.create(configmap("team-a", "go-a", "1")).unwrap();
        let a = results(&env, "a-m", "team-a/go-a").await;
        assert!(a.iter().all(|r| r["ok"] == 1 && r["err"] == 0), "{a:?}");
        env.server.create(configmap("team-b", "go-b", "1")).unwrap();
        let b = results(&env, "b-m", "team-b/go-b").await;
        let ok: Vec<u64> = b.iter().map(|r| r["ok"].as_u64().unwrap()).collect();
        // Nothing of a's to delete (series, histogram, group), a counter where a has a gauge
        // refused, its own gauge beside a's, its own counter, deleted and made again.
        assert_eq!(ok, [0, 0, 0, 0, 1, 1, 1, 1], "{b:?}");
        assert_eq!(b[3]["first"]["kind"], "type-conflict", "{b:?}");
        assert!(
            b[3]["first"]["message"]
                .as_str()
                .unwrap()
                .contains("another plugin"),
            "{b:?}"
        );

        let scrape = scrape_until(admin.addr(), "both plugins' series", |s| {
            s.parsed.families.contains_key("informant_plugin_checks")
                && has_series_of(s, "b-m")
        })
        .await;
        let a_labels = [("plugin", "a-m"), ("tenant", "a")];
        let checks = |plugin: &[(&str, &str)]| {
            let mut l = plugin.to_vec();
            l.extend([("result", "ok"), ("name", "shared")]);
            scrape.value("informant_plugin_checks", &l)
        };
        assert_eq!(checks(&a_labels), 2.0);
        assert_eq!(checks(&[("plugin", "b-m"), ("tenant", "b")]), 5.0);
        let mut a_go = a_labels.to_vec();
        a_go.push(("name", "go-a"));
        assert_eq!(
            scrape.histogram_count("informant_plugin_latency_seconds", &a_go),
            1
        );
        assert_eq!(scrape.value("informant_plugin_depth", &a_go), 3.0);
        let mut b_go = vec![("plugin", "b-m"), ("tenant", "b"), ("name", "go-a")];
        assert_eq!(scrape.value("informant_plugin_depth", &b_go), 99.0);
        b_go.truncate(2);
        assert_eq!(scrape.value("informant_plugin_metric_series", &a_labels), 3.0);
        assert_eq!(scrape.value("informant_plugin_metric_series", &b_go), 2.0);
        b_go.push(("reason", "type-conflict"));
        assert_eq!(
            scrape.value("informant_plugin_metric_series_refused", &b_go),
            1.0
        );
        // The help text, escaped on its one line: the first plugin's.
        assert!(
            scrape.text.contains(
                "# HELP informant_plugin_checks Checks \\\"run\\\"\\nper object \\\\ all\n"
            ),
            "{}",
            scrape.text
        );
        env.host.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_labels_and_types_that_break_the_rules_are_refused_by_name() {
    guarded("metric rules", async {
        let env = PluginEnv::start(host_config()).await;
        create_namespaces(&env.server, &["team-a"]);
        let (_state, admin) = start_admin(&env).await;
        let long = "a".repeat(300);
        let huge = "v".repeat(2048);
        let bad: Vec<(Value, &str, &str)> = vec![
            (
                json!({"op": "gauge", "name": "g", "labels": [["plugin", "evil"]]}),
                "invalid-label",
                "set by the host",
            ),
            (
                json!({"op": "gauge", "name": "g", "labels": [["tenant", "evil"]]}),
                "invalid-label",
                "set by the host",
            ),
            (
                json!({"op": "gauge", "name": "g", "labels": [["__name__", "evil"]]}),
                "invalid-label",
                "reserved",
            ),
            (
                json!({"op": "gauge", "name": "1abc"}),
                "invalid-name",
                "must start",
            ),
            (
                json!({"op": "gauge", "name": "a-b"}),
                "invalid-name",
                "only ASCII",
            ),
            (
                json!({"op": "gauge", "name": "zähler"}),
                "invalid-name",
                "only ASCII",
            ),
            (json!({"op": "gauge", "name": ""}), "invalid-name", "empty"),
            (
                json!({"op": "gauge", "name": long}),
                "invalid-name",
                "longer than 128",
            ),
            (
                json!({"op": "gauge", "name": "events_received"}),
                "invalid-name",
                "host's own",
            ),
            (
                json!({"op": "gauge", "name": "g", "labels": [["k", huge]]}),
                "invalid-label",
                "2048 bytes",
            ),
            (
                json!({"op": "gauge", "name": "g", "labels": [["a-b", "v"]]}),
                "invalid-label",
                "only ASCII",
            ),
            (
                json!({"op": "counter", "name": "c", "value": -1}),
                "invalid-value",
                "non-negative",
            ),
            (json!({"op": "counter", "name": "conflicted"}), "", ""),
            (
                json!({"op": "gauge", "name": "conflicted"}),
                "type-conflict",
                "is a counter",
            ),
        ];
        let calls: Vec<Value> = bad.iter().map(|(c, _, _)| c.clone()).collect();
        env.install(
            Some("a"),
            "a-bad",
            "hostile",
            &metrics_manifest("a", &calls),
        );
        let report = env.reconcile().await;
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        env.server.create(configmap("team-a", "go-1", "1")).unwrap();
        let got = results(&env, "a-bad", "team-a/go-1").await;
        for ((call, kind, says), r) in bad.iter().zip(&got) {
            if kind.is_empty() {
                assert_eq!(r["ok"], 1, "{call}: {r}");
                continue;
            }
            assert_eq!(r["first"]["kind"], *kind, "{call}: {r}");
            let message = r["first"]["message"].as_str().unwrap();
            assert!(message.contains(says), "{call}: {message}");
            assert!(message.len() < 512, "a bounded message: {message}");
        }
        let labels = [("plugin", "a-bad"), ("tenant", "a")];
        let scrape = scrape_until(admin.addr(), "the refusals counted", |s| {
            has_series_of(s, "a-bad")
        })
        .await;
        assert!(!scrape.text.contains("evil"), "{}", scrape.text);
        for (reason, n) in [
            ("invalid-label", 5.0),
            ("invalid-name", 6.0),
            ("invalid-value", 1.0),
            ("type-conflict", 1.0),
            ("series-limit", 0.0),
        ] {
            let mut l = labels.to_vec();
            l.push(("reason", reason));
            assert_eq!(
                scrape.value("informant_plugin_metric_series_refused", &l),
                n,
                "{reason}"
            );
        }
        assert_eq!(scrape.value("informant_plugin_metric_series", &labels), 1.0);
        assert_eq!(scrape.value("informant_plugin_conflicted", &labels), 1.0);
        env.host.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_is_refused_at_the_ceiling_without_slowing_another_tenant_and_goes_with_its_plugin()
{
    guarded("metrics flood", async {
        const FLOODS: usize = 4;
        const ATTEMPTS: u64 = 100_000;
        const N: usize = 200;
        let env = PluginEnv::start(host_config()).await;
        create_namespaces(&env.server, &["team-a", "team-b"]);
        let (_state, admin) = start_admin(&env).await;
        // Every go-* object: ATTEMPTS new series of one counter; the first 999 fit beside `hot`.
        let flood = json!({"op": "counter", "name": "flood", "help": "A flood.",
            "labels": [["object", "$NAME"], ["i", "$I"]], "repeat": ATTEMPTS});
        // First as many writes to one series: the cost of a call that finds its series.
        let hot = json!({"op": "counter", "name": "hot", "help": "One series.",
            "labels": [["object", "x"]], "repeat": ATTEMPTS});
        env.install(
            Some("a"),
            "a-flood",
            "hostile",
            &metrics_manifest("a", &[hot, flood]),
        );
        env.install(Some("b"), "b-echo", "hostile", &echo_manifest("b"));
        let report = env.reconcile().await;
        assert!(report.errors.is_empty(), "{:?}", report.errors);

        let started = Instant::now();
        for i in 0..N {
            if i % (N / FLOODS) == 0 {
                let name = format!("go-{}", i / (N / FLOODS));
                env.server.create(configmap("team-a", &name, "x")).unwrap();
            }
            env.server
                .create(configmap("team-b", &format!("b-{i}"), "x"))
                .unwrap();
        }
        env.logs
            .wait_until("all of b's events", || {
                env.logs.keys_of("b-echo", "b").len() == N
            })
            .await;
        let b_took = started.elapsed();
        let floods_done = || {
            env.logs
                .json_of("a-flood")
                .iter()
                .filter(|v| v["metrics"].is_array())
                .count()
        };
        let a_done_when_b_was = floods_done();
        env.logs
            .wait_until("every flood", || floods_done() == FLOODS)
            .await;
        let a_took = started.elapsed();
        eprintln!(
            "metrics flood: b's {N} events in {b_took:?} ({a_done_when_b_was} of a's {FLOODS} floods of {ATTEMPTS} calls done then); all floods in {a_took:?}"
        );
        // b's events flow while a floods: b is done before a's floods are.
        assert!(
            a_done_when_b_was < FLOODS,
            "a's floods were all done ({a_took:?}) before b's {N} events ({b_took:?}): the test shows nothing"
        );
        let lines = env.logs.json_of("a-flood");
        let mut floods = lines.iter().map(|v| &v["metrics"][1]);
        // The first object's flood fills the ceiling: 999 series beside `hot`, then refusals.
        let first = floods.next().unwrap();
        assert_eq!(first["ok"], 999, "{first}");
        assert_eq!(first["err"], ATTEMPTS - 999, "{first}");
        assert_eq!(first["first"]["kind"], "too-many-series", "{first}");
        assert!(
            first["first"]["message"]
                .as_str()
                .unwrap()
                .contains("1000 series"),
            "{first}"
        );
        for later in floods {
            assert_eq!(later["ok"], 0, "{later}");
        }
        let ns_per_call = |i: usize| {
            let micros: u64 = lines.iter().map(|v| v["metrics"][i]["micros"].as_u64().unwrap()).sum();
            micros as f64 * 1e3 / (FLOODS as u64 * ATTEMPTS) as f64
        };
        // Measured from inside the plugin: the guest's own work, the call and the host's answer
        // (a refusal carries its message back), on whatever build the test runs.
        eprintln!(
            "metrics flood: {:.0} ns per call refused at the ceiling, {:.0} ns per write to an existing series",
            ns_per_call(1),
            ns_per_call(0)
        );
        for line in &lines {
            assert_eq!(line["metrics"][0]["ok"], ATTEMPTS, "{line}");
        }
        let labels = [("plugin", "a-flood"), ("tenant", "a")];
        let mut refused = labels.to_vec();
        refused.push(("reason", "series-limit"));
        let want = (FLOODS as u64 * ATTEMPTS - 999) as f64;
        let scrape = scrape_until(admin.addr(), "every refusal counted", |s| {
            has_series_of(s, "a-flood")
                && s.value("informant_plugin_metric_series_refused", &refused) == want
        })
        .await;
        assert_eq!(scrape.value("informant_plugin_metric_series", &labels), 1000.0);
        let flood = &scrape.parsed.families["informant_plugin_flood"];
        assert_eq!(flood.iter_samples().count(), 999);

        // Unloaded: its series leave /metrics with it.
        std::fs::remove_file(env.dir().join("a/a-flood.wasm")).unwrap();
        std::fs::remove_file(env.dir().join("a/a-flood.toml")).unwrap();
        env.reconcile().await;
        let scrape = scrape_until(admin.addr(), "a-flood's series gone", |s| {
            !has_series_of(s, "a-flood")
        })
        .await;
        assert!(
            !scrape.parsed.families.contains_key("informant_plugin_flood"),
            "{}",
            scrape.text
        );
        assert!(has_series_of(&scrape, "b-echo"));
        env.host.shutdown().await;
    })
    .await;
}
