//! Admission on the user's path: AdmissionReview requests over HTTPS, from a client in a process
//! of its own (this binary run again as the client), into the host's webhook server, answered by
//! the `admit` test plugin's `admission-hook` export in pooled instances.
//!
//! Three policies, each an operator plugin with one `[[admit]]` table for ConfigMaps, with
//! 10,000 ConfigMaps in the namespace the requests name (in the informer's cache):
//! - `noop`: reads nothing;
//! - `get-one`: reads one ConfigMap by key;
//! - `index`: reads the 10,000 ConfigMaps of the request's namespace by index, as JSON;
//! - `meta`: reads the same 10,000 by index as metadata alone (`by-index-headers`) and counts
//!   those with a label;
//! - `count`: has the host count the same 10,000 by index and label (`count-by-index`).
//!
//! For each policy and each rate of `ADMISSION_RATES` (default `100,1000,5000` requests/s), the
//! client sends at that fixed rate for `ADMISSION_SECS` seconds (default 5; at least 10 s worth
//! of requests at 100/s), over keep-alive connections opened as needed (as the API server's
//! client does), and measures each request from the moment it was due, so a slow answer delays
//! nothing it does not also count. Printed per run: answered, failed, requests/s achieved, and
//! p50 / p99 / p99.9 latency; then the host's RSS with its pools warm and per pooled instance.
//!
//! `failed` counts requests not answered allowed: past what the machine can answer, the pool's
//! queue turns into the hook's failure policy (`busy`), which is what it is for. Asserts nothing
//! about speed; speed, failures and memory are printed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use informant_devserver::{DevServer, DevServerConfig};
use informant_runtime::admission::AdmissionOptions;
use informant_runtime::runtime::{Runtime, RuntimeOptions};
use informant_runtime::tls::ServerTls;
use informant_tests::admission::review;
use informant_tests::plugins::wasm;
use serde_json::{Value, json};
use tokio_rustls::rustls;

// As the `informant` binary allocates.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The ConfigMaps in the namespace the requests name.
const OBJECTS: usize = 10_000;

/// (plugin, `config.mode`).
const POLICIES: [(&str, &str); 5] = [
    ("noop", "noop"),
    ("get-one", "get-one"),
    ("index", "count-index"),
    ("meta", "count-index-meta"),
    ("count", "count-index-host"),
];

fn main() {
    if let Ok(spec) = std::env::var("ADMISSION_BENCH_CLIENT") {
        return client(&spec);
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(host());
}

async fn host() {
    let rates: Vec<u64> = std::env::var("ADMISSION_RATES")
        .unwrap_or_else(|_| "100,1000,5000".into())
        .split(',')
        .filter_map(|r| r.trim().parse().ok())
        .collect();
    let secs: u64 = std::env::var("ADMISSION_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let server = DevServer::start(DevServerConfig::default())
        .await
        .expect("start API server");
    informant_tests::create_namespaces(&server, &["bench"]);
    server
        .seed((0..OBJECTS).map(|i| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i:05}"), "namespace": "bench",
                    "labels": {"app": "bench"}},
                "data": {"k": "v"}})
        }))
        .expect("seed");
    let dir = tempfile::tempdir().unwrap();
    for (name, mode) in POLICIES {
        std::fs::copy(wasm("admit"), dir.path().join(format!("{name}.wasm"))).unwrap();
        std::fs::write(
            dir.path().join(format!("{name}.toml")),
            format!(
                "[limits]\nmemory-mib = 64\n[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n\
                 [[admit]]\nname = \"a\"\napi-version = \"v1\"\nkind = \"ConfigMap\"\n\
                 timeout-ms = 2000\n[config]\nmode = \"{mode}\"\nname = \"cm-00042\"\n"
            ),
        )
        .unwrap();
    }
    let rss_before = informant_tests::proc::rss_bytes();
    let runtime = Runtime::start(
        server.client(),
        RuntimeOptions {
            plugins: Some(dir.path().to_path_buf()),
            config: informant_runtime::config::parse(
                "operator-plugins = true\n",
                std::path::Path::new("informant.toml"),
            )
            .unwrap(),
            admission: Some(AdmissionOptions {
                addr: "127.0.0.1:0".parse().unwrap(),
                tls: ServerTls::SelfSigned,
                register: None,
                cert_secret: None,
                record: None,
            }),
            admission_only: true,
            ..Default::default()
        },
    )
    .await
    .expect("runtime");
    let addr = runtime.admission_addr().unwrap();
    let ca = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(ca.path(), runtime.admission_ca_bundle().unwrap()).unwrap();
    let body = tempfile::NamedTempFile::new().unwrap();
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "new", "namespace": "bench", "labels": {"app": "bench"}},
        "data": {"k": "v"}});
    std::fs::write(
        body.path(),
        serde_json::to_vec(&review("bench", "CREATE", &object)).unwrap(),
    )
    .unwrap();
    let rss_loaded = informant_tests::proc::rss_bytes();
    println!(
        "admission bench: {OBJECTS} ConfigMaps cached; host RSS {:.1} MiB before start, {:.1} MiB with the plugins loaded",
        rss_before as f64 / 1048576.0,
        rss_loaded as f64 / 1048576.0
    );
    println!(
        "{:<8} {:>7} {:>9} {:>7} {:>9} {:>9} {:>9} {:>9}",
        "policy", "rate/s", "answered", "failed", "achieved", "p50 ms", "p99 ms", "p99.9 ms"
    );
    for (name, _) in POLICIES {
        for &rate in &rates {
            let secs = if rate <= 100 { secs.max(10) } else { secs };
            let spec = json!({
                "addr": addr.to_string(),
                "path": format!("/admit/{name}/a"),
                "rate": rate,
                "secs": secs,
                "ca": ca.path(),
                "body": body.path(),
            });
            let out = tokio::task::spawn_blocking(move || {
                std::process::Command::new(std::env::current_exe().unwrap())
                    .env("ADMISSION_BENCH_CLIENT", spec.to_string())
                    .output()
                    .expect("run the client")
            })
            .await
            .unwrap();
            assert!(
                out.status.success(),
                "client failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let r: Value = serde_json::from_slice(&out.stdout).expect("client JSON");
            println!(
                "{:<8} {:>7} {:>9} {:>7} {:>9.0} {:>9.2} {:>9.2} {:>9.2}",
                name,
                rate,
                r["answered"],
                r["failed"],
                r["achieved"].as_f64().unwrap_or(0.0),
                r["p50_ms"].as_f64().unwrap_or(f64::NAN),
                r["p99_ms"].as_f64().unwrap_or(f64::NAN),
                r["p999_ms"].as_f64().unwrap_or(f64::NAN),
            );
        }
    }
    let host = runtime.host.clone().unwrap();
    let instances: usize = host.admitters().iter().map(|(_, a)| a.idle()).sum();
    let rss_warm = informant_tests::proc::rss_bytes();
    println!(
        "host RSS with {instances} pooled instances warm: {:.1} MiB; {:.0} KiB per pooled instance over the plugins loaded (an upper bound: the host's own buffers grew too)",
        rss_warm as f64 / 1048576.0,
        rss_warm.saturating_sub(rss_loaded) as f64 / 1024.0 / instances.max(1) as f64
    );
    runtime.stop().await;
    server.shutdown().await;
}

/// The client: sends `rate` requests/s for `secs` s, prints what it measured as JSON.
fn client(spec: &str) {
    let spec: Value = serde_json::from_str(spec).expect("client spec");
    let addr: SocketAddr = spec["addr"].as_str().unwrap().parse().unwrap();
    let path = spec["path"].as_str().unwrap().to_string();
    let rate = spec["rate"].as_u64().unwrap().max(1);
    let secs = spec["secs"].as_u64().unwrap();
    let ca = std::fs::read(spec["ca"].as_str().unwrap()).unwrap();
    let body = Bytes::from(std::fs::read(spec["body"].as_str().unwrap()).unwrap());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let result = runtime.block_on(async move {
        let connector = connector(&ca);
        let (idle_tx, idle_rx) = tokio::sync::mpsc::unbounded_channel();
        let idle = Arc::new(tokio::sync::Mutex::new(idle_rx));
        let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<Option<Duration>>();
        let total = rate * secs;
        let every = Duration::from_nanos(1_000_000_000 / rate);
        let start = tokio::time::Instant::now();
        let mut tick = tokio::time::interval_at(start, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        for _ in 0..total {
            let due = tick.tick().await;
            let (connector, idle, idle_tx, done_tx) = (
                connector.clone(),
                idle.clone(),
                idle_tx.clone(),
                done_tx.clone(),
            );
            let (path, body) = (path.clone(), body.clone());
            tokio::spawn(async move {
                let reused = idle.lock().await.try_recv().ok();
                let sender = match reused {
                    Some(s) => Some(s),
                    None => connect(&connector, addr).await,
                };
                let Some(mut sender) = sender else {
                    let _ = done_tx.send(None);
                    return;
                };
                let req = hyper::Request::post(path)
                    .header("host", addr.to_string())
                    .header("content-type", "application/json")
                    .body(Full::new(body))
                    .unwrap();
                let answered = match sender.send_request(req).await {
                    Ok(resp) if resp.status() == 200 => resp
                        .into_body()
                        .collect()
                        .await
                        .ok()
                        .and_then(|b| serde_json::from_slice::<Value>(&b.to_bytes()).ok())
                        .is_some_and(|v| v["response"]["allowed"] == true),
                    _ => false,
                };
                let _ = done_tx.send(answered.then(|| due.elapsed()));
                if answered {
                    let _ = idle_tx.send(sender);
                }
            });
        }
        drop(done_tx);
        let mut latencies = Vec::with_capacity(total as usize);
        let mut failed = 0u64;
        while let Some(outcome) = done_rx.recv().await {
            match outcome {
                Some(d) => latencies.push(d),
                None => failed += 1,
            }
        }
        let elapsed = start.elapsed().as_secs_f64();
        latencies.sort();
        let at = |q: f64| {
            latencies
                .get(((latencies.len() as f64 * q).ceil() as usize).saturating_sub(1))
                .map(|d| d.as_secs_f64() * 1e3)
        };
        json!({
            "answered": latencies.len(),
            "failed": failed,
            "achieved": latencies.len() as f64 / elapsed,
            "p50_ms": at(0.5),
            "p99_ms": at(0.99),
            "p999_ms": at(0.999),
        })
    });
    println!("{result}");
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

fn connector(ca: &[u8]) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// A new keep-alive HTTPS connection, verified.
async fn connect(connector: &tokio_rustls::TlsConnector, addr: SocketAddr) -> Option<Sender> {
    let tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
    let _ = tcp.set_nodelay(true);
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").ok()?;
    let tls = connector.connect(name, tcp).await.ok()?;
    let (sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
        .await
        .ok()?;
    tokio::spawn(conn);
    Some(sender)
}
