//! Hot reload: watches the plugins directory and reconciles after changes settle.
//!
//! Editors and `cp` write files in several steps; reconciling on the first event would load a
//! half-written `.wasm` (and fail) or a new `.wasm` with the old manifest. So changes are
//! debounced ([`crate::fswatch`]): the reconcile runs once the directory has been quiet for
//! [`DEBOUNCE`](crate::fswatch::DEBOUNCE). Changes the watch lost count too: a reconcile rescans
//! the whole directory. The top level and each tenant's directory are watched each on its own,
//! never through a link ([`Watch::children`]): nothing a tenant plants in its directory can
//! touch the watch of another's. A reconcile that fails for a plugin keeps its old version running (see
//! [`crate::plugin::load::loader`]).
//!
//! The same loop retries waiting plugins (see [`crate::plugin::load::waiting`]) when [`crate::plugin::load::retry_waiting`] says:
//! a retry is just another reconcile, serialised with the others by the host.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::fswatch::{Watch, Watching};
use crate::plugin::PluginError;
use crate::plugin::load::loader::PluginHost;
use crate::plugin::load::retry_waiting::RetryPlan;
use crate::plugin::load::status::ReconcileReport;

/// Watches `host.dir()` until dropped; each settled burst of changes triggers one reconcile, and
/// each retry of waiting plugins one [`PluginHost::retry_waiting`]; their reports are sent on
/// `reports` (if given).
pub struct Reloader {
    _watch: Watching,
}

impl Reloader {
    /// Starts watching.
    pub fn start(
        host: Arc<PluginHost>,
        reports: Option<mpsc::UnboundedSender<ReconcileReport>>,
    ) -> Result<Self, PluginError> {
        let dir = host.dir().to_path_buf();
        let watch =
            Watch::children(&dir, |_| true).map_err(|source| PluginError::DirWatch { source })?;
        let watching = watch.spawn(|mut changes| async move {
            let mut waiting = host.subscribe_waiting();
            let mut retry = RetryPlan::new(host.factory().client().clone());
            loop {
                retry.update(*waiting.borrow_and_update() > 0);
                let retrying = tokio::select! {
                    batch = changes.next() => {
                        if batch.is_none() {
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
        });
        Ok(Reloader { _watch: watching })
    }
}
