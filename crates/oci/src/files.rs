//! A pulled plugin written into a plugins directory: `NAME.toml`, then `NAME.wasm`, each file
//! whole (a temporary file beside it renamed over it), so a host watching the directory never
//! reads half a file and finds the new manifest beside the new component.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Writing a plugin's files failed.
#[derive(Debug, thiserror::Error)]
#[error("writing `{path}`: {source}")]
pub struct WriteError {
    /// The file.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

/// Writes `NAME.toml` (if `manifest` is given) and `NAME.wasm` into `dir`; the paths written.
/// `name` must have passed [`check_name`](crate::layout::check_name).
pub fn write_plugin(
    dir: &Path,
    name: &str,
    wasm: &[u8],
    manifest: Option<&str>,
) -> Result<Vec<PathBuf>, WriteError> {
    let mut written = Vec::new();
    if let Some(text) = manifest {
        let path = dir.join(format!("{name}.toml"));
        replace(&path, text.as_bytes())?;
        written.push(path);
    }
    let path = dir.join(format!("{name}.wasm"));
    replace(&path, wasm)?;
    written.push(path);
    Ok(written)
}

/// Writes `path` whole: a temporary file beside it (no `.wasm` or `.toml` name a scan would
/// pick up), renamed over it.
fn replace(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    let failed = |source| WriteError {
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".informant-pull-")
        .tempfile_in(dir)
        .map_err(failed)?;
    tmp.write_all(bytes).map_err(failed)?;
    tmp.as_file().sync_all().map_err(failed)?;
    tmp.persist(path).map_err(|e| failed(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_both_files_whole_and_leaves_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p.wasm"), b"old").unwrap();
        let written = write_plugin(dir.path(), "p", b"new", Some("[[watch]]\n")).unwrap();
        assert_eq!(written.len(), 2);
        assert_eq!(std::fs::read(dir.path().join("p.wasm")).unwrap(), b"new");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("p.toml")).unwrap(),
            "[[watch]]\n"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }
}
