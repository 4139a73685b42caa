//! Index definitions and the inverted maps behind by-index queries.
//!
//! An index maps each object to zero or more values; the [`Indices`] keep, per index, `value ->
//! set of keys`, so a lookup costs O(matches). Three indexes always exist: [`NAMESPACE`],
//! [`LABEL`] (values `key=value`) and [`OWNER`] (owner uids). Others are declared as JSON field
//! paths ([`FieldPath`]) and computed once per object version when it enters the store.

use informant_selector::FieldPath;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

use super::object::{CachedObject, ObjectKey, RawObject};

/// Built-in index on `metadata.namespace`.
pub const NAMESPACE: &str = "namespace";
/// Built-in index on labels; values are `key=value`.
pub const LABEL: &str = "label";
/// Built-in index on `metadata.ownerReferences[].uid`.
pub const OWNER: &str = "owner";

/// Why an index declaration was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid index `{name}` path `{path}`: {reason}")]
pub struct IndexError {
    /// The index name as declared.
    pub name: String,
    /// The path as declared.
    pub path: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Top-level fields of one object version parsed into trees, each at most once; only what a
/// field index asks for is parsed (spec and status stay text otherwise).
#[derive(Default)]
struct Parsed<'r>(Vec<(&'r str, Option<Value>)>);

impl<'r> Parsed<'r> {
    fn field(&mut self, raw: &'r RawObject, name: &str) -> Option<&Value> {
        let at = match self.0.iter().position(|(k, _)| *k == name) {
            Some(at) => at,
            None => {
                let (key, value) = if name == "metadata" {
                    ("metadata", serde_json::to_value(&raw.metadata).ok())
                } else {
                    let (k, _) = raw.fields.iter().find(|(k, _)| k == name)?;
                    (k.as_str(), raw.field(name))
                };
                self.0.push((key, value));
                self.0.len() - 1
            }
        };
        self.0[at].1.as_ref()
    }
}

fn push_scalar(v: Option<&str>, segments: &[String], out: &mut Vec<String>) {
    if let (Some(v), 1) = (v, segments.len()) {
        out.push(v.to_string());
    }
}

/// Values of `path` in a freshly decoded object; `parsed` holds the top-level fields
/// already turned into trees for this version, so indexes sharing a field parse it once.
fn values_in_raw<'r>(path: &FieldPath, raw: &'r RawObject, parsed: &mut Parsed<'r>) -> Vec<String> {
    let mut out = Vec::new();
    match path.segments().first().map(String::as_str) {
        Some("apiVersion") => push_scalar(raw.api_version.as_deref(), path.segments(), &mut out),
        Some("kind") => push_scalar(raw.kind.as_deref(), path.segments(), &mut out),
        Some(field) => {
            if let Some(v) = parsed.field(raw, field) {
                path.values_under(v, 1, &mut out);
            }
        }
        None => {}
    }
    out
}

/// What an index computes for each object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum IndexSpec {
    /// `metadata.namespace`.
    Namespace,
    /// Every label as `key=value`.
    Label,
    /// Every owner reference's uid.
    Owner,
    /// A JSON field path.
    Field(FieldPath),
}

impl IndexSpec {
    /// Parses a declared index (`name`, `path`), refusing names that shadow the built-ins.
    pub fn field(name: &str, path: &str) -> Result<IndexSpec, IndexError> {
        let err = |reason: String| IndexError {
            name: name.to_string(),
            path: path.to_string(),
            reason,
        };
        if name.is_empty() {
            return Err(err("the index name is empty".into()));
        }
        if [NAMESPACE, LABEL, OWNER].contains(&name) {
            return Err(err(format!("`{name}` is a built-in index")));
        }
        path.parse().map(IndexSpec::Field).map_err(err)
    }

    fn values_raw<'r>(
        &self,
        raw: &'r RawObject,
        obj: &CachedObject,
        parsed: &mut Parsed<'r>,
    ) -> Vec<String> {
        match self {
            IndexSpec::Field(p) => values_in_raw(p, raw, parsed),
            _ => self.builtin_values(obj),
        }
    }

    fn builtin_values(&self, obj: &CachedObject) -> Vec<String> {
        match self {
            IndexSpec::Namespace => obj.namespace().map(str::to_string).into_iter().collect(),
            IndexSpec::Label => obj.labels().map(|(k, v)| format!("{k}={v}")).collect(),
            IndexSpec::Owner => obj.owner_uids().map(str::to_string).collect(),
            IndexSpec::Field(p) => p.values_in(&obj.to_value()),
        }
    }
}

/// The index values computed for one object version, kept so removal needs no recomputation.
pub(crate) type IndexValues = Box<[Box<[Box<str>]>]>;

/// The inverted maps of every declared index.
#[derive(Debug)]
pub(crate) struct Indices {
    specs: Vec<(String, IndexSpec)>,
    maps: Vec<HashMap<Box<str>, HashSet<ObjectKey>>>,
}

impl Default for Indices {
    fn default() -> Self {
        let mut me = Indices {
            specs: Vec::new(),
            maps: Vec::new(),
        };
        for (name, spec) in [
            (NAMESPACE, IndexSpec::Namespace),
            (LABEL, IndexSpec::Label),
            (OWNER, IndexSpec::Owner),
        ] {
            me.specs.push((name.to_string(), spec));
            me.maps.push(HashMap::new());
        }
        me
    }
}

impl Indices {
    /// Position of a named index.
    pub(crate) fn position(&self, name: &str) -> Option<usize> {
        self.specs.iter().position(|(n, _)| n == name)
    }

    /// Names of every index.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.specs.iter().map(|(n, _)| n.as_str())
    }

    /// The spec of an index.
    pub(crate) fn spec(&self, name: &str) -> Option<&IndexSpec> {
        self.position(name).map(|i| &self.specs[i].1)
    }

    /// Computes every index's values for a new object version. Built-in indexes read the
    /// cached object's parsed fields; field indexes parse each top-level field they need once.
    pub(crate) fn compute(&self, raw: &RawObject, obj: &CachedObject) -> IndexValues {
        let mut parsed = Parsed::default();
        self.specs
            .iter()
            .map(|(_, spec)| to_boxed(spec.values_raw(raw, obj, &mut parsed)))
            .collect()
    }

    /// Adds `key` under each of its values.
    pub(crate) fn insert(&mut self, key: &ObjectKey, values: &IndexValues) {
        for (map, vals) in self.maps.iter_mut().zip(values.iter()) {
            for v in vals.iter() {
                match map.get_mut(v) {
                    Some(set) => {
                        set.insert(key.clone());
                    }
                    None => {
                        map.insert(v.clone(), HashSet::from([key.clone()]));
                    }
                }
            }
        }
    }

    /// Removes `key` from under each of its values, dropping emptied sets.
    pub(crate) fn remove(&mut self, key: &ObjectKey, values: &IndexValues) {
        for (map, vals) in self.maps.iter_mut().zip(values.iter()) {
            for v in vals.iter() {
                if let Some(set) = map.get_mut(v) {
                    set.remove(key);
                    if set.is_empty() {
                        map.remove(v);
                    }
                }
            }
        }
    }

    /// Keys under `value` of index number `idx`.
    pub(crate) fn lookup(&self, idx: usize, value: &str) -> Option<&HashSet<ObjectKey>> {
        self.maps.get(idx).and_then(|m| m.get(value))
    }

    /// Declares a new index and fills it from the existing objects (registration time only).
    ///
    /// Returns the per-object values the caller must append to each entry, in `objects` order.
    pub(crate) fn add<'a>(
        &mut self,
        name: &str,
        spec: IndexSpec,
        objects: impl Iterator<Item = &'a CachedObject>,
    ) -> Vec<Box<[Box<str>]>> {
        let mut map: HashMap<Box<str>, HashSet<ObjectKey>> = HashMap::new();
        let mut per_object = Vec::new();
        for obj in objects {
            let vals = to_boxed(spec.builtin_values(obj));
            for v in vals.iter() {
                map.entry(v.clone()).or_default().insert(obj.key().clone());
            }
            per_object.push(vals);
        }
        self.specs.push((name.to_string(), spec));
        self.maps.push(map);
        per_object
    }
}

fn to_boxed(v: Vec<String>) -> Box<[Box<str>]> {
    v.into_iter().map(String::into_boxed_str).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(s: &str) -> FieldPath {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn bad_field_paths_are_refused_with_a_reason() {
        for (bad, needle) in [
            ("", "empty"),
            ("spec..x", "empty segment"),
            ("spec.", "ends with"),
            ("spec[x]", "quoted key"),
            ("spec['x'", "unterminated"),
            ("spec['x']y", "expected `.`"),
            ("spec.a b", "unexpected character ` `"),
        ] {
            let err = IndexSpec::field("idx", bad).unwrap_err();
            assert!(err.reason.contains(needle), "{bad}: {err}");
            assert!(err.to_string().contains("index `idx`"));
        }
        assert!(
            IndexSpec::field("label", "spec.x")
                .unwrap_err()
                .reason
                .contains("built-in")
        );
    }

    #[test]
    fn raw_and_cached_paths_agree() {
        let json = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"n",
            "annotations":{"team":"a"}},"spec":{"nodeName":"n1"}}"#;
        let raw: RawObject = serde_json::from_str(json).unwrap();
        let v: Value = serde_json::from_str(json).unwrap();
        for p in [
            "spec.nodeName",
            "metadata.annotations.team",
            "kind",
            "metadata.name",
        ] {
            assert_eq!(
                values_in_raw(&path(p), &raw, &mut Parsed::default()),
                path(p).values_in(&v),
                "{p}"
            );
        }
    }
}
