//! When to retry waiting plugins (see [`crate::plugin::load::waiting`]): on an exponential backoff with
//! jitter, and as soon as the cluster's CustomResourceDefinitions change — a CRD added is the
//! usual end of a wait, and the CRD watch's first complete list after an outage says the API
//! server answers again.
//!
//! The CRD watch runs only while some plugin waits and reads metadata only (a real API server
//! then sends no CRD schemas). It needs `list` and `watch` on
//! `customresourcedefinitions.apiextensions.k8s.io`; refused those, it says so once and retries
//! go on on the backoff alone. Aggregated APIs (APIServices) coming up are found by the backoff.

use std::future::pending;
use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch_stream};
use tokio::time::Instant;

use crate::backoff::Backoff;
use crate::fswatch::DEBOUNCE;

/// The first retry's delay; each retry that finds the plugin still waiting doubles it.
pub(crate) const FIRST_RETRY: Duration = Duration::from_secs(1);

/// The longest delay between retries.
pub(crate) const MAX_RETRY: Duration = Duration::from_secs(30);

/// When waiting plugins are tried again: from [`FIRST_RETRY`] to [`MAX_RETRY`].
pub(crate) const BACKOFF: Backoff = Backoff::new(FIRST_RETRY, MAX_RETRY);

/// The delay before retry number `attempt` (0-based), by [`BACKOFF`].
pub(crate) fn backoff(attempt: u32) -> Duration {
    BACKOFF.delay(attempt)
}

/// The retry schedule of a [`crate::plugin::load::reload::Reloader`]: a timer and a CRD watch, both idle while
/// nothing waits.
pub(crate) struct RetryPlan {
    client: kube::Client,
    attempt: u32,
    due: Option<Instant>,
    crds: Option<CrdChanges>,
}

impl RetryPlan {
    /// A plan whose CRD watch, when it runs, uses `client`.
    pub(crate) fn new(client: kube::Client) -> Self {
        RetryPlan {
            client,
            attempt: 0,
            due: None,
            crds: None,
        }
    }

    /// Brings the plan in line with whether some plugin waits: schedules the next retry if
    /// none is, and runs the CRD watch; forgets both (and the backoff) once nothing waits.
    pub(crate) fn update(&mut self, waiting: bool) {
        if !waiting {
            *self = RetryPlan::new(self.client.clone());
            return;
        }
        if self.due.is_none() {
            self.due = Some(Instant::now() + backoff(self.attempt));
            self.attempt = self.attempt.saturating_add(1);
        }
        if self.crds.is_none() {
            self.crds = Some(CrdChanges::start(self.client.clone()));
        }
    }

    /// Resolves when a retry is due (its time came, or the CRDs changed); never while nothing
    /// waits. Cancel-safe: a change seen by a cancelled call makes the next call resolve.
    pub(crate) async fn due(&mut self) {
        let (at, crds) = (self.due, &mut self.crds);
        let timer = async {
            match at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => pending().await,
            }
        };
        let crds = async {
            match crds {
                Some(c) => c.changed().await,
                None => pending().await,
            }
        };
        tokio::select! {
            () = timer => {}
            () = crds => {}
        }
        self.due = None;
    }
}

type CrdEvents = Pin<
    Box<
        dyn Stream<Item = watcher::Result<Event<PartialObjectMeta<CustomResourceDefinition>>>>
            + Send,
    >,
>;

/// Changes to the cluster's CRDs, debounced.
struct CrdChanges {
    /// `None` once the watch was refused: nothing to wait for there.
    events: Option<CrdEvents>,
    /// A change seen and not yet reported (kept across cancellations).
    seen: bool,
}

impl CrdChanges {
    fn start(client: kube::Client) -> Self {
        let api: Api<PartialObjectMeta<CustomResourceDefinition>> = Api::all(client);
        // The watcher's own backoff paces its reconnects while the API server is away.
        let events = watch_stream(api, watcher::Config::default()).default_backoff();
        CrdChanges {
            events: Some(Box::pin(events)),
            seen: false,
        }
    }

    /// Resolves once a CRD was added, changed or deleted, or the watch (re)listed, and no
    /// further change came for [`DEBOUNCE`]; never once the watch was refused.
    async fn changed(&mut self) {
        loop {
            let Some(events) = &mut self.events else {
                return pending().await;
            };
            let next = if self.seen {
                match tokio::time::timeout(DEBOUNCE, events.next()).await {
                    Ok(next) => next,
                    Err(_) => {
                        self.seen = false;
                        return;
                    }
                }
            } else {
                events.next().await
            };
            match next {
                Some(Ok(Event::Apply(_) | Event::Delete(_) | Event::InitDone)) => self.seen = true,
                Some(Ok(Event::Init | Event::InitApply(_))) => {}
                Some(Err(e)) if refused(&e) => {
                    tracing::warn!(error = %e, "cannot watch CustomResourceDefinitions (grant `list` and `watch` on customresourcedefinitions.apiextensions.k8s.io); waiting plugins are retried on a backoff only");
                    self.events = None;
                }
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "CRD watch failed; it reconnects with backoff")
                }
                None => self.events = None,
            }
        }
    }
}

/// Whether the API server refused us the CRD watch (rather than failing to answer).
fn refused(e: &watcher::Error) -> bool {
    let code = match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => s.code,
        watcher::Error::WatchError(s) => s.code,
        _ => return false,
    };
    matches!(code, 401 | 403)
}
