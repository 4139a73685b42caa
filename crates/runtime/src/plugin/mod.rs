//! The WebAssembly plugin runtime: sandboxed component-model plugins fed by the informers.
//!
//! The layers, in the order an event meets them (each uses only the ones after it, except
//! where noted in a module's docs):
//!
//! - [`load`]: the plugins directory and what may run — scanning, admission against the
//!   tenant's grant, secrets, wildcard expansion, waiting and retries, hot reload, `check`.
//! - [`dispatch`]: which updates wake a plugin at all (change filters), decided on the host.
//! - [`exec`]: running a plugin version — the engine and its compile cache, the supervisor
//!   (an informer handler with failure containment), one live instance, one batch of events.
//! - [`imports`]: the WIT host imports a call may make — the cache view, the log, writes to the
//!   cluster and the client they go through, outbound HTTP, metrics.
//! - [`metrics`](mod@metrics): what plugins count — each version's series, the rules they follow,
//!   the host-wide type of each name — read by `/metrics`.
//!
//! Under them all, the ground floor every layer may use and which uses none of them: [`id`]
//! (which plugin), [`bindings`] (the WIT contract's generated types), [`outcome`] (how a call
//! ended), [`text`] (plugin-made text, bounded), [`PluginError`], and the [`logbook`] keeping each
//! plugin's last log lines for the admin server's `/logs`. Callers name an item by its layer
//! (`plugin::load::host_config::HostConfig`), so the layer a caller reaches into shows at the
//! call site.
//!
//! Manifests are `informant-manifest`'s ([`crate::manifest`]).

#[doc(hidden)]
#[allow(missing_docs)]
pub mod bindings;
pub(crate) mod dispatch;
pub mod exec;
pub mod id;
pub mod imports;
pub mod load;
pub(crate) mod logbook;
pub(crate) mod metrics;
pub mod outcome;
pub(crate) mod text;
use std::path::PathBuf;

use crate::manifest::{self, ManifestError};
use crate::plugin::outcome::CallError;

/// An error from a library that types its errors loosely (wasmtime's), kept with its chain.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Errors loading or running plugins; each names the plugin and, where there is one, the file.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The wasmtime engine could not be set up, or a compile task could not finish.
    #[error("plugin engine: {what}: {source}")]
    Engine {
        /// What the engine was doing.
        what: &'static str,
        /// Why it failed (a wasmtime error or a task's panic).
        #[source]
        source: BoxError,
    },
    /// The plugins directory could not be watched for hot reload.
    #[error("plugins directory: {source}")]
    DirWatch {
        /// The watch's error.
        #[source]
        source: crate::fswatch::WatchError,
    },
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
