//! A registered plugin version, as the host holds it: what runs it, what it claimed and what it
//! was admitted under.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::informer::{InformerClaim, ListenerHandle};
use crate::plugin::dispatch::namespace_selector::NamespaceWatch;
use crate::plugin::exec::admit::Admitter;
use crate::plugin::exec::gate::Gate;
use crate::plugin::exec::supervisor::Supervisor;
use crate::plugin::load::host_config::{HostConfig, same_limits};
use crate::plugin::load::permitted::NotPermitted;
use crate::plugin::load::status::Running;
use crate::plugin::load::wildcard::WildcardWatches;
use crate::tenancy::TenantPolicy;

/// A registered plugin version: its supervisor, its informer claims with their handlers, and
/// what it was admitted under.
pub(super) struct Loaded {
    pub(super) supervisor: Arc<Supervisor>,
    pub(super) fingerprint: String,
    /// What its delivery cursors are valid for (see `prepare::delivery_scope`).
    pub(super) scope: String,
    pub(super) handles: Vec<(InformerClaim, ListenerHandle)>,
    /// What it was admitted under; a config reload that changes either re-admits it.
    pub(super) policy: Arc<TenantPolicy>,
    pub(super) config: Arc<HostConfig>,
    /// Field indexes its manifest declares.
    pub(super) field_indexes: usize,
    /// `[[schedule]]` tables its manifest declares.
    pub(super) schedules: usize,
    /// For each of `handles`: the wildcard watch (index) and the resource it serves there.
    pub(super) kinds: Vec<Option<(usize, String)>>,
    /// Set when its manifest has wildcard watches: what re-expanding them needs.
    pub(super) wildcard: Option<Arc<WildcardWatches>>,
    /// Kinds its wildcard watches cover that RBAC does not let it watch.
    pub(super) not_permitted: Vec<NotPermitted>,
    /// Open once its informers settled: its events flow.
    pub(super) gate: Gate,
    /// Opens `gate`; aborted when the version is unregistered first.
    pub(super) opening: tokio::task::JoinHandle<()>,
    /// Its `namespace-selector` watches' handlers on the Namespace informer.
    pub(super) selections: Vec<NamespaceWatch>,
    /// Its admission hooks, if it has any.
    pub(super) admitter: Option<Arc<Admitter>>,
}

impl Loaded {
    /// The resources its wildcard watches cover now, sorted, each once.
    pub(super) fn expanded(&self) -> Vec<String> {
        let set: BTreeSet<&String> = self.kinds.iter().flatten().map(|(_, n)| n).collect();
        set.into_iter().cloned().collect()
    }

    /// Whether this version was admitted under exactly `policy` and `config`'s limits.
    pub(super) fn admitted_under(&self, policy: &Arc<TenantPolicy>, config: &HostConfig) -> bool {
        Arc::ptr_eq(&self.policy, policy) && same_limits(&self.config, config)
    }

    /// What readers see of it.
    pub(super) fn published(&self) -> Running {
        // A selection's Namespace informer counts as one it watches: refused, the selection
        // knows nothing and the plugin waits for it like for a named kind.
        let informers = self
            .handles
            .iter()
            .zip(&self.kinds)
            .map(|((i, _), kind)| (i.informer().clone(), kind.as_ref().map(|(_, n)| n.clone())))
            .chain(
                self.selections
                    .iter()
                    .map(|s| (s.namespaces().clone(), None)),
            )
            .collect();
        Running {
            supervisor: self.supervisor.clone(),
            queues: self.handles.iter().map(|(_, h)| h.gauges()).collect(),
            expanded: self.expanded(),
            informers,
            not_permitted: self.not_permitted.clone(),
            gate: self.gate.clone(),
            queues_by_informer: self
                .handles
                .iter()
                .map(|(i, h)| (i.key().to_string(), i.store().clone(), h.injector()))
                .collect(),
        }
    }

    /// Stops a version: no new call starts, its in-flight call (bounded by its deadline) ends,
    /// then its informer claims are given back (an informer a replacement has already claimed
    /// keeps running).
    pub(super) async fn stop(self) {
        self.opening.abort();
        self.supervisor.close();
        drop(self.selections);
        let (informers, handles): (Vec<_>, Vec<_>) = self.handles.into_iter().unzip();
        futures::future::join_all(handles.into_iter().map(ListenerHandle::shutdown)).await;
        drop(informers);
    }
}
