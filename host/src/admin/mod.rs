//! The admin HTTP server: `/metrics` (OpenMetrics text, which Prometheus scrapes), `/healthz`,
//! `/readyz` and `/plugins` (JSON).
//!
//! It sits on top of the other layers and only reads them: the informers through
//! [`InformerFactory::informers`] (sync state, reflector and listener counters), the plugins
//! through [`PluginHost`] (which plugins are loaded, and each one's [`Supervisor`] counters).
//! Nothing below knows it exists; every figure is read at request time from counters the
//! pipeline keeps anyway, so serving the endpoints costs the pipeline nothing between scrapes.
//!
//! Contract:
//! - No endpoint waits on a reconcile: the plugin host holds its lock while it loads plugins, so
//!   the admin keeps the supervisors it saw last and asks again with a short timeout
//!   ([`HOST_TIMEOUT`]); `/readyz` reports a host that does not answer in time as busy.
//! - Counters are per plugin *version*: a hot swap starts the new version's counters at zero,
//!   which Prometheus treats as a counter reset.
//! - Readiness needs what only the runtime knows (that startup is over, what the last reconcile
//!   refused); it tells [`AdminState`] through [`AdminState::startup_complete`] and
//!   [`AdminState::record_reconcile`].
//!
//! - [`metrics`]: the scrape-time collector and the metric names.
//! - [`readiness`]: what `/readyz` checks.
//! - [`server`]: the axum routes and the listener.

pub mod metrics;
pub mod readiness;
pub mod server;

pub use readiness::Readiness;
pub use server::AdminServer;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::informer::InformerFactory;
use crate::plugin::{PluginHost, PluginId, ReconcileReport, Supervisor};

/// How long an endpoint waits for the plugin host before using what it saw last.
pub const HOST_TIMEOUT: Duration = Duration::from_millis(200);

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
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A loaded plugin as the admin last saw it.
#[derive(Clone)]
pub(crate) struct Tracked {
    pub(crate) id: PluginId,
    pub(crate) supervisor: Arc<Supervisor>,
}

/// What the admin endpoints read: the informers, the plugins, and readiness facts.
pub struct AdminState {
    factory: Arc<InformerFactory>,
    host: Option<Arc<PluginHost>>,
    readiness: Readiness,
    seen: Mutex<Vec<Tracked>>,
}

impl AdminState {
    /// State over a factory and, when plugins are in use, their host.
    pub fn new(factory: Arc<InformerFactory>, host: Option<Arc<PluginHost>>) -> Arc<Self> {
        Arc::new(AdminState {
            factory,
            host,
            readiness: Readiness::default(),
            seen: Mutex::new(Vec::new()),
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

    /// The loaded plugins: asked afresh from the host, or as last seen when it is busy
    /// (`fresh` false).
    pub(crate) async fn plugins(&self) -> (Vec<Tracked>, bool) {
        let Some(host) = &self.host else {
            return (Vec::new(), true);
        };
        let ask = async {
            let mut out = Vec::new();
            for s in host.status().await {
                let id = PluginId {
                    tenant: s.tenant,
                    name: s.name,
                };
                // A plugin removed between the two calls is simply left out.
                if let Some(supervisor) = host.supervisor(&id).await {
                    out.push(Tracked { id, supervisor });
                }
            }
            out
        };
        match tokio::time::timeout(HOST_TIMEOUT, ask).await {
            Ok(fresh) => {
                *self.seen.lock() = fresh.clone();
                (fresh, true)
            }
            Err(_) => (self.seen.lock().clone(), false),
        }
    }
}
