//! The seal a clean close leaves beside the state file: its length and the CRC-32 of every byte,
//! in `state.redb.seal`.
//!
//! redb verifies page checksums only when asked to (its integrity check, which reads and
//! verifies every page, rebuilds the allocator state and commits: most of a restart's open) or
//! after a crash; a plain open trusts the file. A file that still matches its seal is byte for
//! byte what redb left when it closed it, so the open can trust it without the check: reading
//! and summing the file costs a tenth of it. Anything else — no seal (a crash, a `kill -9`, a
//! file copied in), a seal that does not match (bytes changed since, a truncated copy) — opens
//! with the integrity check, which refuses a damaged file. The seal is taken (removed) at every
//! open, before redb writes a byte, so a seal on disk always describes a closed file.
//!
//! The seal is read and the file summed without following links, and a new seal is written
//! through a temp file no one can predict, renamed into place (see [`crate::private`]).

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::private::{self, Access, Secret};

/// The seal's file name, beside the state file.
pub(crate) const SEAL_FILE_NAME: &str = "state.redb.seal";

/// The seal's file, beside the state file.
fn seal_path(path: &Path) -> PathBuf {
    path.with_file_name(SEAL_FILE_NAME)
}

/// What a clean close recorded about the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seal {
    len: u64,
    crc: u32,
}

impl Seal {
    /// Reads every byte of the file at `path`.
    fn of(path: &Path) -> io::Result<Seal> {
        let mut file = private::open_file(path, Access::Read, Secret::No)
            .map_err(io::Error::other)?
            .ok_or(io::ErrorKind::NotFound)?;
        let mut hasher = crc32fast::Hasher::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut len = 0u64;
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            hasher.update(&buf[..n]);
            len += n as u64;
        }
        Ok(Seal {
            len,
            crc: hasher.finalize(),
        })
    }

    /// Removes the seal of the file at `path` and returns it, if there was a readable one.
    pub(crate) fn take(path: &Path) -> Option<Seal> {
        let at = seal_path(path);
        // A seal that is not a private file is no seal (the open refused such names already).
        let text = private::open_file(&at, Access::Read, Secret::No)
            .ok()
            .flatten()
            .and_then(|f| {
                let mut text = String::new();
                f.take(64).read_to_string(&mut text).ok().map(|_| text)
            });
        // Gone before redb opens the file, so a crash from here on leaves no seal to trust.
        if let Err(e) = std::fs::remove_file(&at)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::debug!(path = %at.display(), error = %e, "cannot remove the state file's seal");
        }
        let text = text?;
        let (len, crc) = text.trim().split_once(' ')?;
        Some(Seal {
            len: len.parse().ok()?,
            crc: u32::from_str_radix(crc, 16).ok()?,
        })
    }

    /// Whether the file at `path` is still exactly what was sealed.
    pub(crate) fn matches(&self, path: &Path) -> bool {
        let unchanged = std::fs::metadata(path).is_ok_and(|m| m.len() == self.len);
        unchanged && Seal::of(path).is_ok_and(|now| now == *self)
    }

    /// Seals the file at `path`, which redb has closed. A seal that cannot be written only
    /// makes the next open check the file.
    pub(crate) fn write(path: &Path) {
        let write = || -> io::Result<()> {
            let seal = Seal::of(path)?;
            let dir = path.parent().unwrap_or(Path::new("."));
            let text = format!("{} {:08x}\n", seal.len, seal.crc);
            private::replace_file(dir, SEAL_FILE_NAME, text.as_bytes()).map_err(io::Error::other)
        };
        if let Err(e) = write() {
            tracing::debug!(path = %path.display(), error = %e, "cannot seal the state file; the next open checks it");
        }
    }
}
