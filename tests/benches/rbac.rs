//! The host as a least-privilege identity, measured on the user's path: `Runtime::start` over a
//! plugins directory against the embedded API server enforcing RBAC for the host's identity,
//! which may list and watch only ConfigMaps and Deployments. Three plugins: a wildcard one
//! (`kind = "*"`, sorted first) and two naming ConfigMap and Deployment.
//!
//! Prints:
//! - from start to the first event handled by each named-kind plugin (a ConfigMap and a
//!   Deployment created before the start, so each plugin's first event is its replay's);
//! - from start to `/readyz` first answering 200;
//! - over `RBAC_SECS` (default 60) from start: LIST requests the server refused the host, and
//!   the host's warning lines, with the refused resources counted.
//!
//! Asserts nothing about speed; fails if a plugin never handles its event.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use informant_devserver::{DevServer, DevServerConfig};
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_runtime::runtime::{Runtime, RuntimeOptions};
use informant_tests::host_log::HostLog;
use informant_tests::http::{free_addr, get};
use informant_tests::plugins::Logs;
use informant_tests::rbac::{HOST, echo, reader_rules};
use informant_tests::{configmap, create_namespaces};
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let secs: u64 = std::env::var("RBAC_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let (log, _guard) = HostLog::capture();
    let server = DevServer::start(DevServerConfig::default())
        .await
        .expect("start API server");
    create_namespaces(&server, &["team-a"]);
    server.restrict(HOST, reader_rules());
    server.create(configmap("team-a", "before", "1")).unwrap();
    server
        .create(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "team-a"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    echo(dir.path(), "all-kinds", "*", "*");
    echo(dir.path(), "cms", "v1", "ConfigMap");
    echo(dir.path(), "deps", "apps/v1", "Deployment");
    let addr = free_addr();
    let plugin_logs = tokio::sync::broadcast::channel(4096).0;
    let logs = Logs::record(plugin_logs.subscribe());

    let started = Instant::now();
    let client = server.client_as(HOST);
    let options = RuntimeOptions {
        plugins: Some(dir.path().to_path_buf()),
        admin: Some(addr),
        plugin_logs: Some(plugin_logs),
        config: HostConfig::default(),
        ..Default::default()
    };
    let runtime = tokio::spawn(async move { Runtime::start(client, options).await });

    let end = started + Duration::from_secs(secs);
    let (mut cms, mut deps, mut ready) = (None, None, None);
    // Polled: the figures are times of first sight, to the poll's 10 ms.
    while Instant::now() < end {
        if cms.is_none() && logs.keys_of("cms", "cms").contains("team-a/before") {
            cms = Some(started.elapsed());
        }
        if deps.is_none() && logs.keys_of("deps", "deps").contains("team-a/web") {
            deps = Some(started.elapsed());
        }
        if ready.is_none()
            && tokio::net::TcpStream::connect(addr).await.is_ok()
            && get(addr, "/readyz").await.0 == 200
        {
            ready = Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let refused: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|r| r.user.as_deref() == Some(HOST) && r.verb == "list" && !r.allowed)
        .map(|r| r.resource)
        .collect();
    let mut by_resource: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &refused {
        *by_resource.entry(r).or_default() += 1;
    }
    let warnings = log
        .lines("")
        .into_iter()
        .filter(|l| l.level == tracing::Level::WARN)
        .count();
    println!("least privilege, {secs} s from start:");
    println!("  first event handled: ConfigMap plugin {cms:?}, Deployment plugin {deps:?}");
    println!("  /readyz first 200: {ready:?}");
    println!(
        "  refused LISTs: {} ({:.1}/min) over {} resources; host warning lines: {warnings}",
        refused.len(),
        refused.len() as f64 * 60.0 / secs as f64,
        by_resource.len()
    );
    println!("  refused LISTs by resource: {by_resource:?}");
    assert!(
        cms.is_some() && deps.is_some(),
        "a named-kind plugin never handled its event"
    );
    if let Ok(Ok(runtime)) = runtime.await {
        runtime.stop().await;
    }
    server.shutdown().await;
}
