//! Config reload: `informant.toml` is watched, and a changed file that validates replaces the
//! host's limits and tenants, after which a reconcile re-admits exactly the plugins whose tenant
//! policy or limits changed. Tenants added get their plugins loaded, tenants removed or narrowed
//! lose the plugins their grant no longer admits, and other tenants' plugins are not touched (no
//! reload, no replay). A file that does not validate changes nothing: the error names the file,
//! the key and the reason, and the previous config stays in force.
//!
//! The file's directory is watched, not the file ([`Watch::file`]): editors replace the file,
//! and the kubelet updates a mounted ConfigMap by swapping a `..data` link beside it. Any change
//! in the directory re-reads the file, and only new contents are applied.

use std::path::Path;
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::fswatch::{Watch, WatchError, Watching};
use crate::plugin::load::loader::PluginHost;
use crate::plugin::load::status::ReconcileReport;

/// Watches a config file until dropped; each settled burst of changes to it is applied and
/// followed by one reconcile, whose report (with [`ReconcileReport::config_error`]) is sent on
/// `reports` (if given).
pub struct ConfigWatcher {
    _watch: Watching,
}

impl ConfigWatcher {
    /// Starts watching `path` for `host`.
    pub fn start(
        path: &Path,
        host: Arc<PluginHost>,
        reports: Option<mpsc::UnboundedSender<ReconcileReport>>,
    ) -> Result<Self, WatchError> {
        let (watch, file) = Watch::file(path)?;
        // What the host runs with was read from this file at start.
        let mut last = std::fs::read(&file).ok();
        let watching = watch.spawn(|mut changes| async move {
            while changes.next().await.is_some() {
                let now = std::fs::read(&file).ok();
                if now == last {
                    continue;
                }
                last = now;
                let applied = super::load(&file)
                    .map_err(|e| e.to_string())
                    .and_then(|config| {
                        host.set_config(config)
                            .map_err(|e| format!("config `{}`: {e}", file.display()))
                    });
                let config_error = match applied {
                    Ok(()) => {
                        tracing::info!(config = %file.display(), "host config reloaded");
                        None
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "host config not reloaded; the previous one stays in force");
                        Some(e)
                    }
                };
                let mut report = host.reconcile().await;
                for (id, e) in &report.errors {
                    tracing::error!(plugin = %id, error = %e, "plugin not loaded under the reloaded config");
                }
                report.config_error = config_error;
                if let Some(r) = &reports {
                    let _ = r.send(report);
                }
            }
        });
        Ok(ConfigWatcher { _watch: watching })
    }
}
