//! `GET /logs`: one plugin's last log lines, and with `follow=1` the lines as they come, as
//! newline-delimited JSON (what `informant logs` reads).
//!
//! Query parameters: `plugin` (its name, required), `tenant` (its tenant; empty or left out
//! for a top-level plugin), `follow` (`1` or `true`: keep the response open and send lines as
//! they are logged), `tail` (only the last N lines kept).
//!
//! Each line of the answer is a JSON object: `{"seq", "time", "level", "message"}` for a line the
//! plugin logged, or `{"dropped": N}` for N lines logged before the next one and lost (the
//! plugin's log ring keeps its last lines only, and a follower that does not keep up loses the
//! oldest; see [`crate::plugin::logbook`]).
//!
//! Contract:
//! - A request names one plugin by exact tenant and name: nothing is decoded or resolved beyond
//!   the query string's own escapes, so `tenant=team-a&plugin=../team-b/p` names a plugin
//!   called `../team-b/p` of `team-a`, which does not exist. A plugin that is neither loaded nor
//!   waiting to load is `404` with a line saying which was asked for, and so is a plugin of a
//!   tenant the caller may not read (see [`super::auth`]): the answer is the same byte for byte,
//!   so it tells nothing of whether the plugin exists.
//! - A follower never slows a plugin: it reads the plugin's log ring at its own pace, and what
//!   it is too slow for is dropped and counted. What following costs the host is bounded
//!   whatever the number of followers: each is sent a batch at most every
//!   [`FOLLOW_INTERVAL`], and all of them together at most [`FOLLOW_KIB_PER_SECOND`]; a
//!   follower held back falls behind, and the lines it then misses are dropped and counted.
//! - A follow ends when its plugin is removed or the admin server shuts down.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::watch;
use tokio::time::Instant;

use super::AdminState;
use super::auth::Access;
use crate::plugin::id::PluginId;
use crate::plugin::logbook::LogLines;
use crate::plugin::text::escape_controls;

/// The answer's media type.
pub(crate) const CONTENT_TYPE: &str = "application/x-ndjson";

/// Shortest time between two batches sent to one follower: lines logged meanwhile go in one.
pub(crate) const FOLLOW_INTERVAL: Duration = Duration::from_millis(100);

/// What all followers of one admin server are sent together, at most, in KiB per second.
pub(crate) const FOLLOW_KIB_PER_SECOND: u32 = 8 << 10;

/// The admin server's budget for followers (see [`FOLLOW_KIB_PER_SECOND`]).
pub(super) fn follow_budget() -> governor::DefaultDirectRateLimiter {
    let kib = NonZeroU32::new(FOLLOW_KIB_PER_SECOND).unwrap_or(NonZeroU32::MIN);
    governor::RateLimiter::direct(governor::Quota::per_second(kib))
}

/// The query of `GET /logs`.
#[derive(Debug, serde::Deserialize)]
pub(super) struct LogsQuery {
    plugin: Option<String>,
    #[serde(default)]
    tenant: String,
    #[serde(default)]
    follow: Option<String>,
    tail: Option<usize>,
}

/// Tells follows the server is shutting down: `true` once it is (`None`: never, for a router
/// embedded elsewhere).
#[derive(Clone)]
pub(super) struct Stopping(pub(super) Option<watch::Receiver<bool>>);

pub(super) async fn logs(
    State(state): State<Arc<AdminState>>,
    Extension(stopping): Extension<Stopping>,
    access: Access,
    Query(q): Query<LogsQuery>,
) -> Response {
    let scope = match access.read(&state).await {
        Ok(scope) => scope,
        Err(r) => return r.into_response(),
    };
    let Some(name) = q.plugin else {
        return (
            StatusCode::BAD_REQUEST,
            "`plugin` is required: /logs?plugin=NAME[&tenant=TENANT][&follow=1][&tail=N]\n",
        )
            .into_response();
    };
    let follow = match q.follow.as_deref() {
        None | Some("0" | "false" | "") => false,
        Some("1" | "true") => true,
        Some(other) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("`follow` is 1 or 0, not `{}`\n", escape_controls(other)),
            )
                .into_response();
        }
    };
    let id = PluginId {
        tenant: q.tenant,
        name,
    };
    let visible = scope.sees_tenant(&id.tenant);
    let Some(ring) = state
        .host()
        .filter(|_| visible)
        .and_then(|h| h.log_ring(&id))
    else {
        return (StatusCode::NOT_FOUND, not_found(&id)).into_response();
    };
    if !follow {
        let body = ndjson(&ring.snapshot(q.tail));
        return ([(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response();
    }
    let follower = ring.follow(q.tail);
    let next = Instant::now();
    let stream = futures::stream::unfold(
        (follower, stopping.0, next, state),
        |(mut follower, mut stopping, next, state)| async move {
            let paced = async {
                tokio::time::sleep_until(next).await;
                let batch = follower.next().await?;
                let chunk = ndjson(&batch);
                let kib = u32::try_from(chunk.len().div_ceil(1024)).unwrap_or(u32::MAX);
                if let Some(kib) = NonZeroU32::new(kib) {
                    // A batch is at most a few hundred KiB, well within a second's budget.
                    let _ = state.follow_budget.until_n_ready(kib).await;
                }
                Some(chunk)
            };
            let chunk = match stopping.as_mut() {
                Some(stop) => tokio::select! {
                    c = paced => c,
                    _ = stop.wait_for(|s| *s) => None,
                },
                None => paced.await,
            }?;
            let next = Instant::now() + FOLLOW_INTERVAL;
            Some((
                Ok::<_, std::convert::Infallible>(chunk),
                (follower, stopping, next, state),
            ))
        },
    );
    (
        [(header::CONTENT_TYPE, CONTENT_TYPE)],
        Body::from_stream(stream),
    )
        .into_response()
}

/// What a `404` says: which plugin was asked for, on one line whatever the names hold.
fn not_found(id: &PluginId) -> String {
    let name = escape_controls(&id.name);
    if id.tenant.is_empty() {
        format!("no top-level plugin `{name}` is loaded or waiting (see /plugins)\n")
    } else {
        let tenant = escape_controls(&id.tenant);
        format!("no plugin `{name}` of tenant `{tenant}` is loaded or waiting (see /plugins)\n")
    }
}

/// A batch as lines of JSON: the drop count first, if any. Each record is serialized once for
/// every reader (see [`LogRecord::json_line`](crate::plugin::logbook::LogRecord::json_line)).
fn ndjson(batch: &LogLines) -> Bytes {
    let lines: Vec<Bytes> = batch.records.iter().map(|r| r.json_line()).collect();
    let mut out = bytes::BytesMut::with_capacity(lines.iter().map(Bytes::len).sum::<usize>() + 24);
    if batch.dropped > 0 {
        out.extend_from_slice(format!("{{\"dropped\":{}}}\n", batch.dropped).as_bytes());
    }
    for line in lines {
        out.extend_from_slice(&line);
    }
    out.freeze()
}
