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

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Api;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use super::cursors::{self, CursorBook};
use super::follow::brief;
use super::{Error, GROUP_LABEL, ShardConfig};
use crate::lease::Holder;

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
        let found = self.api.get_opt(&self.config.lease_name()).await?;
        if !self.written.load(Ordering::Acquire)
            && let Some(life) = found
                .as_ref()
                .and_then(|l| cursors::previous::previous_life(l, &self.config))
        {
            self.book.adopt_previous_lease(life);
        }
        let cursors = self.book.annotation();
        // A concurrent delete (another member collecting what it took for a dead Lease) makes
        // the conditional replace fail, and the next round creates it again.
        let written = self
            .holder()
            .write(found, |meta| {
                meta.labels
                    .get_or_insert_default()
                    .insert(GROUP_LABEL.to_string(), self.config.group.clone());
                meta.annotations
                    .get_or_insert_default()
                    .insert(cursors::ANNOTATION.to_string(), cursors);
                if let Some(owner) = self.owner() {
                    // Exactly this Pod: whatever else a writer put there would make the others
                    // disown this Lease, or let Kubernetes collect it with another object.
                    meta.owner_references = Some(vec![owner]);
                }
            })
            .await?;
        self.written.store(true, Ordering::Release);
        Ok(written.metadata.resource_version.unwrap_or_default())
    }

    /// This member as its own Lease's holder.
    fn holder(&self) -> Holder {
        let cfg = &self.config.lease;
        Holder {
            api: self.api.clone(),
            namespace: cfg.namespace.clone(),
            name: self.config.lease_name(),
            identity: cfg.identity.clone(),
            lease_duration: cfg.lease_duration,
        }
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

    /// Leaves the group: publishes the released plugins' last cursors and clears the holder,
    /// so the other members take them over at once instead of after expiry.
    async fn release(self) -> Result<(), Error> {
        let cfg = self.config.lease.clone();
        let name = self.config.lease_name();
        let annotation = self.book.annotation();
        let outcome = tokio::time::timeout(
            cfg.renew_deadline,
            self.holder().release(false, |meta| {
                meta.annotations
                    .get_or_insert_default()
                    .insert(cursors::ANNOTATION.to_string(), annotation);
            }),
        )
        .await;
        match outcome {
            Ok(Ok(_)) => {
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
