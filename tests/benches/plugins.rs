//! Plugin runtime benchmark: prints figures, asserts nothing about speed.
//!
//! 1. events/s from the informer into 1, 10 and 50 plugins, trivial (`noop`) and JSON-parsing
//!    (`parse`), with p50/p99 from the event's arrival at the informer to the plugin taking it
//!    (the bounds of the `informant_plugin_dispatch_delay_seconds` buckets they fall in);
//! 2. memory per plugin instance (RSS growth over 50 instances);
//! 3. plugin load time: cold compile vs from the on-disk compile cache;
//! 4. tenancy: 50 plugins of 50 tenants, each granted one of 50 namespaces, fed 20k events
//!    (the grant filter decides before queueing); and cache queries through a grant;
//! 5. per language: the test plugin in Rust, Python and TypeScript (`hostile`, `hostile-py`,
//!    `hostile-ts`), each with its component size, load time cold and from the compile cache,
//!    instantiate time, memory per instance and per-event cost of `noop` and `parse`.
//!
//! `cargo bench -p informant-tests --bench plugins` (builds the test plugins first: Rust for
//! wasm32-wasip2, Python and TypeScript with their pinned toolchains, installed if missing).
//! `PLUGINS_BENCH_AFFINITY=pin` runs it as `informant run --worker-affinity pin` (a CPU per
//! worker); `PLUGINS_BENCH_PACED_ONLY=1` runs only section 1's paced rows.

/// The allocator `informant run` uses, so time and RSS are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use informant_runtime::informer::{
    CachedObject, Delta, Event, Handler, HandlerOptions, ListenerHandle, RawObject,
    ReflectorConfig, SharedInformer, StoreOptions,
};
use informant_runtime::plugin::bindings::WitResource;
use informant_runtime::plugin::exec::compile_cache::CompileCache;
use informant_runtime::plugin::exec::engine::{EngineOptions, LoadedComponent, PluginEngine};
use informant_runtime::plugin::exec::histogram::DurationHistogram;
use informant_runtime::plugin::exec::instance::{Instance, InstanceSpec};
use informant_runtime::plugin::exec::supervisor::{RestartPolicy, Supervisor};
use informant_runtime::plugin::imports::cache::CacheView;
use informant_runtime::plugin::imports::log::{LogRate, TextLimits};
use informant_runtime::plugin::outcome::Handled;
use informant_runtime::tenancy::{Grant, NamespacePattern, ResourceRule};
use informant_runtime::workers::{self, WorkerAffinity};
use informant_tests::proc::{cpu_seconds, rss_bytes};
use kube::api::Api;
use kube::core::{ApiResource, GroupVersionKind};
use sha2::{Digest, Sha256};
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

/// Signals when the end marker was handled.
struct Ended<H> {
    inner: H,
    done: Arc<Semaphore>,
}

impl<H: Handler> Handler for Ended<H> {
    async fn handle(&mut self, e: Event) {
        self.handle_batch(vec![e]).await;
    }

    async fn handle_batch(&mut self, events: Vec<Event>) {
        let end = events.iter().any(|e| e.object.name() == "zz-end");
        self.inner.handle_batch(events).await;
        if end {
            self.done.add_permits(1);
        }
    }
}

/// The `q` quantile of the plugins' dispatch delays (the informer receiving an event to the
/// plugin taking it), as the upper bound of the histogram bucket it falls in.
fn dispatch_quantile(sups: &[Arc<Supervisor>], q: f64) -> Duration {
    DurationHistogram::quantile_bound(sups.iter().map(|s| s.dispatch()), q)
        .unwrap_or(Duration::from_secs(3600))
}

/// [`spec_of`] the component at `wasm`, loaded for this plugin alone (as the host loads each
/// plugin's file).
fn spec(
    engine: &PluginEngine,
    wasm: &Path,
    name: &str,
    mode: &str,
    cache: Arc<CacheView>,
    logs: &broadcast::Sender<informant_runtime::plugin::imports::log::PluginLog>,
) -> InstanceSpec {
    let component = engine.load(name, wasm).expect("load plugin");
    spec_of(component, name, mode, cache, logs)
}

/// An instance of `component` in `mode`: 32 MiB of memory, a 1 s deadline.
fn spec_of(
    component: LoadedComponent,
    name: &str,
    mode: &str,
    cache: Arc<CacheView>,
    logs: &broadcast::Sender<informant_runtime::plugin::imports::log::PluginLog>,
) -> InstanceSpec {
    InstanceSpec {
        name: name.into(),
        tenant: "".into(),
        component,
        config_json: format!(r#"{{"mode":"{mode}"}}"#),
        memory_bytes: 32 << 20,
        deadline: Duration::from_secs(1),
        cache,
        logs: logs.clone(),
        text: TextLimits::default(),
        log_rate: LogRate::new(u32::MAX),
        log_ring: None,
        retry: Default::default(),
        outbound: Default::default(),
        writer: Default::default(),
        metrics: Default::default(),
    }
}

/// What [`throughput`] pushes: `events` versions spread over `keys` objects (so all adds when
/// they are equal), as fast as they go or at `rate` events/s; from the bench's main thread, or
/// from a task on the runtime's workers (`from_task`) as the reflector pushes in `informant run`.
#[derive(Clone, Copy)]
struct Stream {
    events: u64,
    keys: u64,
    rate: Option<u32>,
    from_task: bool,
}

impl Stream {
    /// 20k updates over 1k keys: a plugin that falls behind gets coalesced, newer events.
    const COALESCING: Stream = Stream {
        events: 20_000,
        keys: 1_000,
        rate: None,
        from_task: false,
    };
}

/// What one [`throughput`] run measured.
struct Run {
    /// Events absorbed per second.
    eps: f64,
    /// Median and 99th percentile (bucket bounds) from the informer receiving an event to a
    /// plugin taking it.
    p50: Duration,
    p99: Duration,
    /// Events the plugins handled (after per-key coalescing).
    handled: u64,
    /// Cores the process used while the stream was pushed and handled.
    cpu: f64,
}

/// Pushes `stream` into `plugins` plugins.
async fn throughput(
    engine: &PluginEngine,
    wasm: &Path,
    plugins: usize,
    mode: &str,
    stream: Stream,
) -> Run {
    let Stream {
        events,
        keys,
        rate,
        from_task,
    } = stream;
    let informer = bench_informer();
    let cache = CacheView::default();
    cache.add(informer.store().clone());
    let cache = Arc::new(cache);
    let logs = broadcast::channel(16).0;
    let done = Arc::new(Semaphore::new(0));
    let resource = configmap_wit();
    let (mut sups, mut handles) = (Vec::new(), Vec::new());
    for p in 0..plugins {
        let sup = Supervisor::start(
            spec(engine, wasm, &format!("p{p}"), mode, cache.clone(), &logs),
            RestartPolicy::default(),
        )
        .await
        .expect("start");
        let ended = Ended {
            inner: sup.handler(
                resource.clone(),
                informer.store().clone(),
                None,
                Default::default(),
            ),
            done: done.clone(),
        };
        handles.push(informer.add_handler(&format!("p{p}"), ended, HandlerOptions::default()));
        sups.push(sup);
    }
    let objects: Vec<RawObject> = (0..events)
        .map(|i| cm(&format!("k{}", i % keys), i + 1))
        .collect();
    let (start, cpu0) = (Instant::now(), cpu_seconds());
    let push = {
        let informer = informer.clone();
        async move {
            // Paced: a tick per millisecond, each pushing what the rate allows by then.
            let mut ticks = tokio::time::interval(Duration::from_millis(1));
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            for (i, o) in objects.into_iter().enumerate() {
                if let Some(rate) = rate {
                    while (i as f64) >= start.elapsed().as_secs_f64() * f64::from(rate) {
                        ticks.tick().await;
                    }
                }
                informer.apply(Delta::Apply(o));
                if rate.is_none() && i % 64 == 0 {
                    // Let the handler tasks run between bursts, as a watch stream's chunks would.
                    tokio::task::yield_now().await;
                }
            }
            informer.apply(Delta::Apply(cm("zz-end", u64::MAX - 1)));
        }
    };
    if from_task {
        tokio::spawn(push).await.expect("the producer task");
    } else {
        push.await;
    }
    let _ = done.acquire_many(plugins as u32).await.unwrap();
    let secs = start.elapsed().as_secs_f64();
    let run = Run {
        eps: events as f64 / secs,
        p50: dispatch_quantile(&sups, 0.5),
        p99: dispatch_quantile(&sups, 0.99),
        handled: sups.iter().map(|s| s.handled()).sum(),
        cpu: (cpu_seconds() - cpu0) / secs,
    };
    release(handles).await;
    run
}

/// Unregisters the bench's handlers, so their plugins' instances are dropped before the next
/// run (the engine's pool holds 256 at most).
async fn release(handles: Vec<ListenerHandle>) {
    for handle in handles {
        handle.shutdown().await;
    }
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
    let (mut sups, mut handles) = (Vec::new(), Vec::new());
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
        let ended = Ended {
            inner: sup.handler(
                resource.clone(),
                informer.store().clone(),
                None,
                Default::default(),
            ),
            done: done.clone(),
        };
        let options = HandlerOptions {
            filter: grant.event_filter(),
            ..Default::default()
        };
        handles.push(informer.add_handler(&format!("t{t}"), ended, options));
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
    release(handles).await;
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

/// RSS growth per instance over `n` instances of the specs `spec_for(0..n)` makes, started
/// and held together; making the specs is inside the measurement, so a spec that loads its
/// own component counts the loaded code too.
async fn rss_per_instance(n: usize, mut spec_for: impl FnMut(usize) -> InstanceSpec) -> usize {
    let before = rss_bytes();
    let mut sups = Vec::new();
    for i in 0..n {
        sups.push(
            Supervisor::start(spec_for(i), RestartPolicy::default())
                .await
                .expect("start"),
        );
    }
    (rss_bytes().saturating_sub(before) / n as u64) as usize
}

/// A test plugin built from one language's sources.
struct Language {
    name: &'static str,
    /// Builds the component (the test support's cached builders), panicking when it cannot.
    build: fn() -> PathBuf,
}

/// The same test plugin in each language: `noop` and `parse` mean the same in all three.
const LANGUAGES: [Language; 3] = [
    Language {
        name: "Rust",
        build: || informant_tests::plugins::wasm("hostile"),
    },
    Language {
        name: "Python",
        build: || {
            informant_tests::plugins::python_wasm("tests/plugins/hostile-py")
                .expect("the Python toolchain")
        },
    },
    Language {
        name: "TypeScript",
        build: || {
            informant_tests::plugins::js_wasm("tests/plugins/hostile-ts").expect("the JS toolchain")
        },
    },
];

/// Instances per language for the instantiate and memory figures: each load of the Python or
/// TypeScript component holds ~35 MiB, so the 20 that load their own already take ~800 MiB.
const INSTANCES: usize = 20;
/// Events per per-event figure: enough to outweigh the first calls' page faults.
const EVENTS: u64 = 5_000;
/// Batches of the direct calls: their median leaves out a batch another process's burst slowed
/// (the machine is shared).
const BATCHES: usize = 5;
/// Loads from the compile cache per language, for their mean.
const CACHED_LOADS: u32 = 5;

/// One language's figures.
struct Figures {
    size: u64,
    cold: Duration,
    cached: Duration,
    /// The part of a load that hashes the wasm (a version's identity), whatever the cache.
    sha256: Duration,
    instantiate: Duration,
    memory_shared: usize,
    memory_own: usize,
    /// µs per event handed straight to an instance, and events/s through the informer, per mode.
    per_event: Vec<(Duration, f64)>,
}

/// Section 5: the table of [`Figures`] per language; a language whose component cannot be
/// built is reported and skipped.
async fn languages() {
    println!(
        "\n5. per language: the test plugin's `noop` (metadata header only) and `parse` (full JSON parse)"
    );
    // The builders panic with the toolchain's own message; here that skips a language, so the
    // message is printed once, below, without the default hook's backtrace.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let built: Vec<(&str, Option<PathBuf>)> = LANGUAGES
        .iter()
        .map(|l| {
            let wasm = std::panic::catch_unwind(l.build).map_err(|payload| {
                payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            });
            if let Err(why) = &wasm {
                println!(
                    "   {}: skipped, its component could not be built: {why}",
                    l.name
                );
            }
            (l.name, wasm.ok())
        })
        .collect();
    std::panic::set_hook(hook);
    // Its own cache directory, empty: each language's first load is a cold compile.
    let cache_dir = tempfile::tempdir().unwrap();
    let engine = PluginEngine::new(EngineOptions {
        compile_cache: CompileCache::Dir(cache_dir.path().to_path_buf()),
        ..Default::default()
    })
    .unwrap();
    let mut rows = Vec::new();
    for (name, wasm) in built {
        if let Some(wasm) = wasm {
            rows.push((name, measure(&engine, &wasm).await));
        }
    }
    println!(
        "   {:<10} {:>9} {:>10} {:>10} {:>8} {:>12} {:>13} {:>11} {:>18} {:>18}",
        "language",
        "size",
        "load cold",
        "cached",
        "sha256",
        "instantiate",
        "RSS/instance",
        "RSS/plugin",
        "noop µs, events/s",
        "parse µs, events/s"
    );
    for (name, f) in rows {
        let per_event: Vec<String> = f
            .per_event
            .iter()
            .map(|(call, eps)| format!("{:.1}, {:.1}k", call.as_secs_f64() * 1e6, eps / 1e3))
            .collect();
        println!(
            "   {name:<10} {:>7.1}MB {:>8.1}ms {:>8.2}ms {:>6.2}ms {:>10.3}ms {:>10.2}MiB {:>8.2}MiB {:>18} {:>18}",
            f.size as f64 / 1e6,
            f.cold.as_secs_f64() * 1e3,
            f.cached.as_secs_f64() * 1e3,
            f.sha256.as_secs_f64() * 1e3,
            f.instantiate.as_secs_f64() * 1e3,
            f.memory_shared as f64 / (1 << 20) as f64,
            f.memory_own as f64 / (1 << 20) as f64,
            per_event[0],
            per_event[1]
        );
    }
    for line in [
        format!(
            "load cold: compiled into an empty cache; cached: mean of {CACHED_LOADS} loads from it; both"
        ),
        "include the pre-link and the wasm's sha256, timed alone under sha256".into(),
        format!(
            "instantiate: instantiate + `init`, mean of {INSTANCES}; RSS/instance: growth over {INSTANCES} instances"
        ),
        format!(
            "of one loaded component; RSS/plugin: over {INSTANCES} plugins each loading the wasm, as plugins do (the engine shares the code of one wasm)"
        ),
        format!(
            "µs per event handed straight to an instance, 64 per call, the median of {BATCHES} batches' means over"
        ),
        format!(
            "{EVENTS} adds; events/s: {EVENTS} adds through the informer into one plugin, one call each"
        ),
    ] {
        println!("   {line}");
    }
}

/// Every figure of the component at `wasm`, loaded first (cold) into `engine`.
async fn measure(engine: &PluginEngine, wasm: &Path) -> Figures {
    let cold = engine.load("cold", wasm).expect("load plugin");
    assert!(
        !cold.from_cache,
        "the first load of {} compiles",
        wasm.display()
    );
    let cold_time = cold.load_time;
    // Dropped, so the loads below come from the disk cache rather than sharing its code.
    drop(cold);
    let mut cached = Duration::ZERO;
    for _ in 0..CACHED_LOADS {
        let warm = engine.load("warm", wasm).expect("load plugin");
        assert!(
            warm.from_cache,
            "{} is in the compile cache",
            wasm.display()
        );
        cached += warm.load_time;
    }
    let cold = engine.load("loaded", wasm).expect("load plugin");
    let bytes = std::fs::read(wasm).expect("component");
    let start = Instant::now();
    for _ in 0..CACHED_LOADS {
        std::hint::black_box(Sha256::digest(&bytes));
    }
    let sha256 = start.elapsed() / CACHED_LOADS;
    let logs = broadcast::channel(16).0;
    let cache = Arc::new(CacheView::default());
    let instantiate = instantiate_time(&cold, INSTANCES as u32).await;
    let memory_shared = rss_per_instance(INSTANCES, |i| {
        spec_of(cold.clone(), &format!("m{i}"), "noop", cache.clone(), &logs)
    })
    .await;
    let memory_own = rss_per_instance(INSTANCES, |i| {
        spec(engine, wasm, &format!("m{i}"), "noop", cache.clone(), &logs)
    })
    .await;
    let mut per_event = Vec::new();
    for mode in ["noop", "parse"] {
        let call = call_cost(&cold, mode, EVENTS).await;
        let distinct = Stream {
            events: EVENTS,
            keys: EVENTS,
            ..Stream::COALESCING
        };
        let run = throughput(engine, wasm, 1, mode, distinct).await;
        per_event.push((call, run.eps));
    }
    Figures {
        size: std::fs::metadata(wasm).expect("component").len(),
        cold: cold_time,
        cached: cached / CACHED_LOADS,
        sha256,
        instantiate,
        memory_shared,
        memory_own,
        per_event,
    }
}

/// Mean time to instantiate `component` and run its `init`, over `n` instances made one after
/// another (each dropped, untimed, before the next).
async fn instantiate_time(component: &LoadedComponent, n: u32) -> Duration {
    let logs = broadcast::channel(16).0;
    let spec = spec_of(component.clone(), "inst", "noop", Arc::default(), &logs);
    let mut total = Duration::ZERO;
    for _ in 0..n {
        let start = Instant::now();
        let instance = Instance::create(&spec).await.expect("instantiate");
        total += start.elapsed();
        drop(instance);
    }
    total / n
}

/// Time per event into one instance of `component` in `mode`, over `events` adds of distinct
/// objects handed over 64 per `handle-queued` call (as a busy listener does): the median of
/// [`BATCHES`] batches' means; it includes handing the events' objects to the guest.
async fn call_cost(component: &LoadedComponent, mode: &str, events: u64) -> Duration {
    let logs = broadcast::channel(16).0;
    let spec = spec_of(component.clone(), "calls", mode, Arc::default(), &logs);
    let mut instance = Instance::create(&spec).await.expect("instantiate");
    let resource = Arc::new(configmap_wit());
    let events: Vec<Event> = (0..events)
        .map(|i| {
            let object =
                CachedObject::from_raw(&mut cm(&format!("k{i}"), i + 1), &configmaps(), true);
            Event::added(Arc::new(object), false)
        })
        .collect();
    let stop = tokio::sync::watch::channel(false).1;
    let tally = Arc::new(informant_runtime::plugin::imports::events::batch::Tally::default());
    let mut batches = Vec::new();
    for batch in events.chunks(events.len().div_ceil(BATCHES)) {
        let start = Instant::now();
        for call in batch.chunks(64) {
            let done = instance
                .handle_queued(&resource, call.to_vec(), &stop, &tally)
                .await;
            for t in &done.taken {
                if !matches!(t.result, Ok(Handled::Done)) {
                    panic!("`{mode}` did not handle {}: {:?}", t.event.key(), t.result);
                }
            }
            assert_eq!(done.taken.len(), call.len(), "`{mode}` took every event");
        }
        batches.push(start.elapsed() / batch.len() as u32);
    }
    batches.sort();
    batches[batches.len() / 2]
}

fn main() {
    // Workers placed as `informant run` places them; `PLUGINS_BENCH_AFFINITY=pin` gives each its
    // own CPU.
    let affinity = std::env::var("PLUGINS_BENCH_AFFINITY")
        .map(|a| {
            a.parse()
                .unwrap_or_else(|e| panic!("PLUGINS_BENCH_AFFINITY: {e}"))
        })
        .unwrap_or_default();
    workers::runtime(affinity)
        .expect("tokio runtime")
        .block_on(run(affinity))
}

async fn run(affinity: WorkerAffinity) {
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

    // `PLUGINS_BENCH_PACED_ONLY=1`: only the paced dispatch run (for profiling it).
    let paced_only = std::env::var_os("PLUGINS_BENCH_PACED_ONLY").is_some();
    println!("\n1. 20k update events over 1k keys (~1.6 KB objects) into N plugins");
    println!(
        "   {:<6} {:>8} {:>14} {:>12} {:>12} {:>16} {:>6}",
        "mode", "plugins", "events/s", "p50", "p99", "events handled", "cores"
    );
    let show = |mode: &str, n: usize, r: Run| {
        println!(
            "   {mode:<6} {n:>8} {:>14.0} {:>10.2}ms {:>10.2}ms {:>16} {:>6.2}",
            r.eps,
            r.p50.as_secs_f64() * 1e3,
            r.p99.as_secs_f64() * 1e3,
            r.handled,
            r.cpu
        )
    };
    for mode in ["noop", "parse"] {
        for n in [1, 10, 50].into_iter().filter(|_| !paced_only) {
            show(
                mode,
                n,
                throughput(&engine, &wasm, n, mode, Stream::COALESCING).await,
            );
        }
    }
    println!(
        "   paced at 10k events/s (the dispatch target: p99 < 1 ms with 50 plugins), workers {}:",
        match affinity {
            WorkerAffinity::Pin => "pinned one per CPU (PLUGINS_BENCH_AFFINITY=pin)",
            WorkerAffinity::Off =>
                "placed by the scheduler (PLUGINS_BENCH_AFFINITY=pin: one per CPU)",
        }
    );
    let paced = Stream {
        rate: Some(10_000),
        ..Stream::COALESCING
    };
    for n in [10, 50] {
        show(
            "noop",
            n,
            throughput(&engine, &wasm, n, "noop", paced).await,
        );
    }
    println!("   the same, pushed from a task on the runtime's two workers (as the reflector is):");
    let from_task = Stream {
        from_task: true,
        ..paced
    };
    show(
        "noop",
        50,
        throughput(&engine, &wasm, 50, "noop", from_task).await,
    );
    if paced_only {
        return;
    }

    let logs = broadcast::channel(16).0;
    let cache = Arc::new(CacheView::default());
    let per = rss_per_instance(50, |i| {
        spec(
            &engine,
            &wasm,
            &format!("m{i}"),
            "noop",
            cache.clone(),
            &logs,
        )
    })
    .await;
    println!(
        "\n2. memory per plugin instance (RSS growth over 50 instances): {:.0} KB",
        per as f64 / 1024.0
    );

    println!("\n4. tenancy");
    let (eps, calls) = tenant_dispatch(&engine, &wasm).await;
    println!(
        "   20k events over 50 namespaces into 50 tenants' noop plugins (one namespace each): {eps:.0} events/s, {calls} plugin calls"
    );
    grant_queries();

    languages().await;
}
