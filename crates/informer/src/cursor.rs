//! How far a handler has got: the store numbers every change it makes (`Event::seq`), and a
//! handler has *handled through* `n` once every change numbered up to `n` that reached it has
//! been handled. A durable copy of that number is a delivery cursor: after a restart the
//! handler needs only the changes after it (see `Store::changes_since`).
//!
//! The number is computed, not counted: the lowest change still queued for the handler, being
//! handled, or held by it for later (a scheduled retry, see [`Holds`]), minus one; with none,
//! the last change the informer handed out. Until the handler has handled its initial replay
//! it stays where the handler started.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

/// Changes a handler keeps to handle later, outside its queue (retries): each holds the
/// handler's cursor below it until released.
#[derive(Clone, Default)]
pub struct Holds(Arc<Mutex<BTreeMap<u64, u32>>>);

impl Holds {
    /// No holds.
    pub fn new() -> Self {
        Self::default()
    }

    /// Holds change `seq` (0: no change of the store, nothing to hold) until the guard drops.
    pub fn hold(&self, seq: u64) -> Hold {
        if seq != 0 {
            *self.0.lock().entry(seq).or_default() += 1;
        }
        Hold {
            holds: self.clone(),
            seq,
        }
    }

    /// The lowest change held.
    pub fn lowest(&self) -> Option<u64> {
        self.0.lock().first_key_value().map(|(s, _)| *s)
    }
}

impl std::fmt::Debug for Holds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Holds").field(&self.lowest()).finish()
    }
}

/// One held change; released when dropped.
#[derive(Debug)]
pub struct Hold {
    holds: Holds,
    seq: u64,
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.seq == 0 {
            return;
        }
        let mut held = self.holds.0.lock();
        if let std::collections::btree_map::Entry::Occupied(mut n) = held.entry(self.seq) {
            *n.get_mut() -= 1;
            if *n.get() == 0 {
                n.remove();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_hold_counts_until_every_guard_of_it_drops() {
        let holds = Holds::new();
        let a = holds.hold(7);
        let b = holds.hold(7);
        let c = holds.hold(9);
        let none = holds.hold(0);
        assert_eq!(holds.lowest(), Some(7));
        drop(a);
        assert_eq!(holds.lowest(), Some(7));
        drop(b);
        assert_eq!(holds.lowest(), Some(9));
        drop((c, none));
        assert_eq!(holds.lowest(), None);
    }
}
