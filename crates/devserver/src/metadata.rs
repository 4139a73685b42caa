//! Object metadata rules shared by every write: kind/apiVersion checks against the URL's
//! resource, the bound on how deep an object nests, name validation, server-assigned fields
//! (uid, creationTimestamp, generateName suffixes). When `generation` moves is per kind, in
//! `strategy`.

use serde_json::{Map, Value, json};

use super::resources::ResourceType;
use super::{Error, Result};

pub(crate) fn meta(obj: &Value, field: &str) -> String {
    obj["metadata"][field]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

pub(crate) fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    // Just ensured to be an object.
    obj["metadata"]
        .as_object_mut()
        .expect("metadata is an object")
}

pub(crate) fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

pub(crate) fn new_uid() -> String {
    let x: u128 = rand::random();
    let h = format!("{x:032x}");
    format!(
        "{}-{}-4{}-a{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

pub(crate) fn generate_suffix() -> String {
    // The alphabet apiserver uses: no vowels, no confusable digits.
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Drops what Go's `omitempty` (and, since 1.34, `omitzero` on `creationTimestamp`) keeps out
/// of a real apiserver's JSON: empty strings, maps and lists and null values in object metadata,
/// and the null `creationTimestamp` clients (kube-rs, protobuf bodies) leave in pod templates.
pub(crate) fn normalize(obj: &mut Value) {
    fn tidy(meta: &mut Value) {
        if let Some(m) = meta.as_object_mut() {
            m.retain(|_, v| match v {
                Value::Null => false,
                Value::String(s) => !s.is_empty(),
                Value::Object(o) => !o.is_empty(),
                Value::Array(a) => !a.is_empty(),
                Value::Number(n) => n.as_i64() != Some(0),
                Value::Bool(_) => true,
            });
        }
    }
    tidy(&mut obj["metadata"]);
    for pointer in [
        "/spec/template/metadata",
        "/spec/jobTemplate/metadata",
        "/spec/jobTemplate/spec/template/metadata",
    ] {
        if let Some(meta) = obj.pointer_mut(pointer) {
            tidy(meta);
        }
    }
}

/// Checks (and fills in when absent) kind and apiVersion against the resource.
pub(crate) fn check_type(res: &ResourceType, version: Option<&str>, obj: &mut Value) -> Result<()> {
    let Some(map) = obj.as_object_mut() else {
        return Err(Error::BadRequest(format!(
            "the body of a {} must be a JSON object",
            res.kind
        )));
    };
    match map.get("kind").and_then(Value::as_str) {
        None => {
            map.insert("kind".into(), res.kind.clone().into());
        }
        Some(k) if k == res.kind => {}
        Some(k) => {
            return Err(Error::BadRequest(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                res.kind
            )));
        }
    }
    let expected = res.api_version(version.unwrap_or(&res.versions[0]));
    match map.get("apiVersion").and_then(Value::as_str) {
        None => {
            map.insert("apiVersion".into(), expected.into());
        }
        Some(av) if av == expected => {}
        Some(av) if version.is_none() && res.versions.iter().any(|v| res.api_version(v) == av) => {}
        Some(av) => {
            return Err(Error::BadRequest(format!(
                "the API version in the data ({av}) does not match the expected API version ({expected})"
            )));
        }
    }
    if !map.get("metadata").is_none_or(Value::is_object) {
        return Err(Error::BadRequest(format!(
            "{}: metadata must be an object",
            res.kind
        )));
    }
    Ok(())
}

/// How many levels of objects and arrays a stored object may nest, itself the first.
///
/// kube-apiserver bounds nesting too: its JSON decoder stops at 10 000 levels, and a body too
/// deep to decode is a 400. This server's bound is lower because of what reads its objects:
/// serde_json, which this server parses its stored objects back with and kube-rs clients decode
/// with, stops at 127 levels, and a served object sits up to three levels below the top of a
/// response (a Table row's object; list items two, watch events one). An object nested deeper
/// could be stored but not read back, and a later write building on it lost its identity. So
/// the bound is checked on the object each write would store (after a patch has been applied,
/// which is where nesting can grow past what any body carried): 100 levels, deeper than any
/// real object needs.
pub(crate) const MAX_DEPTH: usize = 100;

/// How many levels of objects and arrays `v` nests (a scalar: 0). Walks without recursion, as
/// an object built through the Rust API may nest arbitrarily deep.
fn depth(v: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(v, 1)];
    while let Some((v, level)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Object(m) => Box::new(m.values()),
            Value::Array(a) => Box::new(a.iter()),
            _ => continue,
        };
        deepest = deepest.max(level);
        stack.extend(children.map(|c| (c, level + 1)));
    }
    deepest
}

/// Whether `v` nests more than `limit` levels. Every write asks, so it allocates nothing and
/// stops descending at the limit (which also bounds its recursion); [`depth`] walks a refused
/// object for the message.
fn deeper_than(v: &Value, limit: usize) -> bool {
    match v {
        Value::Object(m) => limit == 0 || m.values().any(|c| deeper_than(c, limit - 1)),
        Value::Array(a) => limit == 0 || a.iter().any(|c| deeper_than(c, limit - 1)),
        _ => false,
    }
}

/// Refuses an object nested deeper than [`MAX_DEPTH`] with a 400, as kube-apiserver answers a
/// body too deep to decode.
pub(crate) fn check_depth(res: &ResourceType, name: &str, obj: &Value) -> Result<()> {
    if !deeper_than(obj, MAX_DEPTH) {
        return Ok(());
    }
    let levels = depth(obj);
    Err(Error::BadRequest(format!(
        "{} \"{name}\": the object is nested {levels} levels deep; this server stores objects nested at most {MAX_DEPTH} levels deep",
        res.kind
    )))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{deeper_than, depth};

    #[test]
    fn depth_counts_objects_and_arrays_not_scalars() {
        assert_eq!(depth(&json!("x")), 0);
        assert_eq!(depth(&json!({})), 1);
        assert_eq!(depth(&json!({"a": [1, {"b": []}], "c": 2})), 4);
        let mut deep = serde_json::Value::Null;
        for _ in 0..10_000 {
            deep = serde_json::Value::Array(vec![deep]);
        }
        assert_eq!(depth(&deep), 10_000);
        // The check agrees with the count at every limit, and stops at the limit on 10 000.
        for v in [json!("x"), json!({}), json!({"a": [1, {"b": []}], "c": 2})] {
            for limit in 0..6 {
                assert_eq!(deeper_than(&v, limit), depth(&v) > limit, "{v} {limit}");
            }
        }
        assert!(
            deeper_than(&deep, 100),
            "stops at the limit, not at the bottom"
        );
        let mut nested = serde_json::Value::Null;
        for _ in 0..150 {
            nested = serde_json::Value::Array(vec![nested]);
        }
        assert!(deeper_than(&nested, 149) && !deeper_than(&nested, 150));
        // Taken apart level by level: dropping it whole would recurse 10 000 deep.
        while let serde_json::Value::Array(mut a) = deep {
            deep = a.pop().unwrap_or_default();
        }
    }
}
