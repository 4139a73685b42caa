//! How each field merges, from the `x-kubernetes-list-type`, `x-kubernetes-list-map-keys` and
//! `x-kubernetes-map-type` markers of the Kubernetes OpenAPI, kept as a table for the fields of
//! the built-in kinds this server serves (the vendored `generated.proto` carries no markers).
//! Custom resources follow SMD's rule for CRDs without markers: lists are atomic.

use serde_json::Value;

/// How a list merges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListType {
    /// `x-kubernetes-list-type: map`: items identified by these key fields.
    Map(&'static [&'static str]),
    /// `x-kubernetes-list-type: set`: scalar items identified by their value.
    Set,
    /// Replaced whole; one owner.
    Atomic,
}

/// How an object merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MapType {
    /// A struct: its declared fields are separate, and a field is a member only when empty.
    Struct,
    /// A `map[string]T` (labels, data, resources.limits): every entry is a member.
    Granular,
    /// `x-kubernetes-map-type: atomic` (label selectors, key references): replaced whole.
    Atomic,
}

/// The kind being written: lists of custom resources are atomic.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schema<'a> {
    /// Served by the server itself (false for custom resources).
    pub builtin: bool,
    /// The object's kind, for fields whose type differs between kinds (`spec.selector`).
    pub kind: &'a str,
}

/// Fields Go's zero value of a kind already carries (non-pointer structs, and `containers`,
/// serialized as `null` for want of `omitempty`): SMD compares a create against that zero
/// value, so an Update that fills them owns what it put in them, not the node itself.
pub(crate) const ZERO_VALUE_FIELDS: &[&str] = &[
    "containers",
    "metadata",
    "spec",
    "status",
    "template",
    "strategy",
    "updateStrategy",
    "jobTemplate",
    "resources",
];

impl Schema<'_> {
    /// The list type of `field` whose items are `items`, under the object at `parent`.
    pub fn list_type(&self, parent: &[&str], field: &str, items: &[Value]) -> ListType {
        if !self.builtin {
            return match (parent, field) {
                (["metadata"], "finalizers") => ListType::Set,
                (["metadata"], "ownerReferences") => ListType::Map(&["uid"]),
                _ => ListType::Atomic,
            };
        }
        match field {
            "containers"
            | "initContainers"
            | "ephemeralContainers"
            | "env"
            | "volumes"
            | "imagePullSecrets"
            | "resourceClaims" => ListType::Map(&["name"]),
            "ports" if items.iter().any(|i| i.get("containerPort").is_some()) => {
                ListType::Map(&["containerPort", "protocol"])
            }
            "ports" if self.kind == "Service" => ListType::Map(&["port", "protocol"]),
            "volumeMounts" => ListType::Map(&["mountPath"]),
            "volumeDevices" => ListType::Map(&["devicePath"]),
            "hostAliases" => ListType::Map(&["ip"]),
            "conditions" => ListType::Map(&["type"]),
            "ownerReferences" => ListType::Map(&["uid"]),
            "topologySpreadConstraints" => ListType::Map(&["topologyKey", "whenUnsatisfiable"]),
            "finalizers" => ListType::Set,
            _ => ListType::Atomic,
        }
    }

    /// The map type of the object in `field` under `parent`.
    pub fn map_type(&self, parent: &[&str], field: &str) -> MapType {
        match (parent, field) {
            (["metadata"] | [.., "template", "metadata"], "labels" | "annotations") => {
                return MapType::Granular;
            }
            (["spec"], "selector") if self.builtin && self.kind == "Service" => {
                return MapType::Granular;
            }
            _ => {}
        }
        if !self.builtin {
            return MapType::Struct;
        }
        match field {
            "data" | "stringData" | "binaryData" | "nodeSelector" | "limits" | "requests"
            | "capacity" | "allocatable" | "hard" | "used" | "parameters" | "overhead"
            | "labels" | "annotations" => MapType::Granular,
            "selector" | "labelSelector" | "namespaceSelector" | "podSelector" | "fieldRef"
            | "resourceFieldRef" | "configMapKeyRef" | "secretKeyRef" | "configMapRef"
            | "secretRef" => MapType::Atomic,
            _ => MapType::Struct,
        }
    }
}

/// Key defaults SMD fills in for associative keys the item leaves out (`protocol` of ports).
pub(crate) fn key_default(key: &str) -> Option<Value> {
    (key == "protocol").then(|| Value::String("TCP".into()))
}
