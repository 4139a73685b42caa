//! The `[config]` table: read as TOML, handed to the plugin's `init` as JSON, with its
//! `${env:..}` and `${file:..}` references resolved by the caller.

use serde::Deserialize;

use crate::{ConfigRef, ConfigText, Manifest, config_ref};

/// `[config]` read as a value first: read as a table directly, a TOML datetime would pass as the
/// table `{"$__toml_private_datetime" = ...}` and reach the plugin's `init` as that.
pub(crate) fn config_table<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<toml::Table, D::Error> {
    match toml::Value::deserialize(d)? {
        toml::Value::Table(t) => Ok(t),
        other => Err(serde::de::Error::custom(format!(
            "invalid type: {}, expected a table",
            other.type_str()
        ))),
    }
}

impl Manifest {
    /// `config` as JSON text for `init`, as written: references left as their text, escapes
    /// not undone (the SDK's native harness, which has no host to resolve them). TOML dates
    /// and times become their RFC 3339 text.
    pub fn config_json(&self) -> String {
        let table = toml::Value::Table(self.config.clone());
        json_of(&table).to_string()
    }

    /// `config` as JSON text for `init`, each reference replaced by what `resolve` gives for it
    /// and escapes undone. `Err` names the field of the first reference `resolve` refuses, with
    /// `resolve`'s reason, which must name the reference, never a value.
    pub fn config_json_resolved<E>(
        &self,
        mut resolve: impl FnMut(&ConfigRef) -> Result<String, E>,
    ) -> Result<String, UnresolvedConfig<E>> {
        fn walk<E>(
            field: String,
            v: &toml::Value,
            resolve: &mut dyn FnMut(&ConfigRef) -> Result<String, E>,
        ) -> Result<serde_json::Value, UnresolvedConfig<E>> {
            use serde_json::Value as J;
            Ok(match v {
                toml::Value::String(s) => match config_ref::parse(s) {
                    Ok(ConfigText::Literal(text)) => J::String(text),
                    Ok(ConfigText::Ref(r)) => {
                        J::String(resolve(&r).map_err(|why| UnresolvedConfig {
                            field,
                            reason: Unresolved::Refused(why),
                        })?)
                    }
                    // Refused by `parse`, so not reached for a parsed manifest.
                    Err(why) => {
                        return Err(UnresolvedConfig {
                            field,
                            reason: Unresolved::Invalid(why),
                        });
                    }
                },
                toml::Value::Array(a) => J::Array(
                    a.iter()
                        .enumerate()
                        .map(|(i, v)| walk(format!("{field}[{i}]"), v, resolve))
                        .collect::<Result<_, _>>()?,
                ),
                toml::Value::Table(t) => J::Object(
                    t.iter()
                        .map(|(k, v)| {
                            let v = walk(format!("{field}.{k}"), v, resolve)?;
                            Ok::<_, UnresolvedConfig<E>>((k.clone(), v))
                        })
                        .collect::<Result<_, _>>()?,
                ),
                other => json_of(other),
            })
        }
        let table = toml::Value::Table(self.config.clone());
        Ok(walk("config".into(), &table, &mut resolve)?.to_string())
    }
}

/// A `[config]` reference [`Manifest::config_json_resolved`] could not resolve, and its field.
#[derive(Debug, thiserror::Error)]
#[error("field `{field}`: {reason}")]
pub struct UnresolvedConfig<E> {
    /// The reference's field (`config.slack.url`).
    pub field: String,
    /// Why it has no value.
    pub reason: Unresolved<E>,
}

/// Why a `[config]` reference has no value.
#[derive(Debug, thiserror::Error)]
pub enum Unresolved<E> {
    /// The resolver refused it, with its reason.
    #[error("{0}")]
    Refused(E),
    /// The string is not a reference (never for a parsed manifest).
    #[error(transparent)]
    Invalid(config_ref::ConfigRefError),
}

/// A TOML value as JSON. serde would write a datetime as an object with a private key
/// (`$__toml_private_datetime`); a plugin expects the text it wrote.
fn json_of(v: &toml::Value) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        toml::Value::String(s) => J::String(s.clone()),
        toml::Value::Integer(i) => J::from(*i),
        toml::Value::Float(f) => J::from(*f),
        toml::Value::Boolean(b) => J::Bool(*b),
        toml::Value::Datetime(d) => J::String(d.to_string()),
        toml::Value::Array(a) => J::Array(a.iter().map(json_of).collect()),
        toml::Value::Table(t) => {
            J::Object(t.iter().map(|(k, v)| (k.clone(), json_of(v))).collect())
        }
    }
}
