//! Re-expands wildcard watches (see [`crate::plugin::load::wildcard`]) when the served kinds may have
//! changed: on every change to the cluster's CustomResourceDefinitions (seen through the shared
//! CRD informer the host registers with while some plugin has a wildcard watch, debounced),
//! and on a period, which is what finds aggregated APIs (APIServices) coming and going.
//!
//! A small actor: its task ends when the [`Rediscoverer`] is dropped or the host is gone. The
//! re-expansion itself ([`PluginHost::rediscover`]) and the CRD watch behind it are the
//! `rediscovery` part's.

use std::sync::Arc;
use std::time::Duration;

use crate::fswatch::DEBOUNCE;
use crate::plugin::load::loader::PluginHost;

/// How often wildcard watches are re-expanded without a CRD change.
pub const PERIOD: Duration = Duration::from_secs(60);

/// The re-discovery loop of one [`PluginHost`]; stops when dropped.
pub struct Rediscoverer {
    task: tokio::task::JoinHandle<()>,
}

impl Rediscoverer {
    /// Starts following `host`'s CRD changes, re-expanding also every `period`.
    pub fn start(host: Arc<PluginHost>, period: Duration) -> Self {
        let mut crds = host.subscribe_crd_changes();
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await;
            loop {
                tokio::select! {
                    changed = crds.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        // A CRD applied with others (a chart, an operator's bundle) comes in a
                        // burst: one discovery for all of them.
                        loop {
                            match tokio::time::timeout(DEBOUNCE, crds.changed()).await {
                                Ok(Ok(())) => continue,
                                Ok(Err(_)) => return,
                                Err(_) => break,
                            }
                        }
                    }
                    _ = ticks.tick() => {}
                }
                if let Err(e) = host.rediscover().await {
                    tracing::warn!(error = %e, "re-discovery for wildcard watches failed; retried on the next CRD change or period");
                }
            }
        });
        Rediscoverer { task }
    }
}

impl Drop for Rediscoverer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
