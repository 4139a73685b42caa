//! The admin listeners and their routes.
//!
//! | route | answer |
//! |---|---|
//! | `GET /healthz` | 200 `ok` while the process serves requests; never asks for credentials |
//! | `GET /readyz` | 200 `ok` (then a line per plugin waiting for a kind), or 503 with one line per reason (see [`super::readiness`]); the lines the caller may see |
//! | `GET /metrics` | OpenMetrics text (see [`super::metrics`]) |
//! | `GET /plugins` | JSON `{"plugins": [...]}`, one [`PluginStatus`](crate::plugin::load::status::PluginStatus) per running or waiting plugin the caller may see; in sharded mode, for the operator, also `"shard"`: the group, this member's identity, whether it is active and why not, the live members and the plugins it owns |
//! | `GET /logs?plugin=NAME[&tenant=T][&follow=1][&tail=N]` | one plugin's last log lines as JSON lines, followed if asked (see [`super::logs`]); `404` for a plugin neither loaded nor waiting, or not the caller's |
//! | `GET /dead-letters[?plugin=P][&limit=N][&continue=T]`, `POST /dead-letters/retry`, `POST /dead-letters/drop` | the events plugins failed for good, with `--state-dir` (see [`super::dead_letters`]) |
//! | `POST /sources/poll` | a plugin source checked now, its status once the check is done (see [`super::sources`]) |
//!
//! Everything but `/healthz` passes the [`Gate`] first (see [`super::auth`]): a bearer token
//! checked with the API server, or nothing at all for an admin server without authentication,
//! which listens on a loopback address only ([`AdminServer::start_with`] refuses any other).
//!
//! The probe listener ([`AdminServer::start_probes`], `--health-addr`) serves `/healthz` and a
//! `/readyz` that shows counts only, over plain HTTP without credentials: what kubelet probes
//! need, and nothing a tenant would not want anyone on the network to read.
//!
//! Connections are served by the host's own accept loop ([`crate::serve`]), so that HTTPS
//! (see [`crate::tls`]) and plain HTTP share it, with its handshake and header timeouts.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use tokio::sync::watch;

use super::auth::{self, Access, AdminAuth, Gate};
use super::scope::Scope;
use super::{AdminState, Error, Result, dead_letters, logs, metrics, readiness};
use crate::serve::Served;
use crate::tls::{self, ServerTls, Tls};

/// A running admin (or probe) listener; stops when [`shutdown`](Self::shutdown) is called or
/// it is dropped.
pub struct AdminServer {
    served: Served,
    /// Ends the `/logs` follows, which would otherwise hold a graceful shutdown forever.
    stopping: watch::Sender<bool>,
}

impl AdminServer {
    /// Binds `addr` (port 0 picks a free one) and serves the admin routes over `state`, plain
    /// HTTP without authentication: `addr` must be a loopback address.
    pub async fn start(addr: SocketAddr, state: Arc<AdminState>) -> Result<AdminServer> {
        AdminServer::start_with(addr, state, &AdminAuth::None, &ServerTls::Plain).await
    }

    /// Binds `addr` and serves the admin routes over `state`, authenticating callers as `auth`
    /// says (through the API server of `state`'s informers) over `tls`.
    /// Off loopback, [`AdminAuth::None`] and tokens over plain HTTP are refused
    /// ([`super::check_exposure`]).
    pub async fn start_with(
        addr: SocketAddr,
        state: Arc<AdminState>,
        auth: &AdminAuth,
        tls: &ServerTls,
    ) -> Result<AdminServer> {
        super::check_exposure(addr, auth, tls)?;
        let gate = Arc::new(Gate::new(auth, state.factory().client()));
        let names = (!addr.ip().is_unspecified())
            .then(|| addr.ip().to_string())
            .into_iter()
            .collect::<Vec<_>>();
        let tls = tls::setup(tls, &names)?;
        let https = tls.is_some();
        let stopping = watch::channel(false).0;
        let app = routes(
            state,
            gate.clone(),
            logs::Stopping(Some(stopping.subscribe())),
        );
        let server = AdminServer::serve(addr, app, tls, stopping).await?;
        let (scheme, auth) = match (https, gate.is_open()) {
            (true, true) => ("https", "none"),
            (true, false) => ("https", "kubernetes"),
            (false, true) => ("http", "none"),
            (false, false) => ("http", "kubernetes"),
        };
        tracing::info!(addr = %server.addr(), scheme, auth, "admin server: /metrics /healthz /readyz /plugins /logs /dead-letters");
        Ok(server)
    }

    /// Binds `addr` and serves the probes over `state`: `/healthz`, and a `/readyz` that shows
    /// only counts, plain HTTP without credentials (what kubelet's probes need).
    pub async fn start_probes(addr: SocketAddr, state: Arc<AdminState>) -> Result<AdminServer> {
        let app = Router::new()
            .route("/healthz", get(healthz))
            .route("/readyz", get(probe_readyz))
            .with_state(state);
        let server = AdminServer::serve(addr, app, None, watch::channel(false).0).await?;
        tracing::info!(addr = %server.addr(), "probes: /healthz /readyz");
        Ok(server)
    }

    async fn serve(
        addr: SocketAddr,
        app: Router,
        tls: Option<Tls>,
        stopping: watch::Sender<bool>,
    ) -> Result<AdminServer> {
        let served = Served::bind(addr, app, tls, "admin")
            .await
            .map_err(|source| Error::Bind { addr, source })?;
        Ok(AdminServer { served, stopping })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.served.addr()
    }

    /// Stops accepting connections and waits (a bounded time) for requests in flight to
    /// finish.
    pub async fn shutdown(self) {
        self.stopping.send_replace(true);
        self.served.shutdown().await;
    }
}

fn routes(state: Arc<AdminState>, gate: Arc<Gate>, stopping: logs::Stopping) -> Router {
    let guarded = Router::new()
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .route("/plugins", get(plugins))
        .route("/logs", get(logs::logs))
        .route("/dead-letters", get(dead_letters::list))
        .route("/dead-letters/retry", post(dead_letters::retry))
        .route("/dead-letters/drop", post(dead_letters::drop_letters))
        .route("/sources/poll", post(super::sources::poll))
        .route_layer(axum::middleware::from_fn(auth::authenticate));
    Router::new()
        .route("/healthz", get(healthz))
        .merge(guarded)
        .layer(Extension(stopping))
        .layer(Extension(gate))
        .with_state(state)
}

async fn healthz() -> &'static str {
    "ok\n"
}

fn readiness_response(state: &AdminState, scope: &Scope) -> Response {
    let (ready, body) = readiness::report(state, scope);
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, body).into_response()
}

async fn readyz(State(state): State<Arc<AdminState>>, access: Access) -> Response {
    match access.read(&state).await {
        Ok(scope) => readiness_response(&state, &scope),
        Err(r) => r.into_response(),
    }
}

/// The probe listener's `/readyz`: counts, no names.
async fn probe_readyz(State(state): State<Arc<AdminState>>) -> Response {
    readiness_response(&state, &Scope::Tenants(Default::default()))
}

async fn metrics_text(State(state): State<Arc<AdminState>>, access: Access) -> Response {
    let scope = match access.metrics(&state).await {
        Ok(scope) => scope,
        Err(r) => return r.into_response(),
    };
    match metrics::render(&state, &scope) {
        Ok(text) => ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text).into_response(),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "encoding the metrics failed\n",
        )
            .into_response(),
    }
}

async fn plugins(State(state): State<Arc<AdminState>>, access: Access) -> Response {
    let scope = match access.read(&state).await {
        Ok(scope) => scope,
        Err(r) => return r.into_response(),
    };
    let mut list = state.host().map(|h| h.status()).unwrap_or_default();
    if let Some(h) = state.host() {
        list.extend(h.refused());
        list.sort_by(|a, b| (&a.tenant, &a.name).cmp(&(&b.tenant, &b.name)));
    }
    list.retain(|p| scope.sees_tenant(&p.tenant));
    let shard = state
        .host()
        .and_then(|h| h.shard())
        .filter(|_| scope.sees_host());
    match shard {
        Some(shard) => Json(serde_json::json!({
            "plugins": list,
            "shard": super::shard::ShardSample::json(shard),
        }))
        .into_response(),
        None => Json(serde_json::json!({ "plugins": list })).into_response(),
    }
}
