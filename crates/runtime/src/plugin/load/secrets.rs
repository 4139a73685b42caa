//! Resolving a manifest's `${env:..}` / `${file:..}` config references at load (syntax in
//! [`informant_manifest::config_ref`]).
//!
//! Only operator plugins (top-level, or every plugin when no config file is given) may read the
//! host's environment and files: a tenant's plugin naming a reference is refused, since the
//! host process holds every tenant's secrets and its own. Values are never logged: every
//! message names the reference and the field, never what it resolved to.

use std::path::Path;

use crate::plugin::manifest::{ConfigRef, Manifest};

/// Largest file a `${file:..}` reference may name: secrets are small; anything larger is a
/// mistake (or a device) and is refused rather than handed to `init`.
pub const MAX_SECRET_FILE_BYTES: u64 = 64 << 10;

/// `manifest`'s config as JSON for `init`, references resolved; `Err((field, reason))` names
/// the first one that cannot be, or any at all for a tenant's plugin.
pub fn resolve_config(manifest: &Manifest, tenant: &str) -> Result<String, (String, String)> {
    manifest.config_json_resolved(|r| {
        if !tenant.is_empty() {
            return Err(format!(
                "`{r}`: tenant `{tenant}`'s plugins may not read the host's environment or files; only operator plugins may"
            ));
        }
        resolve(r)
    })
}

/// One reference's value.
fn resolve(r: &ConfigRef) -> Result<String, String> {
    match r {
        ConfigRef::Env(name) => std::env::var(name).map_err(|e| match e {
            std::env::VarError::NotPresent => format!("`{r}`: the environment variable is not set"),
            std::env::VarError::NotUnicode(_) => {
                format!("`{r}`: the environment variable is not UTF-8")
            }
        }),
        ConfigRef::File(path) => read(path)
            .map(|text| {
                let text = text.strip_suffix('\n').unwrap_or(&text);
                text.strip_suffix('\r').unwrap_or(text).to_string()
            })
            .map_err(|why| format!("`{r}`: {why}")),
    }
}

/// A secret file's text. Links are followed (a mounted Kubernetes Secret is a chain of them);
/// the file opened must be a regular file, read bounded, so a FIFO, a device or a huge file
/// cannot hang or exhaust the loader.
fn read(path: &Path) -> Result<String, String> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let mut file = options
        .open(path)
        .map_err(|e| format!("cannot open: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("cannot stat: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let bytes = crate::plugin::load::loader::read_capped(&mut file, &meta, MAX_SECRET_FILE_BYTES)
        .map_err(|e| format!("cannot read: {e}"))?
        .map_err(|len| {
            format!("the file holds {len} bytes; at most {MAX_SECRET_FILE_BYTES} are read")
        })?;
    String::from_utf8(bytes).map_err(|_| "the file is not UTF-8 text".into())
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

        let (field, why) = resolve_config(&m, "team-a").unwrap_err();
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
            let (field, why) = resolve_config(&m, "").unwrap_err();
            assert_eq!(field, "config.s");
            assert!(why.contains(reason) && why.contains("${file:"), "{why}");
        }
        let m = manifest("s = \"${env:INFORMANT_TEST_SURELY_UNSET_VARIABLE}\"");
        let (_, why) = resolve_config(&m, "").unwrap_err();
        assert_eq!(
            why,
            "`${env:INFORMANT_TEST_SURELY_UNSET_VARIABLE}`: the environment variable is not set"
        );
    }
}
