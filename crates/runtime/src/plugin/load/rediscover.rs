//! Re-expands wildcard watches (see [`crate::plugin::load::wildcard`]) when the served kinds may have
//! changed: on every change to the cluster's CustomResourceDefinitions (seen through the shared
//! CRD informer the host registers with while some plugin has a wildcard watch, debounced),
//! and on a period, which is what finds aggregated APIs (APIServices) coming and going.
//!
//! A small actor: its task ends when the [`Rediscoverer`] is dropped or the host is gone. The
//! re-expansion itself ([`PluginHost::rediscover`]) and the CRD watch behind it are here too.

use std::sync::Arc;
use std::time::Duration;

use crate::fswatch::DEBOUNCE;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use tokio::sync::watch;

use crate::informer::{
    ChangeFilter, Event, EventFilter, FnHandler, HandlerOptions, InformerKey, ResolvedResource,
    WatchScope,
};
use crate::manifest::Manifest;
use crate::plugin::bindings::WitResource;
use crate::plugin::id::PluginId;
use crate::plugin::imports::cache::CacheView;
use crate::plugin::load::permitted;
use crate::plugin::load::prepare::Start;
use crate::plugin::load::register::register;
use crate::plugin::load::wildcard::expand;

use crate::plugin::load::loaded::Loaded;
use crate::plugin::load::loader::PluginHost;

/// How often wildcard watches are re-expanded without a CRD change.
pub const PERIOD: Duration = Duration::from_secs(60);

/// The re-discovery loop of one [`PluginHost`]; stops when dropped.
pub struct Rediscoverer {
    task: tokio::task::JoinHandle<()>,
}

impl Rediscoverer {
    /// Starts following `host`'s CRD changes, re-expanding also every `period`.
    pub fn start(host: Arc<PluginHost>, period: Duration) -> Self {
        let mut crds = host.subscribe_crd_changes();
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await;
            loop {
                tokio::select! {
                    changed = crds.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        // A CRD applied with others (a chart, an operator's bundle) comes in a
                        // burst: one discovery for all of them.
                        loop {
                            match tokio::time::timeout(DEBOUNCE, crds.changed()).await {
                                Ok(Ok(())) => continue,
                                Ok(Err(_)) => return,
                                Err(_) => break,
                            }
                        }
                    }
                    _ = ticks.tick() => {}
                }
                if let Err(e) = host.rediscover().await {
                    tracing::warn!(error = %e, "re-discovery for wildcard watches failed; retried on the next CRD change or period");
                }
            }
        });
        Rediscoverer { task }
    }
}

impl Drop for Rediscoverer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What re-expanding a running version's wildcard watches needs: the same registration
/// options, change filters and cache view its load used.
pub(super) struct WildcardWatches {
    pub(super) manifest: Manifest,
    pub(super) cache: Arc<CacheView>,
    /// Per `[[watch]]`: its change filter, if any.
    pub(super) changes: Vec<Option<ChangeFilter>>,
    pub(super) resync: Option<Duration>,
    pub(super) filter: Option<EventFilter>,
}

/// How a running plugin's wildcard watches changed in one [`PluginHost::rediscover`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindChanges {
    /// Which plugin.
    pub plugin: PluginId,
    /// Resources it now also watches (`apps/v1/Deployment`).
    pub added: Vec<String>,
    /// Resources it no longer watches: each cached object was delivered as `Deleted`.
    pub removed: Vec<String>,
}

impl PluginHost {
    /// Follows how many re-discoveries have finished (their changes published in
    /// [`status`](Self::status)).
    pub fn subscribe_rediscoveries(&self) -> watch::Receiver<u64> {
        self.rediscoveries.subscribe()
    }

    /// Follows changes to the cluster's CRDs (a count, bumped per change) while some running
    /// plugin has a wildcard watch.
    pub fn subscribe_crd_changes(&self) -> watch::Receiver<u64> {
        self.crd_changes.subscribe()
    }

    /// Registers with the CRD informer while some loaded plugin has a wildcard watch, and only
    /// then. Initial events are not changes: the first expansion was made at load.
    pub(super) async fn sync_crd_watch(&self, loaded: &BTreeMap<PluginId, Loaded>) {
        let wanted = loaded.values().any(|l| l.wildcard.is_some());
        let mut slot = self.crd_watch.lock().await;
        if wanted && slot.is_none() {
            let crds = self
                .factory
                .informer(
                    "apiextensions.k8s.io/v1",
                    "CustomResourceDefinition",
                    WatchScope::default(),
                )
                .await;
            match crds {
                Ok(informer) => {
                    let tx = self.crd_changes.clone();
                    let h = informer.informer().add_handler(
                        "informant:wildcard-rediscovery",
                        FnHandler(move |e: Event| {
                            if !e.initial {
                                tx.send_modify(|n| *n = n.wrapping_add(1));
                            }
                        }),
                        HandlerOptions::default(),
                    );
                    self.factory.start();
                    *slot = Some((informer, h));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot watch CustomResourceDefinitions; wildcard watches follow new kinds on the periodic re-discovery only")
                }
            }
        } else if !wanted && let Some((informer, h)) = slot.take() {
            h.shutdown().await;
            drop(informer);
        }
    }

    /// Re-expands every running plugin's wildcard watches against a fresh discovery: informers
    /// start for resources that appeared, and a resource that went is retired — its handler
    /// gets `Deleted` for each object it still knew, then its informer claim is released.
    /// Serialised with reconciles. Returns what changed, per plugin.
    pub async fn rediscover(&self) -> Result<Vec<KindChanges>, crate::informer::Error> {
        let mut loaded = self.loaded.lock().await;
        if !loaded.values().any(|l| l.wildcard.is_some()) {
            return Ok(Vec::new());
        }
        let discovered = self.factory.discover_all().await?;
        // Informers per tenant, for `max-informers`: a tenant's new kinds beyond it are skipped.
        let mut per_tenant: HashMap<String, BTreeSet<InformerKey>> = HashMap::new();
        for (id, l) in loaded.iter() {
            per_tenant
                .entry(id.tenant.clone())
                .or_default()
                .extend(l.handles.iter().map(|(i, _)| i.key().clone()));
        }
        let mut out = Vec::new();
        for (id, l) in loaded.iter_mut() {
            let Some(wc) = l.wildcard.clone() else {
                continue;
            };
            let mut changes = KindChanges {
                plugin: id.clone(),
                added: Vec::new(),
                removed: Vec::new(),
            };
            let mut not_permitted = Vec::new();
            for (index, w) in wc.manifest.watch.iter().enumerate() {
                if !w.is_wildcard() {
                    continue;
                }
                let expanded = expand(w, &discovered, &l.policy.grant);
                let (host, cluster) = (self.factory.client(), &self.preparer.cluster);
                let (now, refused) =
                    permitted::for_watch(host, cluster, w, &l.policy, expanded).await;
                not_permitted.extend(refused);
                let had: BTreeSet<String> = l
                    .kinds
                    .iter()
                    .flatten()
                    .filter(|(i, _)| *i == index)
                    .map(|(_, n)| n.clone())
                    .collect();
                for name in had.iter().filter(|n| !now.contains_key(*n)) {
                    let this = Some((index, name.clone()));
                    let mut at = 0;
                    while at < l.handles.len() {
                        if l.kinds[at] != this {
                            at += 1;
                            continue;
                        }
                        let (informer, handle) = l.handles.remove(at);
                        l.kinds.remove(at);
                        handle.retire(informer.store()).await;
                        wc.cache.remove(informer.store());
                        drop(informer);
                    }
                    changes.removed.push(name.clone());
                }
                for (name, resolved) in now.iter().filter(|(n, _)| !had.contains(*n)) {
                    let used = per_tenant.entry(id.tenant.clone()).or_default();
                    let added = self.add_kind(id, l, &wc, (index, w), (name, resolved), used);
                    if added {
                        changes.added.push(name.clone());
                    }
                }
            }
            not_permitted.sort();
            not_permitted.dedup();
            permitted::report(id, &l.not_permitted, &not_permitted);
            l.not_permitted = not_permitted;
            if !changes.added.is_empty() || !changes.removed.is_empty() {
                id.span().in_scope(|| tracing::info!(added = ?changes.added, removed = ?changes.removed, "wildcard watch re-expanded"));
                out.push(changes);
            }
        }
        self.publish(&loaded);
        self.rediscoveries.send_modify(|n| *n = n.wrapping_add(1));
        Ok(out)
    }

    /// Starts watching `resolved` for a running version's wildcard watch `index`, in each of
    /// the watch's scopes; `false` when it could not (logged), e.g. the tenant's
    /// `max-informers` is reached.
    fn add_kind(
        &self,
        id: &PluginId,
        l: &mut Loaded,
        wc: &WildcardWatches,
        (index, w): (usize, &crate::manifest::Watch),
        (name, resolved): (&String, &ResolvedResource),
        used: &mut BTreeSet<InformerKey>,
    ) -> bool {
        let mut any = false;
        for scope in crate::plugin::watch_scopes(w) {
            let informer = match self.factory.informer_for(resolved, scope) {
                Ok(i) => i,
                Err(e) => {
                    id.span().in_scope(|| tracing::warn!(resource = %name, error = %e, "wildcard watch cannot watch a new resource"));
                    continue;
                }
            };
            if !used.contains(informer.key()) && used.len() >= l.policy.max_informers {
                id.span().in_scope(|| tracing::warn!(resource = %name, max_informers = l.policy.max_informers, "wildcard watch skips a new resource: the tenant's plugins use their maximum of informers (`max-informers` in informant.toml)"));
                continue;
            }
            used.insert(informer.key().clone());
            wc.cache
                .add_with_indexes(informer.store().clone(), w.field_indexes());
            let options = HandlerOptions {
                resync_period: wc.resync,
                filter: wc.filter.clone(),
                changes: wc.changes[index].clone(),
                cursor: None,
            };
            let resource = WitResource::from(&resolved.api_resource);
            let h = register(
                (id, &l.supervisor, &l.gate),
                &l.policy,
                &informer,
                resource,
                options,
                (self.cursors(), &l.scope),
                Start::default(),
            );
            l.handles.push((informer, h));
            l.kinds.push(Some((index, name.clone())));
            any = true;
        }
        self.factory.start();
        any
    }
}
