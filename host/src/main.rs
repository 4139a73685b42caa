//! The `informant` command line.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use informant::devserver::{DevServer, DevServerConfig};
use informant::informer::{
    Event, FactoryOptions, FnHandler, HandlerOptions, InformerFactory, WatchScope,
};
use informant::plugin::{EngineOptions, HostConfig, PluginEngine, PluginHost, Reloader};
use std::sync::Arc;

#[derive(Parser)]
#[command(
    name = "informant",
    version,
    about = "Kubernetes event hooks in sandboxed WebAssembly"
)]
struct Cli {
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the embedded Kubernetes API server (for kubectl, tests and demos).
    Apiserver {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:6443")]
        listen: SocketAddr,
        /// Where to write a kubeconfig pointing at the server.
        #[arg(long)]
        kubeconfig_out: Option<PathBuf>,
    },
    /// Embedded API server plus informers in one process, logging every event: no cluster needed.
    Dev {
        /// Address for the embedded API server.
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
        /// Where to write the kubeconfig (default: a file in the temp dir).
        #[arg(long)]
        kubeconfig_out: Option<PathBuf>,
        /// Plugins directory (`NAME.wasm` + `NAME.toml`, tenants in subdirectories); hot-reloaded.
        #[arg(long)]
        plugins: Option<PathBuf>,
        /// Also log events of these resources, as `APIVERSION/KIND` (default without --plugins:
        /// v1/Pod, v1/ConfigMap, apps/v1/Deployment).
        #[arg(long = "watch")]
        watches: Vec<String>,
        /// Don't create the demo namespace and objects.
        #[arg(long)]
        no_seed: bool,
    },
    /// Informers against a real cluster (kubeconfig or in-cluster), logging every event.
    Run {
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
    },
}

fn default_watches() -> Vec<String> {
    ["v1/Pod", "v1/ConfigMap", "apps/v1/Deployment"]
        .map(String::from)
        .to_vec()
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    match cli.command {
        Command::Apiserver {
            listen,
            kubeconfig_out,
        } => {
            let server = DevServer::start(DevServerConfig {
                listen,
                ..Default::default()
            })
            .await?;
            if let Some(path) = &kubeconfig_out {
                server.write_kubeconfig(path)?;
                eprintln!("kubeconfig written to {}", path.display());
            }
            eprintln!("API server listening on {}", server.url());
            tokio::signal::ctrl_c().await?;
            server.shutdown().await;
        }
        Command::Dev {
            listen,
            kubeconfig_out,
            plugins,
            watches,
            no_seed,
        } => {
            let server = DevServer::start(DevServerConfig {
                listen,
                ..Default::default()
            })
            .await?;
            let path = kubeconfig_out.unwrap_or_else(|| {
                std::env::temp_dir().join(format!("informant-{}.kubeconfig", server.addr().port()))
            });
            server.write_kubeconfig(&path)?;
            if !no_seed {
                seed_demo(&server)?;
            }
            let factory = Arc::new(InformerFactory::new(
                server.client(),
                FactoryOptions::default(),
            ));
            let _plugins = start(&factory, plugins, watches, WatchScope::default()).await?;
            eprintln!(
                "Embedded API server on {}. Try:\n  kubectl --kubeconfig {} create configmap hello --from-literal=greeting=hi",
                server.url(),
                path.display()
            );
            tokio::signal::ctrl_c().await?;
            factory.stop();
            server.shutdown().await;
        }
        Command::Run {
            kubeconfig,
            plugins,
            watches,
            namespace,
            selector,
        } => {
            let config = match kubeconfig {
                Some(path) => {
                    let kc = kube::config::Kubeconfig::read_from(&path)
                        .with_context(|| format!("reading kubeconfig {}", path.display()))?;
                    kube::Config::from_custom_kubeconfig(kc, &Default::default())
                        .await
                        .with_context(|| format!("loading kubeconfig {}", path.display()))?
                }
                None => kube::Config::infer()
                    .await
                    .context("no kubeconfig found and not in a cluster")?,
            };
            let client = kube::Client::try_from(config)?;
            let factory = Arc::new(InformerFactory::new(client, FactoryOptions::default()));
            let scope = WatchScope {
                namespace,
                label_selector: selector,
            };
            let _plugins = start(&factory, plugins, watches, scope).await?;
            tokio::signal::ctrl_c().await?;
            factory.stop();
        }
    }
    Ok(())
}

/// Loads the plugins (if any) with hot reload, adds event loggers, and waits for sync.
async fn start(
    factory: &Arc<InformerFactory>,
    plugins: Option<PathBuf>,
    mut watches: Vec<String>,
    scope: WatchScope,
) -> Result<Option<(Arc<PluginHost>, Reloader)>> {
    if plugins.is_none() && watches.is_empty() {
        watches = default_watches();
    }
    let host = match plugins {
        Some(dir) => {
            let engine = Arc::new(PluginEngine::new(EngineOptions::default())?);
            let host = Arc::new(PluginHost::new(
                dir.clone(),
                engine,
                factory.clone(),
                HostConfig::default(),
            ));
            let report = host.reconcile().await;
            for (id, e) in &report.errors {
                tracing::error!(plugin = %id, error = %e, "plugin not loaded");
            }
            tracing::info!(dir = %dir.display(), loaded = report.loaded.len(), failed = report.errors.len(), "plugins loaded; watching for changes");
            let reloader = Reloader::start(host.clone(), None)?;
            Some((host, reloader))
        }
        None => None,
    };
    watch_and_log(factory, &watches, scope).await?;
    Ok(host)
}

/// Starts one informer per `APIVERSION/KIND` with a handler logging each event.
async fn watch_and_log(
    factory: &InformerFactory,
    watches: &[String],
    scope: WatchScope,
) -> Result<()> {
    for w in watches {
        let (api_version, kind) = w.rsplit_once('/').with_context(|| {
            format!("--watch `{w}`: expected APIVERSION/KIND, e.g. v1/Pod or apps/v1/Deployment")
        })?;
        let informer = factory
            .informer(api_version, kind, scope.clone())
            .await
            .with_context(|| format!("--watch `{w}`"))?;
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

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}
