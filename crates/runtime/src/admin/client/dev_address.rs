//! Where `informant dev` says its admin server listens, so that `informant status` with no
//! flags finds it, whichever port it got.
//!
//! `dev` writes `ADDR PID` to `$XDG_RUNTIME_DIR/informant/dev-admin` (an absolute
//! `XDG_RUNTIME_DIR` only), else `$XDG_CACHE_HOME/informant/dev-admin`, else
//! `~/.cache/informant/dev-admin`, and removes it when it stops (if it is still its own: the
//! last `dev` started wins). A reader takes the file only if its directory and it are this
//! user's, writable by no one else and not symbolic links, the address is on loopback (dev's
//! admin is never anywhere else) and the process that wrote it is alive; anything else is
//! ignored, with the reason when the file is unsafe. The client sends no token to an address
//! found here: dev's admin asks for none.

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use informant_state::private::{self, Access, PrivateError, Secret};

/// Largest file read: one address and a pid.
const MAX_BYTES: u64 = 256;

/// The file's name in its directory.
const FILE: &str = "dev-admin";

/// A dev admin address found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevAdmin {
    /// Where dev's admin server listens.
    pub addr: SocketAddr,
    /// The file it was read from.
    pub file: PathBuf,
    /// The `informant dev` process that wrote it.
    pub pid: u32,
}

/// The file's path for this user, if a home or runtime directory is known.
pub fn path() -> Option<PathBuf> {
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let dir = absolute("XDG_RUNTIME_DIR")
        .or_else(|| absolute("XDG_CACHE_HOME"))
        .or_else(|| absolute("HOME").map(|h| h.join(".cache")))?;
    Some(dir.join("informant").join(FILE))
}

/// Removes the file when dropped, if it still holds what this process wrote.
#[derive(Debug)]
pub struct Published {
    file: PathBuf,
    content: String,
}

impl Drop for Published {
    fn drop(&mut self) {
        if std::fs::read_to_string(&self.file).is_ok_and(|c| c == self.content) {
            let _ = std::fs::remove_file(&self.file);
        }
    }
}

/// Writes `addr` and this process's pid to `file` (created 0600 in a 0700 directory, replaced
/// whole by a rename).
pub fn publish(file: &Path, addr: SocketAddr) -> std::io::Result<Published> {
    let dir = file.parent().unwrap_or(Path::new("."));
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| std::io::Error::other(format!("{}: not a file name", file.display())))?;
    let content = format!("{addr} {}\n", std::process::id());
    private::ensure_dir(dir, Secret::No)
        .and_then(|()| private::replace_file(dir, name, content.as_bytes()))
        .map_err(std::io::Error::other)?;
    Ok(Published {
        file: file.to_path_buf(),
        content,
    })
}

/// What [`find`] read.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// No file, or one a stopped `dev` left.
    Nothing,
    /// A live `dev`'s admin.
    Admin(DevAdmin),
    /// A file that is not to be trusted, and why.
    Refused {
        /// The file.
        file: PathBuf,
        /// Why it was not used.
        reason: String,
    },
}

/// The admin address of a running `informant dev` that `file` names.
pub fn find(file: &Path) -> Found {
    let refused = |reason: String| Found::Refused {
        file: file.to_path_buf(),
        reason,
    };
    let text = match read_private(file) {
        Ok(None) => return Found::Nothing,
        Ok(Some(t)) => t,
        Err(e) => return refused(e.to_string()),
    };
    let mut parts = text.split_whitespace();
    let (Some(addr), Some(pid), None) = (parts.next(), parts.next(), parts.next()) else {
        return refused("not `ADDR PID`".into());
    };
    let (Ok(addr), Ok(pid)) = (addr.parse::<SocketAddr>(), pid.parse::<u32>()) else {
        return refused("not `ADDR PID`".into());
    };
    if !addr.ip().is_loopback() {
        return refused(format!(
            "{addr} is not on loopback, where dev's admin always is"
        ));
    }
    if !alive(pid) {
        return Found::Nothing;
    }
    Found::Admin(DevAdmin {
        addr,
        file: file.to_path_buf(),
        pid,
    })
}

/// Why the file could not be read.
#[derive(Debug, thiserror::Error)]
enum ReadError {
    /// It or its directory is not private to this user, or a link.
    #[error(transparent)]
    Private(#[from] PrivateError),
    /// It opened but could not be read as text.
    #[error("`{}`: cannot read: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The file's text, if it and its directory are this user's and writable by no one else, and
/// neither is a link; `Ok(None)` when there is none.
fn read_private(file: &Path) -> Result<Option<String>, ReadError> {
    let dir = file.parent().unwrap_or(Path::new("."));
    if std::fs::symlink_metadata(dir).is_err() {
        return Ok(None);
    }
    // Something is there, so this only checks it (a link, even a dangling one, is refused).
    private::ensure_dir(dir, Secret::No)?;
    let Some(f) = private::open_file(file, Access::Read, Secret::No)? else {
        return Ok(None);
    };
    let mut text = String::new();
    f.take(MAX_BYTES)
        .read_to_string(&mut text)
        .map_err(|source| ReadError::Read {
            path: file.to_path_buf(),
            source,
        })?;
    Ok(Some(text))
}

/// Whether process `pid` exists (a dead `dev` leaves a stale file).
#[cfg(unix)]
fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists; it sends nothing.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(not(unix))]
fn alive(_: u32) -> bool {
    true
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn addr() -> SocketAddr {
        "127.0.0.1:9091".parse().unwrap()
    }

    #[test]
    fn a_published_address_is_found_and_removed_with_its_writer() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("informant").join(FILE);
        let published = publish(&file, addr()).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(file.parent().unwrap()), 0o700);
        assert_eq!(mode(&file), 0o600);
        let Found::Admin(found) = find(&file) else {
            panic!("{:?}", find(&file))
        };
        assert_eq!(found.addr, addr());
        assert_eq!(found.pid, std::process::id());
        drop(published);
        assert_eq!(find(&file), Found::Nothing);
    }

    #[test]
    fn planted_stale_or_odd_files_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("informant");
        std::fs::create_dir(&home).unwrap();
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
        let file = home.join(FILE);
        let write = |text: &str, mode: u32| {
            let _ = std::fs::remove_file(&file);
            std::fs::write(&file, text).unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        let me = std::process::id();
        // Off loopback, garbage, world-writable: refused with a reason.
        for (text, mode) in [
            (format!("10.0.0.1:9091 {me}"), 0o600),
            ("not an address".to_string(), 0o600),
            (format!("127.0.0.1:9091 {me} extra"), 0o600),
            (format!("127.0.0.1:9091 {me}"), 0o666),
        ] {
            write(&text, mode);
            assert!(
                matches!(find(&file), Found::Refused { .. }),
                "{text} {mode:o}"
            );
        }
        // A dead writer: nothing (the pid of a child that has exited).
        let child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        let mut child = child;
        child.wait().unwrap();
        write(&format!("127.0.0.1:9091 {dead}"), 0o600);
        assert_eq!(find(&file), Found::Nothing);
        // A symbolic link, even to a good file.
        let real = dir.path().join("real");
        std::fs::write(&real, format!("127.0.0.1:9091 {me}")).unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
        let _ = std::fs::remove_file(&file);
        std::os::unix::fs::symlink(&real, &file).unwrap();
        assert!(
            matches!(find(&file), Found::Refused { .. }),
            "{:?}",
            find(&file)
        );
        // A group-writable directory.
        std::fs::remove_file(&file).unwrap();
        write(&format!("127.0.0.1:9091 {me}"), 0o600);
        assert!(matches!(find(&file), Found::Admin(_)));
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o770)).unwrap();
        assert!(matches!(find(&file), Found::Refused { .. }));
    }
}
