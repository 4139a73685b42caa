//! managedFields and server-side apply, as kube-apiserver's field manager
//! (k8s.io/apimachinery/pkg/util/managedfields) does them over structured-merge-diff.
//!
//! Every write records who set which fields: an Update (create, update, any non-apply patch,
//! subresource writes) adds the fields it changed to its manager's entry and takes them from
//! the others; an Apply replaces its manager's entry with the fields of its configuration,
//! removes the fields it applied before and no longer does (unless another manager owns them)
//! and refuses, with a 409 naming each field, to change a field another manager owns unless
//! forced. No maintained Rust implementation of structured-merge-diff exists (searched
//! crates.io and docs.rs), so this module is one: [`fieldset`] for paths and the FieldsV1
//! encoding, [`merge`] for the value operations, [`schema`] for how each field merges (a table
//! for the built-in kinds, the CRD's schema markers for custom resources).

mod fieldset;
mod merge;
mod schema;

use serde_json::{Value, json};

use super::metadata::now;
use super::{Cause, Error, Result};
use fieldset::{Display, FieldSet, Pe};
pub(crate) use schema::Schema;

/// The writer of one request, as its managedFields entry names it.
#[derive(Debug, Clone)]
pub(crate) struct Writer<'a> {
    /// `fieldManager`, or the User-Agent's prefix for non-apply writes.
    pub manager: &'a str,
    /// apiVersion the request used (`apps/v1`).
    pub api_version: &'a str,
    /// `status` or `scale` for subresource writes, empty for the object itself.
    pub subresource: &'a str,
}

/// One managedFields entry.
#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    apply: bool,
    api_version: String,
    time: Option<String>,
    subresource: String,
    set: FieldSet,
    /// `fieldsV1` as stored, while `set` is still what it decodes to: most writes change one
    /// entry, and re-encoding the others would cost more than the write.
    stored: Option<Value>,
}

impl Entry {
    /// A new entry of `w`'s.
    fn new(w: &Writer<'_>, apply: bool, time: Option<String>, set: FieldSet) -> Entry {
        Entry {
            manager: w.manager.to_string(),
            apply,
            api_version: w.api_version.to_string(),
            time,
            subresource: w.subresource.to_string(),
            set,
            stored: None,
        }
    }

    /// Drops `fields` from the set, forgetting the stored encoding if that changed it.
    fn release(&mut self, fields: &FieldSet) {
        if self.set.remove_all(fields) {
            self.stored = None;
        }
    }

    /// Adds `fields` to the set, forgetting the stored encoding if that changed it.
    fn take(&mut self, fields: &FieldSet) {
        if self.set.add_all(fields) {
            self.stored = None;
        }
    }

    /// Whether this entry is the one `w` writes with this operation (appliers are one entry
    /// whatever apiVersion they use, as `BuildManagerIdentifier` has it).
    fn is(&self, w: &Writer<'_>, apply: bool) -> bool {
        self.manager == w.manager
            && self.apply == apply
            && self.subresource == w.subresource
            && (apply || self.api_version == w.api_version)
    }

    /// The manager as conflict messages print it (`printManager`).
    fn printed(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s = format!("{s} with subresource {:?}", self.subresource);
        }
        if !self.apply {
            s = format!("{s} using {}", self.api_version);
        }
        s
    }

    fn into_json(self) -> Value {
        let mut v = json!({
            "manager": self.manager,
            "operation": if self.apply { "Apply" } else { "Update" },
            "apiVersion": self.api_version,
            "fieldsType": "FieldsV1",
            "fieldsV1": self.stored.unwrap_or_else(|| self.set.to_fields_v1()),
        });
        // metav1.ManagedFieldsEntry fields are `omitempty`.
        if self.manager.is_empty() {
            v.as_object_mut().map(|m| m.remove("manager"));
        }
        if let Some(t) = &self.time {
            v["time"] = t.clone().into();
        }
        if !self.subresource.is_empty() {
            v["subresource"] = self.subresource.clone().into();
        }
        v
    }
}

/// The entries stored in `obj`; malformed ones are dropped, as the field manager resets
/// managedFields it cannot decode.
fn decode(obj: &Value) -> Vec<Entry> {
    let Some(list) = obj["metadata"]["managedFields"].as_array() else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|e| {
            let s = |k: &str| e[k].as_str().map(String::from);
            Some(Entry {
                manager: s("manager").unwrap_or_default(),
                apply: match e["operation"].as_str()? {
                    "Apply" => true,
                    "Update" => false,
                    _ => return None,
                },
                api_version: s("apiVersion").unwrap_or_default(),
                time: s("time"),
                subresource: s("subresource").unwrap_or_default(),
                set: FieldSet::from_fields_v1(&e["fieldsV1"])?,
                stored: Some(e["fieldsV1"].clone()),
            })
        })
        .collect()
}

/// Writes `entries` into `obj` in `sortEncodedManagedFields` order (operation, time,
/// manager, apiVersion, subresource).
fn encode(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.set.is_empty());
    entries.sort_by(|a, b| {
        (
            !a.apply,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                !b.apply,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert(
            "managedFields".into(),
            entries.into_iter().map(Entry::into_json).collect(),
        );
    }
}

/// Fields nobody owns (`stripmeta.go`): identity and server-set metadata.
fn strip(set: &mut FieldSet) {
    let f = |s: &str| Pe::Field(s.into());
    set.0.retain(|p| {
        !matches!(p.as_slice(), [Pe::Field(a)] if a == "apiVersion" || a == "kind" || a == "metadata")
            && !matches!(p.as_slice(), [m, Pe::Field(x)] if *m == f("metadata") && matches!(x.as_str(),
                "name" | "namespace" | "creationTimestamp" | "selfLink" | "uid" | "clusterName"
                | "generation" | "managedFields" | "resourceVersion"))
    });
}

/// Keeps only what a write to `subresource` may own: the status subresource owns `.status`,
/// the object itself everything else when `status` is a subresource (the reset fields of the
/// registries' strategies).
fn scope(set: &mut FieldSet, subresource: &str, status_subresource: bool) {
    let status = |p: &Vec<Pe>| p.first() == Some(&Pe::Field("status".into()));
    match subresource {
        "status" => set.0.retain(status),
        _ if status_subresource => set.0.retain(|p| !status(p)),
        _ => {}
    }
}

fn without_managed(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    v
}

/// Records an Update by `w` that turned `old` into `new` (`{}` for a create) in `new`'s
/// managedFields, which start as `new` carries them (the stored ones, or the client's).
pub(crate) fn record_update(
    schema: Schema<'_>,
    status_subresource: bool,
    old: &Value,
    new: &mut Value,
    w: &Writer<'_>,
) {
    let mut entries = decode(new);
    let c = merge::compare(schema, old, new);
    let mut changed = c.added.union(&c.modified);
    strip(&mut changed);
    scope(&mut changed, w.subresource, status_subresource);
    // SMD compares against Go's zero value of the kind, which already has its non-pointer
    // structs: filling them in does not make their node the writer's.
    let zero: Vec<_> = changed
        .0
        .iter()
        .filter(|p| {
            matches!(p.last(), Some(Pe::Field(f)) if schema::ZERO_VALUE_FIELDS.contains(&f.as_str()))
                && changed.0.range((*p).clone()..).nth(1).is_some_and(|q| q.starts_with(p))
        })
        .cloned()
        .collect();
    for p in zero {
        changed.0.remove(&p);
    }
    for e in entries.iter_mut().filter(|e| !e.is(w, false)) {
        e.release(&changed);
        e.release(&c.removed);
    }
    if !changed.is_empty() {
        match entries.iter_mut().find(|e| e.is(w, false)) {
            Some(e) => {
                e.release(&c.removed);
                e.take(&changed);
                e.time = Some(now());
            }
            None => entries.push(Entry::new(w, false, Some(now()), changed)),
        }
    } else if let Some(e) = entries.iter_mut().find(|e| e.is(w, false)) {
        e.release(&c.removed);
    }
    encode(new, entries);
}

/// Server-side apply of `config` by `w` to `live` (`{}` when the object does not exist yet):
/// the merged object with its managedFields, or the 409 conflict `force` would override.
pub(crate) fn apply(
    schema: Schema<'_>,
    status_subresource: bool,
    live: &Value,
    config: &Value,
    w: &Writer<'_>,
    force: bool,
) -> Result<Value> {
    let mut entries = decode(live);
    let live_v = without_managed(live);
    let config = without_managed(config);
    let mut merged = merge::merge(schema, &live_v, &config);
    let mut set = merge::to_field_set(schema, &config);
    strip(&mut set);
    scope(&mut set, w.subresource, status_subresource);
    let mine = entries.iter().position(|e| e.is(w, true));
    let last = mine.map(|i| entries[i].set.clone()).unwrap_or_default();
    let others = entries
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != mine)
        .fold(FieldSet::default(), |acc, (_, e)| acc.union(&e.set));
    // Fields this manager applied before and no longer does go, unless someone else owns
    // them or something below them.
    for p in last.difference(&set).0.iter().rev() {
        if !others.has_prefix(p) {
            merge::remove_path(schema, &mut merged, p);
        }
    }
    let c = merge::compare(schema, &live_v, &merged);
    let changed = c.added.union(&c.modified);
    let mut conflicts: Vec<(String, String)> = Vec::new();
    for (i, e) in entries.iter_mut().enumerate() {
        if Some(i) == mine {
            continue;
        }
        let taken = e.set.intersection(&changed);
        conflicts.extend(
            taken
                .0
                .iter()
                .map(|p| (e.printed(), Display(p).to_string())),
        );
        e.release(&taken);
        e.release(&c.removed);
    }
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(conflicts));
    }
    let time = if merged == live_v {
        mine.and_then(|i| entries[i].time.clone())
            .or_else(|| Some(now()))
    } else {
        Some(now())
    };
    let entry = Entry::new(w, true, time, set);
    match mine {
        Some(i) => entries[i] = entry,
        None => entries.push(entry),
    }
    encode(&mut merged, entries);
    Ok(merged)
}

/// The 409 of `NewConflictError`, worded as `getConflictMessage`.
fn conflict_error(mut conflicts: Vec<(String, String)>) -> Error {
    conflicts.sort_by(|a, b| a.0.cmp(&b.0));
    let message = if let [(manager, path)] = conflicts.as_slice() {
        format!("Apply failed with 1 conflict: conflict with {manager}: {path}")
    } else {
        let mut lines = Vec::new();
        let mut current: Option<&str> = None;
        for (manager, path) in &conflicts {
            if current != Some(manager) {
                lines.push(format!("conflicts with {manager}:"));
                current = Some(manager);
            }
            lines.push(format!("- {path}"));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    Error::ApplyConflict {
        message,
        causes: conflicts
            .into_iter()
            .map(|(manager, path)| Cause {
                reason: "FieldManagerConflict",
                field: path,
                message: format!("conflict with {manager}"),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Schema<'static> = Schema {
        builtin: true,
        kind: "Deployment",
        crd: None,
    };

    fn w<'a>(m: &'a str) -> Writer<'a> {
        Writer {
            manager: m,
            api_version: "apps/v1",
            subresource: "",
        }
    }

    fn fields(obj: &Value, manager: &str) -> Value {
        obj["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["manager"] == manager)
            .map(|e| e["fieldsV1"].clone())
            .unwrap_or(Value::Null)
    }

    #[test]
    fn create_is_an_update_owning_what_it_set_without_zero_value_structs() {
        let mut obj = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "labels": {"app": "a"}},
            "spec": {"replicas": 1, "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%"}}}});
        record_update(S, true, &json!({}), &mut obj, &w("kubectl-create"));
        assert_eq!(
            fields(&obj, "kubectl-create"),
            json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {"f:replicas": {}, "f:strategy": {"f:rollingUpdate": {".": {}, "f:maxSurge": {}}, "f:type": {}}}})
        );
    }

    #[test]
    fn apply_conflicts_then_force_takes_ownership_and_dropped_fields_go() {
        let mut live = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": 1, "paused": false}});
        record_update(S, true, &json!({}), &mut live, &w("editor"));
        let config = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 3, "minReadySeconds": 5}});
        let err = apply(S, true, &live, &config, &w("ssa"), false).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Apply failed with 1 conflict: conflict with \"editor\" using apps/v1: .spec.replicas"
        );
        let forced = apply(S, true, &live, &config, &w("ssa"), true).expect("forced");
        assert_eq!(forced["spec"]["replicas"], 3);
        assert_eq!(
            fields(&forced, "editor"),
            json!({"f:spec": {"f:paused": {}}})
        );
        let config2 = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 3}});
        let again = apply(S, true, &forced, &config2, &w("ssa"), false).expect("no conflict");
        assert!(again["spec"].get("minReadySeconds").is_none());
        assert_eq!(fields(&again, "ssa"), json!({"f:spec": {"f:replicas": {}}}));
    }

    #[test]
    fn same_value_is_co_owned_and_a_no_op_keeps_the_time() {
        let mut live = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 2}});
        record_update(S, true, &json!({}), &mut live, &w("editor"));
        let config = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 2}});
        let once = apply(S, true, &live, &config, &w("ssa"), false).expect("co-owner");
        assert_eq!(fields(&once, "editor"), fields(&once, "ssa"));
        let twice = apply(S, true, &once, &config, &w("ssa"), false).expect("no-op");
        assert_eq!(once, twice);
    }
}
