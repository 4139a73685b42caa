//! Trace overhead on the event path: prints figures, asserts nothing about speed.
//!
//! Per-event cost of the Rust test plugin's `noop` handed straight to one instance, 64 events per
//! `handle-queued` call (as `plugins` section 5 measures it), with traces off and with traces on
//! (exported to a collector on 127.0.0.1 that answers every request), alternating rounds so a
//! neighbour's burst does not land on one side only.
//!
//! `cargo bench -p informant-tests --bench traces`.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;
use std::time::{Duration, Instant};

use informant_runtime::informer::{CachedObject, Event, RawObject};
use informant_runtime::plugin::bindings::WitResource;
use informant_runtime::plugin::exec::compile_cache::CompileCache;
use informant_runtime::plugin::exec::engine::{EngineOptions, PluginEngine};
use informant_runtime::plugin::exec::instance::{Instance, InstanceSpec};
use informant_runtime::plugin::imports::cache::CacheView;
use informant_runtime::plugin::imports::events::batch::Tally;
use informant_runtime::plugin::imports::log::{LogRate, TextLimits};
use informant_runtime::plugin::outcome::Handled;
use informant_runtime::telemetry::{ExportConfig, Traces};
use informant_tests::otlp::Collector;
use kube::core::{ApiResource, GroupVersionKind};
use std::sync::atomic::Ordering;

/// Events per round.
const EVENTS: u64 = 20_000;
/// Rounds per side.
const ROUNDS: usize = 5;

fn configmaps() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"))
}

fn events() -> Vec<Event> {
    (0..EVENTS)
        .map(|i| {
            let mut raw: RawObject = serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("k{i}"), "namespace": "bench",
                    "resourceVersion": (i + 1).to_string()},
                "data": {"k": "v"},
            }))
            .unwrap();
            let object = CachedObject::from_raw(&mut raw, &configmaps(), true);
            let mut e = Event::added(Arc::new(object), false);
            // As the informer stamps it: the span starts at receipt.
            e.received = Some(Instant::now());
            e
        })
        .collect()
}

/// Mean time per event over one round.
async fn round(instance: &mut Instance, events: &[Event]) -> Duration {
    let resource = Arc::new(WitResource {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
    });
    let stop = tokio::sync::watch::channel(false).1;
    let tally = Arc::new(Tally::default());
    let start = Instant::now();
    for call in events.chunks(64) {
        let done = instance
            .handle_queued(&resource, call.to_vec(), &stop, &tally)
            .await;
        for t in done.taken {
            assert!(matches!(t.result, Ok(Handled::Done)), "{:?}", t.result);
        }
    }
    start.elapsed() / events.len() as u32
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    let wasm = informant_tests::plugins::wasm("hostile");
    let cache_dir = tempfile::tempdir().unwrap();
    let engine = PluginEngine::new(EngineOptions {
        compile_cache: CompileCache::Dir(cache_dir.path().to_path_buf()),
        ..Default::default()
    })
    .unwrap();
    let component = engine.load("noop", &wasm).expect("load plugin");
    let logs = tokio::sync::broadcast::channel(16).0;
    let spec = InstanceSpec {
        name: "noop".into(),
        tenant: "".into(),
        component,
        config_json: r#"{"mode":"noop"}"#.into(),
        memory_bytes: 32 << 20,
        deadline: Duration::from_secs(1),
        cache: Arc::new(CacheView::default()),
        logs,
        text: TextLimits::default(),
        log_rate: LogRate::new(u32::MAX),
        log_ring: None,
        retry: Default::default(),
        outbound: Default::default(),
        writer: Default::default(),
        metrics: Default::default(),
    };
    let mut instance = Instance::create(&spec).await.expect("instantiate");
    let events = events();
    round(&mut instance, &events).await;
    let collector = Collector::start(true).await;
    let (mut off, mut on) = (Vec::new(), Vec::new());
    let (mut exported, mut dropped) = (0, 0);
    for _ in 0..ROUNDS {
        off.push(round(&mut instance, &events).await);
        let traces = Traces::start(ExportConfig::new(collector.endpoint())).expect("traces on");
        on.push(round(&mut instance, &events).await);
        traces.flush();
        exported += traces.stats().exported.load(Ordering::Relaxed);
        dropped += traces.stats().dropped.load(Ordering::Relaxed);
        drop(traces);
    }
    println!(
        "trace overhead: `noop`, 64 events per call, {EVENTS} events per round, median of {ROUNDS} rounds"
    );
    println!(
        "   traces off: {:.3} µs per event",
        median(off).as_secs_f64() * 1e6
    );
    println!(
        "   traces on:  {:.3} µs per event ({exported} spans exported, {dropped} dropped: queue full)",
        median(on).as_secs_f64() * 1e6
    );
}
