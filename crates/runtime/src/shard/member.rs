//! Group membership through Leases: each member holds `GROUP-IDENTITY`, labelled with the
//! group, renewed every retry period with its cursors; the live members are the Leases with a
//! holder whose record changed within their duration.
//!
//! Expiry follows the leader election's rule (see [`crate::leader`]): a Lease is dead once its
//! record has not changed for its `leaseDurationSeconds`, measured on this member's monotonic
//! clock from when it first saw that record, so clock skew between nodes never matters. This
//! member counts itself live only while its last renewal, timed from before the write, is
//! younger than the renew deadline: it stops its plugins `lease_duration - renew_deadline`
//! before any other member may take them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams, Preconditions};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use super::cursors::{self, CursorBook, Seen};
use super::{Assignment, Error, GROUP_LABEL, ShardConfig};

/// The membership task's state.
pub(super) struct Member {
    pub(super) api: Api<Lease>,
    pub(super) config: ShardConfig,
    pub(super) book: Arc<CursorBook>,
    pub(super) assignment: watch::Sender<Assignment>,
    /// Per Lease name: its last record (resourceVersion) and when this member first saw it.
    pub(super) observed: HashMap<String, (String, Instant)>,
}

impl Member {
    fn lease_name(&self) -> String {
        self.config.lease_name()
    }

    pub(super) async fn run(mut self, mut stop: oneshot::Receiver<()>) -> Result<(), Error> {
        let lease = self.config.lease.clone();
        // The group's Leases, followed by a watch: a member joining or leaving is seen at once,
        // not at this member's next renewal; only expiry waits for the clock.
        let (leases, writer) = reflector::store();
        let selector = format!("{GROUP_LABEL}={}", self.config.group);
        let mut changes = reflector::reflector(
            writer,
            watcher(
                self.api.clone(),
                watcher::Config::default().labels(&selector),
            ),
        )
        .default_backoff()
        .touched_objects()
        .boxed();
        let mut renewed_at: Option<Instant> = None;
        // Replicas of a rollout start together: one that took its first view for the whole
        // group would start every plugin only to hand most of them over a moment later. Until
        // a retry period has passed, the others' Leases have had time to appear.
        let settle_until = Instant::now() + lease.retry_period;
        let mut next_renewal = Instant::now();
        loop {
            let now = Instant::now();
            if now >= next_renewal {
                // A renewal never outlives the deadline of the one before it.
                let deadline = renewed_at.map_or(now + lease.renew_deadline, |r| {
                    (r + lease.renew_deadline).max(now + lease.retry_period)
                });
                match tokio::time::timeout_at(deadline, self.renew()).await {
                    Ok(Ok(())) => renewed_at = Some(now),
                    Ok(Err(e)) => {
                        tracing::warn!(lease = %self.lease_name(), error = %e, "renewing the shard membership lease; retrying")
                    }
                    Err(_) => {
                        tracing::warn!(lease = %self.lease_name(), "renewing the shard membership lease: timed out")
                    }
                }
                next_renewal = Instant::now() + crate::backoff::jitter(lease.retry_period);
            }
            let renewed = renewed_at.is_some_and(|r| r.elapsed() < lease.renew_deadline);
            let active = renewed && Instant::now() >= settle_until;
            // Ready once the first list arrived: before it, no view of the group to act on.
            if leases.wait_until_ready().now_or_never().is_some() {
                self.survey(&leases, active).await;
            }
            if !renewed {
                self.step_down();
            }
            // Wake for the next renewal, for the renew deadline (stepping down must not wait
            // for a slow round), for a Lease expiring, or for a change to the group's Leases.
            let mut wake = next_renewal;
            if Instant::now() < settle_until {
                wake = wake.min(settle_until);
            }
            if let Some(r) = renewed_at.filter(|r| r.elapsed() < lease.renew_deadline) {
                wake = wake.min(r + lease.renew_deadline);
            }
            if let Some(expiry) = self.next_expiry(&leases) {
                wake = wake.min(expiry);
            }
            tokio::select! {
                _ = &mut stop => return self.release().await,
                _ = tokio::time::sleep_until(wake) => {}
                // A watch stream that ended (it retries with backoff, so it should not) only
                // disables this branch: renewals and expiry still wake the loop.
                Some(change) = changes.next() => {
                    if let Err(e) = change {
                        tracing::warn!(group = %self.config.group, error = %e, "watching the shard group's leases; retrying with backoff")
                    }
                }
            }
        }
    }

    /// When the next live Lease of another member expires, if it is not renewed before.
    fn next_expiry(&self, leases: &Store<Lease>) -> Option<Instant> {
        leases
            .state()
            .iter()
            .filter(|l| l.metadata.name.as_deref() != Some(self.lease_name().as_str()))
            .filter_map(|l| {
                let (rv, at) = self.observed.get(l.metadata.name.as_deref()?)?;
                (l.metadata.resource_version.as_deref() == Some(rv.as_str()))
                    .then(|| *at + self.valid_for(l))
            })
            .filter(|t| *t > Instant::now())
            .min()
    }

    /// How long `lease` stays valid after a change: as it says, but never longer than this
    /// member's own lease duration (the group shares one), so a Lease claiming years cannot
    /// hold its share of the plugins unrun.
    fn valid_for(&self, lease: &Lease) -> Duration {
        let own = self.config.lease.lease_duration;
        lease
            .spec
            .as_ref()
            .and_then(|s| s.lease_duration_seconds)
            .filter(|s| *s > 0)
            .map_or(own, |s| Duration::from_secs(s as u64).min(own))
    }

    /// Publishes that this member owns nothing, once, when its Lease could not be renewed in
    /// time.
    fn step_down(&self) {
        self.assignment.send_if_modified(|a| {
            if !a.active {
                return false;
            }
            tracing::error!(lease = %self.config.lease_name(), deadline = ?self.config.lease.renew_deadline, "could not renew the shard membership lease within the renew deadline; stopping this member's plugins");
            a.active = false;
            true
        });
    }

    /// Creates or renews this member's Lease with its cursors.
    async fn renew(&mut self) -> Result<(), kube::Error> {
        let name = self.lease_name();
        let now = k8s_openapi::jiff::Timestamp::now();
        let cursors = self.book.annotation();
        match self.api.get_opt(&name).await? {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        namespace: Some(self.config.lease.namespace.clone()),
                        labels: Some(BTreeMap::from([(
                            GROUP_LABEL.to_string(),
                            self.config.group.clone(),
                        )])),
                        annotations: Some(BTreeMap::from([(
                            cursors::ANNOTATION.to_string(),
                            cursors,
                        )])),
                        ..Default::default()
                    },
                    spec: Some(self.spec(None, now)),
                };
                self.api.create(&PostParams::default(), &lease).await?;
            }
            Some(mut lease) => {
                let old = lease.spec.take();
                lease.spec = Some(self.spec(old.as_ref(), now));
                lease
                    .metadata
                    .labels
                    .get_or_insert_default()
                    .insert(GROUP_LABEL.to_string(), self.config.group.clone());
                lease
                    .metadata
                    .annotations
                    .get_or_insert_default()
                    .insert(cursors::ANNOTATION.to_string(), cursors);
                // Conditional on the resourceVersion read: a concurrent delete (another member
                // collecting what it took for a dead Lease) makes this fail and the next round
                // create it again.
                self.api
                    .replace(&name, &PostParams::default(), &lease)
                    .await?;
            }
        }
        Ok(())
    }

    fn spec(&self, old: Option<&LeaseSpec>, now: k8s_openapi::jiff::Timestamp) -> LeaseSpec {
        let cfg = &self.config.lease;
        let old = old.cloned().unwrap_or_default();
        let holding = old.holder_identity.as_deref() == Some(cfg.identity.as_str());
        LeaseSpec {
            holder_identity: Some(cfg.identity.clone()),
            lease_duration_seconds: Some(cfg.lease_duration.as_secs() as i32),
            acquire_time: if holding {
                old.acquire_time.clone()
            } else {
                Some(MicroTime(now))
            },
            renew_time: Some(MicroTime(now)),
            ..old
        }
    }

    /// Reads the group's Leases as last watched: works out who is live, publishes the
    /// assignment, records the others' cursors and deletes dead Leases whose cursors the live
    /// members have all moved past.
    async fn survey(&mut self, leases: &Store<Lease>, active: bool) {
        let now = Instant::now();
        let own = self.lease_name();
        let mut members = Vec::new();
        let mut seen = Vec::new();
        let mut dead = Vec::new();
        let mut present = Vec::new();
        for lease in leases.state() {
            let Some(name) = lease.metadata.name.clone() else {
                continue;
            };
            if name == own {
                continue;
            }
            present.push(name.clone());
            let rv = lease.metadata.resource_version.clone().unwrap_or_default();
            let first = match self.observed.get(&name) {
                Some((r, at)) if *r == rv => *at,
                _ => {
                    self.observed.insert(name.clone(), (rv.clone(), now));
                    now
                }
            };
            let holder = lease
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.clone())
                .filter(|h| !h.is_empty());
            let plugins = lease
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(cursors::ANNOTATION))
                .and_then(|t| cursors::parse(t))
                .unwrap_or_default();
            let live = holder.is_some() && now.duration_since(first) < self.valid_for(&lease);
            if live {
                members.push(holder.clone().unwrap_or_default());
            } else {
                dead.push((name.clone(), rv, plugins.clone()));
            }
            seen.push(Seen {
                member: holder.unwrap_or(name),
                live,
                plugins,
            });
        }
        self.observed.retain(|n, _| present.contains(n));
        self.book.observe(seen);
        let me = self.config.lease.identity.clone();
        if active {
            members.push(me.clone());
        }
        members.sort();
        members.dedup();
        let next = Assignment {
            members,
            me,
            active,
            by: self.config.by,
        };
        self.assignment.send_if_modified(|a| {
            let changed = *a != next;
            if changed {
                tracing::info!(group = %self.config.group, members = ?next.members, active = next.active, "shard membership changed");
                *a = next;
            }
            changed
        });
        if active {
            for (name, rv, plugins) in dead {
                if self.book.supersedes(&plugins) {
                    self.collect(&name, rv).await;
                }
            }
        }
    }

    /// Deletes a dead member's Lease, only as it was read.
    async fn collect(&mut self, name: &str, rv: String) {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: Some(rv),
                uid: None,
            }),
            ..Default::default()
        };
        match self.api.delete(name, &params).await {
            Ok(_) => {
                self.observed.remove(name);
                tracing::info!(lease = %name, "deleted a dead shard member's lease: every plugin it published has moved on");
            }
            // Renewed or collected by someone else meanwhile: look again next round.
            Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => {}
            Err(e) => {
                tracing::warn!(lease = %name, error = %e, "deleting a dead shard member's lease")
            }
        }
    }

    /// Leaves the group: publishes the released plugins' last cursors and clears the holder,
    /// so the other members take them over at their next round instead of after expiry.
    async fn release(self) -> Result<(), Error> {
        let cfg = self.config.lease.clone();
        let name = self.lease_name();
        self.assignment.send_modify(|a| a.active = false);
        let outcome = tokio::time::timeout(cfg.renew_deadline, async {
            let Some(mut lease) = self.api.get_opt(&name).await? else {
                return Ok(());
            };
            let spec = lease.spec.get_or_insert_default();
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
            lease
                .metadata
                .annotations
                .get_or_insert_default()
                .insert(cursors::ANNOTATION.to_string(), self.book.annotation());
            self.api
                .replace(&name, &PostParams::default(), &lease)
                .await
                .map(|_| ())
        })
        .await;
        match outcome {
            Ok(Ok(())) => {
                tracing::info!(lease = %name, "left the shard group; its plugins' cursors stay in its lease");
                Ok(())
            }
            Ok(Err(source)) => Err(Error::Release {
                lease: name,
                source,
            }),
            Err(_) => Err(Error::ReleaseTimeout { lease: name }),
        }
    }
}
