//! The reading side of [`PluginHost`]: what runs, waits and was refused, read from its
//! [`Registry`](crate::plugin::load::registry::Registry) in one go, never waiting for a
//! reconcile.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::{broadcast, watch};

use crate::informer::ListenerGauges;
use crate::plugin::exec::admit::Admitter;
use crate::plugin::exec::gate::Gate;
use crate::plugin::exec::supervisor::{PluginState, Supervisor};
use crate::plugin::id::PluginId;
use crate::plugin::imports::log::PluginLog;
use crate::plugin::load::loader::PluginHost;
use crate::plugin::load::registry::{Entry, Refusal};
use crate::plugin::load::status::{HookStatus, PluginStatus, Running, RunningPlugin, SourceStatus};
use crate::plugin::load::waiting::Waiting;
use crate::plugin::logbook::LogRing;

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
                s.pinned
                    .is_none()
                    .then_some((id, Refusal { reason, since }))
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
