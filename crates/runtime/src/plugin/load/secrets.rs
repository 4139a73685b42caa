//! Resolving a manifest's `${env:..}` / `${file:..}` config references at load (syntax in
//! [`informant_manifest::config_ref`]).
//!
//! Only operator plugins (top-level, or every plugin when no config file is given) may read the
//! host's environment and files: a tenant's plugin naming a reference is refused, since the
//! host process holds every tenant's secrets and its own. Even an operator plugin's `${file:..}`
//! never reads the host's own state: no path through `/proc`, `/sys` or `/dev`, however links
//! lead there, and no file on a pseudo-filesystem (see `read`). Values are never logged: every
//! message names the reference and the field, never what it resolved to.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use crate::manifest::{ConfigRef, Manifest, UnresolvedConfig};

/// Largest file a `${file:..}` reference may name: secrets are small; anything larger is a
/// mistake (or a device) and is refused rather than handed to `init`.
pub(crate) const MAX_SECRET_FILE_BYTES: u64 = 64 << 10;

/// Why a config reference has no value; names the reference, never a value.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SecretError {
    /// A tenant's plugin named a reference: only operator plugins may.
    #[error(
        "`{reference}`: tenant `{tenant}`'s plugins may not read the host's environment or files; only operator plugins may"
    )]
    NotForTenants {
        /// The reference as written.
        reference: String,
        /// The plugin's tenant.
        tenant: String,
    },
    /// `${env:..}` names a variable that is not set.
    #[error("`{reference}`: the environment variable is not set")]
    EnvNotSet {
        /// The reference as written.
        reference: String,
    },
    /// `${env:..}` names a variable that is not UTF-8.
    #[error("`{reference}`: the environment variable is not UTF-8")]
    EnvNotUtf8 {
        /// The reference as written.
        reference: String,
    },
    /// `${file:..}` names a file that may not or cannot be read.
    #[error("`{reference}`: {source}")]
    File {
        /// The reference as written.
        reference: String,
        /// Why.
        #[source]
        source: FileError,
    },
}

/// Why a `${file:..}` reference's file is not read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FileError {
    /// A relative path: relative to what the host's working directory happens to be.
    #[error("the path must be absolute")]
    NotAbsolute,
    /// The path, as written or as its links lead, passes through one of [`REFUSED_ROOTS`].
    #[error(
        "{}a path under {root} is refused (it holds the host's processes, kernel or devices, not secrets)",
        .via.as_ref().map(|v| format!("it leads through `{}`: ", v.display())).unwrap_or_default()
    )]
    RefusedRoot {
        /// Where a link led, when that is not where the path itself goes.
        via: Option<PathBuf>,
        /// The refused root.
        root: &'static str,
    },
    /// A step of the path or the file could not be opened.
    #[error("cannot open: {0}")]
    Open(#[source] std::io::Error),
    /// More links than the kernel would follow.
    #[error("cannot open: more than {MAX_LINKS} links")]
    TooManyLinks,
    /// The opened file's metadata could not be read.
    #[error("cannot stat: {0}")]
    Stat(#[source] std::io::Error),
    /// Refused where the path led to, which is not where it was written to go.
    #[error("it leads to `{}`: {reason}", .resolved.display())]
    Leads {
        /// The file the path resolved to.
        resolved: PathBuf,
        /// Why it is refused.
        #[source]
        reason: Box<FileError>,
    },
    /// A FIFO, device, directory or socket.
    #[error("not a regular file")]
    NotRegular,
    /// `fstatfs` failed.
    #[error("cannot tell its filesystem: {0}")]
    Statfs(#[source] std::io::Error),
    /// On a pseudo-filesystem (see [`pseudo_filesystem`]).
    #[error("it is on a {0} filesystem, which holds the host's state, not files")]
    Pseudo(&'static str),
    /// Reading failed.
    #[error("cannot read: {0}")]
    Read(#[source] std::io::Error),
    /// Larger than [`MAX_SECRET_FILE_BYTES`].
    #[error("the file holds {0} bytes; at most {MAX_SECRET_FILE_BYTES} are read")]
    TooBig(u64),
    /// Not UTF-8 text.
    #[error("the file is not UTF-8 text")]
    NotUtf8,
}

/// `manifest`'s config as JSON for `init`, references resolved; the error names the field of
/// the first one that cannot be, or of any at all for a tenant's plugin.
pub(crate) fn resolve_config(
    manifest: &Manifest,
    tenant: &str,
) -> Result<String, UnresolvedConfig<SecretError>> {
    manifest.config_json_resolved(|r| {
        if !tenant.is_empty() {
            return Err(SecretError::NotForTenants {
                reference: r.to_string(),
                tenant: tenant.to_string(),
            });
        }
        resolve(r)
    })
}

/// One reference's value.
fn resolve(r: &ConfigRef) -> Result<String, SecretError> {
    let reference = r.to_string();
    match r {
        ConfigRef::Env(name) => std::env::var(name).map_err(|e| match e {
            std::env::VarError::NotPresent => SecretError::EnvNotSet { reference },
            std::env::VarError::NotUnicode(_) => SecretError::EnvNotUtf8 { reference },
        }),
        ConfigRef::File(path) => read(path)
            .map(|text| {
                let text = text.strip_suffix('\n').unwrap_or(&text);
                text.strip_suffix('\r').unwrap_or(text).to_string()
            })
            .map_err(|source| SecretError::File { reference, source }),
    }
}

/// A secret file's text. Links are followed (a mounted Kubernetes Secret is a chain of them),
/// but no path through `/proc`, `/sys` or `/dev` is, and the file opened must be a regular file
/// on a filesystem that stores files (see [`pseudo_filesystem`]), read bounded, so a FIFO, a
/// device, a huge file or the host's own state (`/proc/self/environ`, every secret the host
/// holds) cannot hang the loader or reach a plugin.
///
/// The path is checked as it is resolved, link by link; the file is then opened without
/// following a last link, and the filesystem and type checked on the descriptor opened, so a
/// link swapped in after the check opens nothing or is refused by the descriptor's checks.
fn read(path: &Path) -> Result<String, FileError> {
    let resolved = resolve_links(path)?;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY,
    );
    let mut file = options.open(&resolved).map_err(FileError::Open)?;
    let meta = file.metadata().map_err(FileError::Stat)?;
    if !meta.is_file() {
        return Err(leads(path, &resolved, FileError::NotRegular));
    }
    check_filesystem(&file).map_err(|why| leads(path, &resolved, why))?;
    let bytes = crate::files::read_capped(&mut file, &meta, MAX_SECRET_FILE_BYTES)
        .map_err(FileError::Read)?
        .map_err(FileError::TooBig)?;
    String::from_utf8(bytes).map_err(|_| FileError::NotUtf8)
}

/// Where a secret file may never be read from, however it is reached: the host's processes
/// (their environment, memory, open files and root directories), its kernel state and devices.
pub(crate) const REFUSED_ROOTS: [&str; 3] = ["/proc", "/sys", "/dev"];

/// Links followed while resolving one path before giving up (the kernel's own limit).
const MAX_LINKS: usize = 40;

/// `reason`, naming where `path` led when that is somewhere else.
fn leads(path: &Path, resolved: &Path, reason: FileError) -> FileError {
    if path == resolved {
        reason
    } else {
        FileError::Leads {
            resolved: resolved.to_path_buf(),
            reason: Box::new(reason),
        }
    }
}

/// `path` with every link resolved, like `canonicalize`, refusing it as soon as any path it
/// passes through — as written, or as a link leads — is under one of [`REFUSED_ROOTS`]:
/// `/proc/self/root/etc/hostname` is refused although it ends outside `/proc`.
fn resolve_links(path: &Path) -> Result<PathBuf, FileError> {
    use std::path::Component;
    /// What is left to walk, one step at a time.
    enum Step {
        Root,
        Up,
        Into(std::ffi::OsString),
    }
    let steps = |p: &Path| -> Vec<Step> {
        p.components()
            .filter_map(|c| match c {
                Component::RootDir | Component::Prefix(_) => Some(Step::Root),
                Component::ParentDir => Some(Step::Up),
                Component::Normal(name) => Some(Step::Into(name.to_os_string())),
                Component::CurDir => None,
            })
            .collect()
    };
    if !path.is_absolute() {
        return Err(FileError::NotAbsolute);
    }
    let mut pending: VecDeque<Step> = steps(path).into();
    let mut resolved = PathBuf::from("/");
    let mut links = 0;
    while let Some(step) = pending.pop_front() {
        let name = match step {
            Step::Root => {
                resolved = PathBuf::from("/");
                continue;
            }
            Step::Up => {
                resolved.pop();
                continue;
            }
            Step::Into(name) => name,
        };
        let next = resolved.join(name);
        if let Some(root) = REFUSED_ROOTS.iter().find(|r| next.starts_with(r)) {
            let via = (!path.starts_with(&next)).then(|| next.clone());
            return Err(FileError::RefusedRoot { via, root });
        }
        let meta = std::fs::symlink_metadata(&next).map_err(FileError::Open)?;
        if meta.is_symlink() {
            links += 1;
            if links > MAX_LINKS {
                return Err(FileError::TooManyLinks);
            }
            let target = std::fs::read_link(&next).map_err(FileError::Open)?;
            for step in steps(&target).into_iter().rev() {
                pending.push_front(step);
            }
        } else {
            resolved = next;
        }
    }
    Ok(resolved)
}

/// Refuses a file on a pseudo-filesystem, checked on the descriptor opened.
#[cfg(target_os = "linux")]
fn check_filesystem(file: &std::fs::File) -> Result<(), FileError> {
    use std::os::fd::AsRawFd;
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: a valid open descriptor and a buffer of the right type for fstatfs to fill.
    if unsafe { libc::fstatfs(file.as_raw_fd(), st.as_mut_ptr()) } != 0 {
        return Err(FileError::Statfs(std::io::Error::last_os_error()));
    }
    // SAFETY: fstatfs succeeded, so it filled the buffer.
    let magic = unsafe { st.assume_init() }.f_type as u64 & 0xffff_ffff;
    match pseudo_filesystem(magic) {
        Some(name) => Err(FileError::Pseudo(name)),
        None => Ok(()),
    }
}

#[cfg(not(target_os = "linux"))]
fn check_filesystem(_: &std::fs::File) -> Result<(), FileError> {
    Ok(())
}

/// The name of the pseudo-filesystem whose `statfs` magic number is `magic` (Linux's
/// `linux/magic.h`), if it is one: each describes or drives the kernel, its processes or its
/// devices. Filesystems that store files — tmpfs (where Kubernetes mounts Secrets), overlay,
/// ext4, xfs, NFS and the rest — are not listed. devtmpfs reports tmpfs's number; `/dev` is
/// refused by path, and its devices are not regular files.
pub(crate) fn pseudo_filesystem(magic: u64) -> Option<&'static str> {
    Some(match magic {
        0x9fa0 => "proc",
        0x6265_6572 => "sysfs",
        0x1cd1 => "devpts",
        0x0027_e0eb => "cgroup",
        0x6367_7270 => "cgroup2",
        0x6462_6720 => "debugfs",
        0x7472_6163 => "tracefs",
        0x7363_6673 => "securityfs",
        0xcafe_4a11 => "bpf",
        0x6265_6570 => "configfs",
        0x6165_676c => "pstore",
        0xde5e_81e4 => "efivarfs",
        0x6573_5543 => "fusectl",
        0x4249_4e4d => "binfmt_misc",
        0xf97c_ff8c => "selinuxfs",
        0x4341_5d53 => "smackfs",
        0x6e73_6673 => "nsfs",
        0x1980_0202 => "mqueue",
        0x0904_1934 => "anon_inode",
        0x5049_5045 => "pipefs",
        0x534f_434b => "sockfs",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(config: &str) -> Manifest {
        Manifest::parse(
            &format!("[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n[config]\n{config}\n"),
            Path::new("p.toml"),
        )
        .unwrap()
    }

    #[test]
    fn files_are_read_trimmed_and_bounded_and_errors_never_carry_values() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("slack");
        std::fs::write(&secret, "https://hooks.example/s3cr3t\n").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        let m = manifest(&format!(
            "a = \"${{file:{}}}\"\nb = \"${{file:{}}}\"",
            secret.display(),
            link.display()
        ));
        let v: serde_json::Value = serde_json::from_str(&resolve_config(&m, "").unwrap()).unwrap();
        assert_eq!(v["a"], "https://hooks.example/s3cr3t");
        assert_eq!(v["b"], "https://hooks.example/s3cr3t", "links are followed");

        let e = resolve_config(&m, "team-a").unwrap_err();
        let (field, why) = (e.field, e.reason.to_string());
        assert_eq!(field, "config.a");
        assert!(
            why.contains("tenant `team-a`'s plugins may not read"),
            "{why}"
        );
        assert!(!why.contains("s3cr3t"));

        let huge = dir.path().join("huge");
        std::fs::File::create(&huge)
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates a file.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for (path, reason) in [
            (huge.as_path(), "holds 1099511627776 bytes; at most 65536"),
            (fifo.as_path(), "not a regular file"),
            (dir.path(), "not a regular file"),
            (Path::new("/nonexistent/secret"), "cannot open"),
        ] {
            let m = manifest(&format!("s = \"${{file:{}}}\"", path.display()));
            let e = resolve_config(&m, "").unwrap_err();
            let (field, why) = (e.field, e.reason.to_string());
            assert_eq!(field, "config.s");
            assert!(why.contains(reason) && why.contains("${file:"), "{why}");
        }
        let m = manifest("s = \"${env:INFORMANT_TEST_SURELY_UNSET_VARIABLE}\"");
        let e = resolve_config(&m, "").unwrap_err();
        let (_, why) = (e.field, e.reason.to_string());
        assert_eq!(
            why,
            "`${env:INFORMANT_TEST_SURELY_UNSET_VARIABLE}`: the environment variable is not set"
        );
    }

    /// The host's own state is refused however a reference reaches it: directly, through
    /// `/proc/self/root`, or through links (absolute, relative, chained) in an ordinary
    /// directory. Each error names the field, the reference and why, never a value.
    #[test]
    fn the_hosts_processes_kernel_and_devices_are_refused_however_reached() {
        let dir = tempfile::tempdir().unwrap();
        let link = |name: &str, target: &str| {
            let path = dir.path().join(name);
            std::os::unix::fs::symlink(target, &path).unwrap();
            path.display().to_string()
        };
        let to_environ = link("environ", "/proc/self/environ");
        let depth = dir.path().components().count();
        let relative = link(
            "relative",
            &format!("{}proc/self/environ", "../".repeat(depth)),
        );
        let chained = link("chained", &to_environ);
        let to_null = link("null", "/dev/null");
        let to_root = link("root", "/proc/self/root/etc/hostname");
        let to_sys = link("sys", "/sys/kernel");
        let via_dir = link("proc-dir", "/proc/self");
        let through = format!("{via_dir}/environ");
        let under = |root: &str| format!("a path under {root} is refused");
        let leads = "it leads through `/proc`";
        for (path, reasons) in [
            ("/proc/self/environ", vec![under("/proc")]),
            ("/proc/self/root/etc/hostname", vec![under("/proc")]),
            ("/proc/1/environ", vec![under("/proc")]),
            ("/dev/null", vec![under("/dev")]),
            ("/dev/zero", vec![under("/dev")]),
            (
                "/sys/kernel/mm/transparent_hugepage/enabled",
                vec![under("/sys")],
            ),
            (&to_environ, vec![under("/proc"), leads.into()]),
            (&relative, vec![under("/proc"), leads.into()]),
            (&chained, vec![under("/proc"), leads.into()]),
            (&through, vec![under("/proc"), leads.into()]),
            (&to_root, vec![under("/proc"), leads.into()]),
            (
                &to_null,
                vec![under("/dev"), "it leads through `/dev`".into()],
            ),
            (
                &to_sys,
                vec![under("/sys"), "it leads through `/sys`".into()],
            ),
        ] {
            let m = manifest(&format!("[config.s]\nk = \"${{file:{path}}}\""));
            let e = resolve_config(&m, "").unwrap_err();
            let (field, why) = (e.field, e.reason.to_string());
            assert_eq!(field, "config.s.k", "{path}");
            assert!(why.starts_with(&format!("`${{file:{path}}}`: ")), "{why}");
            for r in reasons {
                assert!(why.contains(&r), "{path}: `{why}` lacks `{r}`");
            }
            if let Ok(p) = std::env::var("PATH") {
                assert!(!why.contains(&p), "{why}");
            }
        }
        // `..` never gets this far: the reference is refused where the manifest is parsed.
        let err = Manifest::parse(
            "[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\n[config]\ns = \"${file:/etc/../proc/self/environ}\"\n",
            Path::new("p.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("config.s") && err.contains("must not contain `..`"),
            "{err}"
        );
    }

    /// The descriptor's own check, which a link swapped in after the path was checked cannot
    /// get past: procfs (and the rest) are refused by filesystem, tmpfs and disks are not.
    #[test]
    fn files_on_pseudo_filesystems_are_refused_by_the_descriptor_opened() {
        let environ = std::fs::File::open("/proc/self/environ").unwrap();
        let why = check_filesystem(&environ).unwrap_err().to_string();
        assert!(why.contains("on a proc filesystem"), "{why}");
        if let Ok(cgroup) = std::fs::File::open("/sys/fs/cgroup/cgroup.controllers") {
            let why = check_filesystem(&cgroup).unwrap_err().to_string();
            assert!(why.contains("cgroup2 filesystem"), "{why}");
        }
        let ordinary = tempfile::NamedTempFile::new().unwrap();
        check_filesystem(ordinary.as_file()).unwrap();
        assert_eq!(pseudo_filesystem(0x0102_1994), None, "tmpfs holds Secrets");
        assert_eq!(pseudo_filesystem(0x6265_6572), Some("sysfs"));
    }
}
