//! What a `/metrics` scrape costs: 50 plugins on 5 informers over the embedded API server, read
//! by the admin collector directly and over loopback HTTP.
//!
//! `cargo bench -p informant-tests --bench admin` (builds the test plugin for wasm32-wasip2 first).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use informant_devserver::{DevServer, DevServerConfig};
use informant_runtime::admin::scope::Scope;
use informant_runtime::admin::{AdminServer, AdminState, metrics};
use informant_runtime::informer::{FactoryOptions, InformerFactory};
use informant_runtime::plugin::exec::engine::{EngineOptions, PluginEngine};
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_runtime::plugin::load::loader::PluginHost;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PLUGINS: usize = 50;
const KINDS: [(&str, &str); 5] = [
    ("v1", "ConfigMap"),
    ("v1", "Pod"),
    ("v1", "Secret"),
    ("v1", "Service"),
    ("apps/v1", "Deployment"),
];
const SCRAPES: u32 = 200;

async fn get(addr: SocketAddr, path: &str) -> usize {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    out.len()
}

#[tokio::main]
async fn main() {
    // The test plugins, built for wasm32-wasip2 the way the e2e tests build them.
    let wasm = informant_tests::plugins::wasm("hostile");
    let server = DevServer::start(DevServerConfig::default()).await.unwrap();
    server
        .seed((0..1000).map(|i| {
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm{i}"), "namespace": "default"}, "data": {"v": "x"}})
        }))
        .unwrap();
    let factory = Arc::new(InformerFactory::new(
        server.client(),
        FactoryOptions::default(),
    ));
    let dir = tempfile::tempdir().unwrap();
    for p in 0..PLUGINS {
        let (api_version, kind) = KINDS[p % KINDS.len()];
        std::fs::copy(&wasm, dir.path().join(format!("p{p}.wasm"))).unwrap();
        std::fs::write(
            dir.path().join(format!("p{p}.toml")),
            format!("[[watch]]\napi-version = \"{api_version}\"\nkind = \"{kind}\"\n[config]\nmode = \"noop\"\n"),
        )
        .unwrap();
    }
    let engine = Arc::new(PluginEngine::new(EngineOptions::default()).unwrap());
    let host = Arc::new(PluginHost::new(
        dir.path().to_path_buf(),
        engine,
        factory.clone(),
        HostConfig::default(),
    ));
    let report = host.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    factory
        .wait_for_sync(Duration::from_secs(60))
        .await
        .unwrap();

    let state = AdminState::new(factory.clone(), Some(host.clone()));
    let text = metrics::render(&state, &Scope::Everything).unwrap();
    let series = text.lines().filter(|l| !l.starts_with('#')).count();

    let started = Instant::now();
    for _ in 0..SCRAPES {
        std::hint::black_box(metrics::render(&state, &Scope::Everything).unwrap());
    }
    let direct = started.elapsed() / SCRAPES;

    let admin = AdminServer::start(SocketAddr::from(([127, 0, 0, 1], 0)), state)
        .await
        .unwrap();
    let started = Instant::now();
    for _ in 0..SCRAPES {
        std::hint::black_box(get(admin.addr(), "/metrics").await);
    }
    let http = started.elapsed() / SCRAPES;

    println!(
        "admin /metrics, {PLUGINS} plugins on {} informers: {series} series, {} KB",
        KINDS.len(),
        text.len() / 1024
    );
    println!("  collect + encode: {direct:?} per scrape; over loopback HTTP: {http:?}");

    admin.shutdown().await;
    host.shutdown().await;
    factory.stop();
}
