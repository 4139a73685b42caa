//! Taking a plugin over from another shard member: where its cursors say it had got, the
//! resource as it was there, so its handlers start with exactly what changed since.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::informer::{InformerClaim, Restored};
use crate::plugin::load::id::PluginId;
use crate::plugin::load::loader::PluginHost;
use crate::plugin::load::prepare::{Prepared, SYNC_WAIT};
use crate::shard::Shard;

impl PluginHost {
    /// Fills each of `prepared`'s watches with the state its cursor (from any member's Lease)
    /// points at. A watch without a cursor, or whose cursor the server has compacted away,
    /// starts over with a replay of the whole cache, as a new plugin does.
    pub(super) async fn take_over(&self, shard: &Shard, id: &PluginId, prepared: &mut Prepared) {
        let started = Instant::now();
        let plugin = id.to_string();
        let mut taken = false;
        for w in &mut prepared.watches {
            let key = w.informer.key().to_string();
            let Some(at) = shard.book.cursor(&plugin, &prepared.scope, &key) else {
                continue;
            };
            taken = true;
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
                    w.prior = Some(Arc::new(Restored::from_objects(objects)));
                    w.floor_version = Some(at);
                    if let Some((_, namespaces)) = &w.selection {
                        w.prior_namespaces = namespaces_at(namespaces, at).await;
                    }
                    shard
                        .stats
                        .handovers_with_cursor
                        .fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                Some(Ok(Ok(None))) => {
                    "the server no longer has its resourceVersion (compacted)".to_string()
                }
                Some(Ok(Err(e))) => format!("listing at it failed: {e}"),
                None => format!("the informer did not sync within {SYNC_WAIT:?}"),
                Some(Err(_)) => format!("listing at it took longer than {SYNC_WAIT:?}"),
            };
            tracing::warn!(informer = %key, resource_version = at, "taking over from the published cursor: {why}; replaying the whole cache instead");
            shard
                .stats
                .handovers_replayed
                .fetch_add(1, Ordering::Relaxed);
        }
        if taken {
            shard
                .stats
                .handover_micros
                .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        }
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
