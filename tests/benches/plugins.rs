//! Plugin runtime benchmark: prints figures, asserts nothing about speed.
//!
//! 1. events/s from the informer into 1, 10 and 50 plugins, trivial (`noop`) and JSON-parsing
//!    (`parse`), with p50/p99 from the event's arrival at the informer to handler entry;
//! 2. memory per plugin instance (RSS growth over 50 instances);
//! 3. plugin load time: cold compile vs from the on-disk compile cache;
//! 4. tenancy: 50 plugins of 50 tenants, each granted one of 50 namespaces, fed 20k events
//!    (the grant filter decides before queueing); and cache queries through a grant.
//!
//! `cargo bench -p informant-tests --bench plugins` (builds the test plugin for wasm32-wasip2 first).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use informant_runtime::informer::{
    Delta, Event, Handler, HandlerOptions, RawObject, ReflectorConfig, SharedInformer, StoreOptions,
};
use informant_runtime::plugin::host::WitResource;
use informant_runtime::plugin::{
    CacheView, CompileCache, EngineOptions, InstanceSpec, LogRate, PluginEngine, RestartPolicy,
    Supervisor, TextLimits,
};
use informant_runtime::tenancy::{Grant, NamespacePattern, ResourceRule};
use kube::api::Api;
use kube::core::{ApiResource, GroupVersionKind};
use parking_lot::Mutex;
use tokio::sync::{Semaphore, broadcast};

/// ConfigMaps as a plugin names them in queries and events.
fn configmap_wit() -> WitResource {
    WitResource {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
    }
}

fn configmaps() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"))
}

fn cm(name: &str, rv: u64) -> RawObject {
    cm_in("bench", name, rv)
}

fn cm_in(namespace: &str, name: &str, rv: u64) -> RawObject {
    let data: String = (0..24)
        .map(|i| format!(r#""key-{i}":"value-{rv}-{i}-padding-padding-padding","#))
        .collect();
    serde_json::from_str(&format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"{namespace}","uid":"u-{name}","resourceVersion":"{rv}","labels":{{"app":"bench","tier":"x"}}}},"data":{{{}"last":"x"}}}}"#,
        data
    ))
    .expect("valid object")
}

fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<usize>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

/// Times each event from `apply` to handler entry; signals when the end marker was handled.
struct Timed<H> {
    inner: H,
    sent: Arc<Mutex<HashMap<String, Instant>>>,
    latencies: Arc<Mutex<Vec<Duration>>>,
    done: Arc<Semaphore>,
}

impl<H: Handler> Handler for Timed<H> {
    async fn handle(&mut self, e: Event) {
        let id = format!("{}@{}", e.key(), e.object.resource_version());
        if let Some(t) = self.sent.lock().get(&id) {
            self.latencies.lock().push(t.elapsed());
        }
        let end = e.object.name() == "zz-end";
        self.inner.handle(e).await;
        if end {
            self.done.add_permits(1);
        }
    }
}

fn spec(
    engine: &PluginEngine,
    wasm: &Path,
    name: &str,
    mode: &str,
    cache: Arc<CacheView>,
    logs: &broadcast::Sender<informant_runtime::plugin::PluginLog>,
) -> InstanceSpec {
    InstanceSpec {
        name: name.into(),
        tenant: "".into(),
        component: engine.load(name, wasm).expect("load plugin"),
        config_json: format!(r#"{{"mode":"{mode}"}}"#),
        memory_bytes: 32 << 20,
        deadline: Duration::from_secs(1),
        cache,
        logs: logs.clone(),
        text: TextLimits::default(),
        log_rate: LogRate::new(u32::MAX),
        retry: Default::default(),
        outbound: Default::default(),
        writer: Default::default(),
    }
}

/// Pushes 20k updates over 1k keys into `plugins` plugins, as fast as they go or at `rate`
/// events/s: events/s absorbed, p50 and p99 from `apply` to handler entry, calls made.
async fn throughput(
    engine: &PluginEngine,
    wasm: &Path,
    plugins: usize,
    mode: &str,
    rate: Option<u32>,
) -> (f64, Duration, Duration, u64) {
    let informer = bench_informer();
    let cache = CacheView::default();
    cache.add(informer.store().clone());
    let cache = Arc::new(cache);
    let logs = broadcast::channel(16).0;
    let sent = Arc::new(Mutex::new(HashMap::new()));
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let done = Arc::new(Semaphore::new(0));
    let resource = configmap_wit();
    let mut sups = Vec::new();
    for p in 0..plugins {
        let sup = Supervisor::start(
            spec(engine, wasm, &format!("p{p}"), mode, cache.clone(), &logs),
            RestartPolicy::default(),
        )
        .await
        .expect("start");
        let timed = Timed {
            inner: sup.handler(resource.clone(), informer.store().clone(), None),
            sent: sent.clone(),
            latencies: latencies.clone(),
            done: done.clone(),
        };
        informer.add_handler(&format!("p{p}"), timed, HandlerOptions::default());
        sups.push(sup);
    }
    let (events, keys) = (20_000u64, 1_000u64);
    let objects: Vec<RawObject> = (0..events)
        .map(|i| cm(&format!("k{}", i % keys), i + 1))
        .collect();
    // Paced: a tick per millisecond, each pushing what the rate allows by then.
    let mut ticks = tokio::time::interval(Duration::from_millis(1));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let start = Instant::now();
    for (i, o) in objects.into_iter().enumerate() {
        if let Some(rate) = rate {
            while (i as f64) >= start.elapsed().as_secs_f64() * f64::from(rate) {
                ticks.tick().await;
            }
        }
        sent.lock().insert(
            format!("bench/k{}@{}", i as u64 % keys, i + 1),
            Instant::now(),
        );
        informer.apply(Delta::Apply(o));
        if rate.is_none() && i % 64 == 0 {
            // Let the handler tasks run between bursts, as a watch stream's chunks would.
            tokio::task::yield_now().await;
        }
    }
    informer.apply(Delta::Apply(cm("zz-end", u64::MAX - 1)));
    let _ = done.acquire_many(plugins as u32).await.unwrap();
    let secs = start.elapsed().as_secs_f64();
    let mut lat = latencies.lock().clone();
    lat.sort();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    let handled: u64 = sups.iter().map(|s| s.handled()).sum();
    (events as f64 / secs, pct(0.50), pct(0.99), handled)
}

fn grant(tenant: &str, namespace: &str) -> Arc<Grant> {
    Arc::new(Grant::new(
        tenant,
        vec![NamespacePattern::try_from(namespace.to_string()).unwrap()],
        vec![ResourceRule::try_from("*".to_string()).unwrap()],
        false,
    ))
}

fn bench_informer() -> Arc<SharedInformer> {
    let client =
        kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
    let informer = SharedInformer::new(
        Api::all_with(client, &configmaps()),
        configmaps(),
        "bench".into(),
        ReflectorConfig::default(),
        StoreOptions::default(),
    );
    informer.apply(Delta::Replace(Vec::new()));
    informer
}

/// 50 tenants' noop plugins, one namespace each, sharing one informer; 20k events spread over
/// the 50 namespaces. Returns events/s absorbed and the plugin calls made.
async fn tenant_dispatch(engine: &PluginEngine, wasm: &Path) -> (f64, u64) {
    const TENANTS: usize = 50;
    let informer = bench_informer();
    let logs = broadcast::channel(16).0;
    let done = Arc::new(Semaphore::new(0));
    let resource = configmap_wit();
    let mut sups = Vec::new();
    for t in 0..TENANTS {
        let grant = grant(&format!("t{t}"), &format!("ns{t}"));
        let cache = CacheView::new(grant.clone());
        cache.add(informer.store().clone());
        let sup = Supervisor::start(
            spec(
                engine,
                wasm,
                &format!("t{t}"),
                "noop",
                Arc::new(cache),
                &logs,
            ),
            RestartPolicy::default(),
        )
        .await
        .expect("start");
        let timed = Timed {
            inner: sup.handler(resource.clone(), informer.store().clone(), None),
            sent: Arc::default(),
            latencies: Arc::default(),
            done: done.clone(),
        };
        let options = HandlerOptions {
            filter: grant.event_filter(),
            ..Default::default()
        };
        informer.add_handler(&format!("t{t}"), timed, options);
        sups.push(sup);
    }
    let (events, keys) = (20_000u64, 1_000u64);
    let objects: Vec<RawObject> = (0..events)
        .map(|i| {
            let k = i % keys;
            cm_in(
                &format!("ns{}", k as usize % TENANTS),
                &format!("k{k}"),
                i + 1,
            )
        })
        .collect();
    let start = Instant::now();
    for (i, o) in objects.into_iter().enumerate() {
        informer.apply(Delta::Apply(o));
        if i % 64 == 0 {
            tokio::task::yield_now().await;
        }
    }
    for t in 0..TENANTS {
        informer.apply(Delta::Apply(cm_in(
            &format!("ns{t}"),
            "zz-end",
            u64::MAX - 1,
        )));
    }
    let _ = done.acquire_many(TENANTS as u32).await.unwrap();
    let secs = start.elapsed().as_secs_f64();
    (events as f64 / secs, sups.iter().map(|s| s.handled()).sum())
}

/// Mean time of `f` over `n` runs.
fn mean(n: u32, mut f: impl FnMut() -> usize) -> (Duration, usize) {
    let start = Instant::now();
    let mut found = 0;
    for _ in 0..n {
        found = std::hint::black_box(f());
    }
    (start.elapsed() / n, found)
}

/// List and by-index through the operator's view and through a one-namespace grant, over
/// 100k objects in 100 namespaces.
fn grant_queries() {
    let informer = bench_informer();
    for i in 0..100_000u64 {
        informer.apply(Delta::Apply(cm_in(
            &format!("ns{}", i % 100),
            &format!("o{i}"),
            i + 1,
        )));
    }
    let r = configmap_wit();
    let operator = CacheView::default();
    operator.add(informer.store().clone());
    let tenant = CacheView::new(grant("t7", "ns7"));
    tenant.add(informer.store().clone());
    let globbed = CacheView::new(grant("t7", "ns7*"));
    globbed.add(informer.store().clone());
    println!(
        "   {:<52} {:>12} {:>8}",
        "query (100k objects, 100 namespaces)", "mean", "found"
    );
    for (what, view, ns) in [
        ("operator: list all", &operator, None),
        (
            "tenant `ns7`: list all (its namespace's index)",
            &tenant,
            None,
        ),
        (
            "tenant `ns7*`: list all (its 11 namespace groups)",
            &globbed,
            None,
        ),
        ("tenant: list its namespace", &tenant, Some("ns7")),
    ] {
        let (t, n) = mean(20, || view.list(&r, ns, None).unwrap().len());
        println!("   {what:<52} {:>10.2}ms {n:>8}", t.as_secs_f64() * 1e3);
    }
    for (what, view, value) in [
        ("operator: by-index namespace=ns7", &operator, "ns7"),
        ("tenant: by-index namespace=ns7 (its own)", &tenant, "ns7"),
        ("tenant: by-index namespace=ns8 (another's)", &tenant, "ns8"),
    ] {
        let (t, n) = mean(200, || view.by_index(&r, "namespace", value).unwrap().len());
        println!("   {what:<52} {:>10.3}ms {n:>8}", t.as_secs_f64() * 1e3);
    }
}

#[tokio::main]
async fn main() {
    // The test plugins, built for wasm32-wasip2 the way the e2e tests build them.
    let wasm = informant_tests::plugins::wasm("hostile");
    let cache_dir = tempfile::tempdir().unwrap();
    let engine = PluginEngine::new(EngineOptions {
        compile_cache: CompileCache::Dir(cache_dir.path().to_path_buf()),
        ..Default::default()
    })
    .unwrap();

    println!(
        "plugin benchmark: {} ({} KB)",
        wasm.display(),
        std::fs::metadata(&wasm).unwrap().len() / 1024
    );
    let cold = engine.load("cold", &wasm).unwrap();
    let warm = engine.load("warm", &wasm).unwrap();
    println!(
        "\n3. load time: cold compile {:.1} ms (from cache: {}), from the compile cache {:.2} ms (from cache: {})",
        cold.load_time.as_secs_f64() * 1e3,
        cold.from_cache,
        warm.load_time.as_secs_f64() * 1e3,
        warm.from_cache
    );

    println!("\n1. 20k update events over 1k keys (~1.6 KB objects) into N plugins");
    println!(
        "   {:<6} {:>8} {:>14} {:>12} {:>12} {:>16}",
        "mode", "plugins", "events/s", "p50", "p99", "handler calls"
    );
    for mode in ["noop", "parse"] {
        for n in [1, 10, 50] {
            let (eps, p50, p99, handled) = throughput(&engine, &wasm, n, mode, None).await;
            println!(
                "   {mode:<6} {n:>8} {eps:>14.0} {:>10.2}ms {:>10.2}ms {handled:>16}",
                p50.as_secs_f64() * 1e3,
                p99.as_secs_f64() * 1e3
            );
        }
    }
    println!("   paced at 10k events/s (issue 12's dispatch target: p99 < 1 ms with 50 plugins):");
    for n in [10, 50] {
        let (eps, p50, p99, handled) = throughput(&engine, &wasm, n, "noop", Some(10_000)).await;
        println!(
            "   noop   {n:>8} {eps:>14.0} {:>10.2}ms {:>10.2}ms {handled:>16}",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3
        );
    }

    let logs = broadcast::channel(16).0;
    let cache = Arc::new(CacheView::default());
    let before = rss_bytes();
    let mut sups = Vec::new();
    for i in 0..50 {
        sups.push(
            Supervisor::start(
                spec(
                    &engine,
                    &wasm,
                    &format!("m{i}"),
                    "noop",
                    cache.clone(),
                    &logs,
                ),
                RestartPolicy::default(),
            )
            .await
            .unwrap(),
        );
    }
    let per = (rss_bytes().saturating_sub(before)) / sups.len();
    println!(
        "\n2. memory per plugin instance (RSS growth over {} instances): {:.0} KB",
        sups.len(),
        per as f64 / 1024.0
    );
    drop(sups);

    println!("\n4. tenancy");
    let (eps, calls) = tenant_dispatch(&engine, &wasm).await;
    println!(
        "   20k events over 50 namespaces into 50 tenants' noop plugins (one namespace each): {eps:.0} events/s, {calls} plugin calls"
    );
    grant_queries();
}
