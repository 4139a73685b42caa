//! What readers see of the loaded plugins, published after every change so they never wait
//! for a reconcile: running plugins with their figures, statuses for `/plugins`, what a
//! reconcile did.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::{broadcast, watch};

use crate::informer::ListenerGauges;
use crate::plugin::PluginError;
use crate::plugin::exec::supervisor::{PluginState, Supervisor};
use crate::plugin::imports::log::PluginLog;
use crate::plugin::load::id::PluginId;
use crate::plugin::load::loader::PluginHost;
use crate::plugin::load::waiting::Waiting;

use crate::plugin::load::loader::Loaded;

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
    /// Events queued across its handlers.
    pub backlog: usize,
    /// The most recent failure.
    pub last_error: Option<String>,
    /// Why it, or for a running plugin its new version, is not loaded yet (retried until it is).
    pub waiting: Option<Waiting>,
    /// The resources its wildcard watches cover now (`apps/v1/Deployment`); empty without any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub expanded: Vec<String>,
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
}

impl PluginHost {
    /// Makes `loaded` what readers see.
    pub(super) fn publish(&self, loaded: &BTreeMap<PluginId, Loaded>) {
        *self.running.write() = loaded
            .iter()
            .map(|(id, l)| {
                let queues = l.handles.iter().map(|(_, h)| h.gauges()).collect();
                let supervisor = l.supervisor.clone();
                let expanded = l.expanded();
                (
                    id.clone(),
                    Running {
                        supervisor,
                        queues,
                        expanded,
                    },
                )
            })
            .collect();
    }

    /// The plugins (or new versions of running plugins) waiting to load; never waits for a
    /// reconcile in progress.
    pub fn waiting(&self) -> Vec<(PluginId, Waiting)> {
        let waiting = self.waiting.read();
        waiting
            .iter()
            .map(|(id, w)| (id.clone(), w.clone()))
            .collect()
    }

    /// Follows how many plugins wait.
    pub fn subscribe_waiting(&self) -> watch::Receiver<usize> {
        self.waiting_count.subscribe()
    }

    /// The supervisor of a running plugin; never waits for a reconcile in progress.
    pub fn supervisor(&self, id: &PluginId) -> Option<Arc<Supervisor>> {
        self.running.read().get(id).map(|r| r.supervisor.clone())
    }

    /// Every line plugins log from now on.
    pub fn subscribe_logs(&self) -> broadcast::Receiver<PluginLog> {
        self.logs.subscribe()
    }

    /// Every running plugin with its supervisor and queue figures, read in one go; never waits
    /// for a reconcile in progress.
    pub fn running(&self) -> Vec<RunningPlugin> {
        self.running
            .read()
            .iter()
            .map(|(id, r)| RunningPlugin {
                expanded: r.expanded.len(),
                id: id.clone(),
                supervisor: r.supervisor.clone(),
                received: r.queues.iter().map(ListenerGauges::received).sum(),
                backlog: r.queues.iter().map(ListenerGauges::backlog).sum(),
            })
            .collect()
    }

    /// Status of every running or waiting plugin, by tenant and name; never waits for a
    /// reconcile in progress.
    pub fn status(&self) -> Vec<PluginStatus> {
        let mut waiting = self.waiting.read().clone();
        let mut expanded: BTreeMap<PluginId, Vec<String>> = self
            .running
            .read()
            .iter()
            .map(|(id, r)| (id.clone(), r.expanded.clone()))
            .collect();
        let mut all: Vec<PluginStatus> = self
            .running()
            .into_iter()
            .map(|r| PluginStatus {
                expanded: expanded.remove(&r.id).unwrap_or_default(),
                version: r.supervisor.version().to_string(),
                state: r.supervisor.state(),
                handled: r.supervisor.handled(),
                failed: r.supervisor.failed(),
                backlog: r.backlog,
                last_error: r.supervisor.last_error(),
                waiting: waiting.remove(&r.id),
                name: r.id.name,
                tenant: r.id.tenant,
            })
            .collect();
        all.extend(waiting.into_iter().map(|(id, w)| PluginStatus {
            name: id.name,
            tenant: id.tenant,
            version: w.version.clone(),
            state: PluginState::Waiting,
            handled: 0,
            failed: 0,
            backlog: 0,
            last_error: None,
            waiting: Some(w),
            expanded: Vec::new(),
        }));
        all.sort_by(|a, b| (&a.tenant, &a.name).cmp(&(&b.tenant, &b.name)));
        all
    }
}
