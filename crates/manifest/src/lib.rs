//! Plugin manifests (`NAME.toml` beside `NAME.wasm`): what a plugin watches, its limits, its config.
//!
//! The one parser the host's loader, `informant check`, `replay` and the Rust SDK's native test
//! harness share, so a manifest the host loads is one a plugin's unit tests accept, and the
//! other way round.
//!
//! Validated while deserializing: unknown fields are refused, selectors and index paths are
//! parsed, so every error names the file, the field (with TOML line and column) and the reason.
//!
//! Every key, its default and what it does: the book's manifest reference,
//! `docs/src/manifest.md` (a test holds its table equal to the fields parsed here). Limits
//! above the host's or the tenant's ceilings are refused at admission, never clamped.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

pub use informant_apimachinery::{FieldPath, LabelSelector};

pub mod admit;
mod config;
pub mod config_ref;
mod error;
pub mod jq;
pub mod keys;
pub mod outbound;
pub mod schedule;
mod text;
pub mod toml_error;
pub mod version;
mod watch;
pub mod wildcard;
pub mod write;

pub use admit::Admit;
pub use config::{Unresolved, UnresolvedConfig};
pub use config_ref::{ConfigRef, ConfigText};
pub use error::{ApiVersionError, FieldPathTextError, JqFilterTextError, ManifestError};
pub use outbound::Origin;
pub use schedule::{CronPattern, Every, Schedule, ScheduleName, When};
pub use text::{ApiVersion, FieldPathText, JqFilterText, SelectorText};
pub use watch::Watch;
pub use wildcard::{Exclude, KindPattern};
pub use write::{Verb, Write};

use config::config_table;
// `write` names these as `crate::namespace` and `crate::namespace_list`.
use text::{namespace, namespace_list};
use watch::check_wildcard;

#[cfg(any(test, feature = "proptest"))]
#[doc(hidden)]
pub mod mutate;
#[cfg(test)]
mod proptests;

/// Index names the host builds in for every resource; a manifest cannot declare them.
pub const BUILTIN_INDEXES: [&str; 3] = ["namespace", "label", "owner"];

/// Limits a plugin asks for; a value above the host's or its tenant's ceiling refuses the plugin.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Limits {
    /// Linear memory cap in MiB.
    pub memory_mib: Option<u32>,
    /// Per-event deadline in milliseconds.
    pub deadline_ms: Option<u32>,
}

/// How a plugin's `retry` answers are redelivered (`[retry]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Retry {
    /// Redeliveries of one object before its event counts as failed (0: never redeliver).
    pub max_attempts: Option<u32>,
    /// The first backoff in milliseconds; it doubles per attempt.
    pub initial_backoff_ms: Option<u32>,
    /// The longest backoff in milliseconds.
    pub max_backoff_ms: Option<u32>,
    /// Which failed events are kept as dead letters (with a state directory).
    pub dead_letter: Option<DeadLetters>,
}

/// Which of a plugin's failed events the host keeps as dead letters (`retry.dead-letter`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeadLetters {
    /// Only events whose `retry` answers ran past `max-attempts`.
    #[default]
    Exhausted,
    /// Every event that ends failed: retries run out, an error returned, a trap, a missed
    /// deadline.
    Failed,
}

/// A plugin's manifest.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Manifest {
    /// The format version: 1, the default; any other is refused.
    #[serde(default)]
    pub manifest_version: version::FormatVersion,
    /// One line about the plugin.
    pub description: Option<String>,
    /// Re-deliver the cache as `resync` events this often (seconds; 0 = never).
    pub resync_seconds: Option<u64>,
    /// Limits.
    #[serde(default, deserialize_with = "toml_error::table")]
    pub limits: Limits,
    /// How `retry` answers are redelivered.
    #[serde(default, deserialize_with = "toml_error::table")]
    pub retry: Retry,
    /// Origins the plugin may send HTTP requests to (`scheme://host[:port]`); none when absent.
    #[serde(default)]
    pub allowed_outbound_hosts: Vec<Origin>,
    /// What to watch; may be empty only when the plugin admits.
    #[serde(default, deserialize_with = "toml_error::tables")]
    pub watch: Vec<Watch>,
    /// What the plugin may write; nothing when absent.
    #[serde(default, deserialize_with = "toml_error::tables")]
    pub write: Vec<Write>,
    /// Named ticks delivered to `handle-schedule`; none when absent.
    #[serde(default, deserialize_with = "toml_error::tables")]
    pub schedule: Vec<Schedule>,
    /// API requests the plugin validates or mutates; none when absent.
    #[serde(default, deserialize_with = "toml_error::tables")]
    pub admit: Vec<Admit>,
    /// Handed to `init` as JSON.
    #[serde(default, deserialize_with = "config_table")]
    pub config: toml::Table,
    /// Only read to refuse it with a reason better than "unknown field".
    #[serde(default, rename = "tenant")]
    tenant_claim: Option<toml::Value>,
}

impl Manifest {
    /// Parses manifest text; `path` is only for messages.
    pub fn parse(text: &str, path: &Path) -> Result<Manifest, ManifestError> {
        let invalid = |message: String| ManifestError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let mut manifest: Manifest =
            toml_error::from_str(text).map_err(|source| ManifestError::Toml {
                path: path.to_path_buf(),
                source,
            })?;
        if manifest.tenant_claim.is_some() {
            return Err(invalid(
                "field `tenant`: a plugin's tenant is the directory it sits in, never its \
                 manifest; remove the field"
                    .into(),
            ));
        }
        if manifest.watch.is_empty() && manifest.admit.is_empty() {
            return Err(invalid(
                "field `watch`: at least one [[watch]] (or [[admit]]) table is required".into(),
            ));
        }
        for (i, w) in manifest.watch.iter_mut().enumerate() {
            if w.kind.is_empty() {
                return Err(invalid(format!(
                    "field `watch[{i}].kind`: must not be empty"
                )));
            }
            check_wildcard(i, w).map_err(|source| ManifestError::Wildcard {
                path: path.to_path_buf(),
                source: Box::new(source),
            })?;
            if w.namespace.is_some() && !w.namespaces.is_empty() {
                return Err(invalid(format!(
                    "field `watch[{i}].namespaces`: give either `namespace` or `namespaces`, not both"
                )));
            }
            if let Some(selector) = w.namespace_selector() {
                let reason = if w.namespace.is_some() || !w.namespaces.is_empty() {
                    Some("give either `namespace-selector` or namespaces by name, not both")
                } else if w.is_wildcard() {
                    Some("not supported on a wildcard watch (`kind = \"*\"`); name the kind")
                } else if selector.trim().is_empty() {
                    Some("an empty selector would select every namespace; leave the key out")
                } else {
                    None
                };
                if let Some(reason) = reason {
                    return Err(invalid(format!(
                        "field `watch[{i}].namespace-selector`: {reason}"
                    )));
                }
            }
            if w.indexes.contains_key("") {
                return Err(invalid(format!(
                    "field `watch[{i}].indexes`: an index name must not be empty"
                )));
            }
            if let Some(name) = w
                .indexes
                .keys()
                .find(|n| BUILTIN_INDEXES.contains(&n.as_str()))
            {
                return Err(invalid(format!(
                    "field `watch[{i}].indexes.{name}`: `{name}` is a built-in index; choose another name"
                )));
            }
        }
        for (index, w) in manifest.write.iter().enumerate() {
            w.check(false).map_err(|source| ManifestError::Write {
                path: path.to_path_buf(),
                index,
                source: Box::new(source),
            })?;
        }
        schedule::check_all(&manifest.schedule).map_err(|(index, source)| {
            ManifestError::Schedule {
                path: path.to_path_buf(),
                index,
                source: Box::new(source),
            }
        })?;
        admit::check_all(&manifest.admit).map_err(|(index, source)| ManifestError::Admit {
            path: path.to_path_buf(),
            index,
            source: Box::new(source),
        })?;
        let mut strings = Vec::new();
        for (k, v) in &manifest.config {
            config_ref::strings(format!("config.{k}"), v, &mut strings);
        }
        for (field, s) in strings {
            config_ref::parse(s).map_err(|source| ManifestError::ConfigRef {
                path: path.to_path_buf(),
                field,
                source: Box::new(source),
            })?;
        }
        for (field, value) in [
            ("limits.memory-mib", manifest.limits.memory_mib),
            ("limits.deadline-ms", manifest.limits.deadline_ms),
            (
                "retry.initial-backoff-ms",
                manifest.retry.initial_backoff_ms,
            ),
            ("retry.max-backoff-ms", manifest.retry.max_backoff_ms),
        ] {
            if value == Some(0) {
                return Err(invalid(format!("field `{field}`: must be greater than 0")));
            }
        }
        Ok(manifest)
    }

    /// Reads and parses a manifest file.
    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// The resync period, if any.
    pub fn resync_period(&self) -> Option<Duration> {
        self.resync_seconds
            .filter(|s| *s > 0)
            .map(Duration::from_secs)
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod schedule_tests;
