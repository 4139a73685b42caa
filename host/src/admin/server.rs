//! The admin listener and its routes.
//!
//! | route | answer |
//! |---|---|
//! | `GET /healthz` | 200 `ok` while the process serves requests |
//! | `GET /readyz` | 200 `ok`, or 503 with one line per reason (see [`super::readiness`]) |
//! | `GET /metrics` | OpenMetrics text (see [`super::metrics`]) |
//! | `GET /plugins` | JSON `{"plugins": [...]}`, one [`PluginReport`] per loaded plugin |

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::{AdminState, Error, Result, metrics, readiness};
use crate::plugin::PluginState;

/// A running admin server; stops when [`shutdown`](Self::shutdown) is called or it is dropped.
pub struct AdminServer {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl AdminServer {
    /// Binds `addr` (port 0 picks a free one) and serves the admin routes over `state`.
    pub async fn start(addr: SocketAddr, state: Arc<AdminState>) -> Result<AdminServer> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| Error::Bind { addr, source })?;
        let bound = listener
            .local_addr()
            .map_err(|source| Error::Bind { addr, source })?;
        let (stop, stopped) = oneshot::channel::<()>();
        let app = router(state);
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "admin server stopped");
            }
        });
        tracing::info!(addr = %bound, "admin server: /metrics /healthz /readyz /plugins");
        Ok(AdminServer {
            addr: bound,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting connections and waits for requests in flight to finish.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The admin routes over `state`, for embedding in another server.
pub fn router(state: Arc<AdminState>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .route("/plugins", get(plugins))
        .with_state(state)
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<Arc<AdminState>>) -> Response {
    let reasons = readiness::check(&state).await;
    if reasons.is_empty() {
        return (StatusCode::OK, "ok\n").into_response();
    }
    let mut body = String::from("not ready:\n");
    for r in reasons {
        body.push_str("- ");
        body.push_str(&r);
        body.push('\n');
    }
    (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
}

async fn metrics_text(State(state): State<Arc<AdminState>>) -> Response {
    match metrics::render(&state).await {
        Ok(text) => ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text).into_response(),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "encoding the metrics failed\n",
        )
            .into_response(),
    }
}

/// One loaded plugin in `/plugins`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PluginReport {
    /// Name (the file stem).
    pub name: String,
    /// Tenant (the subdirectory; empty for the operator's plugins).
    pub tenant: String,
    /// sha256 of the running version's wasm.
    pub version: String,
    /// `running`, `backing-off` or `quarantined`.
    pub state: PluginState,
    /// Events handled successfully by this version.
    pub handled: u64,
    /// Events this version failed.
    pub failed: u64,
    /// Events queued for it across its informers (after coalescing).
    pub backlog: u64,
    /// The most recent failure.
    pub last_error: Option<String>,
}

async fn plugins(State(state): State<Arc<AdminState>>) -> Json<serde_json::Value> {
    let (tracked, fresh) = state.plugins().await;
    let mut backlog = std::collections::HashMap::<String, u64>::new();
    for i in state.factory().informers() {
        for h in i.handler_stats() {
            *backlog.entry(h.name).or_default() += h.backlog as u64;
        }
    }
    let list: Vec<PluginReport> = tracked
        .iter()
        .map(|t| {
            let s = &t.supervisor;
            PluginReport {
                name: t.id.name.clone(),
                tenant: t.id.tenant.clone(),
                version: s.version().to_string(),
                state: s.state(),
                handled: s.handled(),
                failed: s.failed(),
                backlog: backlog.get(&t.id.to_string()).copied().unwrap_or(0),
                last_error: s.last_error(),
            }
        })
        .collect();
    Json(serde_json::json!({ "plugins": list, "fresh": fresh }))
}
