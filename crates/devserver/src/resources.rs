//! The resource registry (built-ins plus CRD-defined resources) and the discovery documents
//! rendered from it. Discovery is the legacy kind (/api, /apis, /apis/G/V); kubectl and kube-rs
//! fall back to it when the aggregated form is not offered.

use std::sync::Arc;

use serde_json::{Value, json};

use super::scale::ScalePaths;
use super::strategy::Generation;
use super::{Cause, Error, Result};

/// One served resource. Objects of every served version share one storage table.
#[derive(Debug)]
pub(crate) struct ResourceType {
    pub group: String,
    pub versions: Vec<String>,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub status_subresource: bool,
    /// When `metadata.generation` moves.
    pub generation: Generation,
    /// Where the `scale` subresource reads and writes, if the resource has one.
    pub scale: Option<ScalePaths>,
    /// False for CRD-defined resources: they get merge patch only, like real servers.
    pub builtin: bool,
    /// Storage table key, `plural.group`; stable across versions.
    pub key: Arc<str>,
    /// A CRD's `openAPIV3Schema` (of its storage version): its list and map markers decide how
    /// server-side apply merges the custom resources.
    pub schema: Option<Arc<Value>>,
    /// A review (`selfsubjectaccessreviews`, `subjectaccessreviews`, `tokenreviews`, ...):
    /// answered from the request, never stored, so `create` is its only verb.
    pub review: bool,
}

impl ResourceType {
    /// apiVersion string for `version` (`v1` for the core group).
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    /// Whether the resource serves `deletecollection` (namespaces' storage does not).
    pub fn delete_collection(&self) -> bool {
        !(self.group.is_empty() && self.plural == "namespaces")
    }

    /// The etcd key kube-apiserver stores the object under, as storage errors quote it.
    pub fn storage_key(&self, namespace: &str, name: &str) -> String {
        let prefix = if self.builtin || self.group.is_empty() {
            format!("/registry/{}", self.plural)
        } else {
            format!("/registry/{}/{}", self.group, self.plural)
        };
        if self.namespaced {
            format!("{prefix}/{namespace}/{name}")
        } else {
            format!("{prefix}/{name}")
        }
    }

    /// `plural.group` as in error messages (`pods`, `deployments.apps`).
    pub fn qualified(&self) -> String {
        self.key.to_string()
    }

    fn discovery_entry(&self) -> Vec<Value> {
        let all = [
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ];
        let verbs: Vec<&str> = if self.review {
            vec!["create"]
        } else {
            all.into_iter()
                .filter(|v| *v != "deletecollection" || self.delete_collection())
                .collect()
        };
        let mut out = vec![json!({
            "name": self.plural, "singularName": self.singular, "namespaced": self.namespaced,
            "kind": self.kind, "verbs": verbs, "shortNames": self.short_names,
            "categories": self.categories,
        })];
        if out[0]["shortNames"].as_array().is_some_and(Vec::is_empty) {
            out[0].as_object_mut().map(|o| o.remove("shortNames"));
        }
        if out[0]["categories"].as_array().is_some_and(Vec::is_empty) {
            out[0].as_object_mut().map(|o| o.remove("categories"));
        }
        if self.status_subresource {
            out.push(json!({"name": format!("{}/status", self.plural), "singularName": "",
                "namespaced": self.namespaced, "kind": self.kind, "verbs": ["get", "patch", "update"]}));
        }
        let core = |kind: &str| self.group.is_empty() && self.kind == kind;
        if core("Pod") {
            out.push(
                json!({"name": "pods/eviction", "singularName": "", "namespaced": true,
                "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]}),
            );
            out.push(
                json!({"name": "pods/log", "singularName": "", "namespaced": true,
                "kind": "Pod", "verbs": ["get"]}),
            );
        }
        if core("ServiceAccount") {
            out.push(json!({"name": "serviceaccounts/token", "singularName": "",
                "namespaced": true, "group": "authentication.k8s.io", "version": "v1",
                "kind": "TokenRequest", "verbs": ["create"]}));
        }
        if self.scale.is_some() {
            // The scale client finds the Scale's group-version here.
            out.push(
                json!({"name": format!("{}/scale", self.plural), "singularName": "",
                "namespaced": self.namespaced, "group": "autoscaling", "version": "v1",
                "kind": "Scale", "verbs": ["get", "patch", "update"]}),
            );
        }
        out
    }
}

/// One built-in resource as kube-apiserver 1.33 serves it.
struct Builtin {
    group: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    /// Has a `status` subresource.
    status: bool,
    /// In the `all` category (`kubectl get all`).
    all: bool,
    generation: Generation,
    /// Has a `scale` subresource (spec.replicas, status.replicas, spec.selector).
    scale: bool,
    /// An access review: only created, never stored.
    review: bool,
}

/// The defaults most rows share; each row says where it differs.
const fn builtin(group: &'static str, plural: &'static str, kind: &'static str) -> Builtin {
    Builtin {
        group,
        plural,
        kind,
        namespaced: true,
        short_names: &[],
        status: false,
        all: false,
        generation: Generation::None,
        scale: false,
        review: false,
    }
}

/// A workload: namespaced, with status, in `all`, generation following `.spec`.
const fn workload(group: &'static str, plural: &'static str, kind: &'static str) -> Builtin {
    Builtin {
        status: true,
        all: true,
        generation: Generation::Spec,
        ..builtin(group, plural, kind)
    }
}

const BUILTINS: &[Builtin] = &[
    Builtin {
        namespaced: false,
        short_names: &["ns"],
        status: true,
        ..builtin("", "namespaces", "Namespace")
    },
    Builtin {
        short_names: &["po"],
        ..workload("", "pods", "Pod")
    },
    Builtin {
        short_names: &["cm"],
        ..builtin("", "configmaps", "ConfigMap")
    },
    builtin("", "secrets", "Secret"),
    Builtin {
        short_names: &["svc"],
        status: true,
        all: true,
        ..builtin("", "services", "Service")
    },
    Builtin {
        short_names: &["sa"],
        ..builtin("", "serviceaccounts", "ServiceAccount")
    },
    Builtin {
        short_names: &["ep"],
        ..builtin("", "endpoints", "Endpoints")
    },
    Builtin {
        short_names: &["ev"],
        ..builtin("", "events", "Event")
    },
    Builtin {
        short_names: &["limits"],
        ..builtin("", "limitranges", "LimitRange")
    },
    Builtin {
        short_names: &["quota"],
        status: true,
        ..builtin("", "resourcequotas", "ResourceQuota")
    },
    builtin("", "podtemplates", "PodTemplate"),
    // No `scale` here: a ReplicationController's selector is a plain map, which the Scale
    // support (written for metav1.LabelSelector) does not read.
    Builtin {
        short_names: &["rc"],
        ..workload("", "replicationcontrollers", "ReplicationController")
    },
    Builtin {
        namespaced: false,
        short_names: &["no"],
        status: true,
        ..builtin("", "nodes", "Node")
    },
    Builtin {
        namespaced: false,
        short_names: &["pv"],
        status: true,
        ..builtin("", "persistentvolumes", "PersistentVolume")
    },
    Builtin {
        short_names: &["pvc"],
        status: true,
        ..builtin("", "persistentvolumeclaims", "PersistentVolumeClaim")
    },
    Builtin {
        short_names: &["deploy"],
        // Annotations are copied to the ReplicaSets, so changing them is a new generation too.
        generation: Generation::SpecAndAnnotations,
        scale: true,
        ..workload("apps", "deployments", "Deployment")
    },
    Builtin {
        short_names: &["rs"],
        scale: true,
        ..workload("apps", "replicasets", "ReplicaSet")
    },
    Builtin {
        short_names: &["sts"],
        scale: true,
        ..workload("apps", "statefulsets", "StatefulSet")
    },
    Builtin {
        short_names: &["ds"],
        ..workload("apps", "daemonsets", "DaemonSet")
    },
    workload("batch", "jobs", "Job"),
    Builtin {
        short_names: &["cj"],
        ..workload("batch", "cronjobs", "CronJob")
    },
    builtin("coordination.k8s.io", "leases", "Lease"),
    // What `kubectl events` and client-go's new recorder write (stored apart from core Events
    // here; a real server keeps one store for both).
    builtin("events.k8s.io", "events", "Event"),
    Builtin {
        namespaced: false,
        short_names: &["crd", "crds"],
        status: true,
        generation: Generation::Spec,
        ..builtin(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            "CustomResourceDefinition",
        )
    },
    // Admission webhooks the server calls on HTTP writes (`crate::admission`).
    Builtin {
        namespaced: false,
        ..builtin(
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
            "MutatingWebhookConfiguration",
        )
    },
    Builtin {
        namespaced: false,
        ..builtin(
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration",
        )
    },
    // What `kubectl auth can-i` asks; answered by `review`.
    Builtin {
        namespaced: false,
        review: true,
        ..builtin(
            "authorization.k8s.io",
            "selfsubjectaccessreviews",
            "SelfSubjectAccessReview",
        )
    },
    Builtin {
        namespaced: false,
        review: true,
        ..builtin(
            "authorization.k8s.io",
            "selfsubjectrulesreviews",
            "SelfSubjectRulesReview",
        )
    },
    // What a server that authenticates and authorizes its own callers through this one asks
    // (kube-rbac-proxy, controller-runtime's secure metrics, the host's admin server).
    Builtin {
        namespaced: false,
        review: true,
        ..builtin(
            "authorization.k8s.io",
            "subjectaccessreviews",
            "SubjectAccessReview",
        )
    },
    Builtin {
        namespaced: false,
        review: true,
        ..builtin("authentication.k8s.io", "tokenreviews", "TokenReview")
    },
];

/// All served resources, indexed by (group, version, plural) and by (group, kind).
#[derive(Default)]
pub(crate) struct Registry {
    /// Discovery order: built-in groups first, then CRD groups by name.
    groups: Vec<String>,
    resources: Vec<Arc<ResourceType>>,
}

fn key_of(group: &str, plural: &str) -> Arc<str> {
    if group.is_empty() {
        Arc::from(plural)
    } else {
        Arc::from(format!("{plural}.{group}"))
    }
}

impl Registry {
    /// The built-in resources.
    pub fn builtin() -> Registry {
        let mut reg = Registry::default();
        for b in BUILTINS {
            reg.add(ResourceType {
                group: b.group.into(),
                // Every built-in this server serves is at v1 of its group.
                versions: vec!["v1".into()],
                plural: b.plural.into(),
                singular: b.kind.to_lowercase(),
                kind: b.kind.into(),
                namespaced: b.namespaced,
                short_names: b.short_names.iter().map(|s| s.to_string()).collect(),
                categories: if b.all { vec!["all".into()] } else { vec![] },
                status_subresource: b.status,
                generation: b.generation,
                scale: b.scale.then(ScalePaths::builtin),
                builtin: true,
                key: key_of(b.group, b.plural),
                schema: None,
                review: b.review,
            });
        }
        reg
    }

    fn add(&mut self, res: ResourceType) {
        if !self.groups.contains(&res.group) {
            self.groups.push(res.group.clone());
        }
        self.resources.push(Arc::new(res));
    }

    /// Resource served at group/version/plural.
    pub fn by_path(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.resources
            .iter()
            .find(|r| {
                r.group == group && r.plural == plural && r.versions.iter().any(|v| v == version)
            })
            .cloned()
    }

    /// Resource for an object's apiVersion/kind; never an access review, which is no object
    /// to store.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Result<Arc<ResourceType>> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.resources
            .iter()
            .find(|r| {
                !r.review
                    && r.group == group
                    && r.kind == kind
                    && r.versions.iter().any(|v| v == version)
            })
            .cloned()
            .ok_or_else(|| Error::UnknownResource {
                what: format!("apiVersion {api_version}, kind {kind}"),
            })
    }

    /// Whether group/version is served at all.
    pub fn serves_group_version(&self, group: &str, version: &str) -> bool {
        self.resources
            .iter()
            .any(|r| r.group == group && r.versions.iter().any(|v| v == version))
    }

    /// Starts serving the resource a CRD defines (replacing an earlier definition of it).
    /// Returns the storage key; `crd` must already be validated by [`validate_crd`].
    pub fn register_crd(&mut self, crd: &Value) -> Arc<str> {
        let spec = &crd["spec"];
        let names = &spec["names"];
        let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let list = |v: &Value| -> Vec<String> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default()
        };
        let group = s(&spec["group"]);
        let plural = s(&names["plural"]);
        let mut versions: Vec<(bool, String)> = Vec::new();
        let mut status = false;
        let mut scale = None;
        let mut schema = None;
        for v in spec["versions"].as_array().into_iter().flatten() {
            if v["served"].as_bool() == Some(false) {
                continue;
            }
            status |= v["subresources"]["status"].is_object();
            scale = scale.or_else(|| ScalePaths::from_crd(&v["subresources"]["scale"]));
            if v["storage"].as_bool() == Some(true) || schema.is_none() {
                schema = v["schema"]
                    .get("openAPIV3Schema")
                    .map(|s| Arc::new(s.clone()));
            }
            // The storage version goes first: it is the one discovery calls preferred.
            versions.push((v["storage"].as_bool() != Some(true), s(&v["name"])));
        }
        versions.sort_by_key(|(not_storage, _)| *not_storage);
        let kind = s(&names["kind"]);
        let singular = match s(&names["singular"]) {
            x if x.is_empty() => kind.to_lowercase(),
            x => x,
        };
        let key = key_of(&group, &plural);
        self.unregister(&key);
        self.add(ResourceType {
            versions: versions.into_iter().map(|(_, v)| v).collect(),
            namespaced: spec["scope"].as_str() != Some("Cluster"),
            short_names: list(&names["shortNames"]),
            categories: list(&names["categories"]),
            status_subresource: status,
            // Custom resources: any change outside metadata (and, on the main resource of one
            // with a status subresource, status is kept anyway) is a new generation.
            generation: Generation::NonMetadata,
            scale,
            builtin: false,
            key: key.clone(),
            schema,
            review: false,
            group,
            plural,
            singular,
            kind,
        });
        key
    }

    /// Stops serving the resource stored under `key`.
    pub fn unregister(&mut self, key: &str) {
        self.resources.retain(|r| &*r.key != key);
        let resources = &self.resources;
        self.groups
            .retain(|g| resources.iter().any(|r| &r.group == g));
    }

    fn versions_of(&self, group: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in self.resources.iter().filter(|r| r.group == group) {
            for v in &r.versions {
                if !out.contains(v) {
                    out.push(v.clone());
                }
            }
        }
        out
    }

    /// `/api/v1` or `/apis/G/V`.
    pub fn resource_list(&self, group: &str, version: &str) -> Value {
        let resources: Vec<Value> = self
            .resources
            .iter()
            .filter(|r| r.group == group && r.versions.iter().any(|v| v == version))
            .flat_map(|r| r.discovery_entry())
            .collect();
        let gv = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
    }

    fn group_doc(&self, group: &str) -> Value {
        let versions: Vec<Value> = self
            .versions_of(group)
            .iter()
            .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
            .collect();
        json!({"name": group, "versions": versions, "preferredVersion": versions[0]})
    }

    /// `/apis/G`, if the group is served.
    pub fn group(&self, group: &str) -> Option<Value> {
        (!group.is_empty() && self.groups.iter().any(|g| g == group)).then(|| {
            let mut doc = self.group_doc(group);
            doc["kind"] = "APIGroup".into();
            doc["apiVersion"] = "v1".into();
            doc
        })
    }

    /// `/apis`.
    pub fn group_list(&self) -> Value {
        let groups: Vec<Value> = self
            .groups
            .iter()
            .filter(|g| !g.is_empty())
            .map(|g| self.group_doc(g))
            .collect();
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    /// Resources served at group/version.
    pub fn resources_in(&self, group: &str, version: &str) -> Vec<Arc<ResourceType>> {
        self.resources
            .iter()
            .filter(|r| r.group == group && r.versions.iter().any(|v| v == version))
            .cloned()
            .collect()
    }

    /// Every served (group, version), core first.
    pub fn group_versions(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for g in &self.groups {
            for v in self.versions_of(g) {
                out.push((g.clone(), v));
            }
        }
        out
    }

    /// Storage keys of every namespaced resource (for namespace deletion).
    pub fn namespaced_keys(&self) -> Vec<Arc<str>> {
        self.resources
            .iter()
            .filter(|r| r.namespaced)
            .map(|r| r.key.clone())
            .collect()
    }
}

/// Checks what a CRD needs before it can be served (422 otherwise).
pub(crate) fn validate_crd(crd: &Value) -> Result<()> {
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    let invalid = |cause: Cause| Error::Invalid {
        kind: "CustomResourceDefinition".into(),
        group: "apiextensions.k8s.io".into(),
        name: name.to_string(),
        causes: vec![cause],
    };
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let plural = spec["names"]["plural"].as_str().unwrap_or_default();
    let kind = spec["names"]["kind"].as_str().unwrap_or_default();
    if group.is_empty() || !group.contains('.') {
        return Err(invalid(Cause::invalid(
            "spec.group",
            &format!("{group:?}"),
            "should be a domain with at least one dot",
        )));
    }
    if plural.is_empty() || plural != plural.to_lowercase() {
        return Err(invalid(Cause::required(
            "spec.names.plural",
            "must be a lowercase name",
        )));
    }
    if kind.is_empty() {
        return Err(invalid(Cause::required("spec.names.kind", "")));
    }
    if name != format!("{plural}.{group}") {
        return Err(invalid(Cause::invalid(
            "metadata.name",
            &format!("{name:?}"),
            "must be spec.names.plural+\".\"+spec.group",
        )));
    }
    match spec["scope"].as_str() {
        Some("Namespaced" | "Cluster") => {}
        other => {
            return Err(invalid(Cause::not_supported(
                "spec.scope",
                other.unwrap_or_default(),
                &["Cluster", "Namespaced"],
            )));
        }
    }
    let versions = spec["versions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let storage = versions
        .iter()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .count();
    if storage != 1 {
        return Err(invalid(Cause {
            reason: "FieldValueInvalid",
            field: "spec.versions".into(),
            message: "Invalid value: must have exactly one version marked as storage version"
                .into(),
        }));
    }
    if versions
        .iter()
        .any(|v| v["name"].as_str().is_none_or(str::is_empty))
    {
        return Err(invalid(Cause::required("spec.versions[].name", "")));
    }
    Ok(())
}
