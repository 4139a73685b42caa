//! `informant apiserver`: the embedded API server on its own, for kubectl, tests and demos.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Result;
use informant_devserver::{DevServer, DevServerConfig};

/// Arguments of `informant apiserver`.
#[derive(clap::Args)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Where to write a kubeconfig pointing at the server.
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
}

/// Serves until SIGINT or SIGTERM.
pub async fn run(args: Args) -> Result<()> {
    let server = DevServer::start(DevServerConfig {
        listen: args.listen,
        ..Default::default()
    })
    .await?;
    if let Some(path) = &args.kubeconfig_out {
        server.write_kubeconfig(path)?;
        eprintln!("kubeconfig written to {}", path.display());
    }
    eprintln!("API server listening on {}", server.url());
    super::shutdown_signal().await?;
    server.shutdown().await;
    Ok(())
}
