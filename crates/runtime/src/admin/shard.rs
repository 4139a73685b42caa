//! Sharded mode on the admin endpoints: the `informant_shard_*` metrics and the `shard` object
//! of `/plugins`.

use std::fmt;
use std::sync::atomic::Ordering;

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use super::metrics::{family, single};
use crate::shard::Shard;

/// The group as this member sees it, taken once per scrape.
#[derive(Debug)]
pub(super) struct ShardSample {
    pub(super) members: u64,
    pub(super) active: bool,
    pub(super) owned: u64,
    pub(super) with_cursor: u64,
    pub(super) replayed: u64,
    pub(super) handover_seconds: f64,
}

impl ShardSample {
    /// Reads `shard` now.
    pub(super) fn gather(shard: &Shard) -> Self {
        let a = shard.assignment.borrow().clone();
        let s = &shard.stats;
        ShardSample {
            members: a.members.len() as u64,
            active: a.active,
            owned: shard.book.running().len() as u64,
            with_cursor: s.handovers_with_cursor.load(Ordering::Relaxed),
            replayed: s.handovers_replayed.load(Ordering::Relaxed),
            handover_seconds: s.handover_micros.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }

    pub(super) fn encode(&self, enc: &mut DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        single(
            enc,
            "informant_shard_members",
            "Live members of the shard group, this one included while its lease is renewed.",
            ConstGauge::new(self.members),
        )?;
        single(
            enc,
            "informant_shard_active",
            "1 while this member runs its share (it follows the group and its lease is renewed), 0 while it runs none.",
            ConstGauge::new(u64::from(self.active)),
        )?;
        single(
            enc,
            "informant_shard_owned_plugins",
            "Plugins this member runs now.",
            ConstGauge::new(self.owned),
        )?;
        family(
            enc,
            "informant_shard_handovers",
            "Watches of plugins taken over from another member: from its published cursor (the changes since delivered), or replayed whole (its cursor was compacted away).",
            [("cursor", self.with_cursor), ("replayed", self.replayed)]
                .into_iter()
                .map(|(o, n)| ([("outcome", o.to_string())], ConstCounter::new(n))),
        )?;
        single(
            enc,
            "informant_shard_handover_seconds",
            "Seconds spent taking plugins over: listing at their cursors until their handlers were registered.",
            ConstCounter::new(self.handover_seconds),
        )
    }

    /// The `shard` object of `/plugins`.
    pub(super) fn json(shard: &Shard) -> serde_json::Value {
        let a = shard.assignment.borrow().clone();
        serde_json::json!({
            "group": shard.config.group,
            "identity": a.me,
            "active": a.active,
            "why": *shard.why.borrow(),
            "members": a.members,
            "owned": shard.book.running(),
        })
    }
}
