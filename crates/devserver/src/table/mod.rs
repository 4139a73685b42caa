//! Server-side printing (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`), which kubectl
//! get asks for: the columns kube-apiserver's printers give the common built-in kinds
//! (pkg/printers/internalversion/printers.go: the `*ColumnDefinitions` and `print*` functions),
//! and the generic NAME / AGE table it prints for everything else, custom resources included.

use std::sync::Arc;

use serde_json::{Value, json};

use super::resources::ResourceType;
use super::store::Obj;

/// Kubernetes' `duration.HumanDuration`, which the server applies to the Age cell.
fn human_duration(secs: i64) -> String {
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86400);
    match secs {
        s if s < 0 => "0s".into(),
        s if s < 120 => format!("{s}s"),
        s if m < 10 && s % 60 == 0 => format!("{m}m"),
        s if m < 10 => format!("{m}m{}s", s % 60),
        _ if m < 180 => format!("{m}m"),
        _ if h < 8 && m % 60 == 0 => format!("{h}h"),
        _ if h < 8 => format!("{h}h{}m", m % 60),
        _ if h < 48 => format!("{h}h"),
        _ if h < 24 * 8 && h % 24 == 0 => format!("{d}d"),
        _ if h < 24 * 8 => format!("{d}d{}h", h % 24),
        _ if d < 365 * 2 => format!("{d}d"),
        _ if d < 365 * 8 && d % 365 != 0 => format!("{}y{}d", d / 365, d % 365),
        _ => format!("{}y", d / 365),
    }
}

fn age(v: &Value) -> String {
    v["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map(|t| human_duration(jiff::Timestamp::now().as_second() - t.as_second()))
        .unwrap_or_else(|| "<unknown>".into())
}

/// One extra column: name, type, priority (1 = only with `-o wide`), description.
type Column = (&'static str, &'static str, u8, &'static str);

fn int(v: &Value) -> Value {
    v.as_i64().unwrap_or(0).into()
}

fn count(v: &Value) -> i64 {
    v.as_object().map_or(0, |m| m.len() as i64) + v.as_array().map_or(0, |a| a.len() as i64)
}

/// `labels.FormatLabels` / `metav1.FormatLabelSelector` for matchLabels: sorted `k=v,...`.
fn selector_text(m: &Value) -> String {
    let mut pairs: Vec<String> = m
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    pairs.sort();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    }
}

fn containers_and_images(template_spec: &Value) -> (String, String) {
    let cs = template_spec["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = cs.iter().filter_map(|c| c["name"].as_str()).collect();
    let images: Vec<&str> = cs.iter().filter_map(|c| c["image"].as_str()).collect();
    (names.join(","), images.join(","))
}

fn service_ports(spec: &Value) -> String {
    let ports: Vec<String> = spec["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let proto = p["protocol"].as_str().unwrap_or("TCP");
            match p["nodePort"].as_i64() {
                Some(np) if np > 0 => format!("{}:{np}/{proto}", p["port"]),
                _ => format!("{}/{proto}", p["port"]),
            }
        })
        .collect();
    if ports.is_empty() {
        "<none>".into()
    } else {
        ports.join(",")
    }
}

fn external_ip(v: &Value) -> String {
    let spec = &v["spec"];
    let externals: Vec<&str> = spec["externalIPs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    match spec["type"].as_str().unwrap_or("ClusterIP") {
        "ExternalName" => spec["externalName"].as_str().unwrap_or_default().into(),
        "LoadBalancer" => {
            let mut ips: Vec<String> = v["status"]["loadBalancer"]["ingress"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|i| i["ip"].as_str().or(i["hostname"].as_str()))
                .map(String::from)
                .collect();
            ips.extend(externals.iter().map(|s| s.to_string()));
            if ips.is_empty() {
                "<pending>".into()
            } else {
                ips.join(",")
            }
        }
        _ if !externals.is_empty() => externals.join(","),
        _ => "<none>".into(),
    }
}

/// The columns between Name and the rest, and each row's cells for them, per kind. Age sits
/// where the printer puts it; `None` for kinds printed as NAME / AGE.
fn columns(res: &ResourceType) -> Option<&'static [Column]> {
    const AGE: Column = (
        "Age",
        "string",
        0,
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    );
    // Every workload kind's wide columns name its pod template's containers and images.
    const CONTAINERS: Column = (
        "Containers",
        "string",
        1,
        "Names of each container in the template.",
    );
    const IMAGES: Column = (
        "Images",
        "string",
        1,
        "Images referenced by each container in the template.",
    );
    Some(match (res.group.as_str(), res.kind.as_str()) {
        ("", "ConfigMap") => &[
            ("Data", "string", 0, "Data contains the configuration data."),
            AGE,
        ],
        ("", "Secret") => &[
            ("Type", "string", 0, "The type of secret"),
            ("Data", "string", 0, "Data contains the secret data."),
            AGE,
        ],
        ("", "Namespace") => &[("Status", "string", 0, "The status of the namespace"), AGE],
        ("", "ServiceAccount") => &[
            (
                "Secrets",
                "string",
                0,
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
            ),
            AGE,
        ],
        ("", "Service") => &[
            ("Type", "string", 0, "The type of service."),
            ("Cluster-IP", "string", 0, "The cluster IP of the service."),
            (
                "External-IP",
                "string",
                0,
                "The external IP of the service.",
            ),
            ("Port(s)", "string", 0, "The ports of the service."),
            AGE,
            (
                "Selector",
                "string",
                1,
                "Route service traffic to pods with label keys and values matching this selector.",
            ),
        ],
        ("", "Pod") => &[
            (
                "Ready",
                "string",
                0,
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            (
                "Status",
                "string",
                0,
                "The aggregate status of the containers in this pod.",
            ),
            (
                "Restarts",
                "string",
                0,
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            ),
            AGE,
            (
                "IP",
                "string",
                1,
                "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
            ),
            (
                "Node",
                "string",
                1,
                "NodeName is a request to schedule this pod onto a specific node.",
            ),
        ],
        ("apps", "Deployment") => &[
            ("Ready", "string", 0, "Number of the pod with ready state"),
            (
                "Up-to-date",
                "string",
                0,
                "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
            ),
            (
                "Available",
                "string",
                0,
                "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            (
                "Selector",
                "string",
                1,
                "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.",
            ),
        ],
        ("apps", "ReplicaSet") => &[
            (
                "Desired",
                "integer",
                0,
                "Replicas is the number of desired replicas.",
            ),
            (
                "Current",
                "integer",
                0,
                "Replicas is the most recently observed number of replicas.",
            ),
            (
                "Ready",
                "integer",
                0,
                "The number of ready replicas for this replica set.",
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            (
                "Selector",
                "string",
                1,
                "Selector is a label query over pods that should match the replica count.",
            ),
        ],
        ("apps", "StatefulSet") => &[
            ("Ready", "string", 0, "Number of the pod with ready state"),
            AGE,
            CONTAINERS,
            IMAGES,
        ],
        ("apps", "DaemonSet") => &[
            (
                "Desired",
                "integer",
                0,
                "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod).",
            ),
            (
                "Current",
                "integer",
                0,
                "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
            ),
            (
                "Ready",
                "integer",
                0,
                "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.",
            ),
            (
                "Up-to-date",
                "integer",
                0,
                "The total number of nodes that are running updated daemon pod",
            ),
            (
                "Available",
                "integer",
                0,
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)",
            ),
            (
                "Node Selector",
                "string",
                0,
                "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node.",
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            (
                "Selector",
                "string",
                1,
                "A label query over pods that are managed by the daemon set.",
            ),
        ],
        ("batch", "Job") => &[
            ("Status", "string", 0, "Status of the job."),
            (
                "Completions",
                "string",
                0,
                "The number of pods which reached phase Succeeded.",
            ),
            (
                "Duration",
                "string",
                0,
                "Time required to complete the job.",
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            (
                "Selector",
                "string",
                1,
                "A label query over pods that should match the pod count.",
            ),
        ],
        ("batch", "CronJob") => &[
            (
                "Schedule",
                "string",
                0,
                "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.",
            ),
            (
                "Timezone",
                "string",
                0,
                "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones.",
            ),
            (
                "Suspend",
                "boolean",
                0,
                "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false.",
            ),
            (
                "Active",
                "integer",
                0,
                "A list of pointers to currently running jobs.",
            ),
            (
                "Last Schedule",
                "string",
                0,
                "Information when was the last time the job was successfully scheduled.",
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            (
                "Selector",
                "string",
                1,
                "A label query over pods that should match the pod count.",
            ),
        ],
        ("", "Node") => &[
            ("Status", "string", 0, "The status of the node"),
            ("Roles", "string", 0, "The roles of the node"),
            AGE,
            (
                "Version",
                "string",
                0,
                "Kubelet Version reported by the node.",
            ),
            (
                "Internal-IP",
                "string",
                1,
                "List of addresses reachable to the node.",
            ),
            (
                "External-IP",
                "string",
                1,
                "List of addresses reachable to the node.",
            ),
            (
                "OS-Image",
                "string",
                1,
                "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
            ),
            (
                "Kernel-Version",
                "string",
                1,
                "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
            ),
            (
                "Container-Runtime",
                "string",
                1,
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
            ),
        ],
        _ => return None,
    })
}

fn cells(res: &ResourceType, v: &Value) -> Vec<Value> {
    let name = v["metadata"]["name"].clone();
    let age = age(v).into();
    let spec = &v["spec"];
    let status = &v["status"];
    let tspec = &spec["template"]["spec"];
    let mut out = vec![name];
    match (res.group.as_str(), res.kind.as_str()) {
        ("", "ConfigMap") => {
            out.extend([(count(&v["data"]) + count(&v["binaryData"])).into(), age])
        }
        ("", "Secret") => out.extend([
            v["type"].as_str().unwrap_or_default().into(),
            count(&v["data"]).into(),
            age,
        ]),
        ("", "Namespace") => out.extend([status["phase"].as_str().unwrap_or_default().into(), age]),
        ("", "ServiceAccount") => out.extend([count(&v["secrets"]).into(), age]),
        ("", "Service") => out.extend([
            spec["type"].as_str().unwrap_or_default().into(),
            spec["clusterIP"]
                .as_str()
                .filter(|s| !s.is_empty())
                .unwrap_or("<none>")
                .into(),
            external_ip(v).into(),
            service_ports(spec).into(),
            age,
            selector_text(&spec["selector"]).into(),
        ]),
        ("", "Pod") => {
            let statuses = status["containerStatuses"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let ready = statuses.iter().filter(|c| c["ready"] == true).count();
            let total = spec["containers"].as_array().map_or(0, Vec::len);
            let restarts: i64 = statuses
                .iter()
                .map(|c| c["restartCount"].as_i64().unwrap_or(0))
                .sum();
            let phase = status["reason"]
                .as_str()
                .or(status["phase"].as_str())
                .unwrap_or_default();
            let none = |s: &Value| {
                s.as_str()
                    .filter(|s| !s.is_empty())
                    .unwrap_or("<none>")
                    .to_string()
            };
            out.extend([
                format!("{ready}/{total}").into(),
                phase.into(),
                restarts.into(),
                age,
                none(&status["podIP"]).into(),
                none(&spec["nodeName"]).into(),
            ]);
        }
        ("apps", "Deployment") => {
            let (names, images) = containers_and_images(tspec);
            out.extend([
                format!(
                    "{}/{}",
                    int(&status["readyReplicas"]),
                    int(&spec["replicas"])
                )
                .into(),
                int(&status["updatedReplicas"]),
                int(&status["availableReplicas"]),
                age,
                names.into(),
                images.into(),
                selector_text(&spec["selector"]["matchLabels"]).into(),
            ]);
        }
        ("apps", "ReplicaSet") => {
            let (names, images) = containers_and_images(tspec);
            out.extend([
                int(&spec["replicas"]),
                int(&status["replicas"]),
                int(&status["readyReplicas"]),
                age,
                names.into(),
                images.into(),
                selector_text(&spec["selector"]["matchLabels"]).into(),
            ]);
        }
        ("apps", "StatefulSet") => {
            let (names, images) = containers_and_images(tspec);
            out.extend([
                format!(
                    "{}/{}",
                    int(&status["readyReplicas"]),
                    int(&spec["replicas"])
                )
                .into(),
                age,
                names.into(),
                images.into(),
            ]);
        }
        ("apps", "DaemonSet") => {
            let (names, images) = containers_and_images(tspec);
            out.extend([
                int(&status["desiredNumberScheduled"]),
                int(&status["currentNumberScheduled"]),
                int(&status["numberReady"]),
                int(&status["updatedNumberScheduled"]),
                int(&status["numberAvailable"]),
                selector_text(&tspec["nodeSelector"]).into(),
                age,
                names.into(),
                images.into(),
                selector_text(&spec["selector"]["matchLabels"]).into(),
            ]);
        }
        ("batch", "Job") => {
            let (names, images) = containers_and_images(tspec);
            out.extend([
                job_status(v).into(),
                job_completions(spec, status).into(),
                job_duration(status).into(),
                age,
                names.into(),
                images.into(),
                selector_text(&spec["selector"]["matchLabels"]).into(),
            ]);
        }
        ("batch", "CronJob") => {
            let jspec = &spec["jobTemplate"]["spec"];
            let (names, images) = containers_and_images(&jspec["template"]["spec"]);
            let last = status["lastScheduleTime"]
                .as_str()
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                .map_or("<none>".to_string(), |t| {
                    human_duration(jiff::Timestamp::now().as_second() - t.as_second())
                });
            out.extend([
                spec["schedule"].as_str().unwrap_or_default().into(),
                spec["timeZone"].as_str().unwrap_or("<none>").into(),
                spec["suspend"].as_bool().unwrap_or(false).into(),
                count(&status["active"]).into(),
                last.into(),
                age,
                names.into(),
                images.into(),
                selector_text(&jspec["selector"]["matchLabels"]).into(),
            ]);
        }
        ("", "Node") => {
            let info = &status["nodeInfo"];
            let address = |kind: &str| {
                status["addresses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|a| a["type"] == kind)
                    .and_then(|a| a["address"].as_str())
                    .unwrap_or("<none>")
                    .to_string()
            };
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            out.extend([
                node_status(v).into(),
                node_roles(v).into(),
                age,
                text(&info["kubeletVersion"]).into(),
                address("InternalIP").into(),
                address("ExternalIP").into(),
                text(&info["osImage"]).into(),
                text(&info["kernelVersion"]).into(),
                text(&info["containerRuntimeVersion"]).into(),
            ]);
        }
        _ => out.push(age),
    }
    out
}

/// `printJob`'s Status: the first true terminal condition, else suspended, else running.
fn job_status(v: &Value) -> &'static str {
    let has = |kind: &str| {
        v["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == kind && c["status"] == "True")
    };
    if has("Complete") {
        "Complete"
    } else if has("Failed") {
        "Failed"
    } else if v["metadata"]["deletionTimestamp"].is_string() {
        "Terminating"
    } else if has("FailureTarget") {
        "FailureTarget"
    } else if has("SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else if has("Suspended") {
        "Suspended"
    } else {
        "Running"
    }
}

/// `printJob`'s Completions: `succeeded/completions`, or `succeeded/1 of parallelism` for a
/// work queue.
fn job_completions(spec: &Value, status: &Value) -> String {
    let succeeded = status["succeeded"].as_i64().unwrap_or(0);
    match (spec["completions"].as_i64(), spec["parallelism"].as_i64()) {
        (Some(c), _) => format!("{succeeded}/{c}"),
        (None, Some(p)) if p > 1 => format!("{succeeded}/1 of {p}"),
        _ => format!("{succeeded}/1"),
    }
}

/// `printJob`'s Duration: from start to completion (or to now while running).
fn job_duration(status: &Value) -> String {
    let at = |f: &str| {
        status[f]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
    };
    match (at("startTime"), at("completionTime")) {
        (None, _) => String::new(),
        (Some(start), None) => {
            human_duration(jiff::Timestamp::now().as_second() - start.as_second())
        }
        (Some(start), Some(end)) => human_duration(end.as_second() - start.as_second()),
    }
}

/// `printNode`'s Status: the Ready condition, and `SchedulingDisabled` when cordoned.
fn node_status(v: &Value) -> String {
    let ready = v["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready");
    let mut s = match ready.and_then(|c| c["status"].as_str()) {
        Some("True") => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if v["spec"]["unschedulable"] == true {
        s.push_str(",SchedulingDisabled");
    }
    s
}

/// `printNode`'s Roles: the `node-role.kubernetes.io/ROLE` labels (and `kubernetes.io/role`).
fn node_roles(v: &Value) -> String {
    let mut roles: Vec<&str> = v["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(
            |(k, val)| match k.strip_prefix("node-role.kubernetes.io/") {
                Some(role) if !role.is_empty() => Some(role),
                _ if k == "kubernetes.io/role" => val.as_str().filter(|r| !r.is_empty()),
                _ => None,
            },
        )
        .collect();
    roles.sort_unstable();
    roles.dedup();
    if roles.is_empty() {
        "<none>".into()
    } else {
        roles.join(",")
    }
}

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
