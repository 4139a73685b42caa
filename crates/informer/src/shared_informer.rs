//! A shared informer: one reflector feeding one store, whose changes the processor fans out to
//! any number of handlers.
//!
//! Contract:
//! - Every store write and its distribution to handlers happen under the store's write lock; a
//!   handler registration snapshots the store under its read lock and joins the processor before
//!   releasing it. So a handler registered at any moment gets `Added (initial)` for every cached
//!   object, then every later change: no gap, no duplicate.
//! - A handler is synced once it has handled the informer's first list (registered early) or
//!   its replay (registered late).
//! - Resync is per handler: every period, the handler is re-sent each cached object as `Resync`,
//!   folded into whatever it already has pending.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use kube::api::{Api, ListParams, VersionMatch};
use kube::core::ApiResource;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::cursor::Holds;
use super::event::{Event, EventType};
use super::object::{CachedObject, RawObject};
use super::processor::{
    ChangeFilter, EventFilter, Handler, ListenerHandle, ListenerOptions, ListenerStats,
    SharedProcessor, Wakes,
};
use super::reflector::{self, Access, Delta, InitialList, ReflectorConfig, ReflectorStats};
use super::store::{Relist, RestoreReport, Restored, Store, StoreOptions};

/// How long the reflector task applies deltas the watch stream already holds before it yields,
/// after the stream last ran dry. The handler tasks it wakes are queued on its own worker,
/// behind it: yielding lets them run instead of waiting while it decodes a whole burst. End to
/// end at 10k events/s into 50 plugins this took the dispatch p99 from ≤ 1.41–2.83 ms to
/// ≤ 0.50–1.00 ms, for 10–30 % more CPU.
const TURN: Duration = Duration::from_micros(100);

/// The longest turn: once the stream has kept the task busy for [`SUSTAINED`] without pausing
/// (for a turn or longer), each turn that ends doubles the next, up to this. Such a stream is a
/// backlog, where a wake that unparks another worker costs more than the latency it saves and a
/// handler called later takes more events per call. End to end at full speed, doubling up to
/// 1 ms (or 400 µs) delivered 15–19 % more events/s into 10 and 50 plugins than 100 µs turns
/// throughout.
const LONGEST_TURN: Duration = Duration::from_millis(1);

/// How long the stream must keep the task busy, without a pause, before turns lengthen. A burst
/// shorter than this (a paced stream's, or a short catch-up) is served in short turns, so its
/// handlers are woken within one. End to end at 10k events/s into 50 plugins, turns doubling from
/// the first of a burst gave a dispatch p99 of ≤ 1.00–1.41 ms in 12 of 14 runs (p50 ≤ 0.18 ms);
/// waiting 1 ms, ≤ 0.50–1.00 ms; waiting 5 ms, ≤ 0.50–0.71 ms in 8 of 10 (p50 ≤ 0.12 ms), at the
/// same events/s at full speed (within the spread of ten rounds).
const SUSTAINED: Duration = Duration::from_millis(5);

/// Objects per page of [`SharedInformer::list_at`] unless the informer sets its own page size
/// (kube-runtime's default for the informer's list).
const LIST_PAGE: u32 = 500;

/// Receives every change a store makes, in change order, while the store's write lock is held
/// (so keep it cheap: hand the event on, don't write it out here).
pub trait ChangeLog: Send + Sync + 'static {
    /// Records one change (`event.seq` numbers it).
    fn record(&self, event: &Event);
    /// A relist is being applied: the changes recorded until [`ChangeLog::relisted`] are not in
    /// resourceVersion order, so none of them is a point a watch could resume from.
    fn relisting(&self) {}
    /// The relist is applied: the cache is as of `resource_version`, its newest object's
    /// (`None` when some resourceVersion is not a number), a point a watch can resume from.
    fn relisted(&self, resource_version: Option<u64>) {
        let _ = resource_version;
    }
}

/// Where a handler's delivery cursor starts (see [`crate::cursor`]).
#[derive(Debug, Clone, Default)]
pub struct CursorOptions {
    /// The change it had handled everything up to, from a cursor kept across a restart: it
    /// gets only what changed after it, against a restored cache. `None`: it starts from
    /// nothing, with the usual replay.
    pub since: Option<u64>,
    /// Changes the handler keeps to handle later (retries): they hold its cursor.
    pub holds: Holds,
    /// The state the handler had seen, handled elsewhere (another replica, up to its version
    /// watermark): it gets only the difference between that and the cache, then live events,
    /// instead of a replay (see [`SharedInformer::add_handler`]). Takes precedence over
    /// `since`. The informer must have synced before a handler registers with one.
    pub prior: Option<Arc<Restored>>,
    /// A resourceVersion every change up to which the handler has handled (elsewhere): its
    /// version watermark ([`ListenerHandle::handled_through_version`]) never goes below it.
    /// With `prior`, the version `prior` was listed at.
    pub floor_version: Option<u64>,
    /// A resourceVersion every change up to which the handler had handled before the informer
    /// saw those changes again (its watch resumed from a point before them): live events at
    /// most this are not delivered to it, nor, resuming with `since`, an add or update of the
    /// restored difference whose object is at such a version (the watch applied it before the
    /// handler registered). A delete whose final state is unknown always is (a relist or the
    /// restored difference inferred it, and when it happened is not known), and a relist ends
    /// the skip (see [`SharedProcessor::end_skips`](crate::SharedProcessor::end_skips)).
    pub skip_through_version: Option<u64>,
}

/// Whether `event`, of a restored difference, is one a handler skipping through `skip` had
/// handled: an add or update whose object is at a version at most `skip`.
fn skipped(skip: Option<u64>, event: &Event) -> bool {
    skip.is_some_and(|through| {
        event.event_type != EventType::Deleted
            && crate::cursor::version_of(event.object.resource_version())
                .is_some_and(|v| v <= through)
    })
}

/// Options of a handler registration.
#[derive(Debug, Clone, Default)]
pub struct HandlerOptions {
    /// Re-deliver every cached object this often as `Resync` (never when `None`).
    pub resync_period: Option<Duration>,
    /// Only objects this accepts reach the handler (live, replay and resync alike).
    pub filter: Option<EventFilter>,
    /// Only updates this passes reach the handler (adds, deletes, replays, resyncs all do).
    pub changes: Option<ChangeFilter>,
    /// Keep the handler's delivery cursor ([`ListenerHandle::handled_through`]).
    pub cursor: Option<CursorOptions>,
}

/// One resource's list/watch, cache and handlers.
pub struct SharedInformer {
    api: Api<RawObject>,
    description: String,
    config: ReflectorConfig,
    store: Arc<Store>,
    processor: Arc<SharedProcessor>,
    stats: Arc<ReflectorStats>,
    synced: watch::Sender<bool>,
    /// Whether the server refuses our list/watch, as the reflector last found.
    access: watch::Sender<Access>,
    /// The list arriving now, between `ListBegin` and `ListEnd`.
    relist: Mutex<Option<Relist>>,
    task: Mutex<Option<JoinHandle<()>>>,
    change_log: std::sync::OnceLock<Arc<dyn ChangeLog>>,
    /// A cache restored from disk, for handlers resuming from a cursor.
    restored: Mutex<Option<Arc<Restored>>>,
    /// The restored cache's resourceVersion, to watch from instead of listing.
    resume_from: Mutex<Option<String>>,
}

impl std::fmt::Debug for SharedInformer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedInformer")
            .field("description", &self.description)
            .field("objects", &self.store.len())
            .field("handlers", &self.processor.len())
            .field("synced", &self.has_synced())
            .finish()
    }
}

impl SharedInformer {
    /// An informer over `api` (already scoped to a namespace or not), not yet started.
    pub fn new(
        api: Api<RawObject>,
        api_resource: ApiResource,
        description: String,
        config: ReflectorConfig,
        store_options: StoreOptions,
    ) -> Arc<Self> {
        Arc::new(SharedInformer {
            api,
            description,
            config,
            store: Arc::new(Store::new(api_resource, store_options)),
            processor: SharedProcessor::new(),
            stats: Arc::new(ReflectorStats::default()),
            synced: watch::channel(false).0,
            access: watch::channel(Access::Allowed).0,
            relist: Mutex::new(None),
            task: Mutex::new(None),
            change_log: std::sync::OnceLock::new(),
            restored: Mutex::new(None),
            resume_from: Mutex::new(None),
        })
    }

    /// Sends every change from now on to `log` as well; a second change log is ignored.
    pub fn set_change_log(&self, log: Arc<dyn ChangeLog>) {
        let _ = self.change_log.set(log);
    }

    /// Fills the (empty, not started) cache with a persisted one (see [`Store::restore`]):
    /// the informer then watches from `resource_version` instead of listing, and handlers
    /// registered with a cursor get only what changed after it.
    pub fn restore<K: AsRef<str> + Send, J: Into<crate::StoredObject> + Send>(
        &self,
        resource_version: &str,
        seq: u64,
        versions: impl IntoIterator<Item = (K, Vec<(u64, Option<J>)>)>,
    ) -> RestoreReport {
        let (restored, report) = self.store.restore(versions, seq);
        // The cache is the state at that version and change: a handler with nothing pending
        // is there.
        self.processor.note_reached(resource_version);
        self.processor.note_restored(seq);
        *self.restored.lock() = Some(Arc::new(restored));
        *self.resume_from.lock() = Some(resource_version.to_string());
        report
    }

    /// The cache as it was restored from disk, while its versions are kept for resuming
    /// handlers (until [`forget_restored`](Self::forget_restored)): e.g. the namespaces a
    /// resuming plugin's namespace selection was made of when it stopped.
    pub fn restored(&self) -> Option<Arc<Restored>> {
        self.restored.lock().clone()
    }

    /// Drops the restored versions kept for resuming handlers (once every handler that had a
    /// cursor is registered).
    pub fn forget_restored(&self) {
        self.restored.lock().take();
    }

    /// What this informer watches, for logs and errors (e.g. `apps/v1 deployments in ns`).
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The cache; read it freely, it is never written from outside this informer.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Reflector counters (lists, errors, 410s, objects received).
    pub fn stats(&self) -> &Arc<ReflectorStats> {
        &self.stats
    }

    /// Backlog and counters of every registered handler, read now (for metrics).
    pub fn handler_stats(&self) -> Vec<ListenerStats> {
        self.processor.listener_stats()
    }

    /// Number of registered handlers.
    pub fn handler_count(&self) -> usize {
        self.processor.len()
    }

    /// Starts list/watch in the background; calling it again does nothing.
    pub fn start(self: &Arc<Self>) {
        let mut task = self.task.lock();
        if task.is_some() {
            return;
        }
        let me = self.clone();
        *task = Some(tokio::spawn(async move { me.run().await }));
    }

    /// Stops list/watch; the cache and handlers stay as they are.
    pub fn stop(&self) {
        if let Some(t) = self.task.lock().take() {
            t.abort();
        }
    }

    /// Whether the first complete list has been applied.
    pub fn has_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Waits until [`has_synced`](Self::has_synced).
    pub async fn wait_for_sync(&self) {
        let mut rx = self.synced.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    /// Whether the server refuses this informer's list or watch (403) right now.
    pub fn access(&self) -> Access {
        self.access.borrow().clone()
    }

    /// Waits until the informer has synced or the server refused it: what a consumer waiting
    /// for its caches can expect of it until someone changes RBAC.
    pub async fn wait_settled(&self) {
        let mut synced = self.synced.subscribe();
        let mut access = self.access.subscribe();
        tokio::select! {
            _ = synced.wait_for(|s| *s) => {}
            _ = access.wait_for(Access::is_forbidden) => {}
        }
    }

    /// Whether [`wait_settled`](Self::wait_settled) would return at once.
    pub fn is_settled(&self) -> bool {
        self.has_synced() || self.access.borrow().is_forbidden()
    }

    async fn run(self: Arc<Self>) {
        let streaming = match self.config.initial_list {
            InitialList::Streaming => true,
            InitialList::Paginated => false,
            InitialList::Auto => reflector::supports_streaming_lists(&self.api).await,
        };
        tracing::debug!(informer = %self.description, streaming, "starting list/watch");
        let deltas = reflector::reflect(
            self.api.clone(),
            &self.config,
            streaming,
            self.stats.clone(),
            self.access.clone(),
            self.description.clone(),
            self.resume_from.lock().take(),
        );
        let mut deltas = std::pin::pin!(deltas);
        let mut turn = Instant::now();
        let mut turn_length = TURN;
        let mut busy_since = Instant::now();
        // Handlers are woken once per run of deltas the stream already holds (or per turn), not
        // once per event: a wake can cost a syscall to unpark another worker, and a handler
        // woken later takes more events in one go.
        let mut wakes = Wakes::default();
        loop {
            let delta = match deltas.next().now_or_never() {
                Some(delta) => delta,
                None => {
                    wakes.wake();
                    let waiting = Instant::now();
                    let delta = deltas.next().await;
                    // A pause, not a gap between two reads of a backlog: back to short turns.
                    if waiting.elapsed() >= TURN {
                        turn_length = TURN;
                        busy_since = Instant::now();
                    }
                    delta
                }
            };
            let Some(delta) = delta else { break };
            self.apply_held(delta, &mut wakes);
            if turn.elapsed() >= turn_length {
                wakes.wake();
                tokio::task::yield_now().await;
                turn = Instant::now();
                if turn.duration_since(busy_since) >= SUSTAINED {
                    turn_length = (turn_length * 2).min(LONGEST_TURN);
                }
            }
        }
    }

    /// Applies one delta to the store and hands its events to the handlers, exactly as the
    /// reflector does; public so recorded streams can be replayed and pipelines benchmarked.
    pub fn apply(&self, delta: Delta) {
        self.apply_held(delta, &mut Wakes::default());
    }

    /// Applies as [`apply`](Self::apply) does; the handlers to wake are left in `wakes`.
    fn apply_held(&self, delta: Delta, wakes: &mut Wakes) {
        let processor = &self.processor;
        let journal = self.change_log.get();
        let mut sink = |e: Event| {
            if let Some(j) = journal {
                j.record(&e);
            }
            processor.distribute_held(&e, wakes)
        };
        match delta {
            Delta::Apply(o) => {
                let reached = o.metadata.resource_version.clone();
                self.store.apply(o, &mut sink);
                self.note_reached(reached);
            }
            Delta::Delete(o) => {
                let reached = o.metadata.resource_version.clone();
                self.store.delete(o, &mut sink);
                self.note_reached(reached);
            }
            Delta::Replace(objs) => self.finish_relist(self.store.relist_of(objs), &mut sink),
            Delta::ListBegin => *self.relist.lock() = Some(self.store.begin_relist()),
            Delta::ListItem(o) => {
                let mut relist = self.relist.lock();
                let relist = relist.get_or_insert_with(|| self.store.begin_relist());
                self.store.relist_push(relist, o);
            }
            Delta::ListEnd => {
                let relist = self.relist.lock().take();
                let relist = relist.unwrap_or_else(|| self.store.begin_relist());
                self.finish_relist(relist, &mut sink);
            }
            Delta::Resumed => {
                if !self.has_synced() {
                    tracing::info!(informer = %self.description, objects = self.store.len(), "synced (resumed from the restored cache)");
                }
                self.processor.mark_synced();
                self.synced.send_replace(true);
            }
        }
    }

    /// Every change up to the watch event at `resource_version` has been distributed.
    fn note_reached(&self, resource_version: Option<String>) {
        if let Some(rv) = resource_version {
            self.processor.note_reached(&rv);
        }
    }

    fn finish_relist(&self, relist: Relist, sink: &mut impl FnMut(Event)) {
        let n = relist.len();
        // kube-runtime's watcher does not tell the list's own resourceVersion: its newest
        // object's is the highest known to be reached, a lower bound of it (so safe).
        let newest = relist.newest_version();
        self.processor.end_skips();
        let journal = self.change_log.get();
        if let Some(j) = journal {
            j.relisting();
        }
        self.store.finish_relist(relist, sink);
        if let Some(j) = journal {
            j.relisted(newest.ok().filter(|v| *v != 0));
        }
        self.processor.note_reached_version(newest);
        if !self.has_synced() {
            tracing::info!(informer = %self.description, objects = n, "synced");
        }
        self.processor.mark_synced();
        self.synced.send_replace(true);
    }

    /// Registers a handler: it first gets `Added (initial)` for every cached object, then live
    /// events.
    ///
    /// With a cursor's `prior` (a state it saw elsewhere) it gets instead, under the store's
    /// read lock like a replay (so no gap and no duplicate with the live events that follow),
    /// the difference between `prior` and the cache: `Updated` from the prior version when the
    /// resourceVersions differ, `Deleted` (final state unknown) with the prior object for keys
    /// gone, `Added` (not initial) for keys `prior` lacks, nothing for the same version. The
    /// caller must register with a prior only once the informer has synced: against a cache
    /// not yet filled, the difference would be a delete of everything.
    pub fn add_handler<H: Handler>(
        self: &Arc<Self>,
        name: &str,
        handler: H,
        options: HandlerOptions,
    ) -> ListenerHandle {
        let tracked = options.cursor.is_some();
        let (since, holds, prior, floor, skip_through) = match options.cursor {
            Some(c) => (
                c.since,
                Some(c.holds),
                c.prior,
                c.floor_version,
                c.skip_through_version,
            ),
            None => (None, None, None, None, None),
        };
        let (restored, start) = match prior {
            Some(prior) => (Some((0, prior)), None),
            None => {
                let restored = since.zip(self.restored.lock().clone());
                let start = restored.as_ref().map(|(since, _)| *since);
                (restored, start)
            }
        };
        let state = self.processor.prepare(
            name,
            ListenerOptions {
                filter: options.filter,
                changes: options.changes,
                track: tracked,
                start,
                holds,
                floor,
                skip_through,
            },
        );
        let handle = match restored {
            Some((since, restored)) => {
                self.store
                    .changes_after(&restored, since, floor, |synced, events| {
                        for e in events.into_iter().filter(|e| !skipped(skip_through, e)) {
                            state.offer(e);
                        }
                        if synced {
                            state.mark_synced();
                        }
                        self.processor.attach(state.clone(), handler)
                    })
            }
            None => self.store.read_consistent(|synced, objects| {
                state.offer_replay(objects);
                if synced {
                    state.mark_synced();
                }
                self.processor.attach(state.clone(), handler)
            }),
        };
        if let Some(period) = options.resync_period {
            self.spawn_resync(&handle, period);
        }
        handle
    }

    /// The informer's resource (its namespace, label and field selectors) exactly as it was
    /// at `resource_version`, each object in the form the cache would hold it, listed in pages
    /// like the informer's own list: e.g. the state a handler had seen elsewhere, for
    /// [`CursorOptions::prior`]. `Ok(None)` when the server no longer has that version (410).
    pub async fn list_at(
        &self,
        resource_version: &str,
    ) -> crate::Result<Option<Vec<Arc<CachedObject>>>> {
        let mut params = ListParams::default()
            .at(resource_version)
            .matching(VersionMatch::Exact)
            .limit(self.config.page_size.unwrap_or(LIST_PAGE));
        if let Some(l) = &self.config.label_selector {
            params = params.labels(l);
        }
        if let Some(f) = &self.config.field_selector {
            params = params.fields(f);
        }
        let mut objects = Vec::new();
        loop {
            let page = match self.api.list(&params).await {
                Ok(page) => page,
                Err(kube::Error::Api(s)) if s.code == 410 => return Ok(None),
                Err(source) => {
                    return Err(crate::Error::ListAt {
                        resource: self.description.clone(),
                        resource_version: resource_version.to_string(),
                        source: Box::new(source),
                    });
                }
            };
            objects.extend(page.items.into_iter().filter_map(|o| self.store.prepare(o)));
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params.continue_token = Some(token),
                None => return Ok(Some(objects)),
            }
        }
    }

    fn spawn_resync(&self, handle: &ListenerHandle, period: Duration) {
        let state = handle.state().clone();
        let store = self.store.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            loop {
                ticks.tick().await;
                if state.listener.is_closed() {
                    break;
                }
                store.read_consistent(|_, objects| {
                    for o in objects {
                        state.offer(Event::resync(o.clone()));
                    }
                });
            }
        });
    }
}

#[cfg(test)]
mod handoff_tests;
#[cfg(test)]
mod tests;
