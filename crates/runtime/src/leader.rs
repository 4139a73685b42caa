//! Leader election through a `coordination.k8s.io/v1` Lease, so that replicas run
//! active/standby.
//!
//! The contract follows client-go's `leaderelection` package:
//!
//! - A candidate acquires the Lease when it has no holder, or when the Lease's record has not
//!   changed for the record's `leaseDurationSeconds`, measured on the candidate's own monotonic
//!   clock from when it first observed that record. Clock skew between nodes therefore never
//!   matters; `renewTime` is written for humans and other tools, not trusted.
//! - Every write is a full update carrying the resourceVersion just read (optimistic
//!   concurrency): two candidates racing for a free or expired Lease cannot both win; the loser
//!   gets 409 Conflict and stays standby.
//! - The leader renews every `retry_period`. When it has not renewed for `renew_deadline`
//!   (which is shorter than `lease_duration`), or it sees another holder, it steps down: the state
//!   becomes [`Leadership::Lost`], which is final. The gap `lease_duration - renew_deadline` is
//!   the time the old leader has to stop its work before any other candidate may acquire.
//! - [`LeaderElector::release`] (clean shutdown) clears the holder, so a standby acquires at its
//!   next retry instead of waiting out the lease. Dropping the elector without releasing stops
//!   renewal but leaves the holder in place — what a crash looks like to the other replicas.
//!
//! A maintained crate was considered first: `kube-leader-election` is on kube 4, and
//! `kube-lease-manager` (kube 5) neither steps down when renewals keep failing nor makes its
//! takeover writes conditional on the resourceVersion, both of which this module needs.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::{Api, Client};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::lease::Holder;

/// Errors of leader election.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration is inconsistent; the message names the field.
    #[error("leader election: {0}")]
    Config(String),
    /// Clearing the holder on release failed; the Lease will expire after its duration instead.
    #[error("leader election: releasing lease {namespace}/{name}: {source}")]
    Release {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// What the API server answered.
        #[source]
        source: kube::Error,
    },
    /// Releasing did not finish within the renew deadline.
    #[error("leader election: releasing lease {namespace}/{name}: timed out")]
    ReleaseTimeout {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
    },
    /// The election task ended before this elector became leader (it was released or lost).
    #[error("leader election: stopped ({0:?}) before acquiring the lease")]
    Stopped(Leadership),
}

/// Result alias of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where the Lease is and how the election is timed.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    /// Lease name.
    pub name: String,
    /// Lease namespace.
    pub namespace: String,
    /// This candidate's identity, unique among the replicas (e.g. the pod name).
    pub identity: String,
    /// How long a holder's lease is valid after its last renewal (written to the Lease; whole
    /// seconds, at least 1).
    pub lease_duration: Duration,
    /// How long the leader keeps retrying a failed renewal before stepping down; shorter than
    /// `lease_duration`.
    pub renew_deadline: Duration,
    /// Interval between renewals (leader) and acquisition attempts (standby); shorter than
    /// `renew_deadline`.
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// client-go's defaults: 15 s lease, 10 s renew deadline, 2 s retry period.
    pub fn new(
        name: impl Into<String>,
        namespace: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        LeaseConfig {
            name: name.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Sets the lease duration, with the renew deadline at two thirds of it and the retry period
    /// at a seventh of it (the proportions of client-go's defaults, floored at 100 ms).
    pub fn with_lease_duration(mut self, lease_duration: Duration) -> Self {
        self.lease_duration = lease_duration;
        self.renew_deadline = lease_duration * 2 / 3;
        self.retry_period = (lease_duration / 7).max(Duration::from_millis(100));
        self
    }

    /// Checks that the timings nest and the names are usable.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if self.name.is_empty() {
            return bad("lease name is empty".into());
        }
        if self.namespace.is_empty() {
            return bad("lease namespace is empty".into());
        }
        if self.identity.is_empty() {
            return bad("identity is empty".into());
        }
        if self.lease_duration < Duration::from_secs(1)
            || self.lease_duration.subsec_nanos() != 0
            || self.lease_duration.as_secs() > i32::MAX as u64
        {
            return bad(format!(
                "lease duration {:?} must be a whole number of seconds, at least 1",
                self.lease_duration
            ));
        }
        if self.renew_deadline >= self.lease_duration {
            return bad(format!(
                "renew deadline {:?} must be shorter than the lease duration {:?}",
                self.renew_deadline, self.lease_duration
            ));
        }
        if self.retry_period.is_zero() || self.retry_period >= self.renew_deadline {
            return bad(format!(
                "retry period {:?} must be positive and shorter than the renew deadline {:?}",
                self.retry_period, self.renew_deadline
            ));
        }
        Ok(())
    }
}

/// This candidate's role, as published by [`LeaderElector::subscribe`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leadership {
    /// Not leading. `holder` is the other holder last observed (`None`: free, or not read yet).
    Standby {
        /// Identity of the current holder.
        holder: Option<String>,
    },
    /// Holding the Lease: do the work.
    Leading,
    /// Was leading and stepped down (renewal failed for the renew deadline, or another holder
    /// took the Lease). Final: stop the work at once.
    Lost,
    /// Stopped by [`LeaderElector::release`]. Final.
    Released,
}

impl Leadership {
    /// True once the election has ended ([`Lost`](Self::Lost) or [`Released`](Self::Released)).
    pub fn is_final(&self) -> bool {
        matches!(self, Leadership::Lost | Leadership::Released)
    }
}

/// A running candidate: a background task acquiring and renewing the Lease.
///
/// Dropping it aborts the task without releasing the Lease (a crash, as far as the other
/// candidates can tell); call [`release`](Self::release) on a clean shutdown.
pub struct LeaderElector {
    config: LeaseConfig,
    state: watch::Receiver<Leadership>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<()>>>,
}

impl LeaderElector {
    /// Validates `config` and starts campaigning (on the current tokio runtime).
    pub fn start(client: Client, config: LeaseConfig) -> Result<LeaderElector> {
        config.validate()?;
        let (tx, state) = watch::channel(Leadership::Standby { holder: None });
        let (stop, stop_rx) = oneshot::channel();
        let campaign = Campaign {
            api: Api::namespaced(client, &config.namespace),
            config: config.clone(),
            observed: None,
            state: tx,
        };
        let task = tokio::spawn(campaign.run(stop_rx));
        Ok(LeaderElector {
            config,
            state,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The configuration this elector runs with.
    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    /// The current role.
    pub fn leadership(&self) -> Leadership {
        self.state.borrow().clone()
    }

    /// A receiver of every role change.
    pub fn subscribe(&self) -> watch::Receiver<Leadership> {
        self.state.clone()
    }

    /// Waits until this candidate leads; an error if the election ended first.
    pub async fn acquired(&self) -> Result<()> {
        let mut rx = self.state.clone();
        let state = rx
            .wait_for(|s| *s == Leadership::Leading || s.is_final())
            .await
            .map(|s| s.clone())
            .unwrap_or(Leadership::Lost);
        match state {
            Leadership::Leading => Ok(()),
            other => Err(Error::Stopped(other)),
        }
    }

    /// Waits until this candidate no longer leads after having led ([`Leadership::Lost`] or
    /// [`Leadership::Released`]); pending forever while it is standby or leading.
    pub async fn lost(&self) -> Leadership {
        let mut rx = self.state.clone();
        match rx.wait_for(Leadership::is_final).await {
            Ok(s) => s.clone(),
            // The task is gone without a final state only if it panicked: treat it as lost.
            Err(_) => Leadership::Lost,
        }
    }

    /// Stops campaigning and, if leading, clears the holder so a standby takes over at once.
    pub async fn release(mut self) -> Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => match task.await {
                Ok(result) => result,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => Ok(()),
            },
            None => Ok(()),
        }
    }
}

impl Drop for LeaderElector {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The outcome of one acquire-or-renew round.
#[derive(Debug)]
enum Attempt {
    /// We hold the Lease (acquired or renewed).
    Held,
    /// Someone else holds a valid Lease.
    HeldBy(String),
    /// Our write lost a race (409); read again next round.
    Contended,
}

/// The last Lease record seen and when it was first seen, for expiry by the local clock.
struct Observed {
    spec: LeaseSpec,
    at: Instant,
}

/// The election task's state.
struct Campaign {
    api: Api<Lease>,
    config: LeaseConfig,
    observed: Option<Observed>,
    state: watch::Sender<Leadership>,
}

impl Campaign {
    async fn run(mut self, mut stop: oneshot::Receiver<()>) -> Result<()> {
        let cfg = self.config.clone();
        // Standby: try every retry period until we hold the Lease.
        let mut renewed_at;
        loop {
            // The deadline counts from before the write, never from its answer.
            renewed_at = Instant::now();
            match tokio::time::timeout(cfg.renew_deadline, self.attempt()).await {
                Ok(Ok(Attempt::Held)) => break,
                Ok(Ok(Attempt::HeldBy(holder))) => self.publish(Leadership::Standby {
                    holder: Some(holder),
                }),
                Ok(Ok(Attempt::Contended)) => {}
                Ok(Err(e)) => tracing::warn!(lease = %cfg.name, error = %e, "acquiring the lease"),
                Err(_) => tracing::warn!(lease = %cfg.name, "acquiring the lease: timed out"),
            }
            tokio::select! {
                _ = &mut stop => return self.release().await,
                _ = tokio::time::sleep(crate::backoff::jitter(cfg.retry_period)) => {}
            }
        }
        tracing::info!(lease = %cfg.name, namespace = %cfg.namespace, identity = %cfg.identity, "became leader");
        self.publish(Leadership::Leading);
        // Leading: renew every retry period; step down the moment the deadline passes, not at
        // the next retry, so the whole `lease_duration - renew_deadline` is left for stopping.
        loop {
            let deadline = renewed_at + cfg.renew_deadline;
            tokio::select! {
                _ = &mut stop => return self.release().await,
                _ = tokio::time::sleep_until((Instant::now() + cfg.retry_period).min(deadline)) => {}
            }
            let started = Instant::now();
            match tokio::time::timeout_at(deadline, self.attempt()).await {
                Ok(Ok(Attempt::Held)) => {
                    renewed_at = started;
                    continue;
                }
                Ok(Ok(Attempt::HeldBy(holder))) => {
                    tracing::error!(lease = %cfg.name, %holder, "another candidate holds the lease; stepping down");
                }
                // Within the deadline still (the timeout enforces it): retry next period.
                Ok(Ok(Attempt::Contended)) => continue,
                Ok(Err(e)) => {
                    tracing::warn!(lease = %cfg.name, error = %e, "renewing the lease; retrying");
                    continue;
                }
                Err(_) => {
                    tracing::error!(lease = %cfg.name, deadline = ?cfg.renew_deadline, "could not renew the lease within the renew deadline; stepping down");
                }
            }
            self.publish(Leadership::Lost);
            return Ok(());
        }
    }

    fn publish(&self, new: Leadership) {
        self.state.send_if_modified(|s| {
            let changed = *s != new;
            *s = new;
            changed
        });
    }

    /// One round of client-go's `tryAcquireOrRenew`.
    async fn attempt(&mut self) -> Result<Attempt, kube::Error> {
        let cfg = self.config.clone();
        let found = self.api.get_opt(&cfg.name).await?;
        if let Some(lease) = &found {
            let spec = self.observe(lease);
            let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty());
            if let Some(holder) = holder
                && holder != cfg.identity
            {
                let valid_for = spec
                    .lease_duration_seconds
                    .filter(|s| *s > 0)
                    .map_or(cfg.lease_duration, |s| Duration::from_secs(s as u64));
                let since = self.observed.as_ref().map_or_else(Instant::now, |o| o.at);
                if since + valid_for > Instant::now() {
                    return Ok(Attempt::HeldBy(holder.to_string()));
                }
                tracing::info!(lease = %cfg.name, %holder, "the holder's lease expired; taking over");
            }
        }
        match self.holder().write(found, |_| {}).await {
            Ok(written) => {
                self.observe(&written);
                Ok(Attempt::Held)
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(Attempt::Contended),
            Err(e) => Err(e),
        }
    }

    /// This candidate as the Lease's holder.
    fn holder(&self) -> Holder {
        Holder {
            api: self.api.clone(),
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            identity: self.config.identity.clone(),
            lease_duration: self.config.lease_duration,
        }
    }

    /// Records `lease`'s spec, restarting the expiry clock when the record changed.
    fn observe(&mut self, lease: &Lease) -> LeaseSpec {
        let spec = lease.spec.clone().unwrap_or_default();
        if self.observed.as_ref().is_none_or(|o| o.spec != spec) {
            self.observed = Some(Observed {
                spec: spec.clone(),
                at: Instant::now(),
            });
        }
        spec
    }

    /// Clears the holder if it is us (conditional on the resourceVersion read), then publishes
    /// [`Leadership::Released`].
    async fn release(self) -> Result<()> {
        let cfg = self.config.clone();
        let outcome =
            tokio::time::timeout(cfg.renew_deadline, self.holder().release(true, |_| {})).await;
        self.publish(Leadership::Released);
        match outcome {
            Ok(Ok(cleared)) => {
                if cleared {
                    tracing::info!(lease = %cfg.name, identity = %cfg.identity, "released the lease");
                }
                Ok(())
            }
            Ok(Err(source)) => Err(Error::Release {
                namespace: cfg.namespace,
                name: cfg.name,
                source,
            }),
            Err(_) => Err(Error::ReleaseTimeout {
                namespace: cfg.namespace,
                name: cfg.name,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use informant_devserver::{DevServer, DevServerConfig};
    use kube::api::PostParams;

    fn config(identity: &str) -> LeaseConfig {
        LeaseConfig::new("unit", "default", identity).with_lease_duration(Duration::from_secs(3))
    }

    #[test]
    fn timings_must_nest() {
        assert!(config("a").validate().is_ok());
        let mut c = config("a");
        c.renew_deadline = c.lease_duration;
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("renew deadline")
        );
        let mut c = config("a");
        c.retry_period = c.renew_deadline;
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("retry period")
        );
        let c = config("a").with_lease_duration(Duration::from_millis(1500));
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("whole number")
        );
        let c = LeaseConfig::new("unit", "default", "");
        assert!(c.validate().unwrap_err().to_string().contains("identity"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn exactly_one_of_two_racing_candidates_leads() {
        let server = DevServer::start(DevServerConfig::default()).await.unwrap();
        let a = LeaderElector::start(server.client(), config("a")).unwrap();
        let b = LeaderElector::start(server.client(), config("b")).unwrap();
        let first = tokio::select! {
            r = a.acquired() => { r.unwrap(); "a" }
            r = b.acquired() => { r.unwrap(); "b" }
        };
        let (leader, standby) = if first == "a" { (&a, &b) } else { (&b, &a) };
        let mut rx = standby.subscribe();
        let seen = rx
            .wait_for(|s| matches!(s, Leadership::Standby { holder: Some(_) }))
            .await
            .unwrap()
            .clone();
        assert_eq!(
            seen,
            Leadership::Standby {
                holder: Some(first.into())
            }
        );
        assert_eq!(leader.leadership(), Leadership::Leading);
        let api: Api<Lease> = Api::namespaced(server.client(), "default");
        let lease = api.get("unit").await.unwrap().spec.unwrap();
        assert_eq!(lease.holder_identity.as_deref(), Some(first));
        assert_eq!(lease.lease_duration_seconds, Some(3));
        assert_eq!(
            lease.lease_transitions,
            Some(0),
            "creating the lease is no transition"
        );
        drop(a);
        drop(b);
        server.shutdown().await;
    }

    /// What the election's safety rests on: a write carrying a stale resourceVersion is refused.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stale_write_gets_409() {
        let server = DevServer::start(DevServerConfig::default()).await.unwrap();
        let a = LeaderElector::start(server.client(), config("a")).unwrap();
        a.acquired().await.unwrap();
        let api: Api<Lease> = Api::namespaced(server.client(), "default");
        let read = api.get("unit").await.unwrap();
        let mut first = read.clone();
        first.spec.as_mut().unwrap().holder_identity = Some("x".into());
        api.replace("unit", &PostParams::default(), &first)
            .await
            .unwrap();
        let mut second = read;
        second.spec.as_mut().unwrap().holder_identity = Some("y".into());
        match api.replace("unit", &PostParams::default(), &second).await {
            Err(kube::Error::Api(e)) => assert_eq!(e.code, 409, "{e:?}"),
            other => panic!("stale write accepted: {other:?}"),
        }
        drop(a);
        server.shutdown().await;
    }
}
