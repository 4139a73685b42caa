//! Hot reload: watches the plugins directory and reconciles after changes settle.
//!
//! Editors and `cp` write files in several steps; reconciling on the first event would load a
//! half-written `.wasm` (and fail) or a new `.wasm` with the old manifest. So events are debounced:
//! the reconcile runs once the directory has been quiet for the debounce period. A reconcile that
//! fails for a plugin keeps its old version running (see [`super::loader`]).

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

/// Watches `host.dir()` until dropped; each settled burst of changes triggers one reconcile, whose
/// report is sent on `reports` (if given).
pub struct Reloader {
    _watcher: notify::RecommendedWatcher,
    task: tokio::task::JoinHandle<()>,
}

impl Reloader {
    /// Starts watching.
    pub fn start(
        host: Arc<PluginHost>,
        reports: Option<mpsc::UnboundedSender<ReconcileReport>>,
    ) -> Result<Self, PluginError> {
        let (tx, mut rx) = mpsc::unbounded_channel::<()>();
        let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if res.is_ok_and(|e| !e.kind.is_access()) {
                let _ = tx.send(());
            }
        })
        .map_err(|e| PluginError::Engine(format!("cannot watch {}: {e}", host.dir().display())))?;
        watcher
            .watch(host.dir(), RecursiveMode::Recursive)
            .map_err(|e| {
                PluginError::Engine(format!("cannot watch {}: {e}", host.dir().display()))
            })?;
        let task = tokio::spawn(async move {
            while settled(&mut rx).await.is_some() {
                let report = host.reconcile().await;
                for (id, e) in &report.errors {
                    tracing::error!(plugin = %id, error = %e, "reload failed; any previous version keeps running");
                }
                if let Some(r) = &reports {
                    let _ = r.send(report);
                }
            }
        });
        Ok(Reloader {
            _watcher: watcher,
            task,
        })
    }
}

impl Drop for Reloader {
    fn drop(&mut self) {
        self.task.abort();
    }
}
