//! Unit tests on real files in temporary directories.

use std::path::Path;
use std::time::Duration;

use crate::{SetAside, StateDir, StateWriter};

mod compaction;
mod held;
mod hostile;
mod journal;
mod keys;
mod letters;
#[cfg(unix)]
mod private;

const CLUSTER: &str = "https://127.0.0.1:6443";

fn open(dir: &Path) -> (StateDir, Option<SetAside>) {
    StateDir::open(dir, CLUSTER).expect("open state")
}

/// A flush that hangs is a bug; fail the test instead of hanging it.
async fn flush(journal: &StateWriter) {
    tokio::time::timeout(Duration::from_secs(60), journal.flush())
        .await
        .expect("flush resolved");
}

/// Deterministic bytes without a dependency (xorshift64).
fn noise(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}
