//! The events a handler receives.

use std::sync::Arc;
use std::time::Instant;

use super::object::{CachedObject, ObjectKey};

/// What happened to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventType {
    /// The object is new to this handler (live, after a relist, or in an initial replay).
    Added,
    /// The object changed; `old_object` holds the version the handler saw before.
    Updated,
    /// The object is gone; `object` is its final state, or the last known one when
    /// `final_state_unknown` is set.
    Deleted,
    /// A periodic re-delivery of the current object, requested by the handler's resync period.
    Resync,
}

/// One notification for one handler.
///
/// Objects are shared with the store and with every other handler: they are immutable by
/// construction, so a handler can keep them as long as it likes at no copying cost.
#[derive(Clone, Debug)]
pub struct Event {
    /// What happened.
    pub event_type: EventType,
    /// The object; for deletes, its final (or last known) state.
    pub object: Arc<CachedObject>,
    /// The previous version, for updates only.
    pub old_object: Option<Arc<CachedObject>>,
    /// Part of an initial replay: the first list, or the cache replayed to a late handler.
    pub initial: bool,
    /// A delete inferred from a relist: the object vanished while we were not watching, and
    /// `object` is the last state we saw (client-go's `DeletedFinalStateUnknown`).
    pub final_state_unknown: bool,
    /// When the informer received the change (none for initial events): how long the
    /// event waited in queues shows as the time from here to a handler taking it.
    pub received: Option<Instant>,
    /// The store's number for the change this event reports (see [`Store`](crate::Store)'s
    /// sequence); 0 for events that report no change of the store (replays, resyncs).
    pub seq: u64,
    /// The lowest resourceVersion among the changes this event stands for (an event merged
    /// from several stands for all of them), as a number; 0 when it stands for no change (a
    /// resync) or the resourceVersion is not a number. What a handler's version watermark
    /// (see [`crate::cursor`]) is held below while the event waits.
    pub version: u64,
}

impl Event {
    /// An `Added` event.
    pub fn added(object: Arc<CachedObject>, initial: bool) -> Self {
        Self::new(EventType::Added, object, None, initial, false)
    }
    /// An `Updated` event.
    pub fn updated(old: Arc<CachedObject>, new: Arc<CachedObject>) -> Self {
        Self::new(EventType::Updated, new, Some(old), false, false)
    }
    /// A `Deleted` event.
    pub fn deleted(object: Arc<CachedObject>, final_state_unknown: bool) -> Self {
        Self::new(EventType::Deleted, object, None, false, final_state_unknown)
    }
    /// A `Resync` event.
    pub fn resync(object: Arc<CachedObject>) -> Self {
        Self::new(EventType::Resync, object, None, false, false)
    }

    fn new(
        event_type: EventType,
        object: Arc<CachedObject>,
        old_object: Option<Arc<CachedObject>>,
        initial: bool,
        final_state_unknown: bool,
    ) -> Self {
        let version = match event_type {
            EventType::Resync => 0,
            _ => crate::cursor::version_of(object.resource_version()).unwrap_or(0),
        };
        Event {
            version,
            event_type,
            object,
            old_object,
            initial,
            final_state_unknown,
            received: (!initial).then(Instant::now),
            seq: 0,
        }
    }

    /// This event, numbered `seq` by the store that made it.
    pub fn at(mut self, seq: u64) -> Self {
        self.seq = seq;
        self
    }

    /// This event, standing for changes from resourceVersion `version` on (see
    /// [`Event::version`]).
    pub fn since_version(mut self, version: u64) -> Self {
        self.version = version;
        self
    }

    /// The key of the object this event is about.
    pub fn key(&self) -> &ObjectKey {
        self.object.key()
    }
}
