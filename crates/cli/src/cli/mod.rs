//! Subcommands, one module each, over the library (the runtime itself is
//! [`informant_runtime::runtime`], so the tests start exactly what these start).

pub mod apiserver;
pub mod check;
pub mod dead_letters;
pub mod dev;
pub mod logs;
pub mod new;
pub mod record;
pub mod replay;
pub mod run;
pub mod status;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use informant_runtime::plugin::CompileCache;
pub use informant_runtime::runtime::{host_config, watch_informer};
use informant_runtime::telemetry::{ExportConfig, Sampling, Traces};

/// Compile cache flags of the commands that load plugins.
#[derive(clap::Args)]
pub struct CompileCacheArgs {
    /// Where compiled plugins are cached (default: $XDG_CACHE_HOME/informant/components, else
    /// ~/.cache/informant/components). Created 0700 if missing; used only if it is a real
    /// directory (not a symlink) owned by this user and writable by no one else, otherwise a
    /// warning says why and plugins load by compiling.
    #[arg(long, value_name = "DIR", env = "INFORMANT_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Never read or write the compile cache: every plugin load compiles (for read-only
    /// filesystems). Overrides --cache-dir. The environment variable takes 1/0, true/false,
    /// yes/no or on/off.
    #[arg(long, env = "INFORMANT_NO_COMPILE_CACHE", value_parser = clap::builder::BoolishValueParser::new())]
    no_compile_cache: bool,
}

impl CompileCacheArgs {
    /// The engine's compile cache setting.
    pub fn compile_cache(&self) -> CompileCache {
        match (&self.cache_dir, self.no_compile_cache) {
            (_, true) => CompileCache::Off,
            (Some(dir), false) => CompileCache::Dir(dir.clone()),
            (None, false) => CompileCache::Default,
        }
    }
}

/// Where a running host's admin server is, for the commands that read it.
#[derive(clap::Args)]
pub struct AdminArgs {
    /// The admin server of the running host (`HOST:PORT`, what it was given as `--admin`).
    #[arg(
        long,
        value_name = "ADDR",
        env = "INFORMANT_ADMIN",
        default_value = "127.0.0.1:9090"
    )]
    pub admin: String,
}

/// How the commands that read a running host print.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Output {
    /// For a person: aligned columns, colour only at a terminal.
    Table,
    /// For a program: JSON.
    Json,
}

/// Trace export flags of the commands that run plugins. Besides these, the OpenTelemetry
/// variables `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`, `OTEL_EXPORTER_OTLP_[TRACES_]CERTIFICATE`,
/// `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` are read (see the operations chapter).
#[derive(clap::Args)]
pub struct TraceArgs {
    /// Export OpenTelemetry traces of plugin work (a span per event, child spans for writes,
    /// HTTP requests and slow cache queries) over OTLP/HTTP with protobuf bodies to this
    /// collector, e.g. http://127.0.0.1:4318 or https://otlp.example.com (spans go to
    /// /v1/traces under it; user:password@ in it is sent as Basic authentication and never
    /// logged). Off when unset.
    // `--help` would show the variable's value, credentials and all.
    #[arg(
        long,
        value_name = "URL",
        env = "OTEL_EXPORTER_OTLP_ENDPOINT",
        hide_env_values = true
    )]
    otlp_endpoint: Option<String>,
    /// Send this header with every export (repeatable), e.g. `authorization=Bearer TOKEN`;
    /// added to those of OTEL_EXPORTER_OTLP_[TRACES_]HEADERS, replacing one of the same name.
    /// Values are never logged.
    #[arg(long = "otlp-header", value_name = "NAME=VALUE")]
    otlp_headers: Vec<String>,
    /// A PEM file of CA certificates to trust for an https:// endpoint, besides the system's
    /// (default: OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE, else OTEL_EXPORTER_OTLP_CERTIFICATE).
    #[arg(long, value_name = "FILE")]
    otlp_ca_file: Option<PathBuf>,
    /// Export this share of traces, from 0 (none) to 1 (all, the default), chosen by trace id
    /// (parentbased_traceidratio); overrides OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG.
    #[arg(long, value_name = "RATIO")]
    trace_sample_ratio: Option<f64>,
}

impl TraceArgs {
    /// Turns traces on when an endpoint is given; they stay on until the value is dropped.
    pub fn start(&self) -> Result<Option<Traces>> {
        let Some(endpoint) = self.otlp_endpoint.as_deref().filter(|e| !e.is_empty()) else {
            return Ok(None);
        };
        let mut config = ExportConfig::new(endpoint);
        config.apply_env(|name| std::env::var(name).ok())?;
        for header in &self.otlp_headers {
            config.add_header(header)?;
        }
        if let Some(path) = &self.otlp_ca_file {
            config.ca_file = Some(path.clone());
        }
        if let Some(ratio) = self.trace_sample_ratio {
            config.sampling = Sampling::ratio(ratio, "--trace-sample-ratio")?;
        }
        Ok(Some(Traces::start(config)?))
    }
}

/// A client from a kubeconfig file, or inferred ($KUBECONFIG, ~/.kube/config, in-cluster).
pub async fn client(kubeconfig: Option<&Path>) -> Result<kube::Client> {
    Ok(client_for(kubeconfig).await?.0)
}

/// A client as [`client`] makes it, with the API server's URL (what a state directory is
/// kept for).
pub async fn client_for(kubeconfig: Option<&Path>) -> Result<(kube::Client, String)> {
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
    let url = config.cluster_url.to_string();
    Ok((kube::Client::try_from(config)?, url))
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
