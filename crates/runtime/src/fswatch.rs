//! Debounced file watching, the one way files are watched: the plugins directory (hot reload),
//! the host config file, and plugin sources under `informant dev`.
//!
//! Editors and `cp` write a file in several steps (temp file, write, rename, backup), and a
//! reader acting on the first event would see a half-written file, or a new `.wasm` beside its
//! old manifest. So changes are delivered in batches, once the watched tree has been quiet for
//! [`DEBOUNCE`]: every change restarts the wait.
//!
//! Contract of a [`Watch`]:
//! - It watches from the moment [`Watch::start`] returns, so a change made after that is in a
//!   later batch, never lost.
//! - Reads are not changes. Other events count for each path the watch's filter accepts.
//! - A watch that failed (inotify's watch limit reached on a new subdirectory), an event queue
//!   that overflowed, or an event flagged for a rescan means that what changed is unknown: it
//!   counts as a change, with [`Burst::lost`] set, so a caller that rescans on every batch never
//!   misses a change.
//! - [`Watch::next`] is cancel-safe: a batch begun under a cancelled call is delivered by the
//!   next one.
//! - A watch made by [`Watch::children`] (the plugins directory: the top level and each tenant's
//!   directory) watches each directory on its own, one level deep, and never through a link.
//!   Watches are kept per inode by the kernel: a recursive watch that followed a link in one
//!   directory into another shared the other's watch with the link, and lost it when the link
//!   went, so nothing planted in one directory can reach another's watch this way.
//!
//! The watcher knows nothing of what is watched: plugins, configs and sources are its callers'.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use notify::RecursiveMode;
use notify::Watcher;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How long the watched tree must be quiet before a batch of changes is delivered.
pub const DEBOUNCE: Duration = Duration::from_millis(250);

/// Errors starting a watch; each names the path at fault.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The watcher could not be created or could not watch the path.
    #[error("cannot watch `{}`: {source}", path.display())]
    Notify {
        /// The path.
        path: PathBuf,
        /// notify's error.
        #[source]
        source: notify::Error,
    },
    /// The directory holding a file to watch could not be resolved.
    #[error("cannot watch `{}`: {source}", path.display())]
    Resolve {
        /// The file asked for.
        path: PathBuf,
        /// Resolving its directory failed.
        #[source]
        source: std::io::Error,
    },
    /// A file watch was asked for a path that names no file (such as `/` or `..`).
    #[error("cannot watch `{}`: not a file", path.display())]
    NotAFile {
        /// The path asked for.
        path: PathBuf,
    },
}

/// The result of starting a watch.
pub type Result<T, E = WatchError> = std::result::Result<T, E>;

/// One settled burst of changes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Burst {
    /// The changed paths the filter accepted.
    pub paths: BTreeSet<PathBuf>,
    /// Some changes went unreported (a watch failed, events were dropped): what changed is
    /// unknown.
    pub lost: bool,
}

impl Burst {
    fn add(&mut self, signal: Signal) {
        match signal {
            Signal::Changed(p) => {
                self.paths.insert(p);
            }
            Signal::Lost => self.lost = true,
        }
    }
}

/// What the notify callback passes on.
#[derive(Debug)]
enum Signal {
    Changed(PathBuf),
    Lost,
}

/// A watch on one or more directories, delivering settled [`Burst`]s; ends when dropped.
pub struct Watch {
    watcher: notify::RecommendedWatcher,
    changes: Changes,
    /// Set by [`Watch::children`]: the subdirectories watched each on its own.
    children: Option<Children>,
}

impl Watch {
    /// Watches `dir` (and its subdirectories if `mode` is recursive); changes to paths that
    /// `filter` rejects are not reported.
    pub fn start(
        dir: &Path,
        mode: RecursiveMode,
        filter: impl Fn(&Path) -> bool + Send + 'static,
    ) -> Result<Self> {
        let cannot = |source| WatchError::Notify {
            path: dir.to_path_buf(),
            source,
        };
        let (sink, changes) = channel(dir, Box::new(filter));
        let mut watcher = notify::recommended_watcher(sink).map_err(cannot)?;
        watcher.watch(dir, mode).map_err(cannot)?;
        Ok(Watch {
            watcher,
            changes,
            children: None,
        })
    }

    /// Watches `dir` and each directory directly in it, each with a watch of its own that
    /// goes no deeper; entries that are links are not watched, nor followed. The
    /// subdirectories are listed again before each batch is delivered: one created since gets
    /// its watch (its creation is in the batch, so a caller rescanning on it sees what was
    /// written there before), one removed or replaced loses its watch. A subdirectory that
    /// cannot be watched (inotify's limit) makes the batch [`lost`](Burst::lost), and is
    /// tried again at the next one.
    pub fn children(dir: &Path, filter: impl Fn(&Path) -> bool + Send + 'static) -> Result<Self> {
        let cannot = |source| WatchError::Notify {
            path: dir.to_path_buf(),
            source,
        };
        let (sink, changes) = channel(dir, Box::new(filter));
        let lost = sink.tx.clone();
        let config = notify::Config::default().with_follow_symlinks(false);
        let mut watcher = notify::RecommendedWatcher::new(sink, config).map_err(cannot)?;
        watcher
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(cannot)?;
        let mut watch = Watch {
            watcher,
            changes,
            children: Some(Children {
                dir: dir.to_path_buf(),
                watched: BTreeMap::new(),
            }),
        };
        if watch.sync_children() {
            let _ = lost.send(Signal::Lost);
        }
        Ok(watch)
    }

    /// Brings the watches of [`children`](Self::children)'s subdirectories in line with the
    /// directory; returns whether some change may go unreported (a watch failed).
    fn sync_children(&mut self) -> bool {
        let Some(children) = &mut self.children else {
            return false;
        };
        let listed = match children.list() {
            Ok(listed) => listed,
            Err(e) => {
                tracing::warn!(dir = %children.dir.display(), error = %e, "cannot list the watched directory; treating it as a change");
                return true;
            }
        };
        let mut lost = false;
        let watched = std::mem::take(&mut children.watched);
        for (path, id) in watched {
            if listed.get(&path) == Some(&id) {
                children.watched.insert(path, id);
            } else {
                // Gone, or another directory by that name now: the kernel may have dropped
                // the watch already.
                let _ = self.watcher.unwatch(&path);
            }
        }
        for (path, id) in listed {
            if children.watched.contains_key(&path) {
                continue;
            }
            if let Err(e) = self.watcher.watch(&path, RecursiveMode::NonRecursive) {
                tracing::warn!(dir = %path.display(), error = %e, "cannot watch a directory; treating it as a change");
                lost = true;
                continue;
            }
            // The watch follows whatever the name is now: it must still be the directory
            // listed, not a link swapped in meanwhile.
            match std::fs::symlink_metadata(&path) {
                Ok(m) if m.is_dir() && file_id(&m) == id => {
                    children.watched.insert(path, id);
                }
                _ => {
                    let _ = self.watcher.unwatch(&path);
                    lost = true;
                }
            }
        }
        lost
    }

    /// Watches the file `path` by watching its directory, and returns the file's path there.
    ///
    /// Every change in the directory counts: editors replace a file by renaming another over
    /// it, and the kubelet updates a mounted ConfigMap by swapping a `..data` link beside the
    /// file, so no event need name the file itself. A caller re-reads the file on each batch.
    pub fn file(path: &Path) -> Result<(Self, PathBuf)> {
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .canonicalize()
            .map_err(|source| WatchError::Resolve {
                path: path.to_path_buf(),
                source,
            })?;
        let name = path.file_name().ok_or_else(|| WatchError::NotAFile {
            path: path.to_path_buf(),
        })?;
        let file = dir.join(name);
        Ok((
            Watch::start(&dir, RecursiveMode::NonRecursive, |_| true)?,
            file,
        ))
    }

    /// Also watches `dir`, through the same filter, into the same batches.
    pub fn add(&mut self, dir: &Path, mode: RecursiveMode) -> Result<()> {
        self.watcher
            .watch(dir, mode)
            .map_err(|source| WatchError::Notify {
                path: dir.to_path_buf(),
                source,
            })
    }

    /// The next batch of changes, once they have settled; `None` if watching has ended.
    pub async fn next(&mut self) -> Option<Burst> {
        let mut batch = self.changes.next().await?;
        // After the batch is taken, no await: nothing between can be cancelled.
        if self.sync_children() {
            batch.lost = true;
        }
        Some(batch)
    }

    /// Runs `consume` on this watch in a task; the task, and so the watch, ends when the
    /// returned [`Watching`] is dropped.
    pub fn spawn<F, Fut>(self, consume: F) -> Watching
    where
        F: FnOnce(Watch) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        Watching(tokio::spawn(consume(self)))
    }
}

/// The directory of a [`Watch::children`], and its subdirectories watched now.
struct Children {
    dir: PathBuf,
    /// Each with the identity of the directory its watch was added to.
    watched: BTreeMap<PathBuf, FileId>,
}

impl Children {
    /// The directories directly in `dir`, links left out (a directory entry's type is the
    /// link's own, never its target's).
    fn list(&self) -> std::io::Result<BTreeMap<PathBuf, FileId>> {
        let mut out = BTreeMap::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let entry = entry?;
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let path = entry.path();
            if let Ok(m) = std::fs::symlink_metadata(&path)
                && m.is_dir()
            {
                out.insert(path, file_id(&m));
            }
        }
        Ok(out)
    }
}

/// Which file a name leads to: (device, inode).
type FileId = (u64, u64);

#[cfg(unix)]
fn file_id(m: &std::fs::Metadata) -> FileId {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino())
}

#[cfg(not(unix))]
fn file_id(_: &std::fs::Metadata) -> FileId {
    (0, 0)
}

/// A task consuming a [`Watch`]; aborted when dropped.
pub struct Watching(JoinHandle<()>);

impl Drop for Watching {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The receiving end: debounces signals into batches.
struct Changes {
    rx: mpsc::UnboundedReceiver<Signal>,
    /// A batch begun and not delivered yet (kept across cancelled calls).
    pending: Option<Burst>,
}

impl Changes {
    async fn next(&mut self) -> Option<Burst> {
        if self.pending.is_none() {
            let first = self.rx.recv().await?;
            self.pending.get_or_insert_default().add(first);
        }
        while let Ok(Some(signal)) = tokio::time::timeout(DEBOUNCE, self.rx.recv()).await {
            self.pending.get_or_insert_default().add(signal);
        }
        self.pending.take()
    }
}

/// The sending end, called by notify on its own thread.
struct Sink {
    tx: mpsc::UnboundedSender<Signal>,
    filter: Box<dyn Fn(&Path) -> bool + Send>,
    /// The watched directory, for logs.
    shown: String,
}

fn channel(dir: &Path, filter: Box<dyn Fn(&Path) -> bool + Send>) -> (Sink, Changes) {
    let (tx, rx) = mpsc::unbounded_channel();
    let sink = Sink {
        tx,
        filter,
        shown: dir.display().to_string(),
    };
    (sink, Changes { rx, pending: None })
}

impl notify::EventHandler for Sink {
    fn handle_event(&mut self, event: notify::Result<notify::Event>) {
        match event {
            Ok(e) if e.kind.is_access() => {}
            Ok(e) if e.need_rescan() || e.paths.is_empty() => {
                tracing::warn!(dir = %self.shown, "file events were dropped; treating it as a change");
                let _ = self.tx.send(Signal::Lost);
            }
            Ok(e) => {
                for p in e.paths {
                    if (self.filter)(&p) {
                        let _ = self.tx.send(Signal::Changed(p));
                    }
                }
            }
            Err(e) => {
                tracing::warn!(dir = %self.shown, error = %e, "watching failed; treating it as a change");
                let _ = self.tx.send(Signal::Lost);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use notify::EventHandler;
    use notify::event::{CreateKind, Event, EventKind};

    use super::*;

    const GUARD: Duration = Duration::from_secs(30);

    async fn next(w: &mut Watch) -> Burst {
        tokio::time::timeout(GUARD, w.next())
            .await
            .expect("no batch within the guard")
            .expect("watching ended")
    }

    fn created(path: &str) -> notify::Result<Event> {
        Ok(Event::new(EventKind::Create(CreateKind::File)).add_path(PathBuf::from(path)))
    }

    #[tokio::test]
    async fn a_burst_of_writes_is_one_batch() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().canonicalize().unwrap();
        let not_swap = |p: &Path| p.extension().is_none_or(|e| e != "swp");
        let mut w = Watch::start(&dir, RecursiveMode::NonRecursive, not_swap).unwrap();
        let files: Vec<PathBuf> = (0..20).map(|i| dir.join(format!("f{i}"))).collect();
        for round in 0..3 {
            for f in &files {
                std::fs::write(f, format!("{round}")).unwrap();
            }
        }
        std::fs::write(dir.join("f0.swp"), "filtered out").unwrap();

        let batch = next(&mut w).await;
        assert_eq!(batch.paths, files.iter().cloned().collect());
        assert!(!batch.lost);
        assert!(
            tokio::time::timeout(DEBOUNCE * 4, w.next()).await.is_err(),
            "one burst gave a second batch"
        );
        // The watch goes on: a later write is a batch of its own.
        std::fs::write(&files[3], "later").unwrap();
        assert_eq!(next(&mut w).await.paths, BTreeSet::from([files[3].clone()]));
    }

    /// The kernel drops events once its queue is full and says so; that must be a change, as
    /// the reload relies on a lost event leading to a rescan.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn an_overflowed_event_queue_is_a_change() {
        let limit = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .filter(|&n| n <= 1 << 20);
        let Some(limit) = limit else {
            eprintln!("skipped: inotify's queue limit is unknown or too large to fill here");
            return;
        };
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().canonicalize().unwrap();
        // The filter runs on notify's thread: holding it there on the first event leaves the
        // kernel's queue unread while the test fills it.
        let (entered_tx, entered) = std::sync::mpsc::channel();
        let (release, release_rx) = std::sync::mpsc::channel::<()>();
        let gate = std::sync::Mutex::new(Some((entered_tx, release_rx)));
        let hold_first = move |_: &Path| {
            if let Some((entered, release)) = gate.lock().unwrap().take() {
                let _ = entered.send(());
                let _ = release.recv_timeout(GUARD);
            }
            true
        };
        let mut w = Watch::start(&dir, RecursiveMode::NonRecursive, hold_first).unwrap();
        std::fs::write(dir.join("first"), "x").unwrap();
        entered
            .recv_timeout(GUARD)
            .expect("notify did not deliver the first event");
        // Two files in turn, so that the kernel cannot merge consecutive events into one.
        let mut a = std::fs::File::create(dir.join("a")).unwrap();
        let mut b = std::fs::File::create(dir.join("b")).unwrap();
        for _ in 0..limit / 2 + 100 {
            a.write_all(b"x").unwrap();
            b.write_all(b"x").unwrap();
        }
        release.send(()).unwrap();

        let deadline = tokio::time::Instant::now() + GUARD;
        loop {
            let batch = tokio::time::timeout_at(deadline, w.next())
                .await
                .expect("the overflow was never reported")
                .expect("watching ended");
            if batch.lost {
                break;
            }
        }
    }

    #[tokio::test]
    async fn a_failed_watch_is_a_change() {
        let (mut sink, mut changes) = channel(Path::new("/watched"), Box::new(|_| true));
        let limit = notify::Error::new(notify::ErrorKind::MaxFilesWatch);
        sink.handle_event(Err(limit));
        let batch = tokio::time::timeout(GUARD, changes.next())
            .await
            .unwrap()
            .unwrap();
        assert!(batch.lost);
        assert!(batch.paths.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_batch_begun_under_a_cancelled_call_is_delivered_by_the_next() {
        let (mut sink, mut changes) = channel(Path::new("/watched"), Box::new(|_| true));
        sink.handle_event(created("/watched/a"));
        assert!(
            tokio::time::timeout(DEBOUNCE / 2, changes.next())
                .await
                .is_err()
        );
        sink.handle_event(created("/watched/b"));
        let batch = changes.next().await.unwrap();
        let both = BTreeSet::from([PathBuf::from("/watched/a"), PathBuf::from("/watched/b")]);
        assert_eq!(batch.paths, both);
        assert!(!batch.lost);
    }

    /// One child keeps a link to another while the watch starts, then removes it: the other
    /// child's watch is untouched (a recursive watch shared one kernel watch between the link
    /// and its target, and dropped it with the link, blinding the other child).
    #[cfg(unix)]
    #[tokio::test]
    async fn a_link_in_one_child_to_another_leaves_the_others_watch_alone() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().canonicalize().unwrap();
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        std::os::unix::fs::symlink(&b, a.join("link")).unwrap();
        let mut w = Watch::children(&dir, |_| true).unwrap();

        std::fs::remove_file(a.join("link")).unwrap();
        assert!(next(&mut w).await.paths.contains(&a.join("link")));
        std::fs::write(b.join("new.wasm"), "x").unwrap();
        let batch = next(&mut w).await;
        assert_eq!(batch.paths, BTreeSet::from([b.join("new.wasm")]));
        assert!(!batch.lost);
    }

    /// A child created later is watched from the batch that reports it; a child that is a link
    /// (to a directory outside) is not watched, nor is anything below a child.
    #[cfg(unix)]
    #[tokio::test]
    async fn children_come_and_go_and_links_lead_nowhere() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().canonicalize().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.join("l")).unwrap();
        let mut w = Watch::children(&dir, |_| true).unwrap();

        let c = dir.join("c");
        std::fs::create_dir(&c).unwrap();
        assert_eq!(next(&mut w).await.paths, BTreeSet::from([c.clone()]));
        std::fs::write(c.join("p.wasm"), "x").unwrap();
        std::fs::write(outside.path().join("q.wasm"), "x").unwrap();
        std::fs::create_dir(c.join("deeper")).unwrap();
        let batch = next(&mut w).await;
        assert_eq!(
            batch.paths,
            BTreeSet::from([c.join("p.wasm"), c.join("deeper")])
        );
        std::fs::write(c.join("deeper/r.wasm"), "x").unwrap();
        assert!(
            tokio::time::timeout(DEBOUNCE * 4, w.next()).await.is_err(),
            "a change through a link or below a child was reported"
        );

        // Removed, then made again: the new directory is watched.
        std::fs::remove_dir_all(&c).unwrap();
        next(&mut w).await;
        std::fs::create_dir(&c).unwrap();
        next(&mut w).await;
        std::fs::write(c.join("again.wasm"), "x").unwrap();
        assert_eq!(
            next(&mut w).await.paths,
            BTreeSet::from([c.join("again.wasm")])
        );
    }
}
