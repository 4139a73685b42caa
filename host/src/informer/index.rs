//! Index definitions and the inverted maps behind by-index queries.
//!
//! An index maps each object to zero or more values; the [`Indices`] keep, per index, `value ->
//! set of keys`, so a lookup costs O(matches). Three indexes always exist: [`NAMESPACE`],
//! [`LABEL`] (values `key=value`) and [`OWNER`] (owner uids). Others are declared as JSON field
//! paths ([`FieldPath`]) and computed once per object version when it enters the store.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

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

/// A JSON field path such as `spec.nodeName` or `metadata.annotations["example.com/team"]`.
///
/// Arrays on the way are traversed element-wise, so `spec.containers.image` yields every
/// container's image. Strings, numbers and booleans become index values; objects, arrays at the
/// end and nulls yield nothing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldPath {
    segments: Vec<String>,
    text: String,
}

impl FieldPath {
    /// The path's segments.
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// Values of this path in an object held as JSON.
    pub fn values_in(&self, root: &Value) -> Vec<String> {
        let mut out = Vec::new();
        collect(root, &self.segments, &mut out);
        out
    }

    /// Values of this path in a freshly decoded object; `parsed` holds the top-level fields
    /// already turned into trees for this version, so indexes sharing a field parse it once.
    fn values_in_raw<'r>(&self, raw: &'r RawObject, parsed: &mut Parsed<'r>) -> Vec<String> {
        let mut out = Vec::new();
        match self.segments.first().map(String::as_str) {
            Some("apiVersion") => push_scalar(raw.api_version.as_deref(), &self.segments, &mut out),
            Some("kind") => push_scalar(raw.kind.as_deref(), &self.segments, &mut out),
            Some(field) => {
                if let Some(v) = parsed.field(raw, field) {
                    collect(v, &self.segments[1..], &mut out);
                }
            }
            None => {}
        }
        out
    }
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

fn collect_map(map: &Map<String, Value>, segments: &[String], out: &mut Vec<String>) {
    if let Some((first, rest)) = segments.split_first()
        && let Some(v) = map.get(first)
    {
        collect(v, rest, out);
    }
}

fn collect(v: &Value, segments: &[String], out: &mut Vec<String>) {
    match (v, segments.split_first()) {
        (Value::Array(items), _) if !segments.is_empty() => {
            items.iter().for_each(|i| collect(i, segments, out))
        }
        (Value::Object(m), Some(_)) => collect_map(m, segments, out),
        (Value::String(s), None) => out.push(s.clone()),
        (Value::Number(n), None) => out.push(n.to_string()),
        (Value::Bool(b), None) => out.push(b.to_string()),
        (Value::Array(items), None) => items.iter().for_each(|i| collect(i, segments, out)),
        _ => {}
    }
}

impl FromStr for FieldPath {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let mut segments = Vec::new();
        let s = text.strip_prefix('.').unwrap_or(text);
        let mut chars = s.char_indices().peekable();
        let mut cur = String::new();
        let mut expect_segment = true;
        while let Some((i, c)) = chars.next() {
            match c {
                '.' => {
                    if expect_segment {
                        return Err(format!("empty segment at offset {i}"));
                    }
                    segments.push(std::mem::take(&mut cur));
                    expect_segment = true;
                }
                '[' => {
                    if !cur.is_empty() {
                        segments.push(std::mem::take(&mut cur));
                    } else if !expect_segment && segments.is_empty() {
                        return Err(format!("unexpected `[` at offset {i}"));
                    }
                    let quote = match chars.next() {
                        Some((_, q @ ('"' | '\''))) => q,
                        _ => return Err(format!("expected a quoted key after `[` at offset {i}")),
                    };
                    let mut key = String::new();
                    let mut closed = false;
                    for (_, c) in chars.by_ref() {
                        if c == quote {
                            closed = true;
                            break;
                        }
                        key.push(c);
                    }
                    if !closed || !matches!(chars.next(), Some((_, ']'))) {
                        return Err(format!("unterminated `[` at offset {i}"));
                    }
                    if key.is_empty() {
                        return Err(format!("empty key in brackets at offset {i}"));
                    }
                    segments.push(key);
                    expect_segment = false;
                    if let Some((_, '.')) = chars.peek() {
                        chars.next();
                        expect_segment = true;
                    } else if chars.peek().is_some_and(|(_, c)| *c != '[') {
                        return Err(format!("expected `.` or `[` after `]` at offset {i}"));
                    }
                }
                c if c.is_alphanumeric() || matches!(c, '_' | '-' | '$') => {
                    cur.push(c);
                    expect_segment = false;
                }
                other => return Err(format!("unexpected character `{other}` at offset {i}")),
            }
        }
        if !cur.is_empty() {
            segments.push(cur);
        } else if expect_segment {
            return Err(if segments.is_empty() {
                "the path is empty".into()
            } else {
                "the path ends with `.`".into()
            });
        }
        Ok(FieldPath {
            segments,
            text: text.to_string(),
        })
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
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
            IndexSpec::Field(p) => p.values_in_raw(raw, parsed),
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
    use serde_json::json;

    fn path(s: &str) -> FieldPath {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn field_paths_parse() {
        assert_eq!(path("spec.nodeName").segments(), ["spec", "nodeName"]);
        assert_eq!(path(".spec.nodeName").segments(), ["spec", "nodeName"]);
        assert_eq!(
            path(r#"metadata.annotations["example.com/team"]"#).segments(),
            ["metadata", "annotations", "example.com/team"]
        );
        assert_eq!(path("a['x.y'].b").segments(), ["a", "x.y", "b"]);
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
    fn values_traverse_arrays_and_stringify_scalars() {
        let v = json!({"spec": {"containers": [{"image": "a"}, {"image": "b"}], "replicas": 3,
                       "paused": false, "tags": ["x", "y"], "none": null}});
        assert_eq!(path("spec.containers.image").values_in(&v), ["a", "b"]);
        assert_eq!(path("spec.replicas").values_in(&v), ["3"]);
        assert_eq!(path("spec.paused").values_in(&v), ["false"]);
        assert_eq!(path("spec.tags").values_in(&v), ["x", "y"]);
        assert!(path("spec.none").values_in(&v).is_empty());
        assert!(path("spec.missing.deeper").values_in(&v).is_empty());
        assert!(
            path("spec").values_in(&v).is_empty(),
            "objects are not index values"
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
                path(p).values_in_raw(&raw, &mut Parsed::default()),
                path(p).values_in(&v),
                "{p}"
            );
        }
    }
}
