//! Deleting dead members' Leases, off the renewal and the survey, a few per retry period.
//!
//! Only without `--pod-uid`: with it, each Lease has an ownerReference to its Pod and
//! Kubernetes collects it with the Pod, and a Lease not proven to be a member's is never
//! touched. A flood of Leases is then worked through slowly, never in front of anything else.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{DeleteParams, Preconditions};
use tokio::sync::watch;

/// Deletes at most this many Leases per retry period.
pub(super) const PER_PERIOD: usize = 8;

/// Deletes the Leases `rx` lists (name, resourceVersion as read: a Lease changed since is left
/// alone), [`PER_PERIOD`] per `period`, until `rx` closes.
pub(super) async fn run(
    api: Api<Lease>,
    mut rx: watch::Receiver<Vec<(String, String)>>,
    period: Duration,
) {
    loop {
        if rx.changed().await.is_err() {
            return;
        }
        let batch: Vec<(String, String)> = rx
            .borrow_and_update()
            .iter()
            .take(PER_PERIOD)
            .cloned()
            .collect();
        for (name, rv) in batch {
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: Some(rv),
                    uid: None,
                }),
                ..Default::default()
            };
            match api.delete(&name, &params).await {
                Ok(_) => {
                    tracing::info!(lease = %name, "deleted a dead shard member's lease: every plugin it published has moved on")
                }
                // Renewed or collected by someone else meanwhile: looked at again later.
                Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => {}
                Err(e) => {
                    tracing::debug!(lease = %name, error = %super::follow::brief(&e), "deleting a dead shard member's lease")
                }
            }
        }
        tokio::time::sleep(period).await;
    }
}
