//! Opening the state file (setting aside what cannot be used), reading it back, dead letters.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};

use redb::{Database, ReadableDatabase, ReadableTable, TableHandle};

use crate::aside;
use crate::backend::CountingBackend;
use crate::compact::Compactor;
use crate::error::{Refusal, Result, SetAside, StateError, db};
use crate::file::{FILE_NAME, create, unsafe_at};
use crate::journal::{StateWriter, WriterThread};
use crate::letters::{DeadLetter, LetterCounts, letter};
use crate::lock::{Holder, Lock};
use crate::private::{self, Access, Secret};
use crate::seal::{SEAL_FILE_NAME, Seal};
use crate::stored::StoredVersion;
use crate::tables::{
    CURSORS, DEAD_LETTER_IDS, DEAD_LETTERS, FORMAT, INFORMERS, META, VERSION_META, VERSIONS,
};

/// Everything stored, as read at startup.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Per informer id: its resource version, seq and stored versions.
    pub informers: BTreeMap<String, InformerState>,
    /// Per (plugin id, informer id): how far that plugin has handled that informer.
    pub cursors: BTreeMap<(String, String), Cursor>,
}

/// One informer's stored state.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct InformerState {
    /// The last resource version the informer reported ("" if it never did).
    pub resource_version: String,
    /// The informer's latest seq: the next mutation takes a larger one.
    pub seq: u64,
    /// Per object key, its stored versions in ascending seq; `None` is a tombstone.
    pub versions: BTreeMap<String, Vec<Version>>,
}

/// One stored version of an object: its seq and its JSON with the metadata stored beside it,
/// or `None` for a tombstone.
pub type Version = (u64, Option<StoredVersion>);

/// How far a plugin has handled an informer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// Everything the informer emitted with a seq up to this one was handled.
    pub seq: u64,
    /// Every change up to this resource version was handled (`None`: not known, the
    /// informer's versions are not numbers). It can be ahead of the informer's stored cache
    /// (see [`crate::StateWriter`]): a restart resumes the informer's watch from its stored
    /// version and skips, for this plugin, the changes up to this one.
    pub version: Option<u64>,
    /// An opaque fingerprint of the plugin's watch when the cursor was written.
    pub scope: String,
}

/// The open state database `DIR/state.redb`.
///
/// Reads (`load`, `dead_letters`) see the last committed batch. All writes from the event path
/// go through the [`StateWriter`]; [`StateDir::close`] (or dropping the `StateDir`) commits what the
/// journal has queued, stops its writer, closes the file and seals it (journals still held
/// elsewhere then drop their ops).
pub struct StateDir {
    path: PathBuf,
    /// `None` once closed.
    db: Mutex<Option<Arc<Database>>>,
    written: Arc<AtomicU64>,
    /// Shared with the writer. An informer's stored versions join it when they are read
    /// ([`StateDir::versions`]), not at open: reading them twice is what a restart waited for.
    compactor: Arc<Mutex<Compactor>>,
    writer: Mutex<Option<WriterThread>>,
    /// Shared with the writer: how many dead letters each plugin holds.
    letters: Arc<Mutex<LetterCounts>>,
    /// Whether the open ran redb's integrity check (the file was not sealed as it is).
    checked: bool,
    /// The directory's lock, released once the file is closed (`None` then).
    held: Mutex<Option<Lock>>,
}

impl std::fmt::Debug for StateDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateDir")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

enum Verdict {
    Use(Compactor),
    Fresh,
    Refuse(Refusal),
}

impl StateDir {
    /// Opens or creates the state in `dir` for the cluster `cluster` (an opaque identity, e.g.
    /// the API server URL), as [`StateDir::open_as`] with no identity.
    pub fn open(dir: &Path, cluster: &str) -> Result<(StateDir, Option<SetAside>)> {
        Self::open_as(dir, cluster, &Holder::default())
    }

    /// Opens or creates the state in `dir` for the cluster `cluster`, locked for this process
    /// (`holder` says who it is, for a second process to report).
    ///
    /// `dir` is created 0700 if missing. `Err`, and nothing read or written, when `dir` or a
    /// file the state uses in it is not this user's alone (a symbolic link, even dangling; a
    /// hard link; another owner; writable by group or others: see [`crate::private`]), when
    /// another process holds the lock ([`StateError::InUse`] names it), or when the disk
    /// cannot be written: the caller must not run without the state it was asked to keep.
    ///
    /// A corrupt, truncated, other-format or other cluster's file is not an error: it is
    /// renamed to `state.redb.set-aside-<unix-seconds>` (never read again; only the newest
    /// [`KEEP_SET_ASIDE`](crate::KEEP_SET_ASIDE) are kept), a fresh one is created, and the
    /// [`SetAside`] says why.
    pub fn open_as(
        dir: &Path,
        cluster: &str,
        holder: &Holder,
    ) -> Result<(StateDir, Option<SetAside>)> {
        Self::open_with_budget_as(dir, cluster, holder, None)
    }

    /// `open`, with writes failing like a full disk once `budget` bytes were written.
    #[cfg(test)]
    pub(crate) fn open_with_budget(
        dir: &Path,
        cluster: &str,
        budget: Option<u64>,
    ) -> Result<(StateDir, Option<SetAside>)> {
        Self::open_with_budget_as(dir, cluster, &Holder::default(), budget)
    }

    fn open_with_budget_as(
        dir: &Path,
        cluster: &str,
        holder: &Holder,
        budget: Option<u64>,
    ) -> Result<(StateDir, Option<SetAside>)> {
        private::ensure_dir(dir, Secret::Yes).map_err(unsafe_at(dir))?;
        let lock = Lock::take(dir, holder)?;
        let path = dir.join(FILE_NAME);
        // Before anything is read, renamed or removed: a planted link or foreign file is a
        // refusal, whether or not it would have been used.
        for name in [FILE_NAME, SEAL_FILE_NAME] {
            let at = dir.join(name);
            private::check_name(&at).map_err(unsafe_at(&at))?;
        }
        let written = Arc::new(AtomicU64::new(0));
        let mut set_aside = None;
        let seal = Seal::take(&path);
        let existing =
            private::open_file(&path, Access::ReadWrite, Secret::Yes).map_err(unsafe_at(&path))?;
        if existing.is_some() {
            drop(existing);
            let reason = match precheck(&path, cluster) {
                Ok(Some(reason)) => reason,
                Err(e) => classify(&path, e)?,
                Ok(None) => {
                    let check = !seal.is_some_and(|s| s.matches(&path));
                    match open_db(create(&path)?, &written, budget, check) {
                        Ok(database) => match verdict(&database, cluster) {
                            Ok(Verdict::Use(compactor)) => {
                                let state =
                                    Self::new(path, database, written, compactor, check, lock)?;
                                return Ok((state, None));
                            }
                            Ok(Verdict::Fresh) => {
                                // An empty file (a crash right after creating it): initialise in place.
                                init(&path, &database, cluster)?;
                                let state = Self::new(
                                    path,
                                    database,
                                    written,
                                    Compactor::default(),
                                    check,
                                    lock,
                                )?;
                                return Ok((state, None));
                            }
                            Ok(Verdict::Refuse(reason)) => reason,
                            Err(e) => classify(&path, e)?,
                        },
                        Err(e) => classify(&path, e)?,
                    }
                }
            };
            let moved_to = aside::set_aside_path(dir);
            std::fs::rename(&path, &moved_to).map_err(|source| StateError::File {
                path: path.clone(),
                action: "set it aside",
                source,
            })?;
            tracing::warn!(path = %path.display(), moved_to = %moved_to.display(), %reason, "state file set aside; starting with fresh state");
            let pruned = aside::prune(dir);
            set_aside = Some(SetAside {
                moved_to,
                reason,
                pruned,
            });
        }
        let database = open_db(create(&path)?, &written, budget, false).map_err(|e| match e {
            redb::Error::Io(source) => StateError::File {
                path: path.clone(),
                action: "create it",
                source,
            },
            e => db(&path, "create it", e),
        })?;
        init(&path, &database, cluster)?;
        let state = Self::new(path, database, written, Compactor::default(), false, lock)?;
        Ok((state, set_aside))
    }

    fn new(
        path: PathBuf,
        database: Database,
        written: Arc<AtomicU64>,
        compactor: Compactor,
        checked: bool,
        held: Lock,
    ) -> Result<Self> {
        let letters = LetterCounts::read(&database).map_err(|e| db(&path, "read it", e))?;
        Ok(StateDir {
            path,
            db: Mutex::new(Some(Arc::new(database))),
            written,
            compactor: Arc::new(Mutex::new(compactor)),
            writer: Mutex::new(None),
            letters: Arc::new(Mutex::new(letters)),
            checked,
            held: Mutex::new(Some(held)),
        })
    }

    /// Whether the open verified every page of the file (it was not as sealed at its last
    /// clean close): a restart after a crash takes longer.
    pub fn checked_at_open(&self) -> bool {
        self.checked
    }

    /// The database, unless closed.
    fn db(&self) -> std::result::Result<Arc<Database>, redb::Error> {
        lock(&self.db).clone().ok_or(redb::Error::DatabaseClosed)
    }

    /// Commits what the journal has queued, stops its writer, closes the file and seals it, so
    /// the next open can trust it without reading every page. Reads fail from then on, and
    /// journals still held elsewhere drop their ops.
    pub fn close(&self) {
        if let Some(writer) = lock(&self.writer).take() {
            writer.close();
        }
        let Some(db) = lock(&self.db).take() else {
            return;
        };
        // A read still running holds the database; its end closes it, unsealed, and the lock
        // goes with this `StateDir`.
        let Ok(db) = Arc::try_unwrap(db) else { return };
        match db.close() {
            Ok(()) => Seal::write(&self.path),
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "state file: closing it failed; the next open checks it")
            }
        }
        lock(&self.held).take();
    }

    /// The state file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The writer's handle to the state; starts the writer thread on the first call.
    pub fn journal(&self) -> StateWriter {
        let mut writer = lock(&self.writer);
        if let Some(w) = writer.as_ref() {
            return w.journal();
        }
        let w = WriterThread::start(
            self.path.clone(),
            lock(&self.db).clone(),
            self.written.clone(),
            self.compactor.clone(),
            self.letters.clone(),
        );
        let journal = w.journal();
        *writer = Some(w);
        journal
    }

    /// Reads everything committed so far, for startup.
    pub fn load(&self) -> Result<Snapshot> {
        let snap = self
            .db()
            .and_then(|d| read_snapshot(&d))
            .map_err(|e| db(&self.path, "read it", e))?;
        for (informer, state) in &snap.informers {
            self.seed(informer, &state.versions)?;
        }
        Ok(snap)
    }

    /// Reads everything but the stored versions (each informer's come with
    /// [`StateDir::versions`] when it is needed), so startup never holds every informer's
    /// objects as text at once.
    pub fn load_index(&self) -> Result<Snapshot> {
        self.db()
            .and_then(|d| read_index(&d))
            .map_err(|e| db(&self.path, "read it", e))
    }

    /// One informer's stored versions per key, ascending seq (`None`: a tombstone).
    ///
    /// From then on the journal's compaction knows them: the versions no cursor needs any more
    /// are deleted now, the others once every cursor has passed their successors. (An informer
    /// whose versions are never read keeps them as they are.)
    pub fn versions(&self, informer: &str) -> Result<BTreeMap<String, Vec<Version>>> {
        let read = || -> std::result::Result<BTreeMap<String, Vec<Version>>, redb::Error> {
            let txn = self.db()?.begin_read()?;
            let mut out: BTreeMap<String, Vec<Version>> = BTreeMap::new();
            // In change order: each key's versions come oldest first.
            each_version(&txn, Some(informer), |_, key, version| {
                match out.get_mut(key) {
                    Some(list) => list.push(version),
                    None => {
                        out.insert(key.to_owned(), vec![version]);
                    }
                }
            })?;
            Ok(out)
        };
        let versions = read().map_err(|e| db(&self.path, "read its stored versions", e))?;
        self.seed(informer, &versions)?;
        Ok(versions)
    }

    /// The dead letters of one plugin, or of all, oldest first per plugin.
    pub fn dead_letters(&self, plugin: Option<&str>) -> Result<Vec<DeadLetter>> {
        let read = || -> std::result::Result<Vec<DeadLetter>, redb::Error> {
            let txn = self.db()?.begin_read()?;
            let table = txn.open_table(DEAD_LETTERS)?;
            let mut out = Vec::new();
            let iter = match plugin {
                Some(p) => table.range((p, 0)..=(p, u64::MAX))?,
                None => table.iter()?,
            };
            for row in iter {
                let (k, v) = row?;
                out.push(letter(k.value(), v.value()));
            }
            Ok(out)
        };
        read().map_err(|e| db(&self.path, "read its dead letters", e))
    }

    /// How many dead letters each plugin holding any has: the counts the writers keep, no
    /// read of the file (a metrics scrape asks for them).
    pub fn dead_letter_counts(&self) -> BTreeMap<String, u64> {
        lock(&self.letters).by_plugin()
    }

    /// Removes the named dead letters of `plugin` and returns those that existed (to retry or drop).
    ///
    /// An operator's call, not the event path's: it waits for the journal's commit in progress.
    pub fn take_dead_letters(&self, plugin: &str, ids: &[u64]) -> Result<Vec<DeadLetter>> {
        let take = || -> std::result::Result<Vec<DeadLetter>, redb::Error> {
            let txn = self.db()?.begin_write()?;
            // Under the write transaction, as the writer takes it (see `letters`).
            let mut counts = lock(&self.letters);
            let mut out = Vec::new();
            {
                let mut table = txn.open_table(DEAD_LETTERS)?;
                for &id in ids {
                    if let Some(v) = table.remove((plugin, id))? {
                        out.push(letter((plugin, id), v.value()));
                    }
                }
            }
            txn.commit()?;
            counts.remove(plugin, out.len());
            Ok(out)
        };
        take().map_err(|e| db(&self.path, "take dead letters from it", e))
    }

    /// Everything committed, read without telling the compaction (which would delete what
    /// no cursor needs): what a test looks at while changes are held.
    #[cfg(test)]
    pub(crate) fn peek(&self) -> Snapshot {
        self.db()
            .and_then(|d| read_snapshot(&d))
            .expect("read the state")
    }

    /// Tells the compaction an informer's stored versions as read, and deletes what no cursor
    /// needs any more.
    fn seed(&self, informer: &str, versions: &BTreeMap<String, Vec<Version>>) -> Result<()> {
        let garbage = {
            let mut compactor = lock(&self.compactor);
            for (key, list) in versions {
                for (seq, json) in list {
                    compactor.recorded(informer, key, *seq, json.is_none());
                }
            }
            // Its own alone: another informer's garbage is the writer's, which deletes it only
            // once what supersedes it is written.
            compactor.garbage(Some(informer))
        };
        if garbage.is_empty() {
            return Ok(());
        }
        let run = || -> std::result::Result<(), redb::Error> {
            let txn = self.db()?.begin_write()?;
            {
                let mut versions = txn.open_table(VERSIONS)?;
                let mut metas = txn.open_table(VERSION_META)?;
                for (informer, _, seq, _) in &garbage {
                    versions.remove((informer.as_str(), *seq))?;
                    metas.remove((informer.as_str(), *seq))?;
                }
            }
            txn.commit()?;
            Ok(())
        };
        run().map_err(|e| db(&self.path, "compact it", e))
    }
}

impl Drop for StateDir {
    fn drop(&mut self) {
        self.close();
    }
}

/// A poisoned lock still holds consistent data here: every holder only swaps or reads a value.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Opens the state file for writing; `check`: run redb's integrity check (every page's checksum).
fn open_db(
    file: File,
    written: &Arc<AtomicU64>,
    budget: Option<u64>,
    check: bool,
) -> std::result::Result<Database, redb::Error> {
    let backend = CountingBackend::new(file, written.clone(), budget)?;
    // redb checks some invariants with debug assertions; a hostile file must be a refusal, not a
    // panic, in debug builds too.
    let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Database::builder()
            // The informer cache is already in memory; redb's page cache only needs the hot path.
            .set_cache_size(64 * 1024 * 1024)
            // Verifies every page's checksum: a file damaged outside redb is reported as
            // corrupt instead of read as garbage. Skipped only for a file still as sealed at
            // its last clean close (see `seal`).
            .set_check_integrity_on_open(check)
            .create_with_backend(backend)
    }));
    match opened {
        Ok(r) => Ok(r?),
        Err(panic) => Err(redb::Error::Corrupted(panic_message(&panic))),
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    let msg = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    format!("redb panicked reading it: {msg}")
}

/// Whether a redb error means the file is unusable (set it aside) or the environment failed.
fn classify(path: &Path, e: redb::Error) -> Result<Refusal> {
    match e {
        redb::Error::DatabaseAlreadyOpen
        | redb::Error::LockProtocolMismatch
        | redb::Error::WouldBlock => Err(StateError::InUse {
            dir: path.parent().unwrap_or(path).to_path_buf(),
            holder: format!("another process (it has `{FILE_NAME}` open)"),
        }),
        redb::Error::Io(io)
            if matches!(
                io.kind(),
                io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof
            ) =>
        {
            Ok(Refusal::Corrupt(io.to_string()))
        }
        e @ (redb::Error::Corrupted(_)
        | redb::Error::UpgradeRequired(_)
        | redb::Error::ValueTooLarge(_)
        | redb::Error::UnorderedKey
        | redb::Error::TableTypeMismatch { .. }
        | redb::Error::TableIsMultimap(_)
        | redb::Error::TableIsNotMultimap(_)
        | redb::Error::TypeDefinitionChanged { .. }
        | redb::Error::TableDoesNotExist(_)
        | redb::Error::RepairAborted) => Ok(Refusal::Corrupt(e.to_string())),
        redb::Error::Io(source) => Err(StateError::File {
            path: path.to_path_buf(),
            action: "open it",
            source,
        }),
        e => Err(db(path, "open it", e)),
    }
}

/// What the meta rows say about a file.
fn check_meta(
    txn: &redb::ReadTransaction,
    cluster: &str,
) -> std::result::Result<Option<Verdict>, redb::Error> {
    let names: Vec<String> = txn.list_tables()?.map(|t| t.name().to_owned()).collect();
    if names.is_empty() {
        return Ok(Some(Verdict::Fresh));
    }
    if !names.iter().any(|n| n == META.name()) {
        return Ok(Some(Verdict::Refuse(Refusal::Corrupt(
            "it has no meta table".into(),
        ))));
    }
    let meta = txn.open_table(META)?;
    let Some(format) = meta.get("format")? else {
        return Ok(Some(Verdict::Refuse(Refusal::Corrupt(
            "it records no format".into(),
        ))));
    };
    let format = format.value().to_owned();
    let Ok(found) = format.parse::<u32>() else {
        return Ok(Some(Verdict::Refuse(Refusal::Corrupt(format!(
            "its format `{format}` is not a number"
        )))));
    };
    if found > FORMAT {
        return Ok(Some(Verdict::Refuse(Refusal::NewerFormat {
            found,
            supported: FORMAT,
        })));
    }
    if found == 0 {
        return Ok(Some(Verdict::Refuse(Refusal::Corrupt(
            "format 0 never existed".into(),
        ))));
    }
    if found < FORMAT {
        return Ok(Some(Verdict::Refuse(Refusal::OlderFormat {
            found,
            supported: FORMAT,
        })));
    }
    match meta.get("cluster")?.map(|c| c.value().to_owned()) {
        None => Ok(Some(Verdict::Refuse(Refusal::Corrupt(
            "it records no cluster".into(),
        )))),
        Some(found) if found != cluster => {
            Ok(Some(Verdict::Refuse(Refusal::OtherCluster { found })))
        }
        Some(_) => Ok(None),
    }
}

/// Reads the meta rows without writing a byte, so a file that is refused is set aside exactly as
/// it was (a newer Informant can still read it). `Ok(None)`: open it for writing and look closer
/// (it looks usable, or needs the repair only a writer does after a crash).
fn precheck(path: &Path, cluster: &str) -> std::result::Result<Option<Refusal>, redb::Error> {
    // Checked private by the caller; opened again without following a link all the same.
    let file = match private::open_file(path, Access::Read, Secret::Yes) {
        Ok(Some(file)) => file,
        Ok(None) => return Ok(None),
        Err(e) => return Err(redb::Error::Io(io::Error::other(e))),
    };
    if file.metadata()?.len() == 0 {
        return Ok(None);
    }
    let run = || -> std::result::Result<Option<Refusal>, redb::Error> {
        let backend = redb::backends::FileBackend::new(file)?;
        let database = match Database::builder().open_read_only_with_backend(backend) {
            Err(redb::DatabaseError::RepairAborted) => return Ok(None),
            other => other?,
        };
        let txn = database.begin_read()?;
        Ok(match check_meta(&txn, cluster)? {
            Some(Verdict::Refuse(refusal)) => Some(refusal),
            _ => None,
        })
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        Ok(r) => r,
        Err(panic) => Err(redb::Error::Corrupted(panic_message(&panic))),
    }
}

/// Decides whether an opened file can be used, and if so starts the compaction index from its
/// informers and cursors (the versions join it as they are read). The file's bytes were proven
/// by then: as sealed, or every page's checksum verified.
fn verdict(database: &Database, cluster: &str) -> std::result::Result<Verdict, redb::Error> {
    let run = || -> std::result::Result<Verdict, redb::Error> {
        let txn = database.begin_read()?;
        if let Some(verdict) = check_meta(&txn, cluster)? {
            return Ok(verdict);
        }
        let mut compactor = Compactor::default();
        for row in txn.open_table(INFORMERS)?.iter()? {
            let (k, v) = row?;
            compactor.informer_seq(k.value(), v.value().1);
        }
        for row in txn.open_table(CURSORS)?.iter()? {
            let (k, v) = row?;
            let (plugin, informer) = k.value();
            compactor.cursor(plugin, informer, v.value().0);
        }
        // Opened so a file missing one is refused here, not when the writer first needs it.
        txn.open_table(VERSIONS)?;
        txn.open_table(VERSION_META)?;
        txn.open_table(DEAD_LETTERS)?;
        txn.open_table(DEAD_LETTER_IDS)?;
        Ok(Verdict::Use(compactor))
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        Ok(r) => r,
        Err(panic) => Err(redb::Error::Corrupted(panic_message(&panic))),
    }
}

/// Writes the meta rows and creates every table, so a later open can tell a whole file from a stub.
fn init(path: &Path, database: &Database, cluster: &str) -> Result<()> {
    let run = || -> std::result::Result<(), redb::Error> {
        let txn = database.begin_write()?;
        {
            let mut meta = txn.open_table(META)?;
            meta.insert("format", FORMAT.to_string().as_str())?;
            meta.insert("cluster", cluster)?;
            txn.open_table(INFORMERS)?;
            txn.open_table(VERSIONS)?;
            txn.open_table(VERSION_META)?;
            txn.open_table(CURSORS)?;
            txn.open_table(DEAD_LETTERS)?;
            txn.open_table(DEAD_LETTER_IDS)?;
        }
        txn.commit()?;
        Ok(())
    };
    run().map_err(|e| db(path, "initialise it", e))
}

fn read_snapshot(database: &Database) -> std::result::Result<Snapshot, redb::Error> {
    let mut snap = read_index(database)?;
    let txn = database.begin_read()?;
    each_version(&txn, None, |informer, key, (seq, version)| {
        let state = snap.informers.entry(informer.to_owned()).or_default();
        state.seq = state.seq.max(seq);
        state
            .versions
            .entry(key.to_owned())
            .or_default()
            .push((seq, version));
    })?;
    Ok(snap)
}

/// Calls `f` with each stored version of `informer` (of every informer: `None`) in change order,
/// as (informer, key, version), its metadata joined from [`VERSION_META`] (kept in the same
/// order, so one pass over each table).
fn each_version(
    txn: &redb::ReadTransaction,
    informer: Option<&str>,
    mut f: impl FnMut(&str, &str, Version),
) -> std::result::Result<(), redb::Error> {
    let versions = txn.open_table(VERSIONS)?;
    let metas = txn.open_table(VERSION_META)?;
    let from = (informer.unwrap_or(""), 0);
    let mut metas = metas.range(from..)?;
    let mut next_meta = metas.next().transpose()?;
    for row in versions.range(from..)? {
        let (k, v) = row?;
        let (at, seq) = k.value();
        if informer.is_some_and(|i| i != at) {
            break;
        }
        let mut meta = Box::default();
        // Metadata rows of versions no longer stored (none should be) are passed over.
        while let Some((mk, mv)) = &next_meta {
            match mk.value().cmp(&(at, seq)) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => {
                    meta = mv.value().into();
                    break;
                }
                std::cmp::Ordering::Greater => break,
            }
            next_meta = metas.next().transpose()?;
        }
        let (key, json) = v.value();
        let version = json.map(|json| StoredVersion {
            json: json.into(),
            meta,
        });
        f(at, key, (seq, version));
    }
    Ok(())
}

/// Everything but the versions.
fn read_index(database: &Database) -> std::result::Result<Snapshot, redb::Error> {
    let txn = database.begin_read()?;
    let mut snap = Snapshot::default();
    for row in txn.open_table(INFORMERS)?.iter()? {
        let (k, v) = row?;
        let (rv, seq) = v.value();
        let state = snap.informers.entry(k.value().to_owned()).or_default();
        state.resource_version = rv.to_owned();
        state.seq = state.seq.max(seq);
    }
    for row in txn.open_table(CURSORS)?.iter()? {
        let (k, v) = row?;
        let (plugin, informer) = k.value();
        let (seq, version, scope) = v.value();
        snap.cursors.insert(
            (plugin.to_owned(), informer.to_owned()),
            Cursor {
                seq,
                version,
                scope: scope.to_owned(),
            },
        );
    }
    Ok(snap)
}
