//! Defaulting, as the API server's scheme defaulters apply it to every object it decodes for a
//! write (create, update, patch, apply): one table, one row per kind, each naming the Kubernetes
//! source it mirrors. Only fields the user left out are filled in; nothing set is changed.
//!
//! [`admit_create`] adds what the default admission plugins add to a Pod created over HTTP
//! (its service account and token volume, the default tolerations, its priority). Not
//! mirrored: `status` a controller would write. A Job's generated selector is the registry's,
//! in `strategy::prepare_named`.

use serde_json::{Value, json};

use super::resources::ResourceType;

/// One defaulting rule: the kind it applies to and the source it follows.
struct Rule {
    group: &'static str,
    kind: &'static str,
    /// The Kubernetes file (and function) this rule mirrors.
    #[cfg_attr(not(test), allow(dead_code))]
    source: &'static str,
    apply: fn(&mut Value),
}

const RULES: &[Rule] = &[
    Rule {
        group: "apps",
        kind: "Deployment",
        source: "pkg/apis/apps/v1/defaults.go SetDefaults_Deployment",
        apply: deployment,
    },
    Rule {
        group: "apps",
        kind: "ReplicaSet",
        source: "pkg/apis/apps/v1/defaults.go SetDefaults_ReplicaSet",
        apply: replica_set,
    },
    Rule {
        group: "apps",
        kind: "StatefulSet",
        source: "pkg/apis/apps/v1/defaults.go SetDefaults_StatefulSet",
        apply: stateful_set,
    },
    Rule {
        group: "apps",
        kind: "DaemonSet",
        source: "pkg/apis/apps/v1/defaults.go SetDefaults_DaemonSet",
        apply: daemon_set,
    },
    Rule {
        group: "batch",
        kind: "Job",
        source: "pkg/apis/batch/v1/defaults.go SetDefaults_Job",
        apply: job,
    },
    Rule {
        group: "batch",
        kind: "CronJob",
        source: "pkg/apis/batch/v1/defaults.go SetDefaults_CronJob",
        apply: cron_job,
    },
    Rule {
        group: "",
        kind: "Pod",
        source: "pkg/apis/core/v1/defaults.go SetDefaults_Pod, SetDefaults_PodSpec, SetDefaults_Container",
        apply: pod,
    },
    Rule {
        group: "",
        kind: "Service",
        source: "pkg/apis/core/v1/defaults.go SetDefaults_Service; pkg/registry/core/service/storage (IP families)",
        apply: service,
    },
    Rule {
        group: "",
        kind: "Secret",
        source: "pkg/apis/core/v1/defaults.go SetDefaults_Secret",
        apply: secret,
    },
    Rule {
        group: "",
        kind: "Namespace",
        source: "pkg/apis/core/v1/defaults.go SetDefaults_Namespace",
        apply: namespace,
    },
    Rule {
        group: "",
        kind: "PersistentVolumeClaim",
        source: "pkg/apis/core/v1/defaults.go SetDefaults_PersistentVolumeClaimSpec",
        apply: pvc,
    },
    Rule {
        group: "apiextensions.k8s.io",
        kind: "CustomResourceDefinition",
        source: "staging/src/k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1/defaults.go",
        apply: crd,
    },
];

/// Applies the defaults of `res`'s kind to `obj`.
pub(crate) fn apply(res: &ResourceType, obj: &mut Value) {
    if let Some(schema) = res.schema.as_deref().filter(|_| !res.builtin) {
        super::structural::prune_and_default(schema, obj);
    }
    for rule in RULES {
        if rule.group == res.group && rule.kind == res.kind {
            (rule.apply)(obj);
        }
    }
}

/// What kube-apiserver's default mutating admission plugins add to an object being created:
/// for a Pod, plugin/pkg/admission/serviceaccount (`serviceAccountName` `default` and the
/// projected `kube-api-access-*` token volume mounted in every container, unless
/// `automountServiceAccountToken` is false), defaulttolerationseconds (tolerate not-ready and
/// unreachable nodes for 300 s) and priority (`priority` 0 and `PreemptLowerPriority` without
/// a priority class). The server's own writes (seeding, the Rust API) skip admission, as
/// writes straight to storage do.
pub(crate) fn admit_create(res: &ResourceType, obj: &mut Value) {
    if !(res.group.is_empty() && res.kind == "Pod") {
        return;
    }
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    or_set(spec, &["serviceAccountName"], "default".into());
    let account = spec["serviceAccountName"].clone();
    or_set(spec, &["serviceAccount"], account);
    if spec["automountServiceAccountToken"] != false {
        let volume = format!("kube-api-access-{}", super::metadata::generate_suffix());
        let mount = json!({"name": volume, "readOnly": true,
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"});
        let mut mounted = false;
        for list in ["initContainers", "containers"] {
            for c in spec[list].as_array_mut().into_iter().flatten() {
                let mounts = c
                    .as_object_mut()
                    .map(|c| c.entry("volumeMounts").or_insert_with(|| json!([])));
                let Some(mounts) = mounts.and_then(Value::as_array_mut) else {
                    continue;
                };
                // A container that mounts something at the token's path keeps its own.
                if !mounts.iter().any(|m| m["mountPath"] == mount["mountPath"]) {
                    mounts.push(mount.clone());
                    mounted = true;
                }
            }
        }
        if mounted && let Some(spec) = spec.as_object_mut() {
            let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
            if let Some(volumes) = volumes.as_array_mut() {
                volumes.push(json!({"name": volume, "projected": {"defaultMode": 420, "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}, "path": "namespace"}]}},
                ]}}));
            }
        }
    }
    if let Some(spec) = spec.as_object_mut() {
        let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
        if let Some(tolerations) = tolerations.as_array_mut() {
            for key in [
                "node.kubernetes.io/not-ready",
                "node.kubernetes.io/unreachable",
            ] {
                let tolerated = tolerations.iter().any(|t| {
                    (t["key"] == key || (t["key"].is_null() && t["operator"] == "Exists"))
                        && (t["effect"] == "NoExecute" || t["effect"].is_null())
                });
                if !tolerated {
                    tolerations.push(json!({"key": key, "operator": "Exists",
                        "effect": "NoExecute", "tolerationSeconds": 300}));
                }
            }
        }
    }
    if spec["priorityClassName"].is_null() {
        or_set(spec, &["priority"], 0.into());
        or_set(spec, &["preemptionPolicy"], "PreemptLowerPriority".into());
    }
}

/// The source each kind's defaults follow.
#[cfg(test)]
fn sources() -> impl Iterator<Item = (&'static str, &'static str)> {
    RULES.iter().map(|r| (r.kind, r.source))
}

/// Every Namespace carries its own name as the label `kubernetes.io/metadata.name`, set over
/// whatever the writer gave, so selectors (a webhook's `namespaceSelector`) can name it.
fn namespace(ns: &mut Value) {
    let Some(name) = ns["metadata"]["name"].as_str().map(str::to_string) else {
        return;
    };
    let Some(meta) = ns.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let labels = meta.entry("labels").or_insert_with(|| json!({}));
    if labels.is_null() {
        *labels = json!({});
    }
    if let Some(labels) = labels.as_object_mut() {
        labels.insert("kubernetes.io/metadata.name".into(), name.into());
    }
}

/// Sets `path` to `value` unless it is set; creates the objects on the way.
fn or_set(obj: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for seg in parents {
        if !cur.is_object() {
            return;
        }
        if cur.get(*seg).is_none_or(Value::is_null) {
            cur[*seg] = json!({});
        }
        cur = &mut cur[*seg];
    }
    if cur.is_object() && cur.get(*last).is_none_or(Value::is_null) {
        cur[*last] = value;
    }
}

fn deployment(d: &mut Value) {
    or_set(d, &["spec", "replicas"], 1.into());
    let strategy = &d["spec"]["strategy"];
    if strategy["type"].is_null() || strategy["type"] == "RollingUpdate" {
        or_set(d, &["spec", "strategy", "type"], "RollingUpdate".into());
        or_set(
            d,
            &["spec", "strategy", "rollingUpdate", "maxUnavailable"],
            "25%".into(),
        );
        or_set(
            d,
            &["spec", "strategy", "rollingUpdate", "maxSurge"],
            "25%".into(),
        );
    }
    or_set(d, &["spec", "revisionHistoryLimit"], 10.into());
    or_set(d, &["spec", "progressDeadlineSeconds"], 600.into());
    template(d, &["spec", "template"]);
}

fn replica_set(r: &mut Value) {
    or_set(r, &["spec", "replicas"], 1.into());
    template(r, &["spec", "template"]);
}

fn stateful_set(s: &mut Value) {
    or_set(s, &["spec", "podManagementPolicy"], "OrderedReady".into());
    let update = &s["spec"]["updateStrategy"];
    if update["type"].is_null() || update["type"] == "RollingUpdate" {
        or_set(
            s,
            &["spec", "updateStrategy", "type"],
            "RollingUpdate".into(),
        );
        or_set(
            s,
            &["spec", "updateStrategy", "rollingUpdate", "partition"],
            0.into(),
        );
    }
    or_set(s, &["spec", "replicas"], 1.into());
    or_set(s, &["spec", "revisionHistoryLimit"], 10.into());
    or_set(
        s,
        &["spec", "persistentVolumeClaimRetentionPolicy"],
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
    );
    template(s, &["spec", "template"]);
}

fn daemon_set(d: &mut Value) {
    let update = &d["spec"]["updateStrategy"];
    if update["type"].is_null() || update["type"] == "RollingUpdate" {
        or_set(
            d,
            &["spec", "updateStrategy", "type"],
            "RollingUpdate".into(),
        );
        or_set(
            d,
            &["spec", "updateStrategy", "rollingUpdate", "maxUnavailable"],
            1.into(),
        );
        or_set(
            d,
            &["spec", "updateStrategy", "rollingUpdate", "maxSurge"],
            0.into(),
        );
    }
    or_set(d, &["spec", "revisionHistoryLimit"], 10.into());
    template(d, &["spec", "template"]);
}

fn job(j: &mut Value) {
    job_labels(j);
    if j["spec"]["completions"].is_null() && j["spec"]["parallelism"].is_null() {
        or_set(j, &["spec", "completions"], 1.into());
    }
    or_set(j, &["spec", "parallelism"], 1.into());
    let backoff = if j["spec"]["backoffLimitPerIndex"].is_null() {
        6
    } else {
        i64::from(i32::MAX)
    };
    or_set(j, &["spec", "backoffLimit"], backoff.into());
    or_set(j, &["spec", "completionMode"], "NonIndexed".into());
    or_set(j, &["spec", "suspend"], false.into());
    or_set(
        j,
        &["spec", "podReplacementPolicy"],
        "TerminatingOrFailed".into(),
    );
    template(j, &["spec", "template"]);
}

/// SetDefaults_Job: a Job without labels takes its pod template's.
pub(crate) fn job_labels(j: &mut Value) {
    let template = &j["spec"]["template"]["metadata"]["labels"];
    if template.as_object().is_some_and(|m| !m.is_empty())
        && j["metadata"]["labels"]
            .as_object()
            .is_none_or(|m| m.is_empty())
    {
        let labels = template.clone();
        j["metadata"]["labels"] = labels;
    }
}

fn cron_job(c: &mut Value) {
    or_set(c, &["spec", "concurrencyPolicy"], "Allow".into());
    or_set(c, &["spec", "suspend"], false.into());
    or_set(c, &["spec", "successfulJobsHistoryLimit"], 3.into());
    or_set(c, &["spec", "failedJobsHistoryLimit"], 1.into());
    if c["spec"]["jobTemplate"].is_object() {
        // A CronJob's job template is defaulted as a Job's pod template is, not as a Job.
        template(c, &["spec", "jobTemplate", "spec", "template"]);
    }
}

/// A pod template: its pod spec, as `SetDefaults_PodTemplateSpec` leads to `SetDefaults_PodSpec`.
fn template(obj: &mut Value, path: &[&str]) {
    let mut cur = &mut *obj;
    for seg in path {
        match cur.get_mut(*seg) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Some(spec) = cur.get_mut("spec") {
        pod_spec(spec);
    }
}

fn pod(p: &mut Value) {
    if let Some(spec) = p.get_mut("spec") {
        pod_spec(spec);
        // SetDefaults_Pod, not the template path.
        or_set(spec, &["enableServiceLinks"], true.into());
    }
}

fn pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    or_set(spec, &["dnsPolicy"], "ClusterFirst".into());
    or_set(spec, &["restartPolicy"], "Always".into());
    or_set(spec, &["terminationGracePeriodSeconds"], 30.into());
    or_set(spec, &["securityContext"], json!({}));
    or_set(spec, &["schedulerName"], "default-scheduler".into());
    for list in ["containers", "initContainers"] {
        if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
            containers.iter_mut().for_each(container);
        }
    }
}

fn container(c: &mut Value) {
    if !c.is_object() {
        return;
    }
    let policy = pull_policy(c["image"].as_str().unwrap_or_default());
    or_set(c, &["imagePullPolicy"], policy.into());
    or_set(
        c,
        &["terminationMessagePath"],
        "/dev/termination-log".into(),
    );
    or_set(c, &["terminationMessagePolicy"], "File".into());
    or_set(c, &["resources"], json!({}));
    if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports {
            or_set(port, &["protocol"], "TCP".into());
        }
    }
}

/// `Always` for `:latest` or no tag (and no digest), else `IfNotPresent` (SetDefaults_Container).
fn pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    // The tag follows the last ':' after the last '/' (a registry may carry a port).
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

fn service(s: &mut Value) {
    or_set(s, &["spec", "type"], "ClusterIP".into());
    or_set(s, &["spec", "sessionAffinity"], "None".into());
    let kind = s["spec"]["type"].as_str().unwrap_or_default().to_string();
    if let Some(ports) = s["spec"].get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports {
            or_set(port, &["protocol"], "TCP".into());
            let number = port["port"].clone();
            or_set(port, &["targetPort"], number);
        }
    }
    if kind != "ExternalName" {
        or_set(s, &["spec", "internalTrafficPolicy"], "Cluster".into());
    }
    if kind == "NodePort" || kind == "LoadBalancer" {
        or_set(s, &["spec", "externalTrafficPolicy"], "Cluster".into());
    }
}

/// What the service registry allocates on create (pkg/registry/core/service/storage/alloc.go):
/// a cluster IP from the service CIDR (here 10.96.0.0/12) unless headless or ExternalName, and
/// the single-stack IPv4 family fields.
pub(crate) fn allocate_service(s: &mut Value, next_ip: impl FnOnce() -> String) {
    if s["spec"]["type"] == "ExternalName" {
        return;
    }
    let ip = match s["spec"]["clusterIP"].as_str() {
        Some(ip) if !ip.is_empty() => ip.to_string(),
        _ => next_ip(),
    };
    s["spec"]["clusterIP"] = ip.clone().into();
    or_set(s, &["spec", "clusterIPs"], json!([ip]));
    or_set(s, &["spec", "ipFamilies"], json!(["IPv4"]));
    or_set(s, &["spec", "ipFamilyPolicy"], "SingleStack".into());
    or_set(s, &["status", "loadBalancer"], json!({}));
}

/// On update the allocated fields stay as they were when the body leaves them out
/// (pkg/registry/core/service/storage/storage.go patchAllocatedValues).
pub(crate) fn keep_allocated_service(old: &Value, new: &mut Value) {
    for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        if new["spec"].is_object()
            && new["spec"].get(field).is_none_or(Value::is_null)
            && let Some(v) = old["spec"].get(field)
        {
            new["spec"][field] = v.clone();
        }
    }
}

fn secret(s: &mut Value) {
    or_set(s, &["type"], "Opaque".into());
}

fn pvc(p: &mut Value) {
    if p["spec"].is_object() {
        or_set(p, &["spec", "volumeMode"], "Filesystem".into());
    }
}

fn crd(c: &mut Value) {
    or_set(c, &["spec", "conversion", "strategy"], "None".into());
    if let Some(kind) = c["spec"]["names"]["kind"].as_str().map(String::from) {
        or_set(
            c,
            &["spec", "names", "singular"],
            kind.to_lowercase().into(),
        );
        or_set(
            c,
            &["spec", "names", "listKind"],
            format!("{kind}List").into(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_pull_policy_follows_the_tag() {
        for (image, want) in [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("nginx:1.27", "IfNotPresent"),
            ("registry:5000/team/web", "Always"),
            ("registry:5000/team/web:v2", "IfNotPresent"),
            ("nginx@sha256:abc", "IfNotPresent"),
        ] {
            assert_eq!(pull_policy(image), want, "{image}");
        }
    }

    #[test]
    fn set_fields_are_kept() {
        let mut d = json!({"spec": {"replicas": 3, "strategy": {"type": "Recreate"},
            "template": {"spec": {"restartPolicy": "Always", "containers": [{"name": "c", "image": "x:1",
                "imagePullPolicy": "Never", "ports": [{"containerPort": 80, "protocol": "UDP"}]}]}}}});
        deployment(&mut d);
        assert_eq!(d["spec"]["replicas"], 3);
        assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}));
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["imagePullPolicy"], "Never");
        assert_eq!(c["ports"][0]["protocol"], "UDP");
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(d["spec"]["template"]["spec"]["dnsPolicy"], "ClusterFirst");
    }

    #[test]
    fn every_rule_names_its_source() {
        for (kind, source) in sources() {
            assert!(
                source.starts_with("pkg/") || source.starts_with("staging/"),
                "{kind}"
            );
        }
    }
}
