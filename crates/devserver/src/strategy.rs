//! Per-kind write rules, after kube-apiserver's registry strategies: what a create resets, which
//! part of an object a write may change (main resource or `status` subresource), when
//! `metadata.generation` moves, and the one status this server writes itself: a Deployment's
//! notice that nothing will roll it out ([`no_controllers`]).
//!
//! The rules apply to HTTP writes as a real apiserver applies them. Direct writes through
//! [`crate::DevServer`] stand in for controllers and tests, so they may set `status` with the
//! rest of the object; generation follows the same rules on both paths.

use serde_json::{Value, json};

use super::api::Sub;
use super::metadata::{meta_mut, now};
use super::resources::ResourceType;

/// When `metadata.generation` is set and bumped, per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Generation {
    /// No generation at all (ConfigMap, Secret, Namespace, ServiceAccount, Service, ...).
    None,
    /// 1 on create, +1 when `.spec` changes (workloads, Pod since 1.33, CRD).
    Spec,
    /// As [`Generation::Spec`], and also when annotations change (Deployment).
    SpecAndAnnotations,
    /// 1 on create, +1 on any change outside `metadata` (custom resources).
    NonMetadata,
}

impl Generation {
    /// Whether a main-resource write from `old` to `new` starts a new generation.
    fn bumps(self, old: &Value, new: &Value) -> bool {
        let spec_changed = || old.get("spec") != new.get("spec");
        match self {
            Generation::None => false,
            Generation::Spec => spec_changed(),
            Generation::SpecAndAnnotations => {
                spec_changed()
                    || old["metadata"].get("annotations") != new["metadata"].get("annotations")
            }
            Generation::NonMetadata => {
                let without_meta = |v: &Value| {
                    let mut v = v.clone();
                    v.as_object_mut().map(|m| m.remove("metadata"));
                    v
                };
                without_meta(old) != without_meta(new)
            }
        }
    }
}

/// Whether a direct (non-HTTP) write brings its own status, which the server then leaves alone.
pub(crate) fn brings_status(obj: &Value, http: bool) -> bool {
    !http && obj.get("status").is_some()
}

/// Before an HTTP create: a kind with a status subresource starts without status, since only
/// its controller writes it (nodes excepted: the kubelet registers a node with its status).
pub(crate) fn prepare_create(res: &ResourceType, obj: &mut Value, http: bool) {
    if http && res.status_subresource && res.kind != "Node" {
        obj.as_object_mut().map(|m| m.remove("status"));
    }
}

/// The create-time preparation that needs the object's name and uid (the registries'
/// `PrepareForCreate`): a Pod created over HTTP starts `Pending` with its QoS class
/// (pkg/registry/core/pod/strategy.go); a Job without `manualSelector` gets the generated
/// selector and pod labels (pkg/registry/batch/job/strategy.go generateSelector).
pub(crate) fn prepare_named(
    res: &ResourceType,
    obj: &mut Value,
    name: &str,
    uid: &str,
    http: bool,
) {
    match (res.group.as_str(), res.kind.as_str()) {
        ("", "Pod") if http => {
            let qos = qos_class(&obj["spec"]);
            obj["status"] = json!({"phase": "Pending", "qosClass": qos});
        }
        ("batch", "Job") if obj["spec"]["manualSelector"] != true && obj["spec"].is_object() => {
            if !obj["spec"]["template"]["metadata"]["labels"].is_object() {
                obj["spec"]["template"]["metadata"]["labels"] = json!({});
            }
            let labels = &mut obj["spec"]["template"]["metadata"]["labels"];
            for (key, value) in [
                ("job-name", name),
                ("batch.kubernetes.io/job-name", name),
                ("controller-uid", uid),
                ("batch.kubernetes.io/controller-uid", uid),
            ] {
                if labels.get(key).is_none() {
                    labels[key] = value.into();
                }
            }
            if !obj["spec"]["selector"]["matchLabels"].is_object() {
                obj["spec"]["selector"]["matchLabels"] = json!({});
            }
            let select = &mut obj["spec"]["selector"]["matchLabels"];
            if select.get("batch.kubernetes.io/controller-uid").is_none() {
                select["batch.kubernetes.io/controller-uid"] = uid.into();
            }
            // What the apiserver answers is the stored object decoded again, with defaults:
            // SetDefaults_Job then gives a Job without labels its template's.
            super::defaults::job_labels(obj);
        }
        _ => {}
    }
}

/// `qos.GetPodQOS`, for cpu and memory: no requests or limits at all is BestEffort; limits
/// equal to requests for both, in every container, is Guaranteed; anything else Burstable.
fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .flat_map(|k| spec[*k].as_array().into_iter().flatten())
        .collect();
    let mut any = false;
    let mut guaranteed = true;
    for c in &containers {
        let (req, lim) = (&c["resources"]["requests"], &c["resources"]["limits"]);
        for r in ["cpu", "memory"] {
            let (q, l) = (&req[r], &lim[r]);
            any |= !q.is_null() || !l.is_null();
            // An unset request defaults to the limit.
            let q = if q.is_null() { l } else { q };
            if l.is_null() || q != l {
                guaranteed = false;
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

/// The generation a new object starts with; a client cannot choose it.
pub(crate) fn init_generation(res: &ResourceType, obj: &mut Value) {
    let m = meta_mut(obj);
    match res.generation {
        Generation::None => m.remove("generation"),
        _ => m.insert("generation".into(), 1.into()),
    };
}

/// The object an update of `sub` makes of `old` and the request body. A status write changes
/// only status; a main-resource HTTP write to a kind with a status subresource keeps the status.
pub(crate) fn merge_update(
    res: &ResourceType,
    old: &Value,
    mut body: Value,
    sub: Sub,
    http: bool,
) -> Value {
    match sub {
        Sub::Status => {
            let mut v = old.clone();
            match body.get_mut("status").map(Value::take) {
                Some(status) => v["status"] = status,
                None => {
                    v.as_object_mut().map(|m| m.remove("status"));
                }
            }
            v
        }
        Sub::Main | Sub::Scale if http && res.status_subresource => {
            match old.get("status") {
                Some(s) => body["status"] = s.clone(),
                None => {
                    body.as_object_mut().map(|m| m.remove("status"));
                }
            }
            body
        }
        Sub::Main | Sub::Scale => body,
    }
}

/// Bumps `new`'s generation (already carrying `old`'s) if the write starts a new one; returns
/// whether it did. Status writes never do.
pub(crate) fn bump_generation(res: &ResourceType, old: &Value, new: &mut Value, sub: Sub) -> bool {
    if sub == Sub::Status || !res.generation.bumps(old, new) {
        return false;
    }
    let generation = old["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
    meta_mut(new).insert("generation".into(), generation.into());
    true
}

/// Whether DELETE answers with the deleted object rather than a `Status` of success: the
/// registries that set `ReturnDeletedObject: true` (pods, services, serviceaccounts,
/// storageclasses: pkg/registry/*/storage/storage.go) and the two whose own Delete returns the
/// object (namespaces, CustomResourceDefinitions, both finalized asynchronously).
pub(crate) fn returns_deleted_object(res: &ResourceType) -> bool {
    matches!(
        (res.group.as_str(), res.plural.as_str()),
        ("", "pods" | "services" | "serviceaccounts" | "namespaces")
            | ("storage.k8s.io", "storageclasses")
            | ("apiextensions.k8s.io", "customresourcedefinitions")
    )
}

/// The `Status` of success the generic registry's `finalizeDelete` answers a DELETE with:
/// details name the resource (plural), not the kind.
pub(crate) fn delete_success(res: &ResourceType, deleted: &Value) -> Value {
    let mut details = json!({
        "name": deleted["metadata"]["name"],
        "kind": res.plural,
        "uid": deleted["metadata"]["uid"],
    });
    if !res.group.is_empty() {
        details["group"] = res.group.clone().into();
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

/// Why a Deployment here never rolls out, in the words its Progressing condition carries.
pub(crate) const NO_CONTROLLERS: &str = "The embedded API server runs no controllers: no \
    ReplicaSet or Pod is created for this Deployment, so its rollout cannot progress";

/// Called when a Deployment starts a new generation. No deployment controller will ever observe
/// it, so the server says so in the status a controller would write: the generation is
/// observed and the rollout has failed to progress. `kubectl rollout status` then stops at once
/// with "deployment "NAME" exceeded its progress deadline" instead of waiting forever, and the
/// condition's message says why. Other kinds are left alone.
pub(crate) fn no_controllers(res: &ResourceType, obj: &mut Value) {
    if res.kind != "Deployment" || res.group != "apps" {
        return;
    }
    let generation = obj["metadata"]["generation"].clone();
    if !obj["status"].is_object() {
        obj["status"] = json!({});
    }
    let status = &mut obj["status"];
    status["observedGeneration"] = generation;
    if !status["conditions"].is_array() {
        status["conditions"] = json!([]);
    }
    let conditions = status["conditions"]
        .as_array_mut()
        .expect("conditions was just made an array");
    let now = now();
    let old = conditions.iter().position(|c| c["type"] == "Progressing");
    // A condition that keeps its status keeps its transition time.
    let since = old
        .map(|i| &conditions[i])
        .filter(|c| c["status"] == "False")
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| now.clone().into());
    let condition = json!({
        "type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
        "message": NO_CONTROLLERS, "lastUpdateTime": now, "lastTransitionTime": since,
    });
    match old {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_rules() {
        let old = json!({"metadata": {"annotations": {"a": "1"}, "labels": {"l": "1"}},
            "spec": {"replicas": 1}, "status": {"x": 1}});
        let with = |f: &dyn Fn(&mut Value)| {
            let mut v = old.clone();
            f(&mut v);
            v
        };
        let label = with(&|v| v["metadata"]["labels"]["l"] = "2".into());
        let annotation = with(&|v| v["metadata"]["annotations"]["a"] = "2".into());
        let spec = with(&|v| v["spec"]["replicas"] = 2.into());
        let status = with(&|v| v["status"]["x"] = 2.into());
        let data = with(&|v| v["data"] = json!({"k": "v"}));
        for (g, bumped) in [
            (Generation::None, [false, false, false, false, false]),
            (Generation::Spec, [false, false, true, false, false]),
            (
                Generation::SpecAndAnnotations,
                [false, true, true, false, false],
            ),
            (Generation::NonMetadata, [false, false, true, true, true]),
        ] {
            let got = [&label, &annotation, &spec, &status, &data].map(|new| g.bumps(&old, new));
            assert_eq!(got, bumped, "{g:?}");
        }
    }
}
