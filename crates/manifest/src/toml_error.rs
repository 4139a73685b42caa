//! TOML errors described for people: the parser's own position, the full field path (tracked
//! by `serde_path_to_error` while deserializing, never guessed from the text), and the reason.

use serde::de::DeserializeOwned;

/// Deserializes TOML text; an error reads "line L, column C: field `a.b[0].c`: reason", with
/// the position from the parser's span and the path of the field being read.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    let de = toml::Deserializer::parse(text).map_err(|e| describe(&e, text, ""))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        describe(e.inner(), text, &path)
    })
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
        let err = from_str::<Outer>("[[inner]]\nn = 1\n[[inner]]\nn = \"x\"\n").unwrap_err();
        assert!(
            err.starts_with("line 4, column 5: field `inner[1].n`: invalid type"),
            "{err}"
        );
        let err = from_str::<Outer>("[[inner]]\nn = 1\nm = 2\n").unwrap_err();
        assert!(
            err.starts_with("line 3, column 1:") && err.contains("unknown field `m`"),
            "{err}"
        );
        let err = from_str::<Outer>("[[inner]\n").unwrap_err();
        assert!(err.starts_with("line 1, column"), "{err}");
    }
}
