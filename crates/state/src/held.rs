//! The changes the journal's writer holds until they are written (see [`crate::journal`]):
//! per informer, by change, with the batch marks a stored cut can be taken at.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use crate::stored::Text;

/// Whether a watch can resume from `rv` after a restart and its changes be told apart by it:
/// a number, as etcd's resource versions are.
pub(crate) fn resumable_version(rv: &str) -> bool {
    rv.parse::<u64>().is_ok()
}

/// One change held: its key, and its JSON or `None` for a tombstone.
pub(crate) struct Held {
    pub(crate) key: Box<str>,
    pub(crate) json: Option<Text>,
    /// A tombstone every cursor has passed is not written, but its cut still deletes the
    /// versions of its object stored before it.
    pub(crate) written: bool,
}

/// One informer's changes held until they are written.
#[derive(Default)]
pub(crate) struct InformerPending {
    /// By seq.
    pub(crate) changes: BTreeMap<u64, Held>,
    /// One per batch that brought changes: the cuts to choose from.
    pub(crate) marks: VecDeque<Mark>,
    /// Changes held since the last mark.
    pub(crate) unmarked: usize,
    /// The resource version reached, if it moved.
    pub(crate) rv: Option<Box<str>>,
    /// The last change numbered. Kept even when nothing else moved: it must never go back
    /// below a stored version's, or a change after a restart would reuse that number.
    pub(crate) seq: u64,
    /// Per key, stored versions that are garbage but must stay until a newer version of
    /// their object is written (or its delete is cut): the stored cache must not lose the
    /// object meanwhile.
    pub(crate) doomed: HashMap<Box<str>, Vec<u64>>,
}

impl InformerPending {
    /// Drops the held change `seq` (superseded, and every cursor passed its successor), and
    /// counts it out of its batch's mark.
    pub(crate) fn drop_change(&mut self, seq: u64) -> bool {
        if self.changes.remove(&seq).is_none() {
            return false;
        }
        let mark = self.marks.partition_point(|m| m.seq < seq);
        match self.marks.get_mut(mark) {
            Some(m) => m.changes = m.changes.saturating_sub(1),
            None => self.unmarked = self.unmarked.saturating_sub(1),
        }
        true
    }

    /// Whether a watch can resume from the resource version reached (see [`resumable_version`]).
    pub(crate) fn resumable(&self) -> bool {
        self.rv.as_deref().is_none_or(resumable_version)
    }
}

/// A point an informer's stored cache can be cut at: the end of a batch.
pub(crate) struct Mark {
    /// When the batch was committed.
    pub(crate) at: Instant,
    /// The last change numbered by then.
    pub(crate) seq: u64,
    /// The resource version reached by then, if it ever moved.
    pub(crate) rv: Option<Box<str>>,
    /// How many of the batch's changes are still held.
    pub(crate) changes: usize,
}

/// The changes of every informer held until they are written.
#[derive(Default)]
pub(crate) struct Pending {
    pub(crate) informers: HashMap<Arc<str>, InformerPending>,
    /// How many changes are held, over all informers.
    pub(crate) changes: usize,
}

impl Pending {
    /// Whether some informer has a cut still to write.
    pub(crate) fn has_marks(&self) -> bool {
        self.informers.values().any(|at| !at.marks.is_empty())
    }
}
