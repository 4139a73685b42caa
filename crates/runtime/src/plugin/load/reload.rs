//! Hot reload: watches the plugins directory and reconciles after changes settle.
//!
//! Editors and `cp` write files in several steps; reconciling on the first event would load a
//! half-written `.wasm` (and fail) or a new `.wasm` with the old manifest. So events are debounced:
//! the reconcile runs once the directory has been quiet for the debounce period. A reconcile that
//! fails for a plugin keeps its old version running (see [`crate::plugin::load::loader`]).
//!
//! The same loop retries waiting plugins (see [`crate::plugin::load::waiting`]) when [`crate::plugin::load::retry`] says:
//! a retry is just another reconcile, serialised with the others by the host.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;

use crate::plugin::PluginError;
use crate::plugin::load::loader::PluginHost;
use crate::plugin::load::retry::RetryPlan;
use crate::plugin::load::status::ReconcileReport;

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
pub struct Bursts {
    rx: mpsc::UnboundedReceiver<()>,
    /// A burst has begun and not been reported yet (kept across cancellations).
    begun: bool,
}

impl Bursts {
    /// Waits for the next settled burst; `false` once watching has ended. Cancel-safe: a burst
    /// begun under a cancelled call is reported by the next one.
    pub async fn next(&mut self) -> bool {
        if !self.begun {
            if self.rx.recv().await.is_none() {
                return false;
            }
            self.begun = true;
        }
        while let Ok(Some(())) = tokio::time::timeout(DEBOUNCE, self.rx.recv()).await {}
        self.begun = false;
        true
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
        let cannot = |e: notify::Error| PluginError::Engine {
            what: "watching the plugins directory",
            source: format!("cannot watch {}: {e}", dir.display()).into(),
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let shown = dir.display().to_string();
        let mut watcher =
            notify::recommended_watcher(move |res: notify::Result<notify::Event>| match res {
                Ok(e) if e.kind.is_access() => {}
                Ok(_) => {
                    let _ = tx.send(());
                }
                // A watch that could not be added (inotify's limit, on a new subdirectory) or a
                // queue that overflowed: what changed is unknown, so it counts as a change.
                Err(e) => {
                    tracing::warn!(dir = %shown, error = %e, "watching the directory failed; treating it as a change");
                    let _ = tx.send(());
                }
            })
            .map_err(cannot)?;
        watcher.watch(dir, mode).map_err(cannot)?;
        Ok(DirWatch {
            _watcher: watcher,
            task: tokio::spawn(consume(Bursts { rx, begun: false })),
        })
    }
}

impl Drop for DirWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Watches `host.dir()` until dropped; each settled burst of changes triggers one reconcile, and
/// each retry of waiting plugins one [`PluginHost::retry_waiting`]; their reports are sent on
/// `reports` (if given).
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
            let mut waiting = host.subscribe_waiting();
            let mut retry = RetryPlan::new(host.factory().client().clone());
            loop {
                retry.update(*waiting.borrow_and_update() > 0);
                let retrying = tokio::select! {
                    more = bursts.next() => {
                        if !more {
                            break;
                        }
                        false
                    }
                    () = retry.due() => true,
                    // A reconcile made elsewhere (the first one, a config reload) changed it.
                    changed = waiting.changed() => {
                        if changed.is_err() {
                            break;
                        }
                        continue;
                    }
                };
                let report = if retrying {
                    host.retry_waiting().await
                } else {
                    host.reconcile().await
                };
                for (id, e) in &report.errors {
                    id.span().in_scope(|| tracing::error!(error = %e, "reload failed; any previous version keeps running"));
                }
                if let Some(r) = &reports {
                    let _ = r.send(report);
                }
            }
        })?;
        Ok(Reloader { _watch: watch })
    }
}
