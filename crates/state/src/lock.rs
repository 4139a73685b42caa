//! The state directory's lock, `DIR/state.lock`: one process at a time, and a second one told
//! who holds it.
//!
//! The lock is an advisory `flock` on the file, held for as long as the [`crate::StateDir`] is
//! open. The kernel releases it when its holder exits, however it exits, so a lock file left by
//! a process that died (a `kill -9`, an OOM kill, a node crash) never blocks a restart: only its
//! text is stale, and the next holder rewrites it. The text says who holds it — pid, host,
//! the host's `--identity` when it has one, since when — and is what a second process reports.
//! `flock` locks belong to an open file, not to a process: a second open in the same process
//! is refused the same way.

use std::fs::{File, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::Path;

use crate::error::{Result, StateError};

/// The lock file's name inside the state directory.
pub const LOCK_FILE_NAME: &str = "state.lock";

/// Who opens the state: written into the lock file for a second process to report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holder {
    /// The host's identity (`--identity`), when it has one.
    pub identity: Option<String>,
}

/// The lock, held until dropped.
#[derive(Debug)]
pub(crate) struct Lock {
    _file: File,
}

impl Lock {
    /// Takes the lock of `dir` (checked private already) for `holder`, or says who has it.
    pub(crate) fn take(dir: &Path, holder: &Holder) -> Result<Lock> {
        let path = dir.join(LOCK_FILE_NAME);
        let mut file = crate::file::create(&path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                // Bounded: a lock file is one line.
                let _ = (&file).take(4096).read_to_string(&mut text);
                let text = text.trim();
                return Err(StateError::InUse {
                    dir: dir.to_path_buf(),
                    holder: if text.is_empty() {
                        "another process (it has not written who it is yet)".into()
                    } else {
                        text.to_string()
                    },
                });
            }
            Err(TryLockError::Error(source)) => {
                return Err(StateError::File {
                    path,
                    action: "lock it",
                    source,
                });
            }
        }
        let text = describe(holder);
        let mut write = || -> std::io::Result<()> {
            file.set_len(0)?;
            file.rewind()?;
            file.write_all(text.as_bytes())?;
            file.flush()
        };
        write().map_err(|source| StateError::File {
            path: path.clone(),
            action: "write who holds it",
            source,
        })?;
        Ok(Lock { _file: file })
    }
}

/// `pid 1234 on host X (identity Y) since 2025-01-01T00:00:00Z`.
fn describe(holder: &Holder) -> String {
    let mut text = format!("pid {} on host {}", std::process::id(), hostname());
    if let Some(identity) = holder.identity.as_deref().filter(|i| !i.is_empty()) {
        text.push_str(&format!(" (identity {identity})"));
    }
    let now = jiff::Timestamp::now();
    let since = jiff::Timestamp::from_second(now.as_second()).unwrap_or(now);
    text.push_str(&format!(" since {since}"));
    // One line, whatever the identity or the host name held.
    let mut line: String = text.chars().filter(|c| !c.is_control()).collect();
    line.push('\n');
    line
}

/// This machine's name (the pod's name in a pod), or `unknown`.
fn hostname() -> String {
    #[cfg(unix)]
    {
        let mut buf = [0u8; 256];
        // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it
        // (or truncates, which the search below tolerates).
        let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
        if rc == 0 {
            let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
            let name = String::from_utf8_lossy(&buf[..end]).into_owned();
            if !name.is_empty() {
                return name;
            }
        }
    }
    "unknown".into()
}
