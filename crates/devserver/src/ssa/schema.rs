//! How each field merges, from the `x-kubernetes-list-type`, `x-kubernetes-list-map-keys` and
//! `x-kubernetes-map-type` markers of the Kubernetes OpenAPI, kept as a table for the fields of
//! the built-in kinds this server serves (the vendored `generated.proto` carries no markers).
//! Custom resources follow the markers of their CRD's schema, and SMD's rule where it has
//! none: lists are atomic.

use serde_json::Value;

use super::fieldset::Pe;

/// How a list merges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListType {
    /// `x-kubernetes-list-type: map`: items identified by these key fields.
    Map(Vec<String>),
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

/// The kind being written: the built-in table, or a custom resource's CRD schema.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schema<'a> {
    /// Served by the server itself (false for custom resources).
    pub builtin: bool,
    /// The object's kind, for fields whose type differs between kinds (`spec.selector`).
    pub kind: &'a str,
    /// A custom resource's `openAPIV3Schema`.
    pub crd: Option<&'a Value>,
}

fn keys(k: &[&str]) -> ListType {
    ListType::Map(k.iter().map(|s| s.to_string()).collect())
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
    pub fn list_type(
        &self,
        path: &[Pe],
        parent: &[&str],
        field: &str,
        items: &[Value],
    ) -> ListType {
        if !self.builtin {
            if let Some(node) = self.crd_node(path) {
                match node["x-kubernetes-list-type"].as_str() {
                    Some("map") => {
                        let k = node["x-kubernetes-list-map-keys"].as_array();
                        let k: Vec<String> = k
                            .into_iter()
                            .flatten()
                            .filter_map(|k| k.as_str().map(String::from))
                            .collect();
                        if !k.is_empty() {
                            return ListType::Map(k);
                        }
                    }
                    Some("set") => return ListType::Set,
                    _ => {}
                }
            }
            return match (parent, field) {
                (["metadata"], "finalizers") => ListType::Set,
                (["metadata"], "ownerReferences") => keys(&["uid"]),
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
            | "resourceClaims"
            | "webhooks" => keys(&["name"]),
            "ports" if items.iter().any(|i| i.get("containerPort").is_some()) => {
                keys(&["containerPort", "protocol"])
            }
            "ports" if self.kind == "Service" => keys(&["port", "protocol"]),
            "volumeMounts" => keys(&["mountPath"]),
            "volumeDevices" => keys(&["devicePath"]),
            "hostAliases" => keys(&["ip"]),
            "conditions" => keys(&["type"]),
            "ownerReferences" => keys(&["uid"]),
            "topologySpreadConstraints" => keys(&["topologyKey", "whenUnsatisfiable"]),
            "finalizers" => ListType::Set,
            _ => ListType::Atomic,
        }
    }

    /// The map type of the object in `field` under `parent`.
    pub fn map_type(&self, path: &[Pe], parent: &[&str], field: &str) -> MapType {
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
            let node = self.crd_node(path);
            return match node {
                Some(n) if n["x-kubernetes-map-type"] == "atomic" => MapType::Atomic,
                Some(n)
                    if n.get("properties").is_none() && n["additionalProperties"].is_object() =>
                {
                    MapType::Granular
                }
                _ => MapType::Struct,
            };
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

impl<'a> Schema<'a> {
    /// The CRD schema node at `path`: fields through `properties` (or `additionalProperties`),
    /// list items through `items`.
    fn crd_node(&self, path: &[Pe]) -> Option<&'a Value> {
        let mut node = self.crd?;
        for pe in path {
            node = match pe {
                Pe::Field(f) => node["properties"]
                    .get(f)
                    .or_else(|| node.get("additionalProperties").filter(|a| a.is_object()))?,
                _ => node.get("items")?,
            };
        }
        Some(node)
    }
}

/// Key defaults SMD fills in for associative keys the item leaves out (`protocol` of ports).
pub(crate) fn key_default(key: &str) -> Option<Value> {
    (key == "protocol").then(|| Value::String("TCP".into()))
}
