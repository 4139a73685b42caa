//! Objects as they come off the wire ([`RawObject`]) and as the cache keeps them ([`CachedObject`]).
//!
//! The watcher decodes into [`RawObject`]: typed metadata, and every other top-level field kept
//! as the server's JSON text ([`RawValue`]) — no `Value` tree is built for spec or status, and
//! none has to be serialized again or freed. The store then turns each version into one
//! immutable [`CachedObject`]: compact JSON (managedFields removed) plus the few parsed fields the
//! built-in indexes need. Every consumer shares that one `Arc<CachedObject>`.
//!
//! Raw text comes for free from serde_json's own deserializers, which kube uses for lists and
//! watch lines. When something buffers the object first (a watch line with `object` before
//! `type`), the field falls back to a `Value` and is printed back to text: slower, same result.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ApiResource, DynamicResourceScope, Resource};
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::Value;

/// A map by object key. foldhash, randomly seeded per process, rather than SipHash: keys are
/// hashed several times per event on the hot path, and SipHash was a measured 2-3 % of it.
pub(crate) type KeyMap<V> = std::collections::HashMap<ObjectKey, V, foldhash::fast::RandomState>;

/// A set of object keys, hashed as [`KeyMap`].
pub(crate) type KeySet = std::collections::HashSet<ObjectKey, foldhash::fast::RandomState>;

/// The cache key of an object: `namespace/name`, or `name` for cluster-scoped objects.
///
/// Cheap to clone (one shared allocation), as it sits in every index entry.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey(Arc<str>);

impl ObjectKey {
    /// Builds the key client-go's `MetaNamespaceKeyFunc` would.
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        match namespace {
            Some(ns) if !ns.is_empty() => ObjectKey(format!("{ns}/{name}").into()),
            _ => ObjectKey(name.into()),
        }
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The namespace part, if the object is namespaced.
    pub fn namespace(&self) -> Option<&str> {
        self.0.split_once('/').map(|(ns, _)| ns)
    }

    /// The name part.
    pub fn name(&self) -> &str {
        self.0.split_once('/').map_or(&self.0, |(_, n)| n)
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
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
    /// The object's metadata.
    pub metadata: ObjectMeta,
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
                            obj.metadata = map.next_value()?;
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
    pub fn to_json(&self) -> String {
        let size = self
            .fields
            .iter()
            .map(|(k, v)| k.len() + v.get().len() + 4)
            .sum::<usize>();
        let mut out = String::with_capacity(size + 512);
        out.push('{');
        let mut entry = |key: &str, value: &str| {
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(&Value::from(key).to_string());
            out.push(':');
            out.push_str(value);
        };
        if let Some(v) = &self.api_version {
            entry("apiVersion", &Value::from(v.as_str()).to_string());
        }
        if let Some(k) = &self.kind {
            entry("kind", &Value::from(k.as_str()).to_string());
        }
        // ObjectMeta holds only strings, maps and lists: serializing it cannot fail.
        entry(
            "metadata",
            &serde_json::to_string(&self.metadata).unwrap_or_else(|_| "{}".into()),
        );
        for (k, v) in &self.fields {
            entry(k, v.get());
        }
        out.push('}');
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

/// One immutable version of an object as the cache holds it.
///
/// Shared by the store, every index and every handler's queue through `Arc<CachedObject>`; it
/// must never be mutated after construction, which is why it has no `&mut` accessors.
pub struct CachedObject {
    key: ObjectKey,
    uid: Box<str>,
    resource_version: Box<str>,
    labels: Box<[(Box<str>, Box<str>)]>,
    owner_uids: Box<[Box<str>]>,
    json: Box<str>,
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
        }
        if raw.api_version.is_none() {
            raw.api_version = Some(api_resource.api_version.clone());
        }
        if raw.kind.is_none() {
            raw.kind = Some(api_resource.kind.clone());
        }
        let json = raw.to_json();
        let meta = &raw.metadata;
        // BTreeMap iteration is already sorted by key, which `label` relies on.
        let labels: Vec<(Box<str>, Box<str>)> = meta
            .labels
            .iter()
            .flatten()
            .map(|(k, v)| (k.as_str().into(), v.as_str().into()))
            .collect();
        let owner_uids = meta
            .owner_references
            .iter()
            .flatten()
            .map(|o| o.uid.as_str().into())
            .collect();
        CachedObject {
            key: raw.key(),
            uid: meta.uid.as_deref().unwrap_or_default().into(),
            resource_version: meta.resource_version.as_deref().unwrap_or_default().into(),
            labels: labels.into_boxed_slice(),
            owner_uids,
            json: json.into_boxed_str(),
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
    /// `metadata.namespace`, if namespaced.
    pub fn namespace(&self) -> Option<&str> {
        self.key.namespace()
    }
    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.key.name()
    }
    /// `metadata.uid` (empty if the server sent none).
    pub fn uid(&self) -> &str {
        &self.uid
    }
    /// `metadata.resourceVersion`.
    pub fn resource_version(&self) -> &str {
        &self.resource_version
    }
    /// Labels, sorted by key.
    pub fn labels(&self) -> impl ExactSizeIterator<Item = (&str, &str)> {
        self.labels.iter().map(|(k, v)| (&**k, &**v))
    }
    /// The value of one label.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &*self.labels[i].1)
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
            .field("resource_version", &self.resource_version)
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
        assert!(kept.to_value()["metadata"]["managedFields"].is_array());
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
    fn missing_metadata_is_an_error() {
        assert!(serde_json::from_str::<RawObject>(r#"{"kind":"Pod"}"#).is_err());
    }
}
