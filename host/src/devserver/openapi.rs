//! A skeletal OpenAPI v3: the index (`/openapi/v3`) and one document per group-version listing
//! each resource's item path with its PATCH/PUT operations and their query parameters.
//!
//! kubectl needs this for one reason: before `apply`/`create`/`replace` it checks whether the
//! server supports the `fieldValidation` query parameter (by looking for it on the PATCH
//! operation tagged with the object's group-version-kind). When it is supported, kubectl leaves
//! validation to the server and needs no schemas; when the OpenAPI is missing it fails with
//! "failed to download openapi". No schemas are published, so kubectl falls back to its compiled-in
//! types for strategic merge patches and to JSON merge patches for custom resources.

use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::{Value, json};

use super::resources::Registry;

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The document for one group-version, or None if it is not served.
pub(crate) fn document(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let resources = reg.resources_in(group, version);
    if resources.is_empty() {
        return None;
    }
    let query = |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
    let mut paths = serde_json::Map::new();
    for res in resources {
        let base = gv_path(group, version);
        let item = if res.namespaced {
            format!("/{base}/namespaces/{{namespace}}/{}/{{name}}", res.plural)
        } else {
            format!("/{base}/{}/{{name}}", res.plural)
        };
        let gvk = json!({"group": group, "version": version, "kind": res.kind});
        let op = |action: &str, extra: &[&str]| {
            let mut params: Vec<Value> = ["dryRun", "fieldManager", "fieldValidation"]
                .iter()
                .map(|p| query(p))
                .collect();
            params.extend(extra.iter().map(|p| query(p)));
            json!({
                "operationId": format!("{action}{}", res.kind),
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": params,
                "responses": {"200": {"description": "OK"}},
            })
        };
        paths.insert(
            item,
            json!({"patch": op("patch", &["force"]), "put": op("put", &[])}),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}

/// `/openapi/v3`: every served group-version with a content-hashed URL, so kubectl's disk cache
/// refreshes when a CRD changes what a group serves.
pub(crate) fn index(reg: &Registry) -> Value {
    let mut paths = serde_json::Map::new();
    for (group, version) in reg.group_versions() {
        let Some(doc) = document(reg, &group, &version) else {
            continue;
        };
        let mut h = DefaultHasher::new();
        doc.to_string().hash(&mut h);
        let path = gv_path(&group, &version);
        let url = format!("/openapi/v3/{path}?hash={:016X}", h.finish());
        paths.insert(path, json!({"serverRelativeURL": url}));
    }
    json!({"paths": paths})
}
