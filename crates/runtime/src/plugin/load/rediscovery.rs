//! Re-expanding running versions' wildcard watches (see [`crate::plugin::load::wildcard`]) when
//! the served kinds may have changed, and the CRD watch that says when: what
//! [`PluginHost::rediscover`](crate::plugin::load::loader::PluginHost::rediscover) runs, and
//! [`crate::plugin::load::rediscover::Rediscoverer`] schedules.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use tokio::sync::{Mutex, watch};

use crate::informer::{
    Event, FnHandler, HandlerOptions, InformerClaim, InformerFactory, InformerKey, ListenerHandle,
    ResolvedResource, WatchScope,
};
use crate::plugin::bindings::WitResource;
use crate::plugin::id::PluginId;
use crate::plugin::imports::cluster::Cluster;
use crate::plugin::load::loaded::Loaded;
use crate::plugin::load::permitted;
use crate::plugin::load::prepare::Start;
use crate::plugin::load::register::{Cursors, register};
use crate::plugin::load::wildcard::{WildcardWatches, expand};

/// How a running plugin's wildcard watches changed in one re-discovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindChanges {
    /// Which plugin.
    pub plugin: PluginId,
    /// Resources it now also watches (`apps/v1/Deployment`).
    pub added: Vec<String>,
    /// Resources it no longer watches: each cached object was delivered as `Deleted`.
    pub removed: Vec<String>,
}

/// Keeps running versions' wildcard watches in line with the kinds served: the CRD watch that
/// says when they may have changed, and the re-expansion itself.
pub(super) struct Rediscovery {
    factory: Arc<InformerFactory>,
    /// The CRD informer's handler, registered while some plugin has a wildcard watch; it
    /// counts CRD changes on `crd_changes`.
    crd_watch: Mutex<Option<(InformerClaim, ListenerHandle)>>,
    crd_changes: watch::Sender<u64>,
    /// Counts finished re-discoveries, changed or not.
    rediscoveries: watch::Sender<u64>,
}

impl Rediscovery {
    /// Re-expansion against `factory`'s discovery, its informers claimed from it.
    pub(super) fn new(factory: Arc<InformerFactory>) -> Self {
        Rediscovery {
            factory,
            crd_watch: Mutex::new(None),
            crd_changes: watch::channel(0).0,
            rediscoveries: watch::channel(0).0,
        }
    }

    /// Follows how many re-discoveries have finished.
    pub(super) fn subscribe_rediscoveries(&self) -> watch::Receiver<u64> {
        self.rediscoveries.subscribe()
    }

    /// Follows changes to the cluster's CRDs (a count, bumped per change) while some running
    /// plugin has a wildcard watch.
    pub(super) fn subscribe_crd_changes(&self) -> watch::Receiver<u64> {
        self.crd_changes.subscribe()
    }

    /// A re-discovery is over, its changes published.
    pub(super) fn finished(&self) {
        self.rediscoveries.send_modify(|n| *n = n.wrapping_add(1));
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

    /// Re-expands the wildcard watches of every version in `loaded` against a fresh discovery:
    /// informers are made, not yet started, for resources that appeared (registered with
    /// `cursors`), and a resource that went is retired — its handler gets `Deleted` for each
    /// object it still knew, then its informer claim is released. What changed, per plugin; `None` when no version has a
    /// wildcard watch. The caller publishes `loaded`, then calls
    /// [`start_new_informers`](Self::start_new_informers) and [`finished`](Self::finished).
    pub(super) async fn rediscover(
        &self,
        loaded: &mut BTreeMap<PluginId, Loaded>,
        cluster: &Cluster,
        cursors: Cursors<'_>,
    ) -> Result<Option<Vec<KindChanges>>, crate::informer::Error> {
        if !loaded.values().any(|l| l.wildcard.is_some()) {
            return Ok(None);
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
                let host = self.factory.client();
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
                    let added =
                        self.add_kind(id, l, (&wc, cursors), (index, w), (name, resolved), used);
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
        Ok(Some(out))
    }

    /// Starts watching `resolved` for a running version's wildcard watch `index`, in each of
    /// the watch's scopes; `false` when it could not (logged), e.g. the tenant's
    /// `max-informers` is reached.
    fn add_kind(
        &self,
        id: &PluginId,
        l: &mut Loaded,
        (wc, cursors): (&WildcardWatches, Cursors<'_>),
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
                (cursors, &l.scope),
                Start::default(),
            );
            l.handles.push((informer, h));
            l.kinds.push(Some((index, name.clone())));
            any = true;
        }
        any
    }

    /// Starts the informers [`rediscover`](Self::rediscover) made for resources that appeared;
    /// called once readers see them, so no plugin handles an event of a kind `/plugins` does not
    /// list yet.
    pub(super) fn start_new_informers(&self) {
        self.factory.start();
    }
}
