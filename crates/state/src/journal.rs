//! The journal: callers on the event path send ops down an unbounded channel and never touch
//! the disk; one writer thread applies them in order and commits a batch at most every
//! [`BATCH_WINDOW`] (sooner on a flush).
//!
//! Each batch commits the plugins' cursors, as fresh as its changes: just before it commits,
//! the writer asks the [cursor source](StateWriter::set_cursor_source) where every plugin stands
//! and takes every op sent until then. The changes themselves are held for [`WRITE_AFTER`]
//! and then written in change order, so the stored cache is always an informer's state as of
//! one change, its *cut*, whose resource version is stored with it. A change superseded while
//! held, by a newer change of its object that every cursor has passed, is never written: an
//! object that keeps changing is written rarely or never. The stored cache may then hold an
//! older version of such an object than the cut's, and a watch resumed from the cut's
//! resource version brings the newer change again.
//!
//! A cursor may be ahead of its informer's cut. That is what a restart after a crash resumes
//! from: the watch from the cut's resource version brings the changes in between again, and
//! each plugin skips those up to the resource version its cursor had handled (so a cursor
//! carries one). An informer whose resource versions are not numbers cannot be resumed that
//! way: its changes are written with every batch, as are an informer's until it has reached a
//! resource version (an informer's first list, whose changes come in no order).
//!
//! Any write or commit error degrades the journal for good: one warning naming the file, then
//! every op is dropped (and counted) and every flush resolves at once.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redb::{Database, ReadableDatabase, ReadableTable};
use tokio::sync::oneshot;

use crate::compact::Compactor;
use crate::held::{Held, Mark, Pending};
use crate::letters::DeadLetter;
use crate::letters::{self, LetterCounts};
use crate::stored::Text;
use crate::tables::{CURSORS, DEAD_LETTER_IDS, DEAD_LETTERS, INFORMERS, VERSION_META, VERSIONS};

/// The longest a sent op waits before its batch commits (unless a flush asks sooner).
pub const BATCH_WINDOW: Duration = Duration::from_millis(100);

/// How long a change is held before it is written (unless a flush or a close asks sooner):
/// one that a newer change of its object supersedes meanwhile, handled by every plugin, is
/// never written.
pub const WRITE_AFTER: Duration = Duration::from_secs(30);

/// The most changes held: past it, every held change is written at once.
pub const MAX_HELD: usize = 1_000_000;

/// About the most held changes of an informer one commit writes: a flush, or the changes of a
/// burst coming of age, are written in commits of about this many, not in one huge one (redb's
/// cost per change, and the file, grow with the size of a transaction).
const MAX_CUT: usize = 5_000;

/// The most ops still queued behind a batch for it to take fresh cursors (and those ops).
const FRESH_CURSORS_MAX_WAITING: usize = 4096;

enum Op {
    Record {
        informer: Arc<str>,
        seq: u64,
        key: Box<str>,
        json: Option<Text>,
        /// The resource version the informer reached with this change, when it moved.
        reached: Option<Box<str>>,
    },
    ResourceVersion {
        informer: Box<str>,
        rv: Box<str>,
        seq: u64,
    },
    Cursor {
        plugin: Box<str>,
        informer: Box<str>,
        seq: u64,
        version: Option<u64>,
        scope: Box<str>,
    },
    ForgetPlugin(Box<str>),
    DeadLetter(Box<DeadLetter>),
    DropDeadLetters(Box<str>),
    Flush(oneshot::Sender<()>),
    /// Sent by the writer to itself after asking the cursor source: every op before it was
    /// sent before the cursors were read.
    Mark,
    Close,
}

/// Sends every plugin's current cursor through the journal (see [`StateWriter::set_cursor_source`]).
pub type CursorSource = Arc<dyn Fn() + Send + Sync>;

#[derive(Default)]
struct Shared {
    ops: AtomicU64,
    commits: AtomicU64,
    queued: AtomicU64,
    dropped_ops: AtomicU64,
    dead_letters_dropped: AtomicU64,
    is_degraded: AtomicBool,
    degraded: Mutex<Option<String>>,
    cursor_source: Mutex<Option<CursorSource>>,
    /// The writer's thread, to wake it for a flush or a close.
    writer: std::sync::OnceLock<std::thread::Thread>,
}

/// Counters of a journal, for metrics and logs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JournalStats {
    /// Ops applied and committed.
    pub ops: u64,
    /// Batches committed.
    pub commits: u64,
    /// Bytes written to the state file since it was opened (what redb handed the file).
    pub bytes_written: u64,
    /// Ops sent and not yet committed or dropped.
    pub queued: u64,
    /// Ops dropped because the journal was degraded or closed.
    pub dropped_ops: u64,
    /// Why the journal stopped writing, once it has.
    pub degraded: Option<String>,
    /// Dead letters dropped: the oldest past a plugin's or a tenant's bound
    /// ([`MAX_DEAD_LETTERS_PER_PLUGIN`](crate::MAX_DEAD_LETTERS_PER_PLUGIN),
    /// [`MAX_DEAD_LETTERS_PER_TENANT`](crate::MAX_DEAD_LETTERS_PER_TENANT)), and those of
    /// plugins removed ([`StateWriter::drop_dead_letters`]).
    pub dead_letters_dropped: u64,
}

/// The event path's handle to the state: cheap to clone, `Send + Sync`, never blocks on disk.
#[derive(Clone)]
pub struct StateWriter {
    tx: mpsc::Sender<Op>,
    shared: Arc<Shared>,
    written: Arc<AtomicU64>,
}

impl std::fmt::Debug for StateWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateWriter")
            .field("stats", &self.stats())
            .finish()
    }
}

impl StateWriter {
    /// Records that `informer`'s mutation `seq` left `key` as `json`, or deleted it (`None`).
    /// Each mutation of an informer has its own `seq`: a second record with it replaces the first.
    pub fn record(&self, informer: &str, seq: u64, key: &str, json: Option<&str>) {
        let json = json.map(|j| Arc::new(Box::<str>::from(j)) as Text);
        self.record_shared(&Arc::from(informer), seq, key, json, None);
    }

    /// [`StateWriter::record`] without copying: the JSON is shared until written (so a caller that
    /// keeps the object anyway, as a cache does, pays no copy and no extra memory for it).
    /// `reached` is the resource version the informer reached with this change, if it moved:
    /// one op per change instead of two (see [`StateWriter::resource_version`]).
    pub fn record_shared(
        &self,
        informer: &Arc<str>,
        seq: u64,
        key: &str,
        json: Option<Text>,
        reached: Option<&str>,
    ) {
        self.send(Op::Record {
            informer: informer.clone(),
            seq,
            key: key.into(),
            json,
            reached: reached.map(Box::from),
        });
    }

    /// Records the resource version `informer` has reached, as of its mutation `seq`.
    pub fn resource_version(&self, informer: &str, rv: &str, seq: u64) {
        self.send(Op::ResourceVersion {
            informer: informer.into(),
            rv: rv.into(),
            seq,
        });
    }

    /// Records that `plugin` has handled everything `informer` emitted up to `seq`, and every
    /// change up to resource `version` (when the informer's versions are numbers), under watch
    /// `scope`.
    pub fn cursor(
        &self,
        plugin: &str,
        informer: &str,
        seq: u64,
        version: Option<u64>,
        scope: &str,
    ) {
        self.send(Op::Cursor {
            plugin: plugin.into(),
            informer: informer.into(),
            seq,
            version,
            scope: scope.into(),
        });
    }

    /// Drops all of `plugin`'s cursors, so they no longer hold back compaction.
    pub fn forget_plugin(&self, plugin: &str) {
        self.send(Op::ForgetPlugin(plugin.into()));
    }

    /// Stores a dead letter; its id is assigned by the writer, increasing per plugin. Past the
    /// plugin's or its tenant's bound, the oldest is dropped (see [`crate::letters`]).
    pub fn dead_letter(&self, letter: DeadLetter) {
        self.send(Op::DeadLetter(Box::new(letter)));
    }

    /// Drops every dead letter of `plugin` (removed from the plugins directory), counted in
    /// [`JournalStats::dead_letters_dropped`].
    pub fn drop_dead_letters(&self, plugin: &str) {
        self.send(Op::DropDeadLetters(plugin.into()));
    }

    /// Has the writer call `source` just before each commit; `source` sends the cursors of
    /// every plugin (with [`StateWriter::cursor`]) as they stand. A cursor covers only changes
    /// recorded before it is read, so the batch then carries cursors as fresh as its records.
    ///
    /// `source` runs on the writer's thread: it must not block on the journal, and must not
    /// hold the last reference to the `StateDir` (the writer would wait for itself to stop).
    pub fn set_cursor_source(&self, source: CursorSource) {
        *self
            .shared
            .cursor_source
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(source);
    }

    /// Resolves once every op sent before it is committed, or at once if the journal is degraded or closed.
    pub async fn flush(&self) {
        if self.shared.is_degraded.load(Ordering::Acquire) {
            return;
        }
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Op::Flush(tx)).is_err() {
            return;
        }
        self.shared.wake_writer();
        // An error means the writer dropped the waiter: it stopped, nothing more will commit.
        let _ = rx.await;
    }

    /// The journal's counters.
    pub fn stats(&self) -> JournalStats {
        let s = &self.shared;
        JournalStats {
            ops: s.ops.load(Ordering::Relaxed),
            commits: s.commits.load(Ordering::Relaxed),
            bytes_written: self.written.load(Ordering::Relaxed),
            queued: s.queued.load(Ordering::Relaxed),
            dropped_ops: s.dropped_ops.load(Ordering::Relaxed),
            degraded: s.degraded.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            dead_letters_dropped: s.dead_letters_dropped.load(Ordering::Relaxed),
        }
    }

    fn send(&self, op: Op) {
        if self.shared.is_degraded.load(Ordering::Acquire) {
            self.shared.dropped_ops.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.shared.queued.fetch_add(1, Ordering::Relaxed);
        if self.tx.send(op).is_err() {
            self.shared.queued.fetch_sub(1, Ordering::Relaxed);
            self.shared.dropped_ops.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The writer thread and a journal to reach it; owned by the `StateDir`.
pub(crate) struct WriterThread {
    journal: StateWriter,
    thread: Option<JoinHandle<()>>,
}

impl WriterThread {
    /// The writer of `db`; with `None` (the state is closed) a journal that drops every op.
    pub(crate) fn start(
        path: PathBuf,
        db: Option<Arc<Database>>,
        written: Arc<AtomicU64>,
        compactor: Arc<Mutex<Compactor>>,
        letters: Arc<Mutex<LetterCounts>>,
    ) -> Self {
        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(Shared::default());
        let Some(db) = db else {
            shared.degrade(format!("state file `{}` is closed", path.display()));
            let journal = StateWriter {
                tx,
                shared,
                written,
            };
            return WriterThread {
                journal,
                thread: None,
            };
        };
        // An informer stored with a resource version has a cut to resume from; the others'
        // changes are written with every batch until they have one.
        let resumable = resumable_informers(&db).unwrap_or_default();
        let mut state = WriterState {
            path,
            db,
            shared: shared.clone(),
            compactor,
            letters,
            tx: tx.clone(),
            pending: Pending::default(),
            resumable,
        };
        let thread = std::thread::Builder::new()
            .name("informant-state".into())
            .spawn(move || state.run(rx))
            .ok();
        let journal = StateWriter {
            tx,
            shared,
            written,
        };
        match &thread {
            Some(t) => {
                let _ = journal.shared.writer.set(t.thread().clone());
            }
            None => journal
                .shared
                .degrade("cannot start the writer thread".into()),
        }
        WriterThread { journal, thread }
    }

    pub(crate) fn journal(&self) -> StateWriter {
        self.journal.clone()
    }

    /// Commits what is queued, stops the thread and waits for it (so the file is closed after).
    pub(crate) fn close(mut self) {
        let _ = self.journal.tx.send(Op::Close);
        self.journal.shared.wake_writer();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Shared {
    fn wake_writer(&self) {
        if let Some(writer) = self.writer.get() {
            writer.unpark();
        }
    }

    fn degrade(&self, why: String) {
        let mut degraded = self.degraded.lock().unwrap_or_else(|p| p.into_inner());
        if degraded.is_none() {
            *degraded = Some(why);
        }
        self.is_degraded.store(true, Ordering::Release);
    }
}

struct WriterState {
    path: PathBuf,
    db: Arc<Database>,
    shared: Arc<Shared>,
    /// Shared with the `StateDir`, which adds an informer's stored versions when it reads them.
    compactor: Arc<Mutex<Compactor>>,
    /// Shared with the `StateDir`, whose operator calls take letters; locked only while
    /// holding the write transaction.
    letters: Arc<Mutex<LetterCounts>>,
    /// To send itself a [`Op::Mark`].
    tx: mpsc::Sender<Op>,
    /// The changes held.
    pending: Pending,
    /// The informers whose stored cut has a resource version a watch can resume from.
    resumable: HashSet<Arc<str>>,
}

impl WriterState {
    fn run(&mut self, rx: mpsc::Receiver<Op>) {
        let mut last_commit = Instant::now() - BATCH_WINDOW;
        let mut batch = Vec::new();
        let mut waiters = Vec::new();
        let mut closing = false;
        while !closing {
            let Ok(first) = rx.recv() else { break };
            let deadline = last_commit + BATCH_WINDOW;
            let mut next = Some(first);
            'collect: loop {
                loop {
                    let op = match next.take().map_or_else(|| rx.try_recv(), Ok) {
                        Ok(op) => op,
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Disconnected) => {
                            closing = true;
                            break 'collect;
                        }
                    };
                    match op {
                        Op::Flush(waiter) => {
                            waiters.push(waiter);
                            break 'collect;
                        }
                        Op::Close => {
                            closing = true;
                            break 'collect;
                        }
                        op => batch.push(op),
                    }
                }
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                // Ops queue meanwhile without waking the writer: a wake-up per op would cost
                // more than writing it. A flush or a close wakes it.
                std::thread::park_timeout(deadline - now);
            }
            if !batch.is_empty() {
                self.take_fresh_cursors(&rx, &mut batch, &mut waiters, &mut closing);
            }
            // Everything held is written when asked to be durable, and at a close.
            let everything = closing || !waiters.is_empty();
            let n = batch.len() as u64;
            if !batch.is_empty() || everything {
                if self.shared.is_degraded.load(Ordering::Acquire) {
                    self.shared.dropped_ops.fetch_add(n, Ordering::Relaxed);
                } else {
                    let mut outcome = self.commit_guarded(&mut batch, everything);
                    let mut commits = 1;
                    // Everything asked for: the rest in commits of their own. Each takes at least
                    // one mark of every informer that has one, so this ends.
                    while outcome.is_ok() && everything && self.pending.has_marks() {
                        outcome = self.commit_guarded(&mut Vec::new(), true);
                        commits += 1;
                    }
                    match outcome {
                        Ok(()) => {
                            self.shared.ops.fetch_add(n, Ordering::Relaxed);
                            self.shared.commits.fetch_add(commits, Ordering::Relaxed);
                        }
                        Err(e) => {
                            tracing::warn!(path = %self.path.display(), error = %e, "state file: commit failed; durable state is off until restart");
                            self.shared
                                .degrade(format!("state file `{}`: {e}", self.path.display()));
                            let held = self.pending.changes as u64;
                            self.pending = Pending::default();
                            self.shared
                                .dropped_ops
                                .fetch_add(n + held, Ordering::Relaxed);
                        }
                    }
                }
                batch.clear();
                self.shared.queued.fetch_sub(n, Ordering::Relaxed);
            }
            for waiter in waiters.drain(..) {
                let _ = waiter.send(());
            }
            last_commit = Instant::now();
        }
        // Ops sent after Close are never applied: count them out so `queued` settles at zero.
        while let Ok(op) = rx.try_recv() {
            if !matches!(op, Op::Flush(_) | Op::Close | Op::Mark) {
                self.shared.queued.fetch_sub(1, Ordering::Relaxed);
                self.shared.dropped_ops.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Asks the cursor source for every plugin's cursor and adds to `batch` every op sent
    /// before it answered: the cursors then cover records of this batch, not of a later one.
    fn take_fresh_cursors(
        &self,
        rx: &mpsc::Receiver<Op>,
        batch: &mut Vec<Op>,
        waiters: &mut Vec<oneshot::Sender<()>>,
        closing: &mut bool,
    ) {
        if self.shared.is_degraded.load(Ordering::Acquire) {
            return;
        }
        // Behind (a list, a burst): taking everything queued would make one huge commit, which
        // costs more per change than the fresher cursors save. The periodic save covers it.
        let queued = self.shared.queued.load(Ordering::Relaxed) as usize;
        let waiting = queued.saturating_sub(batch.len());
        if waiting > FRESH_CURSORS_MAX_WAITING {
            return;
        }
        let source = self
            .shared
            .cursor_source
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let Some(source) = source else { return };
        // A panicking source costs this batch its fresh cursors, not the writer.
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| source())).is_err() {
            tracing::warn!(path = %self.path.display(), "state file: reading the plugins' cursors panicked");
        }
        if self.tx.send(Op::Mark).is_err() {
            return;
        }
        while let Ok(op) = rx.recv() {
            match op {
                Op::Mark => return,
                Op::Flush(waiter) => waiters.push(waiter),
                Op::Close => *closing = true,
                op => batch.push(op),
            }
        }
    }

    /// [`WriterState::commit`], where a panic inside redb (it asserts on a file damaged under
    /// it in debug builds) is an error that degrades the journal, not a writer killed silently.
    fn commit_guarded(&mut self, batch: &mut Vec<Op>, everything: bool) -> Result<(), redb::Error> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.commit(batch, everything)
        }))
        .unwrap_or_else(|_| {
            Err(redb::Error::Corrupted(
                "the writer panicked committing".into(),
            ))
        })
    }

    /// Commits `batch`: its cursors and dead letters, and the held changes old enough to be
    /// written (with `everything`, all of them, up to about [`MAX_CUT`] per informer).
    fn commit(&mut self, batch: &mut Vec<Op>, everything: bool) -> Result<(), redb::Error> {
        let now = Instant::now();
        let txn = self.db.begin_write()?;
        let mut compactor = self.compactor.lock().unwrap_or_else(|p| p.into_inner());
        let pending = &mut self.pending;
        let mut versions = txn.open_table(VERSIONS)?;
        let mut metas = txn.open_table(VERSION_META)?;
        let mut moved: HashSet<Arc<str>> = HashSet::new();
        {
            let mut cursors = txn.open_table(CURSORS)?;
            let mut letters = txn.open_table(DEAD_LETTERS)?;
            let mut letter_ids = txn.open_table(DEAD_LETTER_IDS)?;
            for op in batch.drain(..) {
                match op {
                    Op::Record {
                        informer,
                        seq,
                        key,
                        json,
                        reached,
                    } => {
                        compactor.recorded(&informer, &key, seq, json.is_none());
                        compactor.informer_seq(&informer, seq);
                        let at = pending.informers.entry(informer.clone()).or_default();
                        let held = Held {
                            key,
                            json,
                            written: true,
                        };
                        if at.changes.insert(seq, held).is_none() {
                            pending.changes += 1;
                            at.unmarked += 1;
                        }
                        at.rv = reached.or(at.rv.take());
                        at.seq = at.seq.max(seq);
                        moved.insert(informer);
                    }
                    Op::ResourceVersion { informer, rv, seq } => {
                        compactor.informer_seq(&informer, seq);
                        let informer: Arc<str> = informer.into();
                        let at = pending.informers.entry(informer.clone()).or_default();
                        at.rv = Some(rv);
                        at.seq = at.seq.max(seq);
                        moved.insert(informer);
                    }
                    Op::Cursor {
                        plugin,
                        informer,
                        seq,
                        version,
                        scope,
                    } => {
                        cursors.insert((&*plugin, &*informer), (seq, version, &*scope))?;
                        compactor.cursor(&plugin, &informer, seq);
                    }
                    Op::ForgetPlugin(plugin) => {
                        let mut gone = Vec::new();
                        for row in cursors.range((&*plugin, "")..)? {
                            let (k, _) = row?;
                            let (p, informer) = k.value();
                            if p != &*plugin {
                                break;
                            }
                            gone.push(informer.to_owned());
                        }
                        for informer in &gone {
                            cursors.remove((&*plugin, informer.as_str()))?;
                        }
                        compactor.forget_plugin(&plugin);
                    }
                    Op::DeadLetter(l) => {
                        let mut counts = self.letters.lock().unwrap_or_else(|p| p.into_inner());
                        let dropped =
                            letters::store(&mut counts, &l, &mut letters, &mut letter_ids)?;
                        self.shared
                            .dead_letters_dropped
                            .fetch_add(dropped, Ordering::Relaxed);
                    }
                    Op::DropDeadLetters(plugin) => {
                        let mut counts = self.letters.lock().unwrap_or_else(|p| p.into_inner());
                        let dropped =
                            letters::drop_all(&mut counts, &plugin, &mut letters, &mut letter_ids)?;
                        self.shared
                            .dead_letters_dropped
                            .fetch_add(dropped, Ordering::Relaxed);
                    }
                    Op::Flush(_) | Op::Close | Op::Mark => {}
                }
            }
            for informer in moved {
                if let Some(at) = pending.informers.get_mut(&informer) {
                    at.marks.push_back(Mark {
                        at: now,
                        seq: at.seq,
                        rv: at.rv.clone(),
                        changes: std::mem::take(&mut at.unmarked),
                    });
                }
            }
            // Versions every cursor has passed, and superseded (or deleted).
            for (informer, key, victim, trigger) in compactor.garbage(None) {
                let at = pending.informers.get_mut(informer.as_str());
                match at {
                    // A held delete: not written, but its cut still removes what is stored.
                    Some(at) if trigger == victim && at.changes.contains_key(&victim) => {
                        if let Some(h) = at.changes.get_mut(&victim) {
                            h.written = false;
                        }
                    }
                    Some(at) if at.changes.contains_key(&victim) => {
                        if at.drop_change(victim) {
                            pending.changes -= 1;
                        }
                    }
                    // Stored, and its successor held: it stays until a newer version of its
                    // object is written.
                    Some(at) if at.changes.contains_key(&trigger) => {
                        at.doomed.entry(key).or_default().push(victim);
                    }
                    _ => {
                        versions.remove((informer.as_str(), victim))?;
                        metas.remove((informer.as_str(), victim))?;
                    }
                }
            }
        }
        drop(compactor);
        let all = everything || pending.changes >= MAX_HELD;
        let mut informers = txn.open_table(INFORMERS)?;
        let mut resumable = Vec::new();
        for (informer, at) in pending.informers.iter_mut() {
            let at_once = all || !at.resumable() || !self.resumable.contains(&**informer);
            // The newest mark old enough, within the most one commit writes: the informer's
            // state as of that change is written.
            let (mut cut, mut taken) = (None, 0);
            while let Some(mark) = at.marks.front() {
                let due = at_once || now.duration_since(mark.at) >= WRITE_AFTER;
                if !due || (cut.is_some() && taken + mark.changes > MAX_CUT) {
                    break;
                }
                taken += mark.changes;
                cut = at.marks.pop_front();
            }
            let Some(Mark { seq, rv, .. }) = cut else {
                continue;
            };
            let rest = at.changes.split_off(&(seq + 1));
            let ripe = std::mem::replace(&mut at.changes, rest);
            pending.changes -= ripe.len();
            for (change, held) in ripe {
                if held.written {
                    let text = held.json.as_ref().map(|j| j.json());
                    versions.insert((&**informer, change), (&*held.key, text))?;
                    // A row rewritten without metadata must not keep an older one's.
                    match held
                        .json
                        .as_ref()
                        .map(|j| j.meta())
                        .filter(|m| !m.is_empty())
                    {
                        Some(meta) => metas.insert((&**informer, change), &*meta)?,
                        None => metas.remove((&**informer, change))?,
                    };
                }
                // What it supersedes, kept until now, can go.
                if let Some(doomed) = at.doomed.get_mut(&held.key) {
                    for victim in doomed.extract_if(.., |v| *v < change) {
                        versions.remove((&**informer, victim))?;
                        metas.remove((&**informer, victim))?;
                    }
                    if doomed.is_empty() {
                        at.doomed.remove(&held.key);
                    }
                }
            }
            let stored = informers.get(&**informer)?.map(|row| {
                let (rv, seq) = row.value();
                (rv.to_owned(), seq)
            });
            let (stored_rv, stored_seq) = stored.unwrap_or_default();
            let rv = rv.map_or(stored_rv, String::from);
            informers.insert(&**informer, (rv.as_str(), seq.max(stored_seq)))?;
            if crate::held::resumable_version(&rv) {
                resumable.push(informer.clone());
            }
        }
        pending.informers.retain(|_, at| {
            !(at.changes.is_empty() && at.marks.is_empty() && at.doomed.is_empty())
        });
        drop((versions, metas, informers));
        txn.commit()?;
        self.resumable.extend(resumable);
        Ok(())
    }
}

/// The informers stored in `db` with a resource version a watch can resume from.
fn resumable_informers(db: &Database) -> Result<HashSet<Arc<str>>, redb::Error> {
    let txn = db.begin_read()?;
    let mut out = HashSet::new();
    for row in txn.open_table(INFORMERS)?.iter()? {
        let (k, v) = row?;
        if crate::held::resumable_version(v.value().0) {
            out.insert(Arc::from(k.value()));
        }
    }
    Ok(out)
}
