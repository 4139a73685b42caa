//! `orphans`: warns about ReplicaSets whose owning Deployment is gone or was replaced.
//!
//! - ReplicaSet added, updated or resynced: each owner reference of kind `Deployment` is looked up
//!   in the cache; if the Deployment is missing, or has another uid (deleted and recreated under
//!   the same name), the ReplicaSet is an orphan.
//! - Deployment deleted: every ReplicaSet in the built-in `owner` index under its uid is an orphan.
//!
//! Each orphan logs one warn line:
//!
//! ```json
//! {"orphan":{"kind":"ReplicaSet","namespace":"default","name":"web-7d9f"},
//!  "owner":{"kind":"Deployment","name":"web","uid":"0b5e..."}}
//! ```
//!
//! A (ReplicaSet, owner uid) pair is reported once until the ReplicaSet is deleted or is seen with
//! that owner present again. The set lives in the instance, so a restarted instance reports
//! current orphans once more during its replay.
//!
//! Config: `delete = true` (default false) also deletes each orphan, with its UID as a
//! precondition so a ReplicaSet recreated under the same name in the meantime is left alone.
//! The manifest must then declare `[[write]] api-version = "apps/v1"`, `kind = "ReplicaSet"`,
//! `verbs = ["delete"]`. A delete that finds the ReplicaSet gone, or replaced, is not an error.
//!
//! Caveat: the Deployment and ReplicaSet caches sync independently; during the first sync a
//! ReplicaSet may be replayed before its Deployment is cached and be reported once too early.

use std::collections::BTreeSet;

use informant_sdk::kube::{self, Preconditions, WriteError};
use informant_sdk::{Event, HandlerError, Plugin, Resource, cache, log};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use serde::Serialize;
use serde_json::Value;

/// The plugin instance: the orphans already reported, as (ReplicaSet key, owner uid).
#[derive(Debug, Default)]
pub struct Orphans {
    reported: BTreeSet<(String, String)>,
    delete: bool,
}

#[derive(Serialize)]
struct Report<'a> {
    orphan: Object<'a>,
    owner: Owner<'a>,
}

#[derive(Serialize)]
struct Object<'a> {
    kind: &'static str,
    namespace: Option<&'a str>,
    name: &'a str,
}

#[derive(Serialize)]
struct Owner<'a> {
    kind: &'static str,
    name: &'a str,
    uid: &'a str,
}

fn key(namespace: Option<&str>, name: &str) -> String {
    format!("{}/{name}", namespace.unwrap_or_default())
}

impl Orphans {
    /// Logs the orphan unless this pair was the last thing reported for it.
    fn report(
        &mut self,
        (namespace, name, uid): (Option<&str>, &str, Option<&str>),
        owner_name: &str,
        owner_uid: &str,
    ) -> Result<(), HandlerError> {
        if !self
            .reported
            .insert((key(namespace, name), owner_uid.to_string()))
        {
            return Ok(());
        }
        let report = Report {
            orphan: Object {
                kind: "ReplicaSet",
                namespace,
                name,
            },
            owner: Owner {
                kind: "Deployment",
                name: owner_name,
                uid: owner_uid,
            },
        };
        let json = serde_json::to_string(&report)?;
        log::warn(&json);
        if self.delete {
            let pre = Preconditions {
                uid: uid.map(String::from),
                resource_version: None,
            };
            match kube::delete::<ReplicaSet>(namespace, name, &pre) {
                // Gone already, or a new ReplicaSet of that name: not this orphan any more.
                Ok(()) | Err(WriteError::NotFound(_) | WriteError::Conflict(_)) => {}
                Err(e) => {
                    return Err(format!("deleting ReplicaSet {}: {e}", key(namespace, name)).into());
                }
            }
        }
        Ok(())
    }

    fn check_replica_set(&mut self, ev: &Event) -> Result<(), HandlerError> {
        if ev.resource() != &Resource::of::<ReplicaSet>() {
            return Ok(());
        }
        let rs: ReplicaSet = ev.object()?;
        let (ns, name) = (ev.meta().namespace(), ev.meta().name());
        let owners = rs.metadata.owner_references.unwrap_or_default();
        for owner in owners
            .iter()
            .filter(|o| o.kind == "Deployment" && o.api_version.starts_with("apps/"))
        {
            let current = cache::get_as::<Deployment>(ns, &owner.name)
                .map_err(|e| format!("looking up Deployment {}: {e}", key(ns, &owner.name)))?;
            let alive =
                current.is_some_and(|d| d.metadata.uid.as_deref() == Some(owner.uid.as_str()));
            if alive {
                // Owned again (or still): a later loss of this owner is news worth reporting.
                self.reported.remove(&(key(ns, name), owner.uid.clone()));
            } else {
                let uid = rs.metadata.uid.as_deref();
                self.report((ns, name, uid), &owner.name, &owner.uid)?;
            }
        }
        Ok(())
    }
}

impl Plugin for Orphans {
    fn init(config: Value) -> Result<Self, HandlerError> {
        let table = config
            .as_object()
            .ok_or_else(|| format!("orphans config must be a table, got {config}"))?;
        let mut orphans = Orphans::default();
        for (k, v) in table {
            match (k.as_str(), v) {
                ("delete", Value::Bool(b)) => orphans.delete = *b,
                _ => {
                    return Err(format!(
                        "orphans config: unknown or invalid `{k} = {v}` (only `delete = true|false`)"
                    )
                    .into());
                }
            }
        }
        Ok(orphans)
    }

    fn on_added(&mut self, ev: &Event) -> Result<(), HandlerError> {
        self.check_replica_set(ev)
    }

    fn on_updated(&mut self, ev: &Event) -> Result<(), HandlerError> {
        self.check_replica_set(ev)
    }

    fn on_resync(&mut self, ev: &Event) -> Result<(), HandlerError> {
        self.check_replica_set(ev)
    }

    fn on_deleted(&mut self, ev: &Event) -> Result<(), HandlerError> {
        let resource = ev.resource();
        if resource == &Resource::of::<ReplicaSet>() {
            let rs_key = key(ev.meta().namespace(), ev.meta().name());
            self.reported.retain(|(k, _)| *k != rs_key);
        } else if resource == &Resource::of::<Deployment>() {
            let uid = ev.meta().uid();
            if uid.is_empty() {
                return Err(format!("deleted Deployment {} has no uid", ev.meta().key()).into());
            }
            let owned = cache::by_index(&Resource::of::<ReplicaSet>(), "owner", uid)
                .map_err(|e| format!("listing ReplicaSets owned by {uid}: {e}"))?;
            for json in owned {
                let rs: ReplicaSet = serde_json::from_str(&json)?;
                let name = rs.metadata.name.as_deref().unwrap_or_default();
                let rs_uid = rs.metadata.uid.as_deref();
                self.report(
                    (rs.metadata.namespace.as_deref(), name, rs_uid),
                    ev.meta().name(),
                    uid,
                )?;
            }
        }
        Ok(())
    }
}

informant_sdk::export_plugin!(Orphans);

#[cfg(test)]
mod tests {
    use informant_sdk::log::Level;
    use informant_sdk::testing::{EventBuilder, Harness};
    use serde_json::json;

    use super::*;

    const MANIFEST: &str = include_str!("../orphans.toml");

    fn deployment(name: &str, uid: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"namespace": "default", "name": name, "uid": uid}})
    }

    fn replica_set(name: &str, owner: &str, owner_uid: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"namespace": "default", "name": name, "uid": format!("rs-{name}"),
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "unrelated", "uid": "cm"},
                    {"apiVersion": "apps/v1", "kind": "Deployment", "name": owner, "uid": owner_uid,
                     "controller": true}]}})
    }

    fn warning(rs: &str, owner: &str, uid: &str) -> (Level, String) {
        let line = format!(
            r#"{{"orphan":{{"kind":"ReplicaSet","namespace":"default","name":"{rs}"}},"owner":{{"kind":"Deployment","name":"{owner}","uid":"{uid}"}}}}"#
        );
        (Level::Warn, line)
    }

    #[test]
    fn owned_replica_sets_are_quiet() {
        let mut h = Harness::<Orphans>::from_manifest(MANIFEST).unwrap();
        h.send(EventBuilder::added(&deployment("web", "d1")).initial())
            .unwrap();
        h.send(EventBuilder::added(&replica_set("web-1", "web", "d1")).initial())
            .unwrap();
        h.send(EventBuilder::resync(&replica_set("web-1", "web", "d1")))
            .unwrap();
        assert_eq!(h.logs(), []);
    }

    #[test]
    fn missing_or_replaced_owner_is_reported_once() {
        let mut h = Harness::<Orphans>::from_manifest(MANIFEST).unwrap();
        h.send(EventBuilder::added(&replica_set("web-1", "web", "d1")))
            .unwrap();
        h.send(EventBuilder::resync(&replica_set("web-1", "web", "d1")))
            .unwrap();
        assert_eq!(h.take_logs(), [warning("web-1", "web", "d1")]);

        // Recreated under the same name: a different uid does not adopt the old ReplicaSet.
        h.send(EventBuilder::added(&deployment("api", "d2-new")))
            .unwrap();
        let rs = replica_set("api-1", "api", "d2-old");
        h.send(EventBuilder::added(&rs)).unwrap();
        h.send(EventBuilder::updated(&rs, &rs)).unwrap();
        assert_eq!(h.take_logs(), [warning("api-1", "api", "d2-old")]);
    }

    #[test]
    fn deleting_the_replica_set_forgets_it() {
        let mut h = Harness::<Orphans>::from_manifest(MANIFEST).unwrap();
        let rs = replica_set("web-1", "web", "d1");
        h.send(EventBuilder::added(&rs)).unwrap();
        h.send(EventBuilder::deleted(&rs)).unwrap();
        h.send(EventBuilder::added(&rs)).unwrap();
        assert_eq!(
            h.take_logs(),
            [warning("web-1", "web", "d1"), warning("web-1", "web", "d1")]
        );
    }

    #[test]
    fn deleting_a_deployment_reports_its_replica_sets_through_the_owner_index() {
        let mut h = Harness::<Orphans>::from_manifest(MANIFEST).unwrap();
        h.send(EventBuilder::added(&deployment("web", "d1")))
            .unwrap();
        h.send(EventBuilder::added(&deployment("api", "d2")))
            .unwrap();
        for (rs, owner, uid) in [
            ("web-1", "web", "d1"),
            ("web-2", "web", "d1"),
            ("api-1", "api", "d2"),
        ] {
            h.send(EventBuilder::added(&replica_set(rs, owner, uid)))
                .unwrap();
        }
        assert_eq!(h.logs(), []);
        h.send(EventBuilder::deleted(&deployment("web", "d1")))
            .unwrap();
        assert_eq!(
            h.take_logs(),
            [warning("web-1", "web", "d1"), warning("web-2", "web", "d1")]
        );
        // Already reported: a later update of the same orphan stays quiet.
        h.send(EventBuilder::resync(&replica_set("web-1", "web", "d1")))
            .unwrap();
        assert_eq!(h.logs(), []);
    }

    #[test]
    fn readoption_rearms_the_report() {
        let mut h = Harness::<Orphans>::from_manifest(MANIFEST).unwrap();
        let rs = replica_set("web-1", "web", "d1");
        h.send(EventBuilder::added(&rs)).unwrap();
        h.send(EventBuilder::added(&deployment("web", "d1")))
            .unwrap();
        h.send(EventBuilder::resync(&rs)).unwrap();
        h.send(EventBuilder::deleted(&deployment("web", "d1")))
            .unwrap();
        assert_eq!(
            h.take_logs(),
            [warning("web-1", "web", "d1"), warning("web-1", "web", "d1")]
        );
    }

    #[test]
    fn delete_removes_the_orphan_pinned_to_its_uid() {
        let manifest = format!(
            "{MANIFEST}\n[[write]]\napi-version = \"apps/v1\"\nkind = \"ReplicaSet\"\nverbs = [\"delete\"]\n[config]\ndelete = true\n"
        );
        let mut h = Harness::<Orphans>::from_manifest(&manifest).unwrap();
        h.send(EventBuilder::added(&replica_set("web-1", "web", "d1")))
            .unwrap();
        let writes = h.take_writes();
        assert_eq!(writes.len(), 1, "{writes:?}");
        assert_eq!(
            (
                writes[0].verb,
                writes[0].name.as_deref(),
                writes[0].namespace.as_deref()
            ),
            ("delete", Some("web-1"), Some("default"))
        );
        let pre: Value = serde_json::from_str(&writes[0].body).unwrap();
        assert_eq!(pre["uid"], "rs-web-1");
    }

    #[test]
    fn config_and_bad_objects_are_errors() {
        assert!(Harness::<Orphans>::new(r#"{"x": 1}"#).is_err());
        assert!(Harness::<Orphans>::new(r#"{"delete": "yes"}"#).is_err());
        let mut h = Harness::<Orphans>::new("{}").unwrap();
        let bad = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "x", "ownerReferences": "nope"}});
        let err = h.send(EventBuilder::added(&bad)).unwrap_err();
        assert!(!err.is_retry(), "{err:?}");
        let err = err.to_string();
        assert!(err.contains("cannot decode the object"), "{err}");
    }
}
