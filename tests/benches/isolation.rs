//! What a tenant's query costs while another tenant holds 0 or 100k objects matching it.
//!
//! Tenant a's plugin (the real hostile component, through its WIT `cache` imports) asks the
//! three questions of the timing oracle: `by-index namespace=team-b-bulk`,
//! `list(none, "bulk=b")`, and its own field index on `data.password` for b's value. Each
//! answers nothing; what is measured is whether the time to say so shows how much b holds.
//!
//! `cargo bench -p informant-tests --bench isolation`

use std::sync::Arc;
use std::time::{Duration, Instant};

use informant_runtime::apimachinery::FieldPath;
use informant_runtime::informer::{CachedObject, Event, Handler, RawObject, Store, StoreOptions};
use informant_runtime::plugin::bindings::WitResource;
use informant_runtime::plugin::exec::engine::{EngineOptions, PluginEngine};
use informant_runtime::plugin::exec::instance::InstanceSpec;
use informant_runtime::plugin::exec::supervisor::{RestartPolicy, Supervisor};
use informant_runtime::plugin::imports::cache::CacheView;
use informant_runtime::plugin::imports::log::{LogRate, TextLimits};
use informant_runtime::tenancy::{Grant, NamespacePattern, ResourceRule};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;
use tokio::sync::broadcast;

/// Objects of tenant a (its own, answered by none of the probes).
const OWN: usize = 1_000;
/// Handle calls timed per case; each makes 30 queries.
const CALLS: usize = 300;

fn configmaps() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"))
}

fn cm_json(namespace: &str, name: &str, bulk: &str, password: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("u-{namespace}-{name}"),
            "resourceVersion": "1", "labels": {"bulk": bulk}},
        "data": {"password": password, "padding": "x".repeat(512)}})
}

fn cm(namespace: &str, name: &str, bulk: &str, password: &str) -> RawObject {
    serde_json::from_value(cm_json(namespace, name, bulk, password)).expect("valid object")
}

/// The probes, ten times over: one call asks 30 questions.
fn probes() -> serde_json::Value {
    let one = [
        json!({"op": "by-index", "index": "namespace", "value": "team-b-bulk"}),
        json!({"op": "list", "selector": "bulk=b"}),
        json!({"op": "by-index", "index": "secret", "value": "guess"}),
    ];
    json!({"mode": "snoop", "tag": "a", "probes": one.iter().cycle().take(30).collect::<Vec<_>>()})
}

fn grant(patterns: &[&str]) -> Arc<Grant> {
    Arc::new(Grant::new(
        "a",
        patterns
            .iter()
            .map(|p| NamespacePattern::try_from(p.to_string()).unwrap())
            .collect(),
        vec![ResourceRule::try_from("*".to_string()).unwrap()],
        false,
    ))
}

/// Median and p99 time of a's probe call with b holding `theirs` matching objects.
async fn case(
    engine: &PluginEngine,
    wasm: &std::path::Path,
    patterns: &[&str],
    theirs: usize,
) -> (Duration, Duration) {
    let store = Arc::new(Store::new(configmaps(), StoreOptions::default()));
    for i in 0..OWN {
        store.apply(cm("team-a", &format!("a{i}"), "a", "a-pw"), &mut |_| {});
    }
    for i in 0..theirs {
        store.apply(
            cm("team-b-bulk", &format!("b{i}"), "b", "guess"),
            &mut |_| {},
        );
    }
    let secret: FieldPath = "data.password".parse().unwrap();
    let cache = CacheView::new(grant(patterns));
    cache.add_with_indexes(store.clone(), [("secret", &secret)]);
    let logs = broadcast::channel(64).0;
    let spec = InstanceSpec {
        name: "a-snoop".into(),
        tenant: "a".into(),
        component: engine.load("a-snoop", wasm).expect("load plugin"),
        config_json: probes().to_string(),
        memory_bytes: 64 << 20,
        deadline: Duration::from_secs(5),
        cache: Arc::new(cache),
        logs: logs.clone(),
        text: TextLimits::default(),
        log_rate: LogRate::new(u32::MAX),
        log_ring: None,
        retry: Default::default(),
        outbound: Default::default(),
        writer: Default::default(),
        metrics: Default::default(),
    };
    let sup = Supervisor::start(spec, RestartPolicy::default())
        .await
        .expect("start");
    let mut handler = sup.handler(
        WitResource {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
        },
        store.clone(),
        None,
        Default::default(),
    );
    let probe = Arc::new(
        CachedObject::from_json(
            &cm_json("team-a", "probe", "a", "a-pw").to_string(),
            &configmaps(),
            true,
        )
        .unwrap(),
    );
    let mut rx = logs.subscribe();
    let mut times = Vec::with_capacity(CALLS);
    for _ in 0..CALLS + 20 {
        let start = Instant::now();
        handler.handle(Event::added(probe.clone(), false)).await;
        times.push(start.elapsed());
        // Every probe answered, with nothing: check the last line of this call.
        let mut last = None;
        while let Ok(line) = rx.try_recv() {
            last = Some(line.message);
        }
        let v: serde_json::Value = serde_json::from_str(&last.expect("the snoop logged")).unwrap();
        let answers = v["probes"].as_array().expect("probe results");
        assert!(
            answers
                .iter()
                .all(|a| a["ok"].as_array().is_some_and(|o| o.is_empty())),
            "a saw something of b's: {v}"
        );
    }
    assert_eq!(sup.failed(), 0);
    let mut times = times.split_off(20); // warm-up
    times.sort();
    (times[CALLS / 2], times[CALLS * 99 / 100])
}

#[tokio::main]
async fn main() {
    let wasm = informant_tests::plugins::wasm("hostile");
    let engine = PluginEngine::new(EngineOptions::default()).unwrap();
    println!(
        "tenant query isolation: a's plugin asks 30 questions about b's objects per call \
         (by-index namespace, list by label, its own field index); a holds {OWN} objects"
    );
    println!(
        "   {:<34} {:>12} {:>12} {:>12} {:>12} {:>8}",
        "a's grant", "b: 0 p50", "b: 100k p50", "b: 0 p99", "b: 100k p99", "ratio"
    );
    for patterns in [&["team-a", "team-a-*"][..], &["team-a"][..]] {
        let (p50_0, p99_0) = case(&engine, &wasm, patterns, 0).await;
        let (p50_n, p99_n) = case(&engine, &wasm, patterns, 100_000).await;
        let ratio = p50_n.as_secs_f64() / p50_0.as_secs_f64();
        println!(
            "   {:<34} {:>10.1}µs {:>10.1}µs {:>10.1}µs {:>10.1}µs {:>7.2}x  {}",
            format!("{patterns:?}"),
            p50_0.as_secs_f64() * 1e6,
            p50_n.as_secs_f64() * 1e6,
            p99_0.as_secs_f64() * 1e6,
            p99_n.as_secs_f64() * 1e6,
            ratio,
            if ratio <= 1.2 {
                "(target ≤ 1.2: met)"
            } else {
                "(target ≤ 1.2: MISSED)"
            }
        );
    }
}
