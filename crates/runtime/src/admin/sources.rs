//! `POST /sources/poll`: a plugin source checked now, as `informant poll` asks (see
//! [`crate::sources`]).
//!
//! - The body is `{"plugin": "tenant/name"}` (`name` for a top-level plugin); a malformed one is
//!   `400` before anything else is looked at.
//! - The caller needs `update` on the plugin's tenant, as for its dead letters (`403`).
//! - `404` when no source writes that plugin here, `503` while sources are not followed yet.
//! - The answer waits for the check: its tag resolved, and a new digest pulled, verified and
//!   written. It is the source's status afterwards, its `error` saying why a check failed.
//!   A check that does not end within [`WAIT`] is `504`; it goes on, and `/plugins` shows it.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};

use super::AdminState;
use super::auth::Access;
use crate::plugin::id::PluginId;
use crate::plugin::text::escape_controls;

/// How long the answer waits for the check: a resolve, a pull and a verification, each bounded
/// by the registry client's timeouts.
pub(crate) const WAIT: Duration = Duration::from_secs(120);

/// The body of `POST /sources/poll`.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct PollRequest {
    /// The plugin the source writes: `tenant/name`, or `name` for a top-level plugin.
    pub plugin: String,
}

pub(super) async fn poll(
    State(state): State<Arc<AdminState>>,
    access: Access,
    body: Bytes,
) -> Response {
    let refuse = |status: StatusCode, why: String| (status, format!("{why}\n")).into_response();
    let asked: PollRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!(
                    "expected {{\"plugin\": \"tenant/name\"}}: {}",
                    escape_controls(&e.to_string())
                ),
            );
        }
    };
    let id = match asked.plugin.split_once('/') {
        Some((tenant, name)) => PluginId {
            tenant: tenant.to_string(),
            name: name.to_string(),
        },
        None => PluginId {
            tenant: String::new(),
            name: asked.plugin.clone(),
        },
    };
    if let Err(r) = access.update(&state, &id.tenant, "plugin sources").await {
        return r.into_response();
    }
    let Some(polls) = state.sources() else {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "plugin sources are not followed here (yet): no `[[sources]]`, or the host is starting"
                .into(),
        );
    };
    match tokio::time::timeout(WAIT, polls.poll(&id)).await {
        Ok(Some(status)) => Json(status).into_response(),
        Ok(None) => refuse(
            StatusCode::NOT_FOUND,
            format!(
                "no source writes plugin `{}` here",
                escape_controls(&id.to_string())
            ),
        ),
        Err(_) => refuse(
            StatusCode::GATEWAY_TIMEOUT,
            format!(
                "the check of `{}` took over {} s; it goes on: see `informant status`",
                escape_controls(&id.to_string()),
                WAIT.as_secs()
            ),
        ),
    }
}
