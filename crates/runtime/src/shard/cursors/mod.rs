//! The cursor book: how far each plugin's handlers have got, as resourceVersion watermarks any
//! replica can act on, published in this member's Lease and read from the group's members'.
//!
//! A watermark `W` for (plugin, informer) says every change of that informer's resource up to
//! resourceVersion `W` has been handled by the plugin, whichever replica ran it then. A Lease is
//! writable by anyone with Lease write access in its namespace, so a new owner does not take
//! the highest `W` it can find (a forged one would make it skip changes for good): it takes the
//! watermark of the member that last ran the plugin, as this member saw it publish the plugin
//! as running while live; without one it takes the lowest candidate. A watermark at or past
//! the resourceVersion of the Lease record carrying it cannot have been written by a member
//! (a member writes its cursors after handling them) and is ignored with a warning. Only the
//! Leases of genuine members are read at all (see [`super::roster`]).
//!
//! A member restarted under the same identity is its own previous life's successor
//! ([`previous`]): what its Lease published when it stopped or crashed (read before its first
//! renewal replaces it), and with `--state-dir` the cursors its state directory kept, are its
//! candidates, published again until it takes those plugins back or a live member publishes
//! them.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

pub(super) mod previous;
pub use previous::Source;

/// The annotation on a membership Lease holding its member's cursors.
pub const ANNOTATION: &str = "informant.dev/cursors";

/// Largest annotation this member writes; past it, the plugins that do not fit publish nothing
/// (their next owner replays the whole cache) and a warning says so. The API server allows
/// 256 KiB of annotations per object.
const MAX_ANNOTATION_BYTES: usize = 192 << 10;

/// Members that left the view (their Lease deleted, their Pod gone) whose last cursors are kept
/// until live members publish every plugin they named; past this many, the oldest go.
const MAX_DEPARTED: usize = 64;

/// This member, as [`CursorBook`] names it among the last holders of a plugin.
const ME: &str = "";

/// Something that knows how far a handler has got.
pub trait Watermark: Send + Sync + 'static {
    /// The resourceVersion through which every change has been handled, when known.
    fn handled_through_version(&self) -> Option<u64>;
}

impl Watermark for crate::informer::ListenerGauges {
    fn handled_through_version(&self) -> Option<u64> {
        crate::informer::ListenerGauges::handled_through_version(self)
    }
}

/// One plugin's published cursors.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Hash of the plugin's watches and grant: cursors of another scope do not apply.
    pub scope: String,
    /// Watermark per informer (by its key).
    pub at: BTreeMap<String, u64>,
    /// Whether the publishing member ran the plugin when it wrote this (else it had stopped it
    /// and publishes its last watermarks for the next owner).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held: bool,
}

/// The annotation's document.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Document {
    v: u32,
    plugins: BTreeMap<String, Entry>,
}

/// Parses a Lease's cursors annotation; anything unreadable counts as no cursors (the Lease
/// may have been written by a newer or a hostile writer: it never stops this member).
pub fn parse(text: &str) -> Option<BTreeMap<String, Entry>> {
    let doc: Document = serde_json::from_str(text).ok()?;
    (doc.v == 1).then_some(doc.plugins)
}

/// A plugin running here: its scope and the watermark of each of its handlers.
struct Tracked {
    scope: String,
    handlers: Vec<(String, Arc<dyn Watermark>)>,
}

/// What a genuine member's Lease says.
#[derive(Debug, Clone)]
pub struct Seen {
    /// That member's identity.
    pub member: String,
    /// Whether that member is live now.
    pub live: bool,
    /// The resourceVersion of the Lease record read: every cursor a member wrote in it is
    /// below it. `None` when it is not a number: then none of its cursors is trusted.
    pub version: Option<u64>,
    /// Its plugins' cursors.
    pub plugins: BTreeMap<String, Entry>,
}

impl Seen {
    /// `plugin`'s watermark on `informer` under `scope`, unless absurd (logged).
    fn watermark(&self, plugin: &str, scope: &str, informer: &str) -> Option<u64> {
        let e = self.plugins.get(plugin).filter(|e| e.scope == scope)?;
        let w = *e.at.get(informer)?;
        match self.version {
            Some(v) if w < v => Some(w),
            _ => {
                tracing::warn!(member = %self.member, plugin, informer, cursor = w, lease_version = ?self.version, "ignoring a shard cursor at or past the resourceVersion of the Lease publishing it: no member wrote it");
                None
            }
        }
    }
}

#[derive(Default)]
struct Book {
    running: HashMap<String, Tracked>,
    /// Cursors of plugins that stopped here, published until another live member publishes
    /// the plugin itself.
    released: BTreeMap<String, Entry>,
    /// Genuine members' Leases, as last read.
    seen: Vec<Seen>,
    /// Genuine members no longer in the view, as last read, oldest first.
    departed: VecDeque<Seen>,
    /// Per plugin, the members last seen running it while live ([`ME`] for this one).
    holders: HashMap<String, BTreeSet<String>>,
    /// Plugins whose `released` entry is this member's previous life's (before this start),
    /// and which record it came from.
    previous: HashMap<String, Source>,
    /// Told of each released plugin this member stops publishing because a live member now
    /// does (see [`CursorBook::on_superseded`]).
    superseded: Option<Superseded>,
}

/// What [`CursorBook::on_superseded`] calls.
pub(crate) type Superseded = Arc<dyn Fn(&str) + Send + Sync>;

/// Whether `new` (one member's cursors of a plugin) is `old` or further on, under its scope.
fn covers(new: &Entry, old: &Entry) -> bool {
    new.scope == old.scope
        && old
            .at
            .iter()
            .all(|(i, w)| new.at.get(i).is_some_and(|n| n >= w))
}

impl Book {
    /// Whether a live member (this one included) publishes `old`'s cursors of `plugin` or
    /// newer ones under the same scope.
    fn covered(&self, plugin: &str, old: &Entry) -> bool {
        if old.at.is_empty() {
            return true;
        }
        let own = self
            .running
            .get(plugin)
            .map(entry_of)
            .into_iter()
            .chain(self.released.get(plugin).cloned());
        let live = self
            .seen
            .iter()
            .filter(|s| s.live)
            .filter_map(|s| s.plugins.get(plugin).cloned());
        own.chain(live).any(|new| covers(&new, old))
    }

    /// Drops `plugin`'s released entry, telling [`Book::superseded`].
    fn drop_released(&mut self, plugin: &str) {
        self.released.remove(plugin);
        self.previous.remove(plugin);
        if let Some(f) = &self.superseded {
            f(plugin);
        }
    }
}

/// Cursors of the plugins this member runs and ran, and those the group's Leases publish.
#[derive(Default)]
pub struct CursorBook {
    book: Mutex<Book>,
}

impl CursorBook {
    /// An empty book.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Follows one of `plugin`'s handlers, on `informer`, under `scope`.
    pub fn track(&self, plugin: &str, scope: &str, informer: &str, mark: Arc<dyn Watermark>) {
        let mut b = self.book.lock();
        let t = b
            .running
            .entry(plugin.to_string())
            .or_insert_with(|| Tracked {
                scope: scope.to_string(),
                handlers: Vec::new(),
            });
        if t.scope != scope {
            // A new version with another scope replaces the old one's handlers.
            t.scope = scope.to_string();
            t.handlers.clear();
        }
        t.handlers.push((informer.to_string(), mark));
        b.released.remove(plugin);
        b.previous.remove(plugin);
        b.holders
            .insert(plugin.to_string(), BTreeSet::from([ME.to_string()]));
    }

    /// `plugin` stops here (it moved, or this member stops): its handlers' watermarks, read now,
    /// stay published for whoever runs it next. Call before its handlers are removed.
    pub fn release(&self, plugin: &str) {
        let mut b = self.book.lock();
        if let Some(t) = b.running.remove(plugin) {
            let mut entry = entry_of(&t);
            entry.held = false;
            b.released.insert(plugin.to_string(), entry);
            b.previous.remove(plugin);
        }
    }

    /// Releases every plugin running here.
    pub fn release_all(&self) {
        let plugins: Vec<String> = self.book.lock().running.keys().cloned().collect();
        for p in plugins {
            self.release(&p);
        }
    }

    /// `plugin` is gone from the plugins directory: nothing of it is kept or published.
    pub fn forget(&self, plugin: &str) {
        let mut b = self.book.lock();
        b.running.remove(plugin);
        b.released.remove(plugin);
        b.previous.remove(plugin);
    }

    /// Stops publishing the released plugins not in `present` (the plugins directory: a
    /// plugin removed while this member was down); those dropped.
    pub fn keep_only(&self, present: &BTreeSet<String>) -> Vec<String> {
        let mut b = self.book.lock();
        let gone: Vec<String> = b
            .released
            .keys()
            .filter(|p| !present.contains(*p))
            .cloned()
            .collect();
        for p in &gone {
            b.released.remove(p);
            b.previous.remove(p);
        }
        gone
    }

    /// Calls `f` with each released plugin whose cursors this member stops publishing because
    /// a live member runs it or publishes it further on: e.g. to drop its cursors from the
    /// state directory too. Called with the book locked: `f` must not call back into it.
    pub fn on_superseded(&self, f: Superseded) {
        self.book.lock().superseded = Some(f);
    }

    /// Where `plugin`, under `scope`, resumes on `informer`: the watermark of the member(s) that
    /// last ran it (the lowest, if several did at once), else the lowest any genuine member
    /// publishes for it (this member's own included); never one at or past the resourceVersion
    /// of the Lease carrying it. `None`: it starts over with a replay of the whole cache.
    pub fn cursor(&self, plugin: &str, scope: &str, informer: &str) -> Option<u64> {
        let b = self.book.lock();
        let own = b
            .running
            .get(plugin)
            .map(entry_of)
            .into_iter()
            .chain(b.released.get(plugin).cloned())
            .filter(|e| e.scope == scope)
            .filter_map(|e| e.at.get(informer).copied())
            .map(|w| (ME, w));
        let others = b
            .seen
            .iter()
            .chain(&b.departed)
            .filter_map(|s| Some((s.member.as_str(), s.watermark(plugin, scope, informer)?)));
        let candidates: Vec<(&str, u64)> = own.chain(others).collect();
        let last = b.holders.get(plugin);
        let from_last = candidates
            .iter()
            .filter(|(m, _)| last.is_some_and(|h| h.contains(*m)))
            .map(|(_, w)| *w)
            .min();
        from_last.or_else(|| candidates.iter().map(|(_, w)| *w).min())
    }

    /// Records what the genuine members' Leases say (this member's own excluded): who last ran
    /// each plugin, and which members left the view (their last cursors are kept). Stops
    /// publishing released plugins that a live member publishes at or past (a live
    /// member's older release of one, say from its own previous life, does not replace this
    /// member's newer cursors).
    pub fn observe(&self, seen: Vec<Seen>) {
        let mut b = self.book.lock();
        let old = std::mem::take(&mut b.seen);
        for s in old {
            if !seen.iter().any(|n| n.member == s.member) {
                b.departed.retain(|d| d.member != s.member);
                b.departed.push_back(s);
            }
        }
        b.departed
            .retain(|d| !seen.iter().any(|n| n.member == d.member));
        let mut now_held: HashMap<&str, BTreeSet<String>> = HashMap::new();
        for s in seen.iter().filter(|s| s.live) {
            for (p, _) in s.plugins.iter().filter(|(_, e)| e.held) {
                now_held
                    .entry(p.as_str())
                    .or_default()
                    .insert(s.member.clone());
            }
        }
        for (p, members) in now_held {
            // This member runs it: whatever else claims to, it knows its own watermark best.
            if !b.running.contains_key(p) {
                b.holders.insert(p.to_string(), members);
            }
        }
        let superseded: Vec<String> = b
            .released
            .iter()
            .filter(|(p, mine)| {
                seen.iter()
                    .filter(|s| s.live)
                    .filter_map(|s| s.plugins.get(*p))
                    // Only a watermark at or past this member's proves the changes handled: a
                    // `held` flag alone is what anyone with Lease write access can set, and
                    // would make this member (and its state) forget its cursors.
                    .any(|e| covers(e, mine))
            })
            .map(|(p, _)| p.clone())
            .collect();
        for p in superseded {
            b.drop_released(&p);
        }
        b.seen = seen;
        let departed = std::mem::take(&mut b.departed);
        let mut kept: VecDeque<Seen> = departed
            .into_iter()
            .filter(|d| !d.plugins.iter().all(|(p, e)| b.covered(p, e)))
            .collect();
        while kept.len() > MAX_DEPARTED {
            kept.pop_front();
        }
        b.departed = kept;
    }

    /// Whether every cursor a dead member's Lease publishes is matched or passed by one a live
    /// member publishes (this one included), so deleting that Lease loses nothing a new owner
    /// could resume from.
    pub fn supersedes(&self, dead: &BTreeMap<String, Entry>) -> bool {
        let b = self.book.lock();
        dead.iter().all(|(p, old)| b.covered(p, old))
    }

    /// The annotation to write: every running plugin's current watermarks and every released
    /// one's last, trimmed to the size the API server accepts.
    pub fn annotation(&self) -> String {
        let b = self.book.lock();
        let mut plugins: BTreeMap<String, Entry> = b.released.clone();
        for (p, t) in &b.running {
            plugins.insert(p.clone(), entry_of(t));
        }
        drop(b);
        let mut doc = Document { v: 1, plugins };
        loop {
            let text = serde_json::to_string(&doc).expect("cursors serialize");
            if text.len() <= MAX_ANNOTATION_BYTES || doc.plugins.is_empty() {
                return text;
            }
            let dropped = doc.plugins.len() / 10 + 1;
            let names: Vec<String> = doc.plugins.keys().rev().take(dropped).cloned().collect();
            tracing::warn!(
                dropped,
                "shard cursors exceed the Lease's annotation budget; those plugins' next owner replays the whole cache"
            );
            for n in names {
                doc.plugins.remove(&n);
            }
        }
    }

    /// Plugins running here, by name.
    pub fn running(&self) -> Vec<String> {
        let mut v: Vec<String> = self.book.lock().running.keys().cloned().collect();
        v.sort();
        v
    }
}

/// A running plugin's cursors now: per informer, the lowest watermark among its handlers
/// there; an informer where one handler knows none is left out (its next owner finds an older
/// watermark, or replays).
fn entry_of(t: &Tracked) -> Entry {
    let mut at: BTreeMap<String, Option<u64>> = BTreeMap::new();
    for (informer, mark) in &t.handlers {
        let w = mark.handled_through_version();
        at.entry(informer.clone())
            .and_modify(|cur| *cur = cur.zip(w).map(|(a, b)| a.min(b)))
            .or_insert(w);
    }
    Entry {
        scope: t.scope.clone(),
        at: at.into_iter().filter_map(|(k, v)| Some((k, v?))).collect(),
        held: true,
    }
}

#[cfg(test)]
mod tests;
