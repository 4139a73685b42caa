//! The plugin directory: `NAME.wasm` + `NAME.toml` at the top level (the operator's plugins) or in
//! `TENANT/` subdirectories; reconciled against what is loaded, so the same code serves the first
//! load and every hot reload.
//!
//! Contract of a reconcile:
//! - New plugins are loaded, get `init`, a replay of the cache, then live events.
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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use sha2::{Digest, Sha256};
use tokio::sync::{Mutex, broadcast, watch};

use crate::informer::{
    ChangeFilter, DiscoveredResource, Event, EventFilter, FnHandler, HandlerOptions,
    InformerFactory, ListenerGauges, ListenerHandle, ResolvedResource, SharedInformer, WatchScope,
    wait_all_synced,
};
use crate::plugin::PluginError;
use crate::plugin::dispatch::change_filter::ChangeFilters;
use crate::plugin::exec::engine::{PluginEngine, hex};
use crate::plugin::exec::instance::{InstanceSpec, RetryPolicy};
use crate::plugin::exec::supervisor::{PluginState, RestartPolicy, Supervisor};
use crate::plugin::imports::cluster::Cluster;
use crate::plugin::imports::host::{CacheView, LogRate, PluginLog, TextLimits, WitResource};
use crate::plugin::imports::outbound::Outbound;
use crate::plugin::imports::write::{Declared, TenantWrites, Writer};
use crate::plugin::load::admission::{Admitted, Facts, WatchFacts, admit, describe, watch_count};
use crate::plugin::load::waiting::{Waiting, WaitingFor};
use crate::plugin::load::wildcard::expand;
use crate::plugin::manifest::{Manifest, ManifestError};
use crate::tenancy::{Budgeted, Tenancy, TenantPolicy};

/// How long a reconcile waits for a plugin's informers to sync before registering it anyway.
const SYNC_WAIT: Duration = Duration::from_secs(30);

/// Host-wide plugin settings: defaults and ceilings for what manifests ask.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// Memory cap when a manifest names none (MiB).
    pub default_memory_mib: u32,
    /// Highest memory cap a manifest may get (MiB).
    pub max_memory_mib: u32,
    /// Deadline when a manifest names none (ms).
    pub default_deadline_ms: u32,
    /// Longest deadline a manifest may get (ms).
    pub max_deadline_ms: u32,
    /// Restart and quarantine policy.
    pub restart: RestartPolicy,
    /// Plugin log lines buffered for slow subscribers before they miss some.
    pub log_buffer: usize,
    /// Largest `.wasm` the loader reads (bytes).
    pub max_wasm_bytes: u64,
    /// Largest manifest the loader reads (bytes).
    pub max_manifest_bytes: u64,
    /// Most `[[watch]]` tables one manifest may have.
    pub max_watches: u32,
    /// What a plugin's own text (log lines, errors) may cost the host.
    pub text: TextLimits,
    /// Tenants, their grants and quotas; whether top-level plugins run.
    pub tenancy: Tenancy,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            default_memory_mib: 64,
            max_memory_mib: 256,
            default_deadline_ms: 200,
            max_deadline_ms: 10_000,
            restart: RestartPolicy::default(),
            log_buffer: 4096,
            max_wasm_bytes: MAX_PLUGIN_FILE_BYTES,
            max_manifest_bytes: 256 << 10,
            max_watches: 16,
            text: TextLimits::default(),
            tenancy: Tenancy::default(),
        }
    }
}

/// Which plugin: its tenant (empty for top-level plugins) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PluginId {
    /// The subdirectory it sits in, or empty.
    pub tenant: String,
    /// The file stem.
    pub name: String,
}

impl PluginId {
    /// Stands for a whole directory in errors: the plugins directory (`tenant` empty) or a
    /// tenant's.
    pub fn directory(tenant: &str) -> Self {
        PluginId {
            tenant: tenant.to_string(),
            name: "*".into(),
        }
    }
}

impl std::fmt::Display for PluginId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.tenant.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.tenant, self.name)
        }
    }
}

/// A plugin found on disk, with the bytes read (and checked) during the scan: the load uses
/// these, never the files again, so what was checked is what runs.
#[derive(Debug, Clone)]
struct Found {
    wasm: PathBuf,
    manifest: PathBuf,
    wasm_bytes: Arc<[u8]>,
    manifest_bytes: Arc<[u8]>,
    fingerprint: String,
}

struct Loaded {
    supervisor: Arc<Supervisor>,
    fingerprint: String,
    handles: Vec<(Arc<SharedInformer>, ListenerHandle)>,
    /// What it was admitted under; a config reload that changes either re-admits it.
    policy: Arc<TenantPolicy>,
    config: Arc<HostConfig>,
    /// Field indexes its manifest declares.
    field_indexes: usize,
    /// For each of `handles`: the wildcard watch (index) and the resource it serves there.
    kinds: Vec<Option<(usize, String)>>,
    /// Set when its manifest has wildcard watches: what re-expanding them needs.
    wildcard: Option<Arc<WildcardWatches>>,
}

/// What re-expanding a running version's wildcard watches needs: the same registration
/// options, change filters and cache view its load used.
struct WildcardWatches {
    manifest: Manifest,
    cache: Arc<CacheView>,
    /// Per `[[watch]]`: its change filter, if any.
    changes: Vec<Option<ChangeFilter>>,
    resync: Option<Duration>,
    filter: Option<EventFilter>,
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

impl Loaded {
    /// The resources its wildcard watches cover now, sorted, each once.
    fn expanded(&self) -> Vec<String> {
        let set: BTreeSet<&String> = self.kinds.iter().flatten().map(|(_, n)| n).collect();
        set.into_iter().cloned().collect()
    }

    /// Whether this version was admitted under exactly `policy` and `config`'s limits.
    fn admitted_under(&self, policy: &Arc<TenantPolicy>, config: &HostConfig) -> bool {
        Arc::ptr_eq(&self.policy, policy) && same_limits(&self.config, config)
    }
}

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

/// Loads plugins from a directory and keeps them registered with the informers.
pub struct PluginHost {
    dir: PathBuf,
    engine: Arc<PluginEngine>,
    factory: Arc<InformerFactory>,
    /// Replaced whole by [`PluginHost::set_config`]; each reconcile works from one snapshot.
    config: RwLock<Arc<HostConfig>>,
    logs: broadcast::Sender<PluginLog>,
    loaded: Mutex<BTreeMap<PluginId, Loaded>>,
    /// What is running, republished after every change to `loaded`: readers (status, the
    /// admin endpoints) never wait for a reconcile, which holds `loaded` while plugins load.
    running: RwLock<BTreeMap<PluginId, Running>>,
    /// The plugins waiting, replaced at the end of each reconcile; the count is for whoever
    /// schedules retries.
    waiting: RwLock<BTreeMap<PluginId, Waiting>>,
    waiting_count: watch::Sender<usize>,
    /// Change filters in use, shared by every watch naming the same one.
    change_filters: ChangeFilters,
    /// Where plugins' writes go: the host's client, dry-run for every write when the host is
    /// (`--dry-run-writes`).
    cluster: Cluster,
    /// The CRD informer's handler, registered while some plugin has a wildcard watch; it
    /// counts CRD changes on `crd_changes` for [`crate::plugin::load::rediscover`].
    crd_watch: Mutex<Option<(Arc<SharedInformer>, ListenerHandle)>>,
    crd_changes: watch::Sender<u64>,
    /// Counts finished [`PluginHost::rediscover`]s, changed or not.
    rediscoveries: watch::Sender<u64>,
}

/// A running plugin as readers see it.
#[derive(Clone)]
struct Running {
    supervisor: Arc<Supervisor>,
    queues: Vec<ListenerGauges>,
    expanded: Vec<String>,
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
            engine,
            cluster: Cluster::new(factory.client().clone(), false),
            factory,
            logs: broadcast::channel(config.log_buffer.max(1)).0,
            config: RwLock::new(Arc::new(config)),
            loaded: Mutex::new(BTreeMap::new()),
            running: RwLock::new(BTreeMap::new()),
            waiting: RwLock::new(BTreeMap::new()),
            waiting_count: watch::channel(0).0,
            change_filters: ChangeFilters::default(),
            crd_watch: Mutex::new(None),
            crd_changes: watch::channel(0).0,
            rediscoveries: watch::channel(0).0,
        }
    }

    /// Sends every plugin write with `dryRun=All`: the API server validates and admits it, and
    /// persists nothing (`--dry-run-writes`).
    pub fn with_dry_run_writes(mut self, dry_run: bool) -> Self {
        self.cluster = Cluster::new(self.factory.client().clone(), dry_run);
        self
    }

    /// The change filters in use: (description, evaluations, runtime errors) each.
    pub fn change_filter_stats(&self) -> Vec<(String, u64, u64)> {
        self.change_filters.stats()
    }

    /// Broadcasts plugins' log lines on `logs` instead of a channel of the host's own, so a
    /// subscriber can exist before anything loads.
    pub fn with_logs(mut self, logs: broadcast::Sender<PluginLog>) -> Self {
        self.logs = logs;
        self
    }

    /// Makes `loaded` what readers see.
    fn publish(&self, loaded: &BTreeMap<PluginId, Loaded>) {
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

    /// The host config plugins are admitted under.
    pub fn config(&self) -> Arc<HostConfig> {
        self.config.read().clone()
    }

    /// Takes the limits and tenants of a reloaded `informant.toml`; the next reconcile re-admits
    /// exactly the plugins whose tenant policy or the host limits changed. Settings the file
    /// does not hold (restart policy, log buffer) stay. Refused, keeping the old config, when it
    /// allows more memory per plugin than the engine's slots were sized for at start.
    pub fn set_config(&self, new: HostConfig) -> Result<(), String> {
        let slot_mib = self.engine.options().max_memory_bytes >> 20;
        if new.max_memory_mib as usize > slot_mib {
            return Err(format!(
                "key `limits.max-memory-mib`: {} is above the {slot_mib} MiB the plugin engine was \
                 started with; raising it needs a restart",
                new.max_memory_mib
            ));
        }
        let mut current = self.config.write();
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

    /// Brings the loaded plugins in line with the directory.
    pub async fn reconcile(&self) -> ReconcileReport {
        self.reconcile_some(false).await
    }

    /// Tries the waiting plugins again, and only them: the others stay as they are (a broken
    /// plugin is not recompiled, nor its error logged again, on every retry). Plugins gone from
    /// disk are still removed.
    pub async fn retry_waiting(&self) -> ReconcileReport {
        self.reconcile_some(true).await
    }

    /// A reconcile of every plugin, or of the waiting ones only.
    async fn reconcile_some(&self, waiting_only: bool) -> ReconcileReport {
        let mut report = ReconcileReport::default();
        let config = self.config();
        let found = match scan(&self.dir, &config) {
            Ok(f) => f,
            Err(e) => {
                report.errors.push((PluginId::directory(""), e));
                return report;
            }
        };
        let mut loaded = self.loaded.lock().await;
        // Read under `loaded`, which every writer of `waiting` holds: no wait can slip by.
        let only: Option<BTreeSet<PluginId>> =
            waiting_only.then(|| self.waiting.read().keys().cloned().collect());
        report.only = only.as_ref().map(|o| o.iter().cloned().collect());
        let gone: Vec<PluginId> = loaded
            .keys()
            .filter(|id| !found.contains_key(*id))
            .cloned()
            .collect();
        for id in gone {
            if let Some(old) = loaded.remove(&id) {
                self.publish(&loaded);
                self.unregister(old).await;
                tracing::info!(plugin = %id.name, tenant = %id.tenant, "plugin removed");
                report.removed.push(id);
            }
        }
        // Decide first, then prepare every new version at once: compiling and `init` (each
        // bounded by its deadline) take as long as the slowest plugin, not the sum of them.
        let mut wanted = Vec::new();
        let mut starting: HashMap<String, usize> = HashMap::new();
        for (id, f) in found {
            if only.as_ref().is_some_and(|o| !o.contains(&id)) {
                continue;
            }
            let found_err = |e| (id.clone(), e);
            let policy = config.tenancy.policy(&id.tenant);
            // Whether a running version was admitted under the policy and limits now in force.
            let admitted_now =
                |l: &Loaded| policy.as_ref().is_ok_and(|p| l.admitted_under(p, &config));
            let f = match f {
                Ok(f) => f,
                Err(e) => {
                    self.drop_stale(&mut loaded, &id, admitted_now, &mut report)
                        .await;
                    report.errors.push(found_err(e));
                    continue;
                }
            };
            let refused = |reason: String| PluginError::Refused {
                plugin: id.to_string(),
                path: f.wasm.clone(),
                reason,
            };
            let policy = match &policy {
                Ok(p) => p.clone(),
                Err(denied) => {
                    self.drop_stale(&mut loaded, &id, admitted_now, &mut report)
                        .await;
                    report.errors.push(found_err(refused(denied.to_string())));
                    continue;
                }
            };
            if loaded
                .get(&id)
                .is_some_and(|l| l.fingerprint == f.fingerprint && admitted_now(l))
            {
                continue;
            }
            let new = starting.entry(id.tenant.clone()).or_default();
            let running = loaded.keys().filter(|k| k.tenant == id.tenant).count() + *new;
            if !loaded.contains_key(&id) && running >= policy.max_plugins {
                let reason = format!(
                    "tenant `{}` already runs its maximum of {} plugins (`max-plugins` in informant.toml)",
                    id.tenant, policy.max_plugins
                );
                tracing::error!(plugin = %id.name, tenant = %id.tenant, "{reason}");
                report.errors.push(found_err(refused(reason)));
                continue;
            }
            if !loaded.contains_key(&id) {
                *new += 1;
            }
            wanted.push((id, f, policy));
        }
        let prepared = futures::future::join_all(
            wanted
                .iter()
                .map(|(id, f, policy)| self.prepare(id, f, policy, &config)),
        )
        .await;
        let waited = self.waiting.read().clone();
        let mut waiting = BTreeMap::new();
        for ((id, f, policy), prepared) in wanted.into_iter().zip(prepared) {
            match prepared {
                Ok(Prepared {
                    supervisor,
                    watches,
                    resync,
                    filter,
                    field_indexes,
                    wildcard,
                }) => {
                    if let Err(reason) = tenant_room(&loaded, &id, &policy, &watches, field_indexes)
                    {
                        supervisor.close();
                        for w in &watches {
                            self.factory.release(&w.informer);
                        }
                        let e = PluginError::Refused {
                            plugin: id.to_string(),
                            path: f.manifest.clone(),
                            reason,
                        };
                        tracing::error!(plugin = %id.name, tenant = %id.tenant, error = %e, "plugin not loaded");
                        report.errors.push((id, e));
                        continue;
                    }
                    self.wait_synced(&id, &watches).await;
                    let replaced = match loaded.remove(&id) {
                        Some(old) => {
                            self.publish(&loaded);
                            self.unregister(old).await;
                            true
                        }
                        None => false,
                    };
                    let mut kinds = Vec::with_capacity(watches.len());
                    let handles = watches
                        .into_iter()
                        .map(
                            |Watched {
                                 informer,
                                 resource,
                                 changes,
                                 kind,
                             }| {
                                let options = HandlerOptions {
                                    resync_period: resync,
                                    filter: filter.clone(),
                                    changes,
                                };
                                kinds.push(kind);
                                let h = register(
                                    &id,
                                    &supervisor,
                                    &policy,
                                    &informer,
                                    resource,
                                    options,
                                );
                                (informer, h)
                            },
                        )
                        .collect();
                    tracing::info!(plugin = %id.name, tenant = %id.tenant, version = &supervisor.version()[..12], replaced, "plugin loaded");
                    loaded.insert(
                        id.clone(),
                        Loaded {
                            supervisor,
                            fingerprint: f.fingerprint,
                            handles,
                            policy,
                            config: config.clone(),
                            field_indexes,
                            kinds,
                            wildcard,
                        },
                    );
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
                        let (w, changed) = Waiting::next(waited.get(&id), waiting_for, &e, version);
                        if changed {
                            tracing::warn!(plugin = %id.name, tenant = %id.tenant, waiting_for = %w.waiting_for, error = %e, kept_old_version = kept, "plugin waiting; retried with backoff and whenever CRDs change");
                        } else {
                            tracing::debug!(plugin = %id.name, tenant = %id.tenant, error = %e, attempts = w.attempts, "plugin still waiting");
                        }
                        waiting.insert(id.clone(), w);
                        report.waiting.push((id, e));
                        continue;
                    }
                    tracing::error!(plugin = %id.name, tenant = %id.tenant, error = %e, kept_old_version = kept, "plugin not loaded");
                    report.errors.push((id, e));
                }
            }
        }
        // Every waiting plugin was tried above, so what waits now is exactly what just waited.
        for id in waited.keys().filter(|id| !waiting.contains_key(*id)) {
            if !loaded.contains_key(id) && !report.errors.iter().any(|(e, _)| e == id) {
                tracing::info!(plugin = %id.name, tenant = %id.tenant, "plugin no longer waiting: it is gone");
            }
        }
        self.sync_crd_watch(&loaded).await;
        let count = waiting.len();
        *self.waiting.write() = waiting;
        self.waiting_count
            .send_if_modified(|c| std::mem::replace(c, count) != count);
        report
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
            self.unregister(old).await;
            tracing::info!(plugin = %id.name, tenant = %id.tenant, "plugin removed: the config it was admitted under changed");
            report.removed.push(id.clone());
        }
    }

    /// Unregisters every plugin.
    pub async fn shutdown(&self) {
        let mut loaded = self.loaded.lock().await;
        self.running.write().clear();
        self.waiting.write().clear();
        self.waiting_count.send_replace(0);
        let all = std::mem::take(&mut *loaded);
        // All at once: shutdown takes the longest in-flight call, not the sum of them.
        futures::future::join_all(all.into_values().map(|l| self.unregister(l))).await;
        self.sync_crd_watch(&loaded).await;
    }

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
    async fn sync_crd_watch(&self, loaded: &BTreeMap<PluginId, Loaded>) {
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
                    let h = informer.add_handler(
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
            self.factory.release(&informer);
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
        // Informers by address (as numbers, which stay `Send` across the awaits below).
        let mut per_tenant: HashMap<String, BTreeSet<usize>> = HashMap::new();
        for (id, l) in loaded.iter() {
            per_tenant
                .entry(id.tenant.clone())
                .or_default()
                .extend(l.handles.iter().map(|(i, _)| Arc::as_ptr(i) as usize));
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
            for (index, w) in wc.manifest.watch.iter().enumerate() {
                if !w.is_wildcard() {
                    continue;
                }
                let now = expand(w, &discovered, &l.policy.grant);
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
                        self.factory.release(&informer);
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
            if !changes.added.is_empty() || !changes.removed.is_empty() {
                tracing::info!(plugin = %id.name, tenant = %id.tenant, added = ?changes.added, removed = ?changes.removed, "wildcard watch re-expanded");
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
        used: &mut BTreeSet<usize>,
    ) -> bool {
        let mut any = false;
        for scope in crate::plugin::watch_scopes(w) {
            let informer = match self.factory.informer_for(resolved, scope) {
                Ok(i) => i,
                Err(e) => {
                    tracing::warn!(plugin = %id, resource = %name, error = %e, "wildcard watch cannot watch a new resource");
                    continue;
                }
            };
            let at = Arc::as_ptr(&informer) as usize;
            if !used.contains(&at) && used.len() >= l.policy.max_informers {
                self.factory.release(&informer);
                tracing::warn!(plugin = %id, resource = %name, max_informers = l.policy.max_informers, "wildcard watch skips a new resource: the tenant's plugins use their maximum of informers (`max-informers` in informant.toml)");
                continue;
            }
            used.insert(at);
            wc.cache
                .add_with_indexes(informer.store().clone(), w.field_indexes());
            let options = HandlerOptions {
                resync_period: wc.resync,
                filter: wc.filter.clone(),
                changes: wc.changes[index].clone(),
            };
            let resource = WitResource::from(&resolved.api_resource);
            let h = register(id, &l.supervisor, &l.policy, &informer, resource, options);
            l.handles.push((informer, h));
            l.kinds.push(Some((index, name.clone())));
            any = true;
        }
        self.factory.start();
        any
    }

    /// Starts the plugin's informers and waits (bounded) until all have synced, so its replay
    /// sees every cache it may query complete — a cross-kind check made during the replay must
    /// not find a half-listed kind.
    async fn wait_synced(&self, id: &PluginId, watches: &[Watched]) {
        self.factory.start();
        let informers: Vec<_> = watches.iter().map(|w| w.informer.clone()).collect();
        if let Err(e) = wait_all_synced(&informers, SYNC_WAIT).await {
            tracing::warn!(plugin = %id, error = %e, "registering the plugin anyway");
        }
    }

    /// Unregisters a version and releases its claims on informers (an informer a replacement
    /// has already claimed keeps running).
    /// Stops a version: no new call starts, its in-flight call (bounded by its deadline) ends,
    /// then its informer claims are released.
    async fn unregister(&self, old: Loaded) {
        old.supervisor.close();
        let (informers, handles): (Vec<_>, Vec<_>) = old.handles.into_iter().unzip();
        futures::future::join_all(handles.into_iter().map(ListenerHandle::shutdown)).await;
        for informer in &informers {
            self.factory.release(informer);
        }
    }

    /// Loads and starts one plugin version without registering it anywhere yet.
    async fn prepare(
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
        };
        let Admitted {
            memory_mib,
            deadline_ms,
        } = admit(&manifest, &id.tenant, policy, config, &facts).map_err(|refusals| {
            PluginError::Refused {
                plugin: id.to_string(),
                path: found.manifest.clone(),
                reason: describe(&refusals),
            }
        })?;
        let config_json = crate::plugin::load::secrets::resolve_config(&manifest, &id.tenant)
            .map_err(|(field, reason)| PluginError::Refused {
                plugin: id.to_string(),
                path: found.manifest.clone(),
                reason: format!("field `{field}`: {reason}"),
            })?;
        let (engine, name) = (self.engine.clone(), id.to_string());
        let (wasm, bytes) = (found.wasm.clone(), found.wasm_bytes.clone());
        let component =
            tokio::task::spawn_blocking(move || engine.load_bytes(&name, &wasm, &bytes))
                .await
                .map_err(|e| PluginError::Engine(e.to_string()))??;

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
                        cache.add_with_indexes(informer.store().clone(), w.field_indexes());
                        // Claimed from here on: a failure below releases it.
                        watches.push(Watched {
                            informer,
                            resource: WitResource::from(&resolved.api_resource),
                            changes: change_filter.clone(),
                            kind: name.clone().map(|n| (index, n)),
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
                retry: RetryPolicy::from_manifest(&manifest.retry),
                outbound: Arc::new(Outbound::new(
                    manifest.allowed_outbound_hosts.clone(),
                    u64::from(memory_mib) << 20,
                )),
                writer: Arc::new(Writer::new(
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
                supervisor,
                watches,
                resync: manifest.resync_period(),
                filter: grant.event_filter(),
                field_indexes: manifest.watch.iter().map(|w| w.indexes.len()).sum(),
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
            Err(e) => {
                for w in &watches {
                    self.factory.release(&w.informer);
                }
                Err(e)
            }
        }
    }
}

/// Whether the host limits a manifest is admitted against are the same.
fn same_limits(a: &HostConfig, b: &HostConfig) -> bool {
    let limits = |c: &HostConfig| {
        (
            c.default_memory_mib,
            c.max_memory_mib,
            c.default_deadline_ms,
            c.max_deadline_ms,
            c.max_watches,
            c.text,
        )
    };
    limits(a) == limits(b)
}

/// One informer a plugin version is to be registered with: one per namespace of a `[[watch]]`.
struct Watched {
    informer: Arc<SharedInformer>,
    resource: WitResource,
    /// The watch's `jq-filter` / `ignore`, if any.
    changes: Option<ChangeFilter>,
    /// For a wildcard watch's resource: the watch (index) and the resource's name.
    kind: Option<(usize, String)>,
}

/// A loaded, initialised plugin version, not yet receiving events.
struct Prepared {
    supervisor: Arc<Supervisor>,
    watches: Vec<Watched>,
    resync: Option<Duration>,
    filter: Option<EventFilter>,
    field_indexes: usize,
    wildcard: Option<Arc<WildcardWatches>>,
}

/// Registers `supervisor`'s handler for `resource` with `informer`, drawing from the tenant's
/// event budget if it has one (a retry is an event too: it draws like the events it repeats).
fn register(
    id: &PluginId,
    supervisor: &Arc<Supervisor>,
    policy: &TenantPolicy,
    informer: &Arc<SharedInformer>,
    resource: WitResource,
    options: HandlerOptions,
) -> ListenerHandle {
    let handler = supervisor.handler(resource, informer.store().clone(), policy.budget.clone());
    let name = id.to_string();
    match &policy.budget {
        Some(b) => informer.add_handler(&name, Budgeted::new(b.clone(), handler), options),
        None => informer.add_handler(&name, handler, options),
    }
}

/// Why `id`'s tenant has no room for a version using `watches` and declaring `field_indexes`,
/// next to its other running plugins (a running version of `id` itself is being replaced).
fn tenant_room(
    loaded: &BTreeMap<PluginId, Loaded>,
    id: &PluginId,
    policy: &TenantPolicy,
    watches: &[Watched],
    field_indexes: usize,
) -> Result<(), String> {
    let others = loaded
        .iter()
        .filter(|(k, _)| k.tenant == id.tenant && *k != id)
        .map(|(_, l)| l);
    let mut informers: Vec<*const SharedInformer> = Vec::new();
    let mut indexes = field_indexes;
    for l in others {
        informers.extend(l.handles.iter().map(|(i, _)| Arc::as_ptr(i)));
        indexes += l.field_indexes;
    }
    informers.extend(watches.iter().map(|w| Arc::as_ptr(&w.informer)));
    informers.sort();
    informers.dedup();
    let who = format!("tenant `{}`", id.tenant);
    if informers.len() > policy.max_informers {
        return Err(format!(
            "{who}'s plugins would use {} informers together; at most {} (`max-informers` in informant.toml)",
            informers.len(),
            policy.max_informers
        ));
    }
    if indexes > policy.max_field_indexes {
        return Err(format!(
            "{who}'s plugins would declare {indexes} field indexes together; at most {} (`max-field-indexes` in informant.toml)",
            policy.max_field_indexes
        ));
    }
    Ok(())
}

type Scan = BTreeMap<PluginId, Result<Found, PluginError>>;

/// Finds `NAME.wasm` + `NAME.toml` pairs at the top level and one level down (tenants).
///
/// Links are followed only when they stay in the directory holding them: a tenant's link to
/// another tenant's plugin, a tenant directory that is itself a link, or an operator link into
/// a tenant's directory would run someone's code under someone else's grant, so each is
/// refused with an error naming the link.
fn scan(dir: &Path, config: &HostConfig) -> Result<Scan, PluginError> {
    let mut out = Scan::new();
    let unreadable = |e: std::io::Error| PluginError::Load {
        plugin: "*".into(),
        path: dir.to_path_buf(),
        reason: format!("cannot read the plugins directory: {e}"),
    };
    let root = dir.canonicalize().map_err(unreadable)?;
    for entry in std::fs::read_dir(dir).map_err(unreadable)?.flatten() {
        let path = entry.path();
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        if file_type.is_symlink() && path.is_dir() {
            let tenant = entry.file_name().to_string_lossy().into_owned();
            let id = PluginId::directory(&tenant);
            let reason = format!(
                "tenant directory `{tenant}` is a link (to `{}`); links out of a tenant's directory are refused",
                std::fs::read_link(&path).unwrap_or_default().display()
            );
            out.insert(
                id.clone(),
                Err(PluginError::Refused {
                    plugin: id.to_string(),
                    path,
                    reason,
                }),
            );
        } else if file_type.is_dir() {
            let tenant = entry.file_name().to_string_lossy().into_owned();
            if let (Ok(inner), Ok(real)) = (std::fs::read_dir(&path), path.canonicalize()) {
                for e in inner.flatten() {
                    collect(&mut out, &tenant, &real, &e.path(), config);
                }
            }
        } else {
            collect(&mut out, "", &root, &path, config);
        }
    }
    Ok(out)
}

fn collect(out: &mut Scan, tenant: &str, real_dir: &Path, path: &Path, config: &HostConfig) {
    let (Some(stem), Some(ext)) = (path.file_stem(), path.extension()) else {
        return;
    };
    if ext != "wasm" && ext != "toml" {
        return;
    }
    let id = PluginId {
        tenant: tenant.to_string(),
        name: stem.to_string_lossy().into_owned(),
    };
    if out.contains_key(&id) {
        return;
    }
    let wasm = path.with_extension("wasm");
    let manifest = path.with_extension("toml");
    let missing = |p: &Path, what: &str| PluginError::Load {
        plugin: id.to_string(),
        path: p.to_path_buf(),
        reason: format!("missing {what}"),
    };
    let found = if !wasm.is_file() {
        Err(missing(&wasm, "the component (.wasm) for this manifest"))
    } else if !manifest.is_file() {
        Err(missing(
            &manifest,
            "the manifest (.toml) for this component",
        ))
    } else {
        read_within(
            &wasm,
            real_dir,
            &id,
            (config.max_wasm_bytes, "limits.max-wasm-mib"),
        )
        .and_then(|wasm_bytes| {
            let manifest_bytes = read_within(
                &manifest,
                real_dir,
                &id,
                (config.max_manifest_bytes, "limits.max-manifest-kib"),
            )?;
            Ok(Found {
                fingerprint: fingerprint(&wasm_bytes, &manifest_bytes),
                wasm,
                manifest,
                wasm_bytes: wasm_bytes.into(),
                manifest_bytes: manifest_bytes.into(),
            })
        })
    };
    out.insert(id, found);
}

/// Reads a plugin file found in `real_dir` (that directory, canonical), of at most `max` bytes
/// (`key` names the setting in errors). A symbolic link is followed only when it stays in
/// `real_dir`. The checks are made on the file actually opened, and the bytes returned are the
/// ones read through it, so a link swapped in between check and read cannot slip past.
///
/// Hard links: nothing tells where a file's other names are, and a name in one directory may
/// have been made by anyone able to link the file there (a tenant linking another tenant's or
/// the host's file into its own directory, to run it under its own grant or have the host read
/// what it could not). So a file with several names is loaded only from a directory whose
/// owner (uid) owns the file: that owner could read and copy the file anyway, so loading it
/// from there lends nobody anything; a name in any other directory is refused. Hence a tenant
/// that links another's file into its own directory cannot load it, and cannot freeze the
/// owner's updates either: the owner's own name still loads. One account owning every
/// directory (tenants writing through group or ACL grants) keeps the refusal of every file
/// with several names, whoever made them: copy files in, don't link them.
fn read_within(
    path: &Path,
    real_dir: &Path,
    id: &PluginId,
    (max, key): (u64, &str),
) -> Result<Vec<u8>, PluginError> {
    let unreadable = |e: std::io::Error| PluginError::Load {
        plugin: id.to_string(),
        path: path.to_path_buf(),
        reason: format!("cannot read: {e}"),
    };
    let mut file = open_nonblocking(path).map_err(unreadable)?;
    let opened = file.metadata().map_err(unreadable)?;
    let target = path.canonicalize().map_err(unreadable)?;
    let checked = std::fs::metadata(&target).map_err(unreadable)?;
    let changed = |reason: &str| PluginError::Load {
        plugin: id.to_string(),
        path: path.to_path_buf(),
        reason: format!("{reason} (it is read again on its next change)"),
    };
    if !opened.is_file() {
        return Err(changed("is not a regular file"));
    }
    if !same_file(&opened, &checked) {
        return Err(changed("changed while it was being read"));
    }
    let refused = |reason: String| PluginError::Refused {
        plugin: id.to_string(),
        path: path.to_path_buf(),
        reason,
    };
    let whose = if id.tenant.is_empty() {
        "the plugins directory's top level".to_string()
    } else {
        format!("tenant `{}`'s directory", id.tenant)
    };
    let links = hard_links(&opened);
    if links > 1 {
        let dir = std::fs::metadata(real_dir).map_err(unreadable)?;
        if let Some((file_owner, dir_owner)) = owners(&opened, &dir).filter(|(f, d)| f != d) {
            return Err(refused(format!(
                "it has {links} hard links and is owned by uid {file_owner}, not by uid \
                 {dir_owner} who owns {whose}; a file with several names loads only from a \
                 directory its owner owns, since another name may be in another tenant's \
                 directory (copy the file instead of linking it)"
            )));
        }
    }
    if target.parent() != Some(real_dir) {
        return Err(refused(format!(
            "it is a link to `{}`, outside {whose}; links out of a plugin's directory are refused",
            target.display()
        )));
    }
    let too_big = |len: u64| {
        refused(format!(
            "it is {len} bytes; this file may be at most {max} bytes (`{key}` in informant.toml)"
        ))
    };
    read_capped(&mut file, &opened, max)
        .map_err(unreadable)?
        .map_err(too_big)
}

/// Reads `file` (whose metadata is `opened`) if it holds at most `max` bytes; otherwise its
/// length. The length is the file's claim (a sparse file claims anything): it is never allocated
/// by, and reading stops one byte past `max` in case the file grows meanwhile.
pub(crate) fn read_capped(
    file: &mut std::fs::File,
    opened: &std::fs::Metadata,
    max: u64,
) -> std::io::Result<Result<Vec<u8>, u64>> {
    if opened.len() > max {
        return Ok(Err(opened.len()));
    }
    let mut bytes = Vec::with_capacity(opened.len() as usize);
    std::io::Read::read_to_end(&mut std::io::Read::take(file, max + 1), &mut bytes)?;
    if bytes.len() as u64 > max {
        return Ok(Err(bytes.len() as u64));
    }
    Ok(Ok(bytes))
}

/// Default largest `.wasm` the loader reads: components are a few MiB; anything far larger is
/// a mistake or an attack on the host's memory.
pub const MAX_PLUGIN_FILE_BYTES: u64 = 128 << 20;

/// Opens for reading without blocking on a FIFO swapped in for a plugin file (a tenant must not
/// be able to hang every reconcile); for regular files the flag changes nothing.
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    options.open(path)
}

#[cfg(unix)]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    (a.dev(), a.ino()) == (b.dev(), b.ino())
}

#[cfg(not(unix))]
fn same_file(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
    true
}

/// The uids owning `file` and `dir`; `None` where files have no owner (every file is then
/// treated as its directory's).
#[cfg(unix)]
fn owners(file: &std::fs::Metadata, dir: &std::fs::Metadata) -> Option<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    Some((file.uid(), dir.uid()))
}

#[cfg(not(unix))]
fn owners(_: &std::fs::Metadata, _: &std::fs::Metadata) -> Option<(u32, u32)> {
    None
}

#[cfg(unix)]
fn hard_links(m: &std::fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::nlink(m)
}

#[cfg(not(unix))]
fn hard_links(_: &std::fs::Metadata) -> u64 {
    1
}

fn fingerprint(wasm: &[u8], manifest: &[u8]) -> String {
    let mut h = Sha256::new();
    for bytes in [wasm, manifest] {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    }
    hex(&h.finalize())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    const SIZE: (u64, &str) = (MAX_PLUGIN_FILE_BYTES, "limits.max-wasm-mib");

    fn id() -> PluginId {
        PluginId {
            tenant: "a".into(),
            name: "p".into(),
        }
    }

    #[test]
    fn reads_files_and_links_that_stay_in_their_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("real.wasm"), b"bytes").unwrap();
        std::os::unix::fs::symlink("real.wasm", dir.join("p.wasm")).unwrap();
        let real = dir.canonicalize().unwrap();
        assert_eq!(
            read_within(&dir.join("real.wasm"), &real, &id(), SIZE).unwrap(),
            b"bytes"
        );
        assert_eq!(
            read_within(&dir.join("p.wasm"), &real, &id(), SIZE).unwrap(),
            b"bytes"
        );
    }

    #[test]
    fn refuses_a_link_out_of_its_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        std::fs::write(b.join("p.wasm"), b"b's plugin").unwrap();
        std::os::unix::fs::symlink(b.join("p.wasm"), a.join("p.wasm")).unwrap();
        let err =
            read_within(&a.join("p.wasm"), &a.canonicalize().unwrap(), &id(), SIZE).unwrap_err();
        let PluginError::Refused { path, reason, .. } = err else {
            panic!("expected a refusal, got {err:?}")
        };
        assert_eq!(path, a.join("p.wasm"));
        assert!(
            reason.contains("outside tenant `a`'s directory"),
            "{reason}"
        );
    }

    /// A sparse file claims any length without using the disk; the loader must not believe it.
    #[test]
    fn a_huge_sparse_file_is_refused_without_reading_it() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("p.wasm");
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(64 << 30).unwrap();
        let err = read_within(&path, &tmp.path().canonicalize().unwrap(), &id(), SIZE).unwrap_err();
        assert!(
            err.to_string()
                .contains("it is 68719476736 bytes; this file may be at most 134217728 bytes (`limits.max-wasm-mib`"),
            "{err}"
        );
    }

    /// Whether this process may give files away (root, with CAP_CHOWN); the ownership tests
    /// need two owners and skip, saying so, where they cannot have them.
    fn can_chown(dir: &Path) -> bool {
        let probe = dir.join("probe");
        std::fs::write(&probe, b"").unwrap();
        let ok = std::os::unix::fs::chown(&probe, Some(4242), None).is_ok();
        std::fs::remove_file(&probe).unwrap();
        if !ok {
            eprintln!("skipped: needs to chown files to another uid (run as root)");
        }
        ok
    }

    fn owned_by(path: &Path, uid: u32) {
        std::os::unix::fs::chown(path, Some(uid), None).unwrap();
    }

    /// a links b's component into its own directory: a cannot load it (b owns it, not a's
    /// directory's owner), and b's own name keeps loading, rewritten in place or not, so a's
    /// link freezes nothing of b's.
    #[test]
    fn another_directorys_hard_link_neither_loads_nor_freezes_the_owners_file() {
        let tmp = tempfile::tempdir().unwrap();
        if !can_chown(tmp.path()) {
            return;
        }
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        std::fs::write(b.join("p.wasm"), b"b's plugin").unwrap();
        let (a_uid, b_uid) = (4001, 4002);
        owned_by(&a, a_uid);
        owned_by(&b, b_uid);
        owned_by(&b.join("p.wasm"), b_uid);
        std::fs::hard_link(b.join("p.wasm"), a.join("p.wasm")).unwrap();
        let (a_real, b_real) = (a.canonicalize().unwrap(), b.canonicalize().unwrap());

        let err = read_within(&a.join("p.wasm"), &a_real, &id(), SIZE).unwrap_err();
        let PluginError::Refused { path, reason, .. } = err else {
            panic!("expected a refusal, got {err:?}")
        };
        assert_eq!(path, a.join("p.wasm"));
        assert!(
            reason.contains("it has 2 hard links and is owned by uid 4002, not by uid 4001 who owns tenant `a`'s directory"),
            "{reason}"
        );

        assert_eq!(
            read_within(&b.join("p.wasm"), &b_real, &id(), SIZE).unwrap(),
            b"b's plugin"
        );
        // b updates in place (as `cp` does): the new bytes load from b's directory.
        std::fs::write(b.join("p.wasm"), b"b's plugin, v2").unwrap();
        assert_eq!(
            read_within(&b.join("p.wasm"), &b_real, &id(), SIZE).unwrap(),
            b"b's plugin, v2"
        );
        assert!(read_within(&a.join("p.wasm"), &a_real, &id(), SIZE).is_err());
    }

    /// A host file (here root's) linked into a tenant's directory is not loaded there; a file
    /// the directory's owner links within its own directory is.
    #[test]
    fn a_hard_link_to_a_host_file_is_refused_and_ones_own_links_load() {
        let tmp = tempfile::tempdir().unwrap();
        if !can_chown(tmp.path()) {
            return;
        }
        let a = tmp.path().join("a");
        std::fs::create_dir(&a).unwrap();
        let host = tmp.path().join("host.wasm");
        std::fs::write(&host, b"the host's file").unwrap();
        owned_by(&host, 0);
        owned_by(&a, 4001);
        std::fs::hard_link(&host, a.join("p.wasm")).unwrap();
        let a_real = a.canonicalize().unwrap();
        let err = read_within(&a.join("p.wasm"), &a_real, &id(), SIZE).unwrap_err();
        assert!(
            err.to_string()
                .contains("is owned by uid 0, not by uid 4001"),
            "{err}"
        );

        std::fs::write(a.join("own.wasm"), b"a's plugin").unwrap();
        owned_by(&a.join("own.wasm"), 4001);
        std::fs::hard_link(a.join("own.wasm"), a.join("q.wasm")).unwrap();
        assert_eq!(
            read_within(&a.join("q.wasm"), &a_real, &id(), SIZE).unwrap(),
            b"a's plugin"
        );
    }

    /// Reading a FIFO would block the reconcile (every tenant's loads) until someone writes.
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("p.wasm");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates a file.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read_within(&fifo, &tmp.path().canonicalize().unwrap(), &id(), SIZE).unwrap_err();
        assert!(err.to_string().contains("is not a regular file"), "{err}");
    }
}
