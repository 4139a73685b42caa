//! Subcommands, one module each, and the runtime they share.

pub mod apiserver;
pub mod check;
pub mod dev;
pub mod new;
pub mod record;
pub mod replay;
pub mod run;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use informant::admin::{AdminServer, AdminState};
use informant::config::ConfigWatcher;
use informant::informer::{
    Event, FnHandler, HandlerOptions, InformerFactory, SharedInformer, WatchScope,
};
use informant::plugin::{EngineOptions, HostConfig, PluginEngine, PluginHost, Reloader};

/// What `dev` and `run` start on top of an informer factory.
pub struct RuntimeOptions {
    /// Plugins directory, hot-reloaded.
    pub plugins: Option<PathBuf>,
    /// `APIVERSION/KIND` resources whose events are logged.
    pub watches: Vec<String>,
    /// Scope of the logged resources.
    pub scope: WatchScope,
    /// Where to serve `/metrics`, `/healthz`, `/readyz` and `/plugins`.
    pub admin: Option<SocketAddr>,
    /// Plugin limits and tenants (from `--config informant.toml`).
    pub config: HostConfig,
    /// That file, watched so changes apply without a restart.
    pub config_path: Option<PathBuf>,
}

/// Informers, plugins and the reloader of a running `dev` or `run`.
pub struct Runtime {
    /// The informers.
    pub factory: Arc<InformerFactory>,
    /// The plugins, when a directory was given.
    pub host: Option<Arc<PluginHost>>,
    reloader: Option<Reloader>,
    config_watcher: Option<ConfigWatcher>,
    admin: Option<AdminServer>,
}

impl Runtime {
    /// Loads the plugins (if any) with hot reload, adds event loggers, and waits for sync.
    pub async fn start(factory: Arc<InformerFactory>, opts: RuntimeOptions) -> Result<Runtime> {
        let mut watches = opts.watches;
        if opts.plugins.is_none() && watches.is_empty() {
            watches = ["v1/Pod", "v1/ConfigMap", "apps/v1/Deployment"]
                .map(String::from)
                .to_vec();
        }
        let host = match &opts.plugins {
            Some(dir) => {
                // The engine's memory slots must fit the largest cap a manifest may get.
                let engine = Arc::new(PluginEngine::new(EngineOptions {
                    max_memory_bytes: (opts.config.max_memory_mib as usize) << 20,
                    ..Default::default()
                })?);
                Some(Arc::new(PluginHost::new(
                    dir.clone(),
                    engine,
                    factory.clone(),
                    opts.config.clone(),
                )))
            }
            None => None,
        };
        // Up before anything loads, so probes see "not ready" rather than nothing during startup.
        let (admin, admin_state) = match opts.admin {
            Some(addr) => {
                let state = AdminState::new(factory.clone(), host.clone());
                (
                    Some(AdminServer::start(addr, state.clone()).await?),
                    Some(state),
                )
            }
            None => (None, None),
        };
        let (reloader, config_watcher) = match &host {
            Some(host) => {
                let report = host.reconcile().await;
                for (id, e) in &report.errors {
                    tracing::error!(plugin = %id, error = %e, "plugin not loaded");
                }
                tracing::info!(dir = %host.dir().display(), loaded = report.loaded.len(), failed = report.errors.len(), "plugins loaded; watching for changes");
                let reports = admin_state.as_ref().map(|state| {
                    state.record_reconcile(&report);
                    follow_reconciles(state.clone())
                });
                let config_watcher = match &opts.config_path {
                    Some(path) => Some(ConfigWatcher::start(path, host.clone(), reports.clone())?),
                    None => None,
                };
                (
                    Some(Reloader::start(host.clone(), reports)?),
                    config_watcher,
                )
            }
            None => (None, None),
        };
        watch_and_log(&factory, &watches, opts.scope).await?;
        if let Some(state) = &admin_state {
            state.startup_complete();
        }
        Ok(Runtime {
            factory,
            host,
            reloader,
            config_watcher,
            admin,
        })
    }

    /// Unregisters the plugins and stops the informers.
    pub async fn stop(self) {
        drop(self.config_watcher);
        drop(self.reloader);
        if let Some(host) = &self.host {
            host.shutdown().await;
        }
        self.factory.stop();
        if let Some(admin) = self.admin {
            admin.shutdown().await;
        }
    }
}

/// A channel for the reloader's reports, each recorded for `/readyz`; ends with the reloader.
fn follow_reconciles(
    state: Arc<AdminState>,
) -> tokio::sync::mpsc::UnboundedSender<informant::plugin::ReconcileReport> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(report) = rx.recv().await {
            state.record_reconcile(&report);
        }
    });
    tx
}

/// The host config from `informant.toml`, or the single-user defaults without one.
pub fn host_config(path: Option<&Path>) -> Result<HostConfig> {
    let Some(path) = path else {
        return Ok(HostConfig::default());
    };
    let config = informant::config::load(path)?;
    tracing::info!(
        config = %path.display(),
        tenants = config.tenancy.tenants.len(),
        operator_plugins = config.tenancy.operator_plugins,
        "host config loaded"
    );
    Ok(config)
}

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

/// The informer for a `--watch APIVERSION/KIND` argument.
pub async fn watch_informer(
    factory: &InformerFactory,
    watch: &str,
    scope: WatchScope,
) -> Result<Arc<SharedInformer>> {
    let (api_version, kind) = watch.rsplit_once('/').with_context(|| {
        format!("--watch `{watch}`: expected APIVERSION/KIND, e.g. v1/Pod or apps/v1/Deployment")
    })?;
    factory
        .informer(api_version, kind, scope)
        .await
        .with_context(|| format!("--watch `{watch}`"))
}

/// Starts one informer per `APIVERSION/KIND` with a handler logging each event.
async fn watch_and_log(
    factory: &InformerFactory,
    watches: &[String],
    scope: WatchScope,
) -> Result<()> {
    for w in watches {
        let informer = watch_informer(factory, w, scope.clone()).await?;
        let resource = w.clone();
        informer.add_handler(
            "log",
            FnHandler(move |e: Event| {
                tracing::info!(
                    resource = %resource,
                    event = ?e.event_type,
                    key = %e.key(),
                    resource_version = e.object.resource_version(),
                    initial = e.initial,
                    final_state_unknown = e.final_state_unknown,
                    "event"
                )
            }),
            HandlerOptions::default(),
        );
    }
    factory.start();
    factory.wait_for_sync(Duration::from_secs(60)).await?;
    tracing::info!(
        informers = factory.informers().len(),
        "all informers synced"
    );
    Ok(())
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
