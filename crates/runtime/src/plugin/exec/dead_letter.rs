//! Events a plugin failed for good, as the supervisor hands them on to be kept.
//!
//! Contract:
//! - An event whose `retry` answers ran past `max-attempts` is always handed on; with
//!   `retry.dead-letter = "failed"` so is every other event that ends failed: an error the
//!   plugin returned, a trap, a missed deadline, an instance that could not be recreated. A
//!   trap's event is failed for good even though the instance is recreated: nothing delivers
//!   that event again.
//! - Events dropped unseen (quarantine, removal) are not failures of the event and are not
//!   handed on.
//! - The supervisor knows nothing of where they go: whoever registers a handler binds a
//!   [`DeadLetterSink`] to its plugin and informer (the durable state, with `--state-dir`);
//!   without one nothing is kept.

use std::sync::Arc;

use informant_state::DeadLetter;

use crate::informer::{Event, EventType};

/// The name an event type is kept under.
pub(crate) fn event_name(t: EventType) -> &'static str {
    match t {
        EventType::Added => "added",
        EventType::Updated => "updated",
        EventType::Deleted => "deleted",
        EventType::Resync => "resync",
    }
}

/// Where one handler's failed events go, bound to its plugin and informer. Called on the
/// event path: `keep` must not block (the durable state only queues them for its writer).
#[derive(Clone)]
pub struct DeadLetterSink {
    plugin: String,
    informer: String,
    keep: Arc<dyn Fn(DeadLetter) + Send + Sync>,
}

impl DeadLetterSink {
    /// Failed events of `plugin`'s handler on `informer`, handed to `keep`.
    pub fn new(
        plugin: impl Into<String>,
        informer: impl Into<String>,
        keep: Arc<dyn Fn(DeadLetter) + Send + Sync>,
    ) -> Self {
        DeadLetterSink {
            plugin: plugin.into(),
            informer: informer.into(),
            keep,
        }
    }

    /// Hands on `event`, failed for good with `error` after `attempts` deliveries (the failed
    /// one included).
    pub fn send(&self, event: &Event, error: String, attempts: u32) {
        (self.keep)(DeadLetter {
            // The state's writer numbers it.
            id: 0,
            plugin: self.plugin.clone(),
            informer: self.informer.clone(),
            key: event.key().as_str().to_string(),
            resource_version: event.object.resource_version().to_string(),
            event: event_name(event.event_type).to_string(),
            error,
            attempts,
            at_unix_ms: jiff::Timestamp::now().as_millisecond(),
        });
    }
}
