//! The WebAssembly plugin runtime: sandboxed component-model plugins fed by the informers.
//!
//! - [`manifest`]: `NAME.toml`, validated while parsing.
//! - [`admission`]: whether a manifest fits its tenant's grant and the limits it gets.
//! - [`check`]: the offline check behind `informant check`.
//! - [`engine`]: one wasmtime engine (pooling allocator, epoch deadlines), loading components.
//! - [`change_filter`]: `jq-filter` / `ignore`: which updates wake a plugin, decided on the host.
//! - [`cache`]: the on-disk compile cache, and the checks that make its native code trustworthy.
//! - [`batch`]: one `handle-queued` call: the events taken, their outcomes, a deadline per event.
//! - [`host`]: the WIT bindings and the `cache`/`log` imports, reading only the plugin's stores.
//! - [`instance`]: one live instance, `init` and `handle-queued` under deadlines and a memory cap.
//! - [`supervisor`]: failure containment (recreate, backoff, quarantine) as an informer handler.
//! - [`loader`]: the plugins directory, reconciled on start and on every change.
//! - [`reload`]: watches the directory (notify) and reconciles once changes settle.
//! - [`waiting`]: plugins refused for a reason that goes away by itself, and why they wait.
//! - [`retry`]: when waiting plugins are tried again (backoff, CRD changes).
//! - [`secrets`]: `${env:..}` / `${file:..}` config references, resolved at load.
//! - [`wildcard`]: which concrete resources a `kind = "*"` watch covers now.
//! - [`rediscover`]: re-expands wildcard watches when CRDs change (and periodically).

pub mod admission;
pub mod batch;
pub mod cache;
pub mod change_filter;
pub mod check;
pub mod cluster;
pub mod engine;
pub mod histogram;
pub mod host;
pub mod instance;
pub mod loader;
pub mod outbound;
pub use informant_manifest as manifest;
pub mod rediscover;
pub mod reload;
pub mod retry;
pub mod secrets;
pub mod supervisor;
pub mod waiting;
pub mod wildcard;
pub mod write;

pub use cache::CompileCache;
pub use engine::{EngineOptions, LoadedComponent, PluginEngine};
pub use host::{CacheView, Level, LogRate, PluginLog, TextLimits};
pub use instance::{CallError, Handled, InstanceSpec, RetryPolicy};
pub use loader::{
    HostConfig, KindChanges, PluginHost, PluginId, PluginStatus, ReconcileReport, RunningPlugin,
};
pub use manifest::{Manifest, ManifestError};
pub use rediscover::Rediscoverer;
pub use reload::Reloader;
pub use supervisor::{PluginHandler, PluginState, RestartPolicy, Supervisor};
pub use waiting::{Waiting, WaitingFor};

use std::path::PathBuf;

/// Errors loading or running plugins; each names the plugin and, where there is one, the file.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The wasmtime engine could not be set up.
    #[error("plugin engine: {0}")]
    Engine(String),
    /// A `.wasm` could not be read, compiled or linked against the plugin world.
    #[error("plugin `{plugin}`: `{path}`: {reason}")]
    Load {
        /// The plugin's name.
        plugin: String,
        /// The wasm file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The plugin asks for more than its tenant may have, or its tenant may not run plugins.
    #[error("plugin `{plugin}`: `{path}`: refused: {reason}")]
    Refused {
        /// The plugin's name.
        plugin: String,
        /// The file (manifest or component) the refusal is about.
        path: PathBuf,
        /// What was asked and what the grant allows.
        reason: String,
    },
    /// The manifest is invalid.
    #[error("plugin `{plugin}`: {source}")]
    Manifest {
        /// The plugin's name.
        plugin: String,
        /// The manifest error (names file and field).
        #[source]
        source: ManifestError,
    },
    /// `init` failed, trapped or missed its deadline.
    #[error("plugin `{plugin}`: init {source}")]
    Init {
        /// The plugin's name.
        plugin: String,
        /// The failure.
        #[source]
        source: CallError,
    },
    /// A watched resource could not be resolved or watched.
    #[error("plugin `{plugin}`: watch {index}: {source}")]
    Watch {
        /// The plugin's name.
        plugin: String,
        /// Which `[[watch]]` (0-based).
        index: usize,
        /// The informer error.
        #[source]
        source: crate::informer::Error,
    },
}

/// The informer scopes a manifest's `[[watch]]` asks for: one per namespace it lists.
pub fn watch_scopes(w: &manifest::Watch) -> Vec<crate::informer::WatchScope> {
    w.scopes()
        .into_iter()
        .map(|namespace| crate::informer::WatchScope {
            namespace: namespace.map(str::to_string),
            label_selector: w.label_selector().map(str::to_string),
        })
        .collect()
}
