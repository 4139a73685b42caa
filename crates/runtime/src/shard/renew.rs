//! This member's own Lease, renewed on its own timer: no survey of the group, no cursor
//! bookkeeping and no clean-up of other Leases ever waits in front of a renewal.
//!
//! Each renewal reads the Lease and replaces it (conditional on what was read) with this
//! member as holder, the group's label, the cursors of its plugins and, with `--pod-uid`, an
//! ownerReference to its Pod. The outcome goes to the membership task as a [`Renewal`], whose
//! `at` is taken before the first request: that task steps down when `at` is older than the
//! renew deadline, so this member stops its plugins before any other may count its Lease expired
//! (they time the expiry from after the write).
//!
//! Until its first write succeeds, each renewal first hands the Lease it read to the cursor
//! book as this member's previous life ([`super::cursors::previous`]): a member restarted under
//! the same identity would otherwise replace what it published before it stopped or crashed
//! with an empty set, and replay its plugins' caches (losing the deletes made meanwhile).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, OwnerReference};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use super::cursors::{self, CursorBook};
use super::follow::brief;
use super::{Error, GROUP_LABEL, ShardConfig};

/// The latest renewal, as the membership task reads it.
#[derive(Debug, Clone, Default)]
pub(super) struct Renewal {
    /// When the last successful renewal started (before its first request).
    pub(super) at: Option<Instant>,
    /// The resourceVersion that renewal's write gave the Lease.
    pub(super) rv: Option<String>,
    /// Why the attempts since then failed, if they did.
    pub(super) error: Option<String>,
}

/// The renewal task.
pub(super) struct Renewer {
    pub(super) api: Api<Lease>,
    pub(super) config: ShardConfig,
    pub(super) book: Arc<CursorBook>,
    pub(super) tx: watch::Sender<Renewal>,
    /// Whether a renewal has written this member's Lease: from then on, what it reads is this
    /// life's.
    pub(super) written: AtomicBool,
}

impl Renewer {
    /// Renews every retry period (jittered) until `stop`, then releases the Lease.
    pub(super) async fn run(self, mut stop: oneshot::Receiver<()>) -> Result<(), Error> {
        let lease = self.config.lease.clone();
        let name = self.config.lease_name();
        let mut last_ok: Option<Instant> = None;
        let mut failing = false;
        loop {
            let started = Instant::now();
            // A renewal never outlives the deadline of the one before it.
            let deadline = last_ok.map_or(started + lease.renew_deadline, |r| {
                (r + lease.renew_deadline).max(started + lease.retry_period)
            });
            let outcome = tokio::select! {
                _ = &mut stop => return self.release().await,
                r = tokio::time::timeout_at(deadline, self.renew()) => r,
            };
            let error = match outcome {
                Ok(Ok(rv)) => {
                    last_ok = Some(started);
                    if std::mem::take(&mut failing) {
                        tracing::info!(lease = %name, "renewed the shard membership lease again");
                    }
                    self.tx.send_replace(Renewal {
                        at: Some(started),
                        rv: Some(rv),
                        error: None,
                    });
                    None
                }
                Ok(Err(e)) => Some(brief(&e)),
                Err(_) => Some(format!("no answer within {:?}", deadline - started)),
            };
            if let Some(error) = error {
                if !std::mem::replace(&mut failing, true) {
                    tracing::warn!(lease = %name, error = %error, "renewing the shard membership lease failed; retrying every retry period");
                } else {
                    tracing::debug!(lease = %name, error = %error, "renewing the shard membership lease failed again");
                }
                self.tx.send_modify(|r| r.error = Some(error));
            }
            tokio::select! {
                _ = &mut stop => return self.release().await,
                _ = tokio::time::sleep(crate::backoff::jitter(lease.retry_period)) => {}
            }
        }
    }

    /// Creates or renews this member's Lease with its cursors; its new resourceVersion.
    async fn renew(&self) -> Result<String, kube::Error> {
        let name = self.config.lease_name();
        let now = k8s_openapi::jiff::Timestamp::now();
        let found = self.api.get_opt(&name).await?;
        if !self.written.load(Ordering::Acquire)
            && let Some(life) = found
                .as_ref()
                .and_then(|l| cursors::previous::previous_life(l, &self.config))
        {
            self.book.adopt_previous_lease(life);
        }
        let cursors = self.book.annotation();
        let written = match found {
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
                        owner_references: self.owner().map(|o| vec![o]),
                        ..Default::default()
                    },
                    spec: Some(self.spec(None, now)),
                };
                self.api.create(&PostParams::default(), &lease).await?
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
                if let Some(owner) = self.owner() {
                    // Exactly this Pod: whatever else a writer put there would make the others
                    // disown this Lease, or let Kubernetes collect it with another object.
                    lease.metadata.owner_references = Some(vec![owner]);
                }
                // Conditional on the resourceVersion read: a concurrent delete (another member
                // collecting what it took for a dead Lease) makes this fail and the next round
                // create it again.
                self.api
                    .replace(&name, &PostParams::default(), &lease)
                    .await?
            }
        };
        self.written.store(true, Ordering::Release);
        Ok(written.metadata.resource_version.unwrap_or_default())
    }

    /// The ownerReference to this member's Pod, with `--pod-uid`.
    fn owner(&self) -> Option<OwnerReference> {
        self.config.pod_uid.as_ref().map(|uid| OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: self.config.lease.identity.clone(),
            uid: uid.clone(),
            ..Default::default()
        })
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

    /// Leaves the group: publishes the released plugins' last cursors and clears the holder,
    /// so the other members take them over at once instead of after expiry.
    async fn release(self) -> Result<(), Error> {
        let cfg = self.config.lease.clone();
        let name = self.config.lease_name();
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
