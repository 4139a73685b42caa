//! Plugins that wait: refused at load for a reason that goes away by itself — a watched kind
//! not served yet (its CRD not installed yet), or an API server that did not answer discovery.
//!
//! Contract:
//! - A waiting plugin is not an error: it shows as `waiting` in `/plugins` (with why and how
//!   often it was tried), and [`crate::plugin::load::reload::Reloader`] retries it on a backoff and whenever
//!   the cluster's CRDs change (see [`crate::plugin::load::retry_waiting`]) until it loads, fails for good, or goes.
//! - A changed version of a running plugin can wait too; the running version keeps running
//!   meanwhile, as for any refused replacement.
//! - Its state is logged once per change of what it waits for, never once per retry.

use std::fmt;

use crate::plugin::PluginError;

/// What a waiting plugin waits for.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "for", rename_all = "kebab-case")]
pub enum WaitingFor {
    /// A kind it watches is not served: its CRD (or aggregated API) is not installed yet.
    Kind {
        /// As the manifest names it.
        api_version: String,
        /// As the manifest names it.
        kind: String,
    },
    /// The API server did not answer discovery: unreachable, overloaded or refusing us.
    ApiServer,
    /// The plugin is loaded, but the server refuses (403) to list or watch a kind it names:
    /// its informer asks again on a capped backoff, and the plugin's other kinds run.
    Forbidden {
        /// The informer, e.g. `v1 secrets in all namespaces`.
        resource: String,
    },
}

impl WaitingFor {
    /// What `error` waits for, when it is a refusal that may go away by itself.
    pub fn of(error: &PluginError) -> Option<WaitingFor> {
        match error {
            PluginError::Watch { source, .. } if !source.is_transient() => None,
            PluginError::Watch {
                source:
                    crate::informer::Error::UnknownResource {
                        api_version, kind, ..
                    },
                ..
            } => Some(WaitingFor::Kind {
                api_version: api_version.clone(),
                kind: kind.clone(),
            }),
            PluginError::Watch {
                source: crate::informer::Error::Discovery { .. },
                ..
            } => Some(WaitingFor::ApiServer),
            _ => None,
        }
    }
}

impl fmt::Display for WaitingFor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitingFor::Kind { api_version, kind } => {
                write!(f, "kind `{kind}` of `{api_version}` to be served")
            }
            WaitingFor::ApiServer => f.write_str("the API server to answer discovery"),
            WaitingFor::Forbidden { resource } => {
                write!(f, "permission to list and watch {resource}")
            }
        }
    }
}

/// A plugin version that waits, as `/plugins` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Waiting {
    /// What it waits for.
    #[serde(flatten)]
    pub waiting_for: WaitingFor,
    /// The last refusal, in full.
    pub reason: String,
    /// sha256 of the wasm that waits (for a running plugin, its new version).
    pub version: String,
    /// Load attempts so far in this wait.
    pub attempts: u32,
    /// When the wait began (RFC 3339).
    pub since: String,
}

impl Waiting {
    /// The state after another refused attempt: `before` is the wait so far, if any. Returns
    /// whether this is a change worth logging (a new wait, or waiting for something else).
    pub(crate) fn next(
        before: Option<&Waiting>,
        waiting_for: WaitingFor,
        error: &PluginError,
        version: String,
    ) -> (Waiting, bool) {
        let changed = before.is_none_or(|b| b.waiting_for != waiting_for);
        let waiting = Waiting {
            reason: error.to_string(),
            version,
            attempts: before.map_or(1, |b| b.attempts + 1),
            since: before.map_or_else(
                || k8s_openapi::jiff::Timestamp::now().to_string(),
                |b| b.since.clone(),
            ),
            waiting_for,
        };
        (waiting, changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch_error(source: crate::informer::Error) -> PluginError {
        PluginError::Watch {
            plugin: "p".into(),
            index: 0,
            source,
        }
    }

    fn not_served(kind: &str) -> PluginError {
        watch_error(crate::informer::Error::UnknownResource {
            api_version: "example.com/v1".into(),
            kind: kind.into(),
            reason: "group/version `example.com/v1` is not served".into(),
        })
    }

    #[test]
    fn only_kinds_not_served_yet_and_failed_discovery_wait() {
        assert_eq!(
            WaitingFor::of(&not_served("Widget")),
            Some(WaitingFor::Kind {
                api_version: "example.com/v1".into(),
                kind: "Widget".into()
            })
        );
        let unreachable = watch_error(crate::informer::Error::Discovery {
            api_version: "v1".into(),
            kind: "Pod".into(),
            source: Box::new(kube::Error::LinesCodecMaxLineLengthExceeded),
        });
        assert_eq!(WaitingFor::of(&unreachable), Some(WaitingFor::ApiServer));
        let typo = watch_error(crate::informer::Error::UnknownResource {
            api_version: "v1".into(),
            kind: "Pdo".into(),
            reason: "no such kind".into(),
        });
        assert_eq!(
            WaitingFor::of(&typo),
            None,
            "no CRD adds kinds to the core group"
        );
        let scoped = watch_error(crate::informer::Error::ClusterScoped {
            kind: "Node".into(),
            namespace: "a".into(),
        });
        assert_eq!(WaitingFor::of(&scoped), None);
        assert_eq!(
            WaitingFor::of(&PluginError::Engine {
                what: "x",
                source: "y".into(),
            }),
            None
        );
    }

    #[test]
    fn a_wait_is_worth_logging_when_it_begins_or_changes_not_when_it_lasts() {
        let e = not_served("Widget");
        let first = WaitingFor::of(&e).unwrap();
        let (w1, log1) = Waiting::next(None, first.clone(), &e, "v".into());
        let (w2, log2) = Waiting::next(Some(&w1), first, &e, "v".into());
        assert!(log1 && !log2);
        assert_eq!((w1.attempts, w2.attempts), (1, 2));
        assert_eq!(w1.since, w2.since);
        let (w3, log3) = Waiting::next(Some(&w2), WaitingFor::ApiServer, &e, "v".into());
        assert!(log3);
        assert_eq!(w3.attempts, 3);
    }
}
