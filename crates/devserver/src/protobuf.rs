//! Just enough of the Kubernetes protobuf encoding to accept what kubectl ≥ 1.32 sends as
//! protobuf: typed `kubectl create namespace|configmap|secret|serviceaccount`. Bodies carry the
//! `k8s\0` magic and a runtime.Unknown envelope; we decode the handful of message types involved
//! into JSON and refuse (415) anything with a field we do not know, rather than drop data.
//! Object responses are always JSON, which every client also accepts; the one protobuf response
//! is the OpenAPI v2 document, which kubectl < 1.29 accepts only as protobuf (see [`Encoder`]).

use base64::Engine;
use serde_json::{Map, Value, json};

use super::{Error, Result};

/// The protobuf content type.
pub(crate) const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

struct Reader<'a> {
    buf: &'a [u8],
}

fn malformed() -> Error {
    Error::BadRequest("malformed protobuf body".into())
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64> {
        let mut out = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self.buf.split_first().ok_or_else(malformed)?;
            self.buf = rest;
            out |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err(malformed())
    }

    fn next(&mut self) -> Result<Option<(u64, Wire<'a>)>> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let tag = self.varint()?;
        let wire = match tag & 7 {
            0 => Wire::Varint(self.varint()?),
            1 | 5 => {
                let n = if tag & 7 == 1 { 8 } else { 4 };
                self.buf = self.buf.get(n..).ok_or_else(malformed)?;
                Wire::Fixed
            }
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|_| malformed())?;
                let bytes = self.buf.get(..n).ok_or_else(malformed)?;
                self.buf = &self.buf[n..];
                Wire::Bytes(bytes)
            }
            _ => return Err(malformed()),
        };
        Ok(Some((tag >> 3, wire)))
    }
}

fn fields(buf: &[u8]) -> Result<Vec<(u64, Wire<'_>)>> {
    let mut r = Reader { buf };
    let mut out = Vec::new();
    while let Some(f) = r.next()? {
        out.push(f);
    }
    Ok(out)
}

fn string(b: &[u8]) -> Result<Value> {
    std::str::from_utf8(b)
        .map(|s| Value::String(s.into()))
        .map_err(|_| malformed())
}

/// A map<string, string|bytes> entry.
fn entry(b: &[u8], bytes_value: bool) -> Result<(String, Value)> {
    let mut key = String::new();
    let mut value = Value::String(String::new());
    for (n, w) in fields(b)? {
        match (n, w) {
            (1, Wire::Bytes(k)) => key = std::str::from_utf8(k).map_err(|_| malformed())?.into(),
            (2, Wire::Bytes(v)) if bytes_value => {
                value = base64::engine::general_purpose::STANDARD.encode(v).into();
            }
            (2, Wire::Bytes(v)) => value = string(v)?,
            _ => return Err(malformed()),
        }
    }
    Ok((key, value))
}

fn unsupported(kind: &str, field: u64) -> Error {
    Error::UnsupportedMediaType(format!(
        "application/json (protobuf field {field} of {kind} is not understood by this server)"
    ))
}

fn object_meta(b: &[u8]) -> Result<Value> {
    let mut m = Map::new();
    for (n, w) in fields(b)? {
        let key = match n {
            1 => "name",
            2 => "generateName",
            3 => "namespace",
            6 => "resourceVersion",
            // selfLink, uid, generation, creationTimestamp: server-owned, ignored on write.
            4 | 5 | 7 | 8 => continue,
            11 => "labels",
            12 => "annotations",
            14 => "finalizers",
            other => return Err(unsupported("ObjectMeta", other)),
        };
        match (n, w) {
            (11 | 12, Wire::Bytes(e)) => {
                let (k, v) = entry(e, false)?;
                m.entry(key).or_insert_with(|| json!({}))[k] = v;
            }
            (14, Wire::Bytes(s)) => {
                if let Some(list) = m.entry(key).or_insert_with(|| json!([])).as_array_mut() {
                    list.push(string(s)?);
                }
            }
            (_, Wire::Bytes(s)) => {
                m.insert(key.into(), string(s)?);
            }
            _ => return Err(malformed()),
        }
    }
    Ok(Value::Object(m))
}

/// Builds one protobuf message field by field. Nested messages are built by closures, so
/// their lengths are known before they are written.
#[derive(Default)]
pub(crate) struct Encoder {
    buf: Vec<u8>,
}

impl Encoder {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    /// A length-delimited field (wire type 2).
    pub(crate) fn bytes(&mut self, field: u32, b: &[u8]) -> &mut Self {
        self.varint(u64::from(field) << 3 | 2);
        self.varint(b.len() as u64);
        self.buf.extend_from_slice(b);
        self
    }

    /// A string field.
    pub(crate) fn string(&mut self, field: u32, s: &str) -> &mut Self {
        self.bytes(field, s.as_bytes())
    }

    /// A bool field; false is the proto3 default and so is not written.
    pub(crate) fn bool(&mut self, field: u32, v: bool) -> &mut Self {
        if v {
            self.varint(u64::from(field) << 3);
            self.varint(1);
        }
        self
    }

    /// An embedded message field, built by `build`.
    pub(crate) fn message(&mut self, field: u32, build: impl FnOnce(&mut Encoder)) -> &mut Self {
        let mut inner = Encoder::default();
        build(&mut inner);
        self.bytes(field, &inner.buf)
    }

    /// The encoded message.
    pub(crate) fn finish(self) -> Vec<u8> {
        self.buf
    }
}

/// Decodes a protobuf request body into the JSON object it stands for.
pub(crate) fn decode(body: &[u8]) -> Result<Value> {
    let envelope = body.strip_prefix(b"k8s\0").ok_or_else(malformed)?;
    let (mut api_version, mut kind, mut raw) = (Value::Null, String::new(), &[][..]);
    for (n, w) in fields(envelope)? {
        match (n, w) {
            (1, Wire::Bytes(tm)) => {
                for (n, w) in fields(tm)? {
                    match (n, w) {
                        (1, Wire::Bytes(s)) => api_version = string(s)?,
                        (2, Wire::Bytes(s)) => {
                            kind = std::str::from_utf8(s).map_err(|_| malformed())?.into()
                        }
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(r)) => raw = r,
            _ => {}
        }
    }
    let mut obj = json!({"apiVersion": api_version, "kind": kind});
    for (n, w) in fields(raw)? {
        let Wire::Bytes(b) = w else {
            match (kind.as_str(), n, w) {
                ("ConfigMap", 4, Wire::Varint(v)) | ("Secret", 5, Wire::Varint(v)) => {
                    obj["immutable"] = (v != 0).into();
                    continue;
                }
                _ => return Err(unsupported(&kind, n)),
            }
        };
        match (kind.as_str(), n) {
            (_, 1) => obj["metadata"] = object_meta(b)?,
            ("Namespace", 2) => {
                for (n, w) in fields(b)? {
                    match (n, w) {
                        (1, Wire::Bytes(f)) => {
                            if !obj["spec"]["finalizers"].is_array() {
                                obj["spec"] = json!({"finalizers": []});
                            }
                            if let Some(list) = obj["spec"]["finalizers"].as_array_mut() {
                                list.push(string(f)?);
                            }
                        }
                        (other, _) => return Err(unsupported("NamespaceSpec", other)),
                    }
                }
            }
            ("Namespace", 3) => {}
            ("ConfigMap", 2 | 3) | ("Secret", 2 | 4) => {
                let field = match (kind.as_str(), n) {
                    ("ConfigMap", 2) => "data",
                    ("ConfigMap", _) => "binaryData",
                    ("Secret", 2) => "data",
                    _ => "stringData",
                };
                let (k, v) = entry(b, field == "binaryData" || (kind == "Secret" && n == 2))?;
                if !obj[field].is_object() {
                    obj[field] = json!({});
                }
                obj[field][k] = v;
            }
            ("Secret", 3) => obj["type"] = string(b)?,
            _ => return Err(unsupported(&kind, n)),
        }
    }
    Ok(obj)
}

/// The fields of a protobuf message, for tests that check what we encode.
#[cfg(test)]
pub(crate) fn test_fields(buf: &[u8]) -> Vec<(u64, Option<&[u8]>)> {
    fields(buf)
        .unwrap()
        .into_iter()
        .map(|(n, w)| match w {
            Wire::Bytes(b) => (n, Some(b)),
            _ => (n, None),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoder_round_trips_through_the_reader() {
        let mut e = Encoder::default();
        e.string(1, "a")
            .bool(2, true)
            .bool(3, false)
            .message(300, |m| {
                m.string(1, &"x".repeat(200));
            });
        let buf = e.finish();
        let f = fields(&buf).unwrap();
        assert_eq!(f.len(), 3);
        assert!(matches!(f[0], (1, Wire::Bytes(b"a"))));
        assert!(matches!(f[1], (2, Wire::Varint(1))));
        let (300, Wire::Bytes(inner)) = &f[2] else {
            panic!("field 300 is a message")
        };
        assert!(matches!(fields(inner).unwrap()[..], [(1, Wire::Bytes(s))] if s.len() == 200));
    }

    #[test]
    fn decodes_kubectl_create_namespace() {
        // `kubectl create namespace demo` as sent by kubectl 1.33.
        let meta = [&[0x0a, 4][..], b"demo"].concat();
        let raw = [&[0x0a, meta.len() as u8][..], &meta, &[0x12, 0, 0x1a, 0]].concat();
        let tm = [&[0x0a, 2][..], b"v1", &[0x12, 9], b"Namespace"].concat();
        let env = [
            &b"k8s\0"[..],
            &[0x0a, tm.len() as u8],
            &tm,
            &[0x12, raw.len() as u8],
            &raw,
        ]
        .concat();
        assert_eq!(
            decode(&env).unwrap(),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}})
        );
    }
}
