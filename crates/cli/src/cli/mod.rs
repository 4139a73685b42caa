//! Subcommands, one module each, over the library (the runtime itself is
//! [`informant_runtime::runtime`], so the tests start exactly what these start).

pub mod apiserver;
pub mod check;
pub mod dead_letters;
pub mod dev;
pub mod logs;
pub mod new;
pub mod poll;
pub mod record;
pub mod registry;
pub mod replay;
pub mod run;
pub mod status;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use informant_runtime::admin::client::dev_address::{self, Found};
use informant_runtime::admin::client::{AdminClient, Credentials, Tls, Trust, transport};
use informant_runtime::plugin::exec::compile_cache::CompileCache;
use informant_runtime::runtime::RuntimeOptions;
pub use informant_runtime::runtime::{host_config, watch_informer};
use informant_runtime::telemetry::{ExportConfig, Sampling, Traces};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

/// The host's flags, the same for `run` and `dev`.
#[derive(clap::Args)]
pub struct HostArgs {
    /// Host config: plugin limits and tenants with their grants (default: single-user, top-level
    /// plugins only).
    #[arg(long, value_name = "informant.toml")]
    config: Option<PathBuf>,
    /// Also log events of these resources, as `APIVERSION/KIND` (default without --plugins:
    /// v1/Pod, v1/ConfigMap, apps/v1/Deployment).
    #[arg(long = "watch")]
    watches: Vec<String>,
    /// Send every plugin write with `dryRun=All`: the API server validates and admits it and
    /// persists nothing (try a writing plugin against a real cluster safely).
    #[arg(long)]
    dry_run_writes: bool,
    /// Keep the informers' caches, each plugin's delivery cursor and its dead letters in this
    /// directory, so a restart delivers exactly what changed while the host was down. Mount a
    /// volume and give a subdirectory of it. DIR is created 0700; one that is a symbolic link,
    /// another user's, writable by group or others, or in use by another process stops the
    /// host with an error saying so (state of another cluster or a corrupt file is set aside,
    /// and the host starts afresh). Under `dev` the embedded API server starts afresh each
    /// time, so a restart lists and gives each plugin the difference from what it had handled.
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Where plugins pulled from OCI registries (the config's `sources`) are written, laid out
    /// as the plugins directory is, and loaded from (default: a temporary directory removed at
    /// exit).
    #[arg(long, value_name = "DIR")]
    pulled_dir: Option<PathBuf>,
    #[command(flatten)]
    cache: CompileCacheArgs,
    #[command(flatten)]
    traces: TraceArgs,
    #[command(flatten)]
    admission: AdmissionArgs,
}

impl HostArgs {
    /// Starts exporting traces, if asked; held to the end, as dropping it sends the spans still
    /// queued.
    pub fn start_traces(&self) -> Result<Option<Traces>> {
        self.traces.start()
    }

    /// What these flags set of the runtime's options: the host config (read now), the extra
    /// watches, the compile cache and dry-run writes; the state directory is the caller's to key.
    pub fn runtime_options(&self) -> Result<(RuntimeOptions, Option<PathBuf>)> {
        let options = RuntimeOptions {
            watches: self.watches.clone(),
            config: host_config(self.config.as_deref())?,
            config_path: self.config.clone(),
            compile_cache: self.cache.compile_cache(),
            dry_run_writes: self.dry_run_writes,
            admission: self.admission.options(None)?,
            admission_only: self.admission.admission_only,
            pulled_dir: self.pulled_dir.clone(),
            ..Default::default()
        };
        Ok((options, self.state_dir.clone()))
    }

    /// The state directory asked for (`--state-dir`).
    pub fn state_dir(&self) -> Option<&Path> {
        self.state_dir.as_deref()
    }

    /// Whether plugins run for admission only (`--admission-only`).
    pub fn admission_only(&self) -> bool {
        self.admission.admission_only
    }

    /// The admission flags, for a command with defaults of its own (`dev`).
    pub fn admission(&self) -> &AdmissionArgs {
        &self.admission
    }
}

/// The admission webhook server's flags (plugins' `[[admit]]` hooks).
#[derive(clap::Args)]
pub struct AdmissionArgs {
    /// Serve admission webhooks for plugins' [[admit]] hooks on this address (HTTPS only).
    /// Off unless given (`dev`: on a free loopback port).
    #[arg(long, value_name = "ADDR")]
    admission_addr: Option<std::net::SocketAddr>,
    /// The webhook server's certificate chain (PEM), e.g. cert-manager's `tls.crt`; reloaded
    /// when it changes. Without it a CA and a certificate are made at start.
    #[arg(long, value_name = "FILE", requires = "admission_key")]
    admission_cert: Option<PathBuf>,
    /// The key of --admission-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "admission_cert")]
    admission_key: Option<PathBuf>,
    /// Keep a Validating- and a MutatingWebhookConfiguration of this name pointing at this
    /// host, one webhook per running hook (`dev`: `informant-dev`).
    #[arg(long, value_name = "NAME")]
    admission_webhook: Option<String>,
    /// How the API server reaches the webhook server: `https://HOST[:PORT]`, or a Service as
    /// `service:NAMESPACE/NAME:PORT` (in a cluster).
    #[arg(long, value_name = "URL", requires = "admission_webhook")]
    admission_endpoint: Option<String>,
    /// Make, rotate and share the webhook server's CA and certificate through this Secret
    /// (every replica serves the same); instead of --admission-cert.
    #[arg(long, value_name = "NAMESPACE/NAME", conflicts_with = "admission_cert")]
    admission_cert_secret: Option<String>,
    /// Run plugins for admission only: their informers fill the caches their hooks read, but
    /// they get no events and their schedules do not tick (run another host for those). Every
    /// replica of such a host answers admission; not with --leader-elect, --shard-group or
    /// --state-dir.
    #[arg(long, requires = "admission_addr")]
    admission_only: bool,
    /// Append every AdmissionReview request a hook gets to FILE (created 0600), one JSON object
    /// a line, to answer them again offline with `informant replay --reviews FILE`.
    #[arg(long, value_name = "FILE", requires = "admission_addr")]
    admission_record: Option<PathBuf>,
    /// A DNS name the managed certificate is also for (the Service's names are added when
    /// --admission-endpoint names one).
    #[arg(long, value_name = "NAME", requires = "admission_cert_secret")]
    admission_dns_name: Vec<String>,
}

impl AdmissionArgs {
    /// The runtime's admission options: off unless an address is given or `default_addr` is.
    pub fn options(
        &self,
        default_addr: Option<(std::net::SocketAddr, &str)>,
    ) -> Result<Option<informant_runtime::admission::AdmissionOptions>> {
        use informant_runtime::admission::webhooks::Endpoint;
        let Some(addr) = self.admission_addr.or(default_addr.map(|(addr, _)| addr)) else {
            anyhow::ensure!(
                self.admission_webhook.is_none(),
                "--admission-webhook needs --admission-addr: there is no webhook server to point at"
            );
            return Ok(None);
        };
        let tls = match (&self.admission_cert, &self.admission_key) {
            (Some(cert), Some(key)) => informant_runtime::tls::ServerTls::files(cert, key),
            _ => informant_runtime::tls::ServerTls::SelfSigned,
        };
        let name = self
            .admission_webhook
            .clone()
            .or(default_addr.map(|(_, name)| name.to_string()));
        let register = match (name, &self.admission_endpoint) {
            (None, _) => None,
            (Some(name), Some(endpoint)) => Some((name, endpoint_of(endpoint)?)),
            // Reached where it listens: outside a cluster, or `dev`'s loopback.
            (Some(name), None) => Some((name, Endpoint::Url(String::new()))),
        };
        let cert_secret = match &self.admission_cert_secret {
            None => None,
            Some(text) => {
                let (namespace, name) = text
                    .split_once('/')
                    .filter(|(ns, n)| !ns.is_empty() && !n.is_empty() && !n.contains('/'))
                    .with_context(|| {
                        format!("--admission-cert-secret `{text}`: expected NAMESPACE/NAME")
                    })?;
                let mut names = self.admission_dns_name.clone();
                if let Some((
                    _,
                    Endpoint::Service {
                        namespace, name, ..
                    },
                )) = &register
                {
                    names.push(format!("{name}.{namespace}.svc"));
                    names.push(format!("{name}.{namespace}.svc.cluster.local"));
                }
                Some(informant_runtime::admission::CertSecret {
                    namespace: namespace.into(),
                    name: name.into(),
                    options: informant_runtime::admission::certs::CertOptions {
                        names,
                        ..Default::default()
                    },
                })
            }
        };
        Ok(Some(informant_runtime::admission::AdmissionOptions {
            addr,
            tls,
            register,
            cert_secret,
            record: self.admission_record.clone(),
        }))
    }
}

/// `--admission-endpoint`'s value.
fn endpoint_of(text: &str) -> Result<informant_runtime::admission::webhooks::Endpoint> {
    use informant_runtime::admission::webhooks::Endpoint;
    if let Some(service) = text.strip_prefix("service:") {
        let parsed = service.split_once('/').and_then(|(namespace, rest)| {
            let (name, port) = rest.split_once(':')?;
            let port: i32 = port.parse().ok().filter(|p| (1..=65535).contains(p))?;
            (!namespace.is_empty() && !name.is_empty()).then(|| Endpoint::Service {
                namespace: namespace.into(),
                name: name.into(),
                port,
            })
        });
        return parsed.with_context(|| {
            format!("--admission-endpoint `{text}`: expected service:NAMESPACE/NAME:PORT")
        });
    }
    let host = text
        .strip_prefix("https://")
        .map(|rest| rest.trim_end_matches('/'))
        .filter(|host| {
            !host.is_empty()
                && !host.contains(['/', '?', '#', '@'])
                && !host.contains(char::is_whitespace)
        });
    anyhow::ensure!(
        host.is_some(),
        "--admission-endpoint `{text}`: expected https://HOST[:PORT] (webhooks are HTTPS; the host adds the paths)"
    );
    Ok(Endpoint::Url(text.trim_end_matches('/').to_string()))
}

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

/// Where a running host's admin server is and how to reach it, for the commands that read it
/// (`status`, `logs`, `dead-letters`).
#[derive(clap::Args)]
pub struct AdminArgs {
    /// The admin server: HOST:PORT, http://HOST:PORT or https://HOST:PORT. Default: the one a
    /// running `informant dev` published, else 127.0.0.1:9090.
    #[arg(long, value_name = "URL", env = "INFORMANT_ADMIN", global = true)]
    pub admin: Option<String>,
    /// Reach this pod's admin port through the API server's port-forward, as `kubectl
    /// port-forward` does (needs `create` on `pods/portforward`; the pod exposes nothing).
    #[arg(long, value_name = "NAME", global = true, conflicts_with_all = ["admin", "selector", "release"])]
    pub pod: Option<String>,
    /// Like --pod, for the first ready pod (by name) this label selector matches.
    #[arg(long, short = 'l', value_name = "SELECTOR", global = true, conflicts_with_all = ["admin", "release"])]
    pub selector: Option<String>,
    /// Like --pod, for the first ready pod of this Helm release
    /// (`app.kubernetes.io/instance=RELEASE`).
    #[arg(long, value_name = "RELEASE", global = true, conflicts_with = "admin")]
    pub release: Option<String>,
    /// The pod's namespace (default: the kubeconfig context's).
    #[arg(long, short = 'n', value_name = "NS", global = true)]
    pub namespace: Option<String>,
    /// The admin port inside the pod.
    #[arg(long, value_name = "PORT", default_value_t = 9090, global = true)]
    pub pod_port: u16,
    /// Speak plain HTTP to the pod's admin port (default: HTTPS, as the chart serves it).
    #[arg(long, global = true)]
    pub pod_plain_http: bool,
    /// The bearer token to show the admin server (default: the kubeconfig user's, from its
    /// token, token file or exec plugin). Never printed.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "INFORMANT_TOKEN",
        hide_env_values = true,
        global = true
    )]
    pub token: Option<String>,
    /// The kubeconfig for --pod and for the token (default: $KUBECONFIG, ~/.kube/config, or
    /// in-cluster).
    #[arg(long, value_name = "FILE", global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// Verify an https:// admin's certificate with the CAs of this PEM file (default: the
    /// system's trust store).
    #[arg(long, value_name = "FILE", global = true)]
    pub admin_ca: Option<PathBuf>,
    /// Accept any certificate from an https:// admin (a self-signed one); the connection is
    /// still encrypted, but not to a verified server.
    #[arg(long, global = true)]
    pub insecure_skip_tls_verify: bool,
    /// The name the admin's certificate must carry (default: the address's host; for a pod,
    /// the pod's name).
    #[arg(long, value_name = "NAME", global = true)]
    pub tls_server_name: Option<String>,
    /// Say on stderr which admin server is read and what credential is shown (never the
    /// token itself).
    #[arg(long, short = 'v', global = true)]
    pub verbose: bool,
}

/// Where `run` and the docs put an admin server when none is named.
const DEFAULT_ADMIN: &str = "127.0.0.1:9090";

impl AdminArgs {
    /// The client these flags describe, with its token.
    pub async fn client(&self) -> Result<AdminClient> {
        let trust = Trust::from_flags(self.admin_ca.as_deref(), self.insecure_skip_tls_verify)?;
        let selector = match (&self.selector, &self.release) {
            (Some(s), _) => Some(s.clone()),
            (None, Some(r)) => Some(format!("app.kubernetes.io/instance={r}")),
            (None, None) => None,
        };
        let client = if self.pod.is_some() || selector.is_some() {
            self.pod_client(trust, selector).await?
        } else {
            self.direct_client(trust).await?
        };
        if self.verbose {
            eprintln!(
                "admin server: {}; sending {}",
                client.label(),
                client.credentials().describe()
            );
        }
        Ok(client)
    }

    async fn pod_client(&self, trust: Trust, selector: Option<String>) -> Result<AdminClient> {
        let config = kube_config(self.kubeconfig.as_deref()).await?;
        let namespace = self
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        informant_runtime::apimachinery::names::check_namespace(&namespace)?;
        let credentials = match &self.token {
            Some(t) => Credentials::token(t, "--token/INFORMANT_TOKEN")?,
            None => Credentials::from_kubeconfig(&config)?,
        };
        let pods: Api<Pod> = Api::namespaced(kube::Client::try_from(config)?, &namespace);
        let name = match (&self.pod, selector) {
            (Some(name), _) => name.clone(),
            (None, Some(selector)) => transport::ready_pod(&pods, &namespace, &selector).await?,
            (None, None) => unreachable!("pod_client is called with a pod or a selector"),
        };
        let tls = match self.pod_plain_http {
            true if trust.is_explicit() => anyhow::bail!(
                "--pod-plain-http: --admin-ca and --insecure-skip-tls-verify are for HTTPS"
            ),
            true => None,
            false => {
                let server_name = self.tls_server_name.as_deref().unwrap_or(&name);
                Some(Tls::new(&trust, server_name)?)
            }
        };
        Ok(
            AdminClient::pod(pods, &namespace, &name, self.pod_port, tls)?
                .with_credentials(credentials),
        )
    }

    async fn direct_client(&self, trust: Trust) -> Result<AdminClient> {
        let (addr, dev) = match &self.admin {
            Some(a) => (a.clone(), false),
            None => match dev_address::path().map(|p| dev_address::find(&p)) {
                Some(Found::Admin(dev)) => (dev.addr.to_string(), true),
                Some(Found::Refused { file, reason }) => {
                    eprintln!("warning: ignoring {}: {reason}", file.display());
                    (DEFAULT_ADMIN.to_string(), false)
                }
                Some(Found::Nothing) | None => (DEFAULT_ADMIN.to_string(), false),
            },
        };
        let client = AdminClient::from_url(&addr, &trust, self.tls_server_name.as_deref())?;
        let credentials = match (&self.token, dev) {
            (Some(t), _) => Credentials::token(t, "--token/INFORMANT_TOKEN")?,
            // dev's admin is plain loopback and asks for no token: none is handed to it.
            (None, true) => Credentials::none("`informant dev`'s admin asks for none"),
            // Whoever listens on the default port of this machine is not shown the user's
            // cluster credentials unasked.
            (None, false) if self.admin.is_none() => Credentials::none(format!(
                "{DEFAULT_ADMIN} is only the default: name the admin server with --admin (or INFORMANT_ADMIN) to show it your kubeconfig's token"
            )),
            (None, false) => match (
                kube_config(self.kubeconfig.as_deref()).await,
                &self.kubeconfig,
            ) {
                (Ok(config), _) => Credentials::from_kubeconfig(&config)?,
                (Err(e), Some(_)) => return Err(e),
                (Err(e), None) => Credentials::none(format!("{e:#}")),
            },
        };
        Ok(client.with_credentials(credentials))
    }
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
    let config = kube_config(kubeconfig).await?;
    let url = config.cluster_url.to_string();
    Ok((kube::Client::try_from(config)?, url))
}

/// The kubeconfig's configuration: from a file, or inferred ($KUBECONFIG, ~/.kube/config,
/// in-cluster).
pub async fn kube_config(kubeconfig: Option<&Path>) -> Result<kube::Config> {
    Ok(match kubeconfig {
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
    })
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
