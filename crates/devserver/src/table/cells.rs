//! Each row's cells per kind (the printers' `print*` functions), and the value formatting they
//! share: ages and durations, selectors, ports, job and node status.

use serde_json::Value;

use crate::resources::ResourceType;

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

pub(super) fn cells(res: &ResourceType, v: &Value) -> Vec<Value> {
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
