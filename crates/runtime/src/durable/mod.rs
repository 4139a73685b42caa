//! Durable delivery (`--state-dir`): the informers' caches and each plugin's delivery cursor
//! kept on disk, so a restarted host resumes each watch where it stopped and gives each plugin
//! exactly the changes it had not handled.
//!
//! - Every store change goes to the state's journal as it is made ([`journal`]), written out
//!   in batches by the state's own thread, never on the event path.
//! - A plugin's cursor per informer is the change it has handled everything up to, and the
//!   resource version (see [`crate::informer::cursor`]); the journal reads them just before
//!   each commit (every batch), and they are also saved every [`SAVE_EVERY`] (a plugin
//!   catching up while nothing changes), and once more when the host stops. The cache's
//!   changes are held a while before they are written, so a cursor can be ahead of it.
//! - On start each informer is restored from disk before it starts, its watch resumes from
//!   the restored resource version, and a plugin registered with the cursor it had (same
//!   tenant, name and watch) gets only what changed after it: the restored versions after its
//!   cursor, or, for a cursor ahead of the restored cache, the watch's changes past the
//!   resource version it had handled ([`Resume`]). A plugin whose watch changed, or a new
//!   one, gets the whole cache as before.
//! - At least once: a change handled after the last save comes again after a crash, and so
//!   do the changes held at a crash when the server has compacted its history meanwhile (the
//!   relist gives them as differences from the restored cache).
//! - In sharded mode the same cursors are kept beside the ones the Leases publish: they are
//!   this member's own record of its plugins ([`stored_cursors`](Durable::stored_cursors),
//!   counted as candidates when it takes a plugin over), a plugin handed to another member
//!   keeps its cursor here until a live member publishes it, and the restored caches are kept
//!   until the member has taken its first share ([`restores_done`](Durable::restores_done)),
//!   not dropped at the first reconcile, when it owns nothing yet.

pub(crate) mod journal;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;

use crate::informer::{InformerFactory, InformerKey, ListenerGauges, SharedInformer, StoredObject};
use crate::shard::cursors::Entry;
use informant_state::{Cursor, DeadLetter, JournalStats, Snapshot, StateDir};

/// How often plugins' cursors are saved.
pub(crate) const SAVE_EVERY: Duration = Duration::from_secs(1);

/// Where durable delivery keeps its state, and for which cluster.
#[derive(Clone, Debug, Default)]
pub struct StateOptions {
    /// The state directory (a volume in a pod).
    pub dir: PathBuf,
    /// The cluster the state belongs to (its API server URL): another's state is refused.
    pub cluster: String,
    /// Who this host is (`--identity`), written in the state's lock for a second host to report.
    pub identity: Option<String>,
    /// The API server starts empty on every start (`informant dev`'s embedded one): its
    /// resourceVersions start over, so none stored is resumed from and every restored
    /// informer lists, giving plugins the difference from what they had handled.
    pub server_starts_empty: bool,
}

/// The state directory could not be used at all.
#[derive(Debug, thiserror::Error)]
#[error("cannot keep durable delivery state in {} (--state-dir)", dir.display())]
pub struct DurableError {
    dir: PathBuf,
    #[source]
    source: informant_state::StateError,
}

/// One plugin's handlers on one informer (one per `[[watch]]` naming it), whose common cursor
/// is saved: the lowest of theirs.
struct Tracked {
    scope: String,
    handlers: Vec<ListenerGauges>,
    /// The cursor last saved: (seq, resource version).
    saved: Option<(u64, Option<u64>)>,
}

impl Tracked {
    /// The lowest of `f` over the handlers; `None` if any has none.
    fn lowest(&self, f: impl Fn(&ListenerGauges) -> Option<u64>) -> Option<u64> {
        let all: Option<Vec<u64>> = self.handlers.iter().map(f).collect();
        all?.into_iter().min()
    }
}

/// Where a plugin resumes on an informer restored from disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resume {
    /// The restored change it had handled everything up to: it gets the changes after it.
    pub since: u64,
    /// Its cursor was ahead of the restored cache (see [`informant_state::StateWriter`]): the
    /// changes up to this resource version, which the watch brings again, were handled.
    pub skip_through_version: Option<u64>,
}

/// The state directory of a running host.
pub struct Durable {
    dir: PathBuf,
    /// Whether stored resourceVersions mean anything to the API server (not when it starts
    /// empty each time, as `informant dev`'s does): watches resume from them, and cursors
    /// skip what they had handled by them.
    resume_watches: bool,
    /// Shared only so that closing it (which reads the whole file to seal it) runs off the
    /// async threads.
    state: Arc<StateDir>,
    journal: informant_state::StateWriter,
    /// Each informer kept on disk at start (its versions are read when it is created).
    restoring: Mutex<BTreeMap<String, informant_state::InformerState>>,
    /// The cursors found at start, by (plugin, informer).
    cursors: Mutex<BTreeMap<(String, String), Cursor>>,
    /// The change and the resourceVersion (a number, where the server's are) each informer
    /// restored from disk was at, and the informer (to drop its restored versions).
    restored_at: Mutex<HashMap<String, Restore>>,
    /// Shared with the journal's writer, which saves the cursors before each commit.
    tracker: Arc<Tracker>,
}

/// Where an informer restored from disk was, and the informer.
struct Restore {
    seq: u64,
    version: Option<u64>,
    informer: Weak<SharedInformer>,
}

/// The cursors being kept, by (plugin, informer), and the journal they are saved to.
struct Tracker {
    journal: informant_state::StateWriter,
    tracked: Mutex<HashMap<(String, String), Tracked>>,
}

impl Tracker {
    /// Saves every cursor that moved.
    fn save(&self) {
        let mut tracked = self.tracked.lock();
        for ((plugin, informer), t) in tracked.iter_mut() {
            // A replaced version's handlers are gone; its successor's count from now on.
            t.handlers.retain(|h| !h.is_closed());
            let Some(at) = t.lowest(ListenerGauges::handled_through) else {
                continue;
            };
            // Read after the seq: a change handled in between only makes it later, never wrong.
            let version = t.lowest(ListenerGauges::handled_through_version);
            if t.saved != Some((at, version)) {
                self.journal.cursor(plugin, informer, at, version, &t.scope);
                t.saved = Some((at, version));
            }
        }
    }
}

impl Durable {
    /// Opens (or creates) the state in `dir` for the cluster `cluster` and loads it, as
    /// [`Durable::start`] does.
    pub fn open(dir: &Path, cluster: &str) -> Result<Arc<Durable>, DurableError> {
        Self::start(&StateOptions {
            dir: dir.to_path_buf(),
            cluster: cluster.to_string(),
            ..Default::default()
        })
    }

    /// Opens (or creates) the state `opts` names, locked for this host, and loads it.
    ///
    /// An error — a directory that is not this user's alone, in use by another process, or
    /// that cannot be written — must stop the host: it was asked for durability it cannot
    /// have. State that is corrupt, of another format or another cluster's is moved aside with
    /// a warning, and the host starts as without state.
    pub fn start(opts: &StateOptions) -> Result<Arc<Durable>, DurableError> {
        let dir = opts.dir.as_path();
        let fail = |source| DurableError {
            dir: dir.to_path_buf(),
            source,
        };
        let holder = informant_state::Holder {
            identity: opts.identity.clone(),
        };
        let (state, set_aside) = StateDir::open_as(dir, &opts.cluster, &holder).map_err(fail)?;
        if let Some(aside) = set_aside {
            tracing::warn!(dir = %dir.display(), moved_to = %aside.moved_to.display(), reason = %aside.reason, "state refused and moved aside; starting without it");
        }
        let Snapshot { informers, cursors } = state.load_index().map_err(fail)?;
        tracing::info!(dir = %dir.display(), informers = informers.len(), cursors = cursors.len(), checked = state.checked_at_open(), "state opened");
        let journal = state.journal();
        let tracker = Arc::new(Tracker {
            journal: journal.clone(),
            tracked: Mutex::new(HashMap::new()),
        });
        // Weak: the writer's thread must never hold the last reference to the state it writes.
        let source = Arc::downgrade(&tracker);
        journal.set_cursor_source(Arc::new(move || {
            if let Some(tracker) = source.upgrade() {
                tracker.save();
            }
        }));
        let durable = Arc::new(Durable {
            dir: dir.to_path_buf(),
            resume_watches: !opts.server_starts_empty,
            state: Arc::new(state),
            journal,
            restoring: Mutex::new(informers),
            cursors: Mutex::new(cursors),
            restored_at: Mutex::new(HashMap::new()),
            tracker,
        });
        let weak = Arc::downgrade(&durable);
        tokio::spawn(save_periodically(weak));
        Ok(durable)
    }

    /// The state directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Restores every informer `factory` creates from now on from disk (when it was kept) and
    /// journals its changes.
    pub fn attach(self: &Arc<Self>, factory: &InformerFactory) {
        let me = Arc::downgrade(self);
        factory.on_created(Arc::new(move |key, informer| {
            let Some(me) = me.upgrade() else { return };
            let id = key.to_string();
            let kept = me.restoring.lock().remove(&id);
            let mut resumed_at = None;
            if let Some(kept) = kept {
                let reading = std::time::Instant::now();
                match me.state.versions(&id) {
                    Ok(versions) => {
                        let read = reading.elapsed();
                        let restoring = std::time::Instant::now();
                        // Each object with the frozen metadata stored beside it: not parsed.
                        let versions = versions.into_iter().map(|(key, list)| {
                            let list = list.into_iter().map(|(seq, version)| {
                                let object =
                                    version.map(|v| StoredObject::new(v.json, v.meta));
                                (seq, object)
                            });
                            (key, list.collect::<Vec<_>>())
                        });
                        // A server that started empty never had the stored version: the
                        // informer lists, and the list is diffed against the restored cache.
                        let resume_from = match me.resume_watches {
                            true => kept.resource_version.as_str(),
                            false => "",
                        };
                        let report = informer.restore(resume_from, kept.seq, versions);
                        tracing::info!(informer = %informer.description(), objects = report.objects, unreadable = report.unreadable, resource_version = %resume_from, read = ?read, restore = ?restoring.elapsed(), "cache restored from the state directory");
                        let version = crate::informer::cursor::version_of(&kept.resource_version)
                            .filter(|_| me.resume_watches);
                        me.restored_at.lock().insert(
                            id.clone(),
                            Restore {
                                seq: kept.seq,
                                version,
                                informer: Arc::downgrade(informer),
                            },
                        );
                        resumed_at = me.resume_watches.then_some(kept.resource_version);
                    }
                    Err(e) => {
                        tracing::warn!(informer = %informer.description(), error = %e, "the stored cache cannot be read: listing it afresh");
                    }
                }
            }
            informer.set_change_log(Arc::new(journal::InformerJournal::new(
                id,
                me.journal.clone(),
                resumed_at.as_deref(),
            )));
        }));
    }

    /// Where `plugin` resumes on `informer`, restored from disk, from the cursor it had when
    /// the host last stopped, if its watch is still `scope`.
    ///
    /// A cursor ahead of the restored cache (a crash before its changes were written) resumes
    /// from the cache's own change: the watch, resumed from there, brings the changes in
    /// between again, and the plugin skips those up to the resource version it had handled.
    pub fn cursor(&self, plugin: &str, informer: &InformerKey, scope: &str) -> Option<Resume> {
        let id = informer.to_string();
        let c = self.saved_cursor(plugin, &id, scope)?;
        let restored_at = self.restored_at.lock().get(&id).map(|r| r.seq);
        tracing::info!(plugin, informer = %id, cursor = c.seq, handled_version = ?c.version, restored_at = ?restored_at, "resuming a plugin from its stored cursor");
        Some(match restored_at {
            // At the cache's own change too: a cursor rewritten after a restart from one that
            // was ahead keeps the resource version it had handled.
            Some(at) if c.seq >= at => Resume {
                since: at,
                // Versions of a server that started over say nothing about the new one's.
                skip_through_version: c.version.filter(|_| self.resume_watches),
            },
            _ => Resume {
                since: c.seq,
                skip_through_version: None,
            },
        })
    }

    /// Whether `plugin` has a cursor on `informer` to resume from (see [`cursor`](Self::cursor)),
    /// asked without resuming.
    pub fn has_cursor(&self, plugin: &str, informer: &InformerKey, scope: &str) -> bool {
        self.saved_cursor(plugin, &informer.to_string(), scope)
            .is_some()
    }

    /// The resourceVersion up to which `plugin`, under `scope`, had handled everything on
    /// `informer` as stored (see [`stored_cursors`](Self::stored_cursors)).
    pub fn stored_version(&self, plugin: &str, informer: &InformerKey, scope: &str) -> Option<u64> {
        self.saved_cursor(plugin, &informer.to_string(), scope)
            .and_then(|c| c.version)
            .filter(|_| self.resume_watches)
    }

    /// Where `informer` was restored from disk: its change and resourceVersion (`None`: not a
    /// number, or of a server that started over), while its restored versions are kept for
    /// resuming handlers; `None` for an informer not restored, or once they are dropped.
    pub fn restored_from(&self, informer: &InformerKey) -> Option<(u64, Option<u64>)> {
        let restored = self.restored_at.lock();
        let r = restored.get(&informer.to_string())?;
        let live = r.informer.upgrade()?;
        live.restored().map(|_| (r.seq, r.version))
    }

    /// Sharded mode: every stored cursor, per plugin as a shard cursor (its scope, and per
    /// informer the resourceVersion it had handled everything up to), for the cursor book to
    /// count as this member's own. None for a server that starts over (its versions say
    /// nothing of the new one's).
    pub fn stored_cursors(&self) -> BTreeMap<String, Entry> {
        let mut out: BTreeMap<String, Entry> = BTreeMap::new();
        if !self.resume_watches {
            return out;
        }
        for ((plugin, informer), c) in self.cursors.lock().iter() {
            let Some(version) = c.version else { continue };
            let e = out.entry(plugin.clone()).or_insert_with(|| Entry {
                scope: c.scope.clone(),
                ..Default::default()
            });
            // A plugin's informers share its scope; one kept under another is not this one's.
            if e.scope == c.scope {
                e.at.insert(informer.clone(), version);
            }
        }
        out
    }

    /// Sharded mode, once the member has taken its first share: drops the restored versions
    /// kept for resuming plugins, and the informers kept on disk that none of its plugins
    /// created (those list afresh if one later does). Until then they serve every takeover
    /// from this member's own stored cursors (no LIST while the server still has their
    /// resourceVersions).
    pub fn restores_done(&self) {
        for r in self.restored_at.lock().values() {
            if let Some(informer) = r.informer.upgrade() {
                informer.forget_restored();
            }
        }
        self.restoring.lock().clear();
    }

    /// Sharded mode: forgets the cursors of plugins not in `present` (the plugins directory):
    /// removed while the host was down. Those forgotten.
    pub fn keep_cursors_of(&self, present: &BTreeSet<String>) -> Vec<String> {
        let mut gone: Vec<String> = self
            .cursors
            .lock()
            .keys()
            .map(|(p, _)| p.clone())
            .filter(|p| !present.contains(p))
            .collect();
        gone.dedup();
        for plugin in &gone {
            tracing::info!(
                plugin,
                "plugin gone from the plugins directory: its stored delivery cursors are dropped"
            );
            self.forget_plugin(plugin);
        }
        gone
    }

    /// The cursor stored for `plugin` on the informer `id`, if its watch is still `scope`.
    fn saved_cursor(&self, plugin: &str, id: &str, scope: &str) -> Option<Cursor> {
        let cursors = self.cursors.lock();
        let c = cursors.get(&(plugin.to_string(), id.to_string()))?;
        (c.scope == scope).then(|| c.clone())
    }

    /// Saves `plugin`'s cursor on `informer` from now on, read from `gauges` (with its other
    /// handlers there, if any).
    pub fn track(&self, plugin: &str, informer: &InformerKey, scope: &str, gauges: ListenerGauges) {
        let key = (plugin.to_string(), informer.to_string());
        // As stored, not as resumed: a cursor ahead of the restored cache is rewritten in the
        // informer's new numbering at the first save.
        let saved = self
            .saved_cursor(plugin, &key.1, scope)
            .map(|c| (c.seq, c.version));
        let mut tracked = self.tracker.tracked.lock();
        let t = tracked.entry(key).or_insert_with(|| Tracked {
            scope: scope.to_string(),
            handlers: Vec::new(),
            saved,
        });
        if t.scope != scope {
            // A new version watching differently: its cursor starts over.
            t.scope = scope.to_string();
            t.saved = None;
        }
        t.handlers.retain(|h| !h.is_closed());
        t.handlers.push(gauges);
    }

    /// Forgets a plugin removed from the plugins directory: its cursors, so a plugin of that
    /// name added later starts from the whole cache.
    pub fn forget_plugin(&self, plugin: &str) {
        self.tracker.tracked.lock().retain(|(p, _), _| p != plugin);
        self.cursors.lock().retain(|(p, _), _| p != plugin);
        self.journal.forget_plugin(plugin);
    }

    /// Once the first reconcile registered every plugin that had a cursor: drops the restored
    /// versions kept for them, and the cursors of plugins no longer there.
    pub fn started(&self, factory: &InformerFactory, loaded: &[String]) {
        for informer in factory.informers() {
            informer.forget_restored();
        }
        let gone: Vec<String> = {
            let cursors = self.cursors.lock();
            let mut gone: Vec<String> = cursors
                .keys()
                .map(|(p, _)| p.clone())
                .filter(|p| !loaded.contains(p))
                .collect();
            gone.dedup();
            gone
        };
        for plugin in gone {
            tracing::info!(
                plugin,
                "plugin gone since the last run: its delivery cursors are dropped"
            );
            self.forget_plugin(&plugin);
        }
        self.restoring.lock().clear();
    }

    /// Drops the dead letters of every plugin not in `present` (every plugin in the plugins
    /// directory, loadable or not, run here or by another shard member): a plugin removed,
    /// while the host ran or while it was down, takes its letters with it.
    pub fn keep_letters_of(&self, present: &BTreeSet<String>) {
        let counts = self.state.dead_letter_counts();
        for (plugin, letters) in counts {
            if !present.contains(&plugin) {
                tracing::info!(
                    plugin,
                    letters,
                    "plugin no longer in the plugins directory: its dead letters are dropped"
                );
                self.journal.drop_dead_letters(&plugin);
            }
        }
    }

    /// Saves every cursor that moved.
    pub fn save(&self) {
        self.tracker.save();
    }

    /// Saves the cursors and waits until everything journaled is on disk.
    pub async fn close(&self) {
        self.save();
        self.journal.flush().await;
    }

    /// Once the host has stopped: closes the state file, sealed so that the next start trusts
    /// it without reading every page. Journaling and reads stop here.
    pub async fn shutdown(&self) {
        self.close().await;
        let state = self.state.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || state.close()).await {
            tracing::warn!(dir = %self.dir.display(), error = %e, "closing the state failed");
        }
    }

    /// Waits until everything journaled so far is on disk (or the journal stopped writing).
    pub async fn flush(&self) {
        self.journal.flush().await;
    }

    /// Keeps an event a plugin failed for good.
    pub fn dead_letter(&self, letter: DeadLetter) {
        self.journal.dead_letter(letter);
    }

    /// The dead letters kept, of one plugin or all.
    pub fn dead_letters(
        &self,
        plugin: Option<&str>,
    ) -> Result<Vec<DeadLetter>, informant_state::StateError> {
        self.state.dead_letters(plugin)
    }

    /// How many dead letters each plugin holding any has.
    pub fn dead_letter_counts(&self) -> BTreeMap<String, u64> {
        self.state.dead_letter_counts()
    }

    /// Removes dead letters and returns them (to re-drive or drop).
    pub fn take_dead_letters(
        &self,
        plugin: &str,
        ids: &[u64],
    ) -> Result<Vec<DeadLetter>, informant_state::StateError> {
        self.state.take_dead_letters(plugin, ids)
    }

    /// The journal's counters (ops, commits, bytes, degraded).
    pub fn stats(&self) -> JournalStats {
        self.journal.stats()
    }
}

async fn save_periodically(durable: Weak<Durable>) {
    let mut ticks = tokio::time::interval(SAVE_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(durable) = durable.upgrade() else {
            return;
        };
        durable.save();
    }
}
