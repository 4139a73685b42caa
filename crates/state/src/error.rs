//! What can go wrong opening or reading the state, and why a state file was set aside.

use std::path::PathBuf;

/// An error from the state store. Opening the state fails only for what an operator must
/// fix (an unsafe or locked directory, a disk that cannot be written): the host then does not
/// start, rather than run without the durability it was asked for.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The state directory, or a file in it, is not this user's alone — a symbolic link (even
    /// a dangling one), a hard link, another user's, writable by others — or could not be
    /// created, opened or checked.
    #[error("cannot keep the state in `{}`", path.display())]
    Unsafe {
        /// The directory or file.
        path: PathBuf,
        /// Which check failed, what was found, and what to do.
        #[source]
        source: crate::private::PrivateError,
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
    /// Another process (or another `StateDir` in this one) has the state directory open.
    #[error(
        "state directory `{}` is in use by {holder}; one state directory serves one process at a time (give each its own --state-dir)",
        dir.display()
    )]
    InUse {
        /// The directory.
        dir: PathBuf,
        /// Who holds it, as it wrote in the lock file: `pid 1234 on host X (identity Y) since T`.
        holder: String,
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
    /// Where the old file now is (kept for an operator, never read again).
    pub moved_to: PathBuf,
    /// Why it was not used.
    pub reason: Refusal,
    /// Older set-aside files deleted then: only the newest
    /// [`KEEP_SET_ASIDE`](crate::KEEP_SET_ASIDE) are kept.
    pub pruned: Vec<PathBuf>,
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
