//! Re-driving a dead letter: the object it names, as the informer's cache has it now, queued
//! again for the plugin that failed it.
//!
//! Contract:
//! - The event goes into the plugin's own queue on that informer, through its filter, so it is
//!   coalesced with whatever is pending for the object and delivered like any other event
//!   (gate, budget, retries, dead letters).
//! - It carries the object's current state, not the failed version: an add or an update is
//!   delivered again as what it was (an update without its old state), a resync as a resync.
//! - Queued while the store excludes writers, so it is ordered exactly between the informer's
//!   own events for the object.
//! - What cannot be delivered again says why ([`NotRedriven`]) and is left alone: an object
//!   gone since (its deletion was an event of its own), a deleted object that came back (its
//!   add was), a deletion whose last state is not kept, a watch that no longer covers it.

use crate::informer::{Event, EventType, ObjectKey};
use crate::plugin::id::PluginId;
use crate::plugin::load::registry::Registry;

/// Why a dead letter was not delivered again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotRedriven {
    /// The plugin is not running (waiting to load, or removed).
    #[error("the plugin is not running")]
    NotRunning,
    /// The plugin no longer watches the informer the event came from.
    #[error("the plugin no longer watches `{0}`")]
    NotWatched(String),
    /// An add or update whose object is gone: its deletion was delivered as an event of its own.
    #[error("the object is gone; its deletion was delivered as an event of its own")]
    Gone,
    /// A deletion whose object was created again: the add was delivered as an event of its own.
    #[error("the object was created again; its add was delivered as an event of its own")]
    Recreated,
    /// A deletion whose object is still gone: its last state is not kept, so there is nothing
    /// to deliver it with.
    #[error("the object is still deleted and its last state is not kept")]
    NoLastState,
    /// The plugin's watch (its namespaces, its tenant's grant) no longer selects the object.
    #[error("the plugin's watch no longer selects the object")]
    Filtered,
    /// The letter names an event type this host does not know.
    #[error("unknown event type `{0}`")]
    UnknownEvent(String),
}

/// The running or waiting plugin in `registry` whose id (`tenant/name`, or `name` for a
/// top-level one) is exactly `plugin`: nothing in it is resolved or decoded.
pub(super) fn find_plugin(registry: &Registry, plugin: &str) -> Option<PluginId> {
    let entries = registry.read();
    let known = entries.iter().filter(|(_, e)| e.is_known());
    known
        .map(|(id, _)| id)
        .find(|id| id.to_string() == plugin)
        .cloned()
}

/// Queues `key` (`namespace/name` or `name`) on `informer` (an informer id) again for the
/// running plugin `id` in `registry`, as an event of type `event` (`added`, `updated`,
/// `deleted`, `resync`) carrying the object as the cache has it now.
pub(super) fn redrive(
    registry: &Registry,
    id: &PluginId,
    informer: &str,
    key: &str,
    event: &str,
) -> Result<(), NotRedriven> {
    let event_type = match event {
        "added" => EventType::Added,
        "updated" => EventType::Updated,
        "deleted" => EventType::Deleted,
        "resync" => EventType::Resync,
        other => return Err(NotRedriven::UnknownEvent(other.to_string())),
    };
    let (store, queue) = {
        let entries = registry.read();
        let r = entries
            .get(id)
            .and_then(|e| e.running())
            .ok_or(NotRedriven::NotRunning)?;
        let (_, store, queue) = r
            .queues_by_informer
            .iter()
            .find(|(i, _, _)| i == informer)
            .ok_or_else(|| NotRedriven::NotWatched(informer.to_string()))?;
        (store.clone(), queue.clone())
    };
    let key = match key.split_once('/') {
        Some((ns, name)) => ObjectKey::new(Some(ns), name),
        None => ObjectKey::new(None, key),
    };
    store.read_key_consistent(&key, |now| {
        let again = match (event_type, now) {
            (EventType::Deleted, None) => return Err(NotRedriven::NoLastState),
            (EventType::Deleted, Some(_)) => return Err(NotRedriven::Recreated),
            (_, None) => return Err(NotRedriven::Gone),
            (EventType::Added, Some(o)) => Event::added(o.clone(), false),
            (EventType::Resync, Some(o)) => Event::resync(o.clone()),
            (EventType::Updated, Some(o)) => {
                let mut e = Event::updated(o.clone(), o.clone());
                // The version it changed from is not kept.
                e.old_object = None;
                e
            }
        };
        if queue.offer(again) {
            Ok(())
        } else {
            Err(NotRedriven::Filtered)
        }
    })
}
