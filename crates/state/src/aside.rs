//! State files set aside (never read again, kept for an operator), and how many are kept.
//!
//! A refused state file is renamed `state.redb.set-aside-<unix-seconds>` (`-<n>` added when
//! that name is taken). Only the newest [`KEEP_SET_ASIDE`] are kept: a host that keeps
//! refusing its state (pointed at another cluster on every start, a disk that keeps corrupting
//! it) would otherwise fill its volume with copies. Older ones are deleted, each named in the
//! log with the reason. Files of other names are never touched.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::file::FILE_NAME;

/// How many set-aside state files are kept; older ones are deleted.
pub const KEEP_SET_ASIDE: usize = 3;

fn prefix() -> String {
    format!("{FILE_NAME}.set-aside-")
}

/// `DIR/state.redb.set-aside-<unix-seconds>`, with a counter if that name is taken (by
/// anything, a link included: it is never followed, and never replaced).
pub(crate) fn set_aside_path(dir: &Path) -> PathBuf {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let taken = |p: &Path| std::fs::symlink_metadata(p).is_ok();
    let base = dir.join(format!("{}{secs}", prefix()));
    if !taken(&base) {
        return base;
    }
    (1..)
        .map(|n| dir.join(format!("{}{secs}-{n}", prefix())))
        .find(|p| !taken(p))
        .unwrap_or(base)
}

/// Where a set-aside name sorts: its seconds, then its counter; `None` for other names.
fn order(name: &str) -> Option<(u64, u64)> {
    let rest = name.strip_prefix(&prefix())?;
    let (secs, n) = match rest.split_once('-') {
        Some((secs, n)) => (secs, n.parse().ok()?),
        None => (rest, 0),
    };
    Some((secs.parse().ok()?, n))
}

/// Deletes all but the newest [`KEEP_SET_ASIDE`] set-aside files in `dir`; returns those
/// deleted. One that cannot be deleted is named in a warning and left.
pub(crate) fn prune(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut aside: Vec<((u64, u64), PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            Some((order(name.to_str()?)?, e.path()))
        })
        .collect();
    aside.sort();
    let excess = aside.len().saturating_sub(KEEP_SET_ASIDE);
    let mut removed = Vec::new();
    for (_, path) in aside.into_iter().take(excess) {
        // Unlinks the name itself: a link there is removed, never followed.
        match std::fs::remove_file(&path) {
            Ok(()) => {
                tracing::warn!(path = %path.display(), keep = KEEP_SET_ASIDE, "older set-aside state deleted: only the newest set-aside files are kept");
                removed.push(path);
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot delete an older set-aside state file")
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_by_seconds_then_counter_and_others_are_not_ours() {
        assert_eq!(order("state.redb.set-aside-100"), Some((100, 0)));
        assert_eq!(order("state.redb.set-aside-100-2"), Some((100, 2)));
        assert_eq!(order("state.redb.set-aside-"), None);
        assert_eq!(order("state.redb.set-aside-x"), None);
        assert_eq!(order("state.redb.set-aside-100-x"), None);
        assert_eq!(order("state.redb"), None);
        assert_eq!(order("notes.txt"), None);
    }
}
