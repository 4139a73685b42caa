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
//! - Calls are async and bounded by their deadline; they never hold a runtime worker or a
//!   lock anyone outside this plugin waits on. The instance sits behind an async mutex that
//!   only this plugin's own handlers (one per watched informer) take, one call at a time.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use tokio::sync::watch;

use super::host::WitResource;
use super::instance::{CallError, Instance, InstanceSpec};
use crate::informer::{Event, Handler};

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
    /// [`PluginHost::status`](super::PluginHost::status)).
    Waiting,
}

struct Inner {
    instance: Option<Instance>,
    consecutive_failures: u32,
    successes_in_row: u32,
    restart_at: Option<Instant>,
}

/// Runs one plugin version's instance for all of its handlers (one per watched informer).
pub struct Supervisor {
    spec: InstanceSpec,
    policy: RestartPolicy,
    inner: tokio::sync::Mutex<Inner>,
    handled: AtomicU64,
    failed: AtomicU64,
    dropped: AtomicU64,
    latency: Histogram,
    state_tx: watch::Sender<PluginState>,
    last_error: Mutex<Option<String>>,
    closed: watch::Sender<bool>,
}

impl Supervisor {
    /// Creates the first instance now, so a plugin whose `init` fails (or misses its deadline)
    /// is refused at load.
    pub async fn start(spec: InstanceSpec, policy: RestartPolicy) -> Result<Arc<Self>, CallError> {
        let instance = Instance::create(&spec).await?;
        Ok(Arc::new(Supervisor {
            spec,
            policy,
            inner: tokio::sync::Mutex::new(Inner {
                instance: Some(instance),
                consecutive_failures: 0,
                successes_in_row: 0,
                restart_at: None,
            }),
            handled: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            latency: latency_histogram(),
            state_tx: watch::channel(PluginState::Running).0,
            last_error: Mutex::new(None),
            closed: watch::channel(false).0,
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
        self.last_error.lock().clone()
    }

    fn set_state(&self, state: PluginState) {
        self.state_tx.send_replace(state);
    }

    /// Events handled successfully.
    pub fn handled(&self) -> u64 {
        self.handled.load(Ordering::Relaxed)
    }

    /// Events that failed (trap, deadline or returned error).
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Events dropped unseen because the plugin was quarantined.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Seconds each `handle` call took (conversion to the WIT event included), whatever its outcome.
    pub fn latency(&self) -> &Histogram {
        &self.latency
    }

    /// A handler feeding this supervisor events of one resource.
    pub fn handler(self: &Arc<Self>, resource: WitResource) -> PluginHandler {
        PluginHandler {
            supervisor: self.clone(),
            resource,
        }
    }

    /// Starts no call from now on (the version is being unregistered); a call in flight ends
    /// within its deadline.
    pub fn close(&self) {
        self.closed.send_replace(true);
    }

    /// Delivers one event: waits out a restart backoff, recreates the instance if needed, and
    /// calls `handle` under the deadline. Only this plugin's own handlers wait for it.
    async fn deliver(&self, resource: &WitResource, event: &Event) {
        let mut inner = self.inner.lock().await;
        if *self.closed.borrow() {
            return;
        }
        if self.state() == PluginState::Quarantined {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if let Some(wait) = inner
            .restart_at
            .and_then(|at| at.checked_duration_since(Instant::now()))
        {
            // The restart backoff itself: only this plugin's queue waits, and unregistering
            // does not wait for it.
            let mut closed = self.closed.subscribe();
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = closed.wait_for(|c| *c) => return,
            }
        }
        if inner.instance.is_none() {
            match Instance::create(&self.spec).await {
                Ok(i) => {
                    tracing::info!(plugin = %self.spec.name, tenant = %self.spec.tenant, "plugin instance recreated");
                    inner.instance = Some(i);
                    self.set_state(PluginState::Running);
                    inner.restart_at = None;
                }
                Err(e) => return self.fail(&mut inner, event, &e, "init"),
            }
        }
        let started = Instant::now();
        let result = match inner.instance.as_mut() {
            Some(instance) => instance.handle(resource, event).await,
            None => return,
        };
        self.latency.observe(started.elapsed().as_secs_f64());
        match result {
            Ok(()) => {
                self.handled.fetch_add(1, Ordering::Relaxed);
                inner.successes_in_row += 1;
                if inner.successes_in_row >= self.policy.healthy_after {
                    inner.consecutive_failures = 0;
                }
            }
            Err(e) => self.fail(&mut inner, event, &e, "handle"),
        }
    }

    fn fail(&self, inner: &mut Inner, event: &Event, error: &CallError, call: &str) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        let (plugin, tenant, key) = (&*self.spec.name, &*self.spec.tenant, event.key().as_str());
        *self.last_error.lock() = Some(format!("{call} of {key}: {error}"));
        if !error.is_fatal() {
            tracing::warn!(plugin, tenant, key, call, error = %error, "plugin failed an event");
            return;
        }
        inner.instance = None;
        inner.successes_in_row = 0;
        inner.consecutive_failures += 1;
        if inner.consecutive_failures >= self.policy.quarantine_after {
            self.set_state(PluginState::Quarantined);
            tracing::error!(plugin, tenant, key, call, error = %error, failures = inner.consecutive_failures, "plugin quarantined");
            return;
        }
        let exp = inner.consecutive_failures.saturating_sub(1).min(20);
        let backoff = (self.policy.initial_backoff * 2u32.pow(exp)).min(self.policy.max_backoff);
        self.set_state(PluginState::BackingOff);
        inner.restart_at = Some(Instant::now() + backoff);
        tracing::warn!(plugin, tenant, key, call, error = %error, ?backoff, "plugin failed an event; restarting after backoff");
    }
}

/// Feeds one informer's events to a plugin's [`Supervisor`].
pub struct PluginHandler {
    supervisor: Arc<Supervisor>,
    resource: WitResource,
}

impl Handler for PluginHandler {
    async fn handle(&mut self, event: Event) {
        self.supervisor.deliver(&self.resource, &event).await;
    }
}

/// Buckets from 25 µs (a trivial plugin) doubling up to ~6.5 s (past the default deadline, below
/// the 10 s ceiling's last bucket, +Inf).
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(25e-6, 2.0, 19))
}
