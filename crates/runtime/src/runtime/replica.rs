//! [`Replica`]: a [`Runtime`] run as one replica of a deployment, not elected, leader-elected
//! or sharded, until it is stopped or loses its Lease.

use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{Error, Result, Runtime, RuntimeOptions, admin_servers};
use crate::admin::{AdminServer, AdminState};
use crate::informer::{FactoryOptions, InformerFactory};
use crate::leader::{LeaderElector, Leadership, LeaseConfig};
use crate::shard::{Membership, Shard, ShardConfig};

/// Where a [`Replica`] stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaState {
    /// Waiting to acquire the Lease; nothing started.
    Standby,
    /// Leading (or not elected): starting informers and plugins.
    Starting,
    /// Started: the first reconcile done, its plugins' informers synced or refused (their events
    /// flowing) and the `--watch` informers synced (or waited for, in the background). Waiting
    /// plugins and kinds are retried from here on.
    Running,
    /// Stopped: shut down, aborted, or the Lease was lost.
    Stopped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    No,
    /// Stop the runtime, then release the Lease.
    Graceful,
    /// Stop without releasing, as a crashed process would.
    Abort,
}

/// A [`Runtime`] as one replica of a deployment, with or without leader election: what
/// `informant run` runs until SIGTERM.
pub struct Replica {
    stop: watch::Sender<Stop>,
    state: watch::Receiver<ReplicaState>,
    leadership: Option<watch::Receiver<Leadership>>,
    shard: Option<Shard>,
    task: JoinHandle<Result<()>>,
}

impl Replica {
    /// Starts the runtime at once (`lease` is `None`), or campaigns for the Lease and starts it
    /// only while leading.
    pub fn start(
        client: kube::Client,
        opts: RuntimeOptions,
        lease: Option<LeaseConfig>,
    ) -> Result<Replica> {
        let (stop, stop_rx) = watch::channel(Stop::No);
        let first = if lease.is_some() {
            ReplicaState::Standby
        } else {
            ReplicaState::Starting
        };
        let (state_tx, state) = watch::channel(first);
        let elector = match lease {
            Some(lease) => {
                tracing::info!(lease = %format!("{}/{}", lease.namespace, lease.name), identity = %lease.identity, "standby: waiting to acquire the lease");
                Some(LeaderElector::start(client.clone(), lease)?)
            }
            None => None,
        };
        let leadership = elector.as_ref().map(LeaderElector::subscribe);
        let task = tokio::spawn(async move {
            let result = match elector {
                Some(elector) => elected(client, opts, elector, stop_rx, &state_tx).await,
                None => unelected(client, opts, stop_rx, &state_tx).await,
            };
            state_tx.send_replace(ReplicaState::Stopped);
            result
        });
        Ok(Replica {
            stop,
            state,
            leadership,
            shard: None,
            task,
        })
    }

    /// Starts the runtime as a member of a shard group: it runs only the plugins the group
    /// assigns to it, and hands them over (with their cursors) as members come and go.
    pub fn start_sharded(
        client: kube::Client,
        mut opts: RuntimeOptions,
        shard: ShardConfig,
    ) -> Result<Replica> {
        let (stop, stop_rx) = watch::channel(Stop::No);
        let (state_tx, state) = watch::channel(ReplicaState::Starting);
        let membership = Membership::start(client.clone(), shard)?;
        let handle = membership.shard();
        opts.shard = Some(handle.clone());
        let task = tokio::spawn(async move {
            let result = sharded(client, opts, membership, stop_rx, &state_tx).await;
            state_tx.send_replace(ReplicaState::Stopped);
            result
        });
        Ok(Replica {
            stop,
            state,
            leadership: None,
            shard: Some(handle),
            task,
        })
    }

    /// Follows the replica's state.
    pub fn state(&self) -> watch::Receiver<ReplicaState> {
        self.state.clone()
    }

    /// Waits until the informers and plugins run; `false` if the replica stopped first.
    pub async fn wait_running(&self) -> bool {
        let mut state = self.state.clone();
        state
            .wait_for(|s| matches!(s, ReplicaState::Running | ReplicaState::Stopped))
            .await
            .is_ok_and(|s| *s == ReplicaState::Running)
    }

    /// Sharded mode's view: the assignment and the plugins running here (`None` unless started
    /// with [`start_sharded`](Self::start_sharded)).
    pub fn shard(&self) -> Option<&Shard> {
        self.shard.as_ref()
    }

    /// Follows the election (`None` without leader election).
    pub fn leadership(&self) -> Option<watch::Receiver<Leadership>> {
        self.leadership.clone()
    }

    /// Waits until the replica ends by itself: with an error when it lost the Lease or could
    /// not start; never, while it runs or waits for the Lease.
    pub async fn finished(&mut self) -> Result<()> {
        join(&mut self.task).await
    }

    /// Stops the plugins and informers, then releases the Lease (if held) so a standby takes
    /// over at once.
    pub async fn shutdown(mut self) -> Result<()> {
        self.stop.send_replace(Stop::Graceful);
        join(&mut self.task).await
    }

    /// Stops at once without releasing the Lease, as a crashed process would: other
    /// candidates take over only once it expires.
    pub async fn abort(mut self) {
        self.stop.send_replace(Stop::Abort);
        let _ = join(&mut self.task).await;
    }
}

async fn join(task: &mut JoinHandle<Result<()>>) -> Result<()> {
    match task.await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Ok(()),
    }
}

/// Resolves with how to stop, once asked.
async fn stop_requested(stop: &mut watch::Receiver<Stop>) -> Stop {
    match stop.wait_for(|s| *s != Stop::No).await {
        Ok(s) => *s,
        // The Replica was dropped: nobody can ask any more; stop as a crash would.
        Err(_) => Stop::Abort,
    }
}

async fn unelected(
    client: kube::Client,
    opts: RuntimeOptions,
    mut stop: watch::Receiver<Stop>,
    state: &watch::Sender<ReplicaState>,
) -> Result<()> {
    let runtime = tokio::select! {
        r = Runtime::start(client, opts) => r?,
        _ = stop_requested(&mut stop) => return Ok(()),
    };
    state.send_replace(ReplicaState::Running);
    stop_requested(&mut stop).await;
    runtime.stop().await;
    Ok(())
}

async fn sharded(
    client: kube::Client,
    opts: RuntimeOptions,
    membership: Membership,
    mut stop: watch::Receiver<Stop>,
    state: &watch::Sender<ReplicaState>,
) -> Result<()> {
    let runtime = tokio::select! {
        r = Runtime::start(client, opts) => r?,
        how = stop_requested(&mut stop) => {
            if how == Stop::Graceful {
                membership.leave().await?;
            }
            return Ok(());
        }
    };
    state.send_replace(ReplicaState::Running);
    match stop_requested(&mut stop).await {
        Stop::Graceful => {
            // Plugins first, so the Lease keeps where they stopped; then leave, so the others
            // take them over at their next round rather than after the Lease expires.
            runtime.stop().await;
            membership.leave().await?;
        }
        _ => {
            // A crash: the Lease stays held, with the cursors it last published.
            drop(membership);
            runtime.stop().await;
        }
    }
    Ok(())
}

async fn elected(
    client: kube::Client,
    opts: RuntimeOptions,
    elector: LeaderElector,
    mut stop: watch::Receiver<Stop>,
    state: &watch::Sender<ReplicaState>,
) -> Result<()> {
    let lease = elector.config();
    let margin = lease.lease_duration - lease.renew_deadline;
    let name = format!("{}/{}", lease.namespace, lease.name);
    let standby_admin = standby_admin(&opts, &client).await?;
    let acquired = tokio::select! {
        r = elector.acquired() => Ok(r),
        how = stop_requested(&mut stop) => Err(how),
    };
    // The leader's runtime serves the admin endpoints on the same addresses from here on.
    let (admin, probes) = standby_admin;
    for server in admin.into_iter().chain(probes) {
        server.shutdown().await;
    }
    match acquired {
        Ok(r) => r?,
        Err(Stop::Graceful) => return Ok(elector.release().await?),
        Err(_) => return Ok(()),
    }
    state.send_replace(ReplicaState::Starting);
    let runtime = tokio::select! {
        r = Runtime::start(client, opts) => r?,
        lost = elector.lost() => return Err(Error::LostLease { lease: name, state: lost }),
        how = stop_requested(&mut stop) => {
            if how == Stop::Graceful {
                elector.release().await?;
            }
            return Ok(());
        }
    };
    state.send_replace(ReplicaState::Running);
    let outcome = tokio::select! {
        lost = elector.lost() => Err(lost),
        how = stop_requested(&mut stop) => Ok(how),
    };
    match outcome {
        Err(lost) => {
            // Another replica may take over once the lease expires: stop before that.
            if tokio::time::timeout(margin, runtime.stop()).await.is_err() {
                tracing::error!(lease = %name, "plugins did not stop within the lease's safety margin");
            }
            Err(Error::LostLease {
                lease: name,
                state: lost,
            })
        }
        Ok(Stop::Graceful) => {
            // Stop first, then release: the standby starts only after this replica's plugins
            // are done.
            runtime.stop().await;
            Ok(elector.release().await?)
        }
        Ok(_) => {
            // A crash: the Lease stays held until it expires.
            drop(elector);
            runtime.stop().await;
            Ok(())
        }
    }
}

/// The standby's admin endpoints: `/healthz` for liveness, and a `/readyz` that answers ready
/// (ready to take over), so that a Deployment counts the standby available and rolling updates
/// proceed; `/metrics` and `/plugins` are empty until this replica leads. Authenticated and
/// served as the leader's will be.
async fn standby_admin(
    opts: &RuntimeOptions,
    client: &kube::Client,
) -> Result<(Option<AdminServer>, Option<AdminServer>)> {
    if opts.admin.is_none() && opts.health.is_none() {
        return Ok((None, None));
    }
    let idle = Arc::new(InformerFactory::new(
        client.clone(),
        FactoryOptions::default(),
    ));
    let state = AdminState::new(idle, None);
    state.startup_complete();
    admin_servers(&opts.admin_servers(), state).await
}
