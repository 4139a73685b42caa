//! The four patch flavours. JSON patch and JSON merge patch come from the `json-patch` crate;
//! strategic merge patch is implemented here for what kubectl apply/label/annotate/edit send
//! (lists merged by their Kubernetes `patchMergeKey`, `$patch`, `$retainKeys`,
//! `$setElementOrder`, `$deleteFromPrimitiveList` directives). Server-side apply of objects is
//! `crate::ssa`'s; here an apply patch to the `scale` subresource is merged strategically.

use serde_json::{Map, Value};

use super::{Error, Result};

/// Patch flavour, from the request's Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchType {
    /// Parses a Content-Type header value (415 for anything else).
    pub fn from_content_type(ct: &str) -> Result<PatchType> {
        match ct.split(';').next().unwrap_or_default().trim() {
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            "application/apply-patch+yaml" => Ok(PatchType::Apply),
            _ => Err(Error::UnsupportedMediaType(
                "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml".into(),
            )),
        }
    }
}

fn parse_json(body: &[u8]) -> Result<Value> {
    serde_json::from_slice(body)
        .map_err(|e| Error::BadRequest(format!("error decoding patch: {e}")))
}

/// Parses an apply configuration (YAML, or JSON which is YAML).
pub(crate) fn parse_apply(body: &[u8]) -> Result<Value> {
    let v: Value = serde_saphyr::from_slice(body)
        .map_err(|e| Error::BadRequest(format!("error decoding YAML: {e}")))?;
    if !v.is_object() {
        return Err(Error::BadRequest(
            "apply configuration must be an object".into(),
        ));
    }
    Ok(v)
}

/// Applies a patch body to `target` and returns the patched object.
pub(crate) fn apply(ptype: PatchType, target: &Value, body: &[u8]) -> Result<Value> {
    let mut doc = target.clone();
    match ptype {
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| Error::BadRequest(format!("error decoding JSON patch: {e}")))?;
            json_patch::patch(&mut doc, &ops).map_err(|e| Error::Unprocessable {
                cause: e.to_string(),
            })?;
        }
        PatchType::Merge => {
            let patch = parse_json(body)?;
            if !patch.is_object() {
                return Err(Error::BadRequest(
                    "a merge patch must be a JSON object".into(),
                ));
            }
            json_patch::merge(&mut doc, &patch);
        }
        PatchType::Strategic => {
            let patch = parse_json(body)?;
            if !patch.is_object() {
                return Err(Error::BadRequest(
                    "a strategic merge patch must be a JSON object".into(),
                ));
            }
            strategic_merge(&mut doc, &patch);
        }
        PatchType::Apply => {
            let patch = parse_apply(body)?;
            strategic_merge(&mut doc, &patch);
        }
    }
    Ok(doc)
}

/// Merge key of a list field, as declared by `patchMergeKey` in the Kubernetes API types.
/// `ports` is ambiguous (container ports vs service ports) so we look at the elements.
fn merge_key(field: &str, elems: &[&Value]) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims"
        | "readinessGates"
        | "webhooks" => match field {
            "readinessGates" => "conditionType",
            _ => "name",
        },
        "ports" => {
            if elems.iter().any(|e| e.get("containerPort").is_some()) {
                "containerPort"
            } else {
                "port"
            }
        }
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "hostAliases" => "ip",
        "conditions" => "type",
        "ownerReferences" => "uid",
        "topologySpreadConstraints" => "topologyKey",
        _ => return None,
    })
}

/// Primitive lists with patchStrategy `merge` (set union).
fn is_set_list(field: &str) -> bool {
    matches!(field, "finalizers")
}

/// Removes directive keys from a value that is inserted verbatim.
fn clean(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), clean(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(
            a.iter()
                .filter(|e| e.get("$patch").is_none())
                .map(clean)
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Strategic-merges `patch` into `target` (both objects).
pub(crate) fn strategic_merge(target: &mut Value, patch: &Value) {
    let Some(pmap) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    match pmap.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            *target = clean(patch);
            return;
        }
        Some("delete") => {
            *target = Value::Null;
            return;
        }
        _ => {}
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(tmap) = target.as_object_mut() else {
        return;
    };
    for (key, pv) in pmap {
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(list), Some(remove)) = (
                tmap.get_mut(field).and_then(Value::as_array_mut),
                pv.as_array(),
            ) {
                list.retain(|x| !remove.contains(x));
            }
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        match pv {
            Value::Null => {
                tmap.remove(key);
            }
            Value::Object(_) => {
                let slot = tmap.entry(key.clone()).or_insert(Value::Null);
                strategic_merge(slot, pv);
                if slot.is_null() {
                    tmap.remove(key);
                }
            }
            Value::Array(items) => {
                let slot = tmap.entry(key.clone()).or_insert(Value::Null);
                merge_list(slot, items, key);
            }
            other => {
                tmap.insert(key.clone(), other.clone());
            }
        }
    }
    if let Some(retain) = pmap.get("$retainKeys").and_then(Value::as_array) {
        tmap.retain(|k, _| retain.iter().any(|r| r.as_str() == Some(k)));
    }
}

fn merge_list(target: &mut Value, items: &[Value], field: &str) {
    if items
        .iter()
        .any(|e| e.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *target = clean(&Value::Array(items.to_vec()));
        return;
    }
    let existing: Vec<Value> = target.as_array().cloned().unwrap_or_default();
    let all: Vec<&Value> = existing.iter().chain(items.iter()).collect();
    if let Some(mk) = merge_key(field, &all) {
        let mut out = existing;
        for item in items {
            let id = item.get(mk);
            let pos = id.and_then(|id| out.iter().position(|e| e.get(mk) == Some(id)));
            let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
            match (pos, delete) {
                (Some(i), true) => {
                    out.remove(i);
                }
                (None, true) => {}
                (Some(i), false) => strategic_merge(&mut out[i], item),
                (None, false) => out.push(clean(item)),
            }
        }
        *target = Value::Array(out);
    } else if is_set_list(field) {
        let mut out = existing;
        for item in items {
            if !out.contains(item) {
                out.push(item.clone());
            }
        }
        *target = Value::Array(out);
    } else {
        *target = clean(&Value::Array(items.to_vec()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn containers_merge_by_name_and_directives_are_dropped() {
        let mut live = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "b:1"}
        ]}}}});
        let patch = json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "containers": [{"name": "a", "image": "a:2"}, {"name": "b", "$patch": "delete"}]
        }}}});
        strategic_merge(&mut live, &patch);
        assert_eq!(
            live,
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "a", "image": "a:2", "env": [{"name": "X", "value": "1"}]}
            ]}}}})
        );
    }

    #[test]
    fn null_removes_and_unknown_lists_replace() {
        let mut live =
            json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"args": ["x", "y"]}});
        strategic_merge(
            &mut live,
            &json!({"metadata": {"labels": {"a": null}}, "spec": {"args": ["z"]}}),
        );
        assert_eq!(
            live,
            json!({"metadata": {"labels": {"b": "2"}}, "spec": {"args": ["z"]}})
        );
    }
}
