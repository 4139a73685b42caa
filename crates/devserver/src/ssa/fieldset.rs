//! Field paths and sets as structured-merge-diff (sigs.k8s.io/structured-merge-diff/v4
//! `fieldpath`) models them, with its FieldsV1 encoding: `f:name` for a field, `k:{...}` for an
//! associative-list item by its keys, `v:...` for a set item, `i:N` for an index, and `.` for
//! the node itself when it has children.
//!
//! A set is kept as the sorted set of its member paths (SMD keeps a tree; the members are the
//! same and the sets here are small).

use std::collections::BTreeSet;
use std::fmt;

use serde_json::{Map, Value};

/// One step of a path. The variant order is SMD's `PathElement.Less`: fields first.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Pe {
    /// A map or struct field.
    Field(String),
    /// An associative-list item: its key fields sorted by name, each value as compact JSON.
    Key(Vec<(String, String)>),
    /// A set item, as compact JSON.
    Value(String),
    /// A list item by position (lists without keys that are not atomic; rare).
    Index(usize),
}

/// A path from the object's root.
pub(crate) type Path = Vec<Pe>;

/// A set of member paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSet(pub BTreeSet<Path>);

impl FieldSet {
    /// Adds a member.
    pub fn insert(&mut self, p: Path) {
        self.0.insert(p);
    }

    /// Whether the set has no members.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Members of either.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.union(&other.0).cloned().collect())
    }

    /// Members of `self` not in `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.difference(&other.0).cloned().collect())
    }

    /// Drops the members of `other`; whether any went.
    pub fn remove_all(&mut self, other: &FieldSet) -> bool {
        let before = self.0.len();
        if other.0.len() < before {
            for p in &other.0 {
                self.0.remove(p);
            }
        } else {
            self.0.retain(|p| !other.0.contains(p));
        }
        self.0.len() != before
    }

    /// Adds the members of `other`; whether any was new.
    pub fn add_all(&mut self, other: &FieldSet) -> bool {
        let before = self.0.len();
        self.0.extend(other.0.iter().cloned());
        self.0.len() != before
    }

    /// Members of both.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.intersection(&other.0).cloned().collect())
    }

    /// Whether `p` or anything below it is a member.
    pub fn has_prefix(&self, p: &[Pe]) -> bool {
        self.0
            .range(p.to_vec()..)
            .next()
            .is_some_and(|m| m.starts_with(p))
    }

    /// The set as a FieldsV1 object.
    pub fn to_fields_v1(&self) -> Value {
        let mut root = Map::new();
        for path in &self.0 {
            let mut node = &mut root;
            for pe in path {
                node = node
                    .entry(encode_pe(pe))
                    .or_insert_with(|| Value::Object(Map::new()))
                    .as_object_mut()
                    .expect("fieldsV1 nodes are objects");
            }
            node.insert(".".into(), Value::Object(Map::new()));
        }
        strip_lone_dots(&mut root);
        Value::Object(root)
    }

    /// Reads a FieldsV1 object; `None` if it is not one.
    pub fn from_fields_v1(v: &Value) -> Option<FieldSet> {
        let mut set = FieldSet::default();
        walk_v1(v.as_object()?, &mut Vec::new(), &mut set)?;
        Some(set)
    }
}

/// A member without children is `{}`, not `{".": {}}`.
fn strip_lone_dots(node: &mut Map<String, Value>) {
    for child in node.values_mut() {
        if let Some(m) = child.as_object_mut() {
            if m.len() == 1 && m.contains_key(".") {
                m.clear();
            } else {
                strip_lone_dots(m);
            }
        }
    }
}

fn walk_v1(node: &Map<String, Value>, path: &mut Path, set: &mut FieldSet) -> Option<()> {
    for (k, child) in node {
        if k == "." {
            set.insert(path.clone());
            continue;
        }
        path.push(decode_pe(k)?);
        let child = child.as_object()?;
        if child.is_empty() {
            set.insert(path.clone());
        } else {
            walk_v1(child, path, set)?;
        }
        path.pop();
    }
    Some(())
}

fn encode_pe(pe: &Pe) -> String {
    match pe {
        Pe::Field(f) => format!("f:{f}"),
        Pe::Key(keys) => {
            let body: Vec<String> = keys
                .iter()
                .map(|(k, v)| format!("{}:{v}", Value::String(k.clone())))
                .collect();
            format!("k:{{{}}}", body.join(","))
        }
        Pe::Value(v) => format!("v:{v}"),
        Pe::Index(i) => format!("i:{i}"),
    }
}

fn decode_pe(s: &str) -> Option<Pe> {
    let (tag, rest) = s.split_once(':')?;
    Some(match tag {
        "f" => Pe::Field(rest.to_string()),
        "k" => {
            let m: Map<String, Value> = serde_json::from_str(rest).ok()?;
            let mut keys: Vec<(String, String)> =
                m.into_iter().map(|(k, v)| (k, v.to_string())).collect();
            keys.sort();
            Pe::Key(keys)
        }
        "v" => Pe::Value(serde_json::from_str::<Value>(rest).ok()?.to_string()),
        "i" => Pe::Index(rest.parse().ok()?),
        _ => return None,
    })
}

/// A path as SMD's `Path.String()` prints it in conflict messages: `.spec.replicas`,
/// `.spec.containers[name="app"].image`.
pub(crate) struct Display<'a>(pub &'a [Pe]);

impl fmt::Display for Display<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for pe in self.0 {
            match pe {
                Pe::Field(name) => write!(f, ".{name}")?,
                Pe::Key(keys) => {
                    let parts: Vec<String> = keys.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    write!(f, "[{}]", parts.join(","))?
                }
                Pe::Value(v) => write!(f, "[={v}]")?,
                Pe::Index(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_v1_round_trips_with_dots_only_on_members_that_have_children() {
        let v = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}},
            }}}, "f:finalizers": {"v:\"a\"": {}}},
        });
        let set = FieldSet::from_fields_v1(&v).expect("valid fieldsV1");
        assert_eq!(set.0.len(), 7);
        assert_eq!(set.to_fields_v1(), v);
    }

    #[test]
    fn paths_print_as_smd_prints_them() {
        let p = vec![
            Pe::Field("spec".into()),
            Pe::Field("containers".into()),
            Pe::Key(vec![("name".into(), "\"app\"".into())]),
            Pe::Field("ports".into()),
            Pe::Key(vec![
                ("containerPort".into(), "80".into()),
                ("protocol".into(), "\"TCP\"".into()),
            ]),
        ];
        assert_eq!(
            Display(&p).to_string(),
            ".spec.containers[name=\"app\"].ports[containerPort=80,protocol=\"TCP\"]"
        );
        assert_eq!(
            encode_pe(&p[4]),
            "k:{\"containerPort\":80,\"protocol\":\"TCP\"}"
        );
    }

    #[test]
    fn malformed_fields_v1_is_refused() {
        assert!(FieldSet::from_fields_v1(&json!({"x:y": {}})).is_none());
        assert!(FieldSet::from_fields_v1(&json!({"f:a": 1})).is_none());
    }
}
