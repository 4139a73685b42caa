//! Subcommands, one module each, over the library (the runtime itself is
//! [`informant_runtime::runtime`], so the tests start exactly what these start).

pub mod apiserver;
pub mod check;
pub mod dev;
pub mod new;
pub mod record;
pub mod replay;
pub mod run;

use std::path::Path;

use anyhow::{Context, Result};
pub use informant_runtime::runtime::{host_config, watch_informer};

/// A client from a kubeconfig file, or inferred ($KUBECONFIG, ~/.kube/config, in-cluster).
pub async fn client(kubeconfig: Option<&Path>) -> Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .with_context(|| format!("loading kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("no kubeconfig found and not in a cluster")?,
    };
    Ok(kube::Client::try_from(config)?)
}

/// SIGINT (Ctrl-C) or SIGTERM (what Kubernetes sends a pod it stops).
pub async fn shutdown_signal() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r,
            _ = term.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c().await
}
