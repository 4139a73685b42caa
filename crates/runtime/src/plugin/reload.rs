//! Hot reload: watches the plugins directory and reconciles after changes settle.
//!
//! Editors and `cp` write files in several steps; reconciling on the first event would load a
//! half-written `.wasm` (and fail) or a new `.wasm` with the old manifest. So events are debounced:
//! the reconcile runs once the directory has been quiet for the debounce period. A reconcile that
//! fails for a plugin keeps its old version running (see [`super::loader`]).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;

use super::PluginError;
use super::loader::{PluginHost, ReconcileReport};

/// How long the directory must be quiet before a reconcile.
pub const DEBOUNCE: Duration = Duration::from_millis(250);

/// The next burst of changes: waits for one, then keeps absorbing until none has come for
/// [`DEBOUNCE`]; `None` once the sender is gone.
pub async fn settled<T>(rx: &mut mpsc::UnboundedReceiver<T>) -> Option<Vec<T>> {
    let mut burst = vec![rx.recv().await?];
    while let Ok(Some(next)) = tokio::time::timeout(DEBOUNCE, rx.recv()).await {
        burst.push(next);
    }
    Some(burst)
}

/// Settled bursts of changes in a watched directory (see [`DirWatch`]).
pub struct Bursts(mpsc::UnboundedReceiver<()>);

impl Bursts {
    /// Waits for the next settled burst; `false` once watching has ended.
    pub async fn next(&mut self) -> bool {
        settled(&mut self.0).await.is_some()
    }
}

/// A directory watch and the task consuming its bursts of changes, both ended when dropped.
pub struct DirWatch {
    _watcher: notify::RecommendedWatcher,
    task: tokio::task::JoinHandle<()>,
}

impl DirWatch {
    /// Watches `dir` and runs `consume` on its bursts of changes (reads count as none).
    pub fn start<F, Fut>(dir: &Path, mode: RecursiveMode, consume: F) -> Result<Self, PluginError>
    where
        F: FnOnce(Bursts) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let cannot =
            |e: notify::Error| PluginError::Engine(format!("cannot watch {}: {e}", dir.display()));
        let (tx, rx) = mpsc::unbounded_channel();
        let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if res.is_ok_and(|e| !e.kind.is_access()) {
                let _ = tx.send(());
            }
        })
        .map_err(cannot)?;
        watcher.watch(dir, mode).map_err(cannot)?;
        Ok(DirWatch {
            _watcher: watcher,
            task: tokio::spawn(consume(Bursts(rx))),
        })
    }
}

impl Drop for DirWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Watches `host.dir()` until dropped; each settled burst of changes triggers one reconcile, whose
/// report is sent on `reports` (if given).
pub struct Reloader {
    _watch: DirWatch,
}

impl Reloader {
    /// Starts watching.
    pub fn start(
        host: Arc<PluginHost>,
        reports: Option<mpsc::UnboundedSender<ReconcileReport>>,
    ) -> Result<Self, PluginError> {
        let dir = host.dir().to_path_buf();
        let watch = DirWatch::start(&dir, RecursiveMode::Recursive, |mut bursts| async move {
            while bursts.next().await {
                let report = host.reconcile().await;
                for (id, e) in &report.errors {
                    tracing::error!(plugin = %id, error = %e, "reload failed; any previous version keeps running");
                }
                if let Some(r) = &reports {
                    let _ = r.send(report);
                }
            }
        })?;
        Ok(Reloader { _watch: watch })
    }
}
