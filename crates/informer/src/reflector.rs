//! The reflector: kube-runtime's `watcher` (list, then watch from the list's resourceVersion;
//! bookmarks; relist on 410 Gone; backoff with jitter) reshaped into store deltas.
//!
//! The watcher's `Init, InitApply.., InitDone` run becomes `ListBegin, ListItem.., ListEnd`: the
//! store freezes each listed object as it arrives and, at the end, diffs the list against what
//! it holds (a Replace): that is where deletes missed during an outage surface.
//!
//! Retries are paced here, not by kube-runtime's `StreamBackoff`: the watcher yields `Init`
//! before it lists, and a backoff reset on every item would reset on that `Init`, so a list
//! that always fails would be retried every 800 ms for ever. Only progress (an object, a
//! list's end) resets the pace. A refusal (403) is a state, not a fault: the informer reports
//! it ([`Access::Forbidden`]), logs it once, and asks again no sooner than
//! [`FORBIDDEN_RETRY`] — RBAC changes when someone changes it, not in a second.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use futures::{Stream, StreamExt};
use kube::api::{Api, WatchEvent, WatchParams};
use kube::runtime::watcher::{self, Event as WatcherEvent};
use tokio::sync::watch;

use super::object::RawObject;

/// A change for the store to apply.
#[derive(Debug)]
pub enum Delta {
    /// An object was added or modified.
    Apply(RawObject),
    /// An object was deleted; this is its final state.
    Delete(RawObject),
    /// A complete list (initial, or a relist after 410 Gone or a restart), all at once.
    Replace(Vec<RawObject>),
    /// A list begins: the objects up to [`Delta::ListEnd`] are a complete list, applied as a
    /// Replace when it ends. A list begun again before its end starts over.
    ListBegin,
    /// One object of the list in progress.
    ListItem(RawObject),
    /// The list in progress is complete.
    ListEnd,
    /// A watch resumed from a restored cache's resourceVersion was accepted: the cache is as
    /// current as a fresh list would make it, once the events that follow are applied.
    Resumed,
}

/// How the initial list (and every relist) is fetched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum InitialList {
    /// Probe the server once and stream if it supports watch-list, else page.
    #[default]
    Auto,
    /// `watch?sendInitialEvents=true`: no big list response held in memory anywhere.
    Streaming,
    /// Paginated list, then watch.
    Paginated,
}

/// What to list and watch, and how.
#[derive(Debug, Clone, Default)]
pub struct ReflectorConfig {
    /// Server-side label selector, passed through verbatim (validated by the caller).
    pub label_selector: Option<String>,
    /// Server-side field selector.
    pub field_selector: Option<String>,
    /// Initial list strategy.
    pub initial_list: InitialList,
    /// Page size for paginated lists (default: kube-runtime's 500).
    pub page_size: Option<u32>,
}

/// Counters a reflector keeps while it runs; cheap to read at any time.
#[derive(Debug, Default)]
pub struct ReflectorStats {
    /// Watch events and listed objects received.
    pub objects_received: AtomicU64,
    /// Complete lists applied (the first one included).
    pub lists: AtomicU64,
    /// Errors from list or watch (each followed by a backoff and a retry).
    pub errors: AtomicU64,
    /// Times the server answered 410 Gone, forcing a relist.
    pub gone: AtomicU64,
    /// Times the server refused the list or watch (403).
    pub forbidden: AtomicU64,
    /// Whether lists are streamed (watch-list) rather than paginated; decided at start.
    pub streaming_lists: AtomicBool,
}

impl ReflectorStats {
    fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Asks the server whether it serves streaming lists, with a watch that matches nothing.
///
/// Servers without watch-list reject `sendInitialEvents` (422) or ignore it and never send the
/// initial-events-end bookmark; either way we fall back to paginated lists.
pub async fn supports_streaming_lists(api: &Api<RawObject>) -> bool {
    let params = WatchParams::streaming_lists()
        .labels("informant.dev/streaming-list-probe=nothing-matches-this")
        .timeout(5);
    let probe = async {
        let mut stream = api.watch(&params, "").await.ok()?.boxed();
        match stream.next().await? {
            Ok(WatchEvent::Bookmark(b)) => Some(
                b.metadata
                    .annotations
                    .get("k8s.io/initial-events-end")
                    .is_some_and(|v| v == "true"),
            ),
            _ => Some(false),
        }
    };
    tokio::time::timeout(Duration::from_secs(10), probe)
        .await
        .ok()
        .flatten()
        .unwrap_or(false)
}

/// Log targets whose warnings repeat, once per attempt, what the reflector reports once per
/// change of state (kube-runtime's watcher warns on every 403): a subscriber should show them
/// at `error` only, unless its user asks for them by name.
pub const QUIETED_TARGETS: &[&str] = &["kube_runtime::watcher"];

/// The first wait after the server refuses a list or watch (403); later refusals double it up
/// to [`FORBIDDEN_RETRY_MAX`].
pub const FORBIDDEN_RETRY: Duration = Duration::from_secs(30);
/// The longest wait between two attempts while refused.
pub const FORBIDDEN_RETRY_MAX: Duration = Duration::from_secs(300);
/// The first wait after any other failure; doubled up to [`RETRY_MAX`] (kube-runtime's pace).
const RETRY_FIRST: Duration = Duration::from_millis(800);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// Whether the server lets the informer's identity list and watch what it watches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Access {
    /// Not refused (or not asked yet).
    #[default]
    Allowed,
    /// The last list or watch was refused with 403; retried every [`FORBIDDEN_RETRY`] or more.
    Forbidden {
        /// The server's message (`configmaps is forbidden: User ... cannot list ...`).
        reason: String,
        /// When the refusals began.
        since: SystemTime,
    },
}

impl Access {
    /// Whether the server refuses the list or watch.
    pub fn is_forbidden(&self) -> bool {
        matches!(self, Access::Forbidden { .. })
    }
}

/// How long to wait before the next attempt: doubling per failure in a row, from
/// [`RETRY_FIRST`] or, while refused, from [`FORBIDDEN_RETRY`]; reset by progress.
#[derive(Debug, Default)]
struct Pace {
    failures: u32,
}

impl Pace {
    fn next(&mut self, forbidden: bool) -> Duration {
        let (first, max) = if forbidden {
            (FORBIDDEN_RETRY, FORBIDDEN_RETRY_MAX)
        } else {
            (RETRY_FIRST, RETRY_MAX)
        };
        let delay = first.saturating_mul(1 << self.failures.min(16)).min(max);
        self.failures = self.failures.saturating_add(1);
        // Up to a tenth longer, never shorter: replicas and informers refused together do not
        // come back together, and a refusal is never retried before its floor.
        let jitter = foldhash::fast::RandomState::default().hash_one(self.failures) % 1000;
        delay + delay.mul_f64(jitter as f64 / 10_000.0)
    }

    fn progress(&mut self) {
        self.failures = 0;
    }
}

/// Lists and watches `api` forever, yielding deltas; errors are counted, logged and retried.
///
/// `streaming` must already be resolved (see [`supports_streaming_lists`]). Lists come as
/// `ListBegin, ListItem.., ListEnd`, one object at a time, never held here. `access` follows
/// whether the server refuses us; a refusal is logged when it begins and when it ends, not per
/// attempt.
///
/// With `resume_from` (a restored cache's resourceVersion) it first watches from there, with no
/// list at all, and lists as usual only once the server no longer has that version (410) or
/// the watch fails.
pub fn reflect(
    api: Api<RawObject>,
    config: &ReflectorConfig,
    streaming: bool,
    stats: Arc<ReflectorStats>,
    access: watch::Sender<Access>,
    resource: String,
    resume_from: Option<String>,
) -> impl Stream<Item = Delta> + Send {
    let resumed = match resume_from.filter(|rv| !rv.is_empty()) {
        Some(rv) => resume(api.clone(), config, rv, stats.clone(), resource.clone()).boxed(),
        None => futures::stream::empty().boxed(),
    };
    resumed.chain(list_and_watch(
        api, config, streaming, stats, access, resource,
    ))
}

/// Where a resumed watch is.
struct Resume {
    api: Api<RawObject>,
    params: WatchParams,
    rv: String,
    events: Option<futures::stream::BoxStream<'static, kube::Result<WatchEvent<RawObject>>>>,
    announced: bool,
    stats: Arc<ReflectorStats>,
    resource: String,
}

/// Watches from `rv` for as long as the server keeps the history, re-watching from the last
/// version seen whenever a watch ends; ends (for a list to take over) on 410 or any failure.
fn resume(
    api: Api<RawObject>,
    config: &ReflectorConfig,
    rv: String,
    stats: Arc<ReflectorStats>,
    resource: String,
) -> impl Stream<Item = Delta> + Send {
    let mut params = WatchParams::default().timeout(290);
    if let Some(l) = &config.label_selector {
        params = params.labels(l);
    }
    if let Some(f) = &config.field_selector {
        params = params.fields(f);
    }
    let state = Resume {
        api,
        params,
        rv,
        events: None,
        announced: false,
        stats,
        resource,
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            let Some(events) = &mut st.events else {
                match st.api.watch(&st.params, &st.rv).await {
                    Ok(events) => {
                        st.events = Some(events.boxed());
                        if !st.announced {
                            st.announced = true;
                            tracing::debug!(resource = %st.resource, rv = %st.rv, "watch resumed from the restored cache");
                            return Some((Delta::Resumed, st));
                        }
                        continue;
                    }
                    Err(kube::Error::Api(s)) if s.code == 410 => {
                        ReflectorStats::bump(&st.stats.gone);
                        tracing::info!(resource = %st.resource, rv = %st.rv, "restored resourceVersion too old (410 Gone): relisting against the restored cache");
                        return None;
                    }
                    Err(e) => {
                        ReflectorStats::bump(&st.stats.errors);
                        tracing::warn!(resource = %st.resource, error = %e, "resuming the watch failed: relisting against the restored cache");
                        return None;
                    }
                }
            };
            let delta = match events.next().await {
                None => {
                    st.events = None;
                    continue;
                }
                Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o))) => Delta::Apply(o),
                Some(Ok(WatchEvent::Deleted(o))) => Delta::Delete(o),
                Some(Ok(WatchEvent::Bookmark(b))) => {
                    st.rv = b.metadata.resource_version;
                    continue;
                }
                Some(Ok(WatchEvent::Error(s))) if s.code == 410 => {
                    ReflectorStats::bump(&st.stats.gone);
                    tracing::info!(resource = %st.resource, rv = %st.rv, "restored resourceVersion too old (410 Gone): relisting against the restored cache");
                    return None;
                }
                Some(Ok(WatchEvent::Error(s))) => {
                    ReflectorStats::bump(&st.stats.errors);
                    tracing::warn!(resource = %st.resource, error = %s.message, "resumed watch failed: relisting against the restored cache");
                    return None;
                }
                Some(Err(e)) => {
                    ReflectorStats::bump(&st.stats.errors);
                    tracing::warn!(resource = %st.resource, error = %e, "resumed watch failed: relisting against the restored cache");
                    return None;
                }
            };
            if let Delta::Apply(o) | Delta::Delete(o) = &delta
                && let Some(rv) = &o.metadata.resource_version
            {
                st.rv = rv.clone();
            }
            ReflectorStats::bump(&st.stats.objects_received);
            return Some((delta, st));
        }
    })
}

/// kube-runtime's list-then-watch, paced here (see the module docs).
fn list_and_watch(
    api: Api<RawObject>,
    config: &ReflectorConfig,
    streaming: bool,
    stats: Arc<ReflectorStats>,
    access: watch::Sender<Access>,
    resource: String,
) -> impl Stream<Item = Delta> + Send {
    let mut wc = watcher::Config::default();
    if let Some(l) = &config.label_selector {
        wc = wc.labels(l);
    }
    if let Some(f) = &config.field_selector {
        wc = wc.fields(f);
    }
    if let Some(p) = config.page_size {
        wc = wc.page_size(p);
    }
    if streaming {
        wc = wc.streaming_lists();
    }
    stats.streaming_lists.store(streaming, Ordering::Relaxed);
    let events = watcher::watcher(api, wc).boxed();
    let state = (events, Pace::default(), stats, access, resource);
    futures::stream::unfold(
        state,
        |(mut events, mut pace, stats, access, resource)| async move {
            loop {
                let delta = match events.next().await? {
                    Ok(WatcherEvent::Init) => Delta::ListBegin,
                    Ok(WatcherEvent::Apply(o)) => {
                        ReflectorStats::bump(&stats.objects_received);
                        Delta::Apply(o)
                    }
                    Ok(WatcherEvent::Delete(o)) => {
                        ReflectorStats::bump(&stats.objects_received);
                        Delta::Delete(o)
                    }
                    Ok(WatcherEvent::InitApply(o)) => {
                        ReflectorStats::bump(&stats.objects_received);
                        Delta::ListItem(o)
                    }
                    Ok(WatcherEvent::InitDone) => {
                        ReflectorStats::bump(&stats.lists);
                        Delta::ListEnd
                    }
                    Err(e) => {
                        ReflectorStats::bump(&stats.errors);
                        let refusal = forbidden(&e);
                        if let Some(reason) = &refusal {
                            ReflectorStats::bump(&stats.forbidden);
                            let new = access.send_if_modified(|a| match a {
                                Access::Forbidden { reason: r, .. } if r == reason => false,
                                _ => {
                                    *a = Access::Forbidden {
                                        reason: reason.clone(),
                                        since: SystemTime::now(),
                                    };
                                    true
                                }
                            });
                            if new {
                                tracing::warn!(%resource, %reason, retry_after_s = FORBIDDEN_RETRY.as_secs(), "list/watch forbidden; retried with a capped backoff until permitted");
                            } else {
                                tracing::debug!(%resource, %reason, "list/watch still forbidden");
                            }
                        } else if is_gone(&e) {
                            ReflectorStats::bump(&stats.gone);
                            tracing::info!(%resource, "resourceVersion too old (410 Gone): relisting");
                        } else {
                            tracing::warn!(%resource, error = %e, "list/watch failed; retrying with backoff");
                        }
                        tokio::time::sleep(pace.next(refusal.is_some())).await;
                        continue;
                    }
                };
                // `Init` comes before the list is even asked for: only what the server sent back
                // is progress.
                if !matches!(delta, Delta::ListBegin) {
                    pace.progress();
                    let was = access.send_if_modified(|a| std::mem::take(a).is_forbidden());
                    if was {
                        tracing::info!(%resource, "list/watch permitted again");
                    }
                }
                return Some((delta, (events, pace, stats, access, resource)));
            }
        },
    )
}

/// The server's message when `e` is a refusal (403).
fn forbidden(e: &watcher::Error) -> Option<String> {
    status(e)
        .filter(|s| s.code == 403)
        .map(|s| s.message.clone())
}

fn is_gone(e: &watcher::Error) -> bool {
    status(e).is_some_and(|s| s.code == 410)
}

/// The Status the server answered with, when `e` carries one.
fn status(e: &watcher::Error) -> Option<&kube::core::Status> {
    match e {
        watcher::Error::WatchError(s) => Some(s),
        watcher::Error::WatchFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::InitialListFailed(kube::Error::Api(s)) => Some(s),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gone_is_recognised_from_a_watch_error_event() {
        let status = kube::core::Status::failure("too old resource version: 1 (5)", "Expired")
            .with_code(410);
        assert!(is_gone(&watcher::Error::WatchError(Box::new(status))));
        let other = kube::core::Status::failure("boom", "InternalError").with_code(500);
        assert!(!is_gone(&watcher::Error::WatchError(Box::new(other))));
        assert!(!is_gone(&watcher::Error::NoResourceVersion));
    }

    #[test]
    fn a_refusal_is_recognised_from_a_list_or_a_watch() {
        let refused = kube::core::Status::failure(
            "secrets is forbidden: User \"u\" cannot list resource \"secrets\"",
            "Forbidden",
        )
        .with_code(403);
        let list = watcher::Error::InitialListFailed(kube::Error::Api(Box::new(refused.clone())));
        assert_eq!(forbidden(&list).as_deref(), Some(refused.message.as_str()));
        assert!(forbidden(&watcher::Error::WatchError(Box::new(refused))).is_some());
        let other = kube::core::Status::failure("boom", "InternalError").with_code(500);
        assert!(forbidden(&watcher::Error::WatchError(Box::new(other))).is_none());
    }

    #[test]
    fn a_refusal_waits_at_least_its_floor_and_at_most_its_cap_plus_jitter() {
        let mut pace = Pace::default();
        let waits: Vec<Duration> = (0..8).map(|_| pace.next(true)).collect();
        assert!(waits.iter().all(|w| *w >= FORBIDDEN_RETRY), "{waits:?}");
        assert!(
            waits.iter().all(|w| *w <= FORBIDDEN_RETRY_MAX.mul_f64(1.1)),
            "{waits:?}"
        );
        assert!(waits[7] >= FORBIDDEN_RETRY_MAX, "{waits:?}");
        pace.progress();
        let after = pace.next(false);
        assert!(
            after >= RETRY_FIRST && after < Duration::from_secs(1),
            "{after:?}"
        );
    }

    #[test]
    fn other_failures_double_from_kube_runtimes_pace() {
        let mut pace = Pace::default();
        let waits: Vec<Duration> = (0..10).map(|_| pace.next(false)).collect();
        assert!(
            waits[0] >= RETRY_FIRST && waits[1] >= RETRY_FIRST * 2,
            "{waits:?}"
        );
        assert!(
            waits[9] >= RETRY_MAX && waits[9] <= RETRY_MAX.mul_f64(1.1),
            "{waits:?}"
        );
    }
}
