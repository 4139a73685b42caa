//! One live plugin instance: a wasmtime `Store` with its memory cap, and calls into `init`,
//! `handle-queued` and `handle-schedule` under deadlines.
//!
//! Instances are long-lived (instantiation costs ~11 µs against a ~0.5 µs call) and recreated
//! only after a trap, a missed deadline or a reload.
//!
//! Every call is an async future bounded by `tokio::time::timeout`: the guest yields to the
//! executor at every epoch tick while it computes, and every host call it makes (WASI clocks
//! and polls, `cache`, `log`) is async, so a spinning guest and one blocked in `sleep` are cut
//! off alike at the deadline, without holding a thread. A cut-off instance is never used again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{broadcast, watch};
use wasmtime::Store;

use crate::backoff::Backoff;
use crate::informer::Event;
use crate::plugin::bindings::{Plugin, WitResource};
use crate::plugin::exec::engine::LoadedComponent;
use crate::plugin::imports::cache::CacheView;
use crate::plugin::imports::events::batch::{self, Taken, Tally};
use crate::plugin::imports::log::{LogRate, PluginLog, TextLimits};
use crate::plugin::imports::outbound::Outbound;
use crate::plugin::imports::state::State;
use crate::plugin::imports::write::PluginWrites;
use crate::plugin::metrics::PluginMetrics;
use crate::plugin::outcome::CallError;

/// Everything needed to create instances of one plugin version.
pub struct InstanceSpec {
    /// Plugin name.
    pub name: Arc<str>,
    /// Tenant (empty for operator plugins).
    pub tenant: Arc<str>,
    /// The compiled version.
    pub component: LoadedComponent,
    /// `init`'s argument.
    pub config_json: String,
    /// Linear memory cap.
    pub memory_bytes: usize,
    /// Deadline of `init`, and of each event.
    pub deadline: Duration,
    /// What `cache` may read.
    pub cache: Arc<CacheView>,
    /// Where `log` lines are broadcast.
    pub logs: broadcast::Sender<PluginLog>,
    /// What the plugin's own text may cost.
    pub text: TextLimits,
    /// The plugin version's log rate, shared by its instances.
    pub log_rate: Arc<LogRate>,
    /// Where its log lines are kept for `informant logs` (the plugin's, across versions).
    pub log_ring: Option<crate::plugin::logbook::LogRingClaim>,
    /// How `retry` answers are redelivered.
    pub retry: RetryPolicy,
    /// Where the plugin may send HTTP requests, and what it sent (shared by its instances).
    pub outbound: Arc<Outbound>,
    /// What the plugin may write, and what it wrote (shared by its instances).
    pub writer: Arc<PluginWrites>,
    /// The plugin version's own metrics (shared by its instances).
    pub metrics: Arc<PluginMetrics>,
}

/// How `retry` answers are redelivered (the manifest's `[retry]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Redeliveries of one object before its event counts as failed.
    pub max_attempts: u32,
    /// The first backoff; it doubles per attempt.
    pub initial_backoff: Duration,
    /// The longest backoff.
    pub max_backoff: Duration,
    /// Which failed events are kept as dead letters (when the host keeps any).
    pub dead_letters: crate::manifest::DeadLetters,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(60),
            dead_letters: crate::manifest::DeadLetters::default(),
        }
    }
}

impl RetryPolicy {
    /// The manifest's `[retry]`, defaults filled in.
    pub fn from_manifest(r: &crate::manifest::Retry) -> Self {
        let d = RetryPolicy::default();
        let ms = |v: Option<u32>, default: Duration| {
            v.map_or(default, |ms| Duration::from_millis(ms.into()))
        };
        RetryPolicy {
            max_attempts: r.max_attempts.unwrap_or(d.max_attempts),
            initial_backoff: ms(r.initial_backoff_ms, d.initial_backoff),
            max_backoff: ms(r.max_backoff_ms, d.max_backoff),
            dead_letters: r.dead_letter.unwrap_or_default(),
        }
    }

    /// The wait before redelivery `attempt` (from 1), and at least what the plugin asked.
    pub fn backoff(&self, attempt: u32, asked: Option<Duration>) -> Duration {
        let backoff = Backoff::new(self.initial_backoff, self.max_backoff);
        backoff
            .delay(attempt.saturating_sub(1))
            .max(asked.unwrap_or_default())
    }
}

/// A running instance.
pub struct Instance {
    store: Store<State>,
    bindings: Plugin,
    error_bytes: usize,
}

impl Instance {
    /// Instantiates the plugin (within the deadline, or [`INSTANTIATE_FLOOR`] if longer) and
    /// calls `init` with its config within the deadline.
    pub async fn create(spec: &InstanceSpec) -> Result<Self, CallError> {
        let mut store = new_store(spec, spec.writer.clone(), spec.outbound.clone());
        let deadline = spec.deadline;
        let error_bytes = spec.text.error_bytes;
        // Instantiating copies the component's memory image (tens of MiB for a Python or
        // TypeScript interpreter) and runs no plugin code but start functions: on a loaded
        // machine that alone can take longer than a tight event deadline, so it gets a floor of
        // its own. `init` is the plugin's code and gets the deadline.
        let instantiate = spec.component.pre.instantiate_async(&mut store);
        let bindings = within(deadline.max(INSTANTIATE_FLOOR), async {
            instantiate.await.map_err(classify)
        })
        .await
        .map_err(|e| e.bounded(error_bytes))?;
        let init = async {
            bindings
                .call_init(&mut store, &spec.config_json)
                .await
                .map_err(classify)?
                .map_err(CallError::Guest)
        };
        within(deadline, init)
            .await
            .map_err(|e| e.bounded(error_bytes))?;
        Ok(Instance {
            store,
            bindings,
            error_bytes,
        })
    }

    /// Delivers `events` of `resource` in one `handle-queued` call, each under its own
    /// deadline; `stop` set ends the call at the next event boundary. Outcomes the plugin
    /// reports are counted in `tally` as they come.
    ///
    /// After a fatal error ([`Batched::fatal`]) the instance must be dropped: a call cut off
    /// at its deadline leaves the guest mid-way.
    pub async fn handle_queued(
        &mut self,
        resource: &Arc<WitResource>,
        events: Vec<Event>,
        stop: &watch::Receiver<bool>,
        tally: &Arc<Tally>,
    ) -> Batched {
        let deadline = self
            .store
            .data_mut()
            .events
            .batch
            .begin(resource, events, stop, tally);
        // The next yield one tick from now, not from the last yield: left as it was, a deadline
        // an idle instance passed long ago made nearly every call yield on entry, sending the
        // plugin's batch to the back of the runtime's queue behind every other plugin's.
        self.store.set_epoch_deadline(1);
        let call = async {
            self.bindings
                .call_handle_queued(&mut self.store)
                .await
                .map_err(classify)
        };
        let result = deadline
            .bound(call)
            .await
            .map_err(|e| e.bounded(self.error_bytes));
        let (mut taken, in_hand, mut untaken) = self.store.data_mut().events.batch.end();
        let now = Instant::now();
        let mut fatal = result.err();
        // A request the plugin makes outside any event (a schedule tick) is nobody's child.
        self.store.data_mut().hooks.span = Default::default();
        if let Some((event, at, span)) = in_hand {
            // The event in hand is the one that failed, or the plugin returned without
            // reporting it.
            let error = fatal.clone().unwrap_or_else(|| {
                CallError::Guest("handle-queued returned without reporting its outcome".into())
            });
            taken.push(batch::taken(event, Err(error), at, now, span));
        } else if let Some(error) = &fatal {
            // Failed outside any event: before taking the first, or after reporting the last.
            match untaken.pop_front() {
                Some(first) => taken.push(batch::taken(
                    first,
                    Err(error.clone()),
                    now,
                    now,
                    Default::default(),
                )),
                // After the last report: that event was counted handled, and now also counts
                // as the failure that ends the instance.
                None => match taken.last_mut() {
                    Some(last) => {
                        last.result = Err(error.clone());
                        last.tallied = false;
                    }
                    None => fatal = None,
                },
            }
        }
        Batched {
            taken,
            untaken: untaken.into(),
            fatal: fatal.is_some(),
        }
    }
}

impl Instance {
    /// Calls `handle-schedule(name)` within `deadline`. After a fatal error the instance must
    /// be dropped, as after a failed `handle-queued`.
    pub async fn handle_schedule(
        &mut self,
        name: &str,
        deadline: Duration,
    ) -> Result<(), CallError> {
        // As for a batch: the first yield one tick from now, not from the last call.
        self.store.set_epoch_deadline(1);
        let call = async {
            self.bindings
                .call_handle_schedule(&mut self.store, name)
                .await
                .map_err(classify)?
                .map_err(CallError::Guest)
        };
        within(deadline, call)
            .await
            .map_err(|e| e.bounded(self.error_bytes))
    }
}

/// What one `handle-queued` call did.
#[derive(Debug)]
pub struct Batched {
    /// The events the plugin took (or that failed on its behalf), in order, with their outcomes.
    pub taken: Vec<Taken>,
    /// The events never handed out: the call failed, the plugin returned early, or `stop` was
    /// set.
    pub untaken: Vec<Event>,
    /// The instance failed (trap or deadline, attributed to the last of `taken`) and must go.
    pub fatal: bool,
}

/// A store for one instance of `spec`'s plugin, writing through `writer` and sending HTTP
/// through `outbound`, that yields to the executor at every epoch tick (deadlines are the
/// caller's timeouts).
pub(super) fn new_store(
    spec: &InstanceSpec,
    writer: Arc<PluginWrites>,
    outbound: Arc<Outbound>,
) -> Store<State> {
    let engine = spec.component.pre.engine();
    let state = State::new(
        spec.name.clone(),
        spec.tenant.clone(),
        spec.memory_bytes,
        spec.cache.clone(),
        spec.logs.clone(),
        (spec.text, spec.log_rate.clone()),
    )
    .with_outbound(outbound)
    .with_writer(writer)
    .with_metrics(spec.metrics.clone())
    .with_log_ring(spec.log_ring.as_ref().map(|w| w.ring().clone()))
    .with_deadline(spec.deadline);
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limits);
    store.set_epoch_deadline(1);
    store.epoch_deadline_async_yield_and_update(1);
    store
}

/// The least time instantiating a component gets, whatever the plugin's deadline.
pub(crate) const INSTANTIATE_FLOOR: Duration = Duration::from_secs(2);

/// Runs `call`, or fails with [`CallError::Deadline`] once `deadline` has passed.
pub(super) async fn within<T>(
    deadline: Duration,
    call: impl Future<Output = Result<T, CallError>>,
) -> Result<T, CallError> {
    tokio::time::timeout(deadline, call)
        .await
        .unwrap_or(Err(CallError::Deadline(deadline)))
}

pub(super) fn classify(e: wasmtime::Error) -> CallError {
    CallError::Trap(format!("{e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::imports::log::MAX_ERROR_BYTES;

    #[test]
    fn a_plugins_error_text_is_bounded_and_on_one_line() {
        let returned = format!("bad\nforged host line{}", "x".repeat(40 << 20));
        let CallError::Guest(kept) = CallError::Guest(returned).bounded(MAX_ERROR_BYTES) else {
            panic!("a returned error stays a guest error")
        };
        assert!(
            kept.starts_with("bad\\nforged host line"),
            "{}",
            &kept[..40]
        );
        assert!(kept.len() < MAX_ERROR_BYTES + 64, "{} bytes", kept.len());
        assert!(kept.ends_with(&format!("({} bytes in all)", (40 << 20) + 20)));
    }
}
