//! TOML errors described for people: the parser's own position, the full field path (tracked
//! by `serde_path_to_error` while deserializing, never guessed from the text), and the reason.

use serde::Deserialize;
use serde::de::DeserializeOwned;

/// TOML that could not be read as the type asked for: where, which field, and why.
#[derive(Debug, thiserror::Error)]
#[error("{described}")]
pub struct TomlError {
    /// "line L, column C: field `a.b[0].c`: reason" (see [`describe`]).
    described: String,
    /// The parser's or the deserializer's error (boxed: it is large, and every manifest
    /// error carries this one's size).
    #[source]
    source: Box<toml::de::Error>,
}

impl TomlError {
    fn new(source: toml::de::Error, text: &str, path: &str) -> Self {
        TomlError {
            described: describe(&source, text, path),
            source: Box::new(source),
        }
    }
}

/// Deserializes TOML text; an error reads "line L, column C: field `a.b[0].c`: reason", with
/// the position from the parser's span and the path of the field being read.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, TomlError> {
    let de = toml::Deserializer::parse(text).map_err(|e| TomlError::new(e, text, ""))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        TomlError::new(e.into_inner(), text, &path)
    })
}

/// A struct read from a TOML table only. serde's derive also takes a sequence for a struct,
/// field by field, so `limits = [1, 1]` would pass as both limits.
#[derive(Debug, Clone, PartialEq)]
pub struct Table<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Table<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Only<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Only<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a table")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(Only(std::marker::PhantomData)).map(Table)
    }
}

/// A struct field that must be a table (`#[serde(deserialize_with = "toml_error::table")]`).
pub fn table<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Table::deserialize(d).map(|t| t.0)
}

/// An array of tables (`[[name]]`), each of which must be a table.
pub fn tables<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Vec<T>, D::Error> {
    Vec::<Table<T>>::deserialize(d).map(|v| v.into_iter().map(|t| t.0).collect())
}

/// "line L, column C: field `path`: message" from a TOML error; the parts that are unknown
/// (no span, or an error outside any field) are left out.
pub fn describe(e: &toml::de::Error, text: &str, path: &str) -> String {
    let message = e.message().trim_end();
    // Type errors from serde already say "... for key `x`"; the path says it better.
    let message = message.split_once(" for key `").map_or(message, |(m, _)| m);
    let field = match path {
        "" | "." | "?" => String::new(),
        p => format!("field `{p}`: "),
    };
    match e.span() {
        Some(span) => {
            let start = span.start.min(text.len());
            let before = &text[..start];
            let line = before.matches('\n').count() + 1;
            let column = before[before.rfind('\n').map_or(0, |i| i + 1)..]
                .chars()
                .count()
                + 1;
            format!("line {line}, column {column}: {field}{message}")
        }
        None => format!("{field}{message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        inner: Vec<Inner>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        n: u32,
    }

    #[test]
    fn errors_name_position_and_full_path() {
        let err = from_str::<Outer>("[[inner]]\nn = 1\n[[inner]]\nn = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("line 4, column 5: field `inner[1].n`: invalid type"),
            "{err}"
        );
        let err = from_str::<Outer>("[[inner]]\nn = 1\nm = 2\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("line 3, column 1:") && err.contains("unknown field `m`"),
            "{err}"
        );
        let err = from_str::<Outer>("[[inner]\n").unwrap_err().to_string();
        assert!(err.starts_with("line 1, column"), "{err}");
    }
}
