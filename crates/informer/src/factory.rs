//! The informer factory: one [`SharedInformer`] per (resource, namespace scope, label selector),
//! shared by every consumer that asks for the same thing (client-go's
//! `SharedInformerFactory`).
//!
//! Resources are named as users write them (`apps/v1`, `Deployment`) and resolved through the
//! server's discovery, so CRDs work like built-ins. Informers asked for after
//! [`start`](InformerFactory::start) start at once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::api::Api;
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{self, Scope};
use parking_lot::Mutex;

use super::reflector::{InitialList, ReflectorConfig};
use super::shared_informer::SharedInformer;
use super::store::StoreOptions;
use super::{Error, Result};
use informant_apimachinery::LabelSelector;

/// A resource as discovery resolved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedResource {
    /// Group, version, kind and plural.
    pub api_resource: ApiResource,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
}

/// A resource found by [`InformerFactory::discover_all`]: listable and watchable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredResource {
    /// The resource.
    pub resolved: ResolvedResource,
    /// Whether its version is its group's preferred one.
    pub preferred: bool,
}

/// Which slice of a resource an informer watches.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct WatchScope {
    /// Only this namespace (all namespaces when `None`).
    pub namespace: Option<String>,
    /// Only objects matching this label selector (server-side).
    pub label_selector: Option<String>,
}

/// Which shared informer: a resource within a namespace scope and label selector. Two claims
/// with equal keys hold the same informer.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InformerKey {
    group: String,
    version: String,
    plural: String,
    namespace: Option<String>,
    label_selector: Option<String>,
}

impl std::fmt::Display for InformerKey {
    /// A stable name for what the informer watches (`apps/v1/deployments`, `/v1/pods@ns`,
    /// `/v1/pods[app=x]`): what a persisted cache is kept under.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.group, self.version, self.plural)?;
        if let Some(ns) = &self.namespace {
            write!(f, "@{ns}")?;
        }
        if let Some(l) = &self.label_selector {
            write!(f, "[{l}]")?;
        }
        Ok(())
    }
}

/// Called with every informer the factory creates, before it starts.
pub type OnCreated = Arc<dyn Fn(&InformerKey, &Arc<SharedInformer>) + Send + Sync>;

/// Options every informer of a factory shares.
#[derive(Debug, Clone, Default)]
pub struct FactoryOptions {
    /// How initial lists are fetched.
    pub initial_list: InitialList,
    /// Store options (managedFields stripping); each informer's scope comes from discovery.
    pub store: StoreOptions,
    /// Page size for paginated lists.
    pub page_size: Option<u32>,
}

/// Creates, shares, starts and stops informers; an informer lives until every claim on it is
/// released.
pub struct InformerFactory {
    client: Client,
    options: FactoryOptions,
    /// Each informer with the number of claims on it (claims not yet dropped).
    informers: Arc<Claims>,
    discovered: Mutex<HashMap<GroupVersionKind, ResolvedResource>>,
    started: Mutex<bool>,
    on_created: Mutex<Option<OnCreated>>,
}

impl InformerFactory {
    /// A factory whose informers use `client`.
    pub fn new(client: Client, options: FactoryOptions) -> Self {
        InformerFactory {
            client,
            options,
            informers: Arc::new(Mutex::new(HashMap::new())),
            discovered: Mutex::new(HashMap::new()),
            started: Mutex::new(false),
            on_created: Mutex::new(None),
        }
    }

    /// Calls `f` with every informer created from now on, before it starts (to restore its
    /// cache from disk, say).
    pub fn on_created(&self, f: OnCreated) {
        *self.on_created.lock() = Some(f);
    }

    /// The client its informers use.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Resolves `apiVersion` + `kind` through discovery. Answers are cached per factory; failures
    /// never are, so a kind served later (a CRD installed, the API server back) resolves on the
    /// next call.
    pub async fn resolve(&self, api_version: &str, kind: &str) -> Result<ResolvedResource> {
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        if version.is_empty() || kind.is_empty() || group.contains('/') || version.contains('/') {
            return Err(Error::InvalidResource {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                reason: "expected apiVersion `GROUP/VERSION` (or `VERSION` for core) and a kind"
                    .into(),
            });
        }
        let gvk = GroupVersionKind::gvk(group, version, kind);
        if let Some(r) = self.discovered.lock().get(&gvk) {
            return Ok(r.clone());
        }
        let (api_resource, caps) =
            discovery::pinned_kind(&self.client, &gvk)
                .await
                .map_err(|e| match e {
                    kube::Error::Discovery(_) => Error::UnknownResource {
                        api_version: api_version.to_string(),
                        kind: kind.to_string(),
                        reason: e.to_string(),
                    },
                    kube::Error::Api(s) if s.code == 404 => Error::UnknownResource {
                        api_version: api_version.to_string(),
                        kind: kind.to_string(),
                        reason: format!("group/version `{api_version}` is not served"),
                    },
                    other => Error::Discovery {
                        api_version: api_version.to_string(),
                        kind: kind.to_string(),
                        source: Box::new(other),
                    },
                })?;
        let resolved = ResolvedResource {
            api_resource,
            namespaced: caps.scope == Scope::Namespaced,
        };
        self.discovered.lock().insert(gvk, resolved.clone());
        Ok(resolved)
    }

    /// Every resource the server serves with both `list` and `watch`, in every version (the
    /// preferred one flagged), subresources left out. Asks aggregated discovery first (two
    /// requests) and falls back to per-group discovery for servers without it. Never cached:
    /// callers ask again when the served kinds may have changed (a CRD came or went).
    pub async fn discover_all(&self) -> Result<Vec<DiscoveredResource>> {
        use kube::discovery::{Discovery, verbs};
        let failed = |source| Error::Discovery {
            api_version: "*".into(),
            kind: "*".into(),
            source: Box::new(source),
        };
        let discovery = match Discovery::new(self.client.clone()).run_aggregated().await {
            Ok(d) => d,
            Err(e) => {
                tracing::debug!(error = %e, "aggregated discovery failed; asking group by group");
                Discovery::new(self.client.clone())
                    .run()
                    .await
                    .map_err(failed)?
            }
        };
        let mut out = Vec::new();
        for group in discovery.groups() {
            let preferred = group.preferred_version_or_latest().to_string();
            for version in group.versions() {
                for (api_resource, caps) in group.versioned_resources(version) {
                    if !(caps.supports_operation(verbs::LIST)
                        && caps.supports_operation(verbs::WATCH))
                    {
                        continue;
                    }
                    out.push(DiscoveredResource {
                        resolved: ResolvedResource {
                            api_resource,
                            namespaced: caps.scope == Scope::Namespaced,
                        },
                        preferred: version == preferred,
                    });
                }
            }
        }
        Ok(out)
    }

    /// A claim on the shared informer for `apiVersion`/`kind` within `scope`, created on first
    /// use; it runs until the last claim on it is dropped.
    pub async fn informer(
        &self,
        api_version: &str,
        kind: &str,
        scope: WatchScope,
    ) -> Result<InformerClaim> {
        let resolved = self.resolve(api_version, kind).await?;
        self.informer_for(&resolved, scope)
    }

    /// A claim on the shared informer for an already resolved resource within `scope`.
    pub fn informer_for(
        &self,
        resolved: &ResolvedResource,
        scope: WatchScope,
    ) -> Result<InformerClaim> {
        let ar = &resolved.api_resource;
        if let (Some(ns), false) = (&scope.namespace, resolved.namespaced) {
            return Err(Error::ClusterScoped {
                kind: ar.kind.clone(),
                namespace: ns.clone(),
            });
        }
        // Normalise the selector so `a=1` and `a==1` share one informer.
        let label_selector = match &scope.label_selector {
            Some(s) => {
                let parsed = LabelSelector::parse(s)?;
                (!parsed.is_empty()).then(|| parsed.to_string())
            }
            None => None,
        };
        let key = InformerKey {
            group: ar.group.clone(),
            version: ar.version.clone(),
            plural: ar.plural.clone(),
            namespace: scope.namespace.clone(),
            label_selector: label_selector.clone(),
        };
        let mut informers = self.informers.lock();
        if let Some((i, claims)) = informers.get_mut(&key) {
            *claims += 1;
            let informer = i.clone();
            return Ok(self.claim(key, informer));
        }
        let api: Api<super::RawObject> = match &scope.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, ar),
            None => Api::all_with(self.client.clone(), ar),
        };
        let mut description = format!("{} {}", ar.api_version, ar.plural);
        if let Some(ns) = &scope.namespace {
            description.push_str(&format!(" in {ns}"));
        }
        if let Some(l) = &label_selector {
            description.push_str(&format!(" [{l}]"));
        }
        let config = ReflectorConfig {
            label_selector,
            field_selector: None,
            initial_list: self.options.initial_list,
            page_size: self.options.page_size,
        };
        let store = StoreOptions {
            namespaced: Some(resolved.namespaced),
            ..self.options.store.clone()
        };
        let informer = SharedInformer::new(api, ar.clone(), description, config, store);
        if let Some(f) = self.on_created.lock().clone() {
            f(&key, &informer);
        }
        if *self.started.lock() {
            informer.start();
        }
        informers.insert(key.clone(), (informer.clone(), 1));
        Ok(self.claim(key, informer))
    }

    /// The claim for one count already taken on `key`'s entry.
    fn claim(&self, key: InformerKey, informer: Arc<SharedInformer>) -> InformerClaim {
        InformerClaim {
            informer,
            key,
            claims: Arc::downgrade(&self.informers),
        }
    }

    /// Every informer created so far.
    pub fn informers(&self) -> Vec<Arc<SharedInformer>> {
        self.informers
            .lock()
            .values()
            .map(|(i, _)| i.clone())
            .collect()
    }

    /// Starts every informer, and any created later.
    pub fn start(&self) {
        *self.started.lock() = true;
        for i in self.informers() {
            i.start();
        }
    }

    /// Waits until every informer created so far has synced, or fails naming those that have not.
    pub async fn wait_for_sync(&self, timeout: Duration) -> Result<()> {
        wait_all_synced(&self.informers(), timeout).await
    }

    /// Stops every informer.
    pub fn stop(&self) {
        *self.started.lock() = false;
        for i in self.informers() {
            i.stop();
        }
    }
}

/// Informers by key, each with how many claims hold it.
type Claims = Mutex<HashMap<InformerKey, (Arc<SharedInformer>, usize)>>;

/// One consumer's hold on a shared informer, from [`InformerFactory::informer`] or
/// [`InformerFactory::informer_for`]. Dropping the last claim on an informer stops it and the
/// factory forgets it; a claim held by a consumer that has not registered its handlers yet (a
/// plugin version being swapped in) keeps the informer alive across the swap. Cloning takes
/// another claim.
#[derive(Debug)]
pub struct InformerClaim {
    informer: Arc<SharedInformer>,
    key: InformerKey,
    /// Weak: a claim outliving its factory holds only its informer.
    claims: std::sync::Weak<Claims>,
}

impl InformerClaim {
    /// The informer claimed.
    pub fn informer(&self) -> &Arc<SharedInformer> {
        &self.informer
    }

    /// Which shared informer this is: equal for claims on the same one.
    pub fn key(&self) -> &InformerKey {
        &self.key
    }

    /// Keeps the informer running for as long as its factory lives: this claim is never given
    /// back (what a process-long consumer such as `--watch` wants).
    pub fn keep(mut self) -> Arc<SharedInformer> {
        self.claims = std::sync::Weak::new();
        self.informer.clone()
    }
}

impl std::ops::Deref for InformerClaim {
    type Target = Arc<SharedInformer>;

    fn deref(&self) -> &Arc<SharedInformer> {
        &self.informer
    }
}

impl Clone for InformerClaim {
    fn clone(&self) -> Self {
        if let Some(claims) = self.claims.upgrade()
            && let Some((_, n)) = claims.lock().get_mut(&self.key)
        {
            *n += 1;
        }
        InformerClaim {
            informer: self.informer.clone(),
            key: self.key.clone(),
            claims: self.claims.clone(),
        }
    }
}

impl Drop for InformerClaim {
    fn drop(&mut self) {
        let Some(claims) = self.claims.upgrade() else {
            return;
        };
        let mut claims = claims.lock();
        let Some((informer, n)) = claims.get_mut(&self.key) else {
            return;
        };
        // The entry may be a newer informer under the same key only if this one was already
        // forgotten, which takes this claim's count: so it is this one.
        debug_assert!(Arc::ptr_eq(informer, &self.informer));
        *n -= 1;
        if *n == 0 {
            claims.remove(&self.key);
            self.informer.stop();
        }
    }
}

/// Waits until every one of `informers` has applied its first complete list, for at most
/// `timeout`; the error names those still waiting.
pub async fn wait_all_synced(informers: &[Arc<SharedInformer>], timeout: Duration) -> Result<()> {
    let all = futures::future::join_all(informers.iter().map(|i| i.wait_for_sync()));
    if tokio::time::timeout(timeout, all).await.is_ok() {
        return Ok(());
    }
    Err(sync_timeout(informers, timeout, SharedInformer::has_synced))
}

/// Waits until every one of `informers` has synced or been refused by the server (see
/// [`SharedInformer::wait_settled`]), for at most `timeout`; the error names the others.
pub async fn wait_all_settled(informers: &[Arc<SharedInformer>], timeout: Duration) -> Result<()> {
    let all = futures::future::join_all(informers.iter().map(|i| i.wait_settled()));
    if tokio::time::timeout(timeout, all).await.is_ok() {
        return Ok(());
    }
    Err(sync_timeout(informers, timeout, SharedInformer::is_settled))
}

/// The timeout naming the informers `done` says are not.
fn sync_timeout(
    informers: &[Arc<SharedInformer>],
    timeout: Duration,
    done: impl Fn(&SharedInformer) -> bool,
) -> Error {
    let pending: Vec<&str> = informers
        .iter()
        .filter(|i| !done(i))
        .map(|i| i.description())
        .collect();
    Error::SyncTimeout {
        timeout,
        pending: pending.join(", "),
    }
}
