//! Admission calls into one plugin version: its `admission-hook` export, called in instances of
//! its own, never the instance that handles its events.
//!
//! Contract:
//! - Each request runs in an instance no concurrent request uses. Instances are made from the
//!   version's pre-instantiated component (on wasmtime's pooling allocator), get `init`, and are
//!   kept for the next request: at most `size` exist, so a full pool makes a request wait, and
//!   a request that gets no instance within its timeout fails as [`AdmitError::Busy`].
//! - A call is bounded by the request's timeout, instance creation included; a trap or a missed
//!   timeout drops that instance (the next request makes a fresh one). An error the plugin
//!   returns keeps it.
//! - During a call the plugin reads its cache view as during events; every `kube` write is
//!   denied and outbound HTTP refused: admission has no side effects.
//! - A request holds the [`Admitter`] of the version it started on: a hot swap sends the next
//!   requests to the new version and never mixes two versions in one request.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::Semaphore;
use wasmtime::Store;
use wasmtime::component::Instance as WasmInstance;

use crate::informer::ResolvedResource;
use crate::manifest::Admit;
use crate::manifest::admit::Operation;
use crate::plugin::bindings::PluginIndices;
use crate::plugin::bindings::admitting::exports::informant::plugin::admission_hook::{
    Guest as AdmissionHook, GuestIndices as AdmissionHookIndices,
};
use crate::plugin::bindings::admitting::informant::plugin::admission::{Request, Response};
use crate::plugin::exec::gate::Gate;
use crate::plugin::exec::histogram::DurationHistogram;
use crate::plugin::exec::instance::{INSTANTIATE_FLOOR, InstanceSpec, classify, new_store, within};
use crate::plugin::exec::supervisor::Supervisor;
use crate::plugin::imports::outbound::Outbound;
use crate::plugin::imports::state::State;
use crate::plugin::imports::write::PluginWrites;
use crate::plugin::outcome::CallError;
use crate::tenancy::Grant;

/// Why a write made during `admit` is denied.
pub(crate) const WRITES_REFUSED: &str =
    "writes are refused during admission: an admission hook has no side effects";

/// How many instances a plugin version keeps for admission at most, by default.
pub(crate) const DEFAULT_POOL: usize = 4;

/// Why an admission call gave no answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AdmitError {
    /// Every instance was busy for the whole timeout.
    #[error("no instance free within {0:?} (every one busy with another request)")]
    Busy(Duration),
    /// The plugin's informers had not synced within the timeout.
    #[error("its caches had not synced within {0:?}")]
    NotReady(Duration),
    /// Instantiating or `init` failed, or the call trapped, timed out or returned an error.
    #[error("{0}")]
    Call(#[from] CallError),
}

impl AdmitError {
    /// A short word for metrics: `busy`, `not-ready`, `timeout`, `trap` or `error`.
    pub fn reason(&self) -> &'static str {
        match self {
            AdmitError::Busy(_) => "busy",
            AdmitError::NotReady(_) => "not-ready",
            AdmitError::Call(CallError::Deadline(_)) => "timeout",
            AdmitError::Call(CallError::Trap(_)) => "trap",
            AdmitError::Call(CallError::Guest(_)) => "error",
        }
    }
}

/// One instance kept for admission calls.
struct Pooled {
    store: Store<State>,
    hook: AdmissionHook,
}

/// How an admission request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The plugin allowed it.
    Allow,
    /// The plugin denied it.
    Deny,
    /// The plugin gave no usable answer and the hook's `failure-policy = "fail"` refused it.
    Fail,
    /// The plugin gave no usable answer and `failure-policy = "ignore"` let it through.
    Ignore,
    /// Not the plugin's to judge (another kind or operation, or outside its tenant's grant):
    /// allowed without asking it.
    Skip,
}

impl Decision {
    /// Every decision, in the order metrics list them.
    pub const ALL: [Decision; 5] = [
        Decision::Allow,
        Decision::Deny,
        Decision::Fail,
        Decision::Ignore,
        Decision::Skip,
    ];

    /// The metrics label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::Fail => "fail",
            Decision::Ignore => "ignore",
            Decision::Skip => "skip",
        }
    }
}

/// Why a plugin gave no usable answer, as metrics count it: [`AdmitError::reason`]'s words and
/// `invalid` (an answer that did not hold up).
pub(crate) const FAILURE_REASONS: [&str; 6] =
    ["busy", "not-ready", "timeout", "trap", "error", "invalid"];

/// One hook's counters, for `/metrics`.
#[derive(Debug)]
pub struct HookStats {
    /// Requests by operation (create, update, delete, connect) and [`Decision`].
    requests: [[AtomicU64; 5]; 4],
    /// Failures by [`FAILURE_REASONS`].
    failures: [AtomicU64; 6],
    /// Time from the request's arrival to its answer, the plugin's and the queue's.
    pub duration: DurationHistogram,
}

impl Default for HookStats {
    fn default() -> Self {
        HookStats {
            requests: Default::default(),
            failures: Default::default(),
            // 0.25 ms to about 8 s, each bucket twice the one before.
            duration: DurationHistogram::exponential(250e-6, 2.0, 16),
        }
    }
}

impl HookStats {
    /// Counts one request.
    pub fn count(&self, operation: Operation, decision: Decision, failure: Option<&str>) {
        let d = Decision::ALL
            .iter()
            .position(|x| *x == decision)
            .unwrap_or(0);
        self.requests[operation as usize][d].fetch_add(1, Ordering::Relaxed);
        if let Some(i) = failure.and_then(|f| FAILURE_REASONS.iter().position(|r| *r == f)) {
            self.failures[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Requests of `operation` that ended as `decision`.
    pub fn requests(&self, operation: Operation, decision: Decision) -> u64 {
        let d = Decision::ALL
            .iter()
            .position(|x| *x == decision)
            .unwrap_or(0);
        self.requests[operation as usize][d].load(Ordering::Relaxed)
    }

    /// Failures for [`FAILURE_REASONS`]`[i]`.
    pub fn failures(&self, i: usize) -> u64 {
        self.failures[i].load(Ordering::Relaxed)
    }
}

/// One `[[admit]]` table, with the resource its kind resolved to.
#[derive(Debug)]
pub struct Hook {
    /// The table.
    pub table: Admit,
    /// Its kind as the API server serves it (plural name, scope).
    pub resource: ResolvedResource,
    /// What it answered.
    pub stats: HookStats,
}

/// One plugin version's admission: its hooks, instances of its own, and the gate its caches
/// open.
pub struct Admitter {
    hooks: Vec<Hook>,
    grant: Arc<Grant>,
    /// The version's supervisor, whose instance spec admission instances are made from.
    supervisor: Arc<Supervisor>,
    plugin: PluginIndices,
    hook: AdmissionHookIndices,
    writes: Arc<PluginWrites>,
    outbound: Arc<Outbound>,
    gate: Mutex<Option<Gate>>,
    idle: Mutex<Vec<Pooled>>,
    slots: Semaphore,
    size: usize,
}

impl Admitter {
    /// Admission for `supervisor`'s version, with up to `size` instances; `None` when its
    /// component has no `admission-hook` export.
    pub fn new(
        supervisor: &Arc<Supervisor>,
        hooks: Vec<(Admit, ResolvedResource)>,
        grant: Arc<Grant>,
        size: usize,
    ) -> Option<Arc<Admitter>> {
        let component = &supervisor.spec.component;
        let hook = component.admission_hook.clone()?;
        let plugin = PluginIndices::new(component.pre.instance_pre()).ok()?;
        let size = size.max(1);
        Some(Arc::new(Admitter {
            hooks: hooks
                .into_iter()
                .map(|(table, resource)| Hook {
                    table,
                    resource,
                    stats: HookStats::default(),
                })
                .collect(),
            grant,
            supervisor: supervisor.clone(),
            plugin,
            hook,
            writes: Arc::new(PluginWrites::refusing(WRITES_REFUSED)),
            outbound: Arc::new(Outbound::default()),
            gate: Mutex::new(None),
            idle: Mutex::new(Vec::new()),
            slots: Semaphore::new(size),
            size,
        }))
    }

    fn spec(&self) -> &InstanceSpec {
        &self.supervisor.spec
    }

    /// Its hooks, in manifest order.
    pub fn hooks(&self) -> &[Hook] {
        &self.hooks
    }

    /// The hook named `name`.
    pub fn hook(&self, name: &str) -> Option<&Hook> {
        self.hooks.iter().find(|h| h.table.name.as_str() == name)
    }

    /// What its tenant was granted: requests outside it never reach the plugin.
    pub fn grant(&self) -> &Arc<Grant> {
        &self.grant
    }

    /// Holds requests until `gate` opens (the version's informers have synced).
    pub fn set_gate(&self, gate: Gate) {
        *self.gate.lock() = Some(gate);
    }

    /// Makes one instance ahead of the first request, in the background: an interpreter's
    /// memory image (Python, TypeScript) can take longer to instantiate than a hook's timeout.
    /// A failure here is left to the first request to meet, and report.
    pub fn warm(self: &Arc<Self>) {
        let admitter = Arc::downgrade(self);
        tokio::spawn(async move {
            let Some(a) = admitter.upgrade() else { return };
            if let Ok(pooled) = a.instantiate(INSTANTIATE_FLOOR).await {
                let mut idle = a.idle.lock();
                if idle.len() < a.size {
                    idle.push(pooled);
                }
            }
        });
    }

    /// The most instances it keeps.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The instances idle now.
    pub fn idle(&self) -> usize {
        self.idle.lock().len()
    }

    /// The plugin version (the wasm's sha256).
    pub fn version(&self) -> &str {
        &self.spec().component.sha256
    }

    /// Answers `request` within `timeout`: waiting for the caches and an instance comes out of
    /// the same time.
    pub async fn admit(
        &self,
        request: &Request,
        timeout: Duration,
    ) -> Result<Response, AdmitError> {
        let start = Instant::now();
        let left = || timeout.saturating_sub(start.elapsed());
        let gate = self.gate.lock().clone();
        if let Some(mut gate) = gate.filter(|g| !g.is_open()) {
            tokio::time::timeout(timeout, gate.opened())
                .await
                .map_err(|_| AdmitError::NotReady(timeout))?;
        }
        let _slot = tokio::time::timeout(left(), self.slots.acquire())
            .await
            .map_err(|_| AdmitError::Busy(timeout))?
            .expect("the semaphore is never closed");
        let pooled = self.idle.lock().pop();
        let mut pooled = match pooled {
            Some(p) => p,
            None => self.instantiate(left()).await?,
        };
        pooled.store.set_epoch_deadline(1);
        let error_bytes = self.spec().text.error_bytes;
        let call = async {
            pooled
                .hook
                .call_admit(&mut pooled.store, request)
                .await
                .map_err(classify)?
                .map_err(CallError::Guest)
        };
        let result = within(left(), call)
            .await
            .map_err(|e| e.bounded(error_bytes));
        match &result {
            Err(e) if e.is_fatal() => {}
            _ => self.idle.lock().push(pooled),
        }
        Ok(result?)
    }

    /// A fresh instance, with `init` called, within `time`.
    async fn instantiate(&self, time: Duration) -> Result<Pooled, AdmitError> {
        let spec = self.spec();
        let mut store = new_store(spec, self.writes.clone(), self.outbound.clone());
        let pre = spec.component.pre.instance_pre().clone();
        let error_bytes = spec.text.error_bytes;
        let made = async {
            let instance: WasmInstance =
                pre.instantiate_async(&mut store).await.map_err(classify)?;
            let plugin = self.plugin.load(&mut store, &instance).map_err(classify)?;
            let hook = self.hook.load(&mut store, &instance).map_err(classify)?;
            plugin
                .call_init(&mut store, &spec.config_json)
                .await
                .map_err(classify)?
                .map_err(CallError::Guest)?;
            Ok(hook)
        };
        let hook = within(time, made)
            .await
            .map_err(|e| e.bounded(error_bytes))?;
        Ok(Pooled { store, hook })
    }
}
