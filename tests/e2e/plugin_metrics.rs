//! Metrics from plugins (the `metrics` import) over the real pipeline: real compiled plugins
//! make the calls, the admin server is scraped over loopback and parsed strictly as OpenMetrics
//! every time, so the exposition stays valid whatever the plugins wrote or tried.

use std::path::Path;
use std::time::Instant;

use informant_runtime::config;
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_tests::plugins::PluginEnv;
use informant_tests::{configmap, create_namespaces, guarded};
use serde_json::{Value, json};

use informant_runtime::admin::scope::Scope;

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
async fn a_tenant_claiming_another_tenants_name_gets_its_own_family() {
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
        // b names a's metrics, with other types and other help: its own families, never a's.
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
                    json!({"op": "counter", "name": "depth", "help": "b's depth.", "labels": [["name", "go-a"]], "value": 1}),
                    json!({"op": "gauge", "name": "depth", "labels": [["name", "go-a"]], "value": 99}),
                    json!({"op": "gauge", "name": "checks", "help": "b's help", "labels": shared, "value": 5}),
                    json!({"op": "delete", "name": "checks", "labels": shared}),
                    json!({"op": "gauge", "name": "checks", "help": "b's help", "labels": shared, "value": 5}),
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
        // Nothing of a's to delete (series, histogram, group); a counter where a has a gauge,
        // taken; a gauge where b itself has a counter, refused; a gauge where a has a counter,
        // taken, deleted and made again.
        assert_eq!(ok, [0, 0, 0, 1, 0, 1, 1, 1], "{b:?}");
        assert_eq!(b[4]["first"]["kind"], "type-conflict", "{b:?}");
        assert!(
            b[4]["first"]["message"]
                .as_str()
                .unwrap()
                .contains("is a counter of this plugin"),
            "{b:?}"
        );

        let scrape = scrape_until(admin.addr(), "both plugins' series", |s| {
            s.parsed.families.contains_key("informant_tenant_a__checks")
                && s.parsed.families.contains_key("informant_tenant_b__checks")
        })
        .await;
        let a_labels = [("plugin", "a-m"), ("tenant", "a")];
        let b_labels = [("plugin", "b-m"), ("tenant", "b")];
        fn with(
            plugin: &[(&'static str, &'static str)],
            more: &[(&'static str, &'static str)],
        ) -> Vec<(&'static str, &'static str)> {
            [plugin, more].concat()
        }
        let shared_l = [("result", "ok"), ("name", "shared")];
        let go_a = [("name", "go-a")];
        assert_eq!(
            scrape.value("informant_tenant_a__checks", &with(&a_labels, &shared_l)),
            2.0
        );
        assert_eq!(
            scrape.value("informant_tenant_b__checks", &with(&b_labels, &shared_l)),
            5.0
        );
        assert_eq!(
            scrape.histogram_count("informant_tenant_a__latency_seconds", &with(&a_labels, &go_a)),
            1
        );
        assert_eq!(
            scrape.value("informant_tenant_a__depth", &with(&a_labels, &go_a)),
            3.0
        );
        assert_eq!(
            scrape.value("informant_tenant_b__depth", &with(&b_labels, &go_a)),
            1.0
        );
        // Each family keeps its tenant's type and help; b touched none of a's.
        for (family, kind, help) in [
            ("informant_tenant_a__depth", "gauge", "Depth."),
            ("informant_tenant_b__depth", "counter", "b's depth."),
            (
                "informant_tenant_a__checks",
                "counter",
                "Checks \\\"run\\\"\\nper object \\\\ all",
            ),
            ("informant_tenant_b__checks", "gauge", "b's help"),
        ] {
            assert!(
                scrape.text.contains(&format!("# TYPE {family} {kind}\n"))
                    && scrape.text.contains(&format!("# HELP {family} {help}\n")),
                "{family}: {}",
                scrape.text
            );
        }
        assert!(
            !scrape.text.contains("informant_plugin_depth")
                && !scrape.text.contains("informant_plugin_checks"),
            "tenants' families never take the operator's names: {}",
            scrape.text
        );
        assert_eq!(scrape.value("informant_plugin_metric_series", &a_labels), 3.0);
        assert_eq!(scrape.value("informant_plugin_metric_series", &b_labels), 2.0);
        assert_eq!(
            scrape.value(
                "informant_plugin_metric_series_refused",
                &with(&b_labels, &[("reason", "type-conflict")])
            ),
            1.0
        );
        assert_eq!(
            scrape.value("informant_tenant_metric_series", &[("tenant", "a")]),
            3.0
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
            // Two finite additions whose sum is not: the second is refused, the counter stays
            // finite.
            (
                json!({"op": "counter", "name": "big", "value": 1.7e308}),
                "",
                "",
            ),
            (
                json!({"op": "counter", "name": "big", "value": 1.7e308}),
                "invalid-value",
                "largest finite number",
            ),
            (
                json!({"op": "histogram", "name": "huge", "value": 1.7e308}),
                "",
                "",
            ),
            (
                json!({"op": "histogram", "name": "huge", "value": 1.7e308}),
                "invalid-value",
                "histogram sum",
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
            ("overflow", 2.0),
            ("series-limit", 0.0),
            ("bytes-limit", 0.0),
            ("tenant-series-limit", 0.0),
            ("tenant-bytes-limit", 0.0),
        ] {
            let mut l = labels.to_vec();
            l.push(("reason", reason));
            assert_eq!(
                scrape.value("informant_plugin_metric_series_refused", &l),
                n,
                "{reason}"
            );
        }
        assert_eq!(scrape.value("informant_plugin_metric_series", &labels), 3.0);
        assert_eq!(scrape.value("informant_tenant_a__conflicted", &labels), 1.0);
        let big = scrape.value("informant_tenant_a__big", &labels);
        assert!(big.is_finite() && big == 1.7e308, "{big}");
        assert!(!scrape.text.contains("+Inf\n") && !scrape.text.contains("NaN"));
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
        let flood = &scrape.parsed.families["informant_tenant_a__flood"];
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
            !scrape.parsed.families.contains_key("informant_tenant_a__flood"),
            "{}",
            scrape.text
        );
        assert!(has_series_of(&scrape, "b-echo"));
        env.host.shutdown().await;
    })
    .await;
}

/// Three tenants: `a` and `c` with budgets of their own, `b` with the host's defaults; and the
/// operator's plugins.
const BUDGETS: &str = r#"
operator-plugins = true
[limits]
tenant-max-metric-series = 1500
[tenants.a]
namespaces = ["team-a"]
resources = ["v1/ConfigMap"]
[tenants.b]
namespaces = ["team-b"]
resources = ["v1/ConfigMap"]
max-metric-series = 5000
[tenants.c]
namespaces = ["team-c"]
resources = ["v1/ConfigMap"]
max-metric-kib = 64
"#;

fn budgets() -> HostConfig {
    config::parse(BUDGETS, Path::new("informant.toml")).expect("test config is valid")
}

/// The sum of `family`'s samples carrying `label="value"`.
fn total(scrape: &Scrape, family: &str, label: &str, value: &str) -> f64 {
    scrape
        .parsed
        .families
        .get(family)
        .map(|f| {
            f.iter_samples()
                .filter(|s| s.get_labelset().unwrap().get_label_value(label) == Some(value))
                .map(|s| match &s.value {
                    openmetrics_parser::OpenMetricsValue::Counter(c) => c.value.as_f64(),
                    openmetrics_parser::OpenMetricsValue::Gauge(g) => g.as_f64(),
                    _ => 0.0,
                })
                .sum()
        })
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_flooding_series_stops_at_its_budget_and_another_tenant_still_registers() {
    guarded("tenant metric budgets", async {
        const PLUGINS: usize = 3;
        const EACH: u64 = 1000;
        let env = PluginEnv::start(budgets()).await;
        create_namespaces(&env.server, &["team-a", "team-b", "team-c"]);
        let (_state, admin) = start_admin(&env).await;
        // a: three plugins, each within its own ceiling (1000 series), 3000 together.
        let flood = json!({"op": "gauge", "name": "flood", "help": "A flood.",
            "labels": [["i", "$I"]], "repeat": EACH});
        for p in 0..PLUGINS {
            env.install(
                Some("a"),
                &format!("a-flood-{p}"),
                "hostile",
                &metrics_manifest("a", std::slice::from_ref(&flood)),
            );
        }
        // c: one plugin of 1 KiB label values, within its own 1 MiB, past c's 64 KiB.
        let pad = "p".repeat(1000);
        let fat = json!({"op": "gauge", "name": "fat", "help": "",
            "labels": [["i", "$I"], ["pad", pad]], "repeat": 500});
        env.install(Some("c"), "c-fat", "hostile", &metrics_manifest("c", &[fat]));
        let b_calls = json!({"op": "counter", "name": "flood", "help": "b's own.",
            "labels": [["i", "$I"]], "repeat": 200});
        env.install(Some("b"), "b-m", "hostile", &metrics_manifest("b", &[b_calls]));
        let report = env.reconcile().await;
        assert!(report.errors.is_empty(), "{:?}", report.errors);

        env.server.create(configmap("team-a", "go-1", "x")).unwrap();
        env.server.create(configmap("team-c", "go-1", "x")).unwrap();
        let mut a_ok = 0;
        for p in 0..PLUGINS {
            let r = &results(&env, &format!("a-flood-{p}"), "team-a/go-1").await[0];
            a_ok += r["ok"].as_u64().unwrap();
            if r["err"].as_u64().unwrap() > 0 {
                assert_eq!(r["first"]["kind"], "too-many-series", "{r}");
                assert!(
                    r["first"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("tenant `a`'s plugins hold 1500 series together"),
                    "{r}"
                );
            }
        }
        assert_eq!(a_ok, 1500, "a's plugins together stop at a's budget");
        let c = &results(&env, "c-fat", "team-c/go-1").await[0];
        let c_ok = c["ok"].as_u64().unwrap();
        assert!((50..=64).contains(&c_ok), "~1 KiB series in 64 KiB: {c}");
        assert!(
            c["first"]["message"]
                .as_str()
                .unwrap()
                .contains("more than 64 KiB"),
            "{c}"
        );
        // b, after both floods: every series it asks for.
        env.server.create(configmap("team-b", "go-1", "x")).unwrap();
        let b = &results(&env, "b-m", "team-b/go-1").await[0];
        assert_eq!((b["ok"].as_u64(), b["err"].as_u64()), (Some(200), Some(0)), "{b}");

        let scrape = scrape_until(admin.addr(), "every plugin's series", |s| {
            has_series_of(s, "b-m") && has_series_of(s, "c-fat")
        })
        .await;
        assert_eq!(
            scrape.value("informant_tenant_metric_series", &[("tenant", "a")]),
            1500.0
        );
        assert_eq!(
            scrape.parsed.families["informant_tenant_a__flood"]
                .iter_samples()
                .count(),
            1500
        );
        assert_eq!(
            total(
                &scrape,
                "informant_plugin_metric_series_refused",
                "reason",
                "tenant-series-limit"
            ),
            (PLUGINS as u64 * EACH - 1500) as f64
        );
        let c_bytes = scrape.value("informant_tenant_metric_bytes", &[("tenant", "c")]);
        assert!(c_bytes <= 64.0 * 1024.0, "{c_bytes}");
        assert_eq!(
            scrape.parsed.families["informant_tenant_b__flood"]
                .iter_samples()
                .count(),
            200
        );
        // What a scrape costs is bounded by the budgets, not by what the tenants tried.
        eprintln!(
            "tenant metric budgets: /metrics is {} KiB with a's 1500 series and c's {c_ok} of 1 KiB",
            scrape.text.len() / 1024
        );
        assert!(scrape.text.len() < 512 * 1024, "{} bytes", scrape.text.len());
        env.host.shutdown().await;
    })
    .await;
}

/// Every character some reader splits lines at.
const LINE_BREAKS: [char; 8] = [
    '\n', '\r', '\u{b}', '\u{c}', '\u{1e}', '\u{85}', '\u{2028}', '\u{2029}',
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_label_value_with_a_line_break_cannot_forge_another_tenants_series() {
    guarded("forged series lines", async {
        let env = PluginEnv::start(budgets()).await;
        create_namespaces(&env.server, &["team-a", "team-b"]);
        let (_state, admin) = start_admin(&env).await;
        // A value that, read by a reader splitting on CR or on U+2028, ends a's line and starts
        // one claiming to be b's series.
        let forged = "informant_tenant_b__owned{plugin=\"b-m\",tenant=\"b\"} 666";
        let calls: Vec<Value> = ["\r", "\r\n", "\u{2028}", "\u{85}", "\u{2029}", "\u{b}"]
            .iter()
            .enumerate()
            .map(|(i, brk)| {
                json!({"op": "gauge", "name": "owned", "help": format!("help{brk}{forged}"),
                    "labels": [["v", format!("x\"}} 1{brk}{forged}{brk}")], ["n", i.to_string()]],
                    "value": 1})
            })
            .collect();
        env.install(Some("a"), "a-m", "hostile", &metrics_manifest("a", &calls));
        env.install(
            Some("b"),
            "b-m",
            "hostile",
            &metrics_manifest(
                "b",
                &[json!({"op": "gauge", "name": "owned", "help": "b's.", "value": 7})],
            ),
        );
        let report = env.reconcile().await;
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        env.server.create(configmap("team-a", "go-1", "x")).unwrap();
        env.server.create(configmap("team-b", "go-1", "x")).unwrap();
        let a = results(&env, "a-m", "team-a/go-1").await;
        assert!(a.iter().all(|r| r["ok"] == 1), "{a:?}");
        results(&env, "b-m", "team-b/go-1").await;
        let scrape = scrape_until(admin.addr(), "a's and b's series", |s| {
            has_series_of(s, "a-m") && has_series_of(s, "b-m")
        })
        .await;
        // b's family has b's one series, strictly parsed.
        let owned = &scrape.parsed.families["informant_tenant_b__owned"];
        assert_eq!(owned.iter_samples().count(), 1);
        assert_eq!(
            scrape.value("informant_tenant_b__owned", &[("plugin", "b-m")]),
            7.0
        );
        assert_eq!(
            scrape.parsed.families["informant_tenant_a__owned"]
                .iter_samples()
                .count(),
            6
        );
        // However a reader splits lines, b's family has one line of its own and no other.
        let lines: Vec<&str> = scrape.text.split(LINE_BREAKS).collect();
        let b_lines: Vec<&&str> = lines
            .iter()
            .filter(|l| l.starts_with("informant_tenant_b__owned"))
            .collect();
        assert_eq!(
            b_lines,
            [&r#"informant_tenant_b__owned{plugin="b-m",tenant="b"} 7.0"#],
            "{:?}",
            scrape.text
        );
        assert!(
            !scrape.text.contains(&LINE_BREAKS[1..]),
            "{:?}",
            scrape.text
        );
        env.host.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_scope_sees_only_its_own_series() {
    guarded("a tenant's /metrics", async {
        let env = PluginEnv::start(budgets()).await;
        create_namespaces(&env.server, &["team-a", "team-b"]);
        let (state, admin) = start_admin(&env).await;
        let mine = json!({"op": "gauge", "name": "mine", "help": "", "value": 1});
        env.install(
            Some("a"),
            "a-m",
            "hostile",
            &metrics_manifest("a", std::slice::from_ref(&mine)),
        );
        env.install(
            Some("b"),
            "b-m",
            "hostile",
            &metrics_manifest("b", std::slice::from_ref(&mine)),
        );
        env.install(None, "op-m", "hostile", &metrics_manifest("o", &[mine]));
        let report = env.reconcile().await;
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        for ns in ["team-a", "team-b"] {
            env.server.create(configmap(ns, "go-1", "x")).unwrap();
        }
        results(&env, "a-m", "team-a/go-1").await;
        results(&env, "b-m", "team-b/go-1").await;
        results(&env, "op-m", "team-a/go-1").await;
        // Everything: every tenant's, the operator's and the host's.
        let all = scrape_until(admin.addr(), "every plugin's series", |s| {
            ["a-m", "b-m", "op-m"].iter().all(|p| has_series_of(s, p))
        })
        .await;
        assert!(all.text.contains("informant_informer_synced"));
        let scope = Scope::Tenants(["a".to_string()].into());
        let text = informant_runtime::admin::metrics::render(&state, &scope).unwrap();
        openmetrics_parser::openmetrics::parse_openmetrics(&text)
            .unwrap_or_else(|e| panic!("a tenant's /metrics is valid OpenMetrics: {e}\n{text}"));
        assert!(
            text.contains(r#"informant_tenant_a__mine{plugin="a-m",tenant="a"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"informant_plugin_events_received_total{plugin="a-m",tenant="a"}"#),
            "{text}"
        );
        assert!(
            text.contains(r#"informant_tenant_metric_series{tenant="a"} 1"#),
            "{text}"
        );
        for never in [
            "tenant=\"b\"",
            "tenant=\"\"",
            "b-m",
            "op-m",
            "informant_tenant_b__",
            "informant_plugin_mine",
            "informant_informer_",
            "informant_listener_",
            "informant_change_filter_",
        ] {
            assert!(!text.contains(never), "`{never}` in a's view:\n{text}");
        }
        // No tenant at all: nothing but the end.
        let none =
            informant_runtime::admin::metrics::render(&state, &Scope::Tenants(Default::default()))
                .unwrap();
        assert_eq!(none, "# EOF\n");
        env.host.shutdown().await;
    })
    .await;
}
