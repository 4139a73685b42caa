//! Scanning the plugins directory: `NAME.wasm` + `NAME.toml` pairs at the top level and in
//! tenants' subdirectories, read once, bounded, through the descriptor the checks were made on.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::files::{hard_links, open_nonblocking, owner, owners, read_capped, same_file};
use crate::plugin::PluginError;
use crate::plugin::exec::engine::hex;
use crate::plugin::id::PluginId;
use crate::plugin::load::host_config::HostConfig;

/// A plugin found on disk, with the bytes read (and checked) during the scan: the load uses
/// these, never the files again, so what was checked is what runs.
#[derive(Debug, Clone)]
pub(super) struct Found {
    pub(super) wasm: PathBuf,
    pub(super) manifest: PathBuf,
    pub(super) wasm_bytes: Arc<[u8]>,
    pub(super) manifest_bytes: Arc<[u8]>,
    pub(super) fingerprint: String,
}

pub(super) type Scan = BTreeMap<PluginId, Result<Found, PluginError>>;

/// Finds `NAME.wasm` + `NAME.toml` pairs at the top level and one level down (tenants).
///
/// Links are followed only when they stay in the directory holding them: a tenant's link to
/// another tenant's plugin, a tenant directory that is itself a link, or an operator link into
/// a tenant's directory would run someone's code under someone else's grant, so each is
/// refused with an error naming the link. Hard links: see [`read_within`].
pub(super) fn scan(dir: &Path, config: &HostConfig) -> Result<Scan, PluginError> {
    let mut out = Scan::new();
    let unreadable = |e: std::io::Error| PluginError::Load {
        plugin: "*".into(),
        path: dir.to_path_buf(),
        reason: format!("cannot read the plugins directory: {e}"),
    };
    let root = dir.canonicalize().map_err(unreadable)?;
    let entries: Vec<std::fs::DirEntry> = std::fs::read_dir(dir)
        .map_err(unreadable)?
        .flatten()
        .collect();
    // Who owns the top level and each tenant's directory, for hard links (see `read_within`).
    let owned_by = |p: &Path| std::fs::metadata(p).ok().and_then(|m| owner(&m));
    let mut owners: HashMap<u32, Vec<String>> = HashMap::new();
    let mut tenants = Vec::new();
    if let Some(uid) = owned_by(&root) {
        owners.entry(uid).or_default().push(String::new());
    }
    for entry in &entries {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            let tenant = entry.file_name().to_string_lossy().into_owned();
            if let Some(uid) = owned_by(&entry.path()) {
                owners.entry(uid).or_default().push(tenant.clone());
            }
            tenants.push(tenant);
        }
    }
    let home = |tenant: &str, real: PathBuf| Home {
        also_owns: owned_by(&real)
            .and_then(|uid| owners.get(&uid))
            .and_then(|all| all.iter().find(|t| *t != tenant))
            .map(|other| whose(other)),
        real,
    };
    for entry in entries {
        let path = entry.path();
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        if file_type.is_symlink() && path.is_dir() {
            let tenant = entry.file_name().to_string_lossy().into_owned();
            let id = PluginId::directory(&tenant);
            let reason = format!(
                "tenant directory `{tenant}` is a link (to `{}`); links out of a tenant's directory are refused",
                std::fs::read_link(&path).unwrap_or_default().display()
            );
            out.insert(
                id.clone(),
                Err(PluginError::Refused {
                    plugin: id.to_string(),
                    path,
                    reason,
                }),
            );
        } else if file_type.is_dir() {
            let tenant = entry.file_name().to_string_lossy().into_owned();
            if let (Ok(inner), Ok(real)) = (std::fs::read_dir(&path), path.canonicalize()) {
                let home = home(&tenant, real);
                for e in inner.flatten() {
                    collect(&mut out, &tenant, &home, &e.path(), config);
                }
            }
        } else {
            collect(&mut out, "", &home("", root.clone()), &path, config);
        }
    }
    Ok(out)
}

/// [`scan`] of the plugins directory and of the one plugins pulled from registries are written
/// to (`pulled`): a plugin in both is the plugins directory's; its source reports the clash.
pub(super) fn scan_with(
    dir: &Path,
    pulled: Option<&Path>,
    config: &HostConfig,
) -> Result<Scan, PluginError> {
    let mut found = scan(dir, config)?;
    if let Some(pulled) = pulled {
        for (id, f) in scan(pulled, config)? {
            found.entry(id).or_insert(f);
        }
    }
    Ok(found)
}

/// The directory plugin files were found in.
pub(super) struct Home {
    /// The directory, canonical.
    real: PathBuf,
    /// Another plugins directory (the top level, or another tenant's) its owner owns too, if
    /// any.
    also_owns: Option<String>,
}

/// How errors name the directory of `tenant` (empty: the operator's top level).
fn whose(tenant: &str) -> String {
    if tenant.is_empty() {
        "the plugins directory's top level".to_string()
    } else {
        format!("tenant `{tenant}`'s directory")
    }
}

fn collect(out: &mut Scan, tenant: &str, home: &Home, path: &Path, config: &HostConfig) {
    let (Some(stem), Some(ext)) = (path.file_stem(), path.extension()) else {
        return;
    };
    if ext != "wasm" && ext != "toml" {
        return;
    }
    let id = PluginId {
        tenant: tenant.to_string(),
        name: stem.to_string_lossy().into_owned(),
    };
    if out.contains_key(&id) {
        return;
    }
    let wasm = path.with_extension("wasm");
    let manifest = path.with_extension("toml");
    let missing = |p: &Path, what: &str| PluginError::Load {
        plugin: id.to_string(),
        path: p.to_path_buf(),
        reason: format!("missing {what}"),
    };
    let found = if !wasm.is_file() {
        Err(missing(&wasm, "the component (.wasm) for this manifest"))
    } else if !manifest.is_file() {
        Err(missing(
            &manifest,
            "the manifest (.toml) for this component",
        ))
    } else {
        read_within(
            &wasm,
            home,
            &id,
            (config.max_wasm_bytes, "limits.max-wasm-mib"),
        )
        .and_then(|wasm_bytes| {
            let manifest_bytes = read_within(
                &manifest,
                home,
                &id,
                (config.max_manifest_bytes, "limits.max-manifest-kib"),
            )?;
            Ok(Found {
                fingerprint: fingerprint(&wasm_bytes, &manifest_bytes),
                wasm,
                manifest,
                wasm_bytes: wasm_bytes.into(),
                manifest_bytes: manifest_bytes.into(),
            })
        })
    };
    out.insert(id, found);
}

/// Reads a plugin file found in `home`, of at most `max` bytes (`key` names the setting in
/// errors). A symbolic link is followed only when it stays in that directory. The checks are
/// made on the file actually opened, and the bytes returned are the ones read through it, so a
/// link swapped in between check and read cannot slip past.
///
/// Hard links: nothing tells where a file's other names are, and a name in one directory may
/// have been made by anyone able to link the file there (a tenant linking another tenant's or
/// the host's file into its own directory, to run it under its own grant or have the host read
/// what it could not). So a file with several names is loaded only from a directory whose
/// owner (uid) owns the file and owns no other plugins directory (the top level or another
/// tenant's): that owner could read and copy the file anyway, so loading it from there lends
/// nobody anything. A name in any other directory is refused. Hence a tenant that links
/// another's file into its own directory cannot load it, and cannot freeze the owner's updates
/// either: the owner's own name still loads. Where one account owns several directories (one
/// account owning every directory, tenants writing through group or ACL grants), a file's
/// owner says nothing of whose it is, and every file with several names there is refused,
/// whoever made them: copy files in, don't link them.
fn read_within(
    path: &Path,
    home: &Home,
    id: &PluginId,
    (max, key): (u64, &str),
) -> Result<Vec<u8>, PluginError> {
    let real_dir = home.real.as_path();
    let unreadable = |e: std::io::Error| PluginError::Load {
        plugin: id.to_string(),
        path: path.to_path_buf(),
        reason: format!("cannot read: {e}"),
    };
    let mut file = open_nonblocking(path).map_err(unreadable)?;
    let opened = file.metadata().map_err(unreadable)?;
    let target = path.canonicalize().map_err(unreadable)?;
    let checked = std::fs::metadata(&target).map_err(unreadable)?;
    let changed = |reason: &str| PluginError::Load {
        plugin: id.to_string(),
        path: path.to_path_buf(),
        reason: format!("{reason} (it is read again on its next change)"),
    };
    if !opened.is_file() {
        return Err(changed("is not a regular file"));
    }
    if !same_file(&opened, &checked) {
        return Err(changed("changed while it was being read"));
    }
    let refused = |reason: String| PluginError::Refused {
        plugin: id.to_string(),
        path: path.to_path_buf(),
        reason,
    };
    let whose = whose(&id.tenant);
    let links = hard_links(&opened);
    if links > 1 {
        let dir = std::fs::metadata(real_dir).map_err(unreadable)?;
        match owners(&opened, &dir) {
            Some((file_owner, dir_owner)) if file_owner != dir_owner => {
                return Err(refused(format!(
                    "it has {links} hard links and is owned by uid {file_owner}, not by uid \
                     {dir_owner} who owns {whose}; a file with several names loads only from a \
                     directory its owner owns, since another name may be in another tenant's \
                     directory (copy the file instead of linking it)"
                )));
            }
            Some((_, dir_owner)) if home.also_owns.is_some() => {
                let other = home.also_owns.as_deref().unwrap_or_default();
                return Err(refused(format!(
                    "it has {links} hard links, and uid {dir_owner}, who owns {whose}, owns \
                     {other} too, so the file's owner does not tell whose it is; a file with \
                     several names loads only from a directory whose owner owns no other \
                     plugins directory, since another name may be in another tenant's \
                     directory (copy the file instead of linking it)"
                )));
            }
            _ => {}
        }
    }
    if target.parent() != Some(real_dir) {
        return Err(refused(format!(
            "it is a link to `{}`, outside {whose}; links out of a plugin's directory are refused",
            target.display()
        )));
    }
    let too_big = |len: u64| {
        refused(format!(
            "it is {len} bytes; this file may be at most {max} bytes (`{key}` in informant.toml)"
        ))
    };
    read_capped(&mut file, &opened, max)
        .map_err(unreadable)?
        .map_err(too_big)
}

fn fingerprint(wasm: &[u8], manifest: &[u8]) -> String {
    let mut h = Sha256::new();
    for bytes in [wasm, manifest] {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    }
    hex(&h.finalize())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::files::MAX_PLUGIN_FILE_BYTES;

    const SIZE: (u64, &str) = (MAX_PLUGIN_FILE_BYTES, "limits.max-wasm-mib");

    /// A directory whose owner owns no other plugins directory.
    fn alone(real: impl AsRef<Path>) -> Home {
        Home {
            real: real.as_ref().to_path_buf(),
            also_owns: None,
        }
    }

    fn id() -> PluginId {
        PluginId {
            tenant: "a".into(),
            name: "p".into(),
        }
    }

    #[test]
    fn reads_files_and_links_that_stay_in_their_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("real.wasm"), b"bytes").unwrap();
        std::os::unix::fs::symlink("real.wasm", dir.join("p.wasm")).unwrap();
        let real = dir.canonicalize().unwrap();
        assert_eq!(
            read_within(&dir.join("real.wasm"), &alone(&real), &id(), SIZE).unwrap(),
            b"bytes"
        );
        assert_eq!(
            read_within(&dir.join("p.wasm"), &alone(&real), &id(), SIZE).unwrap(),
            b"bytes"
        );
    }

    #[test]
    fn refuses_a_link_out_of_its_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        std::fs::write(b.join("p.wasm"), b"b's plugin").unwrap();
        std::os::unix::fs::symlink(b.join("p.wasm"), a.join("p.wasm")).unwrap();
        let err = read_within(
            &a.join("p.wasm"),
            &alone(a.canonicalize().unwrap()),
            &id(),
            SIZE,
        )
        .unwrap_err();
        let PluginError::Refused { path, reason, .. } = err else {
            panic!("expected a refusal, got {err:?}")
        };
        assert_eq!(path, a.join("p.wasm"));
        assert!(
            reason.contains("outside tenant `a`'s directory"),
            "{reason}"
        );
    }

    /// A sparse file claims any length without using the disk; the loader must not believe it.
    #[test]
    fn a_huge_sparse_file_is_refused_without_reading_it() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("p.wasm");
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(64 << 30).unwrap();
        let err = read_within(
            &path,
            &alone(tmp.path().canonicalize().unwrap()),
            &id(),
            SIZE,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("it is 68719476736 bytes; this file may be at most 134217728 bytes (`limits.max-wasm-mib`"),
            "{err}"
        );
    }

    /// Whether this process may give files away (root, with CAP_CHOWN); the ownership tests
    /// need two owners and skip, saying so, where they cannot have them.
    fn can_chown(dir: &Path) -> bool {
        let probe = dir.join("probe");
        std::fs::write(&probe, b"").unwrap();
        let ok = std::os::unix::fs::chown(&probe, Some(4242), None).is_ok();
        std::fs::remove_file(&probe).unwrap();
        if !ok {
            eprintln!("skipped: needs to chown files to another uid (run as root)");
        }
        ok
    }

    fn owned_by(path: &Path, uid: u32) {
        std::os::unix::fs::chown(path, Some(uid), None).unwrap();
    }

    /// a links b's component into its own directory: a cannot load it (b owns it, not a's
    /// directory's owner), and b's own name keeps loading, rewritten in place or not, so a's
    /// link freezes nothing of b's.
    #[test]
    fn another_directorys_hard_link_neither_loads_nor_freezes_the_owners_file() {
        let tmp = tempfile::tempdir().unwrap();
        if !can_chown(tmp.path()) {
            return;
        }
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        std::fs::write(b.join("p.wasm"), b"b's plugin").unwrap();
        let (a_uid, b_uid) = (4001, 4002);
        owned_by(&a, a_uid);
        owned_by(&b, b_uid);
        owned_by(&b.join("p.wasm"), b_uid);
        std::fs::hard_link(b.join("p.wasm"), a.join("p.wasm")).unwrap();
        let (a_real, b_real) = (a.canonicalize().unwrap(), b.canonicalize().unwrap());

        let err = read_within(&a.join("p.wasm"), &alone(&a_real), &id(), SIZE).unwrap_err();
        let PluginError::Refused { path, reason, .. } = err else {
            panic!("expected a refusal, got {err:?}")
        };
        assert_eq!(path, a.join("p.wasm"));
        assert!(
            reason.contains("it has 2 hard links and is owned by uid 4002, not by uid 4001 who owns tenant `a`'s directory"),
            "{reason}"
        );

        assert_eq!(
            read_within(&b.join("p.wasm"), &alone(&b_real), &id(), SIZE).unwrap(),
            b"b's plugin"
        );
        // b updates in place (as `cp` does): the new bytes load from b's directory.
        std::fs::write(b.join("p.wasm"), b"b's plugin, v2").unwrap();
        assert_eq!(
            read_within(&b.join("p.wasm"), &alone(&b_real), &id(), SIZE).unwrap(),
            b"b's plugin, v2"
        );
        assert!(read_within(&a.join("p.wasm"), &alone(&a_real), &id(), SIZE).is_err());
    }

    /// A host file (here root's) linked into a tenant's directory is not loaded there; a file
    /// the directory's owner links within its own directory is.
    #[test]
    fn a_hard_link_to_a_host_file_is_refused_and_ones_own_links_load() {
        let tmp = tempfile::tempdir().unwrap();
        if !can_chown(tmp.path()) {
            return;
        }
        let a = tmp.path().join("a");
        std::fs::create_dir(&a).unwrap();
        let host = tmp.path().join("host.wasm");
        std::fs::write(&host, b"the host's file").unwrap();
        owned_by(&host, 0);
        owned_by(&a, 4001);
        std::fs::hard_link(&host, a.join("p.wasm")).unwrap();
        let a_real = a.canonicalize().unwrap();
        let err = read_within(&a.join("p.wasm"), &alone(&a_real), &id(), SIZE).unwrap_err();
        assert!(
            err.to_string()
                .contains("is owned by uid 0, not by uid 4001"),
            "{err}"
        );

        std::fs::write(a.join("own.wasm"), b"a's plugin").unwrap();
        owned_by(&a.join("own.wasm"), 4001);
        std::fs::hard_link(a.join("own.wasm"), a.join("q.wasm")).unwrap();
        assert_eq!(
            read_within(&a.join("q.wasm"), &alone(&a_real), &id(), SIZE).unwrap(),
            b"a's plugin"
        );
    }

    /// Reading a FIFO would block the reconcile (every tenant's loads) until someone writes.
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("p.wasm");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates a file.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read_within(
            &fifo,
            &alone(tmp.path().canonicalize().unwrap()),
            &id(),
            SIZE,
        )
        .unwrap_err();
        assert!(err.to_string().contains("is not a regular file"), "{err}");
    }

    /// One account owning every directory (as here: the test's): a's hard link to b's
    /// component is refused, whoever made it, and so is b's own name, since the owner cannot
    /// tell the two apart; copies load.
    #[test]
    fn with_one_owner_for_every_directory_every_hard_link_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        for d in ["a", "b"] {
            std::fs::create_dir(dir.join(d)).unwrap();
        }
        for f in ["b/p.wasm", "b/p.toml", "a/p.toml", "a/copy.toml"] {
            std::fs::write(dir.join(f), b"bytes").unwrap();
        }
        std::fs::hard_link(dir.join("b/p.wasm"), dir.join("a/p.wasm")).unwrap();
        std::fs::copy(dir.join("b/p.wasm"), dir.join("a/copy.wasm")).unwrap();

        let found = scan(dir, &HostConfig::default()).unwrap();
        let refusal = |tenant: &str| {
            let id = PluginId {
                tenant: tenant.into(),
                name: "p".into(),
            };
            match &found[&id] {
                Err(PluginError::Refused { path, reason, .. }) => (path.clone(), reason.clone()),
                other => panic!("{id} was not refused: {other:?}"),
            }
        };
        for tenant in ["a", "b"] {
            let (path, reason) = refusal(tenant);
            assert_eq!(path, dir.join(format!("{tenant}/p.wasm")));
            let owns = format!(
                "who owns tenant `{tenant}`'s directory, owns the plugins directory's top level too"
            );
            assert!(
                reason.starts_with("it has 2 hard links, and uid") && reason.contains(&owns),
                "{reason}"
            );
        }
        let copy = PluginId {
            tenant: "a".into(),
            name: "copy".into(),
        };
        assert!(found[&copy].is_ok(), "{:?}", found[&copy]);
    }
}
