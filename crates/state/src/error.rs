//! What can go wrong opening or reading the state, and why a state file was set aside.

use std::path::PathBuf;

/// An error from the state store: the caller then runs without durable state.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The state directory could not be created.
    #[error("state directory `{path}`: cannot create it")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The state file could not be opened, created or renamed.
    #[error("state file `{path}`: cannot {action}")]
    File {
        /// The file.
        path: PathBuf,
        /// What was being done ("open it", "set it aside", ...).
        action: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Another process (or another `StateDir` in this one) has the state file open.
    #[error("state file `{path}` is in use by another process")]
    InUse {
        /// The file.
        path: PathBuf,
    },
    /// A database operation on the state file failed.
    #[error("state file `{path}`: cannot {action}")]
    Db {
        /// The file.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// Why.
        #[source]
        source: Box<redb::Error>,
    },
}

/// The crate's `Result`.
pub type Result<T, E = StateError> = std::result::Result<T, E>;

/// Why an existing state file was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The file is not a readable state file (truncated, overwritten, not redb, missing tables).
    #[error("the state file is unreadable: {0}")]
    Corrupt(String),
    /// The file was written by a newer Informant in a format this one does not read.
    #[error(
        "the state file has format {found}, newer than format {supported} that this version reads"
    )]
    NewerFormat {
        /// The format in the file.
        found: u32,
        /// The newest format this version reads.
        supported: u32,
    },
    /// The file was written by an earlier Informant in a format this one no longer reads.
    #[error(
        "the state file was written by an earlier format {found} that this version does not read (it reads format {supported})"
    )]
    OlderFormat {
        /// The format in the file.
        found: u32,
        /// The format this version reads.
        supported: u32,
    },
    /// The file holds the state of another cluster.
    #[error("the state file belongs to another cluster (`{found}`)")]
    OtherCluster {
        /// The cluster identity stored in the file.
        found: String,
    },
}

/// An existing state file that was renamed out of the way, and why; a fresh one replaced it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("state file set aside as `{moved_to}`: {reason}")]
pub struct SetAside {
    /// Where the old file now is (never deleted).
    pub moved_to: PathBuf,
    /// Why it was not used.
    pub reason: Refusal,
}

pub(crate) fn db(
    path: &std::path::Path,
    action: &'static str,
    e: impl Into<redb::Error>,
) -> StateError {
    StateError::Db {
        path: path.to_path_buf(),
        action,
        source: Box::new(e.into()),
    }
}
