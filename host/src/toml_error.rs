//! TOML errors described for people: position, the full field path, and the reason.

/// "line L, column C: field `table.key`: message" from a TOML error, so the position and the
/// field are always named (toml's own message omits the field for type errors).
pub(crate) fn describe(e: &toml::de::Error, text: &str) -> String {
    let message = e.message().trim_end().to_string();
    let Some(span) = e.span() else {
        return message;
    };
    let start = span.start.min(text.len());
    let before = &text[..start];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    let key = text
        .lines()
        .nth(line - 1)
        .and_then(|l| l.split_once('='))
        .map(|(k, _)| k.trim().to_string());
    let table = before
        .lines()
        .rev()
        .skip(1)
        .find(|l| l.trim_start().starts_with('['))
        .map(|l| l.trim().trim_matches(['[', ']']).to_string());
    match (table, key) {
        (Some(t), Some(k)) => format!("line {line}, column {column}: field `{t}.{k}`: {message}"),
        (None, Some(k)) => format!("line {line}, column {column}: field `{k}`: {message}"),
        _ => format!("line {line}, column {column}: {message}"),
    }
}
