//! The `scale` subresource: an autoscaling/v1 Scale view of an object's replica count, as
//! `kubectl scale` and autoscalers read and write it. Built-ins (Deployment, ReplicaSet,
//! StatefulSet) keep replicas at `.spec.replicas` and their selector at `.spec.selector`; a
//! CRD names its own paths in `subresources.scale`.

use serde_json::{Value, json};

use super::metadata::meta;
use super::resources::ResourceType;
use super::{Cause, Error, Result};

/// Where one resource keeps what its Scale shows (simple dotted paths such as `.spec.replicas`).
#[derive(Debug, Clone)]
pub(crate) struct ScalePaths {
    spec_replicas: String,
    status_replicas: String,
    selector: Selector,
}

#[derive(Debug, Clone)]
enum Selector {
    /// A metav1.LabelSelector object (built-ins), rendered as a selector string.
    Object(String),
    /// A field that already holds the selector string (CRDs' `labelSelectorPath`).
    Text(String),
    None,
}

impl ScalePaths {
    /// The built-in workloads' layout.
    pub fn builtin() -> ScalePaths {
        ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            selector: Selector::Object(".spec.selector".into()),
        }
    }

    /// A CRD version's `subresources.scale`, if it declares one.
    pub fn from_crd(scale: &Value) -> Option<ScalePaths> {
        let path = |key: &str| scale[key].as_str().map(String::from);
        Some(ScalePaths {
            spec_replicas: path("specReplicasPath")?,
            status_replicas: path("statusReplicasPath")?,
            selector: path("labelSelectorPath").map_or(Selector::None, Selector::Text),
        })
    }
}

fn get<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .filter(|s| !s.is_empty())
        .try_fold(obj, |v, key| v.get(key))
}

fn set(obj: &mut Value, path: &str, value: Value) {
    let mut slot = obj;
    for key in path.split('.').filter(|s| !s.is_empty()) {
        if !slot.is_object() {
            *slot = json!({});
        }
        slot = &mut slot[key];
    }
    *slot = value;
}

/// A metav1.LabelSelector as its string form (`app=web,tier in (a,b)`), requirements and
/// values sorted as `labels.Selector.String()` sorts them.
fn selector_string(sel: &Value) -> String {
    let mut parts: Vec<(&str, String)> = Vec::new();
    for (k, v) in sel["matchLabels"].as_object().into_iter().flatten() {
        parts.push((k, format!("{k}={}", v.as_str().unwrap_or_default())));
    }
    for e in sel["matchExpressions"].as_array().into_iter().flatten() {
        let key = e["key"].as_str().unwrap_or_default();
        let mut values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        let text = match e["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            _ => format!("!{key}"),
        };
        parts.push((key, text));
    }
    parts.sort_by(|a, b| a.0.cmp(b.0));
    parts
        .into_iter()
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join(",")
}

/// The Scale of `obj`.
pub(crate) fn scale_of(res: &ResourceType, obj: &Value) -> Value {
    let Some(paths) = &res.scale else {
        return Value::Null;
    };
    let mut metadata = json!({});
    for field in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = obj["metadata"].get(field) {
            metadata[field] = v.clone();
        }
    }
    // A built-in without replicas runs the API's documented default of one.
    let default = if res.builtin { 1 } else { 0 };
    let spec_replicas = get(obj, &paths.spec_replicas)
        .cloned()
        .unwrap_or_else(|| default.into());
    let mut status = json!({
        "replicas": get(obj, &paths.status_replicas).cloned().unwrap_or_else(|| 0.into()),
    });
    let selector = match &paths.selector {
        Selector::Object(p) => get(obj, p).map(selector_string),
        Selector::Text(p) => get(obj, p).and_then(Value::as_str).map(String::from),
        Selector::None => None,
    };
    if let Some(sel) = selector.filter(|s| !s.is_empty()) {
        status["selector"] = sel.into();
    }
    json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": metadata,
        "spec": {"replicas": spec_replicas}, "status": status,
    })
}

/// Checks a Scale written for object `name` and returns its `spec.replicas`.
pub(crate) fn replicas(scale: &Value, name: &str) -> Result<i64> {
    if scale["kind"].as_str().is_some_and(|k| k != "Scale") {
        return Err(Error::BadRequest(format!(
            "the kind in the data ({}) does not match the expected kind (Scale)",
            scale["kind"]
        )));
    }
    if scale["apiVersion"]
        .as_str()
        .is_some_and(|v| v != "autoscaling/v1")
    {
        return Err(Error::BadRequest(format!(
            "the API version in the data ({}) does not match the expected API version (autoscaling/v1)",
            scale["apiVersion"]
        )));
    }
    let body_name = meta(scale, "name");
    if !body_name.is_empty() && body_name != name {
        return Err(Error::BadRequest(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let invalid = |cause: Cause| Error::Invalid {
        kind: "Scale".into(),
        group: "autoscaling".into(),
        name: name.into(),
        causes: vec![cause],
    };
    // Scale.spec.replicas is a plain int32: absent means zero.
    match &scale["spec"]["replicas"] {
        Value::Null => Ok(0),
        Value::Number(n) => match n.as_i64() {
            Some(r) if (0..=i64::from(i32::MAX)).contains(&r) => Ok(r),
            _ => Err(invalid(Cause::invalid(
                "spec.replicas",
                &n.to_string(),
                "must be greater than or equal to 0",
            ))),
        },
        other => Err(invalid(Cause::invalid(
            "spec.replicas",
            &other.to_string(),
            "must be an integer",
        ))),
    }
}

/// Writes `replicas` where `res` keeps them.
pub(crate) fn set_replicas(res: &ResourceType, obj: &mut Value, replicas: i64) {
    if let Some(paths) = &res.scale {
        set(obj, &paths.spec_replicas, replicas.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_render_like_metav1() {
        let sel = json!({"matchLabels": {"app": "web"}, "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["b", "a"]},
            {"key": "gone", "operator": "DoesNotExist"},
        ]});
        assert_eq!(selector_string(&sel), "app=web,!gone,tier in (a,b)");
    }

    #[test]
    fn paths_read_and_write_nested_fields() {
        let mut obj = json!({"spec": {}});
        set(&mut obj, ".spec.replicas", 3.into());
        set(&mut obj, ".status.replicas", 1.into());
        assert_eq!(get(&obj, ".spec.replicas"), Some(&json!(3)));
        assert_eq!(obj["status"], json!({"replicas": 1}));
    }
}
