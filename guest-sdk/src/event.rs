//! One event as a plugin sees it.

use std::cell::OnceCell;
use std::fmt;
use std::rc::Rc;

use serde::de::DeserializeOwned;

use crate::Resource;
use crate::wit::informant::plugin::types as wit;

/// What happened to the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// New to this plugin: created, seen in a relist, or part of a replay.
    Added,
    /// Changed; [`Event::old_json`] holds the version the plugin saw before.
    Updated,
    /// Gone; the object is its final state, or the last known one if [`Event::final_state_unknown`].
    Deleted,
    /// A periodic re-delivery of the current object.
    Resync,
}

impl EventType {
    /// Lower-case name: `added`, `updated`, `deleted` or `resync`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "added",
            EventType::Updated => "updated",
            EventType::Deleted => "deleted",
            EventType::Resync => "resync",
        }
    }

    fn from_wit(t: wit::EventType) -> Self {
        match t {
            wit::EventType::Added => EventType::Added,
            wit::EventType::Updated => EventType::Updated,
            wit::EventType::Deleted => EventType::Deleted,
            wit::EventType::Resync => EventType::Resync,
        }
    }
}

/// Shows the lower-case name.
impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An object's JSON: fetched from the host the first time it is read (then kept), or text the
/// test harness built.
#[derive(Clone)]
pub(crate) struct Json(Rc<Source>);

enum Source {
    Host {
        handle: wit::Object,
        text: OnceCell<String>,
    },
    Text(String),
}

impl Json {
    /// JSON text already at hand.
    pub(crate) fn text(text: String) -> Self {
        Json(Rc::new(Source::Text(text)))
    }

    fn host(handle: wit::Object) -> Self {
        Json(Rc::new(Source::Host {
            handle,
            text: OnceCell::new(),
        }))
    }

    fn get(&self) -> &str {
        match &*self.0 {
            Source::Host { handle, text } => text.get_or_init(|| handle.json()),
            Source::Text(text) => text,
        }
    }
}

/// Shows the JSON if it was read, without fetching it.
impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.0 {
            Source::Host { text, .. } => match text.get() {
                Some(t) => fmt::Debug::fmt(t, f),
                None => f.write_str("<not fetched>"),
            },
            Source::Text(t) => fmt::Debug::fmt(t, f),
        }
    }
}

/// One event for one plugin.
///
/// The metadata is parsed by the host; the object itself stays in the host until this plugin
/// reads it ([`Event::json`], [`Event::object`], [`Event::value`]): a plugin that needs only the
/// metadata never has the JSON copied in, let alone parsed.
#[derive(Debug, Clone)]
pub struct Event {
    pub(crate) event_type: EventType,
    pub(crate) resource: Resource,
    pub(crate) meta: wit::ObjectMeta,
    pub(crate) object: Json,
    pub(crate) old_object: Option<Json>,
    pub(crate) initial: bool,
    pub(crate) final_state_unknown: bool,
}

impl Event {
    /// Wraps the record the host passed to `handle`.
    #[doc(hidden)]
    pub fn from_wit(e: wit::Event) -> Self {
        Event {
            event_type: EventType::from_wit(e.event_type),
            resource: Resource::from_wit(e.resource),
            meta: e.meta,
            object: Json::host(e.object),
            old_object: e.old_object.map(Json::host),
            initial: e.initial,
            final_state_unknown: e.final_state_unknown,
        }
    }

    /// What happened.
    pub fn event_type(&self) -> EventType {
        self.event_type
    }

    /// The kind of the object.
    pub fn resource(&self) -> &Resource {
        &self.resource
    }

    /// The object's metadata, parsed by the host.
    pub fn meta(&self) -> Meta<'_> {
        Meta(&self.meta)
    }

    /// The object as JSON (managedFields removed); fetched from the host on first use.
    pub fn json(&self) -> &str {
        self.object.get()
    }

    /// For `updated`: the previous version as JSON; fetched from the host on first use.
    pub fn old_json(&self) -> Option<&str> {
        self.old_object.as_ref().map(Json::get)
    }

    /// Part of an initial replay (first list, new plugin, reload, instance restart).
    pub fn is_initial(&self) -> bool {
        self.initial
    }

    /// For `deleted`: inferred from a relist, so the object is the last state the host saw.
    pub fn final_state_unknown(&self) -> bool {
        self.final_state_unknown
    }

    /// Decodes the object, e.g. into a `k8s-openapi` type or `serde_json::Value`.
    pub fn object<T: DeserializeOwned>(&self) -> Result<T, String> {
        decode(self.json(), "object", self)
    }

    /// Decodes the previous version; `None` unless this is an update.
    pub fn old_object<T: DeserializeOwned>(&self) -> Result<Option<T>, String> {
        self.old_json()
            .map(|json| decode(json, "old object", self))
            .transpose()
    }

    /// The object as a `serde_json::Value`.
    pub fn value(&self) -> Result<serde_json::Value, String> {
        self.object()
    }
}

fn decode<T: DeserializeOwned>(json: &str, what: &str, ev: &Event) -> Result<T, String> {
    serde_json::from_str(json).map_err(|e| {
        format!(
            "{} {}: cannot decode the {what} as {}: {e}",
            ev.resource,
            ev.meta().key(),
            std::any::type_name::<T>()
        )
    })
}

/// The metadata most plugins need, borrowed from the event.
#[derive(Debug, Clone, Copy)]
pub struct Meta<'a>(&'a wit::ObjectMeta);

impl<'a> Meta<'a> {
    /// Absent for cluster-scoped objects.
    pub fn namespace(&self) -> Option<&'a str> {
        self.0.namespace.as_deref()
    }

    /// The object's name.
    pub fn name(&self) -> &'a str {
        &self.0.name
    }

    /// The object's uid.
    pub fn uid(&self) -> &'a str {
        &self.0.uid
    }

    /// The object's resourceVersion.
    pub fn resource_version(&self) -> &'a str {
        &self.0.resource_version
    }

    /// Labels, sorted by key.
    pub fn labels(&self) -> &'a [(String, String)] {
        &self.0.labels
    }

    /// One label's value.
    pub fn label(&self, key: &str) -> Option<&'a str> {
        let labels = &self.0.labels;
        // Sorted by the host; fall back to a scan in case a producer did not sort.
        match labels.binary_search_by(|(k, _)| k.as_str().cmp(key)) {
            Ok(i) => Some(labels[i].1.as_str()),
            Err(_) => labels
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str()),
        }
    }

    /// `namespace/name`, or `name` for cluster-scoped objects: the informer's cache key.
    pub fn key(&self) -> String {
        match self.namespace() {
            Some(ns) => format!("{ns}/{}", self.name()),
            None => self.name().to_string(),
        }
    }
}
