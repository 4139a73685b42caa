//! Embedded API server benchmark: prints figures, asserts nothing about speed.
//!
//! 1. bulk seeding of 100k ~2 KB pods through `DevServer::seed`;
//! 2. memory per stored object (a counting global allocator, so the figure is the server's own
//!    heap, not RSS noise);
//! 3. objects/s for a paginated list (limit=500) of all of them over loopback HTTP — the client
//!    skips item bodies so the figure is the server's;
//! 4. events/s for a stream of writes fanned out to 10 concurrent HTTP watchers.
//!
//! `cargo bench -p informant-devserver --bench devserver` (BENCH_PODS=N to change the object count).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use futures::AsyncBufReadExt;
use informant_devserver::{DevServer, DevServerConfig};
use kube::api::{ListParams, WatchParams};
use kube::core::Request;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: delegates to the system allocator; only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A ~2 KB pod, the size of a typical real one without managedFields.
fn pod(ns: &str, i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("pod-{i:06}"), "namespace": ns,
            "labels": {"app": format!("app-{}", i % 100), "tier": "backend", "pod-template-hash": "5d8f7c9b6d"},
            "annotations": {"note": "x".repeat(800)},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f7c9b6d",
                "uid": "8a3c5e1f-0b4d-4c6e-9f21-6d3b2a1c0e9f", "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {
            "nodeName": format!("node-{}", i % 50),
            "containers": [{
                "name": "app", "image": "registry.example.com/team/app:1.2.3",
                "args": ["--port=8080", "--log-level=info", "--metrics"],
                "env": [{"name": "MODE", "value": "production"}, {"name": "REGION", "value": "eu-west-1"}],
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}]
            }],
            "volumes": [{"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}],
            "restartPolicy": "Always", "serviceAccountName": "default"
        },
        "status": {"phase": "Running", "podIP": format!("10.1.{}.{}", i / 250 % 250, i % 250), "qosClass": "Burstable",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"}]}
    })
}

#[derive(Deserialize)]
struct Page {
    metadata: PageMeta,
    items: Vec<IgnoredAny>,
}

#[derive(Deserialize)]
struct PageMeta {
    #[serde(rename = "continue", default)]
    continue_: Option<String>,
}

fn main() {
    let pods: usize = std::env::var("BENCH_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(run(pods));
}

async fn run(pods: usize) {
    // History large enough that the fan-out watchers are never expired mid-run (writes are
    // direct and faster than 10 HTTP consumers).
    let config = DevServerConfig {
        watch_history: 50_000,
        ..Default::default()
    };
    let server = DevServer::start(config).await.expect("devserver starts");
    let client = server.client();
    // Like a real server, this one stores objects only in namespaces that exist.
    for ns in ["bench", "fan"] {
        server
            .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
            .expect("create namespace");
    }

    // 1 + 2: seed, counting heap growth.
    // Objects are built lazily inside the iterator so the heap delta is only what the server keeps.
    let sample = serde_json::to_vec(&pod("bench", 0))
        .map(|v| v.len())
        .unwrap_or(0);
    let before = LIVE.load(Ordering::Relaxed);
    let t = Instant::now();
    let n = server
        .seed((0..pods).map(|i| pod("bench", i)))
        .expect("seed");
    let seeded = t.elapsed();
    let after = LIVE.load(Ordering::Relaxed);
    println!(
        "seed: {n} pods of ~{sample} B JSON in {seeded:.2?} ({:.0} objects/s, building each JSON value included)",
        n as f64 / seeded.as_secs_f64()
    );
    println!(
        "memory: {:.0} B per stored object (heap delta {:.1} MiB, JSON {sample} B; includes the watch history)",
        (after - before) as f64 / n as f64,
        (after - before) as f64 / (1024.0 * 1024.0)
    );

    // 3: paginated list over HTTP.
    let req = Request::new("/api/v1/namespaces/bench/pods");
    let mut total = 0usize;
    let mut pages = 0usize;
    let t = Instant::now();
    let mut lp = ListParams::default().limit(500);
    loop {
        let text = client
            .request_text(req.list(&lp).expect("list request"))
            .await
            .expect("list page");
        let page: Page = serde_json::from_str(&text).expect("list JSON");
        total += page.items.len();
        pages += 1;
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    let listed = t.elapsed();
    println!(
        "list: {total} objects in {pages} pages of 500 in {listed:.2?} ({:.0} objects/s)",
        total as f64 / listed.as_secs_f64()
    );

    // 4: fan-out of a write stream to 10 watchers.
    let watchers = 10;
    let writes = 20_000usize;
    let fan = Request::new("/api/v1/namespaces/fan/configmaps");
    let start_rv = "1".to_string();
    // Watch from an old-but-retained version so no event can slip between connect and writes.
    let rv_now = {
        let text = client
            .request_text(fan.list(&ListParams::default().limit(1)).expect("list"))
            .await
            .expect("list");
        let v: Value = serde_json::from_str(&text).expect("json");
        v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or(&start_rv)
            .to_string()
    };
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let req = fan
            .watch(&WatchParams::default().timeout(290), &rv_now)
            .expect("watch request");
        let stream = client.request_stream(req).await.expect("watch stream");
        tasks.push(tokio::spawn(async move {
            let mut lines = stream.lines();
            let mut seen = 0usize;
            while seen < writes {
                match futures::StreamExt::next(&mut lines).await {
                    Some(Ok(line)) if line.starts_with("{\"type\":\"ADDED\"") => seen += 1,
                    Some(Ok(_)) => {}
                    _ => break,
                }
            }
            seen
        }));
    }
    let t = Instant::now();
    let writer = {
        let objs: Vec<Value> = (0..writes)
            .map(|i| json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i}"), "namespace": "fan"}, "data": {"payload": "y".repeat(1000)}}))
            .collect();
        let server = &server;
        async move {
            for obj in objs {
                server.create(obj).expect("create");
            }
        }
    };
    writer.await;
    let wrote = t.elapsed();
    let mut delivered = 0;
    for task in tasks {
        delivered += tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("watchers finish")
            .unwrap_or(0);
    }
    let fanned = t.elapsed();
    println!(
        "fan-out: {writes} writes (~1.1 KB) in {wrote:.2?} ({:.0} writes/s); {delivered} deliveries to {watchers} watchers in {fanned:.2?} ({:.0} events/s delivered, {:.0} writes/s end to end)",
        writes as f64 / wrote.as_secs_f64(),
        delivered as f64 / fanned.as_secs_f64(),
        writes as f64 / fanned.as_secs_f64()
    );
    server.shutdown().await;
}
