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
            (
                "Containers",
                "string",
                1,
                "Names of each container in the template.",
            ),
            (
                "Images",
                "string",
                1,
                "Images referenced by each container in the template.",
            ),
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
            (
                "Containers",
                "string",
                1,
                "Names of each container in the template.",
            ),
            (
                "Images",
                "string",
                1,
                "Images referenced by each container in the template.",
            ),
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
            (
                "Containers",
                "string",
                1,
                "Names of each container in the template.",
            ),
            (
                "Images",
                "string",
                1,
                "Images referenced by each container in the template.",
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
        _ => out.push(age),
    }
    out
}

fn row(res: &ResourceType, obj: &Obj) -> Value {
    let v = obj.value();
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
