//! The admin HTTP server: `/metrics` (OpenMetrics text, which Prometheus scrapes), `/healthz`,
//! `/readyz`, `/plugins` (JSON), `/logs` (one plugin's log lines) and `/dead-letters`; and
//! [`client`], what `informant status` and `informant logs` read it with.
//!
//! Who may read what is [`auth`]'s: every endpoint but `/healthz` asks the API server whose
//! bearer token it was sent (TokenReview) and which tenants that user may read or change
//! (SubjectAccessReviews on `tenants.informant.dev`), unless the server listens on loopback
//! without authentication; each endpoint then shows only what the caller's [`Scope`] covers.
//! Probes have a listener of their own that asks nothing and shows no names.
//!
//! It sits on top of the other layers and only reads them: the informers through
//! [`InformerFactory::informers`] (sync state, reflector and listener counters), the plugins
//! through [`PluginHost`] (which plugins are loaded, and each one's [`Supervisor`](crate::plugin::exec::supervisor::Supervisor) counters).
//! Nothing below knows it exists; every figure is read at request time from counters the
//! pipeline keeps anyway, so serving the endpoints costs the pipeline nothing between scrapes.
//!
//! Contract:
//! - No endpoint waits on a reconcile: the plugin host publishes what is running separately
//!   from the lock a reconcile holds while it loads plugins.
//! - Counters are per plugin *version*: a hot swap starts the new version's counters at zero,
//!   which Prometheus treats as a counter reset.
//! - Readiness needs what only the runtime knows (that startup is over, what the last reconcile
//!   refused); it tells [`AdminState`] through [`AdminState::startup_complete`] and
//!   [`AdminState::record_reconcile`].
//!
//! - `admission_metrics`: the admission hooks' families.
//! - [`auth`]: who the caller is and which tenants it may read or change.
//! - [`client`]: reading a running host's admin server: its plugins' status as a table, a
//!   plugin's log lines, dead letters.
//! - [`dead_letters`]: what `/dead-letters` answers, and retrying or dropping them.
//! - [`logs`]: what `/logs` answers.
//! - [`metrics`]: the scrape-time collector and the metric names.
//! - `plugin_metrics`: the plugins' own metrics (the `metrics` import), merged by name.
//! - [`readiness`]: what `/readyz` checks.
//! - [`scope`]: what one caller may see (every tenant, or some).
//! - [`server`]: the axum routes and the listeners.

mod admission_metrics;
pub(crate) mod auth;
pub mod client;
pub mod dead_letters;
pub(crate) mod logs;
pub mod metrics;
mod plugin_metrics;
pub(crate) mod readiness;
pub mod scope;
pub(crate) mod server;
mod shard;
pub mod sources;

pub use auth::{AdminAuth, AuthOptions};
pub use readiness::Readiness;
pub use scope::Scope;
pub use server::AdminServer;

use std::net::SocketAddr;
use std::sync::Arc;

use crate::informer::InformerFactory;
use crate::plugin::load::loader::PluginHost;
use crate::plugin::load::status::{ReconcileReport, RunningPlugin};
use crate::tls::ServerTls;

/// Errors starting the admin server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The address could not be bound.
    #[error("admin server: cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
    /// No authentication was asked for on an address others can reach.
    #[error(
        "refusing to serve {addr} without authentication: anyone who can reach it \
         would read every tenant's plugins, logs and dead letters; use --admin-auth=kubernetes, \
         or a loopback address (127.0.0.1) for --admin-auth=none"
    )]
    Unauthenticated {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// Bearer tokens would be taken over plain HTTP on an address others can reach.
    #[error(
        "refusing to take bearer tokens over plain HTTP on {addr}: anyone on the way could \
         reuse a caller's token against the API server; serve HTTPS (--admin-tls=self-signed, \
         or --admin-tls-cert and --admin-tls-key), or a loopback address (127.0.0.1)"
    )]
    PlainTokens {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// HTTPS could not be set up.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
}

/// Whether the admin server may serve `addr` as `auth` and `tls` say: off loopback, only with
/// authentication, and only over HTTPS, since the callers' tokens are the API server's too.
pub fn check_exposure(addr: SocketAddr, auth: &AdminAuth, tls: &ServerTls) -> Result<(), Error> {
    if addr.ip().is_loopback() {
        return Ok(());
    }
    match (auth, tls) {
        (AdminAuth::None, _) => Err(Error::Unauthenticated { addr }),
        (AdminAuth::Kubernetes(_), ServerTls::Plain) => Err(Error::PlainTokens { addr }),
        _ => Ok(()),
    }
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What the admin endpoints read: the informers, the plugins, and readiness facts.
pub struct AdminState {
    factory: Arc<InformerFactory>,
    host: Option<Arc<PluginHost>>,
    readiness: Readiness,
    /// What `/logs` followers may be sent together.
    pub(crate) follow_budget: governor::DefaultDirectRateLimiter,
    /// What asks the plugin sources to check now, once they are followed.
    sources: std::sync::OnceLock<crate::sources::Polls>,
}

impl AdminState {
    /// State over a factory and, when plugins are in use, their host.
    pub fn new(factory: Arc<InformerFactory>, host: Option<Arc<PluginHost>>) -> Arc<Self> {
        Arc::new(AdminState {
            factory,
            host,
            readiness: Readiness::default(),
            follow_budget: logs::follow_budget(),
            sources: std::sync::OnceLock::new(),
        })
    }

    /// The informers.
    pub fn factory(&self) -> &Arc<InformerFactory> {
        &self.factory
    }

    /// The plugin host, if plugins are in use.
    pub fn host(&self) -> Option<&Arc<PluginHost>> {
        self.host.as_ref()
    }

    /// Lets `POST /sources/poll` ask the plugin sources to check now.
    pub fn set_sources(&self, polls: crate::sources::Polls) {
        let _ = self.sources.set(polls);
    }

    /// What asks the plugin sources to check now, once they are followed.
    pub(crate) fn sources(&self) -> Option<&crate::sources::Polls> {
        self.sources.get()
    }

    /// The readiness facts recorded so far.
    pub fn readiness(&self) -> &Readiness {
        &self.readiness
    }

    /// Records that the runtime has created its informers and done its first reconcile.
    pub fn startup_complete(&self) {
        self.readiness.startup_complete();
    }

    /// Records the outcome of a reconcile (the first, and every hot reload).
    pub fn record_reconcile(&self, report: &ReconcileReport) {
        self.readiness.record_reconcile(report);
    }

    /// The tenants configured now (`informant.toml`), the only ones a caller is authorized on
    /// by name.
    pub fn tenants(&self) -> Vec<String> {
        self.host
            .as_ref()
            .map(|h| h.config().tenancy.tenants.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The running plugins (none without a plugin host).
    pub(crate) fn plugins(&self) -> Vec<RunningPlugin> {
        self.host.as_ref().map(|h| h.running()).unwrap_or_default()
    }
}
