//! What readers see of the loaded plugins, published after every change so they never wait
//! for a reconcile: running plugins with their figures, statuses for `/plugins`, what a
//! reconcile did.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::{broadcast, watch};

use crate::informer::{Access, Injector, ListenerGauges, SharedInformer, Store};
use crate::plugin::PluginError;
use crate::plugin::exec::admit::Admitter;
use crate::plugin::exec::gate::Gate;
use crate::plugin::exec::supervisor::{PluginState, Supervisor};
use crate::plugin::id::PluginId;
use crate::plugin::imports::log::PluginLog;
use crate::plugin::load::loader::PluginHost;
use crate::plugin::load::permitted::NotPermitted;
use crate::plugin::load::registry::{Entry, Refusal};
use crate::plugin::load::waiting::{Waiting, WaitingFor};
use crate::plugin::logbook::LogRing;

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
    fn forbidden(&self, version: &str) -> Option<Waiting> {
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
    fn not_permitted(&self) -> Vec<NotPermitted> {
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

impl PluginHost {
    /// Records what `id`'s source last pulled, or why it could not ([`crate::sources`]).
    pub fn set_source_status(&self, id: &PluginId, status: SourceStatus) {
        self.registry.set_source(id, status);
    }

    /// What `id`'s source last pulled, if it has one.
    pub fn source_status(&self, id: &PluginId) -> Option<SourceStatus> {
        self.registry.source(id)
    }

    /// Changes whenever what runs changes (a version registered or unregistered).
    pub fn subscribe_running(&self) -> watch::Receiver<u64> {
        self.registry.subscribe_published()
    }

    /// The plugins (or new versions of running plugins) waiting to load; never waits for a
    /// reconcile in progress.
    pub fn waiting(&self) -> Vec<(PluginId, Waiting)> {
        self.registry.waiting().into_iter().collect()
    }

    /// Follows how many plugins wait.
    pub fn subscribe_waiting(&self) -> watch::Receiver<usize> {
        self.registry.subscribe_waiting()
    }

    /// The admission hooks of the running version of `id`, if it has any; never waits for a
    /// reconcile in progress.
    pub fn admitter(&self, id: &PluginId) -> Option<Arc<Admitter>> {
        self.registry.admitter(id)
    }

    /// Every running version with admission hooks, by plugin.
    pub fn admitters(&self) -> Vec<(PluginId, Arc<Admitter>)> {
        self.registry
            .read()
            .iter()
            .filter_map(|(id, e)| Some((id.clone(), e.admitter()?.clone())))
            .collect()
    }

    /// The supervisor of a running plugin; never waits for a reconcile in progress.
    pub fn supervisor(&self, id: &PluginId) -> Option<Arc<Supervisor>> {
        let entries = self.registry.read();
        Some(entries.get(id)?.running()?.supervisor.clone())
    }

    /// Every line plugins log from now on.
    pub fn subscribe_logs(&self) -> broadcast::Receiver<PluginLog> {
        self.preparer.logs.subscribe()
    }

    /// The last lines of a plugin that is loaded or waiting, by exact tenant and name; `None`
    /// for any other. Never waits for a reconcile in progress.
    pub fn log_ring(&self, id: &PluginId) -> Option<Arc<LogRing>> {
        let known = self.registry.read().get(id).is_some_and(|e| e.is_known());
        known.then(|| self.preparer.logbook.ring(id))
    }

    /// Every running plugin with its supervisor and queue figures, read in one go; never waits
    /// for a reconcile in progress.
    pub fn running(&self) -> Vec<RunningPlugin> {
        running_plugins(&self.registry.read())
    }

    /// Running plugins whose events still wait for their informers (see
    /// [`crate::plugin::exec::gate`]), each with the informers not settled yet; never waits
    /// for a reconcile in progress.
    pub fn starting(&self) -> Vec<(PluginId, Vec<String>)> {
        self.registry
            .read()
            .iter()
            .filter_map(|(id, e)| Some((id, e.running()?)))
            .filter(|(_, r)| !r.gate.is_open())
            .map(|(id, r)| {
                let pending = r
                    .informers
                    .iter()
                    .filter(|(i, _)| !i.is_settled())
                    .map(|(i, _)| i.description().to_string())
                    .collect();
                (id.clone(), pending)
            })
            .collect()
    }

    /// Waits until the events of every plugin running now flow: its informers synced or
    /// refused, its replay queued (each within the sync wait at the latest).
    pub async fn wait_started(&self) {
        let gates: Vec<Gate> = self
            .registry
            .read()
            .values()
            .filter_map(|e| Some(e.running()?.gate.clone()))
            .collect();
        for mut gate in gates {
            gate.opened().await;
        }
    }

    /// The plugins (and directories, named `*`) whose files the last reconcile refused and
    /// that run no version, by tenant and name: what `/plugins` shows beside
    /// [`status`](Self::status). Never waits for a reconcile in progress.
    /// A source that never wrote its plugin (its pull or signature check failed) is refused
    /// too, for that reason: nothing else would say why it does not run.
    pub fn refused(&self) -> Vec<PluginStatus> {
        let entries = self.registry.read();
        let idle = entries.iter().filter(|(_, e)| !e.is_known());
        let refused = idle
            .clone()
            .filter_map(|(id, e)| Some((id, e.refusal()?.clone())));
        let unpulled = idle
            .filter(|(_, e)| e.refusal().is_none())
            .filter_map(|(id, e)| {
                let s = e.source()?;
                let reason = format!("not pulled: {}", s.error.as_ref()?);
                let since = s.checked.clone();
                s.pinned.is_none().then(|| (id, Refusal { reason, since }))
            });
        // The refusals first, then the sources never pulled, each by tenant and name.
        refused
            .collect::<Vec<_>>()
            .into_iter()
            .chain(unpulled.collect::<Vec<_>>())
            .map(|(id, r)| PluginStatus {
                name: id.name.clone(),
                tenant: id.tenant.clone(),
                version: String::new(),
                state: PluginState::Refused,
                handled: 0,
                failed: 0,
                retried: 0,
                backlog: 0,
                last_error: None,
                since: r.since,
                waiting: None,
                expanded: Vec::new(),
                not_permitted: Vec::new(),
                refused: Some(r.reason),
                admission: Vec::new(),
                source: entries.get(id).and_then(|e| e.source().cloned()),
            })
            .collect()
    }

    /// Status of every running or waiting plugin, by tenant and name (a running one whose new
    /// files were refused says why); never waits for a reconcile in progress.
    pub fn status(&self) -> Vec<PluginStatus> {
        let entries = self.registry.read().clone();
        let mut all: Vec<PluginStatus> = running_plugins(&entries)
            .into_iter()
            .map(|r| {
                let e = &entries[&r.id];
                let version = r.supervisor.version().to_string();
                let seen = e.running();
                let forbidden = seen.and_then(|s| s.forbidden(&version));
                let mut state = r.supervisor.state();
                if forbidden.is_some() && state == PluginState::Running {
                    state = PluginState::Waiting;
                }
                PluginStatus {
                    expanded: seen.map(|s| s.expanded.clone()).unwrap_or_default(),
                    not_permitted: seen.map(Running::not_permitted).unwrap_or_default(),
                    version,
                    state,
                    handled: r.supervisor.handled(),
                    failed: r.supervisor.failed(),
                    retried: r.supervisor.retried(),
                    backlog: r.backlog,
                    last_error: r.supervisor.last_error(),
                    since: match &forbidden {
                        Some(f) if state == PluginState::Waiting => f.since.clone(),
                        _ => r.supervisor.since().to_string(),
                    },
                    // A new version waiting says more than the running one's refused kind.
                    waiting: e.waiting().cloned().or(forbidden),
                    refused: e.refusal().map(|r| r.reason.clone()),
                    admission: e.admitter().map(|a| HookStatus::of(a)).unwrap_or_default(),
                    source: e.source().cloned(),
                    name: r.id.name,
                    tenant: r.id.tenant,
                }
            })
            .collect();
        let waiting = entries
            .iter()
            .filter(|(_, e)| e.running().is_none())
            .filter_map(|(id, e)| Some((id, e.waiting()?.clone(), e.source().cloned())));
        all.extend(waiting.map(|(id, w, source)| PluginStatus {
            source,
            name: id.name.clone(),
            tenant: id.tenant.clone(),
            version: w.version.clone(),
            state: PluginState::Waiting,
            handled: 0,
            failed: 0,
            retried: 0,
            backlog: 0,
            last_error: None,
            since: w.since.clone(),
            waiting: Some(w),
            expanded: Vec::new(),
            not_permitted: Vec::new(),
            refused: None,
            admission: Vec::new(),
        }));
        all.sort_by(|a, b| (&a.tenant, &a.name).cmp(&(&b.tenant, &b.name)));
        all
    }
}

/// The running plugins among `entries`, with their supervisors and queue figures.
fn running_plugins(entries: &BTreeMap<PluginId, Entry>) -> Vec<RunningPlugin> {
    entries
        .iter()
        .filter_map(|(id, e)| Some((id, e.running()?)))
        .map(|(id, r)| RunningPlugin {
            expanded: r.expanded.len(),
            id: id.clone(),
            supervisor: r.supervisor.clone(),
            received: r.queues.iter().map(ListenerGauges::received).sum(),
            backlog: r.queues.iter().map(ListenerGauges::backlog).sum(),
        })
        .collect()
}
