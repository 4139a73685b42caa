//! Informer benchmark: prints figures, asserts nothing about speed.
//!
//! Same workload through Informant's informer and through kube-runtime's reflector `Store`
//! (DynamicObject, the way to hold any kind there), printed side by side with ratios:
//! 1. events/s from watch-stream JSON through the store and processor into 10 no-op handlers;
//! 2. cache bytes per object for 100k ~2 KB pods (managedFields in the source);
//! 3. by-index query time at 100k objects (kube-runtime has no indexes: a filtered scan);
//! 4. end to end over loopback HTTP: initial sync of 100k pods from the embedded API server.
//!
//! `cargo bench -p informant-informer --bench informer` (BENCH_PODS=N to change the object count).

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use informant_devserver::{DevServer, DevServerConfig};
use informant_informer::{
    Delta, Event, FactoryOptions, FnHandler, HandlerOptions, InformerFactory, InitialList,
    RawObject, ReflectorConfig, SharedInformer, Store, StoreOptions, WatchScope,
};
use kube::api::{Api, DynamicObject, WatchEvent};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{reflector, watcher};

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

fn pods() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Pod"), "pods")
}

/// A realistic ~2 KB pod, a third of it managedFields, owned by one of `n / 10` ReplicaSets.
fn pod(i: usize, rv: usize) -> serde_json::Value {
    let owner = i / 10;
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("web-{owner}-{i:06}"), "namespace": format!("team-{}", i % 50),
            "uid": format!("6f1d2c7e-0000-4000-8000-{i:012}"), "resourceVersion": rv.to_string(),
            "creationTimestamp": "2026-11-01T10:00:00Z",
            "labels": {"app": format!("web-{}", owner % 100), "pod-template-hash": "5d8f7c9b6d", "tier": "frontend"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-01T09:59:00Z"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("web-{owner}-5d8f7c9b6d"),
                "uid": format!("rs-{owner:08}"), "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": "2026-11-01T10:00:00Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}, "f:tier": {}},
                   "f:ownerReferences": {".": {}, "k:{\"uid\":\"x\"}": {}}}, "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {},
                   "f:ports": {".": {}, "k:{\"containerPort\":8080,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:protocol": {}}}, "f:resources": {}}}, "f:dnsPolicy": {}, "f:restartPolicy": {}}}},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2026-11-01T10:00:05Z", "subresource": "status",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}},
                   "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {}, "f:startTime": {}}}}
            ]
        },
        "spec": {
            "nodeName": format!("node-{}", i % 200), "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "web", "image": "registry.example.com/team/web:1.27.3", "imagePullPolicy": "IfNotPresent",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                "env": [{"name": "MODE", "value": "production"}]}]
        },
        "status": {"phase": "Running", "hostIP": "10.0.0.1", "podIP": format!("10.1.{}.{}", (i / 250) % 250, i % 250),
            "startTime": "2026-11-01T10:00:02Z",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-01T10:00:05Z"}]}
    })
}

fn kube_store() -> (
    reflector::Store<DynamicObject>,
    reflector::store::Writer<DynamicObject>,
) {
    let writer = reflector::store::Writer::new(pods());
    (writer.as_reader(), writer)
}

fn ratio(ours: f64, theirs: f64) -> String {
    format!("{:.2}x", ours / theirs)
}

fn dummy_client() -> kube::Client {
    kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap()
}

/// 1. Watch lines -> store -> 10 handlers; returns (input events/s, handler deliveries).
async fn pipeline_ours(lines: &[Vec<u8>], keys: usize) -> (f64, usize) {
    let informer = SharedInformer::new(
        Api::all_with(dummy_client(), &pods()),
        pods(),
        "bench".into(),
        ReflectorConfig::default(),
        StoreOptions::default(),
    );
    informer.apply(Delta::Replace(Vec::new()));
    let delivered = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(tokio::sync::Semaphore::new(0));
    for h in 0..10 {
        let (delivered, done) = (delivered.clone(), done.clone());
        informer.add_handler(
            &format!("noop-{h}"),
            FnHandler(move |e: Event| {
                delivered.fetch_add(1, Ordering::Relaxed);
                if e.object.name() == "zz-end" {
                    done.add_permits(1);
                }
            }),
            HandlerOptions::default(),
        );
    }
    let start = Instant::now();
    for line in lines {
        match serde_json::from_slice::<WatchEvent<RawObject>>(line) {
            Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) => informer.apply(Delta::Apply(o)),
            Ok(WatchEvent::Deleted(o)) => informer.apply(Delta::Delete(o)),
            other => panic!("unexpected line: {other:?}"),
        }
    }
    let mut end: RawObject = serde_json::from_value(pod(0, usize::MAX - 1)).unwrap();
    end.metadata.name = Some("zz-end".into());
    informer.apply(Delta::Apply(end));
    let _ = done.acquire_many(10).await.unwrap();
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(informer.store().len(), keys + 1);
    (lines.len() as f64 / secs, delivered.load(Ordering::Relaxed))
}

type NoopHandler = Box<dyn FnMut(&DynamicObject) + Send>;

/// 1. baseline: the same lines through kube-runtime's reflector, fanned out inline.
async fn pipeline_kube(lines: &[Vec<u8>], keys: usize) -> f64 {
    let (reader, writer) = kube_store();
    let mut handlers: Vec<NoopHandler> = (0..10)
        .map(|_| {
            Box::new(|o: &DynamicObject| {
                black_box(o.metadata.name.as_ref());
            }) as NoopHandler
        })
        .collect();
    let start = Instant::now();
    let events = futures::stream::iter(lines.iter()).map(|line| {
        match serde_json::from_slice::<WatchEvent<DynamicObject>>(line) {
            Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) => Ok(watcher::Event::Apply(o)),
            Ok(WatchEvent::Deleted(o)) => Ok(watcher::Event::Delete(o)),
            other => panic!("unexpected line: {other:?}"),
        }
    });
    let mut stream = std::pin::pin!(reflector::reflector(writer, events));
    while let Some(Ok(watcher::Event::Apply(o) | watcher::Event::Delete(o))) = stream.next().await {
        for h in handlers.iter_mut() {
            h(&o);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(reader.len(), keys);
    lines.len() as f64 / secs
}

/// 2. Net heap growth per object of a store filled with `n` pods.
fn memory_ours(n: usize) -> f64 {
    // The window opens before the input exists: replace consumes and frees it, so only the
    // store remains when it closes.
    let before = live();
    let raws: Vec<RawObject> = (0..n)
        .map(|i| serde_json::from_value(pod(i, i + 1)).unwrap())
        .collect();
    let store = Store::new(pods(), StoreOptions::default());
    store.replace(raws, &mut |_e| {});
    let per = (live() - before) as f64 / n as f64;
    black_box(&store);
    per
}

fn memory_kube(n: usize, strip: bool) -> f64 {
    let before = live();
    let objs: Vec<DynamicObject> = (0..n)
        .map(|i| {
            let mut o: DynamicObject = serde_json::from_value(pod(i, i + 1)).unwrap();
            if strip {
                o.metadata.managed_fields = None;
            }
            o
        })
        .collect();
    let (reader, mut writer) = kube_store();
    writer.apply_watcher_event(&watcher::Event::Init);
    for o in objs {
        writer.apply_watcher_event(&watcher::Event::InitApply(o));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    let per = (live() - before) as f64 / n as f64;
    black_box(&reader);
    drop(writer);
    per
}

/// 3. Mean time of a by-owner query (10 matches each) at `n` objects.
fn by_index(n: usize) -> (Duration, Duration) {
    let store = Store::new(pods(), StoreOptions::default());
    store.replace(
        (0..n)
            .map(|i| serde_json::from_value(pod(i, i + 1)).unwrap())
            .collect(),
        &mut |_e| {},
    );
    let owners = n / 10;
    let queries = 20_000;
    let start = Instant::now();
    for q in 0..queries {
        let hits = store
            .by_index("owner", &format!("rs-{:08}", (q * 7919) % owners))
            .unwrap();
        assert_eq!(hits.len(), 10);
        black_box(hits);
    }
    let ours = start.elapsed() / queries as u32;

    let (reader, mut writer) = kube_store();
    writer.apply_watcher_event(&watcher::Event::Init);
    for i in 0..n {
        let mut o: DynamicObject = serde_json::from_value(pod(i, i + 1)).unwrap();
        o.metadata.managed_fields = None;
        writer.apply_watcher_event(&watcher::Event::InitApply(o));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    let queries = 50;
    let start = Instant::now();
    for q in 0..queries {
        let uid = format!("rs-{:08}", (q * 7919) % owners);
        let hits = reader.state_filter(|o| {
            o.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.uid == uid)
        });
        assert_eq!(hits.len(), 10);
        black_box(hits);
    }
    (ours, start.elapsed() / queries as u32)
}

/// 4. Initial sync over loopback HTTP from the embedded API server, in seconds.
async fn sync_ours(server: &DevServer, n: usize, initial_list: InitialList) -> f64 {
    let factory = InformerFactory::new(
        server.client(),
        FactoryOptions {
            initial_list,
            ..Default::default()
        },
    );
    let informer = factory
        .informer("v1", "Pod", WatchScope::default())
        .await
        .unwrap();
    let start = Instant::now();
    factory.start();
    factory
        .wait_for_sync(Duration::from_secs(600))
        .await
        .unwrap();
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(informer.store().len(), n);
    factory.stop();
    secs
}

async fn sync_kube(server: &DevServer, n: usize) -> f64 {
    let api: Api<DynamicObject> = Api::all_with(server.client(), &pods());
    let (reader, writer) = kube_store();
    let start = Instant::now();
    let stream = reflector::reflector(writer, watcher::watcher(api, watcher::Config::default()));
    let mut stream = std::pin::pin!(stream);
    while let Some(ev) = stream.next().await {
        if let Ok(watcher::Event::InitDone) = ev {
            break;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(reader.len(), n);
    secs
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("BENCH_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    println!(
        "informer benchmark: {n} pods of ~{} bytes JSON (managedFields included)",
        serde_json::to_vec(&pod(1, 1)).unwrap().len()
    );

    let keys = 10_000.min(n);
    let updates = 200_000;
    let lines: Vec<Vec<u8>> = (0..updates)
        .map(|u| {
            let i = u % keys;
            let kind = if u < keys { "ADDED" } else { "MODIFIED" };
            serde_json::to_vec(&serde_json::json!({"type": kind, "object": pod(i, u + 1)})).unwrap()
        })
        .collect();
    let (ours_eps, delivered) = pipeline_ours(&lines, keys).await;
    let kube_eps = pipeline_kube(&lines, keys).await;
    println!("\n1. watch events -> store -> 10 no-op handlers ({updates} events over {keys} keys)");
    println!(
        "   informant:          {ours_eps:>10.0} events/s  ({delivered} handler calls after coalescing)"
    );
    println!(
        "   kube-runtime Store: {kube_eps:>10.0} events/s  (inline fan-out, {} handler calls)",
        updates * 10
    );
    println!("   ratio:              {}", ratio(ours_eps, kube_eps));
    drop(lines);

    let ours_mem = memory_ours(n);
    let kube_mem = memory_kube(n, false);
    let kube_mem_stripped = memory_kube(n, true);
    println!("\n2. cache bytes per object ({n} pods)");
    println!("   informant (managedFields stripped):        {ours_mem:>8.0} B");
    println!(
        "   kube-runtime DynamicObject:                {kube_mem:>8.0} B   ratio {}",
        ratio(ours_mem, kube_mem)
    );
    println!(
        "   kube-runtime DynamicObject, stripped:      {kube_mem_stripped:>8.0} B   ratio {}",
        ratio(ours_mem, kube_mem_stripped)
    );

    let (ours_q, kube_q) = by_index(n);
    println!("\n3. by-index query (owner uid, 10 matches) at {n} objects");
    println!(
        "   informant index:    {:>10.2} µs",
        ours_q.as_secs_f64() * 1e6
    );
    println!(
        "   kube-runtime scan:  {:>10.2} µs",
        kube_q.as_secs_f64() * 1e6
    );
    println!(
        "   ratio:              {}",
        ratio(ours_q.as_secs_f64(), kube_q.as_secs_f64())
    );

    let server = DevServer::start(DevServerConfig::default()).await.unwrap();
    // Like a real server, this one stores objects only in namespaces that exist.
    server
        .seed((0..50).map(|t| {
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": format!("team-{t}")}})
        }))
        .unwrap();
    server.seed((0..n).map(|i| pod(i, 0))).unwrap();
    // Alternate the contenders and take medians: the first run in a process pays for growing
    // the heap, which would otherwise land on whoever goes first.
    let (mut paged, mut streamed, mut kube) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..3 {
        kube.push(sync_kube(&server, n).await);
        paged.push(sync_ours(&server, n, InitialList::Paginated).await);
        streamed.push(sync_ours(&server, n, InitialList::Streaming).await);
    }
    let (paged, streamed, kube) = (median(paged), median(streamed), median(kube));
    println!(
        "\n4. initial sync of {n} pods over loopback HTTP from the embedded API server (median of 3)"
    );
    println!(
        "   informant, paginated list: {paged:>7.2} s  ({:.0} objects/s)",
        n as f64 / paged
    );
    println!(
        "   informant, streaming list: {streamed:>7.2} s  ({:.0} objects/s)",
        n as f64 / streamed
    );
    println!(
        "   kube-runtime reflector:    {kube:>7.2} s  ({:.0} objects/s)",
        n as f64 / kube
    );
    println!("   ratio (paginated):         {}", ratio(paged, kube));
    server.shutdown().await;
}
