//! A CRD's structural schema applied to its custom resources on every write, as
//! apiextensions-apiserver does: fields the schema does not know are pruned, `default`s fill
//! absent fields, then the object is validated (types, `required`, `enum`, bounds, lengths,
//! `pattern`), each failure a 422 cause worded as kube-openapi's validators word it
//! (`spec.replicas in body must be of type integer: "string"`).
//!
//! `apiVersion`, `kind` and `metadata` at the root (and in an `x-kubernetes-embedded-resource`)
//! are the API server's, never pruned here. `x-kubernetes-preserve-unknown-fields: true` keeps
//! unknown fields at its level; `additionalProperties` gives a map's values a schema.

use serde_json::{Map, Value};

use super::Cause;

/// Prunes unknown fields, then fills defaults (apiextensions' order: decode, prune, default).
pub(crate) fn prune_and_default(schema: &Value, obj: &mut Value) {
    prune(schema, obj, true);
    default(schema, obj);
}

/// Every way `obj` breaks `schema`, in field order.
pub(crate) fn validate(schema: &Value, obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(map) = obj.as_object() {
        for (k, v) in map {
            if !matches!(k.as_str(), "apiVersion" | "kind" | "metadata")
                && let Some(s) = schema["properties"].get(k)
            {
                check(s, v, k, &mut causes);
            }
        }
        required(schema, map, "", &mut causes);
    }
    causes
}

fn prune(s: &Value, v: &mut Value, resource_root: bool) {
    match v {
        Value::Object(map) => {
            let keep_unknown = s["x-kubernetes-preserve-unknown-fields"] == true;
            let embedded = resource_root || s["x-kubernetes-embedded-resource"] == true;
            let props = s["properties"].as_object();
            let extra = s.get("additionalProperties").filter(|a| a.is_object());
            map.retain(|k, _| {
                keep_unknown
                    || extra.is_some()
                    || props.is_some_and(|p| p.contains_key(k))
                    || (embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
            });
            for (k, child) in map.iter_mut() {
                if embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                match (props.and_then(|p| p.get(k)), extra) {
                    (Some(cs), _) | (None, Some(cs)) => prune(cs, child, false),
                    (None, None) => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = s.get("items") {
                for i in items {
                    prune(item, i, false);
                }
            }
        }
        _ => {}
    }
}

fn default(s: &Value, v: &mut Value) {
    match v {
        Value::Object(map) => {
            if let Some(props) = s["properties"].as_object() {
                for (k, ps) in props {
                    let absent = match map.get(k) {
                        None => true,
                        // A null is defaulted unless the field may be null.
                        Some(Value::Null) => ps["nullable"] != true,
                        Some(_) => false,
                    };
                    if absent && let Some(d) = ps.get("default") {
                        map.insert(k.clone(), d.clone());
                    }
                }
                for (k, child) in map.iter_mut() {
                    if let Some(ps) = props.get(k) {
                        default(ps, child);
                    }
                }
            } else if let Some(extra) = s.get("additionalProperties").filter(|a| a.is_object()) {
                for child in map.values_mut() {
                    default(extra, child);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = s.get("items") {
                for i in items {
                    default(item, i);
                }
            }
        }
        _ => {}
    }
}

/// The JSON type kube-openapi names for a value.
fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A value as Go's `%v`-ish rendering in a cause: strings quoted, the rest as JSON.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn check(s: &Value, v: &Value, path: &str, causes: &mut Vec<Cause>) {
    if v.is_null() && s["nullable"] == true {
        return;
    }
    let got = type_of(v);
    let int_or_string = s["x-kubernetes-int-or-string"] == true;
    let want = if int_or_string {
        Some("integer,string")
    } else {
        s["type"].as_str()
    };
    if let Some(want) = want {
        let ok = want == got
            || (want == "number" && got == "integer")
            || (int_or_string && matches!(got, "integer" | "string"));
        if !ok {
            causes.push(Cause::invalid(
                path,
                &format!("{got:?}"),
                &format!("{path} in body must be of type {want}: {got:?}"),
            ));
            return;
        }
    }
    if let Some(options) = s["enum"].as_array()
        && !options.contains(v)
    {
        let supported: Vec<String> = options
            .iter()
            .map(|o| o.as_str().map_or_else(|| o.to_string(), String::from))
            .collect();
        let supported: Vec<&str> = supported.iter().map(String::as_str).collect();
        let value = v.as_str().map_or_else(|| v.to_string(), String::from);
        causes.push(Cause::not_supported(path, &value, &supported));
    }
    let bound =
        |causes: &mut Vec<Cause>, key: &str, fails: &dyn Fn(f64, f64) -> bool, words: &str| {
            if let (Some(limit), Some(x)) = (s[key].as_f64(), v.as_f64())
                && fails(x, limit)
            {
                causes.push(Cause::invalid(
                    path,
                    &shown(v),
                    &format!("{path} in body {words} {}", s[key]),
                ));
            }
        };
    let exclusive = |key: &str| s[key] == true;
    if exclusive("exclusiveMinimum") {
        bound(causes, "minimum", &|x, l| x <= l, "should be greater than");
    } else {
        bound(
            causes,
            "minimum",
            &|x, l| x < l,
            "should be greater than or equal to",
        );
    }
    if exclusive("exclusiveMaximum") {
        bound(causes, "maximum", &|x, l| x >= l, "should be less than");
    } else {
        bound(
            causes,
            "maximum",
            &|x, l| x > l,
            "should be less than or equal to",
        );
    }
    if let Value::String(text) = v {
        let chars = text.chars().count() as u64;
        if let Some(min) = s["minLength"].as_u64().filter(|m| chars < *m) {
            causes.push(Cause::invalid(
                path,
                &shown(v),
                &format!("{path} in body should be at least {min} chars long"),
            ));
        }
        if let Some(max) = s["maxLength"].as_u64().filter(|m| chars > *m) {
            causes.push(Cause::invalid(
                path,
                &shown(v),
                &format!("{path} in body should be at most {max} chars long"),
            ));
        }
        if let Some(pattern) = s["pattern"].as_str()
            && let Ok(re) = regex::Regex::new(pattern)
            && !re.is_match(text)
        {
            causes.push(Cause::invalid(
                path,
                &shown(v),
                &format!("{path} in body should match '{pattern}'"),
            ));
        }
    }
    match v {
        Value::Object(map) => {
            let props = s["properties"].as_object();
            let extra = s.get("additionalProperties").filter(|a| a.is_object());
            for (k, child) in map {
                let child_path = format!("{path}.{k}");
                match (props.and_then(|p| p.get(k)), extra) {
                    (Some(cs), _) | (None, Some(cs)) => check(cs, child, &child_path, causes),
                    (None, None) => {}
                }
            }
            required(s, map, path, causes);
        }
        Value::Array(items) => {
            let n = items.len() as u64;
            if let Some(min) = s["minItems"].as_u64().filter(|m| n < *m) {
                causes.push(Cause::invalid(
                    path,
                    &n.to_string(),
                    &format!("{path} in body should have at least {min} items"),
                ));
            }
            if let Some(max) = s["maxItems"].as_u64().filter(|m| n > *m) {
                causes.push(Cause {
                    reason: "FieldValueTooMany",
                    field: path.into(),
                    message: format!("Too many: {n}: must have at most {max} items"),
                });
            }
            if let Some(item) = s.get("items") {
                for (i, child) in items.iter().enumerate() {
                    check(item, child, &format!("{path}[{i}]"), causes);
                }
            }
        }
        _ => {}
    }
}

fn required(s: &Value, map: &Map<String, Value>, path: &str, causes: &mut Vec<Cause>) {
    for r in s["required"].as_array().into_iter().flatten() {
        if let Some(r) = r.as_str()
            && !map.contains_key(r)
        {
            let field = if path.is_empty() {
                r.to_string()
            } else {
                format!("{path}.{r}")
            };
            causes.push(Cause::required(&field, ""));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "string", "enum": ["S", "M", "L"]},
                "replicas": {"type": "integer", "minimum": 1, "maximum": 5, "default": 1},
                "name": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
                "port": {"x-kubernetes-int-or-string": true},
                "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "nested": {"type": "object", "properties": {"on": {"type": "boolean", "default": true}}, "default": {}},
            }},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
        }})
    }

    #[test]
    fn unknown_fields_go_and_defaults_fill_absent_ones() {
        let mut obj = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "labels": {"a": "b"}},
            "spec": {"size": "M", "typo": 1, "labels": {"x": "y"}, "extra": {"anything": [1]},
                "tags": ["a"]},
            "unknown": true});
        prune_and_default(&schema(), &mut obj);
        assert_eq!(
            obj,
            json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "w", "labels": {"a": "b"}},
                "spec": {"size": "M", "labels": {"x": "y"}, "extra": {"anything": [1]},
                    "tags": ["a"], "replicas": 1, "nested": {"on": true}}})
        );
        assert!(validate(&schema(), &obj).is_empty());
    }

    #[test]
    fn each_violation_is_a_cause_worded_as_kube_openapi_does() {
        let obj = json!({"spec": {"size": "XL", "replicas": 0, "name": "A", "port": true,
            "tags": ["a", "b", "c"], "labels": {"x": 1}}, "status": {"ready": "yes"}});
        let causes: Vec<(String, String)> = validate(&schema(), &obj)
            .into_iter()
            .map(|c| (c.field, c.message))
            .collect();
        let want = [
            (
                "spec.size",
                "Unsupported value: \"XL\": supported values: \"S\", \"M\", \"L\"",
            ),
            (
                "spec.replicas",
                "Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
            ),
            (
                "spec.name",
                "Invalid value: \"A\": spec.name in body should be at least 2 chars long",
            ),
            (
                "spec.name",
                "Invalid value: \"A\": spec.name in body should match '^[a-z]+$'",
            ),
            (
                "spec.port",
                "Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
            ),
            ("spec.tags", "Too many: 3: must have at most 2 items"),
            (
                "spec.labels.x",
                "Invalid value: \"integer\": spec.labels.x in body must be of type string: \"integer\"",
            ),
            (
                "status.ready",
                "Invalid value: \"string\": status.ready in body must be of type boolean: \"string\"",
            ),
        ];
        let got: Vec<(&str, &str)> = causes
            .iter()
            .map(|(f, m)| (f.as_str(), m.as_str()))
            .collect();
        // serde_json keeps object keys sorted: causes come in that order.
        let mut want = want.to_vec();
        want.sort_by_key(|(f, _)| *f);
        let mut sorted = got.clone();
        sorted.sort_by_key(|(f, _)| *f);
        assert_eq!(sorted, want, "{got:?}");
        let missing = validate(&schema(), &json!({"spec": {}}));
        assert_eq!(
            (missing[0].field.as_str(), missing[0].message.as_str()),
            ("spec.size", "Required value")
        );
    }
}
