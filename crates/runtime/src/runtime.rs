//! Startup wiring: what `informant run` and `informant dev` start, in the library so the tests
//! start exactly what the binary starts.
//!
//! - [`Runtime`]: informers, the plugin host with hot reload, the config watcher, the admin
//!   server and `--watch` loggers, started over one [`InformerFactory`] and stopped in order.
//!   Nothing the cluster may fix by itself stops it: an API server not reachable yet, a kind
//!   not served yet (a CRD not installed yet) or an informer that never syncs are waited for
//!   and retried — plugins by the reloader (see [`crate::plugin::load::waiting`]), `--watch` kinds
//!   by a task each — never a reason to exit.
//! - [`Replica`]: a [`Runtime`] run as one replica of a deployment: without leader election it
//!   runs at once; with it, only while holding the Lease (a standby serves a ready `/readyz`
//!   and starts nothing; a leader that loses the Lease stops within the lease's safety margin
//!   and ends with an error, so its process exits and restarts as a standby).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc};
use tokio::task::{JoinHandle, JoinSet};

use crate::admin::{AdminAuth, AdminServer, AdminState};
use crate::admission::certs::ManagedCerts;
use crate::admission::webhooks::{Endpoint, Registrar, Registration};
use crate::admission::{AdmissionOptions, AdmissionServer};
use crate::config::ConfigWatcher;
use crate::durable::Durable;
use crate::informer::{
    Event, FactoryOptions, FnHandler, HandlerOptions, InformerClaim, InformerFactory,
    SharedInformer, WatchScope,
};
use crate::leader::Leadership;
use crate::plugin::exec::compile_cache::CompileCache;
use crate::plugin::exec::engine::{EngineOptions, PluginEngine};
use crate::plugin::imports::log::PluginLog;
use crate::plugin::load::host_config::HostConfig;
use crate::plugin::load::loader::PluginHost;
use crate::plugin::load::rediscover::Rediscoverer;
use crate::plugin::load::reload::Reloader;
use crate::plugin::load::status::ReconcileReport;
use crate::shard::Shard;
use crate::sources::Sources;
use crate::tls::ServerTls;

mod replica;

// Defined beside the state it opens, which must not reach up to the runtime for it.
pub use crate::durable::StateOptions;
pub use replica::{Replica, ReplicaState};

/// Errors starting or running a [`Runtime`] or [`Replica`]; each names what failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The plugin engine could not be created.
    #[error(transparent)]
    Plugin(#[from] crate::plugin::PluginError),
    /// An informer could not be resolved, watched or synced.
    #[error("{what}: {source}")]
    Informer {
        /// Which watch.
        what: String,
        /// The informer error.
        #[source]
        source: crate::informer::Error,
    },
    /// A `--watch` argument is not `APIVERSION/KIND`.
    #[error("--watch `{0}`: expected APIVERSION/KIND, e.g. v1/Pod or apps/v1/Deployment")]
    BadWatch(String),
    /// The admin server could not bind.
    #[error("admin server: {0}")]
    Admin(#[source] crate::admin::Error),
    /// The admission webhook server could not start.
    #[error(transparent)]
    Admission(crate::admission::Error),
    /// The config file could not be watched.
    #[error("config watcher: {0}")]
    Config(#[source] crate::fswatch::WatchError),
    /// The plugins directory could not be watched.
    #[error("plugins directory watcher: {0}")]
    Reloader(#[source] crate::plugin::PluginError),
    /// The directory pulled plugins are written to could not be made, or is not private.
    #[error("pulled plugins directory: {0}")]
    PulledDir(#[source] informant_state::private::PrivateError),
    /// A temporary directory for pulled plugins could not be made.
    #[error("pulled plugins directory in `{path}`: {source}")]
    PulledTemp {
        /// Where it was to be made.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The state directory (`--state-dir`) cannot be used.
    #[error(transparent)]
    State(crate::durable::DurableError),
    /// Leader election failed to start, or ended before this replica led.
    #[error(transparent)]
    Leader(#[from] crate::leader::Error),
    /// Sharded mode could not start, or leaving the group failed.
    #[error(transparent)]
    Shard(#[from] crate::shard::Error),
    /// This replica led and lost the Lease: the process should exit and restart as a standby.
    #[error("lost the lease {lease} ({state:?}); exiting to restart as a standby")]
    LostLease {
        /// `namespace/name`.
        lease: String,
        /// How it was lost.
        state: Leadership,
    },
}

/// Result alias for this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What `dev` and `run` start on top of an informer factory.
#[derive(Clone, Default)]
pub struct RuntimeOptions {
    /// Plugins directory, hot-reloaded.
    pub plugins: Option<PathBuf>,
    /// `APIVERSION/KIND` resources whose events are logged (default without plugins:
    /// `v1/Pod`, `v1/ConfigMap`, `apps/v1/Deployment`).
    pub watches: Vec<String>,
    /// Scope of the logged resources.
    pub scope: WatchScope,
    /// Where to serve `/metrics`, `/healthz`, `/readyz` and `/plugins`.
    pub admin: Option<SocketAddr>,
    /// How the admin server authenticates callers (default: not at all, accepted only on a
    /// loopback `admin` address).
    pub admin_auth: AdminAuth,
    /// Whether the admin server speaks HTTPS (default: plain HTTP).
    pub admin_tls: ServerTls,
    /// Where to serve the probes (`/healthz`, and a `/readyz` of counts) without credentials.
    pub health: Option<SocketAddr>,
    /// Plugin limits and tenants (from `--config informant.toml`).
    pub config: HostConfig,
    /// That file, watched so changes apply without a restart.
    pub config_path: Option<PathBuf>,
    /// How the informers list and watch.
    pub factory: FactoryOptions,
    /// The plugin engine to share (default: a new one sized by `config`).
    pub engine: Option<Arc<PluginEngine>>,
    /// Where that new engine caches compiled plugins (unused with `engine`).
    pub compile_cache: CompileCache,
    /// Where plugins' log lines are also broadcast (tests, embedders); the host makes its own
    /// channel otherwise.
    pub plugin_logs: Option<broadcast::Sender<PluginLog>>,
    /// Every plugin write with `dryRun=All` (`--dry-run-writes`).
    pub dry_run_writes: bool,
    /// Durable delivery (`--state-dir`): caches and plugins' cursors kept across restarts.
    pub state: Option<StateOptions>,
    /// Sharded mode (`--shard-group`): only the plugins this member owns run here (set by
    /// [`Replica::start_sharded`]).
    pub shard: Option<Shard>,
    /// The admission webhook server for plugins' `[[admit]]` hooks (`--admission-addr`).
    pub admission: Option<AdmissionOptions>,
    /// Plugins answer admission only: no events, no schedules (`--admission-only`), so that
    /// every replica of an admission deployment can run them beside one host delivering events.
    pub admission_only: bool,
    /// Where plugins pulled from registries (`[[sources]]`) are written (`--pulled-dir`); a
    /// temporary directory removed at exit when not given.
    pub pulled_dir: Option<PathBuf>,
}

/// Informers, plugins and the reloader of a running `dev` or `run`.
pub struct Runtime {
    /// The informers.
    pub factory: Arc<InformerFactory>,
    /// Durable delivery's state, with `--state-dir`.
    pub durable: Option<Arc<Durable>>,
    /// The plugins, when a directory was given.
    pub host: Option<Arc<PluginHost>>,
    reloader: Option<Reloader>,
    /// Re-expands wildcard watches as CRDs come and go.
    rediscoverer: Option<Rediscoverer>,
    config_watcher: Option<ConfigWatcher>,
    admin: Option<AdminServer>,
    probes: Option<AdminServer>,
    admission: Option<AdmissionServer>,
    /// Keeps the webhook configurations pointing here; stops when dropped.
    registrar: Option<Registrar>,
    /// Reconciles whenever the shard assignment changes; aborted when dropped.
    shard_follower: Option<JoinHandle<()>>,
    /// `--watch` kinds not served yet, retried until they are; aborted when dropped.
    _watch_retries: JoinSet<()>,
    /// The plugins pulled from registries, followed; stopped when dropped.
    _sources: Option<Sources>,
    /// The pulled directory when it is a temporary one: removed when dropped.
    _pulled_tmp: Option<tempfile::TempDir>,
}

impl Runtime {
    /// Loads the plugins (if any) with hot reload, adds event loggers, and waits (bounded) for
    /// the loggers' informers to sync. Plugins and `--watch` kinds that must wait (API server
    /// not answering, kind not served) are retried in the background; only a mistake in what
    /// was asked (a malformed `--watch`, an unusable address or directory) is an error.
    pub async fn start(client: kube::Client, opts: RuntimeOptions) -> Result<Runtime> {
        let factory = Arc::new(InformerFactory::new(client, opts.factory.clone()));
        let listeners = opts.admin_servers();
        // Before any informer exists: each is restored from disk as it is created.
        let durable = match &opts.state {
            Some(s) => {
                let durable = Durable::start(s).map_err(Error::State)?;
                durable.attach(&factory);
                if let Some(shard) = &opts.shard {
                    follow_in_state(shard, &durable);
                }
                Some(durable)
            }
            None => None,
        };
        let mut watches = opts.watches;
        if opts.plugins.is_none() && watches.is_empty() {
            watches = ["v1/Pod", "v1/ConfigMap", "apps/v1/Deployment"]
                .map(String::from)
                .to_vec();
        }
        // Only with sources: a host without any scans no second directory.
        let (pulled, pulled_tmp) = match (&opts.plugins, opts.config.sources.is_empty()) {
            (Some(_), false) => match &opts.pulled_dir {
                Some(dir) => {
                    // Code the host runs: a directory only this user may write, as the
                    // compile cache's.
                    informant_state::private::ensure_dir(dir, informant_state::private::Secret::No)
                        .map_err(Error::PulledDir)?;
                    (Some(dir.clone()), None)
                }
                None => {
                    let tmp = tempfile::Builder::new()
                        .prefix("informant-pulled-")
                        .tempdir()
                        .map_err(|source| Error::PulledTemp {
                            path: std::env::temp_dir(),
                            source,
                        })?;
                    (Some(tmp.path().to_path_buf()), Some(tmp))
                }
            },
            _ => (None, None),
        };
        let host = match &opts.plugins {
            Some(dir) => {
                let engine = match opts.engine {
                    Some(engine) => engine,
                    // The engine's memory slots must fit the largest cap a manifest may get.
                    None => Arc::new(PluginEngine::new(EngineOptions {
                        max_memory_bytes: (opts.config.max_memory_mib as usize) << 20,
                        compile_cache: opts.compile_cache.clone(),
                        ..Default::default()
                    })?),
                };
                let mut host =
                    PluginHost::new(dir.clone(), engine, factory.clone(), opts.config.clone())
                        .with_dry_run_writes(opts.dry_run_writes)
                        .with_admission_only(opts.admission_only);
                if let Some(d) = &durable {
                    host = host.with_durable(d.clone());
                }
                if let Some(shard) = &opts.shard {
                    host = host.with_shard(shard.clone());
                }
                if let Some(logs) = opts.plugin_logs {
                    host = host.with_logs(logs);
                }
                if let Some(dir) = &pulled {
                    host = host.with_pulled_dir(dir.clone());
                }
                Some(Arc::new(host))
            }
            None => None,
        };
        // Up before anything loads, so probes see "not ready" rather than nothing during startup.
        let admin_state = (opts.admin.is_some() || opts.health.is_some())
            .then(|| AdminState::new(factory.clone(), host.clone()));
        let (admin, probes) = match &admin_state {
            Some(state) => admin_servers(&listeners, state.clone()).await?,
            None => (None, None),
        };
        // Before the first reconcile: the hooks it loads are answered as soon as they run.
        let (admission, registrar) = match (&opts.admission, &host) {
            (Some(a), Some(host)) => {
                let server = match &a.cert_secret {
                    Some(c) => {
                        let certs = ManagedCerts::start(
                            factory.client().clone(),
                            &c.namespace,
                            &c.name,
                            c.options.clone(),
                        )
                        .await
                        .map_err(|e| Error::Admission(e.into()))?;
                        AdmissionServer::start_managed(
                            a.addr,
                            certs,
                            host.clone(),
                            a.record.clone(),
                        )
                        .await
                    }
                    None => {
                        AdmissionServer::start(a.addr, &a.tls, host.clone(), a.record.clone()).await
                    }
                }
                .map_err(Error::Admission)?;
                let registrar = a.register.clone().map(|(name, endpoint)| {
                    // No URL given: where it listens (loopback for a wildcard address).
                    let endpoint = match endpoint {
                        Endpoint::Url(url) if url.is_empty() => {
                            let mut at = server.addr();
                            if at.ip().is_unspecified() {
                                at.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
                            }
                            Endpoint::Url(format!("https://{at}"))
                        }
                        other => other,
                    };
                    let reg = Registration {
                        name,
                        endpoint,
                        ca_bundle: server.ca_bundle(),
                    };
                    Registrar::start(factory.client().clone(), reg, host.clone())
                });
                (Some(server), registrar)
            }
            _ => (None, None),
        };
        let mut shard_follower = None;
        let mut sources = None;
        let (reloader, config_watcher) = match &host {
            Some(host) => {
                let reports = admin_state.as_ref().map(|s| follow_reconciles(s.clone()));
                // Watching the directory and the config before the first reconcile: a plugin
                // dropped in, or a config changed, while it runs is reconciled by the next one,
                // not left until some later change.
                let reloader =
                    Reloader::start(host.clone(), reports.clone()).map_err(Error::Reloader)?;
                let config_watcher = match &opts.config_path {
                    Some(path) => Some(
                        ConfigWatcher::start(path, host.clone(), reports.clone())
                            .map_err(Error::Config)?,
                    ),
                    None => None,
                };
                if host.shard().is_some() {
                    shard_follower = Some(follow_assignment(host.clone(), reports.clone()));
                }
                sources = pulled
                    .clone()
                    .map(|dir| Sources::start(host.clone(), dir, reports.clone()));
                if let (Some(sources), Some(state)) = (&sources, &admin_state) {
                    state.set_sources(sources.polls());
                }
                let active = host.shard().is_some_and(|s| s.assignment.borrow().active);
                let report = host.reconcile().await;
                for (id, e) in &report.errors {
                    tracing::error!(plugin = %id, error = %e, "plugin not loaded");
                }
                tracing::info!(dir = %host.dir().display(), loaded = report.loaded.len(), failed = report.errors.len(), waiting = report.waiting.len(), "plugins loaded; watching for changes");
                if let Some(r) = &reports {
                    // Through the reloader's channel, so reports are recorded in order.
                    let _ = r.send(report);
                }
                // Started means the plugins' events flow, as readiness does: a caller creating
                // objects next sees them as changes, not as part of a first list.
                host.wait_started().await;
                match (&durable, host.shard()) {
                    (Some(d), None) => d.started(&factory, &host.loaded_ids()),
                    // A member joining owns nothing yet: the restored caches wait for its share.
                    (Some(d), Some(_)) if active => d.restores_done(),
                    _ => {}
                }
                (Some(reloader), config_watcher)
            }
            None => (None, None),
        };
        let rediscoverer = host
            .as_ref()
            .map(|h| Rediscoverer::start(h.clone(), crate::plugin::load::rediscover::PERIOD));
        let watch_retries = watch_and_log(&factory, &watches, opts.scope).await?;
        if let Some(state) = &admin_state {
            state.startup_complete();
        }
        if let (Some(d), None) = (&durable, &host) {
            d.started(&factory, &[]);
        }
        Ok(Runtime {
            factory,
            durable,
            host,
            reloader,
            rediscoverer,
            config_watcher,
            admin,
            probes,
            admission,
            registrar,
            shard_follower,
            _watch_retries: watch_retries,
            _sources: sources,
            _pulled_tmp: pulled_tmp,
        })
    }

    /// Where the admission webhook server listens, if it was started.
    pub fn admission_addr(&self) -> Option<SocketAddr> {
        self.admission.as_ref().map(AdmissionServer::addr)
    }

    /// The admission certificates this host manages through a Secret, when it does.
    pub fn admission_certs(&self) -> Option<Arc<ManagedCerts>> {
        self.admission.as_ref()?.certs().cloned()
    }

    /// The CA certificates (PEM) the admission webhook server is verified with, now.
    pub fn admission_ca_bundle(&self) -> Option<Vec<u8>> {
        self.admission
            .as_ref()
            .map(|a| a.ca_bundle().borrow().clone())
    }

    /// Where the admin server listens (the port it got, for port 0), if it was started.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(AdminServer::addr)
    }

    /// Unregisters the plugins and stops the informers.
    pub async fn stop(self) {
        drop(self._watch_retries);
        if let Some(f) = self.shard_follower {
            f.abort();
        }
        drop(self.config_watcher);
        drop(self.reloader);
        drop(self.rediscoverer);
        // Before the handlers go: a removed handler's queue is dropped, and with it what its
        // cursor says.
        if let Some(d) = &self.durable {
            d.save();
        }
        if let Some(host) = &self.host {
            host.shutdown().await;
        }
        self.factory.stop();
        if let Some(d) = &self.durable {
            d.shutdown().await;
        }
        drop(self.registrar);
        if let Some(admission) = self.admission {
            admission.shutdown().await;
        }
        if let Some(admin) = self.admin {
            admin.shutdown().await;
        }
        if let Some(probes) = self.probes {
            probes.shutdown().await;
        }
    }
}

/// What the admin listeners are asked to be.
struct AdminListeners {
    admin: Option<SocketAddr>,
    auth: AdminAuth,
    tls: ServerTls,
    health: Option<SocketAddr>,
}

impl RuntimeOptions {
    fn admin_servers(&self) -> AdminListeners {
        AdminListeners {
            admin: self.admin,
            auth: self.admin_auth.clone(),
            tls: self.admin_tls.clone(),
            health: self.health,
        }
    }
}

/// The admin server and the probe listener `opts` ask for, over `state`.
async fn admin_servers(
    opts: &AdminListeners,
    state: Arc<AdminState>,
) -> Result<(Option<AdminServer>, Option<AdminServer>)> {
    let admin = match opts.admin {
        Some(addr) => Some(
            AdminServer::start_with(addr, state.clone(), &opts.auth, &opts.tls)
                .await
                .map_err(Error::Admin)?,
        ),
        None => None,
    };
    let probes = match opts.health {
        Some(addr) => Some(
            AdminServer::start_probes(addr, state)
                .await
                .map_err(Error::Admin)?,
        ),
        None => None,
    };
    Ok((admin, probes))
}

/// A channel for the reloader's reports, each recorded for `/readyz`; ends with the reloader.
fn follow_reconciles(state: Arc<AdminState>) -> mpsc::UnboundedSender<ReconcileReport> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(report) = rx.recv().await {
            state.record_reconcile(&report);
        }
    });
    tx
}

/// Reconciles `host` whenever its shard assignment changes (a member joined, left or expired,
/// or this one stepped down or came back); each report goes where the reloader's go.
fn follow_assignment(
    host: Arc<PluginHost>,
    reports: Option<mpsc::UnboundedSender<ReconcileReport>>,
) -> JoinHandle<()> {
    let Some(mut assignment) = host.shard().map(|s| s.assignment.clone()) else {
        return tokio::spawn(async {});
    };
    tokio::spawn(async move {
        let mut restores_done = false;
        // Changes during a reconcile fold into the next one, which reads the latest.
        while assignment.changed().await.is_ok() {
            let active = assignment.borrow_and_update().active;
            let report = host.reconcile().await;
            if let Some(r) = &reports {
                let _ = r.send(report);
            }
            // This member's first share has taken what the caches restored from disk serve.
            if active
                && !std::mem::replace(&mut restores_done, true)
                && let Some(d) = host.durable()
            {
                d.restores_done();
            }
        }
    })
}

/// Sharded mode with a state directory: the cursors it kept count as this member's own (see
/// [`crate::shard::cursors::previous`]), and a plugin's stays there until a live member
/// publishes it (then its versions are no longer held back for it).
fn follow_in_state(shard: &Shard, durable: &Arc<Durable>) {
    shard.book.adopt_stored(durable.stored_cursors());
    let durable = Arc::downgrade(durable);
    shard.book.on_superseded(Arc::new(move |plugin| {
        if let Some(d) = durable.upgrade() {
            tracing::debug!(
                plugin,
                "a live shard member publishes this plugin: its stored cursors are dropped"
            );
            d.forget_plugin(plugin);
        }
    }));
}

/// The host config from `informant.toml`, or the single-user defaults without one.
pub fn host_config(path: Option<&Path>) -> Result<HostConfig, crate::config::ConfigError> {
    let Some(path) = path else {
        return Ok(HostConfig::default());
    };
    let config = crate::config::load(path)?;
    tracing::info!(
        config = %path.display(),
        tenants = config.tenancy.tenants.len(),
        operator_plugins = config.tenancy.operator_plugins,
        "host config loaded"
    );
    Ok(config)
}

/// The informer for a `--watch APIVERSION/KIND` argument, kept for the factory's life.
pub async fn watch_informer(
    factory: &InformerFactory,
    watch: &str,
    scope: WatchScope,
) -> Result<Arc<SharedInformer>> {
    let (api_version, kind) = parse_watch(watch)?;
    factory
        .informer(api_version, kind, scope)
        .await
        .map(InformerClaim::keep)
        .map_err(|source| Error::Informer {
            what: format!("--watch `{watch}`"),
            source,
        })
}

/// `APIVERSION/KIND` split at its last `/`.
fn parse_watch(watch: &str) -> Result<(&str, &str)> {
    watch
        .rsplit_once('/')
        .ok_or_else(|| Error::BadWatch(watch.to_string()))
}

/// How long startup waits for the `--watch` informers' first lists; past it, they keep
/// retrying in the background and startup goes on.
const WATCH_SYNC_WAIT: Duration = Duration::from_secs(60);

/// Starts one informer per `APIVERSION/KIND` with a handler logging each event. A kind that
/// cannot be resolved yet (not served, or the API server not answering) gets a task retrying it
/// with backoff, in the set returned; only a malformed or impossible watch is an error.
async fn watch_and_log(
    factory: &Arc<InformerFactory>,
    watches: &[String],
    scope: WatchScope,
) -> Result<JoinSet<()>> {
    let mut informers = Vec::new();
    let mut retries = JoinSet::new();
    for w in watches {
        let (api_version, kind) = parse_watch(w)?;
        match factory.informer(api_version, kind, scope.clone()).await {
            Ok(informer) => {
                let informer = informer.keep();
                log_events(&informer, w);
                informers.push(informer);
            }
            Err(e) if e.is_transient() => {
                tracing::warn!(watch = %w, error = %e, "--watch waits: retried with backoff until served");
                let (factory, w, scope) = (factory.clone(), w.clone(), scope.clone());
                retries.spawn(async move { retry_watch(&factory, &w, scope, e).await });
            }
            Err(source) => {
                return Err(Error::Informer {
                    what: format!("--watch `{w}`"),
                    source,
                });
            }
        }
    }
    factory.start();
    // Only these informers: the plugins' are their host's business, and a plugin's informer
    // that never syncs (say its list is forbidden) must not hold up or end the process.
    if let Err(e) = crate::informer::wait_all_settled(&informers, WATCH_SYNC_WAIT).await {
        tracing::warn!(error = %e, "--watch informers keep retrying; startup goes on");
    } else if !informers.is_empty() {
        tracing::info!(informers = informers.len(), "--watch informers synced");
    }
    Ok(retries)
}

/// Retries a `--watch` kind that could not be resolved (`first`) until it is, then logs its
/// events; logs again only when why it waits changes, or when it is given up as impossible.
async fn retry_watch(
    factory: &InformerFactory,
    watch: &str,
    scope: WatchScope,
    first: crate::informer::Error,
) {
    let Ok((api_version, kind)) = parse_watch(watch) else {
        return;
    };
    let mut why = std::mem::discriminant(&first);
    for attempt in 0.. {
        tokio::time::sleep(crate::plugin::load::retry_waiting::backoff(attempt)).await;
        match factory.informer(api_version, kind, scope.clone()).await {
            Ok(informer) => {
                log_events(&informer.keep(), watch);
                tracing::info!(watch = %watch, "--watch kind served; logging its events");
                return;
            }
            Err(e) if e.is_transient() => {
                let now = std::mem::discriminant(&e);
                if now != why {
                    why = now;
                    tracing::warn!(watch = %watch, error = %e, "--watch still waits, now for another reason");
                } else {
                    tracing::debug!(watch = %watch, error = %e, attempt, "--watch still waits");
                }
            }
            Err(e) => {
                tracing::error!(watch = %watch, error = %e, "--watch cannot be watched; given up");
                return;
            }
        }
    }
}

/// Logs every event of `informer`, naming the `--watch` argument.
fn log_events(informer: &Arc<SharedInformer>, watch: &str) {
    let resource = watch.to_string();
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
