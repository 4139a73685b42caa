//! Protobuf request bodies (`application/vnd.kubernetes.protobuf`), decoded into the JSON object
//! they stand for.
//!
//! Why the server must read protobuf at all: kubectl ≥ 1.32 sends its typed writes (`kubectl
//! create deployment|job|cronjob|service|namespace|configmap|secret|serviceaccount`, and `scale`'s
//! PUT of a Scale) as protobuf unconditionally, without consulting discovery, and treats 415 as a
//! final error, so advertising JSON only cannot make it fall back.
//!
//! The schema is Kubernetes' own: `build.rs` compiles the vendored `generated.proto` files
//! (`proto/`, Kubernetes 1.33) into a descriptor set, and `prost-reflect` decodes any message of
//! it. What is ours is only the mapping to JSON, which follows Go's `encoding/json` of the same
//! types: field names are the proto names (the JSON names, except in `JSONSchemaProps`);
//! Kubernetes' wrapper messages (Time, MicroTime, IntOrString, Quantity, RawExtension, FieldsV1,
//! apiextensions' JSON and JSONSchemaPropsOr*) become their JSON forms; bytes become base64; an
//! empty singular string is left out, as Go's `omitempty` does for every optional string, while
//! zero numbers and `false` are kept, since for pointer fields (`replicas: 0`) they are meaningful.
//! A field number the 1.33 schema does not know is refused (415) rather than silently dropped.

use std::sync::OnceLock;

use base64::Engine;
use prost_reflect::{
    DescriptorPool, DynamicMessage, MapKey, MessageDescriptor, ReflectMessage, Value as Pb,
};
use serde_json::{Map, Value};

use super::{Error, Result};

/// The protobuf content type.
pub(crate) const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Every body starts with this magic, then a `runtime.Unknown` envelope.
const MAGIC: &[u8] = b"k8s\0";

const UNKNOWN: &str = "apimachinery.pkg.runtime.Unknown";
const META_V1: &str = "apimachinery.pkg.apis.meta.v1";
const APIEXTENSIONS_V1: &str = "apiextensions_apiserver.pkg.apis.apiextensions.v1";

/// The descriptor pool compiled from `proto/` at build time.
fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        let bytes = include_bytes!(concat!(env!("OUT_DIR"), "/kubernetes.fds"));
        // build.rs produced these bytes with protox from the same descriptors.
        DescriptorPool::decode(&bytes[..]).expect("build.rs wrote a valid descriptor set")
    })
}

fn malformed(why: impl std::fmt::Display) -> Error {
    Error::BadRequest(format!("malformed protobuf body: {why}"))
}

fn not_understood(what: String) -> Error {
    Error::UnsupportedMediaType(format!("application/json ({what})"))
}

/// The message that carries `kind` of `apiVersion`, if the vendored schema has it.
pub(crate) fn message_for(api_version: &str, kind: &str) -> Option<MessageDescriptor> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    // The proto package of a group is named after its first DNS label (`coordination.k8s.io`
    // is `api.coordination`), except the core group and apiextensions.
    let package = match group {
        "" => "api.core".to_string(),
        "apiextensions.k8s.io" => APIEXTENSIONS_V1.trim_end_matches(".v1").to_string(),
        g => format!("api.{}", g.split('.').next().unwrap_or(g)),
    };
    let pool = pool();
    pool.get_message_by_name(&format!("{package}.{version}.{kind}"))
        // Options (DeleteOptions) travel under any group-version but are meta.k8s.io types.
        .or_else(|| pool.get_message_by_name(&format!("{META_V1}.{kind}")))
}

/// Decodes a protobuf request body into the JSON object it stands for.
pub(crate) fn decode(body: &[u8]) -> Result<Value> {
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| malformed("it does not start with the k8s magic"))?;
    let unknown = pool()
        .get_message_by_name(UNKNOWN)
        .expect("runtime.Unknown is in the schema");
    let envelope = DynamicMessage::decode(unknown, envelope).map_err(malformed)?;
    let text = |msg: &DynamicMessage, name: &str| {
        msg.get_field_by_name(name)
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default()
    };
    let type_meta = envelope
        .get_field_by_name("typeMeta")
        .and_then(|v| v.as_message().cloned())
        .ok_or_else(|| malformed("the envelope has no typeMeta"))?;
    let (api_version, kind) = (text(&type_meta, "apiVersion"), text(&type_meta, "kind"));
    let encoding = text(&envelope, "contentEncoding");
    if !encoding.is_empty() {
        return Err(not_understood(format!(
            "content encoding {encoding:?} is not supported"
        )));
    }
    let desc = message_for(&api_version, &kind).ok_or_else(|| {
        not_understood(format!(
            "no protobuf schema for kind {kind:?} of {api_version:?}"
        ))
    })?;
    let raw = envelope
        .get_field_by_name("raw")
        .and_then(|v| v.as_bytes().cloned())
        .unwrap_or_default();
    let msg = DynamicMessage::decode(desc, raw).map_err(malformed)?;
    let mut obj = message(&msg)?;
    let map = obj.as_object_mut().expect("objects decode to JSON objects");
    // The envelope's type goes first, as in Go's JSON of the object.
    let mut out = Map::new();
    out.insert("kind".into(), kind.into());
    out.insert("apiVersion".into(), api_version.into());
    out.append(map);
    Ok(Value::Object(out))
}

/// One message as Go's `encoding/json` writes the Kubernetes type it was generated from.
fn message(msg: &DynamicMessage) -> Result<Value> {
    let desc = msg.descriptor();
    if let Some(field) = msg.unknown_fields().next() {
        return Err(not_understood(format!(
            "protobuf field {} of {} is not in this server's Kubernetes 1.33 schema",
            field.number(),
            desc.name()
        )));
    }
    let field = |name: &str| msg.get_field_by_name(name);
    let full_name = desc.full_name();
    let (package, name) = full_name.rsplit_once('.').unwrap_or(("", full_name));
    match (package, name) {
        (META_V1, "Time" | "MicroTime") => return time(msg, name == "MicroTime"),
        ("apimachinery.pkg.util.intstr", "IntOrString") => {
            let is_string = field("type").and_then(|t| t.as_i64()) == Some(1);
            return Ok(match is_string {
                true => field("strVal").map(|v| value(&v)).transpose()?,
                false => field("intVal").map(|v| value(&v)).transpose()?,
            }
            .unwrap_or(Value::Null));
        }
        ("apimachinery.pkg.api.resource", "Quantity") => {
            return Ok(field("string")
                .and_then(|v| v.as_str().map(Value::from))
                .unwrap_or_default());
        }
        ("apimachinery.pkg.runtime", "RawExtension")
        | (META_V1, "FieldsV1")
        | (APIEXTENSIONS_V1, "JSON") => return raw_json(msg),
        (APIEXTENSIONS_V1, "JSONSchemaPropsOrArray") => {
            return either(msg, "jSONSchemas", "schema");
        }
        (APIEXTENSIONS_V1, "JSONSchemaPropsOrStringArray") => {
            return either(msg, "property", "schema");
        }
        (APIEXTENSIONS_V1, "JSONSchemaPropsOrBool") => {
            return match msg.has_field_by_name("schema") {
                true => field("schema").map(|v| value(&v)).transpose(),
                false => field("allows").map(|v| value(&v)).transpose(),
            }
            .map(Option::unwrap_or_default);
        }
        _ => {}
    }
    let schema_props = package == APIEXTENSIONS_V1 && name == "JSONSchemaProps";
    let mut out = Map::new();
    for (fd, v) in msg.fields() {
        if matches!(v, Pb::String(s) if s.is_empty()) {
            continue;
        }
        let key = match fd.name() {
            "schema" if schema_props => "$schema".to_string(),
            "ref" if schema_props => "$ref".to_string(),
            n if schema_props && n.starts_with("xKubernetes") => kebab_extension(n),
            n => n.to_string(),
        };
        out.insert(key, value(v)?);
    }
    Ok(Value::Object(out))
}

/// `xKubernetesPreserveUnknownFields` → `x-kubernetes-preserve-unknown-fields`.
fn kebab_extension(name: &str) -> String {
    let mut out = String::from("x");
    for c in name[1..].chars() {
        if c.is_ascii_uppercase() {
            out.push('-');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The list field when it has elements, else the single one (the `...Or...` unions).
fn either(msg: &DynamicMessage, list: &str, single: &str) -> Result<Value> {
    let pick = if msg.has_field_by_name(list) {
        list
    } else {
        single
    };
    msg.get_field_by_name(pick)
        .map(|v| value(&v))
        .transpose()
        .map(Option::unwrap_or_default)
}

/// Messages whose one bytes field holds JSON text.
fn raw_json(msg: &DynamicMessage) -> Result<Value> {
    let Some((_, Pb::Bytes(raw))) = msg.fields().next() else {
        return Ok(Value::Null);
    };
    serde_json::from_slice(raw).map_err(|e| {
        malformed(format!(
            "{} does not hold JSON: {e}",
            msg.descriptor().name()
        ))
    })
}

/// metav1.Time is RFC 3339 in seconds, MicroTime in microseconds; the zero time (an empty
/// message on the wire) is `null`.
fn time(msg: &DynamicMessage, micro: bool) -> Result<Value> {
    if msg.fields().next().is_none() {
        return Ok(Value::Null);
    }
    let int = |name: &str| {
        msg.get_field_by_name(name)
            .and_then(|v| v.as_i64().or_else(|| v.as_i32().map(i64::from)))
            .unwrap_or(0)
    };
    let (seconds, nanos) = (int("seconds"), int("nanos"));
    let ts = jiff::Timestamp::from_second(seconds).map_err(malformed)?;
    let base = ts.strftime("%Y-%m-%dT%H:%M:%S");
    Ok(Value::String(if micro {
        format!("{base}.{:06}Z", nanos / 1000)
    } else {
        format!("{base}Z")
    }))
}

fn value(v: &Pb) -> Result<Value> {
    Ok(match v {
        Pb::Bool(b) => Value::Bool(*b),
        Pb::I32(n) => (*n).into(),
        Pb::I64(n) => (*n).into(),
        Pb::U32(n) => (*n).into(),
        Pb::U64(n) => (*n).into(),
        Pb::EnumNumber(n) => (*n).into(),
        Pb::F32(x) => number(f64::from(*x))?,
        Pb::F64(x) => number(*x)?,
        Pb::String(s) => Value::String(s.clone()),
        Pb::Bytes(b) => base64::engine::general_purpose::STANDARD.encode(b).into(),
        Pb::Message(m) => message(m)?,
        Pb::List(items) => Value::Array(items.iter().map(value).collect::<Result<_>>()?),
        Pb::Map(entries) => {
            let mut out = Map::new();
            // Sorted, as Go writes map keys.
            let mut sorted: Vec<_> = entries.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(b.0));
            for (k, v) in sorted {
                let key = match k {
                    MapKey::String(s) => s.clone(),
                    MapKey::Bool(b) => b.to_string(),
                    MapKey::I32(n) => n.to_string(),
                    MapKey::I64(n) => n.to_string(),
                    MapKey::U32(n) => n.to_string(),
                    MapKey::U64(n) => n.to_string(),
                };
                out.insert(key, value(v)?);
            }
            Value::Object(out)
        }
    })
}

fn number(x: f64) -> Result<Value> {
    serde_json::Number::from_f64(x)
        .map(Value::Number)
        .ok_or_else(|| malformed(format!("{x} is not a JSON number")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;
    use prost_reflect::prost::Message;
    use serde_json::json;

    /// Encodes `obj` of `kind` as kubectl would: the magic, then runtime.Unknown.
    fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let unknown = pool().get_message_by_name(UNKNOWN).unwrap();
        let mut env = DynamicMessage::new(unknown.clone());
        let type_meta = unknown.get_field_by_name("typeMeta").unwrap();
        let mut tm = DynamicMessage::new(type_meta.kind().as_message().unwrap().clone());
        tm.set_field_by_name("apiVersion", Pb::String(api_version.into()));
        tm.set_field_by_name("kind", Pb::String(kind.into()));
        env.set_field(&type_meta, Pb::Message(tm));
        env.set_field_by_name("raw", Pb::Bytes(raw.into()));
        [MAGIC, &env.encode_to_vec()].concat()
    }

    #[test]
    fn every_served_builtin_kind_has_a_schema() {
        let reg = Registry::builtin();
        for (group, version) in reg.group_versions() {
            // events.k8s.io, authentication.k8s.io and admissionregistration.k8s.io are served
            // in JSON only: their generated.proto is not vendored, and the clients that write
            // Events (client-go's recorders), TokenReviews (kube-rs, an admin server's
            // authenticator) and webhook configurations (`kubectl apply`, kube-rs) send JSON.
            if group == "events.k8s.io"
                || group == "authentication.k8s.io"
                || group == "admissionregistration.k8s.io"
            {
                continue;
            }
            for res in reg.resources_in(&group, &version) {
                let av = res.api_version(&version);
                assert!(message_for(&av, &res.kind).is_some(), "{av} {}", res.kind);
            }
        }
        assert!(message_for("autoscaling/v1", "Scale").is_some());
        assert!(message_for("apps/v1", "DeleteOptions").is_some());
    }

    #[test]
    fn decodes_kubectl_1_32_create_deployment() {
        // The body `kubectl create deployment webx --image=nginx` (1.32) sends, from its -v=9 log.
        let body: &[u8] = &[
            0x6b, 0x38, 0x73, 0x00, 0x0a, 0x15, 0x0a, 0x07, 0x61, 0x70, 0x70, 0x73, 0x2f, 0x76,
            0x31, 0x12, 0x0a, 0x44, 0x65, 0x70, 0x6c, 0x6f, 0x79, 0x6d, 0x65, 0x6e, 0x74, 0x12,
            0xaf, 0x01, 0x0a, 0x21, 0x0a, 0x04, 0x77, 0x65, 0x62, 0x78, 0x12, 0x00, 0x1a, 0x00,
            0x22, 0x00, 0x2a, 0x00, 0x32, 0x00, 0x38, 0x00, 0x42, 0x00, 0x5a, 0x0b, 0x0a, 0x03,
            0x61, 0x70, 0x70, 0x12, 0x04, 0x77, 0x65, 0x62, 0x78, 0x12, 0x7c, 0x08, 0x01, 0x12,
            0x0d, 0x0a, 0x0b, 0x0a, 0x03, 0x61, 0x70, 0x70, 0x12, 0x04, 0x77, 0x65, 0x62, 0x78,
            0x1a, 0x61, 0x0a, 0x1d, 0x0a, 0x00, 0x12, 0x00, 0x1a, 0x00, 0x22, 0x00, 0x2a, 0x00,
            0x32, 0x00, 0x38, 0x00, 0x42, 0x00, 0x5a, 0x0b, 0x0a, 0x03, 0x61, 0x70, 0x70, 0x12,
            0x04, 0x77, 0x65, 0x62, 0x78, 0x12, 0x40, 0x12, 0x22, 0x0a, 0x05, 0x6e, 0x67, 0x69,
            0x6e, 0x78, 0x12, 0x05, 0x6e, 0x67, 0x69, 0x6e, 0x78, 0x2a, 0x00, 0x42, 0x00, 0x6a,
            0x00, 0x72, 0x00, 0x80, 0x01, 0x00, 0x88, 0x01, 0x00, 0x90, 0x01, 0x00, 0xa2, 0x01,
            0x00, 0x1a, 0x00, 0x32, 0x00, 0x42, 0x00, 0x4a, 0x00, 0x52, 0x00, 0x58, 0x00, 0x60,
            0x00, 0x68, 0x00, 0x82, 0x01, 0x00, 0x8a, 0x01, 0x00, 0x9a, 0x01, 0x00, 0xc2, 0x01,
            0x00, 0x22, 0x02, 0x0a, 0x00, 0x28, 0x00, 0x38, 0x00, 0x1a, 0x0c, 0x08, 0x00, 0x10,
            0x00, 0x18, 0x00, 0x20, 0x00, 0x28, 0x00, 0x38, 0x00, 0x1a, 0x00, 0x22, 0x00,
        ];
        let d = decode(body).unwrap();
        assert_eq!(d["kind"], "Deployment");
        assert_eq!(d["apiVersion"], "apps/v1");
        assert_eq!(
            d["metadata"],
            json!({"name": "webx", "generation": 0, "creationTimestamp": null, "labels": {"app": "webx"}})
        );
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(
            d["spec"]["selector"],
            json!({"matchLabels": {"app": "webx"}})
        );
        assert_eq!(d["spec"]["strategy"], json!({}));
        let container = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["name"], "nginx");
        assert_eq!(container["image"], "nginx");
        assert_eq!(container["resources"], json!({}));
        assert_eq!(
            d["spec"]["template"]["metadata"]["creationTimestamp"],
            Value::Null
        );
    }

    #[test]
    fn kubernetes_wrappers_take_their_json_forms() {
        let obj = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "s", "creationTimestamp": "2024-05-06T07:08:09Z"},
            "spec": {"ports": [{"port": 80, "targetPort": "http"}, {"port": 81, "targetPort": 8081}]},
        });
        // Built through prost-reflect's own JSON reader, which knows nothing of the wrappers,
        // so the wrapper messages are spelled out.
        let desc = message_for("v1", "Service").unwrap();
        let mut wire = obj.clone();
        wire.as_object_mut().unwrap().remove("apiVersion");
        wire.as_object_mut().unwrap().remove("kind");
        wire["metadata"]["creationTimestamp"] = json!({"seconds": 1714979289});
        wire["spec"]["ports"][0]["targetPort"] = json!({"type": 1, "strVal": "http"});
        wire["spec"]["ports"][1]["targetPort"] = json!({"type": 0, "intVal": 8081});
        let msg = from_json(desc, &wire);
        let back = decode(&envelope("v1", "Service", msg.encode_to_vec())).unwrap();
        assert_eq!(back, obj);
    }

    #[test]
    fn secret_bytes_are_base64_and_quantities_strings() {
        let desc = message_for("v1", "Secret").unwrap();
        let mut msg = DynamicMessage::new(desc);
        let data = [(
            MapKey::String("k".into()),
            Pb::Bytes(b"\x00v".to_vec().into()),
        )];
        msg.set_field_by_name("data", Pb::Map(data.into_iter().collect()));
        let back = decode(&envelope("v1", "Secret", msg.encode_to_vec())).unwrap();
        assert_eq!(back["data"], json!({"k": "AHY="}));

        let pvc = message_for("v1", "PersistentVolumeClaim").unwrap();
        let wire = json!({"spec": {"resources": {"requests": {"storage": {"string": "1Gi"}}}}});
        let msg = from_json(pvc, &wire);
        let back = decode(&envelope(
            "v1",
            "PersistentVolumeClaim",
            msg.encode_to_vec(),
        ))
        .unwrap();
        assert_eq!(back["spec"]["resources"]["requests"]["storage"], "1Gi");
    }

    #[test]
    fn unknown_fields_and_kinds_are_refused() {
        // Field 99 of Namespace does not exist.
        let raw = vec![0x9a, 0x06, 0x00];
        let err = decode(&envelope("v1", "Namespace", raw)).unwrap_err();
        assert!(
            matches!(&err, Error::UnsupportedMediaType(m) if m.contains("field 99 of Namespace")),
            "{err}"
        );
        let err = decode(&envelope("example.com/v1", "Widget", vec![])).unwrap_err();
        assert!(matches!(err, Error::UnsupportedMediaType(_)), "{err}");
        let err = decode(b"{}").unwrap_err();
        assert!(matches!(err, Error::BadRequest(_)), "{err}");
    }

    /// A dynamic message from its proto3-JSON form (proto names, wrappers as plain messages).
    fn from_json(desc: MessageDescriptor, v: &Value) -> DynamicMessage {
        let mut msg = DynamicMessage::new(desc.clone());
        for (k, v) in v.as_object().unwrap() {
            let fd = desc.get_field_by_name(k).unwrap_or_else(|| panic!("{k}"));
            let one = |v: &Value| -> Pb {
                match fd.kind() {
                    prost_reflect::Kind::Message(m) => {
                        if fd.is_map() {
                            unreachable!()
                        }
                        Pb::Message(from_json(m, v))
                    }
                    prost_reflect::Kind::String => Pb::String(v.as_str().unwrap().into()),
                    prost_reflect::Kind::Int32 => Pb::I32(v.as_i64().unwrap() as i32),
                    prost_reflect::Kind::Int64 => Pb::I64(v.as_i64().unwrap()),
                    other => panic!("{other:?}"),
                }
            };
            let pv = if fd.is_map() {
                let entry = fd.kind();
                let value_fd = entry.as_message().unwrap().map_entry_value_field();
                let vdesc = value_fd.kind();
                Pb::Map(
                    v.as_object()
                        .unwrap()
                        .iter()
                        .map(|(k, v)| {
                            let val = match vdesc.as_message() {
                                Some(m) => Pb::Message(from_json(m.clone(), v)),
                                None => Pb::String(v.as_str().unwrap().into()),
                            };
                            (MapKey::String(k.clone()), val)
                        })
                        .collect(),
                )
            } else if fd.is_list() {
                Pb::List(v.as_array().unwrap().iter().map(one).collect())
            } else {
                one(v)
            };
            msg.set_field(&fd, pv);
        }
        msg
    }
}
