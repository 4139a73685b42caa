//! A skeletal OpenAPI: the v3 index (`/openapi/v3`) and one document per group-version, and the
//! single v2 document (`/openapi/v2`, protobuf or JSON), each listing every resource's item path
//! with its PATCH/PUT operations and their query parameters.
//!
//! kubectl needs this for one reason: before `apply`/`create`/`replace` it checks whether the
//! server supports the `fieldValidation` query parameter (by looking for it on the PATCH
//! operation tagged with the object's group-version-kind): kubectl ≥ 1.29 in the v3 documents,
//! older ones in the v2 document. When it is supported, kubectl leaves
//! validation to the server and needs no schemas; when the OpenAPI is missing it fails with
//! "failed to download openapi". No schemas are published, so kubectl falls back to its compiled-in
//! types for strategic merge patches and to JSON merge patches for custom resources.

use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::{Value, json};

use prost_reflect::prost::encoding::{WireType, encode_key, encode_varint};

use super::resources::Registry;

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// One resource's item path (`.../{name}`), the one path each document describes per resource.
struct ItemPath {
    path: String,
    group: String,
    version: String,
    kind: String,
}

impl ItemPath {
    fn gvk(&self) -> Value {
        json!({"group": self.group, "version": self.version, "kind": self.kind})
    }
}

/// The query parameters listed on each operation; `fieldValidation` is the one kubectl checks.
fn params(action: &str) -> &'static [&'static str] {
    match action {
        "patch" => &["dryRun", "fieldManager", "fieldValidation", "force"],
        _ => &["dryRun", "fieldManager", "fieldValidation"],
    }
}

/// The described operations: PATCH is what kubectl inspects, PUT is listed for completeness.
const ACTIONS: [&str; 2] = ["patch", "put"];

fn item_paths(reg: &Registry, group: &str, version: &str) -> Vec<ItemPath> {
    let base = gv_path(group, version);
    reg.resources_in(group, version)
        .into_iter()
        // An access review has no item path: it is only ever POSTed to its collection.
        .filter(|res| !res.review)
        .map(|res| ItemPath {
            path: if res.namespaced {
                format!("/{base}/namespaces/{{namespace}}/{}/{{name}}", res.plural)
            } else {
                format!("/{base}/{}/{{name}}", res.plural)
            },
            group: group.to_string(),
            version: version.to_string(),
            kind: res.kind.clone(),
        })
        .collect()
}

/// JSON path items in either OpenAPI version, which differ only in how a parameter is typed.
fn json_paths(items: &[ItemPath], v3: bool) -> serde_json::Map<String, Value> {
    let mut paths = serde_json::Map::new();
    for item in items {
        let op = |action: &str| {
            let params: Vec<Value> = params(action)
                .iter()
                .map(|name| {
                    if v3 {
                        json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}})
                    } else {
                        json!({"name": name, "in": "query", "type": "string", "uniqueItems": true})
                    }
                })
                .collect();
            json!({
                "operationId": format!("{action}{}", item.kind),
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": item.gvk(),
                "parameters": params,
                "responses": {"200": {"description": "OK"}},
            })
        };
        let ops: serde_json::Map<String, Value> =
            ACTIONS.iter().map(|a| (a.to_string(), op(a))).collect();
        paths.insert(item.path.clone(), Value::Object(ops));
    }
    paths
}

/// The document for one group-version, or None if it is not served.
pub(crate) fn document(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let items = item_paths(reg, group, version);
    if items.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": TITLE, "version": VERSION},
        "paths": json_paths(&items, true),
        "components": {"schemas": {}},
    }))
}

const TITLE: &str = "Kubernetes";
const VERSION: &str = "v1.33.0";

fn all_item_paths(reg: &Registry) -> Vec<ItemPath> {
    reg.group_versions()
        .iter()
        .flat_map(|(g, v)| item_paths(reg, g, v))
        .collect()
}

/// `/openapi/v2` as JSON, for anyone who asks for it without protobuf (`kubectl get --raw`).
pub(crate) fn v2_json(reg: &Registry) -> Value {
    json!({
        "swagger": "2.0",
        "info": {"title": TITLE, "version": VERSION},
        "paths": json_paths(&all_item_paths(reg), false),
        "definitions": {},
    })
}

/// Builds one protobuf message field by field, for the one protobuf document we serve (whose
/// schema, gnostic's OpenAPIv2.proto, is not vendored). Nested messages are built by closures,
/// so their lengths are known before they are written.
#[derive(Default)]
struct Encoder {
    buf: Vec<u8>,
}

impl Encoder {
    /// A length-delimited field.
    fn bytes(&mut self, field: u32, b: &[u8]) -> &mut Self {
        encode_key(field, WireType::LengthDelimited, &mut self.buf);
        encode_varint(b.len() as u64, &mut self.buf);
        self.buf.extend_from_slice(b);
        self
    }

    fn string(&mut self, field: u32, s: &str) -> &mut Self {
        self.bytes(field, s.as_bytes())
    }

    /// A bool field; false is the proto3 default and so is not written.
    fn bool(&mut self, field: u32, v: bool) -> &mut Self {
        if v {
            encode_key(field, WireType::Varint, &mut self.buf);
            encode_varint(1, &mut self.buf);
        }
        self
    }

    /// An embedded message field, built by `build`.
    fn message(&mut self, field: u32, build: impl FnOnce(&mut Encoder)) -> &mut Self {
        let mut inner = Encoder::default();
        build(&mut inner);
        self.bytes(field, &inner.buf)
    }
}

/// `/openapi/v2` as a gnostic `openapi.v2.Document`, the only form kubectl < 1.29 accepts.
///
/// Those kubectls decide whether the server validates fields by finding the PATCH operation
/// whose `x-kubernetes-group-version-kind` extension matches the object and looking for a
/// `fieldValidation` query parameter on it; for kinds not listed (a CRD created moments ago)
/// they check Namespace and then confirm the CRD exists. Field numbers are gnostic's
/// OpenAPIv2.proto.
pub(crate) fn v2_protobuf(reg: &Registry) -> Vec<u8> {
    let items = all_item_paths(reg);
    let mut doc = Encoder::default();
    doc.string(1, "2.0") // Document.swagger
        .message(2, |info| {
            info.string(1, TITLE).string(2, VERSION);
        })
        .message(8, |paths| {
            for item in &items {
                // Paths.path: NamedPathItem { name, value: PathItem }
                paths.message(2, |named| {
                    named.string(1, &item.path).message(2, |path_item| {
                        // PathItem.put = 3, PathItem.patch = 8.
                        path_item
                            .message(3, |op| v2_operation(op, item, "put"))
                            .message(8, |op| v2_operation(op, item, "patch"));
                    });
                });
            }
        });
    doc.buf
}

/// One gnostic `Operation`.
fn v2_operation(op: &mut Encoder, item: &ItemPath, action: &str) {
    op.string(5, &format!("{action}{}", item.kind)); // operation_id
    for name in params(action) {
        // parameters: ParametersItem.parameter -> Parameter.non_body_parameter ->
        // NonBodyParameter.query_parameter_sub_schema.
        op.message(8, |pi| {
            pi.message(1, |p| {
                p.message(2, |nb| {
                    nb.message(3, |q| {
                        q.string(2, "query")
                            .string(4, name)
                            .string(6, "string")
                            .bool(20, true);
                    });
                });
            });
        });
    }
    // responses: Responses.response_code -> NamedResponseValue { "200", ResponseValue.response }.
    op.message(9, |r| {
        r.message(1, |named| {
            named.string(1, "200").message(2, |rv| {
                rv.message(1, |resp| {
                    resp.string(1, "OK");
                });
            });
        });
    });
    // vendor_extension: NamedAny { name, value: Any { yaml } }; JSON is valid YAML.
    let extensions = [
        ("x-kubernetes-action", Value::from(action).to_string()),
        ("x-kubernetes-group-version-kind", item.gvk().to_string()),
    ];
    for (name, yaml) in &extensions {
        op.message(13, |ext| {
            ext.string(1, name).message(2, |any| {
                any.string(2, yaml);
            });
        });
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use prost_reflect::prost::bytes::Buf;
    use prost_reflect::prost::encoding::{DecodeContext, decode_key, decode_varint, skip_field};

    /// The fields of a protobuf message: number, and the bytes of length-delimited ones.
    fn test_fields(mut buf: &[u8]) -> Vec<(u32, Option<&[u8]>)> {
        let mut out = Vec::new();
        while buf.has_remaining() {
            let (n, wire) = decode_key(&mut buf).unwrap();
            if wire == WireType::LengthDelimited {
                let len = decode_varint(&mut buf).unwrap() as usize;
                out.push((n, Some(&buf[..len])));
                buf = &buf[len..];
            } else {
                skip_field(wire, n, &mut buf, DecodeContext::default()).unwrap();
                out.push((n, None));
            }
        }
        out
    }

    /// The single length-delimited field `n` of `buf`, or every one of them.
    fn all(buf: &[u8], n: u32) -> Vec<&[u8]> {
        test_fields(buf)
            .into_iter()
            .filter_map(|(f, b)| (f == n).then_some(b).flatten())
            .collect()
    }

    fn one(buf: &[u8], n: u32) -> &[u8] {
        let found = all(buf, n);
        assert_eq!(found.len(), 1, "field {n}");
        found[0]
    }

    /// Walks the protobuf document the way kubectl 1.27's QueryParamVerifier does.
    #[test]
    fn v2_protobuf_lists_field_validation_on_each_patch() {
        let doc = v2_protobuf(&Registry::builtin());
        assert_eq!(one(&doc, 1), b"2.0");
        let mut found = Vec::new();
        for named in all(one(&doc, 8), 2) {
            let path = std::str::from_utf8(one(named, 1)).unwrap();
            let patch = one(one(named, 2), 8);
            let gvk = all(patch, 13)
                .into_iter()
                .find(|ext| one(ext, 1) == b"x-kubernetes-group-version-kind")
                .map(|ext| serde_json::from_slice::<Value>(one(one(ext, 2), 2)).unwrap())
                .unwrap();
            let params: Vec<&[u8]> = all(patch, 8)
                .into_iter()
                .map(|item| one(one(one(one(item, 1), 2), 3), 4))
                .collect();
            assert!(params.contains(&&b"fieldValidation"[..]), "{path}");
            found.push((path.to_string(), gvk));
        }
        assert!(found.contains(&(
            "/api/v1/namespaces/{name}".into(),
            json!({"group": "", "version": "v1", "kind": "Namespace"})
        )));
        assert!(found.contains(&(
            "/apis/apps/v1/namespaces/{namespace}/deployments/{name}".into(),
            json!({"group": "apps", "version": "v1", "kind": "Deployment"})
        )));
    }

    #[test]
    fn v2_json_matches_v3_paths() {
        let reg = Registry::builtin();
        let v2 = v2_json(&reg);
        let v3 = document(&reg, "apps", "v1").unwrap();
        for (path, ops) in v3["paths"].as_object().unwrap() {
            assert_eq!(
                v2["paths"][path]["patch"]["x-kubernetes-group-version-kind"],
                ops["patch"]["x-kubernetes-group-version-kind"]
            );
        }
    }
}
