//! What readers see of the loaded plugins, published after every change so they never wait
//! for a reconcile: running plugins with their figures, statuses for `/plugins`, what a
//! reconcile did.

use std::sync::Arc;

use crate::informer::{Access, Injector, ListenerGauges, SharedInformer, Store};
use crate::plugin::PluginError;
use crate::plugin::exec::admit::Admitter;
use crate::plugin::exec::gate::Gate;
use crate::plugin::exec::supervisor::{PluginState, Supervisor};
use crate::plugin::id::PluginId;
use crate::plugin::load::permitted::NotPermitted;
use crate::plugin::load::waiting::{Waiting, WaitingFor};

/// A running plugin: its supervisor (counters, state) and its queues' figures summed over the
/// informers it watches.
#[derive(Clone)]
pub struct RunningPlugin {
    /// Which plugin.
    pub id: PluginId,
    /// Its supervisor.
    pub supervisor: Arc<Supervisor>,
    /// Events offered to its queues, before coalescing.
    pub received: u64,
    /// Events queued and not yet handled.
    pub backlog: usize,
    /// Resources its wildcard watches cover now (0 without any).
    pub expanded: usize,
}

/// One plugin's status, for `/plugins` and logs.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PluginStatus {
    /// Name.
    pub name: String,
    /// Tenant (empty for the operator's).
    pub tenant: String,
    /// sha256 of the wasm.
    pub version: String,
    /// Running, backing off or quarantined.
    pub state: PluginState,
    /// Events handled.
    pub handled: u64,
    /// Events failed.
    pub failed: u64,
    /// Redeliveries scheduled because it answered `retry`.
    pub retried: u64,
    /// Events queued across its handlers.
    pub backlog: usize,
    /// The most recent failure.
    pub last_error: Option<String>,
    /// When it entered its state (RFC 3339): the version's start or its last change of state;
    /// for a waiting plugin, since when it waits.
    pub since: String,
    /// Why it, or for a running plugin its new version, is not loaded yet (retried until it is).
    pub waiting: Option<Waiting>,
    /// The resources its wildcard watches cover now (`apps/v1/Deployment`); empty without any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub expanded: Vec<String>,
    /// Resources its wildcard watches cover but RBAC does not let it list and watch, with why;
    /// not watched (re-checked on every re-discovery).
    #[serde(rename = "not-permitted", skip_serializing_if = "Vec::is_empty")]
    pub not_permitted: Vec<NotPermitted>,
    /// Why its files on disk were refused at the last reconcile (a link, a hard link, a quota,
    /// an invalid manifest...): for a running plugin its new version's, the running one keeps
    /// running.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// Its admission hooks (`[[admit]]` tables), for a running version that has any.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub admission: Vec<HookStatus>,
    /// The registry it is pulled from (`[[sources]]`), if it is.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub source: Option<SourceStatus>,
}

/// Where a plugin is pulled from, what was pulled last, and why the latest could not be.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SourceStatus {
    /// The reference in the config (a tag, or a digest).
    pub reference: String,
    /// The reference pinned to what was pulled last and written: `REGISTRY/REPO@sha256:…`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pinned: Option<String>,
    /// Who signed what was pulled, under the source's trust policy; none without one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub signer: Option<informant_oci::signature::Signer>,
    /// Why the last pull (or resolve) failed; what was pulled before stays.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
    /// When it was last checked (RFC 3339).
    pub checked: String,
}

/// One admission hook of a running plugin, for `/plugins`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct HookStatus {
    /// The table's name.
    pub name: String,
    /// `APIVERSION/KIND` admitted.
    pub kind: String,
    /// The operations admitted (`create`, ...).
    pub operations: Vec<String>,
    /// `validate` or `mutate`.
    pub mode: String,
    /// `fail` or `ignore`.
    pub failure_policy: String,
    /// The plugin's time per request, in milliseconds.
    pub timeout_ms: u32,
}

impl HookStatus {
    /// The status of each of `admitter`'s hooks.
    pub fn of(admitter: &Admitter) -> Vec<HookStatus> {
        use crate::manifest::admit::{FailurePolicy, Mode};
        admitter
            .hooks()
            .iter()
            .map(|h| HookStatus {
                name: h.table.name.to_string(),
                kind: format!("{}/{}", h.table.api_version.as_str(), h.table.kind),
                operations: h
                    .table
                    .operations
                    .iter()
                    .map(|o| o.as_str().to_string())
                    .collect(),
                mode: match h.table.mode {
                    Mode::Validate => "validate",
                    Mode::Mutate => "mutate",
                }
                .into(),
                failure_policy: match h.table.failure_policy {
                    FailurePolicy::Fail => "fail",
                    FailurePolicy::Ignore => "ignore",
                }
                .into(),
                timeout_ms: h.table.timeout_ms(),
            })
            .collect()
    }
}

/// What a reconcile did.
#[derive(Debug, Default)]
pub struct ReconcileReport {
    /// Plugins loaded for the first time.
    pub loaded: Vec<PluginId>,
    /// Plugins swapped to a new version.
    pub replaced: Vec<PluginId>,
    /// Plugins unregistered.
    pub removed: Vec<PluginId>,
    /// Plugins that could not be loaded (an older version may still run).
    pub errors: Vec<(PluginId, PluginError)>,
    /// Plugins refused for a reason that goes away by itself: waiting, and retried.
    pub waiting: Vec<(PluginId, PluginError)>,
    /// Set by [`PluginHost::retry_waiting`]: only these plugins were tried, so what this report
    /// does not say about the others still stands from earlier reports.
    pub only: Option<Vec<PluginId>>,
    /// Set by [`crate::config::ConfigWatcher`] when a changed `informant.toml` was refused (the
    /// previous config stays in force): the file, the key and the reason.
    pub config_error: Option<String>,
}

/// A running plugin as readers see it.
#[derive(Clone)]
pub(super) struct Running {
    pub(super) supervisor: Arc<Supervisor>,
    pub(super) queues: Vec<ListenerGauges>,
    pub(super) expanded: Vec<String>,
    /// Its informers (its selections' Namespace informers too), each with the resource name
    /// when a wildcard watch added it.
    pub(super) informers: Vec<(Arc<SharedInformer>, Option<String>)>,
    pub(super) not_permitted: Vec<NotPermitted>,
    pub(super) gate: Gate,
    /// Per informer it is registered with: the informer's id, its store, and its handler's
    /// queue (where a dead letter is re-driven).
    pub(super) queues_by_informer: Vec<(String, Arc<Store>, Injector)>,
}

impl Running {
    /// Why it waits although loaded: a kind it names (not one a wildcard found) the server
    /// refuses to list or watch.
    pub(super) fn forbidden(&self, version: &str) -> Option<Waiting> {
        self.informers
            .iter()
            .find_map(|(i, wildcard)| match i.access() {
                Access::Forbidden { reason, since } if wildcard.is_none() => Some(Waiting {
                    waiting_for: WaitingFor::Forbidden {
                        resource: i.description().to_string(),
                    },
                    reason: format!("forbidden: {reason}"),
                    version: version.to_string(),
                    attempts: u32::try_from(
                        i.stats()
                            .forbidden
                            .load(std::sync::atomic::Ordering::Relaxed),
                    )
                    .unwrap_or(u32::MAX),
                    since: k8s_openapi::jiff::Timestamp::try_from(since)
                        .map(|t| t.to_string())
                        .unwrap_or_default(),
                }),
                _ => None,
            })
    }

    /// What its wildcard watches may not watch: left out by the access review, or refused by
    /// the server when listed.
    pub(super) fn not_permitted(&self) -> Vec<NotPermitted> {
        let mut all = self.not_permitted.clone();
        for (i, name) in &self.informers {
            if let (Some(name), Access::Forbidden { reason, .. }) = (name, i.access()) {
                all.push(NotPermitted {
                    resource: name.clone(),
                    reason: format!("forbidden: {reason}"),
                });
            }
        }
        all.sort();
        all.dedup_by(|a, b| a.resource == b.resource);
        all
    }
}
