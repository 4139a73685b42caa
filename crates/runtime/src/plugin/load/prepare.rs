//! Preparing one plugin version: parse, count, resolve, expand wildcards, admit, resolve secrets,
//! compile, claim informers and start it (with `init`), without registering it anywhere yet;
//! and what registering it needs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use crate::durable::{Durable, Resume};
use crate::informer::{
    ChangeFilter, CursorOptions, DiscoveredResource, EventFilter, HandlerOptions, Holds,
    InformerClaim, InformerKey, ListenerHandle, ResolvedResource, Restored,
};
use crate::manifest::{Manifest, ManifestError};
use crate::plugin::PluginError;
use crate::plugin::bindings::WitResource;
use crate::plugin::dispatch::namespace_selector::NamespaceSelection;
use crate::plugin::exec::admit::{Admitter, DEFAULT_POOL};
use crate::plugin::exec::dead_letter::DeadLetterSink;
use crate::plugin::exec::gate::{Gate, Gated};
use crate::plugin::exec::instance::{InstanceSpec, RetryPolicy};
use crate::plugin::exec::supervisor::Supervisor;
use crate::plugin::id::PluginId;
use crate::plugin::imports::cache::CacheView;
use crate::plugin::imports::log::LogRate;
use crate::plugin::imports::outbound::Outbound;
use crate::plugin::imports::write::{Declared, PluginWrites, TenantWrites};
use crate::plugin::load::acceptance::{
    Accepted, Facts, WatchFacts, accept, admission_export, describe, watch_count,
};
use crate::plugin::load::host_config::HostConfig;
use crate::plugin::load::loader::PluginHost;
use crate::plugin::load::permitted::NotPermitted;
use crate::plugin::load::rediscover::WildcardWatches;
use crate::plugin::load::scan::Found;
use crate::plugin::load::wildcard::expand;
use crate::plugin::metrics::PluginMetrics;
use crate::shard::Shard;
use crate::tenancy::{Budgeted, TenantPolicy};

use crate::plugin::load::loaded::Loaded;

/// How long a plugin's events wait for its informers to sync (see
/// [`crate::plugin::exec::gate`]) before they are delivered anyway.
pub(super) const SYNC_WAIT: Duration = Duration::from_secs(30);

impl PluginHost {
    /// Loads and starts one plugin version without registering it anywhere yet.
    pub(super) async fn prepare(
        &self,
        id: &PluginId,
        found: &Found,
        policy: &TenantPolicy,
        config: &HostConfig,
    ) -> Result<Prepared, PluginError> {
        let manifest = std::str::from_utf8(&found.manifest_bytes)
            .map_err(|e| ManifestError::Invalid {
                path: found.manifest.clone(),
                message: format!("not UTF-8 text: {e}"),
            })
            .and_then(|text| Manifest::parse(text, &found.manifest))
            .map_err(|source| PluginError::Manifest {
                plugin: id.to_string(),
                source,
            })?;
        watch_count(&manifest, config).map_err(|refusal| PluginError::Refused {
            plugin: id.to_string(),
            path: found.manifest.clone(),
            reason: refusal.to_string(),
        })?;
        // Per watch: (resource name for a wildcard's, resolved resource), one for a plain watch.
        let mut resolved: Vec<Vec<(Option<String>, ResolvedResource)>> = Vec::new();
        let mut discovered: Option<Vec<DiscoveredResource>> = None;
        let mut not_permitted = Vec::new();
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
                let (kinds, refused) = self.permitted(w, policy, kinds).await;
                not_permitted.extend(refused);
                resolved.push(kinds.into_iter().map(|(n, r)| (Some(n), r)).collect());
                continue;
            }
            let r = self
                .factory
                .resolve(w.api_version.as_str(), &w.kind)
                .await
                .map_err(watch_err)?;
            resolved.push(vec![(None, r)]);
        }
        // A write names a kind that must be served now: unlike a watch, nothing waits for it.
        let mut declared = Vec::new();
        for (index, w) in manifest.write.iter().enumerate() {
            let resource = self
                .factory
                .resolve(w.api_version.as_str(), &w.kind)
                .await
                .map_err(|e| PluginError::Refused {
                    plugin: id.to_string(),
                    path: found.manifest.clone(),
                    reason: format!("field `write[{index}]`: {e}"),
                })?;
            declared.push(Declared {
                write: w.clone(),
                resource,
            });
        }
        let mut admitted_kinds = Vec::new();
        for (index, a) in manifest.admit.iter().enumerate() {
            let resource = self
                .factory
                .resolve(a.api_version.as_str(), &a.kind)
                .await
                .map_err(|e| PluginError::Refused {
                    plugin: id.to_string(),
                    path: found.manifest.clone(),
                    reason: format!("field `admit[{index}]`: {e}"),
                })?;
            admitted_kinds.push(resource);
        }
        let discovered = |r: &ResolvedResource| WatchFacts {
            group: r.api_resource.group.clone(),
            version: r.api_resource.version.clone(),
            kind: r.api_resource.kind.clone(),
            namespaced: Some(r.namespaced),
        };
        let facts = Facts {
            watch: manifest
                .watch
                .iter()
                .zip(&resolved)
                .map(|(w, rs)| match rs.first() {
                    Some((None, r)) => discovered(r),
                    // A wildcard's kinds are the grant's already; admission checks its namespaces.
                    _ => WatchFacts {
                        group: w.api_version.as_str().into(),
                        version: "*".into(),
                        kind: "*".into(),
                        namespaced: None,
                    },
                })
                .collect(),
            write: declared.iter().map(|d| discovered(&d.resource)).collect(),
            admit: admitted_kinds.iter().map(discovered).collect(),
        };
        let Accepted {
            memory_mib,
            deadline_ms,
        } = accept(&manifest, &id.tenant, policy, config, &facts).map_err(|refusals| {
            PluginError::Refused {
                plugin: id.to_string(),
                path: found.manifest.clone(),
                reason: describe(&refusals),
            }
        })?;
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

impl PluginHost {
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

/// Where a plugin's handlers keep and resume their delivery cursors: in the shard group's
/// Leases (`--shard-group`: a cursor any member can act on), else in the state directory
/// (`--state-dir`), which also keeps their dead letters.
#[derive(Clone, Copy, Default)]
pub(super) struct Cursors<'a> {
    /// Durable delivery.
    pub(super) durable: Option<&'a Arc<Durable>>,
    /// Sharded mode.
    pub(super) shard: Option<&'a Shard>,
    /// An admission-only host: handlers are registered (their informers fill the caches) but
    /// take no event, and keep no cursor.
    pub(super) admission_only: bool,
}

/// Registers `supervisor`'s handler for `resource` with `informer`, its events held by `gate`,
/// drawing from the tenant's event budget if it has one (a retry is an event too: it draws
/// like the events it repeats). Its cursor is kept as `cursors` say (in sharded mode, in the
/// Leases and, with a state directory, there too), and it resumes from the one it had under
/// `scope` (a durable cursor), or as `start` says (taken over in a shard).
#[allow(clippy::too_many_arguments)]
pub(super) fn register(
    (id, supervisor, gate): (&PluginId, &Arc<Supervisor>, &Gate),
    policy: &TenantPolicy,
    informer: &InformerClaim,
    resource: WitResource,
    mut options: HandlerOptions,
    (cursors, scope): (Cursors<'_>, &str),
    start: Start,
) -> ListenerHandle {
    let name = id.to_string();
    let holds = Holds::new();
    if cursors.admission_only {
        options.filter = Some(EventFilter::new(|_| false));
        options.changes = None;
    }
    options.cursor = match (cursors.shard, cursors.durable) {
        _ if cursors.admission_only => None,
        (Some(_), _) => Some(CursorOptions {
            holds: holds.clone(),
            prior: start.prior,
            floor_version: start.floor_version,
            since: start.resume.map(|r| r.since),
            skip_through_version: start.resume.and_then(|r| r.skip_through_version),
        }),
        (None, Some(d)) => {
            let resume = d.cursor(&name, informer.key(), scope);
            Some(CursorOptions {
                since: resume.map(|r| r.since),
                skip_through_version: resume.and_then(|r| r.skip_through_version),
                holds: holds.clone(),
                ..Default::default()
            })
        }
        (None, None) => None,
    };
    let handler = supervisor.handler(
        resource,
        informer.store().clone(),
        policy.budget.clone(),
        holds,
    );
    let handler = match cursors.durable {
        Some(d) => handler.with_dead_letters(dead_letter_sink(d, &name, informer.key())),
        None => handler,
    };
    let shared = informer.informer();
    let gate = gate.clone();
    let handle = match &policy.budget {
        Some(b) => shared.add_handler(
            &name,
            Gated::new(Budgeted::new(b.clone(), handler), gate),
            options,
        ),
        None => shared.add_handler(&name, Gated::new(handler, gate), options),
    };
    // The book first: once tracked there, a live member publishing the plugin no longer
    // makes the book drop (and the state forget) its cursor.
    if let Some(s) = cursors.shard {
        s.book.track(
            &name,
            scope,
            &informer.key().to_string(),
            Arc::new(handle.gauges()),
        );
    }
    if let Some(d) = cursors.durable {
        d.track(&name, informer.key(), scope, handle.gauges());
    }
    handle
}

/// Keeps what `plugin`'s handler on `informer` fails for good in `durable`.
fn dead_letter_sink(
    durable: &Arc<Durable>,
    plugin: &str,
    informer: &InformerKey,
) -> DeadLetterSink {
    let durable = durable.clone();
    DeadLetterSink::new(
        plugin,
        informer.to_string(),
        Arc::new(move |letter| durable.dead_letter(letter)),
    )
}

/// Why `id`'s tenant has no room for a version using `watches` and declaring `field_indexes`
/// and `schedules`, next to its other running plugins (a running version of `id` itself is
/// being replaced).
pub(super) fn tenant_room(
    loaded: &BTreeMap<PluginId, Loaded>,
    id: &PluginId,
    policy: &TenantPolicy,
    watches: &[Watched],
    field_indexes: usize,
    schedules: usize,
) -> Result<(), TenantFull> {
    let others = loaded
        .iter()
        .filter(|(k, _)| k.tenant == id.tenant && *k != id)
        .map(|(_, l)| l);
    let mut informers: BTreeSet<&InformerKey> = BTreeSet::new();
    let (mut indexes, mut timers) = (field_indexes, schedules);
    for l in others {
        informers.extend(l.handles.iter().map(|(i, _)| i.key()));
        indexes += l.field_indexes;
        timers += l.schedules;
    }
    informers.extend(watches.iter().map(|w| w.informer.key()));
    let tenant = id.tenant.clone();
    if informers.len() > policy.max_informers {
        return Err(TenantFull::Informers {
            tenant,
            would: informers.len(),
            max: policy.max_informers,
        });
    }
    if indexes > policy.max_field_indexes {
        return Err(TenantFull::FieldIndexes {
            tenant,
            would: indexes,
            max: policy.max_field_indexes,
        });
    }
    if timers > policy.max_schedules {
        return Err(TenantFull::Schedules {
            tenant,
            would: timers,
            max: policy.max_schedules,
        });
    }
    Ok(())
}

/// A tenant quota a new version would exceed next to the tenant's other plugins.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum TenantFull {
    /// `max-informers`.
    #[error(
        "tenant `{tenant}`'s plugins would use {would} informers together; at most {max} (`max-informers` in informant.toml)"
    )]
    Informers {
        tenant: String,
        would: usize,
        max: usize,
    },
    /// `max-field-indexes`.
    #[error(
        "tenant `{tenant}`'s plugins would declare {would} field indexes together; at most {max} (`max-field-indexes` in informant.toml)"
    )]
    FieldIndexes {
        tenant: String,
        would: usize,
        max: usize,
    },
    /// `max-schedules`.
    #[error(
        "tenant `{tenant}`'s plugins would declare {would} [[schedule]] tables together; at most {max} (`max-schedules` in informant.toml)"
    )]
    Schedules {
        tenant: String,
        would: usize,
        max: usize,
    },
}
