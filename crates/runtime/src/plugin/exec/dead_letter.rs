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

use crate::informer::{Event, EventType};

/// One event a plugin failed for good.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedEvent {
    /// The object's key (`namespace/name`, or `name`).
    pub key: String,
    /// The object's resource version in the failed event.
    pub resource_version: String,
    /// `added`, `updated`, `deleted` or `resync`.
    pub event: &'static str,
    /// The last error.
    pub error: String,
    /// Deliveries tried, the failed one included.
    pub attempts: u32,
}

impl FailedEvent {
    /// `event`, failed with `error` after `attempts` deliveries.
    pub fn of(event: &Event, error: String, attempts: u32) -> Self {
        FailedEvent {
            key: event.key().as_str().to_string(),
            resource_version: event.object.resource_version().to_string(),
            event: event_name(event.event_type),
            error,
            attempts,
        }
    }
}

/// The name an event type is kept under.
pub fn event_name(t: EventType) -> &'static str {
    match t {
        EventType::Added => "added",
        EventType::Updated => "updated",
        EventType::Deleted => "deleted",
        EventType::Resync => "resync",
    }
}

/// Where one handler's failed events go, bound to its plugin and informer. Called on the
/// event path: it must not block (the durable state only queues them for its writer).
pub type DeadLetterSink = Arc<dyn Fn(FailedEvent) + Send + Sync>;
