//! The SharedProcessor: fans each store event out to every registered handler's own
//! [`Listener`], and runs one task per handler that drains it.
//!
//! Contract:
//! - [`SharedProcessor::distribute`] never blocks on a handler: it only pushes into queues, so a
//!   slow or stuck handler delays nobody else (its own queue stays bounded by coalescing).
//!   Change filters ([`ChangeFilter`]) run on the handler's task too, so a slow one delays only
//!   its handlers.
//! - Each handler runs in its own tokio task, one call at a time (an event, or the events taken
//!   in one wake-up), per key in order.
//! - A handler that panics ends its own task; the processor and other handlers carry on.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::RwLock;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::cursor::{Holds, Opaque, Reached};
use super::event::Event;
use super::listener::{Delivery, Listener};
use super::object::CachedObject;
use super::store::Store;

/// Deliveries a handler's task takes from its queue per lock: a busy queue costs its producer
/// and consumer one lock round-trip per batch instead of one per event.
const BATCH: usize = 64;

/// Which objects a handler is shown: events, replays and resyncs of other objects never reach
/// its queue (so they cost it no backlog either). Tenancy grants are applied this way.
#[derive(Clone)]
pub struct EventFilter(Arc<dyn Fn(&CachedObject) -> bool + Send + Sync>);

impl EventFilter {
    /// A filter accepting the objects for which `accepts` returns true.
    pub fn new(accepts: impl Fn(&CachedObject) -> bool + Send + Sync + 'static) -> Self {
        EventFilter(Arc::new(accepts))
    }

    /// Whether events of `object` pass.
    pub fn accepts(&self, object: &CachedObject) -> bool {
        (self.0)(object)
    }
}

impl std::fmt::Debug for EventFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventFilter")
    }
}

/// Which updates a handler is woken for: a change filter sees the updates its handler's
/// [`EventFilter`] accepted, per key in order, and `false` drops one before the handler.
/// Adds, deletes and resyncs are never offered to it: they always pass.
///
/// Called on the handler's own task as it takes events from its queue, never while the informer
/// distributes: a slow filter delays only the handlers using it. It sees updates after
/// coalescing (old object of the first pending update, new object of the last), so it may be
/// offered fewer than the informer applied. It may be shared by several handlers, which is how
/// a result can be computed once per object version for all of them.
#[derive(Clone)]
pub struct ChangeFilter(Arc<dyn Fn(&Event) -> bool + Send + Sync>);

impl ChangeFilter {
    /// A filter passing the updates for which `changed` returns true.
    pub fn new(changed: impl Fn(&Event) -> bool + Send + Sync + 'static) -> Self {
        ChangeFilter(Arc::new(changed))
    }

    /// Whether `event` reaches the handler.
    pub fn passes(&self, event: &Event) -> bool {
        event.event_type != super::event::EventType::Updated || (self.0)(event)
    }
}

impl std::fmt::Debug for ChangeFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChangeFilter")
    }
}

/// Receives events from an informer.
///
/// Called from the handler's own task, one call at a time; per object key, in order. The
/// objects are shared and immutable: keep them, don't expect to modify them.
pub trait Handler: Send + 'static {
    /// Handles one event. A slow future here only delays this handler.
    fn handle(&mut self, event: Event) -> impl Future<Output = ()> + Send;

    /// Handles the events taken from the queue in one wake-up, in order. By default one
    /// [`handle`](Self::handle) each; a handler whose per-call cost is high takes them at once.
    fn handle_batch(&mut self, events: Vec<Event>) -> impl Future<Output = ()> + Send {
        async move {
            for e in events {
                self.handle(e).await;
            }
        }
    }
}

/// Adapts a synchronous closure into a [`Handler`].
///
/// ```
/// use informant_informer::{Event, FnHandler};
/// let _h = FnHandler(|e: Event| println!("{:?} {}", e.event_type, e.key()));
/// ```
pub struct FnHandler<F>(pub F);

impl<F: FnMut(Event) + Send + 'static> Handler for FnHandler<F> {
    fn handle(&mut self, event: Event) -> impl Future<Output = ()> + Send {
        (self.0)(event);
        std::future::ready(())
    }
}

/// The per-handler state the processor and the handle share.
pub(crate) struct ListenerState {
    pub(crate) name: String,
    pub(crate) listener: Listener,
    filter: Option<EventFilter>,
    changes: Option<ChangeFilter>,
    synced: watch::Sender<bool>,
    marked: AtomicBool,
    delivered: AtomicU64,
    /// Where the handler's cursor stands until it has handled its replay (see
    /// [`crate::cursor`]); `None` when it starts from nothing.
    start: Option<u64>,
    holds: Option<Holds>,
    tracked: bool,
    /// The processor's last distributed change.
    distributed: Arc<AtomicU64>,
    /// The informer's reached resourceVersion.
    reached: Arc<Reached>,
    /// The version watermark never goes below this (see [`ListenerOptions::floor`]).
    floor: Option<u64>,
    /// See [`ListenerOptions::skip_through`]; 0 for none (and once a relist ended it).
    skip_through: AtomicU64,
}

impl ListenerState {
    fn new(
        name: &str,
        options: ListenerOptions,
        distributed: Arc<AtomicU64>,
        reached: Arc<Reached>,
    ) -> Arc<Self> {
        let listener = Listener::new();
        if options.track {
            listener.track_changes();
        }
        Arc::new(ListenerState {
            name: name.to_string(),
            listener,
            filter: options.filter,
            changes: options.changes,
            synced: watch::channel(false).0,
            marked: AtomicBool::new(false),
            delivered: AtomicU64::new(0),
            start: options.start,
            holds: options.holds,
            tracked: options.track,
            distributed,
            reached,
            floor: options.floor,
            skip_through: AtomicU64::new(options.skip_through.unwrap_or(0)),
        })
    }

    /// Every change with a resourceVersion up to this that reached the handler has been
    /// handled (see [`crate::cursor`]); `None` when untracked, removed, when some
    /// resourceVersion is not a number, or when nothing is known yet and no floor was given.
    pub(crate) fn handled_through_version(&self) -> Option<u64> {
        // Read first: every change up to it has been queued to this handler already, so what
        // is pending below is read after it, and a change racing in can only lower the answer.
        let reached = self.reached.get().ok()?;
        if !self.tracked || self.listener.is_closed() {
            return None;
        }
        let queued = self.listener.lowest_unhandled_version().ok()?;
        let held = self.holds.as_ref().and_then(Holds::lowest_version);
        let through = match queued.into_iter().chain(held).min() {
            Some(lowest) => Some(lowest - 1),
            None => (reached != 0).then_some(reached),
        };
        // 0 claims nothing.
        through.max(self.floor).filter(|w| *w != 0)
    }

    /// Every change numbered up to this has been handled or was never for this handler (see
    /// [`crate::cursor`]); `None` while it has no such point (a replay from nothing pending).
    pub(crate) fn handled_through(&self) -> Option<u64> {
        // Read first: every change up to it has been queued to this handler already.
        let distributed = self.distributed.load(Ordering::Acquire);
        // A closed listener dropped what it held: it knows nothing more.
        if !self.tracked || self.listener.is_closed() {
            return None;
        }
        if !*self.synced.borrow() {
            return self.start;
        }
        let held = self.holds.as_ref().and_then(Holds::lowest);
        let lowest = self
            .listener
            .lowest_unhandled()
            .into_iter()
            .chain(held)
            .min();
        Some(lowest.map_or(distributed, |s| s - 1))
    }

    /// Whether the handler's filter lets events of `object` through.
    pub(crate) fn accepts(&self, object: &CachedObject) -> bool {
        self.filter.as_ref().is_none_or(|f| f.accepts(object))
    }

    /// Whether the handler handled `event` before the informer saw it again.
    fn handled_before(&self, event: &Event) -> bool {
        let through = self.skip_through.load(Ordering::Relaxed);
        // Version 0: not a number, nothing known of it, so it is delivered.
        through != 0 && event.version != 0 && event.version <= through && !event.final_state_unknown
    }

    /// Queues `event` unless the handler's filter rejects its object.
    pub(crate) fn offer(&self, event: Event) {
        if self.accepts(&event.object) {
            self.listener.push(event);
        }
    }

    /// Makes the objects the filter accepts the initial replay (see [`Listener::set_replay`]).
    pub(crate) fn offer_replay<'a>(&self, objects: impl Iterator<Item = &'a Arc<CachedObject>>) {
        let accepted = objects.filter(|o| self.accepts(o)).cloned().collect();
        self.listener.set_replay(accepted);
    }

    /// Queues the synced marker once, however often this is called.
    pub(crate) fn mark_synced(&self) {
        if !self.marked.swap(true, Ordering::AcqRel) {
            self.listener.mark_synced();
        }
    }
}

/// What a new listener is set up with.
#[derive(Default)]
pub(crate) struct ListenerOptions {
    pub(crate) filter: Option<EventFilter>,
    pub(crate) changes: Option<ChangeFilter>,
    /// Keep what [`ListenerState::handled_through`] needs.
    pub(crate) track: bool,
    pub(crate) start: Option<u64>,
    pub(crate) holds: Option<Holds>,
    /// A resourceVersion every change up to which was handled before (elsewhere): the version
    /// watermark starts there and never goes below it.
    pub(crate) floor: Option<u64>,
    /// Live events at most this resourceVersion were handled before (see
    /// `CursorOptions::skip_through_version`): not delivered, until a relist.
    pub(crate) skip_through: Option<u64>,
}

/// Listeners that were given events without being woken ([`SharedProcessor::distribute_held`]).
///
/// A listener is added when a push found its queue empty, so usually once per run of events
/// (twice if its consumer emptied the queue in between: the extra wake finds it as it is and
/// waits again). Wake them before waiting for more events, or they sleep on what they were
/// given.
#[derive(Default)]
pub struct Wakes(Vec<Arc<ListenerState>>);

impl Wakes {
    /// Wakes every listener held and forgets them.
    pub fn wake(&mut self) {
        for l in self.0.drain(..) {
            l.listener.wake();
        }
    }
}

impl Drop for Wakes {
    /// A holder dropped early (a panic, a cancelled task) still wakes what it held: nothing is
    /// left asleep on events it was given.
    fn drop(&mut self) {
        self.wake();
    }
}

/// Fans events out to the listeners of one informer.
#[derive(Default)]
pub struct SharedProcessor {
    listeners: RwLock<Vec<(u64, Arc<ListenerState>)>>,
    next_id: AtomicU64,
    /// The last change distributed (its `Event::seq`).
    distributed: Arc<AtomicU64>,
    /// The newest resourceVersion handed out (see [`crate::cursor`]).
    reached: Arc<Reached>,
}

impl SharedProcessor {
    /// A processor with no listeners.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Pushes `event` into the queue of every listener whose [`EventFilter`] accepts it (change
    /// filters run later, on each listener's task).
    pub fn distribute(&self, event: &Event) {
        self.distribute_with(event, |l| l.listener.wake());
    }

    /// Distributes as [`distribute`](Self::distribute) does, but the listeners it would wake
    /// are added to `wakes` instead, for the caller to wake once it has no event left at hand.
    pub fn distribute_held(&self, event: &Event, wakes: &mut Wakes) {
        self.distribute_with(event, |l| wakes.0.push(l.clone()));
    }

    fn distribute_with(&self, event: &Event, mut woken: impl FnMut(&Arc<ListenerState>)) {
        for (_, l) in self.listeners.read().iter() {
            if l.accepts(&event.object)
                && !l.handled_before(event)
                && l.listener.push_held(event.clone())
            {
                woken(l);
            }
        }
        // Only once every listener has it: a cursor read after this may pass it.
        if event.seq != 0 {
            self.distributed.store(event.seq, Ordering::Release);
        }
    }

    /// Ends every listener's skip of changes it had handled before: from a relist on, the
    /// server's resourceVersions may not be the ones those were numbered in (a new server
    /// behind the same address), so nothing is skipped; at least once, never lost.
    pub fn end_skips(&self) {
        for (_, l) in self.listeners.read().iter() {
            l.skip_through.store(0, Ordering::Relaxed);
        }
    }

    /// Queues the synced marker on every listener that has not had it yet.
    pub fn mark_synced(&self) {
        for (_, l) in self.listeners.read().iter() {
            l.mark_synced();
        }
    }

    /// Counters and gauges of every registered listener, read now (for metrics).
    pub fn listener_stats(&self) -> Vec<ListenerStats> {
        self.listeners
            .read()
            .iter()
            .map(|(_, l)| ListenerStats {
                name: l.name.clone(),
                backlog: l.listener.backlog(),
                received: l.listener.received(),
                delivered: l.delivered.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// Number of registered listeners.
    pub fn len(&self) -> usize {
        self.listeners.read().len()
    }

    /// Whether no listener is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A new listener, not yet receiving events: fill it, then [`attach`](Self::attach) it.
    pub(crate) fn prepare(&self, name: &str, options: ListenerOptions) -> Arc<ListenerState> {
        ListenerState::new(
            name,
            options,
            self.distributed.clone(),
            self.reached.clone(),
        )
    }

    /// Records that every change up to `resource_version` has been distributed: the version
    /// watermark of a handler with nothing pending. Call it only after distributing them.
    pub fn note_reached(&self, resource_version: &str) {
        self.reached.note(resource_version);
    }

    /// The cache was restored as of change `seq`: every change up to it counts as distributed,
    /// so a handler resumed there with nothing pending stands at it, not at 0.
    pub(crate) fn note_restored(&self, seq: u64) {
        self.distributed.fetch_max(seq, Ordering::AcqRel);
    }

    /// [`note_reached`](Self::note_reached) with the version already read.
    pub(crate) fn note_reached_version(&self, version: Result<u64, Opaque>) {
        self.reached.note_parsed(version);
    }

    /// Starts receiving events into `state` and spawns the task feeding `handler`.
    ///
    /// The caller must hold the store's consistent-read lock across filling the listener with
    /// the replay and this call, so no event falls between the two.
    pub(crate) fn attach<H: Handler>(
        self: &Arc<Self>,
        state: Arc<ListenerState>,
        mut handler: H,
    ) -> ListenerHandle {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.listeners.write().push((id, state.clone()));
        let task_state = state.clone();
        let task = tokio::spawn(async move {
            let listener = &task_state.listener;
            let mut batch = Vec::with_capacity(BATCH);
            let mut events = Vec::new();
            while listener.pop_batch(&mut batch, BATCH).await {
                for delivery in batch.drain(..) {
                    match delivery {
                        Delivery::Event(e) => {
                            if task_state.changes.as_ref().is_none_or(|c| c.passes(&e)) {
                                events.push(e);
                            }
                        }
                        Delivery::Synced => {
                            // What was queued before the marker is handled before it is seen.
                            if !hand_over(&mut handler, &task_state, &mut events).await {
                                return;
                            }
                            task_state.synced.send_replace(true);
                        }
                    }
                }
                if !hand_over(&mut handler, &task_state, &mut events).await {
                    return;
                }
            }
        });
        ListenerHandle {
            id,
            state,
            processor: self.clone(),
            task,
        }
    }

    fn remove(&self, id: u64) {
        self.listeners.write().retain(|(i, _)| *i != id);
    }
}

/// Hands `events` to `handler` in one call; `false`, and nothing handed, once the listener is
/// closed (removal drops what was queued, including the rest of a batch taken).
async fn hand_over<H: Handler>(
    handler: &mut H,
    state: &ListenerState,
    events: &mut Vec<Event>,
) -> bool {
    if state.listener.is_closed() {
        events.clear();
        return false;
    }
    if !events.is_empty() {
        let n = events.len() as u64;
        handler.handle_batch(std::mem::take(events)).await;
        state.delivered.fetch_add(n, Ordering::Relaxed);
    }
    true
}

/// One listener's counters at the moment they were read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerStats {
    /// The name given at registration.
    pub name: String,
    /// Events queued and not yet handled (after coalescing).
    pub backlog: usize,
    /// Events offered to the listener, before coalescing.
    pub received: u64,
    /// Events handled.
    pub delivered: u64,
}

/// One handler's queue figures, read when asked; cheap to clone and keep (for metrics).
#[derive(Clone)]
pub struct ListenerGauges(Arc<ListenerState>);

impl ListenerGauges {
    /// Events queued and not yet handled (after coalescing).
    pub fn backlog(&self) -> usize {
        self.0.listener.backlog()
    }

    /// Events offered, before coalescing.
    pub fn received(&self) -> u64 {
        self.0.listener.received()
    }

    /// See [`ListenerHandle::handled_through`].
    pub fn handled_through(&self) -> Option<u64> {
        self.0.handled_through()
    }

    /// See [`ListenerHandle::handled_through_version`].
    pub fn handled_through_version(&self) -> Option<u64> {
        self.0.handled_through_version()
    }

    /// Whether the handler was removed.
    pub fn is_closed(&self) -> bool {
        self.0.listener.is_closed()
    }
}

/// Queues events for one handler alone, past its [`EventFilter`]: for a filter whose answer
/// for existing objects changes (a namespace that starts or stops being selected), the adds
/// and deletes that change stands for. Call it where the change is ordered against the
/// informer's own events, i.e. inside the store's
/// [`read_consistent`](crate::store::Store::read_consistent), so the handler never sees an
/// object's update before its add or after its delete. Events for a removed handler are
/// dropped.
#[derive(Clone)]
pub struct Injector(Arc<ListenerState>);

impl Injector {
    /// Queues `event`, coalesced with what is pending for its key like any other.
    pub fn push(&self, event: Event) {
        self.0.listener.push(event);
    }

    /// Queues `event` like [`push`](Self::push), unless the handler's [`EventFilter`] rejects
    /// its object now; whether it was queued.
    pub fn offer(&self, event: Event) -> bool {
        let accepted = self.0.accepts(&event.object);
        if accepted {
            self.0.listener.push(event);
        }
        accepted
    }
}

impl std::fmt::Debug for Injector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Injector").field(&self.0.name).finish()
    }
}

/// A registered handler: its synced signal, backlog gauge and removal.
///
/// Dropping the handle does not unregister the handler; call [`remove`](Self::remove).
pub struct ListenerHandle {
    id: u64,
    state: Arc<ListenerState>,
    processor: Arc<SharedProcessor>,
    task: JoinHandle<()>,
}

impl ListenerHandle {
    /// The name given at registration.
    pub fn name(&self) -> &str {
        &self.state.name
    }

    /// Events queued for this handler and not yet handled (after coalescing).
    pub fn backlog(&self) -> usize {
        self.state.listener.backlog()
    }

    /// Events offered to this handler so far, before coalescing.
    pub fn received(&self) -> u64 {
        self.state.listener.received()
    }

    /// Events handled so far.
    pub fn delivered(&self) -> u64 {
        self.state.delivered.load(Ordering::Relaxed)
    }

    /// Every change numbered up to this has been handled by this handler or was not for it
    /// (see [`crate::cursor`]); `None` while its replay from nothing is pending.
    pub fn handled_through(&self) -> Option<u64> {
        self.state.handled_through()
    }

    /// The handler's version watermark: every change with a numeric resourceVersion up to
    /// this that reached it has been handled (see [`crate::cursor`]), never below the
    /// registration's `floor_version`. `None` for a handler registered without a cursor, once
    /// removed, once any resourceVersion seen is not a number, and while nothing is known (no
    /// list completed, nothing handled, no floor given).
    pub fn handled_through_version(&self) -> Option<u64> {
        self.state.handled_through_version()
    }

    /// Whether this handler has handled its whole initial replay (or first list).
    pub fn is_synced(&self) -> bool {
        *self.state.synced.borrow()
    }

    /// Waits until [`is_synced`](Self::is_synced).
    pub async fn wait_synced(&self) {
        let mut rx = self.state.synced.subscribe();
        // The sender lives in `state`, which we hold, so this cannot fail.
        let _ = rx.wait_for(|s| *s).await;
    }

    /// Whether the handler's task has ended (removed, or its handler panicked).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    pub(crate) fn state(&self) -> &Arc<ListenerState> {
        &self.state
    }

    /// A view of this handler's queue figures that can be kept apart from the handle.
    pub fn gauges(&self) -> ListenerGauges {
        ListenerGauges(self.state.clone())
    }

    /// Queues events for this handler alone (see [`Injector`]).
    pub fn injector(&self) -> Injector {
        Injector(self.state.clone())
    }

    /// Unregisters the handler; queued events are dropped and its task ends.
    pub fn remove(self) {
        self.detach();
    }

    /// Unregisters the handler and waits until its in-flight event (if any) is finished, so a
    /// replacement registered afterwards never overlaps with it.
    pub async fn shutdown(self) {
        self.detach();
        let _ = self.task.await;
    }

    /// Unregisters the handler after it got `Deleted` (final state unknown) for every object
    /// of `store` its filter accepts and it has not seen deleted yet, and waits until it handled
    /// them: for a resource that goes away (its CRD deleted), whose watch will report no more.
    /// Detached under the store's lock, so each object's delete comes from the watch or from
    /// here, never both; `store` must be the store of the informer this handler listens to.
    pub async fn retire(self, store: &Store) {
        store.read_consistent(|_, objects| {
            self.processor.remove(self.id);
            for o in objects {
                self.state.offer(Event::deleted(o.clone(), true));
            }
            self.state.listener.finish();
        });
        let _ = self.task.await;
    }

    fn detach(&self) {
        self.processor.remove(self.id);
        self.state.listener.close();
    }
}
