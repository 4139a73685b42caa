//! Which stored versions are garbage, tracked in memory so a batch never scans the table.
//!
//! Per informer: the latest seq of each live key, and a queue of versions that become garbage
//! once the informer's floor (the lowest cursor seq over its plugins, or its latest seq when no
//! plugin has a cursor) reaches a trigger seq: the seq of the newer version that superseded
//! them, or, for a tombstone, its own seq.

use std::collections::{BTreeSet, HashMap};

#[derive(Debug, Default)]
pub(crate) struct Compactor {
    informers: HashMap<String, InformerIndex>,
    /// (plugin, informer) -> cursor seq.
    cursors: HashMap<(String, String), u64>,
}

#[derive(Debug, Default)]
struct InformerIndex {
    /// The highest seq recorded or reported for this informer.
    seq: u64,
    /// Latest stored seq per key (tombstones included until they are collected).
    latest: HashMap<Box<str>, u64>,
    /// (trigger seq, key, seq of the version to delete); trigger == victim marks a tombstone.
    pending: BTreeSet<(u64, Box<str>, u64)>,
}

/// A version to delete: (informer, key, its seq, the seq of the change that made it garbage:
/// its successor's, or its own for a tombstone).
pub(crate) type Garbage = (String, Box<str>, u64, u64);

impl Compactor {
    /// A version was stored.
    pub(crate) fn recorded(&mut self, informer: &str, key: &str, seq: u64, tombstone: bool) {
        let ix = self.index(informer);
        ix.seq = ix.seq.max(seq);
        match ix.latest.get(key).copied() {
            // A late, older version: superseded by what is already stored.
            Some(latest) if latest > seq => {
                ix.pending.insert((latest, key.into(), seq));
                return;
            }
            Some(latest) if latest < seq => {
                ix.pending.insert((seq, key.into(), latest));
            }
            _ => {}
        }
        ix.latest.insert(key.into(), seq);
        if tombstone {
            ix.pending.insert((seq, key.into(), seq));
        }
    }

    /// The informer reported its seq (with a resource version).
    pub(crate) fn informer_seq(&mut self, informer: &str, seq: u64) {
        let ix = self.index(informer);
        ix.seq = ix.seq.max(seq);
    }

    /// A plugin's cursor on an informer moved (or was loaded).
    pub(crate) fn cursor(&mut self, plugin: &str, informer: &str, seq: u64) {
        self.cursors
            .insert((plugin.to_owned(), informer.to_owned()), seq);
    }

    /// A plugin is gone: its cursors no longer hold anything back.
    pub(crate) fn forget_plugin(&mut self, plugin: &str) {
        self.cursors.retain(|(p, _), _| p != plugin);
    }

    /// Takes every version that is garbage at the current floors, of one informer or of all.
    pub(crate) fn garbage(&mut self, only: Option<&str>) -> Vec<Garbage> {
        let mut floors: HashMap<&str, u64> = HashMap::new();
        for ((_, informer), &seq) in &self.cursors {
            floors
                .entry(informer.as_str())
                .and_modify(|f| *f = (*f).min(seq))
                .or_insert(seq);
        }
        let mut out = Vec::new();
        for (informer, ix) in &mut self.informers {
            if only.is_some_and(|o| o != informer) {
                continue;
            }
            let floor = floors.get(informer.as_str()).copied().unwrap_or(ix.seq);
            while let Some(first) = ix.pending.first() {
                if first.0 > floor {
                    break;
                }
                let Some((trigger, key, victim)) = ix.pending.pop_first() else {
                    break;
                };
                if trigger == victim && ix.latest.get(&key) == Some(&victim) {
                    ix.latest.remove(&key);
                }
                out.push((informer.clone(), key, victim, trigger));
            }
        }
        out
    }

    fn index(&mut self, informer: &str) -> &mut InformerIndex {
        if !self.informers.contains_key(informer) {
            self.informers
                .insert(informer.to_owned(), InformerIndex::default());
        }
        self.informers.get_mut(informer).expect("inserted above")
    }
}
