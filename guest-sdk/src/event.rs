//! One event as a plugin sees it.

use std::cell::OnceCell;
use std::fmt;
use std::rc::Rc;

use informant_header::{EventHeader, Field};
use serde::de::DeserializeOwned;

use crate::Resource;
use crate::wit::informant::plugin::events;
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

/// An event's object: in the host, read through the event's id (the header, when the event did
/// not bring it, and the JSON each fetched the first time they are read, then kept), or what
/// the test harness built.
#[derive(Clone)]
pub(crate) struct Object(Rc<Source>);

enum Source {
    Host {
        /// The event's id, which the host answers for while the event is in hand.
        event: u64,
        /// The event's previous version rather than its object.
        old: bool,
        head: OnceCell<Head>,
        json: OnceCell<String>,
    },
    // Built by the native test harness only.
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    Given { head: Head, json: String },
}

impl Object {
    /// An object the harness built.
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    pub(crate) fn given(head: Head, json: String) -> Self {
        Object(Rc::new(Source::Given { head, json }))
    }

    /// The object of event `event`, whose header came with it.
    fn host(event: u64, header: Vec<u8>) -> Self {
        Object(Rc::new(Source::Host {
            event,
            old: false,
            head: OnceCell::from(Head::decode(header)),
            json: OnceCell::new(),
        }))
    }

    /// The previous version of event `event`'s object.
    fn host_old(event: u64) -> Self {
        Object(Rc::new(Source::Host {
            event,
            old: true,
            head: OnceCell::new(),
            json: OnceCell::new(),
        }))
    }

    fn json(&self) -> &str {
        match &*self.0 {
            Source::Host {
                event,
                old: false,
                json,
                ..
            } => json.get_or_init(|| events::json(*event)),
            Source::Host {
                event,
                old: true,
                json,
                ..
            } => json.get_or_init(|| {
                events::old_json(*event).expect("the host has the previous version it announced")
            }),
            Source::Given { json, .. } => json,
        }
    }

    fn head(&self) -> &Head {
        match &*self.0 {
            // An old object's: one call for the kind and all the metadata (a call per field
            // would cost more than the fields).
            Source::Host { event, head, .. } => head.get_or_init(|| {
                Head::decode(
                    events::old_header(*event)
                        .expect("the host has the previous version it announced"),
                )
            }),
            Source::Given { head, .. } => head,
        }
    }
}

/// The kind and metadata of an object: the header as the host encoded it
/// ([`informant_header`], the layout `wit/plugin.wit` describes), checked once and read in
/// place. Most plugins read a name or a label per event, so nothing is copied out until a
/// field is asked for.
pub(crate) struct Head {
    header: EventHeader,
    resource: OnceCell<Resource>,
    labels: OnceCell<Vec<(String, String)>>,
}

impl Head {
    /// Checks `bytes`, a header from the host. A header the host's own encoder did not write
    /// breaks the contract, and the event's handling traps with the reason.
    pub(crate) fn decode(bytes: Vec<u8>) -> Head {
        let header =
            EventHeader::decode(bytes).unwrap_or_else(|e| panic!("the host's object header {e}"));
        Head {
            header,
            resource: OnceCell::new(),
            labels: OnceCell::new(),
        }
    }

    /// The header the host would write for `resource` and this metadata.
    #[cfg(test)]
    pub(crate) fn encode<'a>(
        resource: &Resource,
        namespace: Option<&str>,
        name_uid_version: [&str; 3],
        labels: impl IntoIterator<Item = (&'a str, &'a str), IntoIter: Clone>,
    ) -> Head {
        Head::decode(Head::encode_bytes(
            resource,
            namespace,
            name_uid_version,
            labels,
        ))
    }

    /// The header's bytes, as the host writes them: the metadata by
    /// [`informant_header::Metadata::encode`] (labels sorted by key), the kind in front by
    /// [`informant_header::encode`].
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    pub(crate) fn encode_bytes<'a>(
        resource: &Resource,
        namespace: Option<&str>,
        [name, uid, resource_version]: [&str; 3],
        labels: impl IntoIterator<Item = (&'a str, &'a str), IntoIter: Clone>,
    ) -> Vec<u8> {
        let metadata = informant_header::Metadata {
            namespace: namespace.unwrap_or_default(),
            name,
            uid,
            resource_version,
        }
        .encode(labels);
        informant_header::encode(
            [&resource.group, &resource.version, &resource.kind],
            &metadata,
        )
    }

    fn field(&self, field: Field) -> &str {
        self.header.get(field)
    }

    /// The object's kind; built on first use.
    pub(crate) fn resource(&self) -> &Resource {
        self.resource.get_or_init(|| {
            Resource::new(
                self.field(Field::Group),
                self.field(Field::Version),
                self.field(Field::Kind),
            )
        })
    }
}

/// Shows the kind and the metadata.
impl fmt::Debug for Head {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let meta = Meta(self);
        f.debug_struct("Head")
            .field("resource", self.resource())
            .field("namespace", &meta.namespace())
            .field("name", &meta.name())
            .field("uid", &meta.uid())
            .field("resource_version", &meta.resource_version())
            .field("labels", &meta.labels())
            .finish()
    }
}

/// Shows what was read, without fetching anything.
impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let not_fetched = |f: &mut fmt::Formatter<'_>| f.write_str("<not fetched>");
        match &*self.0 {
            Source::Host { head, json, .. } => {
                match head.get() {
                    Some(h) => write!(f, "{} {} ", h.resource(), Meta(h).key())?,
                    None => not_fetched(f)?,
                }
                match json.get() {
                    Some(t) => fmt::Debug::fmt(t, f),
                    None => not_fetched(f),
                }
            }
            Source::Given { head, json } => {
                write!(f, "{} {} {json:?}", head.resource(), Meta(head).key())
            }
        }
    }
}

/// One event for one plugin.
///
/// The event brings the object's kind and metadata (parsed by the host, read in place on the
/// first [`Event::resource`] or [`Event::meta`]); the JSON stays in the host until the first
/// [`Event::json`], [`Event::object`] or [`Event::value`]. A plugin that needs only the
/// metadata never has the JSON copied in, let alone parsed.
#[derive(Debug, Clone)]
pub struct Event {
    pub(crate) event_type: EventType,
    pub(crate) object: Object,
    pub(crate) old_object: Option<Object>,
    pub(crate) initial: bool,
    pub(crate) final_state_unknown: bool,
}

impl Event {
    /// Wraps the record the host handed out through `events.next`.
    #[doc(hidden)]
    pub fn from_wit(e: wit::Event) -> Self {
        Event {
            event_type: EventType::from_wit(e.event_type),
            object: Object::host(e.id, e.header),
            old_object: e.has_old.then(|| Object::host_old(e.id)),
            initial: e.initial,
            final_state_unknown: e.final_state_unknown,
        }
    }

    /// What happened.
    pub fn event_type(&self) -> EventType {
        self.event_type
    }

    /// The kind of the object; fetched from the host with the metadata on first use.
    pub fn resource(&self) -> &Resource {
        self.object.head().resource()
    }

    /// The object's metadata, parsed by the host; fetched with the kind on first use.
    pub fn meta(&self) -> Meta<'_> {
        Meta(self.object.head())
    }

    /// The object as JSON (managedFields removed); fetched from the host on first use.
    pub fn json(&self) -> &str {
        self.object.json()
    }

    /// For `updated`: the previous version as JSON; fetched from the host on first use.
    pub fn old_json(&self) -> Option<&str> {
        self.old_object.as_ref().map(Object::json)
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
    pub fn object<T: DeserializeOwned>(&self) -> Result<T, DecodeError> {
        decode(self.json(), false, self.object.head())
    }

    /// Decodes the previous version; `None` unless this is an update.
    pub fn old_object<T: DeserializeOwned>(&self) -> Result<Option<T>, DecodeError> {
        self.old_json()
            .map(|json| decode(json, true, self.object.head()))
            .transpose()
    }

    /// The object as a `serde_json::Value`.
    pub fn value(&self) -> Result<serde_json::Value, DecodeError> {
        self.object()
    }
}

/// An event's or an admission request's object, or its previous version, did not decode into
/// the type asked for.
// Boxed: a handler's `Result` stays small on its success path.
#[derive(Debug)]
pub struct DecodeError(Box<Decoding>);

#[derive(Debug)]
struct Decoding {
    resource: Resource,
    key: String,
    old: bool,
    type_name: &'static str,
    source: serde_json::Error,
}

impl DecodeError {
    /// The Rust type the JSON was decoded as.
    pub fn type_name(&self) -> &'static str {
        self.0.type_name
    }

    /// Whether it was the previous version ([`Event::old_object`],
    /// [`AdmissionRequest::old_object`](crate::admission::AdmissionRequest::old_object)) that did
    /// not decode.
    pub fn is_old(&self) -> bool {
        self.0.old
    }
}

/// Names the object and the type; `serde_json`'s reason is the source.
impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = &self.0;
        let what = if d.old { "old object" } else { "object" };
        write!(
            f,
            "{} {}: cannot decode the {what} as {}",
            d.resource, d.key, d.type_name
        )
    }
}

impl std::error::Error for DecodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0.source)
    }
}

/// Decodes `json`, an object (`old`: its previous version) whose kind and metadata `head` holds.
pub(crate) fn decode<T: DeserializeOwned>(
    json: &str,
    old: bool,
    head: &Head,
) -> Result<T, DecodeError> {
    serde_json::from_str(json).map_err(|source| {
        DecodeError(Box::new(Decoding {
            resource: head.resource().clone(),
            key: Meta(head).key(),
            old,
            type_name: std::any::type_name::<T>(),
            source,
        }))
    })
}

/// The metadata most plugins need, borrowed from the event or the admission request.
#[derive(Debug, Clone, Copy)]
pub struct Meta<'a>(pub(crate) &'a Head);

impl<'a> Meta<'a> {
    /// Absent for cluster-scoped objects.
    pub fn namespace(&self) -> Option<&'a str> {
        self.0.header.namespace()
    }

    /// The object's name.
    pub fn name(&self) -> &'a str {
        self.0.field(Field::Name)
    }

    /// The object's uid.
    pub fn uid(&self) -> &'a str {
        self.0.field(Field::Uid)
    }

    /// The object's resourceVersion.
    pub fn resource_version(&self) -> &'a str {
        self.0.field(Field::ResourceVersion)
    }

    /// Labels, sorted by key; copied out of the header on first use.
    pub fn labels(&self) -> &'a [(String, String)] {
        let head = self.0;
        head.labels.get_or_init(|| {
            head.header
                .labels()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
    }

    /// One label's value, read in place.
    pub fn label(&self, key: &str) -> Option<&'a str> {
        self.0.header.label(key)
    }

    /// `namespace/name`, or `name` for cluster-scoped objects: the informer's cache key.
    pub fn key(&self) -> String {
        match self.namespace() {
            Some(ns) => format!("{ns}/{}", self.name()),
            None => self.name().to_string(),
        }
    }
}
