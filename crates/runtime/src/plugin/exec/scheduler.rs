//! A plugin version's schedules (`[[schedule]]`): a timer per schedule that calls the plugin's
//! `handle-schedule` export through its [`Supervisor`].
//!
//! Contract:
//! - The timers start once the version is registered and its caches have settled (the gate its
//!   events wait for), so a tick's cache queries never see a kind half-listed; they stop when
//!   the version is closed (unregistered or replaced): no tick starts after that.
//! - A tick is a call like an event's: the same instance, the same deadline, one call at a time
//!   with the plugin's event batches (the supervisor's lock), and a trap or a missed deadline
//!   counts toward the instance's restart and quarantine as an event's would.
//! - A tick due while the schedule's previous tick still runs (or waits for the plugin's lock,
//!   a restart backoff) is skipped and counted, never queued: ticks do not stack.
//! - `every` ticks one period after the start, then every period; `cron` ticks at the pattern's
//!   next matching time in UTC, computed from the wall clock after each tick.
//! - Nothing is persisted: ticks due while the host was down are not replayed, and a restarted
//!   host (or a reloaded plugin) starts its periods afresh.
//! - A schedule exists where its plugin version is loaded; a host that is not the leader, or
//!   whose shard does not hold the plugin, does not load it and so does not tick it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::SystemTime;

use tokio::time::{Instant, MissedTickBehavior};
use tracing::Instrument;

use crate::manifest::{Schedule, When};
use crate::plugin::exec::gate::Gate;
use crate::plugin::exec::supervisor::Supervisor;

/// How one tick ended, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TickOutcome {
    /// `handle-schedule` returned `ok`.
    Ok,
    /// It returned an error, trapped, missed its deadline, or the instance could not be
    /// recreated for it.
    Error,
    /// Not called: the previous tick still ran, or the plugin is quarantined or closing.
    Skipped,
}

impl TickOutcome {
    /// Every outcome, in the order metrics list them.
    pub const ALL: [TickOutcome; 3] = [TickOutcome::Ok, TickOutcome::Error, TickOutcome::Skipped];

    /// The name in metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            TickOutcome::Ok => "ok",
            TickOutcome::Error => "error",
            TickOutcome::Skipped => "skipped",
        }
    }
}

/// One schedule's tick counts.
#[derive(Debug)]
pub struct ScheduleStats {
    /// The schedule's name.
    pub name: String,
    counts: [AtomicU64; 3],
}

impl ScheduleStats {
    fn new(name: &str) -> Self {
        ScheduleStats {
            name: name.to_string(),
            counts: Default::default(),
        }
    }

    /// Ticks that ended with `outcome`.
    pub fn get(&self, outcome: TickOutcome) -> u64 {
        self.counts[outcome as usize].load(Ordering::Relaxed)
    }

    fn count(&self, outcome: TickOutcome) {
        self.counts[outcome as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// Starts a timer per schedule for `supervisor`; each ends when the supervisor is closed (or
/// dropped). Returns the schedules' counters.
pub(crate) fn start(
    supervisor: &Arc<Supervisor>,
    schedules: &[Schedule],
    gate: Gate,
) -> Vec<Arc<ScheduleStats>> {
    schedules
        .iter()
        .map(|schedule| {
            let stats = Arc::new(ScheduleStats::new(schedule.name.as_str()));
            let timer = Timer {
                supervisor: Arc::downgrade(supervisor),
                schedule: schedule.clone(),
                stats: stats.clone(),
                running: Arc::new(AtomicBool::new(false)),
            };
            let span = tracing::info_span!(parent: supervisor.span(), "schedule", schedule = %schedule.name);
            tokio::spawn(timer.run(supervisor.closed(), gate.clone()).instrument(span));
            stats
        })
        .collect()
}

/// One schedule's timer: an actor whose `run` ends when its supervisor closes.
struct Timer {
    /// Weak: a timer never keeps a dropped version alive.
    supervisor: Weak<Supervisor>,
    schedule: Schedule,
    stats: Arc<ScheduleStats>,
    /// A tick of this schedule is in flight (waiting for the plugin or in it).
    running: Arc<AtomicBool>,
}

impl Timer {
    async fn run(self, mut closed: tokio::sync::watch::Receiver<bool>, mut gate: Gate) {
        tokio::select! {
            _ = gate.opened() => {}
            _ = closed.wait_for(|c| *c) => return,
        }
        let mut every = match self.schedule.when() {
            When::Every(period) => {
                let mut i = tokio::time::interval_at(Instant::now() + period, period);
                i.set_missed_tick_behavior(MissedTickBehavior::Skip);
                Some(i)
            }
            When::Cron(_) => None,
        };
        // The last cron time ticked: a timer that wakes a hair early must not tick it twice.
        let mut last = SystemTime::now();
        tracing::debug!("schedule started");
        loop {
            let due = async {
                match (&mut every, self.schedule.when()) {
                    (Some(interval), _) => {
                        interval.tick().await;
                        true
                    }
                    (None, When::Cron(cron)) => {
                        let now = SystemTime::now().max(last);
                        let Some(next) = cron.next_after(now) else {
                            return false;
                        };
                        let wait = next.duration_since(SystemTime::now()).unwrap_or_default();
                        tokio::time::sleep(wait).await;
                        last = next;
                        true
                    }
                    (None, When::Every(_)) => unreachable!("an interval was made for `every`"),
                }
            };
            tokio::select! {
                more = due => if !more {
                    tracing::warn!("schedule ends: its pattern matches no later time");
                    return;
                },
                _ = closed.wait_for(|c| *c) => return,
            }
            self.tick();
        }
    }

    /// Starts a tick unless the previous one still runs (then counts it skipped).
    fn tick(&self) {
        if self.running.swap(true, Ordering::AcqRel) {
            self.stats.count(TickOutcome::Skipped);
            tracing::debug!("tick skipped: the previous tick still runs");
            return;
        }
        let Some(supervisor) = self.supervisor.upgrade() else {
            return;
        };
        let (name, stats, running) = (
            self.schedule.name.clone(),
            self.stats.clone(),
            self.running.clone(),
        );
        let tick = async move {
            let outcome = supervisor.tick(name.as_str()).await;
            stats.count(outcome);
            running.store(false, Ordering::Release);
        };
        tokio::spawn(tick.in_current_span());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_index_their_counters() {
        let s = ScheduleStats::new("x");
        s.count(TickOutcome::Skipped);
        s.count(TickOutcome::Skipped);
        s.count(TickOutcome::Ok);
        assert_eq!(
            TickOutcome::ALL.map(|o| (o.as_str(), s.get(o))),
            [("ok", 1), ("error", 0), ("skipped", 2)]
        );
    }
}
