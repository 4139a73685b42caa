//! The plugin directory: `NAME.wasm` + `NAME.toml` at the top level (the operator's plugins) or in
//! `TENANT/` subdirectories; reconciled against what is loaded, so the same code serves the first
//! load and every hot reload.
//!
//! Contract of a reconcile:
//! - New plugins are loaded, get `init`, a replay of the cache, then live events. Each is
//!   registered as soon as it is started (in a tenant with quotas, after the tenant's plugins
//!   named before it, so quota refusals do not depend on timing): its events wait only for its
//!   own informers to sync or be refused (see [`crate::plugin::exec::gate`]), queued
//!   meanwhile, so one plugin's slow or forbidden kind holds no other plugin.
//! - A changed plugin (wasm or manifest bytes) is fully loaded first; if that fails the old
//!   version keeps running and the error names the file and the reason. If it succeeds, the old
//!   version is unregistered and its in-flight event finished before the new one is registered:
//!   no key's event reaches both versions after the swap.
//! - A removed plugin is unregistered; informers nobody uses any more are released.
//! - A plugin refused for a reason that goes away by itself (a kind not served yet, the API
//!   server not answering discovery) is not an error but *waiting* (see [`crate::plugin::load::waiting`]);
//!   [`PluginHost::retry_waiting`] tries exactly those again.
//! - A wildcard watch (`kind = "*"`) is expanded at load (see [`crate::plugin::load::wildcard`]) and again by
//!   [`PluginHost::rediscover`] whenever the served kinds may have changed: the running version
//!   gets informers for kinds that appeared and loses those of kinds that went, without a
//!   reload (no new `init`, no replay of the kinds it already had).
//!
//! Files are read once, bounded, through the descriptor the checks were made on, and the load
//! uses those bytes. A symbolic link is followed only within its own directory; a file with
//! several hard links loads only from a directory whose owner owns the file, so a tenant's link
//! to another tenant's (or the host's) file neither loads nor freezes the owner's updates
//! (see `read_within`).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt;
use parking_lot::RwLock;
use sha2::{Digest, Sha256};
use tokio::sync::{Mutex, broadcast, watch};
use tracing::Instrument;

use crate::durable::Durable;
use crate::informer::{HandlerOptions, InformerFactory};
use crate::plugin::PluginError;
use crate::plugin::exec::engine::{PluginEngine, hex};
use crate::plugin::exec::gate::open_when_settled;
use crate::plugin::id::PluginId;
use crate::plugin::imports::cluster::Cluster;
use crate::plugin::imports::log::PluginLog;
use crate::plugin::load::handover::Handover;
use crate::plugin::load::host_config::{HostConfig, NeedsRestart};
use crate::plugin::load::loaded::Loaded;
use crate::plugin::load::permitted;
use crate::plugin::load::plan::{self as planning, Candidate, Step, plan};
use crate::plugin::load::prepare::{Prepared, Preparer, SYNC_WAIT, Watched};
use crate::plugin::load::rediscovery::{KindChanges, Rediscovery};
use crate::plugin::load::redrive::{self, NotRedriven};
use crate::plugin::load::register::{Cursors, register, tenant_room};
use crate::plugin::load::registry::Registry;
use crate::plugin::load::scan::{Found, scan_with};
use crate::plugin::load::status::ReconcileReport;
use crate::plugin::load::waiting::{Waiting, WaitingFor};
use crate::shard::Shard;
use crate::tenancy::TenantPolicy;

/// Loads plugins from a directory and keeps them registered with the informers.
pub struct PluginHost {
    pub(super) dir: PathBuf,
    pub(super) factory: Arc<InformerFactory>,
    /// Takes each new version from its files to a started supervisor.
    pub(super) preparer: Preparer,
    /// Replaced whole by [`PluginHost::set_config`]; each reconcile works from one snapshot.
    pub(super) config: RwLock<Arc<HostConfig>>,
    pub(super) loaded: Mutex<BTreeMap<PluginId, Loaded>>,
    /// What runs, waits and was refused, republished after every change to `loaded`: readers
    /// (status, the admin endpoints) never wait for a reconcile, which holds `loaded` while
    /// plugins load.
    pub(super) registry: Registry,
    /// Only admission: handlers take no event, schedules do not tick.
    pub(super) admission_only: bool,
    /// Re-expands wildcard watches when the served kinds may have changed.
    pub(super) rediscovery: Rediscovery,
    /// Durable delivery (`--state-dir`): plugins' cursors kept across restarts.
    pub(super) durable: Option<Arc<Durable>>,
    /// Sharded mode (`--shard-group`): only the plugins this member owns run here.
    pub(super) shard: Option<Shard>,
    /// Where plugins pulled from registries are written (`[[sources]]`), scanned beside `dir`.
    pub(super) pulled_dir: Option<PathBuf>,
}

impl PluginHost {
    /// A host for the plugins in `dir`; nothing is loaded until [`reconcile`](Self::reconcile).
    pub fn new(
        dir: PathBuf,
        engine: Arc<PluginEngine>,
        factory: Arc<InformerFactory>,
        config: HostConfig,
    ) -> Self {
        PluginHost {
            dir,
            preparer: Preparer::new(engine, factory.clone(), config.log_buffer),
            rediscovery: Rediscovery::new(factory.clone()),
            factory,
            config: RwLock::new(Arc::new(config)),
            loaded: Mutex::new(BTreeMap::new()),
            registry: Registry::default(),
            admission_only: false,
            durable: None,
            shard: None,
            pulled_dir: None,
        }
    }

    /// Sends every plugin write with `dryRun=All`: the API server validates and admits it, and
    /// persists nothing (`--dry-run-writes`).
    pub fn with_dry_run_writes(mut self, dry_run: bool) -> Self {
        self.preparer.cluster = Cluster::new(self.factory.client().clone(), dry_run);
        self
    }

    /// An admission-only host (`--admission-only`): plugins are loaded, their informers fill
    /// the caches their hooks read, and their hooks answer; their handlers take no event and
    /// their schedules do not tick (another host delivers those).
    pub fn with_admission_only(mut self, admission_only: bool) -> Self {
        self.admission_only = admission_only;
        self
    }

    /// Keeps plugins' delivery cursors in `durable`, and resumes them from the ones it has.
    pub fn with_durable(mut self, durable: Arc<Durable>) -> Self {
        self.durable = Some(durable);
        self
    }

    /// Runs only the plugins `shard` assigns to this member, publishing their cursors in its
    /// Lease and taking plugins over from the cursors other members published.
    pub fn with_shard(mut self, shard: Shard) -> Self {
        self.shard = Some(shard);
        self
    }

    /// Also loads the plugins in `dir`, where plugins pulled from registries are written
    /// (`[[sources]]`), laid out as the plugins directory is; one in both is the plugins
    /// directory's.
    pub fn with_pulled_dir(mut self, dir: PathBuf) -> Self {
        self.pulled_dir = Some(dir);
        self
    }

    /// Sharded mode's handle, with `--shard-group`.
    pub fn shard(&self) -> Option<&Shard> {
        self.shard.as_ref()
    }

    /// Where handlers keep their cursors.
    pub(super) fn cursors(&self) -> Cursors<'_> {
        Cursors {
            durable: self.durable.as_ref(),
            shard: self.shard.as_ref(),
            admission_only: self.admission_only,
        }
    }

    /// The durable delivery state, with `--state-dir`.
    pub fn durable(&self) -> Option<&Arc<Durable>> {
        self.durable.as_ref()
    }

    /// The plugins registered now (`tenant/name`).
    pub fn loaded_ids(&self) -> Vec<String> {
        let entries = self.registry.read();
        let running = entries.iter().filter(|(_, e)| e.running().is_some());
        running.map(|(id, _)| id.to_string()).collect()
    }

    /// The change filters in use: (description, evaluations, runtime errors) each.
    pub fn change_filter_stats(&self) -> Vec<(String, u64, u64)> {
        self.preparer.change_filters.stats()
    }

    /// Broadcasts plugins' log lines on `logs` instead of a channel of the host's own, so a
    /// subscriber can exist before anything loads.
    pub fn with_logs(mut self, logs: broadcast::Sender<PluginLog>) -> Self {
        self.preparer.logs = logs;
        self
    }

    /// The host config plugins are admitted under.
    pub fn config(&self) -> Arc<HostConfig> {
        self.config.read().clone()
    }

    /// Takes the limits and tenants of a reloaded `informant.toml`; the next reconcile re-admits
    /// exactly the plugins whose tenant policy or the host limits changed. Settings the file
    /// does not hold (restart policy, log buffer) stay. Refused, keeping the old config, when it
    /// allows more memory per plugin than the engine's slots were sized for at start.
    pub fn set_config(&self, new: HostConfig) -> Result<(), NeedsRestart> {
        let slot_mib = self.preparer.engine.options().max_memory_bytes >> 20;
        if new.max_memory_mib as usize > slot_mib {
            return Err(NeedsRestart::MaxMemory {
                asked_mib: new.max_memory_mib,
                engine_mib: slot_mib,
            });
        }
        let mut current = self.config.write();
        if new.sources != current.sources {
            tracing::warn!(
                "config: `sources` changed; the plugins pulled from registries are the ones read at start until a restart"
            );
        }
        let mut next = HostConfig {
            default_memory_mib: new.default_memory_mib,
            max_memory_mib: new.max_memory_mib,
            default_deadline_ms: new.default_deadline_ms,
            max_deadline_ms: new.max_deadline_ms,
            tenancy: new.tenancy,
            ..(**current).clone()
        };
        next.tenancy.keep_unchanged(&current.tenancy);
        *current = Arc::new(next);
        Ok(())
    }

    /// The plugins directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The informers plugins are registered with.
    pub fn factory(&self) -> &Arc<InformerFactory> {
        &self.factory
    }

    /// Brings the loaded plugins in line with the directory.
    pub async fn reconcile(&self) -> ReconcileReport {
        let span = tracing::info_span!("reconcile");
        self.reconcile_some(false).instrument(span).await
    }

    /// Tries the waiting plugins again, and only them: the others stay as they are (a broken
    /// plugin is not recompiled, nor its error logged again, on every retry). Plugins gone from
    /// disk are still removed.
    pub async fn retry_waiting(&self) -> ReconcileReport {
        let span = tracing::info_span!("reconcile", waiting_only = true);
        self.reconcile_some(true).instrument(span).await
    }

    /// A reconcile of every plugin, or of the waiting ones only.
    async fn reconcile_some(&self, waiting_only: bool) -> ReconcileReport {
        let mut report = ReconcileReport::default();
        let config = self.config();
        let mut found = match scan_with(&self.dir, self.pulled_dir.as_deref(), &config) {
            Ok(f) => f,
            Err(e) => {
                report.errors.push((PluginId::directory(""), e));
                self.registry.record_refusals(&report);
                return report;
            }
        };
        let mut loaded = self.loaded.lock().await;
        // Before the shard's share is taken: a plugin another member runs is not removed.
        if !waiting_only {
            let present: BTreeSet<String> = found.keys().map(PluginId::to_string).collect();
            if let Some(d) = &self.durable {
                d.keep_letters_of(&present);
            }
            // A member's cursors of plugins removed while it was down (its previous life's, as
            // its Lease or its state kept them) are not handed on.
            if let Some(shard) = &self.shard {
                shard.book.keep_only(&present);
                if let Some(d) = &self.durable {
                    d.keep_cursors_of(&present);
                }
            }
        }
        // Plugins another shard member owns are as good as absent here, except that their
        // cursors are handed on rather than forgotten.
        let assignment = self.shard.as_ref().map(|s| s.assignment.borrow().clone());
        let owns = |id: &PluginId| {
            assignment
                .as_ref()
                .is_none_or(|a| a.owns(&id.tenant, &id.name))
        };
        // Read under `loaded`, which every writer of `waiting` holds: no wait can slip by.
        let only: Option<BTreeSet<PluginId>> =
            waiting_only.then(|| self.registry.waiting().into_keys().collect());
        report.only = only.as_ref().map(|o| o.iter().cloned().collect());
        let candidates: BTreeMap<PluginId, Candidate> = found
            .iter()
            .map(|(id, f)| {
                let candidate = Candidate {
                    fingerprint: f.as_ref().ok().map(|f| f.fingerprint.clone()),
                    max_plugins: config
                        .tenancy
                        .policy(&id.tenant)
                        .ok()
                        .map(|p| p.max_plugins),
                };
                (id.clone(), candidate)
            })
            .collect();
        let running: BTreeMap<PluginId, planning::Running> = loaded
            .iter()
            .map(|(id, l)| {
                let admitted_now = config
                    .tenancy
                    .policy(&id.tenant)
                    .is_ok_and(|p| l.admitted_under(&p, &config));
                let running = planning::Running {
                    fingerprint: l.fingerprint.clone(),
                    admitted_now,
                };
                (id.clone(), running)
            })
            .collect();
        // Decide first, then prepare every new version at once: compiling and `init` (each
        // bounded by its deadline) take as long as the slowest plugin, not the sum of them.
        let mut wanted = Vec::new();
        for step in plan(&candidates, &running, owns, only.as_ref()) {
            match step {
                Step::Remove { id, handed_over } => {
                    if let Some(old) = loaded.remove(&id) {
                        self.publish(&loaded);
                        self.remove(old, &id, handed_over).await;
                        report.removed.push(id);
                    }
                }
                Step::DropStale(id) => {
                    self.drop_stale(&mut loaded, &id, |_| false, &mut report)
                        .await;
                }
                Step::Refuse(id, refusal) => {
                    let Some(f) = found.remove(&id) else { continue };
                    let e = match (f, refusal) {
                        (Err(e), _) => e,
                        (Ok(f), planning::Refusal::Denied) => PluginError::Refused {
                            plugin: id.to_string(),
                            path: f.wasm.clone(),
                            reason: config
                                .tenancy
                                .policy(&id.tenant)
                                .err()
                                .map_or_else(String::new, |d| d.to_string()),
                        },
                        (Ok(f), planning::Refusal::Quota { max }) => {
                            let reason = format!(
                                "tenant `{}` already runs its maximum of {max} plugins (`max-plugins` in informant.toml)",
                                id.tenant
                            );
                            id.span().in_scope(|| tracing::error!("{reason}"));
                            PluginError::Refused {
                                plugin: id.to_string(),
                                path: f.wasm.clone(),
                                reason,
                            }
                        }
                        (Ok(_), planning::Refusal::Files) => {
                            unreachable!("the plan read them as unreadable")
                        }
                    };
                    report.errors.push((id, e));
                }
                Step::Load(id) => {
                    let (Some(Ok(f)), Ok(policy)) =
                        (found.remove(&id), config.tenancy.policy(&id.tenant))
                    else {
                        unreachable!("the plan loads only readable plugins of admitted tenants");
                    };
                    wanted.push((id, f, policy));
                }
            }
        }
        // Every new version prepared at once, each registered as soon as it is ready: one
        // plugin's compile, `init` or refusal never holds another's load. Except within a tenant
        // with quotas (informers, field indexes): its new plugins are admitted to them in name
        // order, whichever is prepared first, so which one a full tenant refuses never depends
        // on timing. Unbounded tenants' plugins (the operator's) and other tenants' never wait.
        let mut in_order: HashMap<String, VecDeque<PluginId>> = HashMap::new();
        for (id, _, policy) in &wanted {
            if policy.max_informers != usize::MAX
                || policy.max_field_indexes != usize::MAX
                || policy.max_schedules != usize::MAX
            {
                in_order
                    .entry(id.tenant.clone())
                    .or_default()
                    .push_back(id.clone());
            }
        }
        let mut pending = futures::stream::FuturesUnordered::new();
        for (id, f, policy) in wanted {
            pending.push(self.prepare_one(id, f, policy, config.clone()));
        }
        let waited = self.registry.waiting();
        let mut waiting = BTreeMap::new();
        let mut ready = HashMap::new();
        while let Some((id, f, policy, prepared)) = pending.next().await {
            let tenant = id.tenant.clone();
            ready.insert(id.clone(), (f, policy, prepared));
            let mut next = vec![id];
            if let Some(queue) = in_order.get_mut(&tenant) {
                next.clear();
                while let Some(first) = queue.front().filter(|q| ready.contains_key(*q)) {
                    next.push(first.clone());
                    queue.pop_front();
                }
            }
            for id in next {
                let (f, policy, prepared) = ready.remove(&id).expect("prepared above");
                match prepared {
                    Ok(Prepared {
                        supervisor,
                        admitter,
                        scope,
                        watches,
                        resync,
                        filter,
                        field_indexes,
                        wildcard,
                        not_permitted,
                        schedules,
                    }) => {
                        if let Err(full) = tenant_room(
                            &loaded,
                            &id,
                            &policy,
                            &watches,
                            field_indexes,
                            schedules.len(),
                        ) {
                            supervisor.close();
                            drop(watches);
                            let e = PluginError::Refused {
                                plugin: id.to_string(),
                                path: f.manifest.clone(),
                                reason: full.to_string(),
                            };
                            id.span()
                                .in_scope(|| tracing::error!(error = %e, "plugin not loaded"));
                            report.errors.push((id, e));
                            continue;
                        }
                        let replaced = match loaded.remove(&id) {
                            Some(old) => {
                                self.registry.swapping(&id, old.admitter.clone());
                                self.publish(&loaded);
                                old.stop().await;
                                true
                            }
                            None => false,
                        };
                        self.factory.start();
                        let (gate, opening) = open_when_settled(
                            watches
                                .iter()
                                .map(|w| w.informer.informer().clone())
                                .collect(),
                            SYNC_WAIT,
                        );
                        let opening = tokio::spawn(opening.instrument(id.span()));
                        let mut kinds = Vec::with_capacity(watches.len());
                        let mut selections = Vec::new();
                        let handles = watches
                            .into_iter()
                            .map(
                                |Watched {
                                     informer,
                                     resource,
                                     changes,
                                     kind,
                                     selection,
                                     start,
                                     prior_namespaces,
                                 }| {
                                    let options = HandlerOptions {
                                        resync_period: resync,
                                        filter: filter.clone(),
                                        changes,
                                        cursor: None,
                                    };
                                    kinds.push(kind);
                                    // A durable resume starts from the namespaces restored from
                                    // disk: the selection as it was when the host stopped.
                                    let cursors = self.cursors();
                                    let resumes = || {
                                        cursors.shard.is_none()
                                            && cursors.durable.is_some_and(|d| {
                                                d.has_cursor(
                                                    &id.to_string(),
                                                    informer.key(),
                                                    &scope,
                                                )
                                            })
                                    };
                                    let add = |options| {
                                        register(
                                            (&id, &supervisor, &gate),
                                            &policy,
                                            &informer,
                                            resource,
                                            options,
                                            (self.cursors(), &scope),
                                            start,
                                        )
                                    };
                                    let h = match selection {
                                        // A selection's filter holds the grant's too.
                                        Some((s, namespaces)) => {
                                            let prior_namespaces = prior_namespaces.or_else(|| {
                                                resumes()
                                                    .then(|| namespaces.informer().restored())
                                                    .flatten()
                                            });
                                            let (h, followed) = s.register(
                                                &id.to_string(),
                                                namespaces.informer(),
                                                prior_namespaces,
                                                |selected| {
                                                    add(HandlerOptions {
                                                        filter: Some(selected),
                                                        ..options
                                                    })
                                                },
                                            );
                                            selections.push(followed.holding(namespaces));
                                            h
                                        }
                                        None => add(options),
                                    };
                                    (informer, h)
                                },
                            )
                            .collect();
                        id.span().in_scope(|| {
                            tracing::info!(
                                version = &supervisor.version()[..12],
                                replaced,
                                "plugin loaded"
                            )
                        });
                        permitted::report(&id, &[], &not_permitted);
                        if !self.admission_only {
                            supervisor.start_schedules(&schedules, gate.clone());
                        }
                        if let Some(admitter) = &admitter {
                            admitter.set_gate(gate.clone());
                            admitter.warm();
                        }
                        loaded.insert(
                            id.clone(),
                            Loaded {
                                supervisor,
                                fingerprint: f.fingerprint,
                                scope,
                                handles,
                                policy,
                                config: config.clone(),
                                field_indexes,
                                schedules: schedules.len(),
                                kinds,
                                wildcard,
                                not_permitted,
                                gate,
                                opening,
                                selections,
                                admitter,
                            },
                        );
                        self.registry.swapped(&id);
                        self.publish(&loaded);
                        if replaced {
                            report.replaced.push(id);
                        } else {
                            report.loaded.push(id);
                        }
                    }
                    Err(e) => {
                        let admitted_now = |l: &Loaded| l.admitted_under(&policy, &config);
                        self.drop_stale(&mut loaded, &id, admitted_now, &mut report)
                            .await;
                        let kept = loaded.contains_key(&id);
                        if let Some(waiting_for) = WaitingFor::of(&e) {
                            let version = hex(&Sha256::digest(&f.wasm_bytes));
                            let (w, changed) =
                                Waiting::next(waited.get(&id), waiting_for, &e, version);
                            if changed {
                                id.span().in_scope(|| tracing::warn!(waiting_for = %w.waiting_for, error = %e, kept_old_version = kept, "plugin waiting; retried with backoff and whenever CRDs change"));
                            } else {
                                id.span().in_scope(|| tracing::debug!(error = %e, attempts = w.attempts, "plugin still waiting"));
                            }
                            waiting.insert(id.clone(), w);
                            report.waiting.push((id, e));
                            continue;
                        }
                        id.span().in_scope(|| tracing::error!(error = %e, kept_old_version = kept, "plugin not loaded"));
                        report.errors.push((id, e));
                    }
                }
            }
        }
        // Every waiting plugin was tried above, so what waits now is exactly what just waited.
        for id in waited.keys().filter(|id| !waiting.contains_key(*id)) {
            if !loaded.contains_key(id) && !report.errors.iter().any(|(e, _)| e == id) {
                id.span()
                    .in_scope(|| tracing::info!("plugin no longer waiting: it is gone"));
            }
        }
        // A swap that did not end in a registered version leaves no old hooks behind.
        if self.registry.end_swaps() {
            self.publish(&loaded);
        }
        self.rediscovery.sync_crd_watch(&loaded).await;
        // Plugins finish loading in any order; the report lists them by tenant and name.
        report.loaded.sort();
        report.replaced.sort();
        report.errors.sort_by(|a, b| a.0.cmp(&b.0));
        report.waiting.sort_by(|a, b| a.0.cmp(&b.0));
        self.registry.record_refusals(&report);
        self.registry.set_waiting(waiting);
        report
    }

    /// [`prepare`](Self::prepare), in `id`'s span, handing back what it was given.
    async fn prepare_one(
        &self,
        id: PluginId,
        f: Found,
        policy: Arc<TenantPolicy>,
        config: Arc<HostConfig>,
    ) -> (
        PluginId,
        Found,
        Arc<TenantPolicy>,
        Result<Prepared, PluginError>,
    ) {
        let span = id.span();
        let taking_over = self.shard.clone();
        let prepared = async {
            let mut prepared = self.preparer.prepare(&id, &f, &policy, &config).await?;
            if let Some(shard) = &taking_over {
                let handover = Handover {
                    shard,
                    durable: self.durable.as_ref(),
                    factory: &self.factory,
                };
                handover.take_over(&id, &mut prepared).await;
            }
            Ok(prepared)
        }
        .instrument(span)
        .await;
        (id, f, policy, prepared)
    }

    /// Unloads `old`, a version of `id` no longer to run here: removed from the directory, or
    /// (`handed_over`) owned by another shard member now, which starts where its cursors say.
    async fn remove(&self, old: Loaded, id: &PluginId, handed_over: bool) {
        if let Some(shard) = &self.shard {
            // Before its handlers go: how far they got is where the next owner starts.
            match handed_over {
                true => shard.book.release(&id.to_string()),
                false => shard.book.forget(&id.to_string()),
            }
        }
        // And the state's copy, kept until a live member publishes the plugin.
        if handed_over && let Some(d) = &self.durable {
            d.save();
        }
        old.stop().await;
        if handed_over {
            let owner = self.shard.as_ref().and_then(|s| {
                s.assignment
                    .borrow()
                    .owner(&id.tenant, &id.name)
                    .map(str::to_string)
            });
            id.span().in_scope(|| {
                tracing::info!(
                    owner = owner.as_deref().unwrap_or("none"),
                    "plugin handed over to another shard member"
                )
            });
        } else {
            if let Some(d) = &self.durable {
                d.forget_plugin(&id.to_string());
            }
            id.span().in_scope(|| tracing::info!("plugin removed"));
        }
    }

    /// When `id`'s new version could not be loaded: its running version keeps running only if
    /// it was admitted under the policy and limits in force (just its files changed). One loaded
    /// under a grant or limits a config reload has since changed must not outlive them.
    async fn drop_stale(
        &self,
        loaded: &mut BTreeMap<PluginId, Loaded>,
        id: &PluginId,
        admitted_now: impl Fn(&Loaded) -> bool,
        report: &mut ReconcileReport,
    ) {
        if loaded.get(id).is_some_and(|l| !admitted_now(l))
            && let Some(old) = loaded.remove(id)
        {
            self.publish(loaded);
            old.stop().await;
            id.span().in_scope(|| {
                tracing::info!("plugin removed: the config it was admitted under changed")
            });
            report.removed.push(id.clone());
        }
    }

    /// Follows how many re-discoveries have finished (their changes published in
    /// [`status`](Self::status)).
    pub fn subscribe_rediscoveries(&self) -> watch::Receiver<u64> {
        self.rediscovery.subscribe_rediscoveries()
    }

    /// Follows changes to the cluster's CRDs (a count, bumped per change) while some running
    /// plugin has a wildcard watch.
    pub fn subscribe_crd_changes(&self) -> watch::Receiver<u64> {
        self.rediscovery.subscribe_crd_changes()
    }

    /// Re-expands every running plugin's wildcard watches against a fresh discovery (see
    /// [`crate::plugin::load::rediscover`]), serialised with reconciles; what changed, per plugin.
    pub async fn rediscover(&self) -> Result<Vec<KindChanges>, crate::informer::Error> {
        let mut loaded = self.loaded.lock().await;
        let (cluster, cursors) = (&self.preparer.cluster, self.cursors());
        let rediscovered = self.rediscovery.rediscover(&mut loaded, cluster, cursors);
        let Some(changes) = rediscovered.await? else {
            return Ok(Vec::new());
        };
        self.publish(&loaded);
        self.rediscovery.start_new_informers();
        self.rediscovery.finished();
        Ok(changes)
    }

    /// The running or waiting plugin whose id (`tenant/name`, or `name` for a top-level one) is
    /// exactly `plugin`: nothing in it is resolved or decoded.
    pub fn find_plugin(&self, plugin: &str) -> Option<PluginId> {
        redrive::find_plugin(&self.registry, plugin)
    }

    /// Queues `key` (`namespace/name` or `name`) on `informer` (an informer id) again for the
    /// running plugin `id`, as an event of type `event` (`added`, `updated`, `deleted`,
    /// `resync`) carrying the object as the cache has it now (see [`redrive`]).
    pub fn redrive(
        &self,
        id: &PluginId,
        informer: &str,
        key: &str,
        event: &str,
    ) -> Result<(), NotRedriven> {
        redrive::redrive(&self.registry, id, informer, key, event)
    }

    /// Makes `loaded` what readers see.
    pub(super) fn publish(&self, loaded: &BTreeMap<PluginId, Loaded>) {
        // A plugin gone from disk takes its lines with it; one waiting to load keeps them.
        let waiting = self.registry.waiting();
        self.preparer
            .logbook
            .retain(|id| loaded.contains_key(id) || waiting.contains_key(id));
        self.registry.publish(
            loaded
                .iter()
                .map(|(id, l)| (id.clone(), l.published(), l.admitter.clone())),
        );
    }

    /// Unregisters every plugin.
    pub async fn shutdown(&self) {
        let mut loaded = self.loaded.lock().await;
        if let Some(shard) = &self.shard {
            shard.book.release_all();
        }
        self.registry.clear();
        let all = std::mem::take(&mut *loaded);
        // All at once: shutdown takes the longest in-flight call, not the sum of them.
        futures::future::join_all(all.into_values().map(Loaded::stop)).await;
        self.rediscovery.sync_crd_watch(&loaded).await;
    }
}
