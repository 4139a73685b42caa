//! Server-side printing (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`), which kubectl
//! get asks for: the columns kube-apiserver's printers give the common built-in kinds
//! (pkg/printers/internalversion/printers.go: the `*ColumnDefinitions` and `print*` functions),
//! and the generic NAME / AGE table it prints for everything else, custom resources included.

use std::sync::Arc;

use serde_json::{Value, json};

use super::resources::ResourceType;
use super::store::Obj;

mod cells;
mod columns;

use cells::cells;
use columns::columns;

fn row(res: &ResourceType, obj: &Obj) -> Value {
    // Stored objects parse (see `Obj::value`); one that did not would show as an empty row.
    let v = obj.value().unwrap_or_default();
    json!({"cells": cells(res, &v), "object": v})
}

/// A Table with one row per object.
pub(crate) fn table(res: &ResourceType, objs: &[Arc<Obj>], rv: u64) -> Value {
    let scope = if res.namespaced {
        "within a namespace"
    } else {
        ""
    };
    let mut defs = vec![
        json!({"name": "Name", "type": "string", "format": "name", "priority": 0,
        "description": format!("Name must be unique {scope}.").replace(" .", ".")}),
    ];
    match columns(res) {
        Some(cols) => defs.extend(cols.iter().map(|(name, ty, priority, description)| {
            json!({"name": name, "type": ty, "format": "", "priority": priority, "description": description})
        })),
        None => defs.push(json!({"name": "Age", "type": "date", "format": "", "priority": 0,
            "description": "CreationTimestamp is a timestamp representing the server time when this object was created."})),
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv.to_string()},
        "columnDefinitions": defs,
        "rows": objs.iter().map(|o| row(res, o)).collect::<Vec<_>>(),
    })
}

/// A watch event's object as a one-row Table (what a Table watch carries).
pub(crate) fn table_bytes(res: &ResourceType, obj: &Arc<Obj>) -> Vec<u8> {
    serde_json::to_vec(&table(res, std::slice::from_ref(obj), obj.rv)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;

    fn cells_of(api_version: &str, kind: &str, v: Value) -> Vec<Value> {
        let reg = Registry::builtin();
        let res = reg.by_kind(api_version, kind).unwrap();
        let n = columns(&res).expect("columns").len() + 1;
        let c = cells(&res, &v);
        assert_eq!(c.len(), n, "one cell per column: {c:?}");
        c
    }

    #[test]
    fn nodes_print_status_roles_version_and_addresses() {
        let c = cells_of(
            "v1",
            "Node",
            json!({"metadata": {"name": "n1", "labels": {
                    "node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/etcd": ""}},
                "spec": {"unschedulable": true},
                "status": {"conditions": [{"type": "Ready", "status": "False"}],
                    "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                    "nodeInfo": {"kubeletVersion": "v1.33.1", "osImage": "Debian",
                        "kernelVersion": "6.1", "containerRuntimeVersion": "containerd://2.0"}}}),
        );
        assert_eq!(c[1], "NotReady,SchedulingDisabled");
        assert_eq!(c[2], "control-plane,etcd");
        assert_eq!(c[4], "v1.33.1");
        assert_eq!((&c[5], &c[6]), (&json!("10.0.0.1"), &json!("<none>")));
        assert_eq!(c[9], "containerd://2.0");
        let bare = cells_of("v1", "Node", json!({"metadata": {"name": "n2"}}));
        assert_eq!((&bare[1], &bare[2]), (&json!("Unknown"), &json!("<none>")));
    }

    #[test]
    fn jobs_print_status_completions_and_duration() {
        let c = cells_of(
            "batch/v1",
            "Job",
            json!({"metadata": {"name": "j"},
                "spec": {"completions": 3, "selector": {"matchLabels": {"b": "2", "a": "1"}},
                    "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
                "status": {"succeeded": 3, "startTime": "2026-01-01T00:00:00Z",
                    "completionTime": "2026-01-01T00:01:30Z",
                    "conditions": [{"type": "Complete", "status": "True"}]}}),
        );
        assert_eq!(&c[1..4], &[json!("Complete"), json!("3/3"), json!("90s")]);
        assert_eq!(&c[5..], &[json!("c"), json!("busybox"), json!("a=1,b=2")]);
        let queue = cells_of(
            "batch/v1",
            "Job",
            json!({"metadata": {"name": "q"}, "spec": {"parallelism": 4}, "status": {}}),
        );
        assert_eq!(
            &queue[1..4],
            &[json!("Running"), json!("0/1 of 4"), json!("")]
        );
    }

    #[test]
    fn cronjobs_and_daemonsets_print_their_columns() {
        let c = cells_of(
            "batch/v1",
            "CronJob",
            json!({"metadata": {"name": "cj"}, "spec": {"schedule": "*/5 * * * *",
                "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}},
                "status": {"active": [{"name": "cj-1"}]}}),
        );
        assert_eq!(
            &c[1..6],
            &[
                json!("*/5 * * * *"),
                json!("<none>"),
                json!(false),
                json!(1),
                json!("<none>")
            ]
        );
        let d = cells_of(
            "apps/v1",
            "DaemonSet",
            json!({"metadata": {"name": "ds"}, "spec": {"template": {"spec": {
                    "nodeSelector": {"kubernetes.io/os": "linux"}, "containers": []}}},
                "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3,
                    "numberReady": 2, "updatedNumberScheduled": 3, "numberAvailable": 2}}),
        );
        assert_eq!(
            &d[1..7],
            &[
                json!(3),
                json!(3),
                json!(2),
                json!(3),
                json!(2),
                json!("kubernetes.io/os=linux")
            ]
        );
    }
}
