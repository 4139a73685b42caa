//! Index definitions and the inverted maps behind by-index queries.
//!
//! An index maps each object to zero or more values; the [`Indices`] keep, per index, `value ->
//! keys grouped by namespace`, so a lookup costs O(matches) and a lookup limited to some
//! namespaces touches only theirs. Three indexes always exist: [`NAMESPACE`], [`LABEL`] (values
//! `key=value`) and [`OWNER`] (owner uids). Field indexes are JSON field paths ([`FieldPath`]),
//! held by whoever declared them and shared by identical paths, computed once per object version
//! when it enters the store.

use informant_apimachinery::FieldPath;
use serde_json::Value;
use std::collections::HashMap;

use super::object::{CachedObject, KeySet, ObjectKey, RawObject};

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
        path.parse()
            .map(IndexSpec::Field)
            .map_err(|e: informant_apimachinery::FieldPathError| err(e.to_string()))
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
            IndexSpec::Namespace => vec![obj.namespace().unwrap_or("").to_string()],
            IndexSpec::Label => obj.labels().map(|(k, v)| format!("{k}={v}")).collect(),
            IndexSpec::Owner => obj.owner_uids().map(str::to_string).collect(),
            IndexSpec::Field(p) => p.values_in(&obj.to_value()),
        }
    }
}

/// One index's values for one object version.
pub(crate) type Values = Box<[Box<str>]>;

/// The index values computed for one object version, kept so removal needs no recomputation.
pub(crate) type IndexValues = Box<[Values]>;

/// Keys under one index value, grouped by namespace (`""` for cluster-scoped objects).
///
/// A lookup limited to some namespaces touches only their groups: what other namespaces hold
/// under the same value, or how much of it, costs nothing and so shows nothing.
#[derive(Debug)]
pub(crate) enum Buckets {
    /// Most values live in one namespace: no second map.
    One(Box<str>, KeySet),
    /// A value found in several namespaces.
    Many(HashMap<Box<str>, KeySet>),
}

/// The namespace group of `key`.
pub(crate) fn bucket_of(key: &ObjectKey) -> &str {
    key.namespace().unwrap_or("")
}

impl Buckets {
    fn new(key: &ObjectKey) -> Self {
        let mut set = KeySet::default();
        set.insert(key.clone());
        Buckets::One(bucket_of(key).into(), set)
    }

    fn insert(&mut self, key: &ObjectKey) {
        let ns = bucket_of(key);
        match self {
            Buckets::One(only, set) if **only == *ns => {
                set.insert(key.clone());
            }
            Buckets::One(..) => {
                let Buckets::One(only, set) =
                    std::mem::replace(self, Buckets::Many(HashMap::new()))
                else {
                    unreachable!()
                };
                let Buckets::Many(map) = self else {
                    unreachable!()
                };
                map.insert(only, set);
                map.entry(ns.into()).or_default().insert(key.clone());
            }
            Buckets::Many(map) => {
                map.entry(ns.into()).or_default().insert(key.clone());
            }
        }
    }

    /// Removes `key`; whether no key is left.
    fn remove(&mut self, key: &ObjectKey) -> bool {
        let ns = bucket_of(key);
        match self {
            Buckets::One(only, set) => {
                if **only == *ns {
                    set.remove(key);
                }
                set.is_empty()
            }
            Buckets::Many(map) => {
                if let Some(set) = map.get_mut(ns) {
                    set.remove(key);
                    if set.is_empty() {
                        map.remove(ns);
                    }
                }
                map.is_empty()
            }
        }
    }

    /// The keys in one namespace group.
    pub(crate) fn get(&self, ns: &str) -> Option<&KeySet> {
        match self {
            Buckets::One(only, set) => (**only == *ns).then_some(set),
            Buckets::Many(map) => map.get(ns),
        }
    }

    /// Every namespace group.
    pub(crate) fn groups(&self) -> Box<dyn Iterator<Item = (&str, &KeySet)> + '_> {
        match self {
            Buckets::One(ns, set) => Box::new(std::iter::once((&**ns, set))),
            Buckets::Many(map) => Box::new(map.iter().map(|(ns, set)| (&**ns, set))),
        }
    }
}

/// A declared index and its inverted map.
#[derive(Debug)]
struct Slot {
    spec: IndexSpec,
    /// Holders of a field index; built-ins are never released.
    users: usize,
    map: HashMap<Box<str>, Buckets>,
}

/// The inverted maps of every declared index. Positions are stable: a released field index
/// leaves an empty slot that the next new one reuses.
#[derive(Debug)]
pub(crate) struct Indices {
    slots: Vec<Option<Slot>>,
    /// Changes whenever a field index is declared or removed, so values computed before
    /// (for a relist still arriving) are known to be stale.
    layout: u64,
}

impl Default for Indices {
    fn default() -> Self {
        let slots = [
            (NAMESPACE, IndexSpec::Namespace),
            (LABEL, IndexSpec::Label),
            (OWNER, IndexSpec::Owner),
        ]
        .into_iter()
        .map(|(_, spec)| {
            Some(Slot {
                spec,
                users: 1,
                map: HashMap::new(),
            })
        })
        .collect();
        Indices { slots, layout: 0 }
    }
}

impl Indices {
    /// Position of a built-in index.
    pub(crate) fn builtin(name: &str) -> Option<usize> {
        [NAMESPACE, LABEL, OWNER].iter().position(|n| *n == name)
    }

    /// Names of the built-in indexes.
    pub(crate) fn builtin_names() -> [&'static str; 3] {
        [NAMESPACE, LABEL, OWNER]
    }

    /// Number of declared field indexes (held by someone).
    pub(crate) fn field_count(&self) -> usize {
        self.slots.iter().skip(3).flatten().count()
    }

    /// Computes every index's values for a new object version. Built-in indexes read the
    /// cached object's parsed fields; field indexes parse each top-level field they need once.
    pub(crate) fn compute(&self, raw: &RawObject, obj: &CachedObject) -> IndexValues {
        let mut parsed = Parsed::default();
        self.slots
            .iter()
            .map(|slot| match slot {
                Some(slot) => to_boxed(slot.spec.values_raw(raw, obj, &mut parsed)),
                None => Box::default(),
            })
            .collect()
    }

    /// Computes every index's values from the frozen object alone (field indexes parse its
    /// JSON): for objects whose decoded form is gone.
    pub(crate) fn compute_frozen(&self, obj: &CachedObject) -> IndexValues {
        self.slots
            .iter()
            .map(|slot| match slot {
                Some(slot) => to_boxed(slot.spec.builtin_values(obj)),
                None => Box::default(),
            })
            .collect()
    }

    /// Which set of indexes values were computed for (see [`Indices::compute`]).
    pub(crate) fn layout(&self) -> u64 {
        self.layout
    }

    /// Adds `key` under each of its values.
    pub(crate) fn insert(&mut self, key: &ObjectKey, values: &IndexValues) {
        for (slot, vals) in self.slots.iter_mut().zip(values.iter()) {
            let Some(slot) = slot else { continue };
            for v in vals.iter() {
                match slot.map.get_mut(v) {
                    Some(buckets) => buckets.insert(key),
                    None => {
                        slot.map.insert(v.clone(), Buckets::new(key));
                    }
                }
            }
        }
    }

    /// Moves `key` from its `old` values to its `new` ones, touching only the values that
    /// differ: a label change moves one entry, not every entry of every index.
    pub(crate) fn update(&mut self, key: &ObjectKey, old: &IndexValues, new: &IndexValues) {
        for (at, slot) in self.slots.iter_mut().enumerate() {
            let Some(slot) = slot else { continue };
            let (before, after) = (
                old.get(at).map_or(&[][..], |v| &v[..]),
                new.get(at).map_or(&[][..], |v| &v[..]),
            );
            if before == after {
                continue;
            }
            for v in before.iter().filter(|v| !after.contains(v)) {
                if let Some(buckets) = slot.map.get_mut(v)
                    && buckets.remove(key)
                {
                    slot.map.remove(v);
                }
            }
            for v in after.iter().filter(|v| !before.contains(v)) {
                match slot.map.get_mut(v) {
                    Some(buckets) => buckets.insert(key),
                    None => {
                        slot.map.insert(v.clone(), Buckets::new(key));
                    }
                }
            }
        }
    }

    /// Removes `key` from under each of its values, dropping emptied entries.
    pub(crate) fn remove(&mut self, key: &ObjectKey, values: &IndexValues) {
        for (slot, vals) in self.slots.iter_mut().zip(values.iter()) {
            let Some(slot) = slot else { continue };
            for v in vals.iter() {
                if let Some(buckets) = slot.map.get_mut(v)
                    && buckets.remove(key)
                {
                    slot.map.remove(v);
                }
            }
        }
    }

    /// Keys under `value` of index number `idx`, by namespace.
    pub(crate) fn lookup(&self, idx: usize, value: &str) -> Option<&Buckets> {
        self.slots.get(idx)?.as_ref()?.map.get(value)
    }

    /// Every value of index number `idx` (the namespaces, for [`NAMESPACE`]).
    pub(crate) fn values(&self, idx: usize) -> impl Iterator<Item = (&str, &Buckets)> {
        self.slots
            .get(idx)
            .and_then(Option::as_ref)
            .into_iter()
            .flat_map(|s| s.map.iter().map(|(v, b)| (&**v, b)))
    }

    /// Takes a hold on the field index computing `path`, declaring it if nobody holds one:
    /// its position, and for a new one the per-object values the caller must store in each
    /// entry, in `objects` order.
    pub(crate) fn hold_field<'a>(
        &mut self,
        path: FieldPath,
        objects: impl Iterator<Item = &'a CachedObject>,
    ) -> (usize, Option<Vec<Values>>) {
        let spec = IndexSpec::Field(path);
        if let Some(at) = self
            .slots
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.spec == spec))
        {
            self.slots[at].as_mut().expect("found above").users += 1;
            return (at, None);
        }
        let mut map: HashMap<Box<str>, Buckets> = HashMap::new();
        let mut per_object = Vec::new();
        for obj in objects {
            let vals = to_boxed(spec.builtin_values(obj));
            for v in vals.iter() {
                match map.get_mut(v) {
                    Some(b) => b.insert(obj.key()),
                    None => {
                        map.insert(v.clone(), Buckets::new(obj.key()));
                    }
                }
            }
            per_object.push(vals);
        }
        let slot = Some(Slot {
            spec,
            users: 1,
            map,
        });
        self.layout += 1;
        let at = match self.slots.iter().position(Option::is_none) {
            Some(free) => {
                self.slots[free] = slot;
                free
            }
            None => {
                self.slots.push(slot);
                self.slots.len() - 1
            }
        };
        (at, Some(per_object))
    }

    /// Lets go of a hold taken with [`Indices::hold_field`]; whether the index is now gone
    /// (the caller then empties that position in every entry).
    pub(crate) fn release_field(&mut self, at: usize) -> bool {
        let Some(Some(slot)) = self.slots.get_mut(at) else {
            return false;
        };
        if at < 3 {
            return false;
        }
        slot.users -= 1;
        if slot.users > 0 {
            return false;
        }
        self.slots[at] = None;
        self.layout += 1;
        true
    }

    /// Number of positions (entries' value lists have this length).
    pub(crate) fn width(&self) -> usize {
        self.slots.len()
    }
}

/// Index values as kept for an object's lifetime: copied at their exact lengths, since an
/// allocator may keep a shrunk block at its old size (see `RawObject::to_json`).
fn to_boxed(v: Vec<String>) -> Values {
    v.iter().map(|s| Box::from(s.as_str())).collect()
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
