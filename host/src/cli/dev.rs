//! `informant dev`: the embedded API server, informers and plugins in one process — no cluster.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use informant::devserver::{DevServer, DevServerConfig};
use informant::informer::{FactoryOptions, InformerFactory, WatchScope};

use super::{Runtime, RuntimeOptions};

/// Arguments of `informant dev`.
#[derive(clap::Args)]
pub struct Args {
    /// Address for the embedded API server.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Where to write the kubeconfig (default: a file in the temp dir).
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
    /// Plugins directory (`NAME.wasm` + `NAME.toml`, tenants in subdirectories); hot-reloaded.
    #[arg(long)]
    plugins: Option<PathBuf>,
    /// Host config: plugin limits and tenants with their grants (default: single-user, top-level
    /// plugins only).
    #[arg(long, value_name = "informant.toml")]
    config: Option<PathBuf>,
    /// Also log events of these resources, as `APIVERSION/KIND` (default without --plugins:
    /// v1/Pod, v1/ConfigMap, apps/v1/Deployment).
    #[arg(long = "watch")]
    watches: Vec<String>,
    /// Don't create the demo namespace and objects.
    #[arg(long)]
    no_seed: bool,
    /// Serve /metrics, /healthz, /readyz and /plugins on this address (e.g. 127.0.0.1:9090).
    #[arg(long, value_name = "ADDR")]
    admin: Option<SocketAddr>,
}

/// Runs until Ctrl-C.
pub async fn run(args: Args) -> Result<()> {
    let server = DevServer::start(DevServerConfig {
        listen: args.listen,
        ..Default::default()
    })
    .await?;
    let path = args.kubeconfig_out.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("informant-{}.kubeconfig", server.addr().port()))
    });
    server.write_kubeconfig(&path)?;
    if !args.no_seed {
        seed_demo(&server)?;
    }
    let factory = Arc::new(InformerFactory::new(
        server.client(),
        FactoryOptions::default(),
    ));
    let runtime = Runtime::start(
        factory,
        RuntimeOptions {
            plugins: args.plugins,
            watches: args.watches,
            scope: WatchScope::default(),
            admin: args.admin,
            config: super::host_config(args.config.as_deref())?,
        },
    )
    .await?;
    eprintln!(
        "Embedded API server on {}. Try:\n  kubectl --kubeconfig {} create configmap hello --from-literal=greeting=hi",
        server.url(),
        path.display()
    );
    tokio::signal::ctrl_c().await?;
    runtime.stop().await;
    server.shutdown().await;
    Ok(())
}

/// A namespace, a deployment and a configmap so `informant dev` has something to show.
fn seed_demo(server: &DevServer) -> Result<()> {
    let objects = [
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}}),
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "demo", "labels": {"app": "web"}},
            "data": {"color": "blue"}}),
        serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "demo", "labels": {"app": "web"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}}),
    ];
    server.seed(objects).context("seeding demo objects")?;
    Ok(())
}
