//! Preparing one plugin version: parse, count, resolve, expand wildcards, admit, resolve secrets,
//! compile, claim informers and start it (with `init`), without registering it anywhere yet.
//! Admission ([`admission`]) is decided from the manifest and the resolved kinds alone, apart
//! from the effects around it, so its decisions are unit-tested.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;

use crate::durable::Resume;
use crate::informer::{
    ChangeFilter, DiscoveredResource, EventFilter, InformerClaim, InformerFactory,
    ResolvedResource, Restored,
};
use crate::manifest::{Manifest, ManifestError};
use crate::plugin::PluginError;
use crate::plugin::bindings::WitResource;
use crate::plugin::dispatch::change_filter::ChangeFilters;
use crate::plugin::dispatch::namespace_selector::NamespaceSelection;
use crate::plugin::exec::admit::{Admitter, DEFAULT_POOL};
use crate::plugin::exec::engine::PluginEngine;
use crate::plugin::exec::instance::{InstanceSpec, RetryPolicy};
use crate::plugin::exec::supervisor::Supervisor;
use crate::plugin::id::PluginId;
use crate::plugin::imports::cache::CacheView;
use crate::plugin::imports::cluster::Cluster;
use crate::plugin::imports::log::{LogRate, PluginLog};
use crate::plugin::imports::outbound::Outbound;
use crate::plugin::imports::write::{Declared, PluginWrites, TenantWrites};
use crate::plugin::load::acceptance::{
    Accepted, Facts, WatchFacts, accept, admission_export, describe, watch_count,
};
use crate::plugin::load::host_config::HostConfig;
use crate::plugin::load::permitted::{self, NotPermitted};
use crate::plugin::load::scan::Found;
use crate::plugin::load::wildcard::{WildcardWatches, expand};
use crate::plugin::logbook::LogBook;
use crate::plugin::metrics::{MetricTenants, PluginMetrics};
use crate::tenancy::TenantPolicy;

/// How long a plugin's events wait for its informers to sync (see
/// [`crate::plugin::exec::gate`]) before they are delivered anyway.
pub(super) const SYNC_WAIT: Duration = Duration::from_secs(30);

/// Takes a plugin version from its files to a started supervisor: what that needs from the
/// host (the engine, the informers, the plugins' shared outlets), and nothing of what runs.
pub(super) struct Preparer {
    pub(super) engine: Arc<PluginEngine>,
    pub(super) factory: Arc<InformerFactory>,
    /// Where plugins' writes go: the host's client, dry-run for every write when the host is
    /// (`--dry-run-writes`).
    pub(super) cluster: Cluster,
    pub(super) logs: broadcast::Sender<PluginLog>,
    /// Each plugin's last log lines, for `/logs`.
    pub(super) logbook: Arc<LogBook>,
    /// Change filters in use, shared by every watch naming the same one.
    pub(super) change_filters: ChangeFilters,
    /// Each tenant's plugin metric names and budget, shared by its plugins' versions.
    pub(super) metric_tenants: Arc<MetricTenants>,
}

impl Preparer {
    /// A preparer compiling with `engine` and claiming from `factory`, its plugins' writes
    /// going through the host's client and their lines to a channel of their own.
    pub(super) fn new(
        engine: Arc<PluginEngine>,
        factory: Arc<InformerFactory>,
        log_buffer: usize,
    ) -> Self {
        Preparer {
            engine,
            cluster: Cluster::new(factory.client().clone(), false),
            factory,
            logs: broadcast::channel(log_buffer.max(1)).0,
            logbook: Arc::default(),
            change_filters: ChangeFilters::default(),
            metric_tenants: Arc::default(),
        }
    }

    /// Loads and starts one plugin version without registering it anywhere yet: its manifest
    /// read, the kinds it names resolved, admitted (see [`admission`]), then compiled and
    /// started.
    pub(super) async fn prepare(
        &self,
        id: &PluginId,
        found: &Found,
        policy: &TenantPolicy,
        config: &HostConfig,
    ) -> Result<Prepared, PluginError> {
        let manifest = parse(id, &found.manifest, &found.manifest_bytes)?;
        watch_count(&manifest, config).map_err(|refusal| PluginError::Refused {
            plugin: id.to_string(),
            path: found.manifest.clone(),
            reason: refusal.to_string(),
        })?;
        let resolved = self.resolve(id, &found.manifest, &manifest, policy).await?;
        let Accepted {
            memory_mib,
            deadline_ms,
        } = admission(id, &found.manifest, &manifest, &resolved, policy, config)?;
        let Resolved {
            watches: resolved,
            writes: declared,
            admits: admitted_kinds,
            mut not_permitted,
        } = resolved;
        let config_json = crate::plugin::load::secrets::resolve_config(&manifest, &id.tenant)
            .map_err(|unresolved| PluginError::Refused {
                plugin: id.to_string(),
                path: found.manifest.clone(),
                reason: unresolved.to_string(),
            })?;
        let (engine, name) = (self.engine.clone(), id.to_string());
        let (wasm, bytes) = (found.wasm.clone(), found.wasm_bytes.clone());
        let component =
            tokio::task::spawn_blocking(move || engine.load_bytes(&name, &wasm, &bytes))
                .await
                .map_err(|e| PluginError::Engine {
                    what: "compiling the component",
                    source: e.into(),
                })??;
        admission_export(&manifest, &component).map_err(|missing| PluginError::Refused {
            plugin: id.to_string(),
            path: found.wasm.clone(),
            reason: missing.to_string(),
        })?;

        let grant = &policy.grant;
        let mut watches = Vec::new();
        let cache = Arc::new(CacheView::new(grant.clone()));
        let mut changes = Vec::new();
        let started = async {
            for ((index, w), resolved) in manifest.watch.iter().enumerate().zip(&resolved) {
                let watch_err = |source| PluginError::Watch {
                    plugin: id.to_string(),
                    index,
                    source,
                };
                let change_filter =
                    self.change_filters
                        .for_watch(w)
                        .map_err(|reason| PluginError::Refused {
                            plugin: id.to_string(),
                            path: found.manifest.clone(),
                            reason: format!("field `watch[{index}].jq-filter`: {reason}"),
                        })?;
                changes.push(change_filter.clone());
                for (name, resolved) in resolved {
                    for scope in crate::plugin::watch_scopes(w) {
                        let informer = self
                            .factory
                            .informer_for(resolved, scope)
                            .map_err(watch_err)?;
                        let selection = match w.namespace_selector() {
                            Some(text) => Some(
                                self.namespace_selection(text, grant, &informer)
                                    .await
                                    .map_err(watch_err)?,
                            ),
                            None => None,
                        };
                        cache.add_with_indexes(informer.store().clone(), w.field_indexes());
                        // Claimed from here on: a failure below releases it.
                        watches.push(Watched {
                            informer,
                            resource: WitResource::from(&resolved.api_resource),
                            changes: change_filter.clone(),
                            kind: name.clone().map(|n| (index, n)),
                            selection,
                            start: Start::default(),
                            prior_namespaces: None,
                        });
                    }
                }
            }
            let spec = InstanceSpec {
                name: id.name.as_str().into(),
                tenant: id.tenant.as_str().into(),
                component,
                config_json,
                memory_bytes: (memory_mib as usize) << 20,
                deadline: Duration::from_millis(deadline_ms as u64),
                cache: cache.clone(),
                logs: self.logs.clone(),
                text: config.text,
                log_rate: LogRate::new(config.text.log_lines_per_second),
                log_ring: Some(self.logbook.ring(id).writer()),
                retry: RetryPolicy::from_manifest(&manifest.retry),
                outbound: Arc::new(Outbound::new(
                    manifest.allowed_outbound_hosts.clone(),
                    u64::from(memory_mib) << 20,
                )),
                writer: Arc::new(PluginWrites::new(
                    Some(self.cluster.clone()),
                    declared,
                    (&id.name, &id.tenant),
                    TenantWrites {
                        grant: grant.clone(),
                        ceiling: policy.writes.clone(),
                        impersonate: policy.impersonate.clone(),
                        budget: policy.write_budget.clone(),
                    },
                )),
                metrics: Arc::new(PluginMetrics::new(
                    id.name.as_str().into(),
                    config.metrics,
                    self.metric_tenants.tenant(&id.tenant, policy.metrics),
                )),
            };
            let policy = config.restart.clone();
            let plugin = id.to_string();
            Supervisor::start(spec, policy)
                .await
                .map_err(|source| PluginError::Init { plugin, source })
        }
        .await;
        match started {
            Ok(supervisor) => Ok(Prepared {
                admitter: (!manifest.admit.is_empty())
                    .then(|| {
                        let hooks = manifest.admit.iter().cloned().zip(admitted_kinds).collect();
                        Admitter::new(&supervisor, hooks, policy.grant.clone(), DEFAULT_POOL)
                    })
                    .flatten(),
                supervisor,
                scope: delivery_scope(&manifest, &policy.grant),
                watches,
                resync: manifest.resync_period(),
                filter: grant.event_filter(),
                field_indexes: manifest.watch.iter().map(|w| w.indexes.len()).sum(),
                schedules: manifest.schedule.clone(),
                not_permitted: {
                    not_permitted.sort();
                    not_permitted.dedup();
                    not_permitted
                },
                wildcard: manifest.watch.iter().any(|w| w.is_wildcard()).then(|| {
                    Arc::new(WildcardWatches {
                        resync: manifest.resync_period(),
                        filter: grant.event_filter(),
                        cache,
                        changes,
                        manifest: manifest.clone(),
                    })
                }),
            }),
            // The claims taken go back with `watches`.
            Err(e) => Err(e),
        }
    }

    /// The kinds `manifest`'s watches (a wildcard's expanded, as far as RBAC permits), writes
    /// and admission hooks name, as the server serves them now.
    async fn resolve(
        &self,
        id: &PluginId,
        path: &Path,
        manifest: &Manifest,
        policy: &TenantPolicy,
    ) -> Result<Resolved, PluginError> {
        let mut resolved = Resolved::default();
        let mut discovered: Option<Vec<DiscoveredResource>> = None;
        for (index, w) in manifest.watch.iter().enumerate() {
            let watch_err = |source| PluginError::Watch {
                plugin: id.to_string(),
                index,
                source,
            };
            if w.is_wildcard() {
                let all = match &discovered {
                    Some(all) => all,
                    None => {
                        discovered.insert(self.factory.discover_all().await.map_err(watch_err)?)
                    }
                };
                let kinds = expand(w, all, &policy.grant);
                let (kinds, refused) =
                    permitted::for_watch(self.factory.client(), &self.cluster, w, policy, kinds)
                        .await;
                resolved.not_permitted.extend(refused);
                let kinds = kinds.into_iter().map(|(n, r)| (Some(n), r)).collect();
                resolved.watches.push(kinds);
                continue;
            }
            let r = self
                .factory
                .resolve(w.api_version.as_str(), &w.kind)
                .await
                .map_err(watch_err)?;
            resolved.watches.push(vec![(None, r)]);
        }
        // A write names a kind that must be served now: unlike a watch, nothing waits for it.
        for (index, w) in manifest.write.iter().enumerate() {
            let resource = self
                .factory
                .resolve(w.api_version.as_str(), &w.kind)
                .await
                .map_err(|e| PluginError::Refused {
                    plugin: id.to_string(),
                    path: path.to_path_buf(),
                    reason: format!("field `write[{index}]`: {e}"),
                })?;
            resolved.writes.push(Declared {
                write: w.clone(),
                resource,
            });
        }
        for (index, a) in manifest.admit.iter().enumerate() {
            let resource = self
                .factory
                .resolve(a.api_version.as_str(), &a.kind)
                .await
                .map_err(|e| PluginError::Refused {
                    plugin: id.to_string(),
                    path: path.to_path_buf(),
                    reason: format!("field `admit[{index}]`: {e}"),
                })?;
            resolved.admits.push(resource);
        }
        Ok(resolved)
    }

    /// The selection of `informer`'s objects by `selector` (a manifest's, checked already),
    /// within `grant`, with a claim on the Namespace informer it is to follow.
    async fn namespace_selection(
        &self,
        selector: &str,
        grant: &Arc<crate::tenancy::Grant>,
        informer: &InformerClaim,
    ) -> Result<(Arc<NamespaceSelection>, InformerClaim), crate::informer::Error> {
        let namespaces = self.factory.resolve("v1", "Namespace").await?;
        let claim = self
            .factory
            .informer_for(&namespaces, crate::informer::WatchScope::default())?;
        let selection =
            NamespaceSelection::new(selector, grant.clone(), informer.informer().clone())?;
        // The plugin's handler registers with the selection read from this informer's cache:
        // it must hold the namespaces by then, or the handler's replay (or the difference it
        // resumes with) would be filtered by an empty selection. Refused, it never will until
        // RBAC changes: the plugin then shows as waiting for it.
        let namespaces = claim.informer();
        namespaces.start();
        if tokio::time::timeout(SYNC_WAIT, namespaces.wait_settled())
            .await
            .is_err()
        {
            tracing::warn!(informer = %namespaces.description(), wait = ?SYNC_WAIT, "namespaces not listed in time: the namespace selection starts from what is cached and follows the rest as it comes");
        }
        Ok((selection, claim))
    }
}

/// `path`'s bytes as a manifest, for plugin `id`.
pub(super) fn parse(id: &PluginId, path: &Path, bytes: &[u8]) -> Result<Manifest, PluginError> {
    std::str::from_utf8(bytes)
        .map_err(|e| ManifestError::Invalid {
            path: path.to_path_buf(),
            message: format!("not UTF-8 text: {e}"),
        })
        .and_then(|text| Manifest::parse(text, path))
        .map_err(|source| PluginError::Manifest {
            plugin: id.to_string(),
            source,
        })
}

/// What a manifest's kinds resolved to on the server.
#[derive(Default)]
pub(super) struct Resolved {
    /// Per watch: (resource name for a wildcard's, resolved resource), one for a plain watch.
    pub(super) watches: Vec<Vec<(Option<String>, ResolvedResource)>>,
    /// Per `[[write]]`.
    pub(super) writes: Vec<Declared>,
    /// Per `[[admit]]`.
    pub(super) admits: Vec<ResolvedResource>,
    /// Kinds wildcard watches cover that RBAC does not let the plugin watch.
    pub(super) not_permitted: Vec<NotPermitted>,
}

/// What admission is told of `manifest`'s kinds: as resolved, except a wildcard watch's, whose
/// kinds are the grant's already (admission checks its namespaces).
pub(super) fn facts(manifest: &Manifest, resolved: &Resolved) -> Facts {
    let discovered = |r: &ResolvedResource| WatchFacts {
        group: r.api_resource.group.clone(),
        version: r.api_resource.version.clone(),
        kind: r.api_resource.kind.clone(),
        namespaced: Some(r.namespaced),
    };
    Facts {
        watch: manifest
            .watch
            .iter()
            .zip(&resolved.watches)
            .map(|(w, rs)| match rs.first() {
                Some((None, r)) => discovered(r),
                _ => WatchFacts {
                    group: w.api_version.as_str().into(),
                    version: "*".into(),
                    kind: "*".into(),
                    namespaced: None,
                },
            })
            .collect(),
        write: resolved
            .writes
            .iter()
            .map(|d| discovered(&d.resource))
            .collect(),
        admit: resolved.admits.iter().map(discovered).collect(),
    }
}

/// Whether `id`'s manifest (at `path`), its kinds `resolved`, fits its tenant's `policy` and
/// the host's limits, and with what memory and deadline: decided from data alone.
pub(super) fn admission(
    id: &PluginId,
    path: &Path,
    manifest: &Manifest,
    resolved: &Resolved,
    policy: &TenantPolicy,
    config: &HostConfig,
) -> Result<Accepted, PluginError> {
    accept(
        manifest,
        &id.tenant,
        policy,
        config,
        &facts(manifest, resolved),
    )
    .map_err(|refusals| PluginError::Refused {
        plugin: id.to_string(),
        path: path.to_path_buf(),
        reason: describe(&refusals),
    })
}

/// One informer a plugin version is to be registered with: one per namespace of a `[[watch]]`.
pub(super) struct Watched {
    pub(super) informer: InformerClaim,
    pub(super) resource: WitResource,
    /// The watch's `jq-filter` / `ignore`, if any.
    pub(super) changes: Option<ChangeFilter>,
    /// For a wildcard watch's resource: the watch (index) and the resource's name.
    pub(super) kind: Option<(usize, String)>,
    /// For a watch with a `namespace-selector`: the selection, and the Namespace informer it
    /// follows.
    pub(super) selection: Option<(Arc<NamespaceSelection>, InformerClaim)>,
    /// Taken over in a shard: where its handler starts.
    pub(super) start: Start,
    /// With a selection, taken over: the namespaces as they were at the cursor (listed at its
    /// resourceVersion, or restored from disk).
    pub(super) prior_namespaces: Option<Arc<Restored>>,
}

/// Where a handler taken over in a shard starts (see [`PluginHost::take_over`]); all `None`:
/// a replay of the whole cache.
#[derive(Default)]
pub(super) struct Start {
    /// The resource as the cursor saw it (listed at its resourceVersion): the handler gets the
    /// difference to the cache.
    pub(super) prior: Option<Arc<Restored>>,
    /// The cursor's resourceVersion: everything up to it was handled.
    pub(super) floor_version: Option<u64>,
    /// Resumed against the cache restored from disk instead: from this member's own stored
    /// cursor, or (with a skip) from a cursor ahead of the restored cache.
    pub(super) resume: Option<Resume>,
}

/// What a plugin's delivery cursor is valid for: its watches and its tenant's grant. A
/// cursor kept under another scope is not used (the plugin gets the whole cache again), while
/// a new build of the same plugin keeps its cursor.
fn delivery_scope(manifest: &Manifest, grant: &crate::tenancy::Grant) -> String {
    use sha2::Digest;
    let text = format!("{:?}\n{:?}", manifest.watch, grant);
    let digest = sha2::Sha256::digest(text.as_bytes());
    digest[..12].iter().map(|b| format!("{b:02x}")).collect()
}

/// A loaded, initialised plugin version, not yet receiving events.
pub(super) struct Prepared {
    pub(super) supervisor: Arc<Supervisor>,
    /// Its admission hooks, when its manifest has `[[admit]]` tables.
    pub(super) admitter: Option<Arc<Admitter>>,
    /// See [`delivery_scope`].
    pub(super) scope: String,
    pub(super) watches: Vec<Watched>,
    pub(super) resync: Option<Duration>,
    pub(super) filter: Option<EventFilter>,
    pub(super) field_indexes: usize,
    /// Its `[[schedule]]` tables, started once it is registered.
    pub(super) schedules: Vec<crate::manifest::Schedule>,
    pub(super) wildcard: Option<Arc<WildcardWatches>>,
    /// Kinds its wildcard watches cover that RBAC does not let it watch.
    pub(super) not_permitted: Vec<NotPermitted>,
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use kube::core::ApiResource;

    use super::*;
    use crate::tenancy::{Grant, NamespacePattern, ResourceRule};

    fn id() -> PluginId {
        PluginId {
            tenant: "a".into(),
            name: "p".into(),
        }
    }

    fn path() -> PathBuf {
        PathBuf::from("a/p.toml")
    }

    /// Tenant `a`: namespace `team-a`, the core group's kinds.
    fn policy() -> TenantPolicy {
        let ns = NamespacePattern::try_from("team-a".to_string()).unwrap();
        let r = ResourceRule::try_from("v1/*".to_string()).unwrap();
        TenantPolicy {
            grant: Arc::new(Grant::new("a", vec![ns], vec![r], false)),
            ..TenantPolicy::operator()
        }
    }

    fn core(kind: &str, plural: &str, namespaced: bool) -> ResolvedResource {
        ResolvedResource {
            api_resource: ApiResource {
                group: String::new(),
                version: "v1".into(),
                api_version: "v1".into(),
                kind: kind.into(),
                plural: plural.into(),
            },
            namespaced,
        }
    }

    fn manifest(text: &str) -> Manifest {
        parse(&id(), &path(), text.as_bytes()).unwrap()
    }

    fn watching(resolved: Vec<Vec<(Option<String>, ResolvedResource)>>) -> Resolved {
        Resolved {
            watches: resolved,
            ..Resolved::default()
        }
    }

    #[test]
    fn a_manifest_that_is_not_text_is_refused_for_its_plugin() {
        let e = parse(&id(), &path(), &[0xff, 0xfe]).unwrap_err();
        match e {
            PluginError::Manifest { plugin, source } => {
                assert_eq!(plugin, "a/p");
                assert!(source.to_string().contains("not UTF-8 text"), "{source}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn admission_is_told_the_resolved_kinds_and_a_wildcards_namespaces_only() {
        let m = manifest(
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace = \"team-a\"\n[[watch]]\napi-version = \"v1\"\nkind = \"*\"\nnamespace = \"team-a\"\n",
        );
        let resolved = watching(vec![
            vec![(None, core("Pod", "pods", true))],
            vec![(
                Some("v1/ConfigMap".into()),
                core("ConfigMap", "configmaps", true),
            )],
        ]);
        let f = facts(&m, &resolved);
        assert_eq!(
            (f.watch[0].kind.as_str(), f.watch[0].version.as_str()),
            ("Pod", "v1")
        );
        assert_eq!(f.watch[0].namespaced, Some(true));
        assert_eq!(
            (f.watch[1].kind.as_str(), f.watch[1].version.as_str()),
            ("*", "*")
        );
        assert_eq!(f.watch[1].namespaced, None);
        assert!(f.write.is_empty() && f.admit.is_empty());
    }

    #[test]
    fn a_kind_the_grant_leaves_out_is_refused_naming_the_manifest_and_field() {
        let m = manifest("[[watch]]\napi-version = \"v1\"\nkind = \"Node\"\n");
        let resolved = watching(vec![vec![(None, core("Node", "nodes", false))]]);
        let config = HostConfig::default();
        let e = admission(&id(), &path(), &m, &resolved, &policy(), &config).unwrap_err();
        match e {
            PluginError::Refused {
                plugin,
                path: p,
                reason,
            } => {
                assert_eq!(plugin, "a/p");
                assert_eq!(p, path());
                assert!(reason.contains("watch[0]"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_admitted_version_gets_the_hosts_defaults() {
        let m =
            manifest("[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace = \"team-a\"\n");
        let resolved = watching(vec![vec![(None, core("Pod", "pods", true))]]);
        let config = HostConfig::default();
        let accepted = admission(&id(), &path(), &m, &resolved, &policy(), &config).unwrap();
        assert_eq!(accepted.memory_mib, config.default_memory_mib);
        assert_eq!(accepted.deadline_ms, config.default_deadline_ms);
    }

    #[test]
    fn a_limit_above_the_tenants_ceiling_is_refused() {
        let m = manifest(
            "[limits]\nmemory-mib = 64\n[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace = \"team-a\"\n",
        );
        let resolved = watching(vec![vec![(None, core("Pod", "pods", true))]]);
        let policy = TenantPolicy {
            max_memory_mib: Some(32),
            ..policy()
        };
        let config = HostConfig::default();
        let e = admission(&id(), &path(), &m, &resolved, &policy, &config).unwrap_err();
        assert!(e.to_string().contains("limits.memory-mib"), "{e}");
    }
}
