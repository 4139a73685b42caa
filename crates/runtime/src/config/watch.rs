//! Config reload: `informant.toml` is watched, and a changed file that validates replaces the
//! host's limits and tenants, after which a reconcile re-admits exactly the plugins whose tenant
//! policy or limits changed. Tenants added get their plugins loaded, tenants removed or narrowed
//! lose the plugins their grant no longer admits, and other tenants' plugins are not touched (no
//! reload, no replay). A file that does not validate changes nothing: the error names the file,
//! the key and the reason, and the previous config stays in force.
//!
//! The file's directory is watched, not the file: editors replace the file, and the kubelet
//! updates a mounted ConfigMap by swapping a `..data` link beside it, so no event names the file
//! itself. Any change in the directory re-reads the file, and only new contents are applied.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use notify::RecursiveMode;
use tokio::sync::mpsc;

use crate::plugin::load::reload::DirWatch;
use crate::plugin::{PluginError, PluginHost, ReconcileReport};

/// Watches a config file until dropped; each settled burst of changes to it is applied and
/// followed by one reconcile, whose report (with [`ReconcileReport::config_error`]) is sent on
/// `reports` (if given).
pub struct ConfigWatcher {
    _watch: DirWatch,
}

impl ConfigWatcher {
    /// Starts watching `path` for `host`.
    pub fn start(
        path: &Path,
        host: Arc<PluginHost>,
        reports: Option<mpsc::UnboundedSender<ReconcileReport>>,
    ) -> Result<Self, PluginError> {
        let cannot = |e: &dyn std::fmt::Display| PluginError::Engine {
            what: "watching the config file",
            source: format!("cannot watch {}: {e}", path.display()).into(),
        };
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .canonicalize()
            .map_err(|e| cannot(&e))?;
        let name = path.file_name().ok_or_else(|| cannot(&"not a file"))?;
        let file: PathBuf = dir.join(name);
        // What the host runs with was read from this file at start.
        let mut last = std::fs::read(&file).ok();
        let watch = DirWatch::start(&dir, RecursiveMode::NonRecursive, |mut bursts| async move {
            while bursts.next().await {
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
        })?;
        Ok(ConfigWatcher { _watch: watch })
    }
}
