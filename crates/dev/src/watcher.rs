//! Watching plugin sources: the sources directory (and the directories of files outside it that
//! builds read, such as path dependencies) through the runtime's debounced watch
//! ([`informant_runtime::fswatch`]), filtered to what can change a build.
//!
//! Editors save in several steps (temp file, rename, backup), and a build reads every file, so a
//! batch is delivered only once the tree has been quiet for [`DEBOUNCE`]. Build products never
//! trigger a rebuild: `target` directories, the target and output directories (when they sit
//! under the sources), hidden files, editor backups and `Cargo.lock` (which cargo itself writes)
//! are ignored.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

pub use informant_runtime::fswatch::DEBOUNCE;
use informant_runtime::fswatch::{Burst, RecursiveMode, Watch};

use super::DevLoopError;

/// Settled batches of changed source paths under one directory.
pub struct SourceWatcher {
    watch: Watch,
    root: PathBuf,
    /// Directories outside `root` watched for [`SourceWatcher::watch_files`].
    extra: BTreeSet<PathBuf>,
}

impl SourceWatcher {
    /// Watches `dir` recursively; paths under any of `ignore` never count as changes.
    pub fn start(dir: &Path, ignore: Vec<PathBuf>) -> Result<Self, DevLoopError> {
        let root = dir.to_path_buf();
        let watch = Watch::start(dir, RecursiveMode::Recursive, move |p| {
            relevant(&root, &ignore, p)
        })
        .map_err(DevLoopError::Watch)?;
        Ok(SourceWatcher {
            watch,
            root: dir.to_path_buf(),
            extra: BTreeSet::new(),
        })
    }

    /// Also reports changes to `files` outside the watched directory, by watching the
    /// directories holding them; a directory that cannot be watched is logged and skipped, so
    /// only its rebuild trigger is lost.
    pub fn watch_files<'a>(&mut self, files: impl IntoIterator<Item = &'a PathBuf>) {
        for dir in files.into_iter().filter_map(|f| f.parent()) {
            if dir.starts_with(&self.root) || self.extra.contains(dir) {
                continue;
            }
            match self.watch.add(dir, RecursiveMode::NonRecursive) {
                Ok(()) => {
                    self.extra.insert(dir.to_path_buf());
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot watch a directory plugin builds read")
                }
            }
        }
    }

    /// The next batch of changed paths, once changes have settled; `None` if watching ended.
    /// A batch whose changes were lost ([`Burst::lost`]) may have touched any plugin.
    pub async fn next_batch(&mut self) -> Option<Burst> {
        self.watch.next().await
    }
}

/// Whether a change at `path` can change a plugin build. Outside `root` only files a build
/// read are watched for, so there only editor noise is dropped here.
fn relevant(root: &Path, ignore: &[PathBuf], path: &Path) -> bool {
    if ignore.iter().any(|i| path.starts_with(i)) {
        return false;
    }
    let build_product = path.strip_prefix(root).is_ok_and(|rel| {
        rel.components().any(|c| {
            let c = c.as_os_str().to_string_lossy();
            matches!(c.as_ref(), "target" | "node_modules" | "__pycache__") || c.starts_with('.')
        })
    });
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let editor_noise = name.ends_with('~')
        || name.ends_with(".swp")
        || name.ends_with(".swx")
        || name == "4913"
        || name == "Cargo.lock";
    !build_product && !editor_noise
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_products_and_editor_noise_are_ignored() {
        let root = Path::new("/src");
        let ignore = [PathBuf::from("/src/out")];
        let yes = |p: &str| relevant(root, &ignore, Path::new(p));
        assert!(yes("/src/a/src/lib.rs"));
        assert!(yes("/src/a/a.toml"));
        assert!(yes("/src/team/b/Cargo.toml"));
        assert!(!yes("/src/a/target/release/x"));
        assert!(!yes("/src/out/a.wasm"));
        assert!(!yes("/src/a/.lib.rs.swp"));
        assert!(!yes("/src/a/src/lib.rs~"));
        assert!(!yes("/src/a/Cargo.lock"));
        assert!(!yes("/src/.git/index"));
        assert!(!yes("/src/py/__pycache__/plugin.cpython-312.pyc"));
        assert!(!yes("/src/py/.pytest_cache/v/cache/lastfailed"));
        assert!(!yes("/src/ts/node_modules/x/index.js"));
        assert!(yes("/src/py/plugin.py"));
        assert!(yes("/src/ts/src/plugin.ts"));
        assert!(
            yes("/home/me/.sdk/src/lib.rs"),
            "a path dependency in a hidden directory"
        );
        assert!(!yes("/home/me/.sdk/src/lib.rs~"));
    }
}
