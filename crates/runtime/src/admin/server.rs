//! The admin listener and its routes.
//!
//! | route | answer |
//! |---|---|
//! | `GET /healthz` | 200 `ok` while the process serves requests |
//! | `GET /readyz` | 200 `ok` (then a line per plugin waiting for a kind), or 503 with one line per reason (see [`super::readiness`]) |
//! | `GET /metrics` | OpenMetrics text (see [`super::metrics`]) |
//! | `GET /plugins` | JSON `{"plugins": [...]}`, one [`PluginStatus`](crate::plugin::PluginStatus) per running or waiting plugin; in sharded mode also `"shard"`: the group, this member's identity, whether it is active and why not, the live members and the plugins it owns |
//! | `GET /logs?plugin=NAME[&tenant=T][&follow=1][&tail=N]` | one plugin's last log lines as JSON lines, followed if asked (see [`super::logs`]); `404` for a plugin neither loaded nor waiting |
//! | `GET /dead-letters[?plugin=P]`, `POST /dead-letters/retry`, `POST /dead-letters/drop` | the events plugins failed for good, with `--state-dir` (see [`super::dead_letters`]) |

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use super::{AdminState, Error, Result, dead_letters, logs, metrics, readiness};

/// A running admin server; stops when [`shutdown`](Self::shutdown) is called or it is dropped.
pub struct AdminServer {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    /// Ends the `/logs` follows, which would otherwise hold a graceful shutdown forever.
    stopping: watch::Sender<bool>,
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
        let stopping = watch::channel(false).0;
        let app = routes(state, logs::Stopping(Some(stopping.subscribe())));
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "admin server stopped");
            }
        });
        tracing::info!(addr = %bound, "admin server: /metrics /healthz /readyz /plugins /logs /dead-letters");
        Ok(AdminServer {
            addr: bound,
            stop: Some(stop),
            stopping,
            task: Some(task),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting connections and waits for requests in flight to finish.
    pub async fn shutdown(mut self) {
        self.stopping.send_replace(true);
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

/// The admin routes over `state`, for embedding in another server (its `/logs` follows end
/// only when their plugin goes).
pub fn router(state: Arc<AdminState>) -> Router {
    routes(state, logs::Stopping(None))
}

fn routes(state: Arc<AdminState>, stopping: logs::Stopping) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .route("/plugins", get(plugins))
        .route("/logs", get(logs::logs))
        .route("/dead-letters", get(dead_letters::list))
        .route("/dead-letters/retry", post(dead_letters::retry))
        .route("/dead-letters/drop", post(dead_letters::drop_letters))
        .layer(Extension(stopping))
        .with_state(state)
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<Arc<AdminState>>) -> Response {
    let reasons = readiness::check(&state);
    if reasons.is_empty() {
        let mut body = String::from("ok\n");
        let notes = readiness::notes(&state);
        if !notes.is_empty() {
            body.push_str("waiting (not blocking readiness):\n");
            for n in notes {
                body.push_str("- ");
                body.push_str(&n);
                body.push('\n');
            }
        }
        return (StatusCode::OK, body).into_response();
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
    // Every caller sees everything until authentication decides a scope per request.
    match metrics::render(&state, &super::scope::Scope::Everything) {
        Ok(text) => ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text).into_response(),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "encoding the metrics failed\n",
        )
            .into_response(),
    }
}

async fn plugins(State(state): State<Arc<AdminState>>) -> Json<serde_json::Value> {
    let mut list = state.host().map(|h| h.status()).unwrap_or_default();
    if let Some(h) = state.host() {
        list.extend(h.refused());
        list.sort_by(|a, b| (&a.tenant, &a.name).cmp(&(&b.tenant, &b.name)));
    }
    match state.host().and_then(|h| h.shard()) {
        Some(shard) => Json(serde_json::json!({
            "plugins": list,
            "shard": super::shard::ShardSample::json(shard),
        })),
        None => Json(serde_json::json!({ "plugins": list })),
    }
}
