//! The last lines each plugin logged, kept per plugin for `informant logs` (the admin server's
//! `/logs`), and followers that read them as they come.
//!
//! Contract:
//! - One [`LogRing`] per plugin ([`PluginId`]: tenant and name), shared by its versions, so a
//!   hot swap keeps the lines before it. A ring holds only its own plugin's lines: a reader
//!   asks for one plugin by exact tenant and name and gets that ring or none.
//! - Bounded: a ring keeps at most [`LogBook::lines`] lines and [`LogBook::bytes`] bytes of
//!   messages; the oldest go first, and what went is counted ([`LogRing::evicted`]).
//! - Writing never waits on a reader: [`LogRing::push`] takes a lock held only to push or to
//!   copy out pointers, and wakes followers without waiting for them. A follower that does not
//!   keep up loses the oldest lines, and is told how many ([`LogLines::dropped`]); a follower that
//!   never reads costs the writer nothing.
//! - A ring is closed when its plugin is no longer loaded or waiting and no version of it
//!   can still write (each version holds a [`LogRingClaim`]); its followers then end.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use jiff::Timestamp;
use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;

use crate::plugin::bindings::Level;
use crate::plugin::id::PluginId;

/// Default most lines kept per plugin.
pub(crate) const DEFAULT_LINES: usize = 1000;

/// Default most message bytes kept per plugin.
pub(crate) const DEFAULT_BYTES: usize = 1 << 20;

/// Most lines one [`Follower::next`] returns, so a follower far behind writes in pieces.
const BATCH: usize = 256;

/// Most message bytes one [`Follower::next`] returns (one line is returned whatever its size).
const BATCH_BYTES: usize = 256 << 10;

/// One line a plugin logged, as kept.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LogRecord {
    /// Its place in the plugin's ring: 0 for the first line the plugin logged, one more for
    /// each line after it (gaps are lines dropped).
    pub seq: u64,
    /// When it was logged (RFC 3339, UTC).
    #[serde(serialize_with = "as_text")]
    pub time: Timestamp,
    /// Severity: `trace`, `debug`, `info`, `warn` or `error`.
    pub level: &'static str,
    /// The message, as the plugin wrote it (cut to `limits.log-bytes`).
    pub message: String,
    /// The record as a line of JSON, made once for all readers by the first that asks.
    #[serde(skip)]
    json: std::sync::OnceLock<bytes::Bytes>,
}

impl LogRecord {
    /// The record as one line of JSON, newline included; serialized once, however many
    /// followers read it.
    pub fn json_line(&self) -> bytes::Bytes {
        self.json
            .get_or_init(|| {
                // Plain data: serializing it cannot fail.
                let mut line = serde_json::to_vec(self).unwrap_or_default();
                line.push(b'\n');
                line.into()
            })
            .clone()
    }
}

fn as_text<S: serde::Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(t)
}

/// The name of a level as logs show it.
pub(crate) fn level_name(level: Level) -> &'static str {
    match level {
        Level::Trace => "trace",
        Level::Debug => "debug",
        Level::Info => "info",
        Level::Warn => "warn",
        Level::Error => "error",
    }
}

/// Every plugin's ring.
pub(crate) struct LogBook {
    lines: usize,
    bytes: usize,
    rings: RwLock<HashMap<PluginId, Arc<LogRing>>>,
}

impl Default for LogBook {
    fn default() -> Self {
        LogBook::new(DEFAULT_LINES, DEFAULT_BYTES)
    }
}

impl LogBook {
    /// Journals keeping at most `lines` lines and `bytes` bytes of messages each (at least one
    /// line is always kept, whatever its size).
    pub(crate) fn new(lines: usize, bytes: usize) -> Self {
        LogBook {
            lines: lines.max(1),
            bytes,
            rings: RwLock::default(),
        }
    }

    /// The ring of `id`, created empty if it has none.
    pub(crate) fn ring(&self, id: &PluginId) -> Arc<LogRing> {
        if let Some(j) = self.rings.read().get(id) {
            return j.clone();
        }
        self.rings
            .write()
            .entry(id.clone())
            .or_insert_with(|| Arc::new(LogRing::new(self.lines, self.bytes)))
            .clone()
    }

    /// The ring of `id`, if it has one.
    #[cfg(test)]
    pub(crate) fn get(&self, id: &PluginId) -> Option<Arc<LogRing>> {
        self.rings.read().get(id).cloned()
    }

    /// Closes and forgets the rings of plugins `keep` refuses, unless a version of the
    /// plugin may still write to its ring (one being loaded, or one being unregistered).
    pub(crate) fn retain(&self, mut keep: impl FnMut(&PluginId) -> bool) {
        self.rings.write().retain(|id, j| {
            let kept = keep(id) || j.writers.load(Ordering::Acquire) > 0;
            if !kept {
                j.close();
            }
            kept
        });
    }
}

/// One plugin's last lines.
pub struct LogRing {
    lines: usize,
    bytes: usize,
    ring: Mutex<Ring>,
    /// The seq the next line will have; followers wait on its changes.
    next: watch::Sender<u64>,
    closed: AtomicBool,
    /// Live [`LogRingClaim`]s.
    writers: AtomicUsize,
}

#[derive(Default)]
struct Ring {
    records: VecDeque<Arc<LogRecord>>,
    bytes: usize,
    next: u64,
}

impl Ring {
    /// The seq of the oldest line kept (`next` when none is).
    fn oldest(&self) -> u64 {
        self.records.front().map_or(self.next, |r| r.seq)
    }
}

impl LogRing {
    fn new(lines: usize, bytes: usize) -> Self {
        LogRing {
            lines,
            bytes,
            ring: Mutex::default(),
            next: watch::channel(0).0,
            closed: AtomicBool::new(false),
            writers: AtomicUsize::new(0),
        }
    }

    /// A writer's claim on this ring: while one is held, the ring stays in its book.
    pub fn writer(self: &Arc<Self>) -> LogRingClaim {
        self.writers.fetch_add(1, Ordering::AcqRel);
        LogRingClaim(self.clone())
    }

    /// Keeps a line, dropping the oldest ones over the bounds, and wakes followers.
    pub fn push(&self, level: Level, message: &str) {
        let next = {
            let mut ring = self.ring.lock();
            let record = Arc::new(LogRecord {
                seq: ring.next,
                time: Timestamp::now(),
                level: level_name(level),
                message: message.to_string(),
                json: Default::default(),
            });
            ring.next += 1;
            ring.bytes += record.message.len();
            ring.records.push_back(record);
            while ring.records.len() > self.lines
                || (ring.bytes > self.bytes && ring.records.len() > 1)
            {
                if let Some(old) = ring.records.pop_front() {
                    ring.bytes -= old.message.len();
                }
            }
            ring.next
        };
        self.next.send_replace(next);
    }

    /// The lines kept, oldest first, at most the last `tail`; and, when `tail` does not cut
    /// any, how many lines were logged before them and are no longer kept.
    pub fn snapshot(&self, tail: Option<usize>) -> LogLines {
        let ring = self.ring.lock();
        let skip = tail.map_or(0, |t| ring.records.len().saturating_sub(t));
        let records: Vec<_> = ring.records.iter().skip(skip).cloned().collect();
        LogLines {
            dropped: if skip == 0 { ring.oldest() } else { 0 },
            records,
        }
    }

    /// Lines logged and no longer kept.
    pub fn evicted(&self) -> u64 {
        self.ring.lock().oldest()
    }

    /// A follower starting with the last `tail` lines kept (all of them when `None`, its
    /// first batch then counting the lines no longer kept as dropped).
    pub fn follow(self: &Arc<Self>, tail: Option<usize>) -> Follower {
        let rx = self.next.subscribe();
        let ring = self.ring.lock();
        let start = match tail {
            Some(t) if (t as u64) < ring.next - ring.oldest() => ring.next - t as u64,
            _ => 0,
        };
        Follower {
            ring: self.clone(),
            next: start,
            rx,
        }
    }

    /// Ends its followers once they have read what is kept.
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.next.send_modify(|_| {});
    }

    /// Whether its plugin is gone.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

/// One plugin version's claim on its plugin's ring (see [`LogRing::writer`]); released when
/// dropped.
pub struct LogRingClaim(Arc<LogRing>);

impl LogRingClaim {
    /// The ring.
    pub fn ring(&self) -> &Arc<LogRing> {
        &self.0
    }
}

impl Drop for LogRingClaim {
    fn drop(&mut self) {
        self.0.writers.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Lines read from a ring.
#[derive(Debug, Default)]
pub struct LogLines {
    /// Lines lost before these: logged, but dropped from the ring before this reader got
    /// to them.
    pub dropped: u64,
    /// The lines, oldest first.
    pub records: Vec<Arc<LogRecord>>,
}

/// Reads one ring's lines as they are logged.
pub struct Follower {
    ring: Arc<LogRing>,
    next: u64,
    rx: watch::Receiver<u64>,
}

impl Follower {
    /// The next lines (waiting for some), or `None` once the ring is closed and read.
    pub async fn next(&mut self) -> Option<LogLines> {
        loop {
            // Marks the current value seen before reading, so a line pushed after the read
            // wakes the wait below.
            self.rx.borrow_and_update();
            {
                let ring = self.ring.ring.lock();
                let oldest = ring.oldest();
                let dropped = oldest.saturating_sub(self.next);
                self.next = self.next.max(oldest);
                let from = (self.next - oldest) as usize;
                let mut bytes = 0;
                let records: Vec<_> = ring
                    .records
                    .iter()
                    .skip(from)
                    .take(BATCH)
                    .take_while(|r| {
                        bytes += r.message.len();
                        bytes == r.message.len() || bytes <= BATCH_BYTES
                    })
                    .cloned()
                    .collect();
                if let Some(last) = records.last() {
                    self.next = last.seq + 1;
                }
                if dropped > 0 || !records.is_empty() {
                    return Some(LogLines { dropped, records });
                }
            }
            if self.ring.is_closed() {
                return None;
            }
            if self.rx.changed().await.is_err() {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(tenant: &str, name: &str) -> PluginId {
        PluginId {
            tenant: tenant.into(),
            name: name.into(),
        }
    }

    fn messages(b: &LogLines) -> Vec<&str> {
        b.records.iter().map(|r| r.message.as_str()).collect()
    }

    #[test]
    fn a_journal_keeps_the_last_lines_within_both_bounds_and_counts_the_rest() {
        let book = LogBook::new(3, 10);
        let j = book.ring(&id("t", "p"));
        for m in ["a", "b", "c", "d"] {
            j.push(Level::Info, m);
        }
        let s = j.snapshot(None);
        assert_eq!((s.dropped, messages(&s)), (1, vec!["b", "c", "d"]));
        let s = j.snapshot(Some(1));
        assert_eq!((s.dropped, messages(&s)), (0, vec!["d"]));
        // Bytes: a 9-byte line leaves room for one more byte only.
        j.push(Level::Warn, "123456789");
        let s = j.snapshot(None);
        assert_eq!((s.dropped, messages(&s)), (3, vec!["d", "123456789"]));
        // A line over the byte bound on its own is still kept, alone.
        j.push(Level::Error, &"x".repeat(50));
        assert_eq!(j.snapshot(None).records.len(), 1);
        assert_eq!(j.evicted(), 5);
    }

    #[test]
    fn journals_are_per_plugin_by_exact_tenant_and_name() {
        let book = LogBook::default();
        book.ring(&id("team-a", "p")).push(Level::Info, "a's");
        book.ring(&id("team-b", "p")).push(Level::Info, "b's");
        for (t, n) in [
            ("team-a", "p/../team-b/p"),
            ("", "p"),
            ("team-a ", "p"),
            ("team-ａ", "p"),
        ] {
            assert!(book.get(&id(t, n)).is_none(), "{t}/{n}");
        }
        let a = book.get(&id("team-a", "p")).unwrap().snapshot(None);
        assert_eq!(messages(&a), vec!["a's"]);
    }

    #[tokio::test]
    async fn a_follower_reads_lines_as_they_come_and_is_told_what_it_missed() {
        let book = LogBook::new(4, usize::MAX);
        let j = book.ring(&id("", "p"));
        j.push(Level::Info, "before");
        let mut f = j.follow(None);
        let b = f.next().await.unwrap();
        assert_eq!((b.dropped, messages(&b)), (0, vec!["before"]));
        let waiting = tokio::spawn(async move {
            let b = f.next().await.unwrap();
            (messages(&b).join(","), f)
        });
        j.push(Level::Info, "after");
        let (got, mut f) = waiting.await.unwrap();
        assert_eq!(got, "after");
        // A follower that does not read while ten lines come loses the oldest six of them.
        for i in 0..10 {
            j.push(Level::Info, &format!("{i}"));
        }
        let b = f.next().await.unwrap();
        assert_eq!((b.dropped, messages(&b)), (6, vec!["6", "7", "8", "9"]));
        // The plugin goes: the follower ends once it has read what is kept.
        j.push(Level::Info, "last");
        book.retain(|_| false);
        assert_eq!(messages(&f.next().await.unwrap()), vec!["last"]);
        assert!(f.next().await.is_none());
        assert!(book.get(&id("", "p")).is_none());
    }

    #[test]
    fn a_journal_a_version_still_writes_to_stays() {
        let book = LogBook::default();
        let writer = book.ring(&id("", "p")).writer();
        book.retain(|_| false);
        assert!(book.get(&id("", "p")).is_some());
        drop(writer);
        book.retain(|_| false);
        assert!(book.get(&id("", "p")).is_none());
    }

    #[test]
    fn a_follower_may_start_at_the_tail() {
        let book = LogBook::default();
        let j = book.ring(&id("", "p"));
        for m in ["a", "b", "c"] {
            j.push(Level::Info, m);
        }
        let mut f = j.follow(Some(1));
        let b = futures::executor::block_on(f.next()).unwrap();
        assert_eq!((b.dropped, messages(&b)), (0, vec!["c"]));
    }
}
