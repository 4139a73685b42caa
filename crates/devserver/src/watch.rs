//! Watch streams: one task per watch, following the global history from a cursor
//! (resourceVersion) and writing `{"type":..,"object":..}\n` lines into a chunked body.
//!
//! A watch ends on timeoutSeconds, on close-watches, when the client goes away, or after
//! sending a 410 Expired ERROR event when its cursor falls behind the history (slow consumers
//! get the same treatment as a too-old resourceVersion). While the server is paused nothing is
//! sent, bookmarks included.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;

use super::resources::ResourceType;
use super::selector::{FieldSelector, LabelSelector, labels_match};
use super::store::{Event, EventType, Obj};
use super::{Error, Shared};

/// How many history events a watch copies per wake-up.
const BATCH: usize = 1000;
/// Initial-state objects per body chunk.
const INITIAL_CHUNK: usize = 500;

/// A parsed watch request.
pub(crate) struct WatchRequest {
    pub res: Arc<ResourceType>,
    /// URL version, for the bookmark's apiVersion.
    pub version: String,
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    /// Resume point; None (unset or "0") starts with ADDED events for the current state.
    pub resource_version: Option<u64>,
    pub send_initial_events: bool,
    pub bookmarks: bool,
    pub timeout: Option<Duration>,
    /// Send each object as a one-row Table (kubectl get -w).
    pub table: bool,
}

impl WatchRequest {
    fn matches(&self, namespace: &str, name: &str, obj: &Obj) -> bool {
        labels_match(&self.labels, &obj.labels) && self.fields.matches(namespace, name, obj)
    }

    /// The event this watch reports for `ev`, if any. A change that takes an object out of the
    /// selection is DELETED carrying the last version that matched, stamped with the event's
    /// resourceVersion, as the apiserver's cacheWatcher sends it.
    fn translate(&self, ev: &Event) -> Option<(EventType, Arc<Obj>)> {
        if *ev.res != *self.res.key
            || self
                .namespace
                .as_deref()
                .is_some_and(|ns| ns != &*ev.namespace)
        {
            return None;
        }
        if self.labels.is_empty() && self.fields.is_empty() {
            return Some((ev.kind, ev.obj.clone()));
        }
        let now = self.matches(&ev.namespace, &ev.name, &ev.obj);
        let before = ev
            .prev
            .as_ref()
            .filter(|p| self.matches(&ev.namespace, &ev.name, p));
        match (ev.kind, before, now) {
            (EventType::Modified, Some(_), true) => Some((EventType::Modified, ev.obj.clone())),
            (EventType::Modified, None, true) => Some((EventType::Added, ev.obj.clone())),
            (EventType::Modified, Some(prev), false) => {
                let Ok(mut last) = prev.value() else {
                    // Stored objects parse (see `Obj::value`); were one not to, its previous
                    // version as stored still names the object, under the older version.
                    return Some((EventType::Deleted, prev.clone()));
                };
                last["metadata"]["resourceVersion"] = ev.rv.to_string().into();
                Some((EventType::Deleted, Arc::new(Obj::new(&last, ev.rv))))
            }
            (EventType::Modified, None, false) => None,
            (kind, _, now) => now.then(|| (kind, ev.obj.clone())),
        }
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({"kind": self.res.kind, "apiVersion": self.res.api_version(&self.version), "metadata": metadata});
        let mut line =
            serde_json::to_vec(&json!({"type": "BOOKMARK", "object": obj})).unwrap_or_default();
        line.push(b'\n');
        line.into()
    }
}

fn push_line(buf: &mut BytesMut, kind: EventType, obj: &Arc<Obj>, table: Option<&ResourceType>) {
    buf.put_slice(b"{\"type\":\"");
    buf.put_slice(kind.as_str().as_bytes());
    buf.put_slice(b"\",\"object\":");
    match table {
        Some(res) => buf.put_slice(&super::table::table_bytes(res, obj)),
        None => buf.put_slice(&obj.json),
    }
    buf.put_slice(b"}\n");
}

/// Starts the watch task; returns the streaming response body.
pub(crate) fn serve(shared: Arc<Shared>, req: WatchRequest) -> Body {
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(16);
    tokio::spawn(run(shared, req, tx));
    Body::from_stream(ReceiverStream::new(rx))
}

/// Why a watch stopped early.
struct Stop;

struct Sink {
    tx: mpsc::Sender<Result<Bytes, Infallible>>,
    close: tokio::sync::watch::Receiver<u64>,
}

impl Sink {
    async fn send(&mut self, chunk: Bytes) -> Result<(), Stop> {
        tokio::select! {
            sent = self.tx.send(Ok(chunk)) => sent.map_err(|_| Stop),
            _ = self.close.changed() => Err(Stop),
        }
    }
}

async fn run(shared: Arc<Shared>, req: WatchRequest, tx: mpsc::Sender<Result<Bytes, Infallible>>) {
    let mut close = shared.faults.subscribe_close();
    close.borrow_and_update();
    let mut sink = Sink { tx, close };
    let deadline = req.timeout.map(|t| Instant::now() + t);
    let expired = async move {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = follow(&shared, &req, &mut sink) => {}
        _ = expired => {}
    }
}

async fn follow(shared: &Shared, req: &WatchRequest, sink: &mut Sink) -> Result<(), Stop> {
    let store = &shared.api.store;
    let mut paused = shared.faults.subscribe_paused();
    let mut latest = store.subscribe();
    latest.borrow_and_update();
    shared.faults.wait_resumed().await;

    let mut cursor = match req.resource_version {
        Some(rv) if !req.send_initial_events => rv,
        _ => {
            let mut initial: Vec<Arc<Obj>> = Vec::new();
            let rv = store.scan(&req.res.key, req.namespace.as_deref(), None, |k, obj| {
                if req.matches(&k.0, &k.1, obj) {
                    initial.push(obj.clone());
                }
                true
            });
            for chunk in initial.chunks(INITIAL_CHUNK) {
                let mut buf = BytesMut::new();
                for obj in chunk {
                    push_line(
                        &mut buf,
                        EventType::Added,
                        obj,
                        req.table.then_some(&*req.res),
                    );
                }
                sink.send(buf.freeze()).await?;
            }
            if req.send_initial_events {
                sink.send(req.bookmark(rv, true)).await?;
            }
            rv
        }
    };

    let mut ticker = tokio::time::interval(shared.config.bookmark_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        if *paused.borrow_and_update() {
            tokio::select! {
                _ = paused.wait_for(|p| !*p) => {}
                _ = sink.close.changed() => return Err(Stop),
                _ = sink.tx.closed() => return Err(Stop),
            }
            continue;
        }
        latest.borrow_and_update();
        let more = match store.events_after(cursor, BATCH) {
            Err(e @ (Error::Expired { .. } | Error::TooLargeResourceVersion { .. })) => {
                let mut line =
                    serde_json::to_vec(&json!({"type": "ERROR", "object": e.to_status()}))
                        .unwrap_or_default();
                line.push(b'\n');
                sink.send(line.into()).await?;
                return Err(Stop);
            }
            Err(_) => return Err(Stop),
            Ok((events, current)) => {
                let full = events.len() == BATCH;
                let mut buf = BytesMut::new();
                for ev in &events {
                    if let Some((kind, obj)) = req.translate(ev) {
                        push_line(&mut buf, kind, &obj, req.table.then_some(&*req.res));
                    }
                }
                cursor = match events.last() {
                    Some(last) if full => last.rv,
                    _ => current.max(cursor),
                };
                if !buf.is_empty() {
                    sink.send(buf.freeze()).await?;
                }
                full
            }
        };
        if more {
            continue;
        }
        tokio::select! {
            _ = latest.changed() => {}
            _ = paused.changed() => {}
            _ = ticker.tick(), if req.bookmarks => {
                if !*paused.borrow() {
                    sink.send(req.bookmark(cursor, false)).await?;
                }
            }
            _ = sink.close.changed() => return Err(Stop),
            _ = sink.tx.closed() => return Err(Stop),
        }
    }
}
