//! Taking a plugin over in a shard: from the cursor the group's rules choose (see
//! [`crate::shard::cursors`]), the state the plugin had seen, so its handlers start with exactly
//! what changed since.
//!
//! Per watch, from the cheapest that is exact:
//!
//! - **This member's own stored cursor** (`--state-dir`), chosen, on an informer restored from
//!   disk: the handler resumes against the restored cache as after a restart without sharding
//!   (the changes after its cursor, or, for a cursor ahead of the stored cache, the watch's
//!   changes past it). No LIST while the server still has the stored resourceVersion.
//! - **Another cursor ahead of the restored cache** (another member ran the plugin while this
//!   one was down): the restored cache is behind what the plugin saw, so a difference against
//!   it would run backwards. The handler starts as having seen the restored cache, and skips
//!   the changes up to the cursor as they come: updates and adds up to it are not delivered
//!   again; a delete the cache applies before the handler registers is (its version is not
//!   kept), and an update's old state is the one restored.
//! - **Otherwise** the resource is listed at the cursor's resourceVersion and the handler gets
//!   the difference between that and the cache.
//!
//! A watch without a cursor, or whose cursor the server has compacted away, starts over with a
//! replay of the whole cache, as a new plugin does.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::durable::{Durable, Resume};
use crate::informer::{InformerClaim, InformerFactory, Restored};
use crate::plugin::id::PluginId;
use crate::plugin::load::prepare::{Prepared, SYNC_WAIT, Watched};
use crate::shard::Shard;

/// What taking a plugin over needs: the group's cursors, this member's stored state and the
/// informers to list at a cursor.
pub(super) struct Handover<'a> {
    pub(super) shard: &'a Shard,
    pub(super) durable: Option<&'a Arc<Durable>>,
    pub(super) factory: &'a InformerFactory,
}

impl Handover<'_> {
    /// Sets where each of `prepared`'s watches starts, from its cursor (see the module docs).
    pub(super) async fn take_over(&self, id: &PluginId, prepared: &mut Prepared) {
        let shard = self.shard;
        let started = Instant::now();
        let plugin = id.to_string();
        let mut taken = false;
        for w in &mut prepared.watches {
            let key = w.informer.key().to_string();
            let Some(at) = shard.book.cursor(&plugin, &prepared.scope, &key) else {
                continue;
            };
            taken = true;
            let how = if self.resume_restored(&plugin, &prepared.scope, at, w).await {
                Some(())
            } else {
                self.list_at_cursor(at, w).await.ok()
            };
            let counter = match how {
                Some(()) => &shard.stats.handovers_with_cursor,
                None => &shard.stats.handovers_replayed,
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
        if taken {
            shard
                .stats
                .handover_micros
                .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        }
    }

    /// Resumes `w` at cursor `at` against its informer's cache restored from disk, when that
    /// is exact (see the module docs); whether it did.
    async fn resume_restored(&self, plugin: &str, scope: &str, at: u64, w: &mut Watched) -> bool {
        let Some(d) = self.durable else {
            return false;
        };
        let informer = w.informer.key();
        let Some((seq, restored_version)) = d.restored_from(informer) else {
            return false;
        };
        let key = informer.to_string();
        if d.stored_version(plugin, informer, scope) == Some(at)
            && let Some(resume) = d.cursor(plugin, informer, scope)
        {
            tracing::info!(informer = %key, resource_version = at, "taking over from this member's own stored cursor, against the cache restored from disk");
            w.start.resume = Some(resume);
            w.start.floor_version = Some(at);
            if let Some((_, namespaces)) = &w.selection {
                w.prior_namespaces = match namespaces.informer().restored() {
                    Some(restored) => Some(restored),
                    None => namespaces_at(namespaces, at).await,
                };
            }
            return true;
        }
        match restored_version {
            Some(v) if v < at => {
                tracing::info!(informer = %key, resource_version = at, restored_version = v, "taking over from a cursor ahead of the cache restored from disk: skipping the changes up to it as the watch brings them");
                w.start.resume = Some(Resume {
                    since: seq,
                    skip_through_version: Some(at),
                });
                w.start.floor_version = Some(at);
                if let Some((_, namespaces)) = &w.selection {
                    w.prior_namespaces = namespaces_at(namespaces, at).await;
                }
                true
            }
            _ => false,
        }
    }

    /// Starts `w` from the resource listed at `at`; `Err` (logged) when it cannot, and the
    /// watch replays the whole cache instead.
    async fn list_at_cursor(&self, at: u64, w: &mut Watched) -> Result<(), ()> {
        let key = w.informer.key().to_string();
        let informer = w.informer.informer().clone();
        // The difference is taken against the cache: it must hold the present first.
        self.factory.start();
        let synced = tokio::time::timeout(SYNC_WAIT, informer.wait_for_sync())
            .await
            .is_ok();
        // Bounded: a cursor from a member that saw a newer server (or a hostile Lease) is
        // answered 504, which the client retries for minutes.
        let listed = if synced {
            Some(tokio::time::timeout(SYNC_WAIT, informer.list_at(&at.to_string())).await)
        } else {
            None
        };
        let why = match listed {
            Some(Ok(Ok(Some(objects)))) => {
                tracing::info!(informer = %key, resource_version = at, objects = objects.len(), "taking over from the published cursor");
                w.start.prior = Some(Arc::new(Restored::from_objects(objects)));
                w.start.floor_version = Some(at);
                if let Some((_, namespaces)) = &w.selection {
                    w.prior_namespaces = namespaces_at(namespaces, at).await;
                }
                return Ok(());
            }
            Some(Ok(Ok(None))) => {
                "the server no longer has its resourceVersion (compacted)".to_string()
            }
            Some(Ok(Err(e))) => format!("listing at it failed: {e}"),
            None => format!("the informer did not sync within {SYNC_WAIT:?}"),
            Some(Err(_)) => format!("listing at it took longer than {SYNC_WAIT:?}"),
        };
        tracing::warn!(informer = %key, resource_version = at, "taking over from the published cursor: {why}; replaying the whole cache instead");
        Err(())
    }
}

/// The namespaces as they were at resourceVersion `at` (resourceVersions are one sequence
/// across kinds), for a selection taken over from a cursor there; `None`, with a warning, when
/// they cannot be listed there: the selection then starts from the namespaces as they are, and
/// a namespace whose labels changed meanwhile is not seen as changed.
async fn namespaces_at(namespaces: &InformerClaim, at: u64) -> Option<Arc<Restored>> {
    let listed = tokio::time::timeout(SYNC_WAIT, namespaces.list_at(&at.to_string())).await;
    let why = match listed {
        Ok(Ok(Some(objects))) => return Some(Arc::new(Restored::from_objects(objects))),
        Ok(Ok(None)) => "the server no longer has its resourceVersion (compacted)".to_string(),
        Ok(Err(e)) => format!("listing at it failed: {e}"),
        Err(_) => format!("listing at it took longer than {SYNC_WAIT:?}"),
    };
    tracing::warn!(
        resource_version = at,
        "namespace selection taken over: {why}; selecting from the namespaces as they are now"
    );
    None
}
