//! Developer tooling for Informant plugins, used by the `informant` CLI and kept out of the
//! runtime library the host links: the `informant dev` loop over plugin sources and the
//! `informant new` scaffolds (from `templates/`).
//!
//! The developer loop behind `informant dev --plugins SOURCES`: plugin sources (Rust crates,
//! Python and TypeScript/JS plugins) are built into components, installed into a compiled
//! plugins directory, and rebuilt when their sources change. Loading and hot swapping stay with
//! [`informant_runtime::plugin::load::loader::PluginHost`] and [`informant_runtime::plugin::load::reload::Reloader`]
//! watching that directory, so a rebuilt plugin is swapped by the loader's tested replace path:
//! the new version is loaded first, and if it cannot be the old one keeps running.
//!
//! - [`builder`]: finding plugin sources, building one, installing the result.
//! - [`python`]: the componentize-py toolchain and Python plugin builds.
//! - [`js`]: the componentize-js toolchain and TypeScript/JS plugin builds.
//! - [`toolchain`]: what the Python and JS toolchains share.
//! - [`watcher`]: debounced source changes.
//! - [`scaffold`](mod@scaffold): a new plugin (`informant new`).
//!
//! Contract of a [`DevLoop`]:
//! - At start every plugin is built once, in order, each reported as [`DevEvent::Building`]
//!   (`index` of `total`) then [`DevEvent::Built`] or [`DevEvent::Failed`]; installed plugins
//!   whose source is gone are removed. A language's first build reports
//!   [`DevEvent::InstallingToolchain`] when its toolchain must be installed first.
//! - After a change only the plugins whose files changed are rebuilt: files in the plugin's
//!   directory, or any local file its last successful build read (cargo's dep-info; the SDK and
//!   WIT files for Python and JS), so editing a path dependency outside the sources, such as
//!   the SDK, rebuilds the plugins using it. A plugin that appears is built, one that
//!   disappears is uninstalled (and so unloaded). Changes the watch lost (a failed watch, an
//!   overflowed event queue) may have touched any plugin, so every plugin is rebuilt.
//! - A failed build installs nothing: whatever version was running keeps running, and the
//!   failure carries the compiler's rendered diagnostics (or the Python or JS toolchain's
//!   output).
//! - An unchanged build installs nothing either, so the plugin is not reloaded.

pub mod builder;
pub mod js;
pub mod python;
pub mod scaffold;
pub mod toolchain;
pub mod watcher;

pub use builder::{BuildError, Builder, Built, PluginSource, Polyglot, Sources, scan};
pub use scaffold::{
    Lang, Scaffold, SdkDependency, Template, polyglot_sdk, scaffold, scaffold_polyglot,
    scaffold_template,
};
pub use watcher::SourceWatcher;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use informant_runtime::plugin::id::PluginId;

/// Errors setting up the dev loop; each names the path at fault.
#[derive(Debug, thiserror::Error)]
pub enum DevLoopError {
    /// A directory could not be read or created.
    #[error("`{}`: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The sources could not be watched.
    #[error("plugin sources: {0}")]
    Watch(#[source] informant_runtime::fswatch::WatchError),
    /// A scaffold could not be written.
    #[error("{0}")]
    Scaffold(String),
}

/// What the loop is doing, for the CLI to print and tests to wait on.
#[derive(Debug)]
pub enum DevEvent {
    /// A source directory that is not a plugin, and why.
    Skipped {
        /// The directory.
        dir: PathBuf,
        /// Why it is not built.
        reason: String,
    },
    /// A language's toolchain is being installed into `dir` before its first build (it takes
    /// a while and needs the package registry).
    InstallingToolchain {
        /// The language.
        lang: Lang,
        /// Where it goes.
        dir: PathBuf,
    },
    /// A build starts: the `index`-th (1-based) of `total` in this round.
    Building {
        /// The plugin.
        id: PluginId,
        /// Its place in the round.
        index: usize,
        /// Builds in the round.
        total: usize,
    },
    /// A build succeeded; `changed` says whether a new version was installed.
    Built {
        /// The plugin.
        id: PluginId,
        /// Whether the installed files changed (and so the plugin will be swapped).
        changed: bool,
        /// The crate's warnings, rendered.
        warnings: Vec<String>,
        /// How long the build took.
        elapsed: Duration,
    },
    /// A build failed; the running version (if any) stays.
    Failed {
        /// The plugin.
        id: PluginId,
        /// Why, with the compiler's diagnostics.
        error: BuildError,
    },
    /// The source is gone and its plugin was uninstalled.
    Removed {
        /// The plugin.
        id: PluginId,
    },
}

/// Where the sources are and how to build them.
#[derive(Debug, Clone)]
pub struct DevLoopConfig {
    /// The plugin sources directory (or a single plugin's).
    pub sources: PathBuf,
    /// Builds and installs (its `out_dir` is the directory the plugin host loads).
    pub builder: Builder,
}

/// Builds plugin sources and keeps rebuilding them on change until dropped.
pub struct DevLoop {
    task: JoinHandle<()>,
}

impl DevLoop {
    /// Builds every plugin crate once (reporting on `events`), then watches for changes in the
    /// background. Returns once the first round of builds is done, so the plugins directory is
    /// ready to load.
    pub async fn start(
        config: DevLoopConfig,
        events: mpsc::UnboundedSender<DevEvent>,
    ) -> Result<DevLoop, DevLoopError> {
        let mut builder = config.builder;
        for dir in [&builder.out_dir, &builder.target_dir] {
            std::fs::create_dir_all(dir).map_err(|source| DevLoopError::Io {
                path: dir.clone(),
                source,
            })?;
        }
        let canonical = |p: &Path| {
            std::fs::canonicalize(p).map_err(|source| DevLoopError::Io {
                path: p.to_path_buf(),
                source,
            })
        };
        let sources = canonical(&config.sources)?;
        builder.out_dir = canonical(&builder.out_dir)?;
        builder.target_dir = canonical(&builder.target_dir)?;
        tokio::task::spawn_blocking(builder::ensure_target)
            .await
            .map_err(|e| DevLoopError::Scaffold(e.to_string()))?;
        // Watch before the first build, so edits made while it runs are not missed.
        let mut watcher = SourceWatcher::start(
            &sources,
            vec![builder.out_dir.clone(), builder.target_dir.clone()],
        )?;
        let builder = Arc::new(builder);
        let found = scan(&sources)?;
        for (dir, reason) in &found.skipped {
            let _ = events.send(DevEvent::Skipped {
                dir: dir.clone(),
                reason: reason.clone(),
            });
        }
        for id in builder.installed() {
            if !found.plugins.iter().any(|c| c.id == id) && builder.uninstall(&id) {
                let _ = events.send(DevEvent::Removed { id });
            }
        }
        let mut inputs = HashMap::new();
        record_inputs(
            &mut inputs,
            &mut watcher,
            build_round(&builder, &found.plugins, &events).await,
        );
        let mut known = found.plugins;
        let task = tokio::spawn(async move {
            while let Some(batch) = watcher.next_batch().await {
                tracing::debug!(?batch, "plugin sources changed");
                let now = match scan(&sources) {
                    Ok(s) => s.plugins,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot rescan the plugin sources");
                        continue;
                    }
                };
                for gone in known.iter().filter(|k| !now.contains(k)) {
                    builder.uninstall(&gone.id);
                    inputs.remove(&gone.id);
                    let _ = events.send(DevEvent::Removed {
                        id: gone.id.clone(),
                    });
                }
                let read_by = |c: &PluginSource, p: &PathBuf| {
                    p.starts_with(&c.dir)
                        || inputs.get(&c.id).is_some_and(|i: &Vec<_>| i.contains(p))
                };
                let changed: Vec<PluginSource> = now
                    .iter()
                    .filter(|c| {
                        !known.contains(c)
                            || batch.lost
                            || batch.paths.iter().any(|p| read_by(c, p))
                    })
                    .cloned()
                    .collect();
                let built = build_round(&builder, &changed, &events).await;
                record_inputs(&mut inputs, &mut watcher, built);
                known = now;
            }
        });
        Ok(DevLoop { task })
    }
}

impl Drop for DevLoop {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Remembers what each successful build read and watches those files; a failed build keeps
/// its crate's last known inputs, so fixing a path dependency still triggers a rebuild.
fn record_inputs(
    inputs: &mut HashMap<PluginId, Vec<PathBuf>>,
    watcher: &mut SourceWatcher,
    built: Vec<(PluginId, Vec<PathBuf>)>,
) {
    for (id, files) in built {
        // Compared with notify's paths, which start from the canonical directories watched.
        let files: Vec<PathBuf> = files
            .into_iter()
            .map(|f| std::fs::canonicalize(&f).unwrap_or(f))
            .collect();
        watcher.watch_files(&files);
        inputs.insert(id, files);
    }
}

/// Builds and installs `plugins` one after another (cargo would serialize them on its lock,
/// and the Python and JS toolchains each use both cores); returns what each successful build
/// read.
async fn build_round(
    builder: &Arc<Builder>,
    plugins: &[PluginSource],
    events: &mpsc::UnboundedSender<DevEvent>,
) -> Vec<(PluginId, Vec<PathBuf>)> {
    let mut read = Vec::new();
    let total = plugins.len();
    for (i, krate) in plugins.iter().enumerate() {
        let id = krate.id.clone();
        if builder.needs_toolchain(krate.lang) {
            let _ = events.send(DevEvent::InstallingToolchain {
                lang: krate.lang,
                dir: builder.toolchain_dir(krate.lang),
            });
        }
        let _ = events.send(DevEvent::Building {
            id: id.clone(),
            index: i + 1,
            total,
        });
        let (b, k) = (builder.clone(), krate.clone());
        let result = tokio::task::spawn_blocking(move || {
            let built = b.build(&k)?;
            let changed = b.install(&k, &built)?;
            Ok::<_, BuildError>((built, changed))
        })
        .await;
        let event = match result {
            Ok(Ok((built, changed))) => {
                read.push((id.clone(), built.inputs));
                DevEvent::Built {
                    id,
                    changed,
                    warnings: built.warnings,
                    elapsed: built.elapsed,
                }
            }
            Ok(Err(error)) => DevEvent::Failed { id, error },
            Err(join) => DevEvent::Failed {
                error: BuildError::Spawn {
                    plugin: id.clone(),
                    reason: join.to_string(),
                },
                id,
            },
        };
        let _ = events.send(event);
    }
    read
}
