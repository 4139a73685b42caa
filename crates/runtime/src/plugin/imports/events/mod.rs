//! The `events` import: the events of the call in hand, each lowered with its object's header;
//! the JSON is copied into the plugin only when it asks for it by the event's id, which answers
//! only while that event is in hand.

pub mod batch;

use crate::informer::{CachedObject, Event, EventType};

use crate::plugin::imports::bindings::{Failure, WitEvent, WitEventType, WitResource, informant};
use crate::plugin::imports::state::State;
use crate::telemetry::EventSpan;

/// Lowers an informer event for `events.next` as event `id`, with the object's header (kind and
/// metadata, which nearly every plugin reads); the JSON and the old version are read only by a
/// plugin that asks (`events.json`, `old-json`, `old-header`).
pub(crate) fn wit_event(id: u64, kind: &WitResource, e: &Event) -> WitEvent {
    WitEvent {
        id,
        event_type: match e.event_type {
            EventType::Added => WitEventType::Added,
            EventType::Updated => WitEventType::Updated,
            EventType::Deleted => WitEventType::Deleted,
            EventType::Resync => WitEventType::Resync,
        },
        header: header(kind, &e.object),
        has_old: e.old_object.is_some(),
        initial: e.initial,
        final_state_unknown: e.final_state_unknown,
    }
}

/// An event's `header` (layout: `informant-header`): the kind, then the cached object's metadata
/// fields exactly as it keeps them.
pub fn header(kind: &WitResource, o: &CachedObject) -> Vec<u8> {
    let kind_fields = [kind.group.as_str(), &kind.version, &kind.kind];
    informant_header::encode(kind_fields, o.metadata_fields())
}

impl informant::plugin::events::Host for State {
    fn next(
        &mut self,
        previous: Option<Result<(), Failure>>,
    ) -> wasmtime::Result<Option<WitEvent>> {
        let now = std::time::Instant::now();
        self.batch.finish(previous, now);
        let (plugin, tenant) = (&self.plugin, &self.tenant);
        let next = self
            .batch
            .take(now, |kind, event| {
                EventSpan::start(plugin, tenant, kind, event, now)
            })
            .map(|(id, kind, event)| wit_event(id, kind, event));
        if crate::telemetry::enabled() {
            // The event's HTTP requests are children of its span.
            self.hooks.span = self.batch.span().share();
        }
        Ok(next)
    }

    fn json(&mut self, event: u64) -> wasmtime::Result<String> {
        Ok(self.batch.in_hand(event)?.object.json().to_string())
    }

    fn old_json(&mut self, event: u64) -> wasmtime::Result<Option<String>> {
        let event = self.batch.in_hand(event)?;
        Ok(event.old_object.as_ref().map(|o| o.json().to_string()))
    }

    fn old_header(&mut self, event: u64) -> wasmtime::Result<Option<Vec<u8>>> {
        let (kind, event) = self.batch.in_hand_with_kind(event)?;
        Ok(event.old_object.as_ref().map(|o| header(kind, o)))
    }
}
