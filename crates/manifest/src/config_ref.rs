//! Secrets out of the plugins directory: a `[config]` string may name a value instead of
//! holding it, resolved by the host at load.
//!
//! Syntax (whole values only, so nothing is ever spliced into a larger string):
//! - `"${env:NAME}"`: the host's environment variable `NAME` (`[A-Za-z_][A-Za-z0-9_]*`);
//! - `"${file:/abs/path}"`: the contents of that file (absolute path; one trailing newline
//!   trimmed);
//! - `"$${..."`: the literal text `${...` (the first `$` removed); every other string is literal.
//!
//! A string holding `${env:` or `${file:` anywhere but at its start is refused, so a
//! half-written reference is never handed to a plugin as if it were the secret.

use std::path::{Component, Path, PathBuf};

/// What a `[config]` string names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigRef {
    /// `${env:NAME}`: a host environment variable.
    Env(String),
    /// `${file:/abs/path}`: a host file.
    File(PathBuf),
}

impl std::fmt::Display for ConfigRef {
    /// The reference as written: what messages name, never the value.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigRef::Env(name) => write!(f, "${{env:{name}}}"),
            ConfigRef::File(path) => write!(f, "${{file:{}}}", path.display()),
        }
    }
}

/// One `[config]` string, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigText {
    /// Plain text (escapes already undone).
    Literal(String),
    /// A reference the host resolves at load.
    Ref(ConfigRef),
}

/// Why a `[config]` string is neither a literal nor a reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigRefError {
    /// `${...` without its closing `}`.
    #[error(
        "`{0}` starts a reference but does not end with `}}` (write `$${{` for a literal `${{`)"
    )]
    Unclosed(String),
    /// `${...}` naming neither `env` nor `file`.
    #[error(
        "`{0}` is not a reference: expected `${{env:NAME}}` or `${{file:/absolute/path}}` (write `$${{` for a literal `${{`)"
    )]
    NotAReference(String),
    /// A reference inside a longer string.
    #[error("a `${{env:..}}` or `${{file:..}}` reference must be the whole value, not part of it")]
    NotWhole,
    /// `${env:NAME}` with a name no environment variable has.
    #[error("`${{env:{0}}}`: `{0}` is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)")]
    EnvName(String),
    /// `${file:path}` with a relative path.
    #[error("`${{file:{0}}}`: the path must be absolute")]
    RelativePath(String),
    /// `${file:path}` with a `..` in the path.
    #[error("`${{file:{0}}}`: the path must not contain `..`")]
    ParentDir(String),
}

/// Reads one `[config]` string; `Err` says why it is neither a literal nor a reference.
pub fn parse(s: &str) -> Result<ConfigText, ConfigRefError> {
    if let Some(rest) = s.strip_prefix("$${") {
        return Ok(ConfigText::Literal(format!("${{{rest}")));
    }
    if let Some(body) = s.strip_prefix("${") {
        let body = body
            .strip_suffix('}')
            .ok_or_else(|| ConfigRefError::Unclosed(s.to_string()))?;
        return match body.split_once(':') {
            Some(("env", name)) => {
                env_name(name).map(|()| ConfigText::Ref(ConfigRef::Env(name.into())))
            }
            Some(("file", path)) => file_path(path).map(|p| ConfigText::Ref(ConfigRef::File(p))),
            _ => Err(ConfigRefError::NotAReference(s.to_string())),
        };
    }
    if s.contains("${env:") || s.contains("${file:") {
        return Err(ConfigRefError::NotWhole);
    }
    Ok(ConfigText::Literal(s.into()))
}

fn env_name(name: &str) -> Result<(), ConfigRefError> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(ConfigRefError::EnvName(name.to_string()))
    }
}

fn file_path(path: &str) -> Result<PathBuf, ConfigRefError> {
    let p = Path::new(path);
    if !p.is_absolute() {
        return Err(ConfigRefError::RelativePath(path.to_string()));
    }
    if p.components().any(|c| c == Component::ParentDir) {
        return Err(ConfigRefError::ParentDir(path.to_string()));
    }
    Ok(p.to_path_buf())
}

/// Every string in `value` with its field path (`config.slack.url`, `config.urls[1]`).
pub(crate) fn strings<'a>(field: String, value: &'a toml::Value, out: &mut Vec<(String, &'a str)>) {
    match value {
        toml::Value::String(s) => out.push((field, s)),
        toml::Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                strings(format!("{field}[{i}]"), v, out);
            }
        }
        toml::Value::Table(t) => {
            for (k, v) in t {
                strings(format!("{field}.{k}"), v, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_literals_and_escapes() {
        assert_eq!(
            parse("${env:SLACK_URL}").unwrap(),
            ConfigText::Ref(ConfigRef::Env("SLACK_URL".into()))
        );
        assert_eq!(
            parse("${file:/etc/informant/secrets/slack}").unwrap(),
            ConfigText::Ref(ConfigRef::File("/etc/informant/secrets/slack".into()))
        );
        assert_eq!(
            parse("$${env:X}").unwrap(),
            ConfigText::Literal("${env:X}".into())
        );
        assert_eq!(
            parse("a $ b {}").unwrap(),
            ConfigText::Literal("a $ b {}".into())
        );
        for (bad, why) in [
            ("${env:}", "is not an environment variable name"),
            ("${env:1X}", "is not an environment variable name"),
            ("${env:A-B}", "is not an environment variable name"),
            ("${env:A}x", "does not end with `}`"),
            ("${file:relative/path}", "must be absolute"),
            ("${file:}", "must be absolute"),
            ("${file:/etc/../proc/self/environ}", "must not contain `..`"),
            ("${vault:x}", "is not a reference"),
            ("${}", "is not a reference"),
            ("Bearer ${env:TOKEN}", "must be the whole value"),
            ("${env:A", "does not end"),
        ] {
            let err = parse(bad).unwrap_err().to_string();
            assert!(err.contains(why), "`{bad}` -> `{err}` lacks `{why}`");
        }
    }
}
