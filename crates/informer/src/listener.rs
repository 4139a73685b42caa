//! One handler's queue: bounded by coalescing per object key (client-go's `processorListener`
//! without its unbounded ring).
//!
//! Contract:
//! - Per key, events come out in the order they went in.
//! - A pending `Updated` absorbs later updates of the same key: old object of the first, new
//!   object of the last. `Added` absorbs updates too (the handler never saw the older version).
//! - A `Deleted` is never merged away or dropped; events after it queue behind it.
//! - Hence the queue holds at most one entry per key plus two per delete not yet delivered,
//!   however far the handler falls behind.
//! - Keys are served in the order they first became pending, like DeltaFIFO.
//!
//! A [`Slot::Synced`] marker may be queued between keys; the consumer sees it once everything
//! queued before it was delivered, which is how a handler learns its initial replay is done.
//!
//! A late handler's initial replay is not queued per key: [`Listener::set_replay`] keeps the
//! store's objects as one list of shared pointers, served as `Added (initial)` before anything
//! pushed afterwards. Per key the order still holds (the replayed version, then what changed
//! since), and a replay of 100k objects costs 800 KB instead of 100k queue entries. A first
//! list reaching a handler registered before it arrives the same way: an `Added (initial)` for
//! a key with nothing pending, while nothing else waits, joins the replay instead of the queue.

use std::collections::VecDeque;
use std::collections::hash_map::Entry;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::cursor::{Counted, Opaque, version_of};
use super::event::{Event, EventType};
use super::object::{CachedObject, KeyMap, ObjectKey};

enum Slot {
    Key(ObjectKey),
    Synced,
}

/// What the consumer of a [`Listener`] receives.
#[derive(Debug)]
pub enum Delivery {
    /// The next event.
    Event(Event),
    /// Everything queued before [`Listener::mark_synced`] has been delivered.
    Synced,
}

#[derive(Default)]
struct Queue {
    /// The initial replay, served before `order`.
    replay: VecDeque<Arc<CachedObject>>,
    order: VecDeque<Slot>,
    pending: KeyMap<Pending>,
    len: usize,
    /// Events accepted while open, before coalescing (kept under the lock push already takes).
    received: u64,
    closed: bool,
    /// Accepts nothing more; the consumer ends once it took everything queued.
    finishing: bool,
    /// Whether `seqs`, `versions` and what is in flight are kept (see
    /// [`Listener::track_changes`]).
    tracking: bool,
    /// The store change numbers of the queued entries (each entry's lowest), counted.
    seqs: Counted,
    /// The resourceVersions of the queued entries (each entry's lowest), counted.
    versions: Counted,
    /// The lowest resourceVersion in `replay` (0: none).
    replay_version: u64,
    /// A change whose resourceVersion is not a number was queued: no version watermark.
    opaque: bool,
    /// The lowest change number among the events the consumer took since it last asked for
    /// more: they are being handled.
    in_flight: u64,
    /// The same, in resourceVersions.
    in_flight_version: u64,
}

/// The lower of two numbers where 0 is none.
fn lower(a: u64, b: u64) -> u64 {
    match (a, b) {
        (0, n) | (n, 0) => n,
        (a, b) => a.min(b),
    }
}

impl Queue {
    fn count(&mut self, (seq, version): (u64, u64)) {
        self.seqs.add(seq);
        self.versions.add(version);
    }

    fn uncount(&mut self, (seq, version): (u64, u64)) {
        self.seqs.remove(seq);
        self.versions.remove(version);
    }

    fn taken(&mut self, seq: u64, version: u64) {
        if self.tracking {
            self.in_flight = lower(self.in_flight, seq);
            self.in_flight_version = lower(self.in_flight_version, version);
        }
    }

    /// Notes the resourceVersion of a change queued while tracking.
    fn check_version(&mut self, event: &Event) {
        if event.version == 0 && event.event_type != EventType::Resync {
            self.opaque = true;
        }
    }
}

/// A coalescing, per-key-ordered queue with an async consumer side.
#[derive(Default)]
pub struct Listener {
    queue: Mutex<Queue>,
    notify: Notify,
    /// Mirrors `Queue::closed` so a consumer holding a batch can stop without taking the lock.
    closed: AtomicBool,
}

impl Listener {
    /// An empty, open queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Enqueues an event, merging it into what is already pending for its key.
    pub fn push(&self, event: Event) {
        if self.push_held(event) {
            self.wake();
        }
    }

    /// Enqueues as [`push`](Self::push) does but leaves the consumer asleep; true when it must
    /// be woken ([`wake`](Self::wake)) to see this event. A producer with more events at hand
    /// wakes each consumer once for all of them, not once per event.
    pub fn push_held(&self, event: Event) -> bool {
        let mut guard = self.queue.lock();
        if guard.closed || guard.finishing {
            return false;
        }
        guard.received += 1;
        let q = &mut *guard;
        // The consumer waits only after finding the queue empty, so only the push that ends
        // that needs to wake it.
        let was_empty = q.order.is_empty() && q.replay.is_empty();
        if q.tracking {
            q.check_version(&event);
        }
        if event.initial && event.event_type == EventType::Added && q.order.is_empty() {
            // Nothing queued behind the replay, so serving this from it keeps every ordering
            // promise; a first list of 100k objects then costs a pointer each, not a queue entry.
            if q.tracking {
                q.replay_version = lower(q.replay_version, event.version);
            }
            q.replay.push_back(event.object);
            q.len += 1;
            return was_empty;
        }
        let key = event.key().clone();
        let tracking = q.tracking;
        let (before, after, grew) = match q.pending.entry(key) {
            Entry::Occupied(mut pending) if tracking => {
                let before = pending.get().marks();
                let grew = coalesce(pending.get_mut(), event);
                (before, pending.get().marks(), grew)
            }
            Entry::Occupied(mut pending) => ((0, 0), (0, 0), coalesce(pending.get_mut(), event)),
            Entry::Vacant(slot) => {
                let marks = (event.seq, event.version);
                q.order.push_back(Slot::Key(slot.key().clone()));
                slot.insert(Pending::new(event));
                ((0, 0), marks, true)
            }
        };
        if tracking && before != after {
            q.uncount(before);
            q.count(after);
        }
        if !grew {
            return false;
        }
        q.len += 1;
        was_empty
    }

    /// Wakes the consumer (a permit if it is not waiting yet), after [`push_held`](Self::push_held).
    pub fn wake(&self) {
        self.notify.notify_one();
    }

    /// Makes `objects` the initial replay, delivered as `Added (initial)` before anything pushed
    /// afterwards; replaces any replay not yet delivered.
    pub fn set_replay(&self, objects: Vec<Arc<CachedObject>>) {
        let mut q = self.queue.lock();
        if q.closed {
            return;
        }
        let n = objects.len();
        if q.tracking {
            q.replay_version = 0;
            for o in &objects {
                match version_of(o.resource_version()) {
                    Some(v) => q.replay_version = lower(q.replay_version, v),
                    None => q.opaque = true,
                }
            }
        }
        q.len = q.len - q.replay.len() + n;
        q.received += n as u64;
        q.replay = objects.into();
        drop(q);
        if n > 0 {
            self.notify.notify_one();
        }
    }

    /// Queues a synced marker behind everything pending now.
    pub fn mark_synced(&self) {
        let mut q = self.queue.lock();
        if !q.closed {
            q.order.push_back(Slot::Synced);
            drop(q);
            self.notify.notify_one();
        }
    }

    /// Takes the next delivery without waiting.
    pub fn try_pop(&self) -> Option<Delivery> {
        Self::next(&mut self.queue.lock())
    }

    /// Moves up to `max` deliveries into `out` under one lock, waiting until there is at least
    /// one; `false` (and nothing moved) once the listener is closed, or finishing and drained.
    pub async fn pop_batch(&self, out: &mut Vec<Delivery>, max: usize) -> bool {
        loop {
            {
                let mut q = self.queue.lock();
                if q.closed {
                    return false;
                }
                // Asking for more means the batch taken before has been handled.
                q.in_flight = 0;
                q.in_flight_version = 0;
                while out.len() < max {
                    match Self::next(&mut q) {
                        Some(d) => out.push(d),
                        None => break,
                    }
                }
            }
            if !out.is_empty() {
                return true;
            }
            if self.queue.lock().finishing {
                return false;
            }
            self.notify.notified().await;
        }
    }

    fn next(q: &mut Queue) -> Option<Delivery> {
        if let Some(o) = q.replay.pop_front() {
            q.len -= 1;
            let event = Event::added(o, true);
            if q.replay.is_empty() {
                // A replay's buffer is as large as the cache: give it back once served.
                q.replay = VecDeque::new();
                // Until its last object is handled, the one in flight holds the watermark.
                q.taken(0, q.replay_version);
                q.replay_version = 0;
            }
            return Some(Delivery::Event(event));
        }
        loop {
            match q.order.front()? {
                Slot::Synced => {
                    q.order.pop_front();
                    return Some(Delivery::Synced);
                }
                Slot::Key(key) => {
                    // One lookup for the usual single pending event: take the entry out, and
                    // put it back only if more events wait behind a delete.
                    let Some(mut events) = q.pending.remove(key) else {
                        q.order.pop_front();
                        continue;
                    };
                    let before = if q.tracking { events.marks() } else { (0, 0) };
                    let event = match events.rest.pop_front() {
                        None => {
                            // Only now does the key leave the front: later events for it must
                            // queue behind the ones being delivered, never beside them.
                            q.order.pop_front();
                            if q.tracking {
                                q.uncount(before);
                            }
                            events.first
                        }
                        Some(next) => {
                            let event = std::mem::replace(&mut events.first, next);
                            let key = key.clone();
                            if q.tracking {
                                q.uncount(before);
                                q.count(events.marks());
                            }
                            q.pending.insert(key, events);
                            event
                        }
                    };
                    q.taken(event.seq, event.version);
                    q.len -= 1;
                    return Some(Delivery::Event(event));
                }
            }
        }
    }

    /// Keeps, from now on, which store changes (and resourceVersions) are queued or being
    /// handled, for [`Listener::lowest_unhandled`] and [`Listener::lowest_unhandled_version`];
    /// off by default, as it costs a little on every event.
    pub fn track_changes(&self) {
        let mut q = self.queue.lock();
        if !q.tracking {
            q.tracking = true;
            let marks: Vec<(u64, u64)> = q.pending.values().map(Pending::marks).collect();
            for m in marks {
                q.count(m);
            }
            let replay = q.replay.iter().map(|o| version_of(o.resource_version()));
            let (lowest, opaque) = replay.fold((0, false), |(low, opaque), v| match v {
                Some(v) => (lower(low, v), opaque),
                None => (low, true),
            });
            q.replay_version = lowest;
            q.opaque |= opaque;
        }
    }

    /// The lowest store change number queued or being handled (see
    /// [`Listener::track_changes`]); `None` when no numbered change is.
    pub fn lowest_unhandled(&self) -> Option<u64> {
        let q = self.queue.lock();
        let in_flight = (q.in_flight != 0).then_some(q.in_flight);
        q.seqs.lowest().into_iter().chain(in_flight).min()
    }

    /// The lowest resourceVersion queued (the initial replay included) or being handled (see
    /// [`Listener::track_changes`]): `Ok(None)` when none is, [`Opaque`] once a change whose
    /// resourceVersion is not a number was queued.
    pub(crate) fn lowest_unhandled_version(&self) -> Result<Option<u64>, Opaque> {
        let q = self.queue.lock();
        if q.opaque {
            return Err(Opaque);
        }
        let lowest = lower(
            lower(q.replay_version, q.in_flight_version),
            q.versions.lowest().unwrap_or(0),
        );
        Ok((lowest != 0).then_some(lowest))
    }

    /// Events waiting to be delivered (after coalescing).
    pub fn backlog(&self) -> usize {
        self.queue.lock().len
    }

    /// Events pushed while open, before coalescing: what the handler was offered.
    pub fn received(&self) -> u64 {
        self.queue.lock().received
    }

    /// Distinct keys with pending events.
    pub fn pending_keys(&self) -> usize {
        self.queue.lock().pending.len()
    }

    /// Stops accepting events; the consumer drains what is queued, then ends.
    pub fn finish(&self) {
        self.queue.lock().finishing = true;
        self.notify.notify_one();
    }

    /// Stops accepting events and wakes the consumer, which drains nothing more.
    pub fn close(&self) {
        let mut q = self.queue.lock();
        q.closed = true;
        self.closed.store(true, Ordering::Release);
        q.replay = VecDeque::new();
        q.order.clear();
        q.pending.clear();
        q.seqs.clear();
        q.versions.clear();
        q.replay_version = 0;
        q.in_flight = 0;
        q.in_flight_version = 0;
        q.len = 0;
        drop(q);
        self.notify.notify_one();
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

/// One key's pending events: nearly always one, kept inline so a push allocates nothing; more
/// only behind a delete.
struct Pending {
    first: Event,
    rest: VecDeque<Event>,
}

impl Pending {
    /// The lowest store change number and the lowest resourceVersion among these events (0:
    /// none).
    fn marks(&self) -> (u64, u64) {
        std::iter::once(&self.first)
            .chain(&self.rest)
            .fold((0, 0), |(s, v), e| (lower(s, e.seq), lower(v, e.version)))
    }

    fn new(first: Event) -> Self {
        Pending {
            first,
            rest: VecDeque::new(),
        }
    }
}

/// Folds `next` into the events pending for its key; returns whether the queue grew.
fn coalesce(events: &mut Pending, next: Event) -> bool {
    use EventType::*;
    let (next_seq, next_version) = (next.seq, next.version);
    let last = events.rest.back_mut().unwrap_or(&mut events.first);
    match (last.event_type, next.event_type) {
        // Deletes are kept, and nothing merges across one.
        (Deleted, _) | (_, Deleted) => {
            events.rest.push_back(next);
            return true;
        }
        // The handler has not seen `last` yet, so it still needs it as an add.
        (Added, Updated | Added) => last.object = next.object,
        // Old of the first, new of the last.
        (Updated, Updated | Added) => last.object = next.object,
        // A resync carries the object the handler already has: it is the update's "old".
        (Resync, Updated) => {
            let old = std::mem::replace(&mut last.object, next.object);
            last.old_object = Some(next.old_object.unwrap_or(old));
            last.event_type = Updated;
        }
        (Resync, Added) => *last = next,
        (Resync, Resync) => last.object = next.object,
        // A pending add or update already delivers the current state.
        (Added | Updated, Resync) => {}
    }
    // The merged event stands for every change it absorbed, the earliest included.
    last.seq = lower(last.seq, next_seq);
    last.version = lower(last.version, next_version);
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::CachedObject;
    use kube::core::{ApiResource, GroupVersionKind};
    use std::sync::Arc;

    fn obj(name: &str, rv: u64) -> Arc<CachedObject> {
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        let json = format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}}}}"#
        );
        Arc::new(CachedObject::from_json(&json, &ar, true).unwrap())
    }

    fn drain(l: &Listener) -> Vec<Event> {
        std::iter::from_fn(|| l.try_pop())
            .filter_map(|d| match d {
                Delivery::Event(e) => Some(e),
                Delivery::Synced => None,
            })
            .collect()
    }

    /// `Type name rv[ initial]`, or `synced`.
    fn describe(d: Delivery) -> String {
        match d {
            Delivery::Event(e) => format!(
                "{:?} {} {}{}",
                e.event_type,
                e.object.name(),
                e.object.resource_version(),
                if e.initial { " initial" } else { "" }
            ),
            Delivery::Synced => "synced".into(),
        }
    }

    fn rv(o: &Option<Arc<CachedObject>>) -> Option<&str> {
        o.as_deref().map(CachedObject::resource_version)
    }

    #[test]
    fn stalled_handler_stays_bounded_and_sees_final_state() {
        let l = Listener::new();
        let keys = 1_000u64;
        let mut latest = vec![0u64; keys as usize];
        for k in 0..keys {
            l.push(Event::added(obj(&format!("k{k}"), k + 1), false));
            latest[k as usize] = k + 1;
        }
        // 100k updates over 1k keys, one delete every 1,000 updates, while nothing is consumed.
        let mut deleted = Vec::new();
        let mut rv_next = keys + 1;
        for i in 0..100_000u64 {
            let k = (i * 7919) % keys;
            let name = format!("k{k}");
            if i % 1_000 == 999 {
                l.push(Event::deleted(obj(&name, rv_next), false));
                deleted.push((name.clone(), rv_next));
                rv_next += 1;
                l.push(Event::added(obj(&name, rv_next), false));
            } else {
                let old = obj(&name, latest[k as usize]);
                l.push(Event::updated(old, obj(&name, rv_next)));
            }
            latest[k as usize] = rv_next;
            rv_next += 1;
            assert!(l.pending_keys() <= keys as usize);
            assert!(l.backlog() <= keys as usize + 2 * deleted.len());
        }

        let events = drain(&l);
        assert_eq!(l.backlog(), 0);
        assert!(events.len() <= keys as usize + 2 * deleted.len());

        // Every delete survived, with its own final state.
        let got_deletes: Vec<(String, u64)> = events
            .iter()
            .filter(|e| e.event_type == EventType::Deleted)
            .map(|e| {
                (
                    e.object.name().to_string(),
                    e.object.resource_version().parse().unwrap(),
                )
            })
            .collect();
        let mut want = deleted.clone();
        want.sort();
        let mut got = got_deletes;
        got.sort();
        assert_eq!(got, want);

        // The last event per key carries its final state, and per key order is kept.
        let mut last_rv: std::collections::HashMap<String, u64> = Default::default();
        for e in &events {
            let r: u64 = e.object.resource_version().parse().unwrap();
            let prev = last_rv.insert(e.object.name().to_string(), r);
            assert!(
                prev.is_none_or(|p| p < r),
                "out of order for {}",
                e.object.name()
            );
        }
        for k in 0..keys {
            assert_eq!(
                last_rv[&format!("k{k}")],
                latest[k as usize],
                "final state of k{k}"
            );
        }
    }

    #[test]
    fn updates_merge_old_of_first_new_of_last() {
        let l = Listener::new();
        l.push(Event::updated(obj("a", 1), obj("a", 2)));
        l.push(Event::updated(obj("a", 2), obj("a", 3)));
        l.push(Event::updated(obj("a", 3), obj("a", 4)));
        let e = drain(&l);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].event_type, EventType::Updated);
        assert_eq!(rv(&e[0].old_object), Some("1"));
        assert_eq!(e[0].object.resource_version(), "4");
    }

    #[test]
    fn add_then_update_is_one_add_and_delete_breaks_merging() {
        let l = Listener::new();
        l.push(Event::added(obj("a", 1), false));
        l.push(Event::updated(obj("a", 1), obj("a", 2)));
        l.push(Event::deleted(obj("a", 3), false));
        l.push(Event::added(obj("a", 4), false));
        l.push(Event::updated(obj("a", 4), obj("a", 5)));
        let e: Vec<_> = drain(&l)
            .into_iter()
            .map(|e| (e.event_type, e.object.resource_version().to_string()))
            .collect();
        assert_eq!(
            e,
            vec![
                (EventType::Added, "2".into()),
                (EventType::Deleted, "3".into()),
                (EventType::Added, "5".into()),
            ]
        );
    }

    #[test]
    fn resync_folds_into_pending_and_becomes_old() {
        let l = Listener::new();
        l.push(Event::resync(obj("a", 1)));
        l.push(Event::resync(obj("a", 1)));
        l.push(Event::updated(obj("a", 1), obj("a", 2)));
        l.push(Event::resync(obj("a", 2)));
        let e = drain(&l);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].event_type, EventType::Updated);
        assert_eq!(rv(&e[0].old_object), Some("1"));
        assert_eq!(e[0].object.resource_version(), "2");
    }

    #[test]
    fn keys_served_in_first_pending_order_and_requeued_behind() {
        let l = Listener::new();
        l.push(Event::added(obj("a", 1), false));
        l.push(Event::added(obj("b", 2), false));
        l.push(Event::deleted(obj("a", 3), false));
        // Take a's add: its delete is still pending and keeps a at the front.
        let first = drain_one(&l);
        assert_eq!(
            (first.object.name(), first.event_type),
            ("a", EventType::Added)
        );
        let second = drain_one(&l);
        assert_eq!(
            (second.object.name(), second.event_type),
            ("a", EventType::Deleted)
        );
        l.push(Event::added(obj("a", 4), false));
        let rest: Vec<_> = drain(&l)
            .iter()
            .map(|e| e.object.name().to_string())
            .collect();
        assert_eq!(rest, ["b", "a"]);
    }

    fn drain_one(l: &Listener) -> Event {
        match l.try_pop() {
            Some(Delivery::Event(e)) => e,
            other => panic!("expected an event, got {other:?}"),
        }
    }

    #[test]
    fn synced_marker_comes_after_what_was_queued_before_it() {
        let l = Listener::new();
        l.push(Event::added(obj("a", 1), true));
        l.mark_synced();
        l.push(Event::added(obj("b", 2), false));
        // b's later update merges into b, which sits after the marker.
        assert!(matches!(l.try_pop(), Some(Delivery::Event(e)) if e.object.name() == "a"));
        assert!(matches!(l.try_pop(), Some(Delivery::Synced)));
        assert!(matches!(l.try_pop(), Some(Delivery::Event(e)) if e.object.name() == "b"));
        assert!(l.try_pop().is_none());
    }

    #[test]
    fn replay_comes_first_and_later_changes_follow_it_per_key() {
        let l = Listener::new();
        l.set_replay(vec![obj("a", 2), obj("b", 3)]);
        l.mark_synced();
        l.push(Event::updated(obj("a", 2), obj("a", 4)));
        l.push(Event::deleted(obj("b", 5), false));
        assert_eq!((l.backlog(), l.received()), (4, 4));
        let got: Vec<String> = std::iter::from_fn(|| l.try_pop()).map(describe).collect();
        assert_eq!(
            got,
            [
                "Added a 2 initial",
                "Added b 3 initial",
                "synced",
                "Updated a 4",
                "Deleted b 5",
            ]
        );
        assert_eq!(l.backlog(), 0);
    }

    #[test]
    fn a_first_list_joins_the_replay_instead_of_the_queue() {
        let l = Listener::new();
        for i in 0..1_000u64 {
            l.push(Event::added(obj(&format!("k{i}"), i + 1), true));
        }
        assert_eq!(l.pending_keys(), 0, "a first list costs no queue entries");
        assert_eq!((l.backlog(), l.received()), (1_000, 1_000));
        l.mark_synced();
        l.push(Event::updated(obj("k7", 8), obj("k7", 2_000)));
        // An initial add behind the marker must not jump ahead of it.
        l.push(Event::added(obj("late", 2_001), true));
        let got: Vec<String> = std::iter::from_fn(|| l.try_pop()).map(describe).collect();
        assert_eq!(got.len(), 1_003);
        assert_eq!(got[0], "Added k0 1 initial");
        assert_eq!(got[999], "Added k999 1000 initial");
        assert_eq!(
            got[1_000..],
            ["synced", "Updated k7 2000", "Added late 2001 initial"]
        );
        assert_eq!(l.backlog(), 0);
    }

    #[tokio::test]
    async fn a_batch_takes_what_is_there_and_close_ends_it() {
        let l = Arc::new(Listener::new());
        l.set_replay((0..10).map(|i| obj(&format!("r{i}"), i)).collect());
        let mut batch = Vec::new();
        assert!(l.pop_batch(&mut batch, 4).await);
        assert_eq!(batch.len(), 4);
        batch.clear();
        assert!(l.pop_batch(&mut batch, 100).await);
        assert_eq!(batch.len(), 6);
        batch.clear();
        let waiter = {
            let l = l.clone();
            tokio::spawn(async move {
                let mut batch = Vec::new();
                l.pop_batch(&mut batch, 8).await
            })
        };
        l.close();
        assert!(!waiter.await.unwrap(), "closed while waiting");
    }

    #[tokio::test]
    async fn pop_waits_for_push_and_ends_on_close() {
        let l = Arc::new(Listener::new());
        let consumer = {
            let l = l.clone();
            tokio::spawn(async move {
                let mut names = Vec::new();
                let mut batch = Vec::new();
                // One at a time: every push must wake a consumer that found the queue empty.
                while l.pop_batch(&mut batch, 1).await {
                    if let Some(Delivery::Event(e)) = batch.pop() {
                        names.push(e.object.name().to_string());
                        if names.len() == 2 {
                            l.close();
                        }
                    }
                }
                names
            })
        };
        l.push(Event::added(obj("a", 1), false));
        l.push(Event::added(obj("b", 2), false));
        assert_eq!(consumer.await.unwrap(), ["a", "b"]);
        l.push(Event::added(obj("c", 3), false));
        assert_eq!(l.backlog(), 0, "a closed listener takes nothing");
    }
}
