//! A member restarted under the same identity resumes from its previous life's records.
//!
//! Two records of that life may be found at start, and both count as the cursors of a member
//! that left (this one, before it stopped or crashed) under the book's rules: the last holder
//! seen running a plugin while live is resumed from, else the lowest candidate; they are
//! published again as released until this member takes those plugins back, or a live member
//! runs them or publishes them further on, so a crash right after the restart loses nothing.
//!
//! - Its own Lease as the previous life left it, read before the first renewal replaces it
//!   ([`previous_life`]). It counts only as this member's own: named after it, held by it or by
//!   no one, and with `--pod-uid` owned by exactly this Pod (a Lease a replaced Pod of the same
//!   name left behind, which Kubernetes is about to delete with that Pod, is not). Cursors at
//!   or past the Lease's own resourceVersion are ignored, as any member's are.
//! - With `--state-dir`, the cursors the state directory kept ([`CursorBook::adopt_stored`]).
//!   Those are this member's own writes to a private file: where both records have a cursor
//!   for the same plugin and informer under the same scope, the state's is taken. It is proof
//!   of what was handled (so it never skips a change), while the Lease's may have been
//!   rewritten by anyone with Lease write access, or be a renewal period older. It also
//!   survives what the Lease does not: the Pod's deletion (a rollout) takes the Lease with it,
//!   while the state's volume claim stays.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;

use super::{CursorBook, Entry, Seen};
use crate::shard::ShardConfig;
use crate::shard::roster::LeaseRecord;

/// Where a released entry of this member's previous life came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Its Lease, as it was when this member started.
    Lease,
    /// The state directory (`--state-dir`).
    State,
}

/// What `lease` (this member's Lease, `GROUP-IDENTITY`, as read before this start's first
/// renewal) says of this member's previous life, if it counts as this member's own: held by
/// this identity or by no one, and with `--pod-uid` owned by exactly this Pod.
pub(in crate::shard) fn previous_life(lease: &Lease, config: &ShardConfig) -> Option<Seen> {
    let rec = LeaseRecord::of(lease);
    let me = &config.lease.identity;
    if rec.holder.as_ref().is_some_and(|h| h != me) {
        tracing::warn!(lease = %config.lease_name(), holder = ?rec.holder, "this member's Lease is held by another identity: its cursors are not this member's previous life's");
        return None;
    }
    if let Some(uid) = &config.pod_uid {
        let refs = lease
            .metadata
            .owner_references
            .as_deref()
            .unwrap_or_default();
        let own = rec
            .owner
            .as_ref()
            .is_some_and(|(name, u)| name == me && u == uid);
        if !own {
            if !refs.is_empty() || !rec.cursors.is_empty() {
                tracing::info!(lease = %config.lease_name(), pod_uid = %uid, "this member's Lease belongs to another Pod of the same name (replaced): its cursors do not count");
            }
            return None;
        }
    }
    Some(Seen {
        member: me.clone(),
        live: false,
        version: rec.version,
        plugins: rec.cursors,
    })
}

impl CursorBook {
    /// Takes `life` (see [`previous_life`]) as this member's previous life: its cursors of
    /// plugins not running here, bar those at or past the Lease's resourceVersion, are
    /// candidates and published as released. Replaces what an earlier read adopted (a first
    /// renewal that failed reads the Lease again); never a release of this life, nor the state
    /// directory's cursor of the same plugin and informer.
    pub fn adopt_previous_lease(&self, life: Seen) {
        let mut b = self.book.lock();
        let earlier: Vec<String> = b
            .previous
            .iter()
            .filter(|(_, s)| **s == Source::Lease)
            .map(|(p, _)| p.clone())
            .collect();
        for p in earlier {
            b.released.remove(&p);
            b.previous.remove(&p);
        }
        let mut adopted = 0;
        for (p, e) in &life.plugins {
            let at: BTreeMap<String, u64> =
                e.at.keys()
                    .filter_map(|i| Some((i.clone(), life.watermark(p, &e.scope, i)?)))
                    .collect();
            if at.is_empty() || b.running.contains_key(p) {
                continue;
            }
            match (b.previous.get(p).copied(), b.released.get_mut(p)) {
                (Some(Source::State), Some(own)) => {
                    if own.scope == e.scope {
                        for (i, w) in at {
                            own.at.entry(i).or_insert(w);
                        }
                    }
                }
                // Released in this life: newer than anything the previous one wrote.
                (None, Some(_)) => {}
                _ => {
                    let entry = Entry {
                        scope: e.scope.clone(),
                        at,
                        held: false,
                    };
                    b.released.insert(p.clone(), entry);
                    b.previous.insert(p.clone(), Source::Lease);
                    adopted += 1;
                }
            }
        }
        if adopted > 0 {
            tracing::info!(
                plugins = adopted,
                "resuming from this member's previous life: the cursors its Lease published"
            );
        }
    }

    /// Takes the cursors the state directory kept (per plugin, its scope and watermark per
    /// informer) as this member's previous life's, over what its Lease said of the same
    /// plugin and informer (see the module docs); never over a plugin running here or
    /// released in this life.
    pub fn adopt_stored(&self, stored: BTreeMap<String, Entry>) {
        let mut b = self.book.lock();
        let mut adopted = 0;
        for (p, mut e) in stored {
            let released_here = b.released.contains_key(&p) && !b.previous.contains_key(&p);
            if e.at.is_empty() || b.running.contains_key(&p) || released_here {
                continue;
            }
            e.held = false;
            if b.previous.get(&p) == Some(&Source::Lease)
                && let Some(lease) = b.released.get(&p)
                && lease.scope == e.scope
            {
                for (i, w) in &lease.at {
                    e.at.entry(i.clone()).or_insert(*w);
                }
            }
            b.released.insert(p.clone(), e);
            b.previous.insert(p, Source::State);
            adopted += 1;
        }
        if adopted > 0 {
            tracing::info!(
                plugins = adopted,
                "resuming from this member's previous life: the cursors its state directory kept"
            );
        }
    }

    /// Where `plugin`'s released entry came from, if it is this member's previous life's.
    pub fn previous(&self, plugin: &str) -> Option<Source> {
        self.book.lock().previous.get(plugin).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leader::LeaseConfig;
    use crate::shard::ShardBy;
    use std::time::Duration;

    fn config(pod_uid: Option<&str>) -> ShardConfig {
        ShardConfig {
            group: "hooks".into(),
            lease: LeaseConfig::new("hooks", "default", "a")
                .with_lease_duration(Duration::from_secs(6)),
            by: ShardBy::Plugin,
            pod_uid: pod_uid.map(String::from),
        }
    }

    /// Lease `hooks-a` at resourceVersion 500, held by `holder`, owned by `owners`, publishing
    /// p at 400.
    fn lease(holder: Option<&str>, owners: serde_json::Value) -> Lease {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "hooks-a", "resourceVersion": "500", "ownerReferences": owners,
                "annotations": {(super::super::ANNOTATION):
                    r#"{"v":1,"plugins":{"p":{"scope":"s","at":{"pods":400},"held":true}}}"#},
            },
            "spec": {"holderIdentity": holder},
        }))
        .unwrap()
    }

    fn pod(name: &str, uid: &str) -> serde_json::Value {
        serde_json::json!([{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid}])
    }

    #[test]
    fn only_this_members_own_lease_is_its_previous_life() {
        // Held by it (a crash) or by no one (it left): its own.
        for holder in [Some("a"), None] {
            let life = previous_life(&lease(holder, pod("a", "uid-1")), &config(Some("uid-1")))
                .expect("its own Lease");
            assert_eq!((life.member.as_str(), life.version), ("a", Some(500)));
            assert_eq!(life.plugins["p"].at["pods"], 400);
            assert!(previous_life(&lease(holder, serde_json::json!([])), &config(None)).is_some());
        }
        // Held by another identity: a rewrite, not this member's record.
        assert!(previous_life(&lease(Some("mallory"), pod("a", "uid-1")), &config(None)).is_none());
        // With --pod-uid: the Lease a replaced Pod of the same name left (a rollout), one owned
        // by another Pod, by none, or by more than this one, does not count.
        for owners in [
            pod("a", "uid-old"),
            pod("b", "uid-1"),
            serde_json::json!([]),
            serde_json::json!([
                {"apiVersion": "v1", "kind": "Pod", "name": "a", "uid": "uid-1"},
                {"apiVersion": "v1", "kind": "Pod", "name": "a", "uid": "uid-old"},
            ]),
            serde_json::json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "a", "uid": "uid-1"}]),
        ] {
            assert!(
                previous_life(&lease(Some("a"), owners.clone()), &config(Some("uid-1"))).is_none(),
                "{owners}"
            );
        }
    }
}
