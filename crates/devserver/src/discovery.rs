//! Aggregated discovery (`apidiscovery.k8s.io/v2`, KEP-3352): `/api` and `/apis` answered as one
//! `APIGroupDiscoveryList` each when the client asks for it, as kubectl 1.30+ does first. Built
//! from the registry's legacy discovery entries, so the two forms can never disagree.
//!
//! client-go picks the parser by the response's Content-Type, so the answer must carry
//! [`CONTENT_TYPE`] exactly; a client that did not ask gets the legacy documents.

use serde_json::{Map, Value, json};

use super::resources::Registry;

/// Media type of an aggregated discovery answer.
pub(crate) const CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether an Accept header asks for v2 aggregated discovery (any of its media ranges).
pub(crate) fn wants_v2(accept: &str) -> bool {
    accept.split(',').any(|range| {
        let params: Vec<&str> = range.split(';').map(str::trim).collect();
        ["g=apidiscovery.k8s.io", "v=v2", "as=APIGroupDiscoveryList"]
            .iter()
            .all(|p| params.contains(p))
    })
}

/// `/api` (core only) or `/apis` (every named group) as an `APIGroupDiscoveryList`.
pub(crate) fn list(reg: &Registry, core: bool) -> Value {
    let groups: Vec<String> = if core {
        vec![String::new()]
    } else {
        reg.group_versions()
            .into_iter()
            .map(|(g, _)| g)
            .filter(|g| !g.is_empty())
            .fold(Vec::new(), |mut acc, g| {
                if !acc.contains(&g) {
                    acc.push(g);
                }
                acc
            })
    };
    let items: Vec<Value> = groups.iter().map(|g| group(reg, g)).collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {}, "items": items})
}

fn group(reg: &Registry, group: &str) -> Value {
    let versions: Vec<Value> = reg
        .group_versions()
        .into_iter()
        .filter(|(g, _)| g == group)
        .map(|(_, v)| {
            let legacy = reg.resource_list(group, &v);
            let entries = legacy["resources"].as_array().cloned().unwrap_or_default();
            json!({"version": v, "resources": resources(group, &v, &entries), "freshness": "Current"})
        })
        .collect();
    let metadata = if group.is_empty() {
        json!({})
    } else {
        json!({"name": group})
    };
    json!({"metadata": metadata, "versions": versions})
}

/// Legacy `APIResource` entries to v2 `APIResourceDiscovery`, subresources under their parent.
fn resources(group: &str, version: &str, entries: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for e in entries {
        let name = e["name"].as_str().unwrap_or_default();
        let kind_of = |e: &Value| {
            json!({"group": e["group"].as_str().unwrap_or(group),
                "version": e["version"].as_str().unwrap_or(version), "kind": e["kind"]})
        };
        match name.split_once('/') {
            None => {
                let mut r = Map::new();
                r.insert("resource".into(), name.into());
                r.insert("responseKind".into(), kind_of(e));
                let scope = if e["namespaced"] == true {
                    "Namespaced"
                } else {
                    "Cluster"
                };
                r.insert("scope".into(), scope.into());
                r.insert("singularResource".into(), e["singularName"].clone());
                r.insert("verbs".into(), e["verbs"].clone());
                for optional in ["shortNames", "categories"] {
                    if let Some(v) = e.get(optional) {
                        r.insert(optional.into(), v.clone());
                    }
                }
                out.push(Value::Object(r));
            }
            Some((parent, sub)) => {
                let entry =
                    json!({"subresource": sub, "responseKind": kind_of(e), "verbs": e["verbs"]});
                if let Some(p) = out.iter_mut().find(|r| r["resource"] == parent) {
                    match p["subresources"].as_array_mut() {
                        Some(subs) => subs.push(entry),
                        None => p["subresources"] = json!([entry]),
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_negotiation() {
        assert!(wants_v2(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
        ));
        assert!(!wants_v2(
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
        ));
        assert!(!wants_v2("application/json"));
    }

    #[test]
    fn subresources_sit_under_their_resource() {
        let reg = Registry::builtin();
        let apis = list(&reg, false);
        let apps = apis["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["metadata"]["name"] == "apps")
            .unwrap();
        let deployments = apps["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "deployments")
            .unwrap();
        assert_eq!(deployments["scope"], "Namespaced");
        assert_eq!(deployments["responseKind"]["kind"], "Deployment");
        let subs: Vec<&str> = deployments["subresources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["subresource"].as_str().unwrap())
            .collect();
        assert_eq!(subs, ["status", "scale"]);
        let scale = &deployments["subresources"][1]["responseKind"];
        assert_eq!(scale["group"], "autoscaling");
        let core = list(&reg, true);
        assert_eq!(core["items"][0]["metadata"], json!({}));
    }
}
