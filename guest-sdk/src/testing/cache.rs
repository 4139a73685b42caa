//! The in-memory cache behind [`crate::cache`] on native targets.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use super::HarnessError;
use crate::{QueryError, Resource};
use informant_manifest::{FieldPath, LabelSelector};

/// Computes an object's values for one index.
type IndexFn = dyn Fn(&Value) -> Vec<String>;

use informant_manifest::BUILTIN_INDEXES as BUILT_IN;

/// An in-memory informer cache answering the same queries as the host's.
///
/// Objects are keyed by their kind (from `apiVersion` and `kind`) and `namespace/name`, stored as
/// compact JSON without `metadata.managedFields`, as the host does. Indexes are computed at query
/// time: the built-in `namespace`, `label` (`key=value`) and `owner` (owner uids), plus field-path
/// indexes declared with [`MemCache::add_index`].
///
/// Until a kind is declared with [`MemCache::watch`], every kind is queryable; once any kind is
/// declared, queries on undeclared kinds fail with [`QueryError::NotWatched`] like on the host.
#[derive(Debug, Clone, Default)]
pub struct MemCache {
    objects: BTreeMap<Resource, BTreeMap<String, Stored>>,
    watched: BTreeSet<Resource>,
    indexes: BTreeMap<Resource, BTreeMap<String, FieldPath>>,
}

#[derive(Debug, Clone)]
struct Stored {
    json: String,
    value: Value,
}

impl MemCache {
    /// An empty cache that answers for every kind.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares a watched kind; from then on, only declared kinds may be queried.
    pub fn watch(&mut self, r: Resource) -> &mut Self {
        self.watched.insert(r);
        self
    }

    /// Declares a field-path index such as `spec.nodeName` or `metadata.annotations["a/b"]`.
    ///
    /// Arrays on the way are traversed element-wise; strings, numbers and booleans become values.
    pub fn add_index(
        &mut self,
        r: &Resource,
        name: &str,
        path: &str,
    ) -> Result<&mut Self, HarnessError> {
        let path = path.parse().map_err(|e| HarnessError::Index {
            name: name.to_string(),
            why: format!("path `{path}`: {e}"),
        })?;
        self.add_field_index(r, name, path)
    }

    /// Declares an index from an already parsed path (as a manifest holds it).
    pub fn add_field_index(
        &mut self,
        r: &Resource,
        name: &str,
        path: FieldPath,
    ) -> Result<&mut Self, HarnessError> {
        if BUILT_IN.contains(&name) {
            return Err(HarnessError::Index {
                name: name.to_string(),
                why: "built in, cannot be redeclared".to_string(),
            });
        }
        self.indexes
            .entry(r.clone())
            .or_default()
            .insert(name.to_string(), path);
        Ok(self)
    }

    /// Inserts or replaces an object given as JSON text, a `serde_json::Value` or a `k8s-openapi`
    /// object; returns its kind.
    pub fn insert<T: Serialize + ?Sized>(&mut self, object: &T) -> Result<Resource, HarnessError> {
        let value = to_object(object).map_err(HarnessError::Object)?;
        let (r, key) = identity(&value).map_err(HarnessError::Object)?;
        let json = value.to_string();
        self.objects
            .entry(r.clone())
            .or_default()
            .insert(key, Stored { json, value });
        Ok(r)
    }

    /// Removes an object; returns its JSON if it was there.
    pub fn remove(&mut self, r: &Resource, namespace: Option<&str>, name: &str) -> Option<String> {
        let objects = self.objects.get_mut(r)?;
        objects.remove(&key(namespace, name)).map(|s| s.json)
    }

    /// Every object of a kind, in key order.
    pub fn objects(&self, r: &Resource) -> Vec<String> {
        self.objects
            .get(r)
            .map(|m| m.values().map(|s| s.json.clone()).collect())
            .unwrap_or_default()
    }

    /// Every kind holding at least one object.
    pub fn kinds(&self) -> Vec<Resource> {
        self.objects
            .iter()
            .filter(|(_, m)| !m.is_empty())
            .map(|(r, _)| r.clone())
            .collect()
    }

    fn check_watched(&self, r: &Resource) -> Result<(), QueryError> {
        if self.watched.is_empty() || self.watched.contains(r) {
            Ok(())
        } else {
            Err(QueryError::NotWatched(format!(
                "{r} is not in this plugin's manifest"
            )))
        }
    }

    /// Like [`crate::cache::get`].
    pub fn get(
        &self,
        r: &Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<String>, QueryError> {
        self.check_watched(r)?;
        Ok(self
            .objects
            .get(r)
            .and_then(|m| m.get(&key(namespace, name)))
            .map(|s| s.json.clone()))
    }

    /// Like [`crate::cache::list`].
    pub fn list(
        &self,
        r: &Resource,
        namespace: Option<&str>,
        selector: Option<&str>,
    ) -> Result<Vec<String>, QueryError> {
        self.check_watched(r)?;
        let selector = selector
            .map(LabelSelector::parse)
            .transpose()
            .map_err(|e| QueryError::BadSelector(e.to_string()))?;
        Ok(self
            .stored(r)
            .filter(|s| namespace.is_none() || namespace_of(&s.value) == namespace)
            .filter(|s| {
                selector.as_ref().is_none_or(|sel| {
                    let labels = labels_of(&s.value);
                    sel.matches(|k| labels.get(k).map(String::as_str))
                })
            })
            .map(|s| s.json.clone())
            .collect())
    }

    /// Like [`crate::cache::by_index`].
    pub fn by_index(
        &self,
        r: &Resource,
        index: &str,
        value: &str,
    ) -> Result<Vec<String>, QueryError> {
        self.check_watched(r)?;
        let values: Box<IndexFn> = match index {
            "namespace" => Box::new(|v| namespace_of(v).map(str::to_string).into_iter().collect()),
            "label" => Box::new(|v| {
                labels_of(v)
                    .into_iter()
                    .map(|(k, l)| format!("{k}={l}"))
                    .collect()
            }),
            "owner" => Box::new(owner_uids),
            custom => {
                let path = self
                    .indexes
                    .get(r)
                    .and_then(|m| m.get(custom))
                    .ok_or_else(|| QueryError::UnknownIndex(format!("no index `{custom}` on {r}")))?
                    .clone();
                Box::new(move |v| path.values_in(v))
            }
        };
        Ok(self
            .stored(r)
            .filter(|s| values(&s.value).iter().any(|v| v == value))
            .map(|s| s.json.clone())
            .collect())
    }

    fn stored(&self, r: &Resource) -> impl Iterator<Item = &Stored> {
        self.objects.get(r).into_iter().flat_map(|m| m.values())
    }
}

/// Serializes an object; a JSON string is parsed instead, so tests may pass JSON text.
/// `metadata.managedFields` is dropped, as the host does.
pub(crate) fn to_object<T: Serialize + ?Sized>(object: &T) -> Result<Value, String> {
    let mut value =
        serde_json::to_value(object).map_err(|e| format!("cannot serialize the object: {e}"))?;
    if let Value::String(text) = &value {
        value = serde_json::from_str(text).map_err(|e| format!("object is not valid JSON: {e}"))?;
    }
    if !value.is_object() {
        return Err(format!("object must be a JSON object, got `{value}`"));
    }
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    Ok(value)
}

/// The kind and cache key of an object.
pub(crate) fn identity(v: &Value) -> Result<(Resource, String), String> {
    let text = |field: &str| v.get(field).and_then(Value::as_str);
    let api_version = text("apiVersion").ok_or("object has no `apiVersion`")?;
    let kind = text("kind").ok_or("object has no `kind`")?;
    let name = v
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .ok_or("object has no `metadata.name`")?;
    Ok((
        Resource::from_api_version(api_version, kind),
        key(namespace_of(v), name),
    ))
}

fn key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

pub(crate) fn namespace_of(v: &Value) -> Option<&str> {
    v.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

pub(crate) fn labels_of(v: &Value) -> BTreeMap<String, String> {
    v.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, l)| Some((k.clone(), l.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn owner_uids(v: &Value) -> Vec<String> {
    v.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| Some(r.get("uid")?.as_str()?.to_string()))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(ns: &str, name: &str, labels: Value, node: &str, owner: &str) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": ns, "name": name, "labels": labels,
                "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": owner}],
                "managedFields": [{"manager": "kubectl"}]},
            "spec": {"nodeName": node, "containers": [{"image": "a"}, {"image": "b"}]}
        })
    }

    fn names(jsons: Vec<String>) -> Vec<String> {
        jsons
            .iter()
            .map(|j| {
                serde_json::from_str::<Value>(j).unwrap()["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    }

    fn cache() -> MemCache {
        let mut c = MemCache::new();
        c.insert(&pod(
            "a",
            "p1",
            json!({"app": "web", "team": "x"}),
            "n1",
            "u1",
        ))
        .unwrap();
        c.insert(&pod("a", "p2", json!({"app": "db"}), "n2", "u1"))
            .unwrap();
        c.insert(&pod("b", "p3", json!({"app": "web"}), "n1", "u2"))
            .unwrap();
        c
    }

    #[test]
    fn get_and_list_filter_by_namespace_and_selector() {
        let c = cache();
        let pods = Resource::new("", "v1", "Pod");
        let p1 = c.get(&pods, Some("a"), "p1").unwrap().unwrap();
        assert!(
            !p1.contains("managedFields"),
            "managedFields is stripped like on the host"
        );
        assert_eq!(c.get(&pods, Some("b"), "p1").unwrap(), None);
        assert_eq!(
            names(c.list(&pods, None, None).unwrap()),
            ["p1", "p2", "p3"]
        );
        assert_eq!(
            names(c.list(&pods, Some("a"), Some("app=web")).unwrap()),
            ["p1"]
        );
        assert_eq!(
            names(c.list(&pods, None, Some("!team")).unwrap()),
            ["p2", "p3"]
        );
        assert!(matches!(
            c.list(&pods, None, Some("app in (x")),
            Err(QueryError::BadSelector(_))
        ));
    }

    #[test]
    fn built_in_and_field_indexes() {
        let mut c = cache();
        let pods = Resource::new("", "v1", "Pod");
        assert_eq!(names(c.by_index(&pods, "namespace", "b").unwrap()), ["p3"]);
        assert_eq!(
            names(c.by_index(&pods, "label", "app=web").unwrap()),
            ["p1", "p3"]
        );
        assert_eq!(
            names(c.by_index(&pods, "owner", "u1").unwrap()),
            ["p1", "p2"]
        );
        assert!(matches!(
            c.by_index(&pods, "by-node", "n1"),
            Err(QueryError::UnknownIndex(_))
        ));
        c.add_index(&pods, "by-node", "spec.nodeName").unwrap();
        c.add_index(&pods, "image", ".spec.containers.image")
            .unwrap();
        c.add_index(&pods, "app", "metadata.labels[\"app\"]")
            .unwrap();
        assert_eq!(
            names(c.by_index(&pods, "by-node", "n1").unwrap()),
            ["p1", "p3"]
        );
        assert_eq!(
            names(c.by_index(&pods, "image", "b").unwrap()),
            ["p1", "p2", "p3"]
        );
        assert_eq!(names(c.by_index(&pods, "app", "db").unwrap()), ["p2"]);
        for (name, path) in [("owner", "x"), ("bad", "a..b")] {
            let err = c.add_index(&pods, name, path).unwrap_err();
            assert!(
                matches!(&err, HarnessError::Index { name: n, .. } if n == name),
                "{err}"
            );
        }
    }

    #[test]
    fn watching_makes_other_kinds_refused_and_remove_forgets() {
        let mut c = cache();
        let pods = Resource::new("", "v1", "Pod");
        let cms = Resource::new("", "v1", "ConfigMap");
        assert_eq!(c.list(&cms, None, None).unwrap(), Vec::<String>::new());
        c.watch(pods.clone());
        assert!(matches!(
            c.list(&cms, None, None),
            Err(QueryError::NotWatched(_))
        ));
        assert!(c.remove(&pods, Some("a"), "p1").is_some());
        assert_eq!(names(c.list(&pods, None, None).unwrap()), ["p2", "p3"]);
        for bad in [json!({"kind": "Pod"}), json!("not json")] {
            let err = c.insert(&bad).unwrap_err();
            assert!(matches!(err, HarnessError::Object(_)), "{err}");
        }
    }
}
