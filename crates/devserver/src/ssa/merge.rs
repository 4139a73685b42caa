//! The typed-value operations of structured-merge-diff (`typed.TypedValue`): the field set an
//! applied configuration sets (`ToFieldSet`), the comparison of two objects (`Compare`), the
//! merge of a configuration into the live object (`Merge`) and removal of owned fields.

use serde_json::{Map, Value};

use super::fieldset::{FieldSet, Path, Pe};
use super::schema::{ListType, MapType, Schema, key_default};

/// What changed between two objects, as SMD's `Comparison`: leaves that changed value, and
/// nodes (leaves and containers) that appeared or disappeared.
#[derive(Debug, Default)]
pub(crate) struct Comparison {
    /// Nodes only in the new object.
    pub added: FieldSet,
    /// Leaves whose value differs.
    pub modified: FieldSet,
    /// Nodes only in the old object.
    pub removed: FieldSet,
}

/// Node kinds as the walk sees them.
enum Node<'v> {
    Leaf,
    Map(&'v Map<String, Value>, MapType),
    List(&'v [Value], ListType),
}

struct Walk<'s> {
    schema: Schema<'s>,
    /// Field names from the root (items skipped): the schema's view of where we are.
    fields: Vec<String>,
    path: Path,
}

impl<'s> Walk<'s> {
    fn new(schema: Schema<'s>) -> Walk<'s> {
        Walk {
            schema,
            fields: Vec::new(),
            path: Vec::new(),
        }
    }

    fn parent(&self) -> Vec<&str> {
        self.fields[..self.fields.len().saturating_sub(1)]
            .iter()
            .map(String::as_str)
            .collect()
    }

    fn node<'v>(&self, v: &'v Value) -> Node<'v> {
        let field = self.fields.last().map(String::as_str).unwrap_or_default();
        match v {
            Value::Object(m) if self.path.is_empty() => Node::Map(m, MapType::Struct),
            Value::Object(m) => {
                let t = if matches!(self.path.last(), Some(Pe::Field(_))) {
                    self.schema.map_type(&self.path, &self.parent(), field)
                } else {
                    MapType::Struct
                };
                if t == MapType::Atomic {
                    Node::Leaf
                } else {
                    Node::Map(m, t)
                }
            }
            Value::Array(items) => {
                match self
                    .schema
                    .list_type(&self.path, &self.parent(), field, items)
                {
                    ListType::Atomic => Node::Leaf,
                    t => Node::List(items, t),
                }
            }
            _ => Node::Leaf,
        }
    }

    fn descend_field(&mut self, name: &str) {
        self.fields.push(name.to_string());
        self.path.push(Pe::Field(name.to_string()));
    }

    fn ascend_field(&mut self) {
        self.fields.pop();
        self.path.pop();
    }
}

/// The element identifying `item` in a list of type `t` at position `i`.
fn item_pe(t: &ListType, item: &Value, i: usize) -> Pe {
    match t {
        ListType::Map(keys) => {
            let mut out = Vec::new();
            for k in keys {
                match item.get(k).cloned().or_else(|| key_default(k)) {
                    Some(v) => out.push((k.to_string(), v.to_string())),
                    None => return Pe::Index(i),
                }
            }
            out.sort();
            Pe::Key(out)
        }
        ListType::Set => Pe::Value(item.to_string()),
        ListType::Atomic => Pe::Index(i),
    }
}

/// The fields an applied configuration sets (`TypedValue.ToFieldSet`).
pub(crate) fn to_field_set(schema: Schema<'_>, config: &Value) -> FieldSet {
    let mut set = FieldSet::default();
    let mut w = Walk::new(schema);
    to_set(&mut w, config, &mut set);
    set
}

fn to_set(w: &mut Walk<'_>, v: &Value, set: &mut FieldSet) {
    match w.node(v) {
        Node::Leaf => set.insert(w.path.clone()),
        Node::Map(m, t) => {
            for (k, child) in m {
                w.descend_field(k);
                to_set(w, child, set);
                let empty = child.is_null() || child.as_object().is_some_and(Map::is_empty);
                if empty || t == MapType::Granular {
                    set.insert(w.path.clone());
                }
                w.ascend_field();
            }
        }
        Node::List(items, t) => {
            for (i, item) in items.iter().enumerate() {
                w.path.push(item_pe(&t, item, i));
                to_set(w, item, set);
                set.insert(w.path.clone());
                w.path.pop();
            }
        }
    }
}

/// Compares `old` with `new` (`TypedValue.Compare`); `metadata.managedFields` is nobody's
/// field and is not compared.
pub(crate) fn compare(schema: Schema<'_>, old: &Value, new: &Value) -> Comparison {
    let mut c = Comparison::default();
    let mut w = Walk::new(schema);
    cmp(&mut w, Some(old), Some(new), &mut c);
    c
}

fn cmp(w: &mut Walk<'_>, old: Option<&Value>, new: Option<&Value>, c: &mut Comparison) {
    // Equal subtrees add nothing: most of an updated object is unchanged.
    if let (Some(a), Some(b)) = (old, new)
        && a == b
    {
        return;
    }
    let on = old.map(|v| w.node(v));
    let nn = new.map(|v| w.node(v));
    // Leaves, and a map turned list or back, compare as values.
    let container = !matches!(
        (&on, &nn),
        (Some(Node::Leaf), _)
            | (_, Some(Node::Leaf))
            | (None, None)
            | (Some(Node::Map(..)), Some(Node::List(..)))
            | (Some(Node::List(..)), Some(Node::Map(..)))
    );
    if !container {
        match (old, new) {
            (None, Some(_)) => c.added.insert(w.path.clone()),
            (Some(_), None) => c.removed.insert(w.path.clone()),
            (Some(a), Some(b)) if a != b => c.modified.insert(w.path.clone()),
            _ => {}
        }
        return;
    }
    let list_type = match (&on, &nn) {
        (Some(Node::List(_, t)), _) | (_, Some(Node::List(_, t))) => Some(t.clone()),
        _ => None,
    };
    if let Some(t) = list_type {
        let a: &[Value] = match &on {
            Some(Node::List(a, _)) => a,
            _ => &[],
        };
        let b: &[Value] = match &nn {
            Some(Node::List(b, _)) => b,
            _ => &[],
        };
        let keyed: Vec<Vec<(Pe, &Value)>> = [a, b]
            .iter()
            .map(|items| {
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (item_pe(&t, v, i), v))
                    .collect()
            })
            .collect();
        let (ka, kb) = (&keyed[0], &keyed[1]);
        let mut pes: Vec<Pe> = ka.iter().chain(kb.iter()).map(|(p, _)| p.clone()).collect();
        pes.sort();
        pes.dedup();
        for pe in pes {
            let x = ka.iter().find(|(p, _)| *p == pe).map(|(_, v)| *v);
            let y = kb.iter().find(|(p, _)| *p == pe).map(|(_, v)| *v);
            w.path.push(pe);
            cmp(w, x, y, c);
            w.path.pop();
        }
    } else {
        let empty = Map::new();
        let a = match &on {
            Some(Node::Map(m, _)) => *m,
            _ => &empty,
        };
        let b = match &nn {
            Some(Node::Map(m, _)) => *m,
            _ => &empty,
        };
        let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
        keys.sort();
        keys.dedup();
        let in_metadata = matches!(w.path.as_slice(), [Pe::Field(f)] if f == "metadata");
        for k in keys {
            if in_metadata && k == "managedFields" {
                continue;
            }
            w.descend_field(k);
            cmp(w, a.get(k), b.get(k), c);
            w.ascend_field();
        }
    }
    if !w.path.is_empty() {
        match (old, new) {
            (None, Some(_)) => c.added.insert(w.path.clone()),
            (Some(_), None) => c.removed.insert(w.path.clone()),
            _ => {}
        }
    }
}

/// Merges an applied configuration into the live object (`TypedValue.Merge`): the
/// configuration's values win, granular maps and keyed lists merge item by item.
pub(crate) fn merge(schema: Schema<'_>, live: &Value, config: &Value) -> Value {
    let mut w = Walk::new(schema);
    merge_at(&mut w, live, config)
}

fn merge_at(w: &mut Walk<'_>, live: &Value, config: &Value) -> Value {
    match (w.node(live), w.node(config)) {
        (Node::Map(l, _), Node::Map(c, _)) => {
            let mut out = l.clone();
            for (k, cv) in c {
                w.descend_field(k);
                let merged = match l.get(k) {
                    Some(lv) if !cv.is_null() => merge_at(w, lv, cv),
                    _ => cv.clone(),
                };
                out.insert(k.clone(), merged);
                w.ascend_field();
            }
            Value::Object(out)
        }
        (Node::List(l, t), Node::List(c, _)) => {
            let mut out: Vec<Value> = l.to_vec();
            let mut ids: Vec<Pe> = l
                .iter()
                .enumerate()
                .map(|(i, v)| item_pe(&t, v, i))
                .collect();
            for (i, cv) in c.iter().enumerate() {
                let pe = item_pe(&t, cv, i);
                match ids.iter().position(|p| *p == pe) {
                    Some(j) => {
                        w.path.push(pe);
                        out[j] = merge_at(w, &out[j].clone(), cv);
                        w.path.pop();
                    }
                    None => {
                        out.push(cv.clone());
                        ids.push(pe);
                    }
                }
            }
            Value::Array(out)
        }
        _ => config.clone(),
    }
}

/// Removes the node at `path` from `obj`, if it is there.
pub(crate) fn remove_path(schema: Schema<'_>, obj: &mut Value, path: &[Pe]) {
    let mut w = Walk::new(schema);
    remove_at(&mut w, obj, path);
}

fn remove_at(w: &mut Walk<'_>, v: &mut Value, path: &[Pe]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    match first {
        Pe::Field(name) => {
            let Some(m) = v.as_object_mut() else { return };
            if rest.is_empty() {
                m.remove(name);
            } else if let Some(child) = m.get_mut(name) {
                w.descend_field(name);
                remove_at(w, child, rest);
                w.ascend_field();
            }
        }
        pe => {
            let t = match w.node(v) {
                Node::List(_, t) => t,
                _ => return,
            };
            let Some(items) = v.as_array_mut() else {
                return;
            };
            let Some(i) = (0..items.len()).find(|&i| item_pe(&t, &items[i], i) == *pe) else {
                return;
            };
            if rest.is_empty() {
                items.remove(i);
            } else {
                w.path.push(pe.clone());
                remove_at(w, &mut items[i], rest);
                w.path.pop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fieldset::Display;
    use super::*;
    use serde_json::json;

    const DEPLOY: Schema<'static> = Schema {
        builtin: true,
        kind: "Deployment",
        crd: None,
    };

    fn printed(s: &FieldSet) -> Vec<String> {
        s.0.iter().map(|p| Display(p).to_string()).collect()
    }

    #[test]
    fn field_set_of_a_config_marks_items_and_granular_entries() {
        let config = json!({"metadata": {"labels": {"app": "a"}}, "spec": {"replicas": 2,
            "selector": {"matchLabels": {"app": "a"}},
            "template": {"spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]}}}});
        assert_eq!(
            printed(&to_field_set(DEPLOY, &config)),
            vec![
                ".metadata.labels.app",
                ".spec.replicas",
                ".spec.selector",
                ".spec.template.spec.containers[name=\"c\"]",
                ".spec.template.spec.containers[name=\"c\"].image",
                ".spec.template.spec.containers[name=\"c\"].name",
                ".spec.template.spec.containers[name=\"c\"].ports[containerPort=80,protocol=\"TCP\"]",
                ".spec.template.spec.containers[name=\"c\"].ports[containerPort=80,protocol=\"TCP\"].containerPort",
            ]
        );
    }

    #[test]
    fn compare_reports_leaves_and_added_or_removed_containers() {
        let old = json!({"spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}});
        let new = json!({"spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "b", "image": "x"}]}}}});
        let c = compare(DEPLOY, &old, &new);
        assert_eq!(printed(&c.modified), vec![".spec.replicas"]);
        assert_eq!(
            printed(&c.added),
            vec![
                ".spec.template.spec.containers[name=\"b\"]",
                ".spec.template.spec.containers[name=\"b\"].image",
                ".spec.template.spec.containers[name=\"b\"].name"
            ]
        );
        assert_eq!(c.removed.0.len(), 3);
    }

    #[test]
    fn merge_keeps_live_items_and_replaces_atomic_lists() {
        let live = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "x", "args": ["1", "2"]}, {"name": "b", "image": "y"}]}}}});
        let config = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "args": ["3"]}, {"name": "c", "image": "z"}]}}}});
        let merged = merge(DEPLOY, &live, &config);
        assert_eq!(
            merged["spec"]["template"]["spec"]["containers"],
            json!([{"name": "a", "image": "x", "args": ["3"]}, {"name": "b", "image": "y"}, {"name": "c", "image": "z"}])
        );
        let mut m = merged;
        let path = &to_field_set(
            DEPLOY,
            &json!({"spec": {"template": {"spec": {"containers": [{"name": "b"}]}}}}),
        )
        .0;
        let item = path.iter().find(|p| p.len() == 5).expect("the item path");
        remove_path(DEPLOY, &mut m, item);
        assert_eq!(
            m["spec"]["template"]["spec"]["containers"]
                .as_array()
                .map(Vec::len),
            Some(2)
        );
    }

    #[test]
    fn a_crd_schema_marks_keyed_lists_sets_and_maps() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "routes": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["host"],
                "items": {"type": "object", "properties": {"host": {"type": "string"}, "port": {"type": "integer"}}}},
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "args": {"type": "array", "items": {"type": "string"}},
            "env": {"type": "object", "additionalProperties": {"type": "string"}},
            "ref": {"type": "object", "x-kubernetes-map-type": "atomic", "properties": {"name": {"type": "string"}}}}}}});
        let crd = Schema {
            builtin: false,
            kind: "Widget",
            crd: Some(&schema),
        };
        let config = json!({"spec": {"routes": [{"host": "a", "port": 1}], "tags": ["x"], "args": ["1"],
            "env": {"K": "v"}, "ref": {"name": "r"}}});
        assert_eq!(
            printed(&to_field_set(crd, &config)),
            vec![
                ".spec.args",
                ".spec.env.K",
                ".spec.ref",
                ".spec.routes[host=\"a\"]",
                ".spec.routes[host=\"a\"].host",
                ".spec.routes[host=\"a\"].port",
                ".spec.tags[=\"x\"]",
            ]
        );
        let live =
            json!({"spec": {"routes": [{"host": "b", "port": 2}], "tags": ["y"], "args": ["0"]}});
        let merged = merge(crd, &live, &config);
        assert_eq!(
            merged["spec"]["routes"],
            json!([{"host": "b", "port": 2}, {"host": "a", "port": 1}])
        );
        assert_eq!(merged["spec"]["tags"], json!(["y", "x"]));
        assert_eq!(merged["spec"]["args"], json!(["1"]));
    }
}
