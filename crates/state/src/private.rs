//! Private directories and files: what only this process's user may have written, and (for
//! the state) read. Shared by the state directory and the runtime's compile cache.
//!
//! - A directory is created 0700 (with any missing parents) and, before use, must be a real
//!   directory (not a symbolic link, even a dangling one), owned by the effective uid and
//!   writable by no one else (`mode & 0o022 == 0`). It is checked on a descriptor opened with
//!   `O_NOFOLLOW | O_DIRECTORY`, so what is checked is the directory itself.
//! - A file is opened with `O_NOFOLLOW` (a link, dangling or not, is refused, never followed)
//!   and `O_NONBLOCK` (a planted FIFO fails its check instead of hanging the open), created
//!   0600 when asked to, and checked on the open descriptor: a regular file, owned by the
//!   effective uid, one link (a hard link would let whoever made it keep a way to the file
//!   after it is replaced or removed), writable by no one else.
//! - A file is replaced through a fresh temp file in the same directory (`O_EXCL`, an
//!   unpredictable name, 0600), synced and renamed into place: rename replaces whatever is at
//!   the name, a planted link included, and never follows it.
//!
//! Nothing here repairs a refused directory or file: refusing leaves it as it was found. Only
//! read bits are taken away, on request ([`Secret`]), from a directory or file this user owns.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Why a directory or file was not used; each names the path and the reason.
#[derive(Debug, thiserror::Error)]
pub enum PrivateError {
    /// A directory or file could not be created, inspected, opened or written.
    #[error("`{}`: {what}: {source}", path.display())]
    Io {
        /// The directory or file.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A directory or file is not private: a link, someone else's, writable by others.
    #[error("`{}`: refused: {reason}", path.display())]
    Unsafe {
        /// The directory or file.
        path: PathBuf,
        /// Which check failed, with what was found and what to do.
        reason: String,
    },
    /// The checks need Unix file ownership and modes.
    #[error(
        "private files are not supported on this platform (their checks need Unix permissions)"
    )]
    Unsupported,
}

/// Result alias for this module.
pub type Result<T, E = PrivateError> = std::result::Result<T, E>;

/// Whether group and others must not read either: what it holds is secret (the state holds
/// every cached object, Secrets included), not just something no one else may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Secret {
    /// Read bits for group and others are left as they are (the compile cache: its artifacts
    /// are no secret, writing them is what matters).
    No,
    /// Read bits for group and others are taken away (`chmod go-rwx`) from a directory or file
    /// this user owns, left by an earlier version or an operator.
    Yes,
}

/// How [`open_file`] opens a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read only; a missing file is `Ok(None)`.
    Read,
    /// Read and write; a missing file is `Ok(None)`.
    ReadWrite,
    /// Read and write, created 0600 if missing.
    Create,
}

fn io_error(path: &Path, what: &'static str) -> impl FnOnce(io::Error) -> PrivateError {
    let path = path.to_path_buf();
    move |source| PrivateError::Io { path, what, source }
}

/// Creates `dir` (0700, with any missing parents) if it is missing, and checks it.
pub fn ensure_dir(dir: &Path, secret: Secret) -> Result<()> {
    imp::ensure_dir(dir, secret)
}

/// Opens the file at `path` without following a link and checks it on the descriptor;
/// `Ok(None)`: there is none (unless `access` creates it).
pub fn open_file(path: &Path, access: Access, secret: Secret) -> Result<Option<File>> {
    imp::open_file(path, access, secret)
}

/// Refuses a name that is a link or not a regular file this user owns with one link, before
/// it is renamed or removed; a missing name passes.
pub fn check_name(path: &Path) -> Result<()> {
    imp::open_file(path, Access::Read, Secret::No).map(drop)
}

/// Replaces the file `name` in `dir` with `bytes`, atomically, through a temp file that no one
/// can predict or plant (0600).
pub fn replace_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let path = dir.join(name);
    // `tempfile` creates with O_CREAT | O_EXCL (which never follows a link), a random name and
    // mode 0600.
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .tempfile_in(dir)
        .map_err(io_error(dir, "cannot create a temp file in it"))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(io_error(tmp.path(), "cannot write"))?;
    // A failure leaves no file at `path`, and the temp file is removed when `tmp` drops.
    tmp.persist(&path)
        .map_err(|e| io_error(&path, "cannot rename the temp file into place")(e.error))?;
    Ok(())
}

#[cfg(unix)]
mod imp {
    use std::fs::{self, Metadata};
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};

    use super::*;

    fn refuse<T>(path: &Path, reason: impl Into<String>) -> Result<T> {
        Err(PrivateError::Unsafe {
            path: path.to_path_buf(),
            reason: reason.into(),
        })
    }

    fn euid() -> u32 {
        // SAFETY: geteuid has no preconditions and cannot fail.
        unsafe { libc::geteuid() }
    }

    /// Owned by this process's effective user and writable by no one else.
    fn owned_and_private(path: &Path, md: &Metadata, what: &str) -> Result<()> {
        let euid = euid();
        if md.uid() != euid {
            return refuse(
                path,
                format!(
                    "owned by uid {}, not by this process's effective uid {euid}; {what} must be this user's own (chown it, or use another path)",
                    md.uid()
                ),
            );
        }
        let mode = md.mode() & 0o7777;
        if mode & 0o022 != 0 {
            return refuse(
                path,
                format!(
                    "writable by its group or others (mode {mode:04o}); only its owner may write {what} (chmod go-w it)"
                ),
            );
        }
        Ok(())
    }

    /// Takes group's and others' read bits from `file`, which passed `owned_and_private`.
    fn hide(file: &File, path: &Path, md: &Metadata, owner_bits: u32) -> Result<()> {
        let mode = md.mode() & 0o7777;
        if mode & 0o077 == 0 {
            return Ok(());
        }
        let private = (mode & !0o077) | owner_bits;
        file.set_permissions(fs::Permissions::from_mode(private))
            .map_err(io_error(
                path,
                "cannot take group's and others' read access away",
            ))?;
        tracing::info!(path = %path.display(), from = format!("{mode:04o}"), to = format!("{private:04o}"), "readable by its group or others: made private");
        Ok(())
    }

    fn is_link(path: &Path) -> bool {
        fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
    }

    pub(super) fn ensure_dir(dir: &Path, secret: Secret) -> Result<()> {
        match fs::symlink_metadata(dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io_error(dir, "cannot create the directory"))?,
            Err(e) => return Err(io_error(dir, "cannot inspect the directory")(e)),
            Ok(_) => {}
        }
        let opened = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_DIRECTORY)
            .open(dir);
        let file = match opened {
            Ok(file) => file,
            Err(_) if is_link(dir) => {
                return refuse(
                    dir,
                    "a symbolic link; it must be a real directory (give the link's target itself)",
                );
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
                return refuse(dir, "not a directory");
            }
            Err(e) => return Err(io_error(dir, "cannot open the directory")(e)),
        };
        let md = file
            .metadata()
            .map_err(io_error(dir, "cannot inspect the directory"))?;
        if !md.is_dir() {
            return refuse(dir, "not a directory");
        }
        owned_and_private(dir, &md, "the directory")?;
        if secret == Secret::Yes {
            hide(&file, dir, &md, 0o700)?;
        }
        Ok(())
    }

    pub(super) fn open_file(path: &Path, access: Access, secret: Secret) -> Result<Option<File>> {
        let mut options = fs::OpenOptions::new();
        options
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
        match access {
            Access::Read => {}
            Access::ReadWrite => {
                options.write(true);
            }
            Access::Create => {
                options.write(true).create(true).mode(0o600);
            }
        }
        let file = match options.open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound && !is_link(path) => return Ok(None),
            Err(_) if is_link(path) => {
                return refuse(
                    path,
                    "a symbolic link; it must be a regular file (remove the link)",
                );
            }
            // Opening a FIFO for writing without a reader, or a socket.
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                return refuse(path, "not a regular file");
            }
            Err(e) => return Err(io_error(path, "cannot open")(e)),
        };
        let md = file.metadata().map_err(io_error(path, "cannot inspect"))?;
        if !md.is_file() {
            return refuse(path, "not a regular file");
        }
        if md.nlink() != 1 {
            return refuse(
                path,
                format!(
                    "{} hard links; it must have exactly one, so no one else keeps a way to it (remove the other links)",
                    md.nlink()
                ),
            );
        }
        owned_and_private(path, &md, "the file")?;
        if secret == Secret::Yes {
            hide(&file, path, &md, 0o600)?;
        }
        Ok(Some(file))
    }
}

#[cfg(not(unix))]
mod imp {
    use super::*;

    pub(super) fn ensure_dir(_: &Path, _: Secret) -> Result<()> {
        Err(PrivateError::Unsupported)
    }

    pub(super) fn open_file(_: &Path, _: Access, _: Secret) -> Result<Option<File>> {
        Err(PrivateError::Unsupported)
    }
}
