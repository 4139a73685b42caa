//! Record a live event stream and replay it offline into one plugin.
//!
//! - [`format`](mod@format): the JSON Lines recording format (one informer event per line).
//! - [`recorder`]: a handler on live informers that writes the recording.
//! - [`player`]: runs one plugin against a recording (and optional starting objects) through
//!   never-started informers fed the way the reflector feeds them, so the plugin's output
//!   matches the live run's.
//! - [`objects`]: objects from multi-document YAML (`--objects`, and `informant dev --seed`).

pub(crate) mod format;
pub(crate) mod objects;
pub(crate) mod player;
pub(crate) mod recorder;

pub use format::{Record, RecordType, read_records};
pub use objects::{YamlObject, parse_yaml_objects, read_yaml_objects};
pub use player::{ReplayConfig, ReplayOutcome, replay};
pub use recorder::Recorder;

use std::path::PathBuf;

use crate::plugin::PluginError;

/// Errors reading recordings and objects, recording, and replaying; each names the file, line
/// or document at fault.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A file could not be read or written.
    #[error("`{path}`: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A recording line is not a valid record.
    #[error("{}:{line}: {reason}", path.display())]
    Line {
        /// The recording.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A record's object is not a Kubernetes object.
    #[error("recording line {line}: {reason}")]
    Record {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A YAML document is not a Kubernetes object.
    #[error("{}: document {document}: {reason}", path.display())]
    Document {
        /// The YAML file.
        path: PathBuf,
        /// 1-based document index.
        document: usize,
        /// What is wrong.
        reason: String,
    },
    /// The plugin could not be loaded or initialised.
    #[error(transparent)]
    Plugin(#[from] PluginError),
    /// Replay failed while running.
    #[error("replay: {0}")]
    Run(String),
    /// Writing the recording failed.
    #[error("recording: {0}")]
    Recording(String),
}
