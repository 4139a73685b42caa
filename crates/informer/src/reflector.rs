//! The reflector: kube-runtime's `watcher` (list, then watch from the list's resourceVersion;
//! bookmarks; relist on 410 Gone; backoff with jitter) reshaped into store deltas.
//!
//! The watcher's `Init, InitApply.., InitDone` run becomes `ListBegin, ListItem.., ListEnd`: the
//! store freezes each listed object as it arrives and, at the end, diffs the list against what
//! it holds (a Replace): that is where deletes missed during an outage surface.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt, future};
use kube::api::{Api, WatchEvent, WatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event as WatcherEvent};

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

/// Lists and watches `api` forever, yielding deltas; errors are counted, logged and retried.
///
/// `streaming` must already be resolved (see [`supports_streaming_lists`]). Lists come as
/// `ListBegin, ListItem.., ListEnd`, one object at a time, never held here.
pub fn reflect(
    api: Api<RawObject>,
    config: &ReflectorConfig,
    streaming: bool,
    stats: Arc<ReflectorStats>,
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
    watcher::watcher(api, wc)
        .default_backoff()
        .filter_map(move |item| {
            let delta = match item {
                Ok(WatcherEvent::Apply(o)) => {
                    ReflectorStats::bump(&stats.objects_received);
                    Some(Delta::Apply(o))
                }
                Ok(WatcherEvent::Delete(o)) => {
                    ReflectorStats::bump(&stats.objects_received);
                    Some(Delta::Delete(o))
                }
                Ok(WatcherEvent::Init) => Some(Delta::ListBegin),
                Ok(WatcherEvent::InitApply(o)) => {
                    ReflectorStats::bump(&stats.objects_received);
                    Some(Delta::ListItem(o))
                }
                Ok(WatcherEvent::InitDone) => {
                    ReflectorStats::bump(&stats.lists);
                    Some(Delta::ListEnd)
                }
                Err(e) => {
                    ReflectorStats::bump(&stats.errors);
                    if is_gone(&e) {
                        ReflectorStats::bump(&stats.gone);
                        tracing::info!(%resource, "resourceVersion too old (410 Gone): relisting");
                    } else {
                        tracing::warn!(%resource, error = %e, "list/watch failed; retrying with backoff");
                    }
                    None
                }
            };
            future::ready(delta)
        })
}

fn is_gone(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::WatchError(s) => s.code == 410,
        watcher::Error::WatchFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::InitialListFailed(kube::Error::Api(s)) => s.code == 410,
        _ => false,
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
}
