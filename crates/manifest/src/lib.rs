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
    /// What to watch.
    #[serde(deserialize_with = "toml_error::tables")]
    pub watch: Vec<Watch>,
    /// What the plugin may write; nothing when absent.
    #[serde(default, deserialize_with = "toml_error::tables")]
    pub write: Vec<Write>,
    /// Named ticks delivered to `handle-schedule`; none when absent.
    #[serde(default, deserialize_with = "toml_error::tables")]
    pub schedule: Vec<Schedule>,
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
        if manifest.watch.is_empty() {
            return Err(invalid(
                "field `watch`: at least one [[watch]] table is required".into(),
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
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Manifest, String> {
        Manifest::parse(text, Path::new("plugins/demo.toml")).map_err(|e| e.to_string())
    }

    const GOOD: &str = r#"
description = "demo"
resync-seconds = 30
[limits]
memory-mib = 16
deadline-ms = 50
[[watch]]
api-version = "apps/v1"
kind = "Deployment"
namespace = "default"
label-selector = "app in (web,db)"
[watch.indexes]
by-node = "spec.nodeName"
[config]
ignore-status = true
"#;

    const POD_WATCH: &str = "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n";

    #[test]
    fn manifest_version_1_is_read_and_the_default() {
        assert_eq!(
            parse(POD_WATCH).unwrap().manifest_version,
            version::FormatVersion
        );
        let m = parse(&format!("manifest-version = 1\n{POD_WATCH}")).unwrap();
        assert_eq!(m.manifest_version, version::FormatVersion);
    }

    #[test]
    fn other_manifest_versions_are_refused_naming_file_field_and_reason() {
        for (value, reason) in [
            ("2", "version 2 is not one this Informant reads"),
            ("-1", "version -1 is not one this Informant reads"),
            ("0", "version 0 is not one this Informant reads"),
            ("\"1\"", "must be the integer 1, not the string \"1\""),
            ("1.0", "expected the integer 1"),
        ] {
            let err = parse(&format!("manifest-version = {value}\n{POD_WATCH}")).unwrap_err();
            assert!(
                err.starts_with(
                    "manifest `plugins/demo.toml`: line 1, column 20: field `manifest-version`: "
                ) && err.contains(reason),
                "{value}: {err}"
            );
        }
    }

    /// The book's manifest reference lists every key the parser reads and no other, and its
    /// complete example is a manifest this parser accepts.
    #[test]
    fn the_books_manifest_reference_matches_the_parser() {
        const PAGE: &str = include_str!("../../../docs/src/manifest.md");
        let mut code = std::collections::BTreeSet::new();
        for key in keys::of::<Manifest>().unwrap() {
            let nested = match *key {
                // Read only to refuse it: not a key a manifest may have.
                "tenant" => continue,
                "limits" => keys::of::<Limits>(),
                "retry" => keys::of::<Retry>(),
                "watch" => keys::of::<Watch>(),
                "write" => keys::of::<Write>(),
                "schedule" => keys::of::<Schedule>(),
                _ => None,
            };
            code.insert(key.to_string());
            for field in nested.into_iter().flatten() {
                code.insert(format!("{key}.{field}"));
            }
        }
        let book: std::collections::BTreeSet<String> =
            keys::table_column(PAGE, "## Keys").into_iter().collect();
        let missing: Vec<_> = code.difference(&book).collect();
        let extra: Vec<_> = book.difference(&code).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "docs/src/manifest.md's `## Keys` table: rows missing for {missing:?}; rows for nothing the code has: {extra:?}"
        );
        let example = PAGE
            .split_once("## Example")
            .and_then(|(_, rest)| rest.split_once("```toml\n"))
            .and_then(|(_, rest)| rest.split_once("```"))
            .expect("a ```toml block under `## Example`")
            .0;
        parse(example).unwrap();
    }

    #[test]
    fn parses_a_full_manifest() {
        let m = parse(GOOD).unwrap();
        assert_eq!(m.resync_period(), Some(Duration::from_secs(30)));
        assert_eq!(m.limits.memory_mib, Some(16));
        assert_eq!(m.watch[0].api_version.split(), ("apps", "v1"));
        assert_eq!(m.watch[0].field_indexes().next().unwrap().0, "by-node");
        assert_eq!(m.config_json(), r#"{"ignore-status":true}"#);
    }

    #[test]
    fn a_watch_covers_its_namespaces() {
        let m = parse(
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespaces = [\"a\", \"b\"]\n[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace = \"c\"\n[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n",
        )
        .unwrap();
        assert_eq!(m.watch[0].scopes(), [Some("a"), Some("b")]);
        assert_eq!(m.watch[1].scopes(), [Some("c")]);
        assert_eq!(m.watch[2].scopes(), [None]);
    }

    #[test]
    fn a_wildcard_watch_covers_what_its_pattern_names_minus_excludes() {
        let m = parse(
            "[[watch]]\napi-version = \"*\"\nkind = \"*\"\nexclude = [\"v1/Event\", \"events.k8s.io/Event\"]\n[[watch]]\napi-version = \"example.com/*\"\nkind = \"*\"\n[[watch]]\napi-version = \"apps/v1\"\nkind = \"*\"\nnamespaces = [\"a\"]\n[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n",
        )
        .unwrap();
        let [all, group, gv, pod] = &m.watch[..] else {
            panic!()
        };
        assert!(all.covers("", "v1", "Pod", true));
        assert!(!all.covers("", "v1", "Event", true));
        assert!(!all.covers("events.k8s.io", "v1", "Event", true));
        assert!(!all.covers("apps", "v1beta1", "Deployment", false));
        assert!(group.covers("example.com", "v1", "Widget", true));
        assert!(!group.covers("other.io", "v1", "Widget", true));
        assert!(gv.covers("apps", "v1", "Deployment", false));
        assert!(!gv.covers("batch", "v1", "Job", true));
        assert!(!pod.is_wildcard() && !pod.covers("", "v1", "Pod", true));
        assert_eq!(pod.kind_pattern(), None);
    }

    #[test]
    fn config_references_are_resolved_and_escapes_undone() {
        let m = parse(
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n[config]\nplain = \"$${env:X}\"\nn = 1\n[config.slack]\nurl = \"${env:SLACK}\"\nkeys = [\"${file:/run/k}\"]\n",
        )
        .unwrap();
        let json = m
            .config_json_resolved(|r| Ok::<_, String>(format!("<{r}>")))
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"plain": "${env:X}", "n": 1,
                "slack": {"url": "<${env:SLACK}>", "keys": ["<${file:/run/k}>"]}})
        );
        let refused = m
            .config_json_resolved(|r| match r {
                ConfigRef::Env(_) => Err(format!("`{r}`: not set")),
                ConfigRef::File(_) => Ok(String::new()),
            })
            .unwrap_err();
        assert_eq!(
            (refused.field, refused.reason.to_string()),
            ("config.slack.url".into(), "`${env:SLACK}`: not set".into())
        );
    }

    #[test]
    fn config_dates_reach_the_plugin_as_text() {
        let m = parse(
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n[config]\nsince = 1979-05-27T07:32:00Z\nday = 1979-05-27\nnested = [{ at = 07:32:00 }]\n",
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&m.config_json()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"since": "1979-05-27T07:32:00Z", "day": "1979-05-27",
                "nested": [{"at": "07:32:00"}]})
        );
    }

    #[test]
    fn errors_name_file_field_and_position() {
        for (text, needles) in [
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\ncolour = \"red\"\n",
                &["plugins/demo.toml", "line 4", "unknown field `colour`"][..],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nlabel-selector = \"app in (web\"\n",
                &["line 4", "invalid label selector `app in (web`"],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace-selector = \"team in (a,b\"\n",
                &[
                    "plugins/demo.toml",
                    "line 4",
                    "namespace-selector",
                    "invalid label selector `team in (a,b`",
                ],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace-selector = \"team=a,=b\"\n",
                &["line 4", "namespace-selector", "invalid label selector"],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace-selector = \"team=a\"\nnamespace = \"a\"\n",
                &[
                    "field `watch[0].namespace-selector`",
                    "either `namespace-selector` or namespaces by name",
                ],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace-selector = \"team=a\"\nnamespaces = [\"a\"]\n",
                &["field `watch[0].namespace-selector`", "not both"],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"*\"\nnamespace-selector = \"team=a\"\n",
                &["field `watch[0].namespace-selector`", "wildcard"],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace-selector = \" \"\n",
                &["field `watch[0].namespace-selector`", "every namespace"],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace = \"\"\n",
                &[
                    "line 4",
                    "field `watch[0].namespace`",
                    "invalid namespace: `` is not a namespace name: it is empty",
                ],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace = \"Team_A\"\n",
                &[
                    "field `watch[0].namespace`",
                    "invalid namespace: `Team_A` is not a namespace name",
                ],
            ),
            (
                "[[watch]]\napi-version = \"a/b/c\"\nkind = \"Pod\"\n",
                &["line 2", "invalid api-version `a/b/c`"],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n[watch.indexes]\nx = \"spec..a\"\n",
                &["line 5", "invalid field path `spec..a`"],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n[watch.indexes]\nlabel = \"spec.a\"\n",
                &["watch[0].indexes", "built-in"],
            ),
            (
                "limits = [1, 1]\n[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n",
                &["line 1", "field `limits`", "expected a table"],
            ),
            (
                "watch = [[\"v1\", \"Pod\", \"default\", \"app=x\", {}]]\n",
                &["field `watch[0]`", "expected a table"],
            ),
            (
                "[limits]\nmemory-mib = -1\n[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n",
                &["line 2", "field `limits.memory-mib`", "expected u32"],
            ),
            (
                "[limits]\ndeadline-ms = 0\n[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n",
                &["limits.deadline-ms", "greater than 0"],
            ),
            (
                "tenant = \"b\"\n[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n",
                &["field `tenant`", "the directory it sits in"],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace = \"team-a-x/../team-b\"\n",
                &["field `watch[0].namespace`", "not a namespace name", "`/`"],
            ),
            (
                "config = 1979-05-27T07:32:00Z\n[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n",
                &["line 1", "field `config`", "datetime, expected a table"],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespaces = [\"a\", \"B\"]\n",
                &[
                    "line 4",
                    "field `watch[0].namespaces`",
                    "invalid namespace at [1]: `B` is not a namespace name",
                ],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespaces = [\"a\", \"b\", \"a\"]\n",
                &[
                    "line 4",
                    "field `watch[0].namespaces`",
                    "namespace `a` is listed twice",
                ],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespaces = []\n",
                &[
                    "line 4",
                    "field `watch[0].namespaces`",
                    "at least one namespace",
                ],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespaces = [\"a/../b\"]\n",
                &["field `watch[0].namespaces`", "not a namespace name"],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespaces = \"a\"\n",
                &[
                    "line 4",
                    "field `watch[0].namespaces`",
                    "expected a sequence",
                ],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace = \"a\"\nnamespaces = [\"b\"]\n",
                &[
                    "field `watch[0].namespaces`",
                    "either `namespace` or `namespaces`, not both",
                ],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n[config.slack]\nurl = \"${env:}\"\n",
                &[
                    "plugins/demo.toml",
                    "field `config.slack.url`",
                    "`${env:}`",
                    "not an environment variable name",
                ],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n[config]\nkeys = [\"ok\", \"${file:keys/a}\"]\n",
                &["field `config.keys[1]`", "must be absolute"],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\njq-filter = \"def f: f; f\"\n",
                &[
                    "plugins/demo.toml",
                    "line 4",
                    "field `watch[0].jq-filter`",
                    "invalid jq filter",
                    "`def` is not allowed",
                ],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\njq-filter = \".spec |\"\n",
                &[
                    "line 4",
                    "field `watch[0].jq-filter`",
                    "is not a jq program",
                ],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nignore = [\"status..x\"]\n",
                &["line 4", "field `watch[0].ignore[0]`", "invalid field path"],
            ),
            (
                "[[watch]]\napi-version = \"*\"\nkind = \"Pod\"\n",
                &[
                    "plugins/demo.toml",
                    "field `watch[0].kind`",
                    "api-version `*` is a wildcard, so kind must be `*`",
                ],
            ),
            (
                "[[watch]]\napi-version = \"example.com/*\"\nkind = \"Widget\"\n",
                &["field `watch[0].kind`", "so kind must be `*`"],
            ),
            (
                "[[watch]]\napi-version = \"*\"\nkind = \"Dep*\"\n",
                &[
                    "field `watch[0].kind`",
                    "partial wildcards are not supported",
                ],
            ),
            (
                "[[watch]]\napi-version = \"*/v1\"\nkind = \"*\"\n",
                &[
                    "line 2",
                    "field `watch[0].api-version`",
                    "invalid api-version `*/v1`",
                ],
            ),
            (
                "[[watch]]\napi-version = \"ex*.com/*\"\nkind = \"*\"\n",
                &["line 2", "invalid api-version `ex*.com/*`"],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nexclude = [\"v1/Event\"]\n",
                &["field `watch[0].exclude`", "only a wildcard watch"],
            ),
            (
                "[[watch]]\napi-version = \"*\"\nkind = \"*\"\nexclude = [\"v1/Event\", \"Lease\"]\n",
                &[
                    "line 4",
                    "field `watch[0].exclude[1]`",
                    "invalid exclude entry `Lease`",
                ],
            ),
            (
                "[[watch]]\napi-version = \"*\"\nkind = \"*\"\nexclude = [\"v1/Event\", \"v1/Event\"]\n",
                &["field `watch[0].exclude[1]`", "listed twice"],
            ),
            (
                "[[watch]]\napi-version = \"example.com/*\"\nkind = \"*\"\nexclude = [\"v1/Event\"]\n",
                &[
                    "field `watch[0].exclude[0]`",
                    "`v1/Event` is not covered by api-version `example.com/*`",
                ],
            ),
            (
                "[[watch]]\napi-version = \"apps/v1\"\nkind = \"*\"\nexclude = [\"apps/v1beta1/Deployment\"]\n",
                &[
                    "field `watch[0].exclude[0]`",
                    "not covered by api-version `apps/v1`",
                ],
            ),
            (
                "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n[[schedule]]\nname = \"a\"\nevery = \"1s\"\n[[schedule]]\nname = \"a\"\ncron = \"* * * * *\"\n",
                &[
                    "plugins/demo.toml",
                    "field `schedule[1].name`",
                    "schedule `a` is already declared by schedule[0]",
                ],
            ),
            ("description = \"x\"\n", &["missing field `watch`"]),
            ("watch = []\n", &["at least one [[watch]]"]),
            ("[[watch]\n", &["line 1"]),
        ] {
            let err = parse(text).unwrap_err();
            for n in needles {
                assert!(err.contains(n), "`{text}` -> `{err}` lacks `{n}`");
            }
        }
    }
}

#[cfg(test)]
mod schedule_tests {
    use super::*;

    const WATCH: &str = "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n";

    fn refusal(table: &str) -> String {
        let text = format!("{WATCH}[[schedule]]\n{table}");
        Manifest::parse(&text, Path::new("plugins/tick.toml"))
            .expect_err(table)
            .to_string()
    }

    #[test]
    fn schedules_are_read_with_their_timing() {
        let m = Manifest::parse(
            &format!(
                "{WATCH}[[schedule]]\nname = \"sweep\"\nevery = \"30s\"\n[[schedule]]\nname = \"summary\"\ncron = \"0 */6 * * *\"\n"
            ),
            Path::new("p.toml"),
        )
        .unwrap();
        assert_eq!(m.schedule[0].name.as_str(), "sweep");
        assert_eq!(m.schedule[0].when(), When::Every(Duration::from_secs(30)));
        assert!(matches!(m.schedule[1].when(), When::Cron(c) if c.as_str() == "0 */6 * * *"));
        assert!(parse_plain(WATCH).schedule.is_empty());
    }

    fn parse_plain(text: &str) -> Manifest {
        Manifest::parse(text, Path::new("p.toml")).unwrap()
    }

    /// Hostile `[[schedule]]` tables: every refusal names the file, the field (with its line
    /// where the value is at fault) and the reason.
    #[test]
    fn hostile_schedules_are_refused_naming_file_field_and_reason() {
        for (table, field, reason) in [
            (
                "name = \"a\"\ncron = \"\"\n",
                "schedule[0].cron",
                "it is empty",
            ),
            (
                "name = \"a\"\ncron = \"* * * * * * *\"\n",
                "schedule[0].cron",
                "7 fields; expected 5",
            ),
            (
                "name = \"a\"\ncron = \"0 0 1 1 * * 2030\"\n",
                "schedule[0].cron",
                "7 fields",
            ),
            (
                "name = \"a\"\ncron = \"61 * * * *\"\n",
                "schedule[0].cron",
                "the minute field `61`: number out of bounds",
            ),
            (
                "name = \"a\"\ncron = \"\u{0665} * * * *\"\n",
                "schedule[0].cron",
                "(U+0665) is not allowed",
            ),
            (
                "name = \"a\"\ncron = \"*/99999999999 * * * *\"\n",
                "schedule[0].cron",
                "the minute field `*/99999999999`: invalid step",
            ),
            (
                "name = \"a\"\ncron = \"* * * * *  \"\n",
                "schedule[0].cron",
                "remove the whitespace",
            ),
            (
                "name = \"a\"\nevery = \"0s\"\n",
                "schedule[0].every",
                "shorter than the shortest period, 1s",
            ),
            (
                "name = \"a\"\nevery = \"-1s\"\n",
                "schedule[0].every",
                "`-` where a number was expected",
            ),
            (
                "name = \"a\"\nevery = \"1ns\"\n",
                "schedule[0].every",
                "unknown unit `ns`",
            ),
            (
                "name = \"a\"\nevery = 30\n",
                "schedule[0].every",
                "expected a string",
            ),
            (
                "name = \"Tick_1\"\nevery = \"1s\"\n",
                "schedule[0].name",
                "is not a schedule name",
            ),
            (
                "name = \"\"\nevery = \"1s\"\n",
                "schedule[0].name",
                "it is empty",
            ),
            ("every = \"1s\"\n", "schedule[0]", "missing field `name`"),
            (
                "name = \"a\"\nevery = \"1s\"\nat = \"noon\"\n",
                "",
                "unknown field `at`",
            ),
        ] {
            let err = refusal(table);
            assert!(
                err.starts_with("manifest `plugins/tick.toml`: ")
                    && err.contains(&format!("field `{field}"))
                    && err.contains(reason),
                "`{table}` -> {err}"
            );
            let line = match field {
                "schedule[0].name" => Some("line 5"),
                "schedule[0].cron" | "schedule[0].every" => Some("line 6"),
                _ => None,
            };
            if let Some(line) = line {
                assert!(err.contains(line), "`{table}` -> {err}");
            }
        }
        // Whole-table rules, checked after deserializing: file, field and reason.
        for (table, field, reason) in [
            (
                "name = \"a\"\ncron = \"* * * * *\"\nevery = \"1s\"\n",
                "schedule[0].every",
                "either `cron` or `every`, not both",
            ),
            (
                "name = \"a\"\n",
                "schedule[0].cron",
                "needs `cron` (a pattern) or `every`",
            ),
        ] {
            let err = refusal(table);
            assert_eq!(
                err,
                format!("manifest `plugins/tick.toml`: field `{field}`: {}", {
                    let (_, rest) = err.split_once(": field `").unwrap();
                    rest.split_once("`: ").unwrap().1.to_string()
                }),
            );
            assert!(err.contains(reason), "{err}");
        }
    }
}
