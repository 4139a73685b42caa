//! `informant run`: informers and plugins against a real cluster.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use informant::informer::{FactoryOptions, InformerFactory, WatchScope};

use super::{Runtime, RuntimeOptions};

/// Arguments of `informant run`.
#[derive(clap::Args)]
pub struct Args {
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Plugins directory (`NAME.wasm` + `NAME.toml`, tenants in subdirectories); hot-reloaded.
    #[arg(long)]
    plugins: Option<PathBuf>,
    /// Also log events of these resources, as `APIVERSION/KIND` (default without --plugins:
    /// v1/Pod, v1/ConfigMap, apps/v1/Deployment).
    #[arg(long = "watch")]
    watches: Vec<String>,
    /// Only this namespace (for --watch).
    #[arg(long)]
    namespace: Option<String>,
    /// Only objects matching this label selector (for --watch).
    #[arg(long)]
    selector: Option<String>,
}

/// Runs until Ctrl-C.
pub async fn run(args: Args) -> Result<()> {
    let client = super::client(args.kubeconfig.as_deref()).await?;
    let factory = Arc::new(InformerFactory::new(client, FactoryOptions::default()));
    let runtime = Runtime::start(
        factory,
        RuntimeOptions {
            plugins: args.plugins,
            watches: args.watches,
            scope: WatchScope {
                namespace: args.namespace,
                label_selector: args.selector,
            },
        },
    )
    .await
    .context("starting")?;
    tokio::signal::ctrl_c().await?;
    runtime.stop().await;
    Ok(())
}
