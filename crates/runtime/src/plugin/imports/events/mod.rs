//! The `events` import: the events of the call in hand, each lowered with its object's header;
//! the JSON is copied into the plugin only when it asks for it by the event's id, which answers
//! only while that event is in hand.

pub mod batch;

use std::sync::Arc;

use wasmtime::component::{HasData, Linker};

use crate::informer::{CachedObject, Event, EventType};
use crate::plugin::bindings::{Failure, WitEvent, WitEventType, WitResource, informant};
use crate::telemetry::EventSpan;
use batch::Batch;

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

/// What the `events` import of one instance holds.
pub(crate) struct EventsState {
    /// The events of the `handle-queued` call in progress.
    pub(crate) batch: Batch,
    plugin: Arc<str>,
    tenant: Arc<str>,
}

impl EventsState {
    /// No call in progress yet; events' spans name `plugin` and `tenant`.
    pub(crate) fn new(plugin: Arc<str>, tenant: Arc<str>, batch: Batch) -> Self {
        EventsState {
            batch,
            plugin,
            tenant,
        }
    }
}

/// The `events` import's view of an instance's store.
pub(crate) struct EventsCtx<'a> {
    pub(super) state: &'a mut EventsState,
    /// The span the plugin's outbound requests are children of: the event in hand's.
    pub(super) http_span: &'a mut EventSpan,
}

struct EventsData;

impl HasData for EventsData {
    type Data<'a> = EventsCtx<'a>;
}

/// Adds the `events` import to `linker`, each store's view of it made by `view`.
pub(crate) fn add_to_linker<T: 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> EventsCtx<'_>,
) -> wasmtime::Result<()> {
    informant::plugin::events::add_to_linker::<T, EventsData>(linker, view)
}

impl informant::plugin::events::Host for EventsCtx<'_> {
    fn next(
        &mut self,
        previous: Option<Result<(), Failure>>,
    ) -> wasmtime::Result<Option<WitEvent>> {
        let now = std::time::Instant::now();
        let state = &mut *self.state;
        state.batch.finish(previous, now);
        let (plugin, tenant) = (&state.plugin, &state.tenant);
        let next = state
            .batch
            .take(now, |kind, event| {
                EventSpan::start(plugin, tenant, kind, event, now)
            })
            .map(|(id, kind, event)| wit_event(id, kind, event));
        if crate::telemetry::enabled() {
            // The event's HTTP requests are children of its span.
            *self.http_span = state.batch.span().share();
        }
        Ok(next)
    }

    fn json(&mut self, event: u64) -> wasmtime::Result<String> {
        Ok(self.state.batch.in_hand(event)?.object.json().to_string())
    }

    fn old_json(&mut self, event: u64) -> wasmtime::Result<Option<String>> {
        let event = self.state.batch.in_hand(event)?;
        Ok(event.old_object.as_ref().map(|o| o.json().to_string()))
    }

    fn old_header(&mut self, event: u64) -> wasmtime::Result<Option<Vec<u8>>> {
        let (kind, event) = self.state.batch.in_hand_with_kind(event)?;
        Ok(event.old_object.as_ref().map(|o| header(kind, o)))
    }
}
