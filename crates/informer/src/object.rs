//! Objects as they come off the wire ([`RawObject`]) and as the cache keeps them ([`CachedObject`]).
//!
//! The watcher decodes into [`RawObject`]: typed metadata, and every other top-level field kept
//! as the server's JSON text ([`RawValue`]) — no `Value` tree is built for spec or status, and
//! none has to be serialized again or freed. The store then turns each version into one
//! immutable [`CachedObject`]: compact JSON (managedFields removed) plus the few parsed fields the
//! built-in indexes need. Every consumer shares that one `Arc<CachedObject>`.
//!
//! `metadata.managedFields` is set aside as text too ([`RawObject::managed_fields`]): typed, it
//! was a tree of entries with `fieldsV1` as a `Value`, costlier to build and free than the rest
//! of the metadata, for a field most caches drop.
//!
//! Raw text comes for free from serde_json's own deserializers, which kube uses for lists and
//! watch lines. When something buffers the object first (a watch line with `object` before
//! `type`), the field falls back to a `Value` and is printed back to text: slower, same result.

use std::fmt;
use std::sync::Arc;

use informant_header::{Field, METADATA_FIXED_FIELDS};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ApiResource, DynamicResourceScope, Resource};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::Value;

mod frozen;

pub(crate) use frozen::Frozen;
pub use frozen::{FROZEN_VERSION, StoredObject};

/// A map by object key. A key carries its hash (see [`ObjectKey`]); foldhash, randomly seeded
/// per process, only mixes that in (SipHash was a measured 2-3 % of the hot path).
pub(crate) type KeyMap<V> = std::collections::HashMap<ObjectKey, V, foldhash::fast::RandomState>;

/// A set of object keys, hashed as [`KeyMap`].
pub(crate) type KeySet = std::collections::HashSet<ObjectKey, foldhash::fast::RandomState>;

/// The cache key of an object: `namespace/name`, or `name` for cluster-scoped objects.
///
/// Cheap to clone (one shared allocation), as it sits in every index entry and queue. Its hash
/// is computed once, when the key is made (with a per-process random seed): every event hashes
/// its key into each handler's queue and out again, and each of those reads of the text was a
/// likely cache miss. Clones compare equal by pointer, without reading the text.
#[derive(Clone)]
pub struct ObjectKey {
    text: Arc<str>,
    hash: u64,
}

impl ObjectKey {
    /// Builds the key client-go's `MetaNamespaceKeyFunc` would.
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        let text: Arc<str> = match namespace {
            Some(ns) if !ns.is_empty() => format!("{ns}/{name}").into(),
            _ => name.into(),
        };
        static SEED: std::sync::LazyLock<foldhash::fast::RandomState> =
            std::sync::LazyLock::new(Default::default);
        let hash = std::hash::BuildHasher::hash_one(&*SEED, &*text);
        ObjectKey { text, hash }
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The namespace part, if the object is namespaced.
    pub fn namespace(&self) -> Option<&str> {
        self.text.split_once('/').map(|(ns, _)| ns)
    }

    /// The name part.
    pub fn name(&self) -> &str {
        self.text.split_once('/').map_or(&self.text, |(_, n)| n)
    }
}

impl PartialEq for ObjectKey {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.text, &other.text) || (self.hash == other.hash && self.text == other.text)
    }
}

impl Eq for ObjectKey {}

/// The hash computed when the key was made.
impl std::hash::Hash for ObjectKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// By text.
impl PartialOrd for ObjectKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// By text.
impl Ord for ObjectKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.text.cmp(&other.text)
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.text, f)
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// An object as decoded from a list or watch response: typed metadata, everything else as JSON.
///
/// Implements [`Resource`] with an [`ApiResource`] dynamic type, so kube-runtime's watcher can
/// list and watch any kind (CRDs included) into it.
#[derive(Clone, Debug, Default)]
pub struct RawObject {
    /// `apiVersion`, as sent by the server (may be absent in list items).
    pub api_version: Option<String>,
    /// `kind`, as sent by the server (may be absent in list items).
    pub kind: Option<String>,
    /// The object's metadata; decoding leaves `managed_fields` out (see below).
    pub metadata: ObjectMeta,
    /// `metadata.managedFields` as the server sent it, as JSON text.
    pub managed_fields: Option<RawJson>,
    /// Every other top-level field (spec, status, data, ...) as JSON text, in the server's order.
    pub fields: Vec<(String, RawJson)>,
}

impl Resource for RawObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> std::borrow::Cow<'_, str> {
        dt.kind.as_str().into()
    }
    fn group(dt: &ApiResource) -> std::borrow::Cow<'_, str> {
        dt.group.as_str().into()
    }
    fn version(dt: &ApiResource) -> std::borrow::Cow<'_, str> {
        dt.version.as_str().into()
    }
    fn api_version(dt: &ApiResource) -> std::borrow::Cow<'_, str> {
        dt.api_version.as_str().into()
    }
    fn plural(dt: &ApiResource) -> std::borrow::Cow<'_, str> {
        dt.plural.as_str().into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl<'de> Deserialize<'de> for RawObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RawVisitor;
        impl<'de> Visitor<'de> for RawVisitor {
            type Value = RawObject;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a Kubernetes object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawObject, A::Error> {
                let mut obj = RawObject::default();
                let mut seen_meta = false;
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "apiVersion" => obj.api_version = map.next_value()?,
                        "kind" => obj.kind = map.next_value()?,
                        "metadata" => {
                            let (metadata, managed_fields) =
                                map.next_value_seed(MetaWithoutManaged)?;
                            obj.metadata = metadata;
                            obj.managed_fields = managed_fields;
                            seen_meta = true;
                        }
                        _ => {
                            let v: RawJson = map.next_value()?;
                            obj.fields.push((key, v));
                        }
                    }
                }
                if !seen_meta {
                    return Err(de::Error::missing_field("metadata"));
                }
                Ok(obj)
            }
        }
        deserializer.deserialize_map(RawVisitor)
    }
}

/// Decodes `ObjectMeta` with its `managedFields` set aside as text.
struct MetaWithoutManaged;

impl<'de> DeserializeSeed<'de> for MetaWithoutManaged {
    type Value = (ObjectMeta, Option<RawJson>);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        let mut managed = None;
        let meta = ObjectMeta::deserialize(SkipManaged {
            inner: deserializer,
            managed: &mut managed,
        })?;
        Ok((meta, managed))
    }
}

/// A deserializer that shows the map it wraps without its `managedFields` entry, which it
/// keeps as text in `managed`.
struct SkipManaged<'m, D> {
    inner: D,
    managed: &'m mut Option<RawJson>,
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for SkipManaged<'_, D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_any(SkipManagedVisitor {
            inner: visitor,
            managed: self.managed,
        })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_map(SkipManagedVisitor {
            inner: visitor,
            managed: self.managed,
        })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

struct SkipManagedVisitor<'m, V> {
    inner: V,
    managed: &'m mut Option<RawJson>,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for SkipManagedVisitor<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.inner.expecting(f)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(SkipManagedMap {
            inner: map,
            managed: self.managed,
        })
    }
}

struct SkipManagedMap<'m, A> {
    inner: A,
    managed: &'m mut Option<RawJson>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for SkipManagedMap<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        while let Some(key) = self.inner.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == "managedFields" {
                *self.managed = self.inner.next_value::<Option<RawJson>>()?;
                continue;
            }
            return seed
                .deserialize(de::value::CowStrDeserializer::<A::Error>::new(key))
                .map(Some);
        }
        Ok(None)
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.inner.next_value_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// One JSON value kept as text, exactly as the server sent it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawJson(Box<str>);

impl RawJson {
    /// The JSON text.
    pub fn get(&self) -> &str {
        &self.0
    }
}

/// serde_json's private name for raw values: asking for it makes serde_json's deserializers hand
/// over the unparsed text. Pinned by `decodes_from_watch_lines_in_either_key_order`.
const SERDE_JSON_RAW_TOKEN: &str = "$serde_json::private::RawValue";

impl<'de> Deserialize<'de> for RawJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RawVisitor;
        impl<'de> Visitor<'de> for RawVisitor {
            type Value = RawJson;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            // serde_json's raw path: a one-entry map whose value is the text.
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawJson, A::Error> {
                match map.next_key::<String>()? {
                    Some(k) if k == SERDE_JSON_RAW_TOKEN => {
                        let text: String = map.next_value()?;
                        Ok(RawJson(text.into_boxed_str()))
                    }
                    _ => Err(de::Error::custom("expected serde_json raw value")),
                }
            }
            // Anything else (buffered content): build the tree and print it.
            fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<RawJson, D::Error> {
                let v = Value::deserialize(d)?;
                Ok(RawJson(v.to_string().into_boxed_str()))
            }
        }
        deserializer.deserialize_newtype_struct(SERDE_JSON_RAW_TOKEN, RawVisitor)
    }
}

impl RawObject {
    /// Parses one top-level field (not metadata) into a tree; for field indexes only.
    pub fn field(&self, name: &str) -> Option<Value> {
        let (_, raw) = self.fields.iter().find(|(k, _)| k == name)?;
        serde_json::from_str(raw.get()).ok()
    }

    /// The whole object as compact JSON: apiVersion, kind, metadata, then the raw fields.
    ///
    /// The text is allocated at its exact length: the cache keeps it for the object's lifetime,
    /// and an allocator may keep a shrunk block at its old size (mimalloc does, down to half).
    pub fn to_json(&self) -> String {
        // ObjectMeta holds only strings, maps and lists: serializing it cannot fail.
        let mut metadata = serde_json::to_string(&self.metadata).unwrap_or_else(|_| "{}".into());
        if let Some(managed) = &self.managed_fields {
            // Back in as sent, as the last field of the metadata object.
            metadata.pop();
            if metadata.len() > 1 {
                metadata.push(',');
            }
            metadata.push_str(r#""managedFields":"#);
            metadata.push_str(managed.get());
            metadata.push('}');
        }
        // Each member's name and value, and whether the value is a string to quote (rather
        // than JSON text as it is): nothing is allocated per member, as this runs per event.
        let members: Vec<(&str, &str, bool)> = [
            ("apiVersion", self.api_version.as_deref(), true),
            ("kind", self.kind.as_deref(), true),
            ("metadata", Some(metadata.as_str()), false),
        ]
        .into_iter()
        .filter_map(|(k, v, quoted)| Some((k, v?, quoted)))
        .chain(
            self.fields
                .iter()
                .map(|(k, v)| (k.as_str(), v.get(), false)),
        )
        .collect();
        // Braces, a colon per member and a comma between members.
        let len = 1 + members
            .iter()
            .map(|(k, v, quoted)| {
                quoted_len(k) + 1 + if *quoted { quoted_len(v) } else { v.len() } + 1
            })
            .sum::<usize>();
        let mut out = String::with_capacity(len);
        out.push('{');
        for (i, (k, v, quoted)) in members.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_quoted(&mut out, k);
            out.push(':');
            if *quoted {
                push_quoted(&mut out, v);
            } else {
                out.push_str(v);
            }
        }
        out.push('}');
        debug_assert_eq!(out.len(), len);
        out
    }

    /// The cache key of this object.
    pub fn key(&self) -> ObjectKey {
        ObjectKey::new(
            self.metadata.namespace.as_deref(),
            self.metadata.name.as_deref().unwrap_or_default(),
        )
    }
}

/// Whether `s` is written as a JSON string between quotes as it is (field names are).
fn needs_no_escape(s: &str) -> bool {
    s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\')
}

/// The length of `s` as a JSON string literal.
fn quoted_len(s: &str) -> usize {
    if needs_no_escape(s) {
        s.len() + 2
    } else {
        Value::from(s).to_string().len()
    }
}

/// Appends `s` as a JSON string literal.
fn push_quoted(out: &mut String, s: &str) {
    if needs_no_escape(s) {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        out.push_str(&Value::from(s).to_string());
    }
}

/// One immutable version of an object as the cache holds it.
///
/// Shared by the store, every index and every handler's queue through `Arc<CachedObject>`; it
/// must never be mutated after construction, which is why it has no `&mut` accessors.
pub struct CachedObject {
    key: ObjectKey,
    /// See [`CachedObject::metadata_fields`]: one allocation instead of one per string, and
    /// what a plugin's event header is made of ([`informant_header::Metadata`]), copied as it is.
    fields: Box<[u8]>,
    label_count: u32,
    /// What the JSON holds that a store's options care about (the flags of the frozen form), so the
    /// frozen form can say whether a restore may keep the JSON as it is.
    flags: u8,
    owner_uids: Box<[Box<str>]>,
    json: Box<str>,
}

/// The fields of `bytes` ([`informant_header::Metadata`] wrote them from `&str`s, so none is
/// ever an error), in order.
fn fields(bytes: &[u8]) -> impl Iterator<Item = &str> {
    informant_header::fields(bytes).map(Result::unwrap_or_default)
}

impl AsRef<str> for CachedObject {
    /// The object's JSON (see [`CachedObject::json`]).
    fn as_ref(&self) -> &str {
        self.json()
    }
}

impl CachedObject {
    /// Freezes a decoded object; `strip_managed_fields` drops `metadata.managedFields` first.
    ///
    /// `api_resource` fills in apiVersion/kind, which list responses omit from their items.
    pub fn from_raw(
        raw: &mut RawObject,
        api_resource: &ApiResource,
        strip_managed_fields: bool,
    ) -> Self {
        if strip_managed_fields {
            raw.metadata.managed_fields = None;
            raw.managed_fields = None;
        }
        if raw.api_version.is_none() {
            raw.api_version = Some(api_resource.api_version.clone());
        }
        if raw.kind.is_none() {
            raw.kind = Some(api_resource.kind.clone());
        }
        let json = raw.to_json().into_boxed_str();
        Self::assemble(raw, json)
    }

    /// A cached object from JSON a cached object held before (a persisted cache) and `raw`,
    /// that JSON parsed: the text is kept as it is when it already is in the cached form,
    /// sparing a serialization per object.
    pub fn from_stored(
        raw: &mut RawObject,
        json: Box<str>,
        api_resource: &ApiResource,
        strip_managed_fields: bool,
    ) -> Self {
        let cached_form = raw.api_version.is_some()
            && raw.kind.is_some()
            && !(strip_managed_fields
                && (raw.metadata.managed_fields.is_some() || raw.managed_fields.is_some()));
        if cached_form {
            Self::assemble(raw, json)
        } else {
            Self::from_raw(raw, api_resource, strip_managed_fields)
        }
    }

    fn assemble(raw: &RawObject, json: Box<str>) -> Self {
        let meta = &raw.metadata;
        // BTreeMap iteration is already sorted by key, as the header's layout says.
        let labels = meta.labels.iter().flatten();
        let fields = informant_header::Metadata {
            namespace: meta.namespace.as_deref().unwrap_or_default(),
            name: meta.name.as_deref().unwrap_or_default(),
            uid: meta.uid.as_deref().unwrap_or_default(),
            resource_version: meta.resource_version.as_deref().unwrap_or_default(),
        }
        .encode(labels.clone().map(|(k, v)| (k.as_str(), v.as_str())));
        let owner_uids = meta
            .owner_references
            .iter()
            .flatten()
            .map(|o| o.uid.as_str().into())
            .collect();
        let mut flags = 0;
        if raw.metadata.managed_fields.is_some() || raw.managed_fields.is_some() {
            flags |= frozen::MANAGED_FIELDS;
        }
        if raw.api_version.is_some() && raw.kind.is_some() {
            flags |= frozen::TYPED;
        }
        CachedObject {
            key: raw.key(),
            fields: fields.into_boxed_slice(),
            label_count: u32::try_from(labels.count()).unwrap_or(u32::MAX),
            flags,
            owner_uids,
            json,
        }
    }

    /// Parses JSON text into a cached object (used by tests, benches and seeding).
    pub fn from_json(
        json: &str,
        api_resource: &ApiResource,
        strip_managed_fields: bool,
    ) -> serde_json::Result<Self> {
        let mut raw: RawObject = serde_json::from_str(json)?;
        Ok(Self::from_raw(&mut raw, api_resource, strip_managed_fields))
    }

    /// The cache key.
    pub fn key(&self) -> &ObjectKey {
        &self.key
    }
    fn field(&self, field: Field) -> &str {
        field
            .metadata_index()
            .and_then(|at| informant_header::fields(&self.fields).nth(at))
            .and_then(Result::ok)
            .unwrap_or_default()
    }
    /// `metadata.namespace`, if namespaced.
    pub fn namespace(&self) -> Option<&str> {
        Some(self.field(Field::Namespace)).filter(|ns| !ns.is_empty())
    }
    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.field(Field::Name)
    }
    /// `metadata.uid` (empty if the server sent none).
    pub fn uid(&self) -> &str {
        self.field(Field::Uid)
    }
    /// `metadata.resourceVersion`.
    pub fn resource_version(&self) -> &str {
        self.field(Field::ResourceVersion)
    }
    /// Labels, sorted by key.
    pub fn labels(&self) -> impl ExactSizeIterator<Item = (&str, &str)> {
        let mut rest = fields(&self.fields).skip(METADATA_FIXED_FIELDS);
        (0..self.label_count as usize).map(move |_| {
            let key = rest.next().unwrap_or_default();
            (key, rest.next().unwrap_or_default())
        })
    }
    /// The value of one label.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels().find(|(k, _)| *k == key).map(|(_, v)| v)
    }
    /// The metadata as a plugin's event header holds it after the kind
    /// ([`informant_header::Metadata`]: namespace, name, uid, resourceVersion, then each
    /// label's key and value, sorted by key, as length-prefixed fields). Kept in this form, it
    /// is copied out as it is ([`informant_header::encode`]).
    pub fn metadata_fields(&self) -> &[u8] {
        &self.fields
    }
    /// The uids of `metadata.ownerReferences`.
    pub fn owner_uids(&self) -> impl ExactSizeIterator<Item = &str> {
        self.owner_uids.iter().map(|u| &**u)
    }
    /// The whole object as compact JSON, managedFields removed unless configured otherwise.
    pub fn json(&self) -> &str {
        &self.json
    }
    /// Parses the JSON again; for index computation at registration time, never per event.
    pub fn to_value(&self) -> Value {
        serde_json::from_str(&self.json).unwrap_or(Value::Null)
    }
}

impl fmt::Debug for CachedObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedObject")
            .field("key", &self.key)
            .field("resource_version", &self.resource_version())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::GroupVersionKind;

    fn pods() -> ApiResource {
        ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Pod"))
    }

    #[test]
    fn strips_managed_fields_and_keeps_the_rest() {
        let json = r#"{"metadata":{"name":"a","namespace":"ns","uid":"u1","resourceVersion":"7",
            "labels":{"b":"2","a":"1"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"o1"}],
            "managedFields":[{"manager":"kubectl","operation":"Apply"}]},"spec":{"nodeName":"n1"}}"#;
        let obj = CachedObject::from_json(json, &pods(), true).unwrap();
        assert_eq!(obj.key().as_str(), "ns/a");
        assert_eq!((obj.namespace(), obj.name()), (Some("ns"), "a"));
        assert_eq!(obj.resource_version(), "7");
        assert_eq!(
            obj.labels().collect::<Vec<_>>(),
            vec![("a", "1"), ("b", "2")]
        );
        assert_eq!(obj.label("b"), Some("2"));
        assert_eq!(obj.owner_uids().collect::<Vec<_>>(), vec!["o1"]);
        let v = obj.to_value();
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["kind"], "Pod");
        assert_eq!(v["spec"]["nodeName"], "n1");
        assert!(v["metadata"].get("managedFields").is_none());

        let kept = CachedObject::from_json(json, &pods(), false).unwrap();
        assert_eq!(
            kept.to_value()["metadata"]["managedFields"][0]["manager"],
            "kubectl"
        );
    }

    #[test]
    fn managed_fields_are_set_aside_as_text_and_put_back_as_sent() {
        let raw: RawObject = serde_json::from_str(
            r#"{"metadata":{"managedFields":[{"manager":"m","fieldsV1":{"f:a":{}}}],"name":"a"}}"#,
        )
        .unwrap();
        assert!(raw.metadata.managed_fields.is_none(), "never decoded");
        assert_eq!(
            raw.managed_fields.as_ref().map(RawJson::get),
            Some(r#"[{"manager":"m","fieldsV1":{"f:a":{}}}]"#)
        );
        assert_eq!(raw.metadata.name.as_deref(), Some("a"), "the rest decodes");
        // Alone in the metadata, and null.
        for (json, managed) in [
            (r#"{"metadata":{"managedFields":[]}}"#, Some("[]")),
            (r#"{"metadata":{"managedFields":null,"name":"b"}}"#, None),
        ] {
            let raw: RawObject = serde_json::from_str(json).unwrap();
            assert_eq!(raw.managed_fields.as_ref().map(RawJson::get), managed);
            let back: Value = serde_json::from_str(&raw.to_json()).unwrap();
            assert_eq!(
                back["metadata"].get("managedFields").is_some(),
                managed.is_some()
            );
        }
    }

    #[test]
    fn keys_made_apart_are_equal_hash_alike_and_order_by_text() {
        use std::hash::BuildHasher;
        let (a, b) = (
            ObjectKey::new(Some("ns"), "a"),
            ObjectKey::new(Some("ns"), "a"),
        );
        let state = foldhash::fast::RandomState::default();
        assert!(a == b && state.hash_one(&a) == state.hash_one(&b));
        let other = ObjectKey::new(Some("ns"), "b");
        assert!(a != other && a < other);
        let mut set = KeySet::default();
        set.insert(a.clone());
        assert!(set.contains(&b) && !set.contains(&other));
    }

    #[test]
    fn cluster_scoped_key_has_no_slash() {
        let obj =
            CachedObject::from_json(r#"{"metadata":{"name":"node-1"}}"#, &pods(), true).unwrap();
        assert_eq!(obj.key().as_str(), "node-1");
        assert_eq!(obj.namespace(), None);
    }

    #[test]
    fn decodes_from_watch_lines_in_either_key_order() {
        use kube::api::WatchEvent;
        let object = r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"3"},"spec":{"x": [1, 2]},"n":"q\"uote"}"#;
        for line in [
            format!(r#"{{"type":"MODIFIED","object":{object}}}"#),
            format!(r#"{{"object":{object},"type":"MODIFIED"}}"#),
        ] {
            let Ok(WatchEvent::Modified(raw)) =
                serde_json::from_str::<WatchEvent<RawObject>>(&line)
            else {
                panic!("watch line did not decode: {line}");
            };
            assert_eq!(raw.field("spec").unwrap()["x"][1], 2);
            let obj = CachedObject::from_raw(&mut raw.clone(), &pods(), true);
            let v: Value = serde_json::from_str(obj.json()).unwrap();
            assert_eq!(v, serde_json::from_str::<Value>(object).unwrap(), "{line}");
        }
        let from_value: RawObject = serde_json::from_value(
            serde_json::json!({"metadata": {"name": "b"}, "data": {"k": "v"}}),
        )
        .unwrap();
        assert_eq!(from_value.field("data").unwrap()["k"], "v");
    }

    #[test]
    fn to_json_is_exactly_as_long_as_its_text_and_escapes_odd_field_names() {
        let json = r#"{"apiVersion":"v\"1","kind":"K","metadata":{"name":"a"},"we\"ird\n":{"x":1},"plain":[]}"#;
        let raw: RawObject = serde_json::from_str(json).unwrap();
        let out = raw.to_json();
        assert_eq!(out.len(), out.capacity());
        assert_eq!(
            serde_json::from_str::<Value>(&out).unwrap(),
            serde_json::from_str::<Value>(json).unwrap()
        );
    }

    #[test]
    fn missing_metadata_is_an_error() {
        assert!(serde_json::from_str::<RawObject>(r#"{"kind":"Pod"}"#).is_err());
    }
}
