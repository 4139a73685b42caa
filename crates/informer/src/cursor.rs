//! How far a handler has got: the store numbers every change it makes (`Event::seq`), and a
//! handler has *handled through* `n` once every change numbered up to `n` that reached it has
//! been handled. A durable copy of that number is a delivery cursor: after a restart the
//! handler needs only the changes after it (see `Store::changes_since`).
//!
//! The number is computed, not counted: the lowest change still queued for the handler, being
//! handled, or held by it for later (a scheduled retry, see [`Holds`]), minus one; with none,
//! the last change the informer handed out. Until the handler has handled its initial replay
//! it stays where the handler started.
//!
//! The same is kept in resourceVersions, which unlike change numbers mean the same on every
//! replica: a handler's *version watermark* `W` promises that every change with a
//! resourceVersion up to `W` that reached it has been handled. It is the lowest version still
//! queued (per merged event, the lowest it stands for; an initial replay counts with its
//! objects' versions), being handled, or held, minus one; with none, the newest version the
//! informer has handed out (its *reached* version, read before anything pending is, so a change
//! racing in can only lower it); never below a floor given at registration; and unknown as
//! soon as any resourceVersion seen is not a number.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

/// A resourceVersion as a number, when it is one (0 is none: no object has it).
pub fn version_of(resource_version: &str) -> Option<u64> {
    resource_version.parse().ok().filter(|v| *v != 0)
}

/// A resourceVersion that is not a number was seen: no version watermark can be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Opaque;

/// The newest resourceVersion an informer has handed out to its handlers (see the module
/// docs): advanced only once every change up to it has been queued to them.
#[derive(Debug, Default)]
pub(crate) struct Reached {
    version: AtomicU64,
    opaque: AtomicBool,
}

impl Reached {
    /// Everything up to `resource_version` has been handed out.
    pub(crate) fn note(&self, resource_version: &str) {
        if !resource_version.is_empty() {
            self.note_parsed(version_of(resource_version).ok_or(Opaque));
        }
    }

    /// Everything up to `version` has been handed out.
    pub(crate) fn note_parsed(&self, version: Result<u64, Opaque>) {
        match version {
            Ok(v) => {
                self.version.fetch_max(v, Ordering::AcqRel);
            }
            Err(Opaque) => self.opaque.store(true, Ordering::Release),
        }
    }

    /// The version reached (0: none yet).
    pub(crate) fn get(&self) -> Result<u64, Opaque> {
        let v = self.version.load(Ordering::Acquire);
        if self.opaque.load(Ordering::Acquire) {
            return Err(Opaque);
        }
        Ok(v)
    }
}

/// Counted numbers (0 is none): the lowest is what holds a cursor back.
#[derive(Default)]
pub(crate) struct Counted(BTreeMap<u64, u32>);

impl Counted {
    pub(crate) fn add(&mut self, n: u64) {
        if n != 0 {
            *self.0.entry(n).or_default() += 1;
        }
    }

    pub(crate) fn remove(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        if let std::collections::btree_map::Entry::Occupied(mut c) = self.0.entry(n) {
            *c.get_mut() -= 1;
            if *c.get() == 0 {
                c.remove();
            }
        }
    }

    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }

    pub(crate) fn lowest(&self) -> Option<u64> {
        self.0.first_key_value().map(|(n, _)| *n)
    }
}

#[derive(Default)]
struct Held {
    seqs: Counted,
    versions: Counted,
}

/// Changes a handler keeps to handle later, outside its queue (retries): each holds the
/// handler's cursor and version watermark below it until released.
#[derive(Clone, Default)]
pub struct Holds(Arc<Mutex<Held>>);

impl Holds {
    /// No holds.
    pub fn new() -> Self {
        Self::default()
    }

    /// Holds change `seq` and resourceVersion `version` (an [`Event`](crate::Event)'s `seq`
    /// and `version`; 0: nothing to hold) until the guard drops.
    pub fn hold(&self, seq: u64, version: u64) -> Hold {
        let mut held = self.0.lock();
        held.seqs.add(seq);
        held.versions.add(version);
        Hold {
            holds: self.clone(),
            seq,
            version,
        }
    }

    /// The lowest change held.
    pub fn lowest(&self) -> Option<u64> {
        self.0.lock().seqs.lowest()
    }

    /// The lowest resourceVersion held.
    pub fn lowest_version(&self) -> Option<u64> {
        self.0.lock().versions.lowest()
    }
}

impl std::fmt::Debug for Holds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Holds")
            .field(&self.lowest())
            .field(&self.lowest_version())
            .finish()
    }
}

/// One held change; released when dropped.
#[derive(Debug)]
pub struct Hold {
    holds: Holds,
    seq: u64,
    version: u64,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut held = self.holds.0.lock();
        held.seqs.remove(self.seq);
        held.versions.remove(self.version);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_hold_counts_until_every_guard_of_it_drops() {
        let holds = Holds::new();
        let a = holds.hold(7, 70);
        let b = holds.hold(7, 70);
        let c = holds.hold(9, 65);
        let none = holds.hold(0, 0);
        assert_eq!(
            (holds.lowest(), holds.lowest_version()),
            (Some(7), Some(65))
        );
        drop(a);
        assert_eq!(holds.lowest(), Some(7));
        drop(b);
        assert_eq!(
            (holds.lowest(), holds.lowest_version()),
            (Some(9), Some(65))
        );
        drop((c, none));
        assert_eq!((holds.lowest(), holds.lowest_version()), (None, None));
    }

    #[test]
    fn only_positive_numbers_are_versions() {
        assert_eq!(version_of("42"), Some(42));
        assert_eq!(version_of("0"), None);
        assert_eq!(version_of("a1b2"), None);
        assert_eq!(version_of(""), None);
    }
}
