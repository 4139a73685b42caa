//! Failure containment for one plugin version: the [`Handler`] that feeds its instance.
//!
//! Contract:
//! - A trap or a missed deadline fails that event for this plugin only: it is counted and logged
//!   with the plugin's name and the object key, and the instance is dropped.
//! - The next event recreates the instance after an exponential backoff (events wait, coalesced,
//!   in this plugin's own queue; nobody else waits).
//! - Failures count as consecutive until the plugin handles `healthy_after` events in a row, so
//!   a plugin that traps every few events is still quarantined after `quarantine_after` of them.
//! - Quarantined plugins drop their events and are reported as such.
//! - An error *returned* by the plugin is counted and logged; the instance stays.
//! - A `retry` answer redelivers the object's latest state after a per-object exponential
//!   backoff ([`RetryPolicy`](crate::plugin::exec::instance::RetryPolicy)); a newer event for the object replaces the pending retry, and
//!   past `max-attempts` the event counts as failed.
//! - An event failed for good goes to the handler's dead-letter sink, if it has one (see
//!   [`dead_letter`](crate::plugin::exec::dead_letter) for which).
//! - A handler's queued events go to the plugin in one `handle-queued` call per wake-up; each
//!   event is bounded by its own deadline, and a failure is the failure of the event in hand:
//!   those before it keep their outcomes, those after it go to the next instance.
//! - Calls are async and bounded by their deadlines; they never hold a runtime worker or a
//!   lock anyone outside this plugin waits on. The instance sits behind an async mutex that
//!   only this plugin's own handlers (one per watched informer) take, one call at a time.
//! - Schedule ticks ([`scheduler`](crate::plugin::exec::scheduler)) take the same lock: a tick
//!   and a batch never run at once, and a tick's trap or missed deadline counts toward restart
//!   and quarantine like an event's (but not in the event counters).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::watch;
use tracing::Instrument;

use crate::backoff::Backoff;
use crate::informer::{Event, Handler, Holds, Store};
use crate::plugin::bindings::WitResource;
use crate::plugin::exec::dead_letter::DeadLetterSink;
use crate::plugin::exec::gate::Gate;
use crate::plugin::exec::histogram::DurationHistogram;
use crate::plugin::exec::instance::{Instance, InstanceSpec};
use crate::plugin::exec::retries::{Retries, deliver};
use crate::plugin::exec::scheduler::{self, ScheduleStats, TickOutcome};
use crate::plugin::imports::events::batch::{Taken, Tally};
use crate::plugin::outcome::{CallError, Handled};
use crate::tenancy::Budget;

/// Restart and quarantine policy.
#[derive(Debug, Clone)]
pub struct RestartPolicy {
    /// Backoff before the first restart; doubles per consecutive failure.
    pub initial_backoff: Duration,
    /// Backoff ceiling.
    pub max_backoff: Duration,
    /// Consecutive failures that quarantine the plugin.
    pub quarantine_after: u32,
    /// Successes in a row that clear the failure count.
    pub healthy_after: u32,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(30),
            quarantine_after: 5,
            healthy_after: 10,
        }
    }
}

/// Where a plugin stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PluginState {
    /// Handling events.
    Running,
    /// Waiting to recreate its instance after a failure.
    BackingOff,
    /// Stopped after too many failures; events are dropped.
    Quarantined,
    /// Not loaded yet: a kind it watches is not served yet, or the API server did not answer
    /// discovery; retried until it loads. Never a supervisor's state, only the host's (see
    /// [`PluginHost::status`](crate::plugin::load::loader::PluginHost::status)).
    Waiting,
    /// Not loaded: its files were refused (a link out of its directory, a hard link, a quota,
    /// an invalid manifest...); tried again on its next change. Never a supervisor's state.
    Refused,
}

/// What [`Supervisor::ready_instance`] found.
enum Ready<'a> {
    /// A live instance to call.
    Instance(&'a mut Instance),
    /// Closed while waiting out the backoff.
    Closed,
    /// Recreating the instance failed.
    Failed(CallError),
}

struct Inner {
    instance: Option<Instance>,
    consecutive_failures: u32,
    successes_in_row: u32,
    restart_at: Option<Instant>,
}

/// Runs one plugin version's instance for all of its handlers (one per watched informer).
pub struct Supervisor {
    pub(super) spec: InstanceSpec,
    policy: RestartPolicy,
    inner: tokio::sync::Mutex<Inner>,
    tally: Arc<Tally>,
    dropped: AtomicU64,
    pub(super) retried: AtomicU64,
    latency: DurationHistogram,
    dispatch: DurationHistogram,
    state_tx: watch::Sender<PluginState>,
    /// When the state last changed (or the version started).
    since: Mutex<jiff::Timestamp>,
    pub(super) closed: watch::Sender<bool>,
    /// The `[[schedule]]` counters, once the schedules are started.
    schedules: std::sync::OnceLock<Vec<Arc<ScheduleStats>>>,
    /// Every call into this version, and what its host imports log, happens in this span.
    pub(super) span: tracing::Span,
}

impl Supervisor {
    /// Creates the first instance now, so a plugin whose `init` fails (or misses its deadline)
    /// is refused at load.
    pub async fn start(spec: InstanceSpec, policy: RestartPolicy) -> Result<Arc<Self>, CallError> {
        // A root span: events arrive long after the load that started the version.
        let span = tracing::info_span!(
            parent: None,
            "plugin",
            plugin = %spec.name,
            tenant = %spec.tenant,
            version = %&spec.component.sha256[..12.min(spec.component.sha256.len())],
        );
        let instance = Instance::create(&spec).instrument(span.clone()).await?;
        let tally = Arc::new(Tally::default());
        Ok(Arc::new(Supervisor {
            tally,
            spec,
            policy,
            inner: tokio::sync::Mutex::new(Inner {
                instance: Some(instance),
                consecutive_failures: 0,
                successes_in_row: 0,
                restart_at: None,
            }),
            dropped: AtomicU64::new(0),
            retried: AtomicU64::new(0),
            latency: latency_histogram(),
            dispatch: dispatch_histogram(),
            state_tx: watch::channel(PluginState::Running).0,
            since: Mutex::new(jiff::Timestamp::now()),
            closed: watch::channel(false).0,
            schedules: std::sync::OnceLock::new(),
            span,
        }))
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The version's sha256.
    pub fn version(&self) -> &str {
        &self.spec.component.sha256
    }

    /// Current state.
    pub fn state(&self) -> PluginState {
        *self.state_tx.borrow()
    }

    /// Follows state changes (running, backing off, quarantined).
    pub fn subscribe_state(&self) -> watch::Receiver<PluginState> {
        self.state_tx.subscribe()
    }

    /// The most recent failure, as logged.
    pub fn last_error(&self) -> Option<String> {
        self.tally.last_error()
    }

    fn set_state(&self, state: PluginState) {
        if self.state_tx.send_replace(state) != state {
            *self.since.lock() = jiff::Timestamp::now();
        }
    }

    /// When it entered its current state: the version's start, or its last change of state.
    pub fn since(&self) -> jiff::Timestamp {
        *self.since.lock()
    }

    /// Events handled successfully.
    pub fn handled(&self) -> u64 {
        self.tally.handled()
    }

    /// Events that failed (trap, deadline or returned error).
    pub fn failed(&self) -> u64 {
        self.tally.failed()
    }

    /// Events dropped unseen because the plugin was quarantined.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// The version's outbound HTTP counters (requests, failures, denied, bytes).
    pub fn outbound(&self) -> &crate::plugin::imports::outbound::OutboundStats {
        &self.spec.outbound.stats
    }

    /// The version's write counters (by call and outcome).
    pub fn writes(&self) -> &crate::plugin::imports::write::WriteStats {
        &self.spec.writer.stats
    }

    /// The plugin version's own metrics (the `metrics` import's series).
    pub fn metrics(&self) -> &Arc<crate::plugin::metrics::PluginMetrics> {
        &self.spec.metrics
    }

    /// Redeliveries scheduled because the plugin answered `retry`.
    pub fn retried(&self) -> u64 {
        self.retried.load(Ordering::Relaxed)
    }

    /// Seconds each event took, from the plugin taking it to its outcome, whatever that was.
    pub fn latency(&self) -> &DurationHistogram {
        &self.latency
    }

    /// Seconds each event waited, from the informer receiving it to the plugin taking it
    /// (initial events not counted).
    pub fn dispatch(&self) -> &DurationHistogram {
        &self.dispatch
    }

    /// A handler feeding this supervisor events of one resource, held in `store` (where a
    /// retry finds the object's latest state); its retries draw from `budget` (the tenant's
    /// event rate) like the events they repeat.
    pub fn handler(
        self: &Arc<Self>,
        resource: WitResource,
        store: Arc<Store>,
        budget: Option<Arc<Budget>>,
        holds: Holds,
    ) -> PluginHandler {
        PluginHandler {
            supervisor: self.clone(),
            resource: Arc::new(resource),
            retries: Arc::new(Retries::new(store, budget, holds)),
        }
    }

    /// Starts the version's `[[schedule]]` timers once `gate` opens (its caches settled); they
    /// stop when it is closed. Only the first call starts any.
    pub fn start_schedules(self: &Arc<Self>, schedules: &[crate::manifest::Schedule], gate: Gate) {
        if schedules.is_empty() || self.schedules.get().is_some() {
            return;
        }
        let stats = scheduler::start(self, schedules, gate);
        let _ = self.schedules.set(stats);
    }

    /// Each schedule's tick counts (none before [`Supervisor::start_schedules`]).
    pub fn schedules(&self) -> &[Arc<ScheduleStats>] {
        self.schedules.get().map_or(&[], Vec::as_slice)
    }

    /// The span every call into this version runs in.
    pub(crate) fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// Set once the version is closed.
    pub(crate) fn closed(&self) -> watch::Receiver<bool> {
        self.closed.subscribe()
    }

    /// Calls `handle-schedule(name)`: waits for the plugin's other calls and any restart
    /// backoff, recreates the instance if needed, and calls it under the plugin's deadline.
    /// Skipped while quarantined or closed.
    pub(crate) async fn tick(&self, name: &str) -> TickOutcome {
        let mut inner = self.inner.lock().await;
        let mut closed = self.closed.subscribe();
        let key = format!("schedule `{name}`");
        if *closed.borrow() || self.state() == PluginState::Quarantined {
            return TickOutcome::Skipped;
        }
        let instance = match self.ready_instance(&mut inner, &mut closed).await {
            Ready::Instance(instance) => instance,
            Ready::Closed => return TickOutcome::Skipped,
            Ready::Failed(e) => {
                self.tally.note(&key, "init", &e);
                self.after_failure(&mut inner, &key, &e, "init");
                return TickOutcome::Error;
            }
        };
        match instance.handle_schedule(name, self.spec.deadline).await {
            Ok(()) => {
                self.succeeded(&mut inner);
                TickOutcome::Ok
            }
            Err(e) => {
                self.tally.note(&key, "schedule", &e);
                self.after_failure(&mut inner, &key, &e, "schedule");
                TickOutcome::Error
            }
        }
    }

    /// Starts no call from now on (the version is being unregistered); a call in flight ends
    /// within its deadline.
    pub fn close(&self) {
        self.closed.send_replace(true);
    }

    /// Delivers `events` in order: waits out a restart backoff, recreates the instance if
    /// needed, and hands them to one `handle-queued` call, each under its own deadline; after a
    /// failure the events not yet taken go to the next instance. Only this plugin's own handlers
    /// wait for it.
    pub(super) async fn deliver(
        &self,
        resource: &Arc<WitResource>,
        mut events: Vec<Event>,
    ) -> Vec<(Event, Delivered)> {
        let mut out = Vec::with_capacity(events.len());
        let mut inner = self.inner.lock().await;
        let mut closed = self.closed.subscribe();
        while !events.is_empty() {
            if *closed.borrow() {
                out.extend(events.drain(..).map(|e| (e, Delivered::Dropped)));
                break;
            }
            if self.state() == PluginState::Quarantined {
                self.dropped
                    .fetch_add(events.len() as u64, Ordering::Relaxed);
                out.extend(events.drain(..).map(|e| (e, Delivered::Dropped)));
                break;
            }
            let instance = match self.ready_instance(&mut inner, &mut closed).await {
                Ready::Instance(instance) => instance,
                Ready::Closed => continue,
                Ready::Failed(e) => {
                    let first = events.remove(0);
                    self.fail(&mut inner, &first, &e, "init");
                    out.push((first, Delivered::Failed(format!("init: {e}"))));
                    continue;
                }
            };
            let batched = instance
                .handle_queued(resource, std::mem::take(&mut events), &closed, &self.tally)
                .await;
            for taken in batched.taken {
                self.latency.observe(taken.took);
                if let Some(waited) = taken.waited {
                    self.dispatch.observe(waited);
                }
                out.push(self.settle(&mut inner, taken));
            }
            events = batched.untaken;
            if !batched.fatal && !*closed.borrow() {
                // The plugin returned before taking them: failing them keeps a plugin that
                // never takes its events from being called forever.
                let skipped = CallError::Guest("handle-queued returned before taking it".into());
                for event in events.drain(..) {
                    self.fail(&mut inner, &event, &skipped, "handle");
                    out.push((event, Delivered::Failed(skipped.to_string())));
                }
            }
        }
        out
    }

    /// The instance to call: waits out a restart backoff (only this plugin's calls wait, and
    /// unregistering does not wait for it), then recreates the instance if a failure dropped it.
    async fn ready_instance<'a>(
        &self,
        inner: &'a mut Inner,
        closed: &mut watch::Receiver<bool>,
    ) -> Ready<'a> {
        if let Some(wait) = inner
            .restart_at
            .and_then(|at| at.checked_duration_since(Instant::now()))
        {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = closed.wait_for(|c| *c) => return Ready::Closed,
            }
        }
        let instance = match inner.instance.take() {
            Some(instance) => instance,
            None => match Instance::create(&self.spec).await {
                Ok(i) => {
                    tracing::info!(parent: &self.span, "plugin instance recreated");
                    self.set_state(PluginState::Running);
                    inner.restart_at = None;
                    i
                }
                Err(e) => return Ready::Failed(e),
            },
        };
        Ready::Instance(inner.instance.insert(instance))
    }

    /// Settles one event's outcome (counting it, unless the plugin's report already did).
    fn settle(&self, inner: &mut Inner, mut taken: Taken) -> (Event, Delivered) {
        std::mem::take(&mut taken.span).end(&taken.result);
        let delivered = match taken.result {
            Ok(handled) => {
                self.succeeded(inner);
                match handled {
                    Handled::Done => {
                        if !taken.tallied {
                            self.tally.done();
                        }
                        Delivered::Done
                    }
                    Handled::Retry { reason, after } => Delivered::Retry { reason, after },
                }
            }
            Err(e) if taken.tallied => Delivered::Failed(e.to_string()),
            Err(e) => {
                self.fail(inner, &taken.event, &e, "handle");
                Delivered::Failed(e.to_string())
            }
        };
        (taken.event, delivered)
    }

    /// Counts an event whose retries ran out as failed (the instance is healthy), and hands it
    /// to `dead_letters`.
    pub(super) fn give_up(
        &self,
        event: &Event,
        attempts: u32,
        reason: &str,
        dead_letters: Option<&DeadLetterSink>,
    ) {
        let key = event.key().as_str();
        let error = format!("gave up after {attempts} retries: {reason}");
        tracing::warn!(parent: &self.span, key, error, "plugin failed an event");
        self.tally.fail(key, "handle", &error);
        if let Some(sink) = dead_letters {
            sink.send(event, error, attempts + 1);
        }
    }

    /// One call succeeded: enough of them in a row clear the failure count.
    fn succeeded(&self, inner: &mut Inner) {
        inner.successes_in_row += 1;
        if inner.successes_in_row >= self.policy.healthy_after {
            inner.consecutive_failures = 0;
        }
    }

    fn fail(&self, inner: &mut Inner, event: &Event, error: &CallError, call: &str) {
        let key = event.key().as_str();
        // The state first: whoever sees the failure counted sees what it did to the plugin.
        self.after_failure(inner, key, error, call);
        self.tally.fail(key, call, error);
    }

    /// After a failed call (`call` of `key`): logs it and, when the instance is unusable, drops
    /// it and backs off, or quarantines the plugin.
    fn after_failure(&self, inner: &mut Inner, key: &str, error: &CallError, call: &str) {
        if !error.is_fatal() {
            tracing::warn!(parent: &self.span, key, call, error = %error, "plugin failed an event");
            return;
        }
        inner.instance = None;
        inner.successes_in_row = 0;
        inner.consecutive_failures += 1;
        if inner.consecutive_failures >= self.policy.quarantine_after {
            self.set_state(PluginState::Quarantined);
            tracing::error!(parent: &self.span, key, call, error = %error, failures = inner.consecutive_failures, "plugin quarantined");
            return;
        }
        let backoff = Backoff::new(self.policy.initial_backoff, self.policy.max_backoff)
            .delay(inner.consecutive_failures.saturating_sub(1));
        self.set_state(PluginState::BackingOff);
        inner.restart_at = Some(Instant::now() + backoff);
        tracing::warn!(parent: &self.span, key, call, error = %error, ?backoff, "plugin failed an event; restarting after backoff");
    }
}

/// What became of one delivery.
pub(super) enum Delivered {
    Done,
    /// Failed, with the error.
    Failed(String),
    /// Not delivered: the plugin is quarantined or being removed.
    Dropped,
    Retry {
        reason: String,
        after: Option<Duration>,
    },
}

/// Feeds one informer's events to a plugin's [`Supervisor`].
pub struct PluginHandler {
    supervisor: Arc<Supervisor>,
    resource: Arc<WitResource>,
    retries: Arc<Retries>,
}

impl PluginHandler {
    /// Hands the events this handler's plugin fails for good to `sink` (see
    /// [`dead_letter`](crate::plugin::exec::dead_letter)); only the first sink set is used.
    pub fn with_dead_letters(self, sink: DeadLetterSink) -> Self {
        self.retries.set_dead_letters(sink);
        self
    }
}

impl Handler for PluginHandler {
    async fn handle(&mut self, event: Event) {
        self.handle_batch(vec![event]).await;
    }

    async fn handle_batch(&mut self, events: Vec<Event>) {
        // Newer than anything a pending retry would redeliver: they replace those retries.
        self.retries.supersede(events.iter().map(Event::key));
        deliver(&self.supervisor, &self.resource, &self.retries, events).await;
    }
}

/// Buckets √2 apart from ~15.6 µs up to ~4.1 s, with 1 ms and every power of two of it exactly
/// among the bounds, so a target such as "p99 under 1 ms" is read straight off `/metrics`.
fn dispatch_histogram() -> DurationHistogram {
    DurationHistogram::with_bounds((-12..25).map(|k: i32| {
        let octave = 1e-3 * 2f64.powi(k.div_euclid(2));
        if k % 2 == 0 {
            octave
        } else {
            octave * std::f64::consts::SQRT_2
        }
    }))
}

/// Buckets from 25 µs (a trivial plugin) doubling up to ~6.5 s (past the default deadline, below
/// the 10 s ceiling's last bucket, +Inf).
fn latency_histogram() -> DurationHistogram {
    DurationHistogram::exponential(25e-6, 2.0, 19)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatch_buckets_have_one_millisecond_exactly_and_split_each_octave_once() {
        let bounds: Vec<f64> = dispatch_histogram()
            .buckets()
            .into_iter()
            .map(|(b, _)| b)
            .filter(|b| *b < f64::MAX)
            .collect();
        assert_eq!(bounds.len(), 37);
        for exact in [0.000_125, 0.000_25, 0.000_5, 0.001, 0.002, 0.004] {
            assert!(bounds.contains(&exact), "{exact} in {bounds:?}");
        }
        assert!(
            bounds
                .windows(2)
                .all(|w| (w[1] / w[0] - 2f64.sqrt()).abs() < 1e-12)
        );
        assert!(bounds[0] < 16e-6 && bounds[36] > 4.0, "{bounds:?}");
    }
}
