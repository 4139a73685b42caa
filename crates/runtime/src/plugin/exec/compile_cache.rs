//! The on-disk cache of compiled components, and why its entries can be trusted.
//!
//! An entry is native code that the host maps executable and runs outside the sandbox, so
//! whoever can write one owns the host. Hence:
//!
//! - The directory is created 0700 and, before use, must be a real directory (not a symbolic
//!   link) owned by the effective uid and writable by no one else (`mode & 0o022 == 0`); so must
//!   the `informant` directory above the default location. A directory that fails is not used:
//!   one warning names the path and the reason, and every plugin load compiles.
//! - An entry is opened with `O_NOFOLLOW` and checked on the open descriptor (a regular file,
//!   owned by the effective uid, one link, writable by no one else, at most
//!   [`MAX_ENTRY_BYTES`]), then read from that same descriptor: what is checked is what is
//!   deserialized. An entry that fails is ignored with a warning, recompiled and replaced.
//! - An entry is written into a fresh temp file (`O_EXCL`, random name, 0600) in the directory,
//!   synced and renamed into place: no one can predict or pre-create the temp file, and a
//!   reader never sees half an artifact.
//!
//! These checks are the state directory's too: both call `informant_state::private`.
//!
//! The directories are checked once, when the engine starts. Someone who may write the
//! directory *above* a checked one could later swap it for their own, where they could rename
//! this user's artifacts (they cannot write one the entry checks accept); the default location's
//! `informant` directory is checked for exactly that reason, and the engine's entries start
//! with the sha256 of the wasm they were compiled from, so a renamed artifact is refused rather
//! than run as another component.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use informant_state::private::{self, Access, PrivateError, Secret};

/// Largest entry read back; the biggest real artifacts are a few tens of MiB.
pub(crate) const MAX_ENTRY_BYTES: u64 = 512 << 20;

/// Where compiled components are cached on disk.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CompileCache {
    /// The per-user default: `$XDG_CACHE_HOME/informant/components` (an absolute
    /// `XDG_CACHE_HOME` only), else `$HOME/.cache/informant/components`.
    #[default]
    Default,
    /// This directory (created 0700 if missing).
    Dir(PathBuf),
    /// No disk cache: every load compiles (for read-only filesystems).
    Off,
}

/// Errors of the compile cache; each names the path and the reason.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Neither `$XDG_CACHE_HOME` nor `$HOME` gives an absolute path for the default location.
    #[error(
        "no default compile cache directory: $XDG_CACHE_HOME and $HOME are unset, empty or not absolute paths"
    )]
    NoDefault,
    /// A directory or entry could not be created, inspected, read or written.
    #[error("compile cache `{}`: {what}: {source}", path.display())]
    Io {
        /// The directory or entry.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A directory or entry is not safe to load native code from.
    #[error("compile cache `{}`: refused: {reason}", path.display())]
    Unsafe {
        /// The directory or entry.
        path: PathBuf,
        /// Which check failed, with what was found.
        reason: String,
    },
    /// The checks need Unix file ownership and modes.
    #[error("compile cache: not supported on this platform (its checks need Unix permissions)")]
    Unsupported,
}

/// Result alias for this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn io_error(path: &Path, what: &'static str) -> impl FnOnce(io::Error) -> Error {
    let path = path.to_path_buf();
    move |source| Error::Io { path, what, source }
}

/// The default `informant` directory: under an absolute `XDG_CACHE_HOME` (relative values are
/// invalid per the XDG Base Directory spec and ignored), else under an absolute `$HOME/.cache`.
pub(crate) fn default_parent(
    xdg_cache_home: Option<OsString>,
    home: Option<OsString>,
) -> Option<PathBuf> {
    let absolute = |v: Option<OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    absolute(xdg_cache_home)
        .or_else(|| absolute(home).map(|h| h.join(".cache")))
        .map(|base| base.join("informant"))
}

/// A compile cache directory that passed its checks.
#[derive(Debug)]
pub(crate) struct CacheDir {
    dir: PathBuf,
}

impl CacheDir {
    /// Creates (0700, with any missing parents) and checks the directory `choice` names;
    /// `Ok(None)` when the cache is off.
    pub(crate) fn open(choice: &CompileCache) -> Result<Option<CacheDir>> {
        match choice {
            CompileCache::Off => Ok(None),
            CompileCache::Dir(dir) => Self::checked(&[dir]).map(Some),
            CompileCache::Default => {
                let parent =
                    default_parent(std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME"))
                        .ok_or(Error::NoDefault)?;
                Self::checked(&[&parent, &parent.join("components")]).map(Some)
            }
        }
    }

    /// Each of `dirs` (outermost first) is created if missing and checked before the next.
    fn checked(dirs: &[&Path]) -> Result<CacheDir> {
        for dir in dirs {
            imp::ensure_private_dir(dir)?;
        }
        Ok(CacheDir {
            dir: dirs.last().expect("a directory").to_path_buf(),
        })
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }

    /// The bytes of entry `name`, if there is one and it passes its checks.
    pub(crate) fn read(&self, name: &str) -> Result<Option<Vec<u8>>> {
        imp::read_entry(&self.dir.join(name))
    }

    /// Replaces entry `name` with `bytes`, atomically.
    pub(crate) fn write(&self, name: &str, bytes: &[u8]) -> Result<()> {
        // A crash before the rename leaves no entry; rename replaces whatever was at the name
        // (a refused link too), never follows it.
        private::replace_file(&self.dir, name, bytes).map_err(Error::from)
    }
}

/// The checks are the state directory's (`informant_state::private`): one implementation of
/// "this user's alone" for both.
impl From<PrivateError> for Error {
    fn from(e: PrivateError) -> Self {
        match e {
            PrivateError::Io { path, what, source } => Error::Io { path, what, source },
            PrivateError::Unsafe { path, reason } => Error::Unsafe { path, reason },
            PrivateError::Unsupported => Error::Unsupported,
        }
    }
}

mod imp {
    use std::io::Read;

    use super::*;

    pub(super) fn ensure_private_dir(dir: &Path) -> Result<()> {
        Ok(private::ensure_dir(dir, Secret::No)?)
    }

    pub(super) fn read_entry(path: &Path) -> Result<Option<Vec<u8>>> {
        let Some(file) = private::open_file(path, Access::Read, Secret::No)? else {
            return Ok(None);
        };
        let len = file
            .metadata()
            .map_err(io_error(path, "cannot inspect"))?
            .len();
        if len > MAX_ENTRY_BYTES {
            return Err(Error::Unsafe {
                path: path.to_path_buf(),
                reason: format!("{len} bytes, over the {MAX_ENTRY_BYTES}-byte limit"),
            });
        }
        let mut bytes = Vec::with_capacity(len as usize);
        file.take(MAX_ENTRY_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io_error(path, "cannot read"))?;
        if bytes.len() as u64 > MAX_ENTRY_BYTES {
            return Err(Error::Unsafe {
                path: path.to_path_buf(),
                reason: "grew over the size limit while being read".into(),
            });
        }
        Ok(Some(bytes))
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::fs;
    use std::os::unix::fs::{PermissionsExt, symlink};

    use super::*;

    fn chmod(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::MetadataExt;
        fs::symlink_metadata(path).unwrap().mode() & 0o7777
    }

    fn refusal(result: Result<Option<CacheDir>>) -> (PathBuf, String) {
        match result {
            Err(Error::Unsafe { path, reason }) => (path, reason),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn the_default_follows_xdg_and_ignores_relative_paths() {
        let some = |s: &str| Some(OsString::from(s));
        assert_eq!(
            default_parent(some("/x/cache"), some("/home/u")),
            Some(PathBuf::from("/x/cache/informant"))
        );
        assert_eq!(
            default_parent(some("relative/cache"), some("/home/u")),
            Some(PathBuf::from("/home/u/.cache/informant"))
        );
        assert_eq!(
            default_parent(some(""), some("/home/u")),
            Some(PathBuf::from("/home/u/.cache/informant"))
        );
        assert_eq!(default_parent(None, some("")), None);
        assert_eq!(default_parent(None, some("home")), None);
        assert_eq!(default_parent(None, None), None);
    }

    #[test]
    fn creates_missing_directories_0700() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b/components");
        let cache = CacheDir::open(&CompileCache::Dir(dir.clone()))
            .unwrap()
            .unwrap();
        assert_eq!(cache.path(), dir);
        for d in [tmp.path().join("a"), tmp.path().join("a/b"), dir] {
            assert_eq!(mode(&d), 0o700, "{}", d.display());
        }
    }

    #[test]
    fn refuses_a_directory_others_may_write() {
        let tmp = tempfile::tempdir().unwrap();
        for bad in [0o777, 0o775, 0o757, 0o1777] {
            let dir = tmp.path().join(format!("{bad:o}"));
            fs::create_dir(&dir).unwrap();
            chmod(&dir, bad);
            let (path, reason) = refusal(CacheDir::open(&CompileCache::Dir(dir.clone())));
            assert_eq!(path, dir);
            assert!(
                reason.contains(&format!("writable by its group or others (mode {bad:04o})")),
                "{reason}"
            );
            // Refusing never repairs: the directory is left as it was found.
            assert_eq!(mode(&dir), bad);
        }
        // Readable by others is fine: the artifacts are no secret; writing them is what matters.
        let dir = tmp.path().join("755");
        fs::create_dir(&dir).unwrap();
        chmod(&dir, 0o755);
        assert!(CacheDir::open(&CompileCache::Dir(dir)).unwrap().is_some());
    }

    #[test]
    fn refuses_a_symlinked_directory_and_a_file() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        fs::create_dir(&real).unwrap();
        chmod(&real, 0o700);
        let link = tmp.path().join("link");
        symlink(&real, &link).unwrap();
        let (path, reason) = refusal(CacheDir::open(&CompileCache::Dir(link.clone())));
        assert_eq!(path, link);
        assert!(reason.contains("symbolic link"), "{reason}");

        let dangling = tmp.path().join("dangling");
        symlink(tmp.path().join("nowhere"), &dangling).unwrap();
        let (_, reason) = refusal(CacheDir::open(&CompileCache::Dir(dangling)));
        assert!(reason.contains("symbolic link"), "{reason}");
        assert!(!tmp.path().join("nowhere").exists());

        let file = tmp.path().join("file");
        fs::write(&file, b"").unwrap();
        let (_, reason) = refusal(CacheDir::open(&CompileCache::Dir(file)));
        assert_eq!(reason, "not a directory");
    }

    /// Owner checks need a second uid, which only root can give a file.
    #[test]
    fn refuses_a_directory_or_entry_owned_by_another_user() {
        // SAFETY: no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("not root: cannot chown to another uid; owner checks untested here");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("theirs");
        fs::create_dir(&dir).unwrap();
        chmod(&dir, 0o700);
        std::os::unix::fs::chown(&dir, Some(65534), None).unwrap();
        let (path, reason) = refusal(CacheDir::open(&CompileCache::Dir(dir.clone())));
        assert_eq!(path, dir);
        assert!(
            reason.contains("owned by uid 65534, not by this process's effective uid 0"),
            "{reason}"
        );

        let cache = CacheDir::open(&CompileCache::Dir(tmp.path().join("ours")))
            .unwrap()
            .unwrap();
        cache.write("e.cwasm", b"artifact").unwrap();
        std::os::unix::fs::chown(cache.path().join("e.cwasm"), Some(65534), None).unwrap();
        let err = cache.read("e.cwasm").unwrap_err().to_string();
        assert!(err.contains("owned by uid 65534"), "{err}");
    }

    #[test]
    fn the_default_location_checks_its_informant_parent() {
        // The default reads the environment; its checks are those of `checked`, given here the
        // two directories the default would use.
        let tmp = tempfile::tempdir().unwrap();
        let parent = tmp.path().join("informant");
        fs::create_dir(&parent).unwrap();
        chmod(&parent, 0o777);
        let err = CacheDir::checked(&[&parent, &parent.join("components")]).unwrap_err();
        assert!(
            matches!(&err, Error::Unsafe { path, .. } if *path == parent),
            "{err}"
        );
        assert!(!parent.join("components").exists());
    }

    #[test]
    fn entries_round_trip_through_a_temp_file_that_does_not_stay() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = CacheDir::open(&CompileCache::Dir(tmp.path().join("c")))
            .unwrap()
            .unwrap();
        assert_eq!(cache.read("e.cwasm").unwrap(), None);
        cache.write("e.cwasm", b"one").unwrap();
        cache.write("e.cwasm", b"two").unwrap();
        assert_eq!(cache.read("e.cwasm").unwrap().as_deref(), Some(&b"two"[..]));
        assert_eq!(mode(&cache.path().join("e.cwasm")), 0o600);
        let names: Vec<_> = fs::read_dir(cache.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["e.cwasm"]);
    }

    #[test]
    fn refuses_entries_that_are_links_shared_writable_or_not_files() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = CacheDir::open(&CompileCache::Dir(tmp.path().join("c")))
            .unwrap()
            .unwrap();
        let entry = |n: &str| cache.path().join(n);
        cache.write("real.cwasm", b"artifact").unwrap();

        symlink(entry("real.cwasm"), entry("sym.cwasm")).unwrap();
        fs::hard_link(entry("real.cwasm"), entry("hard.cwasm")).unwrap();
        cache.write("shared.cwasm", b"artifact").unwrap();
        chmod(&entry("shared.cwasm"), 0o620);
        fs::create_dir(entry("dir.cwasm")).unwrap();
        let fifo =
            std::ffi::CString::new(entry("fifo.cwasm").into_os_string().into_encoded_bytes())
                .unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);

        for (name, want) in [
            ("sym.cwasm", "a symbolic link"),
            ("hard.cwasm", "2 hard links"),
            ("real.cwasm", "2 hard links"),
            (
                "shared.cwasm",
                "writable by its group or others (mode 0620)",
            ),
            ("dir.cwasm", "not a regular file"),
            ("fifo.cwasm", "not a regular file"),
        ] {
            match cache.read(name) {
                Err(Error::Unsafe { path, reason }) => {
                    assert_eq!(path, entry(name));
                    assert!(reason.contains(want), "{name}: {reason}");
                }
                other => panic!("{name}: expected a refusal, got {other:?}"),
            }
        }

        // Writing replaces the link itself, never what it points at.
        cache.write("sym.cwasm", b"fresh").unwrap();
        assert_eq!(
            cache.read("sym.cwasm").unwrap().as_deref(),
            Some(&b"fresh"[..])
        );
        assert_eq!(fs::read(entry("hard.cwasm")).unwrap(), b"artifact");
    }
}
