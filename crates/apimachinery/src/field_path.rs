//! JSON field paths (`spec.nodeName`, `metadata.annotations["example.com/team"]`): the one
//! parser and walker the informer's field indexes, plugin manifests and the SDK's test harness
//! share, so a path means the same everywhere.

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

/// A JSON field path such as `spec.nodeName` or `metadata.annotations["example.com/team"]`.
///
/// Arrays on the way are traversed element-wise, so `spec.containers.image` yields every
/// container's image. Strings, numbers and booleans become index values; objects, arrays at the
/// end and nulls yield nothing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldPath {
    segments: Vec<String>,
    text: String,
}

impl FieldPath {
    /// The path's segments.
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// Values of this path in an object held as JSON.
    pub fn values_in(&self, root: &Value) -> Vec<String> {
        let mut out = Vec::new();
        collect(root, &self.segments, &mut out);
        out
    }

    /// Values of the path's segments from `depth` on, found under `value` (the part of an
    /// object reached by the first `depth` segments).
    pub fn values_under(&self, value: &Value, depth: usize, out: &mut Vec<String>) {
        collect(value, self.segments.get(depth..).unwrap_or_default(), out);
    }
}

fn collect_map(map: &Map<String, Value>, segments: &[String], out: &mut Vec<String>) {
    if let Some((first, rest)) = segments.split_first()
        && let Some(v) = map.get(first)
    {
        collect(v, rest, out);
    }
}

fn collect(v: &Value, segments: &[String], out: &mut Vec<String>) {
    match (v, segments.split_first()) {
        (Value::Array(items), _) if !segments.is_empty() => {
            items.iter().for_each(|i| collect(i, segments, out))
        }
        (Value::Object(m), Some(_)) => collect_map(m, segments, out),
        (Value::String(s), None) => out.push(s.clone()),
        (Value::Number(n), None) => out.push(n.to_string()),
        (Value::Bool(b), None) => out.push(b.to_string()),
        (Value::Array(items), None) => items.iter().for_each(|i| collect(i, segments, out)),
        _ => {}
    }
}

/// Why text is not a field path; offsets are byte offsets into the path without its leading
/// `.`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldPathError {
    /// Two dots in a row, or a leading `..`.
    #[error("empty segment at offset {0}")]
    EmptySegment(usize),
    /// A `[` right after `]` that did not start a key.
    #[error("unexpected `[` at offset {0}")]
    UnexpectedBracket(usize),
    /// `[` not followed by a quote.
    #[error("expected a quoted key after `[` at offset {0}")]
    UnquotedKey(usize),
    /// A bracketed key without its closing quote and `]`.
    #[error("unterminated `[` at offset {0}")]
    Unterminated(usize),
    /// `[""]`.
    #[error("empty key in brackets at offset {0}")]
    EmptyKey(usize),
    /// Something other than `.` or `[` after `]`.
    #[error("expected `.` or `[` after `]` at offset {0}")]
    AfterBracket(usize),
    /// A character a segment may not hold.
    #[error("unexpected character `{found}` at offset {offset}")]
    UnexpectedChar {
        /// The character.
        found: char,
        /// Where it is.
        offset: usize,
    },
    /// No segment at all.
    #[error("the path is empty")]
    Empty,
    /// A trailing `.`.
    #[error("the path ends with `.`")]
    TrailingDot,
}

impl FromStr for FieldPath {
    type Err = FieldPathError;

    fn from_str(text: &str) -> Result<Self, FieldPathError> {
        let mut segments = Vec::new();
        let s = text.strip_prefix('.').unwrap_or(text);
        let mut chars = s.char_indices().peekable();
        let mut cur = String::new();
        let mut expect_segment = true;
        while let Some((i, c)) = chars.next() {
            match c {
                '.' => {
                    if expect_segment {
                        return Err(FieldPathError::EmptySegment(i));
                    }
                    segments.push(std::mem::take(&mut cur));
                    expect_segment = true;
                }
                '[' => {
                    if !cur.is_empty() {
                        segments.push(std::mem::take(&mut cur));
                    } else if !expect_segment && segments.is_empty() {
                        return Err(FieldPathError::UnexpectedBracket(i));
                    }
                    let quote = match chars.next() {
                        Some((_, q @ ('"' | '\''))) => q,
                        _ => return Err(FieldPathError::UnquotedKey(i)),
                    };
                    let mut key = String::new();
                    let mut closed = false;
                    for (_, c) in chars.by_ref() {
                        if c == quote {
                            closed = true;
                            break;
                        }
                        key.push(c);
                    }
                    if !closed || !matches!(chars.next(), Some((_, ']'))) {
                        return Err(FieldPathError::Unterminated(i));
                    }
                    if key.is_empty() {
                        return Err(FieldPathError::EmptyKey(i));
                    }
                    segments.push(key);
                    expect_segment = false;
                    if let Some((_, '.')) = chars.peek() {
                        chars.next();
                        expect_segment = true;
                    } else if chars.peek().is_some_and(|(_, c)| *c != '[') {
                        return Err(FieldPathError::AfterBracket(i));
                    }
                }
                c if c.is_alphanumeric() || matches!(c, '_' | '-' | '$') => {
                    cur.push(c);
                    expect_segment = false;
                }
                other => {
                    return Err(FieldPathError::UnexpectedChar {
                        found: other,
                        offset: i,
                    });
                }
            }
        }
        if !cur.is_empty() {
            segments.push(cur);
        } else if expect_segment {
            return Err(if segments.is_empty() {
                FieldPathError::Empty
            } else {
                FieldPathError::TrailingDot
            });
        }
        Ok(FieldPath {
            segments,
            text: text.to_string(),
        })
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(s: &str) -> FieldPath {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn field_paths_parse() {
        assert_eq!(path("spec.nodeName").segments(), ["spec", "nodeName"]);
        assert_eq!(path(".spec.nodeName").segments(), ["spec", "nodeName"]);
        assert_eq!(
            path(r#"metadata.annotations["example.com/team"]"#).segments(),
            ["metadata", "annotations", "example.com/team"]
        );
        assert_eq!(path("a['x.y'].b").segments(), ["a", "x.y", "b"]);
    }

    #[test]
    fn bad_field_paths_are_refused_with_a_reason() {
        for (bad, needle) in [
            ("", "empty"),
            ("spec..x", "empty segment"),
            ("spec.", "ends with"),
            ("spec[x]", "quoted key"),
            ("spec['x'", "unterminated"),
            ("spec['x']y", "expected `.`"),
            ("spec.a b", "unexpected character ` `"),
        ] {
            let err = bad.parse::<FieldPath>().unwrap_err().to_string();
            assert!(err.contains(needle), "{bad}: {err}");
        }
    }

    #[test]
    fn values_traverse_arrays_and_stringify_scalars() {
        let v = json!({"spec": {"containers": [{"image": "a"}, {"image": "b"}], "replicas": 3,
                       "paused": false, "tags": ["x", "y"], "none": null}});
        assert_eq!(path("spec.containers.image").values_in(&v), ["a", "b"]);
        assert_eq!(path("spec.replicas").values_in(&v), ["3"]);
        assert_eq!(path("spec.paused").values_in(&v), ["false"]);
        assert_eq!(path("spec.tags").values_in(&v), ["x", "y"]);
        assert!(path("spec.none").values_in(&v).is_empty());
        assert!(path("spec.missing.deeper").values_in(&v).is_empty());
        assert!(
            path("spec").values_in(&v).is_empty(),
            "objects are not index values"
        );
    }
}
