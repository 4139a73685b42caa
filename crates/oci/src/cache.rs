//! Pulled layers kept by digest, so an artifact several sources name, or a tag moved back to a
//! digest pulled before, is not downloaded again: `DIR/sha256-<HEX>`, each file written whole
//! (a temporary file renamed over it) and its bytes checked against its name whenever it is
//! read, so a file torn, changed or planted in the directory is never used (it is removed and
//! the layer pulled again). The directory is the caller's to make private; the most recently
//! used layers are kept up to a total size.

use std::path::{Path, PathBuf};

/// Layers kept by digest in a directory.
#[derive(Debug, Clone)]
pub struct BlobCache {
    dir: PathBuf,
    max_bytes: u64,
}

impl BlobCache {
    /// A cache in `dir` (made private by the caller) holding up to `max_bytes` of layers.
    pub fn new(dir: PathBuf, max_bytes: u64) -> Self {
        BlobCache { dir, max_bytes }
    }

    fn path(&self, digest: &str) -> Option<PathBuf> {
        let hex = digest.strip_prefix("sha256:")?;
        (hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
        .then(|| self.dir.join(format!("sha256-{hex}")))
    }

    /// The layer of `digest`, if kept and still its bytes; a file that is not is removed.
    pub(crate) fn get(&self, digest: &str) -> Option<Vec<u8>> {
        let path = self.path(digest)?;
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if !meta.is_file() {
            return None;
        }
        let bytes = std::fs::read(&path).ok()?;
        if crate::digest::sha256(&bytes) != digest {
            tracing::warn!(path = %path.display(), "a cached layer is not what its name says; removed and pulled again");
            let _ = std::fs::remove_file(&path);
            return None;
        }
        // Used now: kept before older ones when the cache is trimmed.
        let _ = std::fs::File::options()
            .append(true)
            .open(&path)
            .and_then(|f| f.set_modified(std::time::SystemTime::now()));
        Some(bytes)
    }

    /// Keeps `bytes` (already verified against `digest`) and trims the cache to its size. A
    /// failure to keep them is logged: the pull itself has what it needs.
    pub(crate) fn put(&self, digest: &str, bytes: &[u8]) {
        let Some(path) = self.path(digest) else {
            return;
        };
        // Only what its name says is kept (the pull checked it; this is cheap to check again).
        if crate::digest::sha256(bytes) != digest {
            return;
        }
        if let Err(e) = write_whole(&self.dir, &path, bytes) {
            tracing::warn!(dir = %self.dir.display(), error = %e, "a pulled layer could not be cached");
            return;
        }
        self.trim();
    }

    /// Removes the least recently used layers past the size limit.
    fn trim(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut kept: Vec<(std::time::SystemTime, u64, PathBuf)> = entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("sha256-"))
            .filter_map(|e| {
                let meta = e.metadata().ok()?;
                Some((meta.modified().ok()?, meta.len(), e.path()))
            })
            .collect();
        kept.sort_by_key(|k| std::cmp::Reverse(k.0));
        let mut total = 0;
        for (_, len, path) in kept {
            total += len;
            if total > self.max_bytes {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// Writes `bytes` to `path` in `dir` whole: a temporary file beside it, renamed over it.
fn write_whole(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut temp = tempfile::NamedTempFile::new_in(dir)?;
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(bytes: &[u8]) -> String {
        crate::digest::sha256(bytes)
    }

    #[test]
    fn the_least_recently_used_layers_go_first_past_the_size() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BlobCache::new(dir.path().to_path_buf(), 10);
        let (a, b, c) = (b"aaaa".as_slice(), b"bbbb".as_slice(), b"cccc".as_slice());
        let past = |bytes: &[u8], secs: u64| {
            let path = cache.path(&digest(bytes)).unwrap();
            let then = std::time::SystemTime::now() - std::time::Duration::from_secs(secs);
            std::fs::File::options()
                .append(true)
                .open(path)
                .unwrap()
                .set_modified(then)
                .unwrap();
        };
        cache.put(&digest(a), a);
        past(a, 30);
        cache.put(&digest(b), b);
        past(b, 20);
        // Read: a is the most recently used now.
        assert_eq!(cache.get(&digest(a)).as_deref(), Some(a));
        cache.put(&digest(c), c);
        assert!(
            cache.get(&digest(b)).is_none(),
            "b, least recently used, went"
        );
        assert_eq!(cache.get(&digest(a)).as_deref(), Some(a));
        assert_eq!(cache.get(&digest(c)).as_deref(), Some(c));
        // Names that are not a digest are neither read nor written.
        cache.put("sha256:../../etc/passwd", a);
        assert!(cache.get("sha256:../../etc/passwd").is_none());
        assert!(cache.get(&digest(a).to_uppercase()).is_none());
        // Bytes that are not what the digest says are not kept.
        cache.put(&digest(b), c);
        assert!(cache.get(&digest(b)).is_none());
    }
}
