//! Files the state must refuse (set aside, never delete) and recover from with a usable fresh state.

use std::path::{Path, PathBuf};

use redb::{Database, ReadableDatabase};

use super::{CLUSTER, flush, noise, open};
use crate::tables::{FORMAT, META};
use crate::{FILE_NAME, Refusal, StateDir, StateError};

/// A closed state file with real content: 500 objects of ~1 KB, a cursor and a resource version.
async fn write_real_state(dir: &Path) {
    let (state, aside) = open(dir);
    assert!(aside.is_none());
    let journal = state.journal();
    let body = "x".repeat(1000);
    for i in 0..500u64 {
        journal.record(
            "v1/pods",
            i + 1,
            &format!("ns/pod-{i}"),
            Some(&format!("{{\"i\":{i},\"b\":\"{body}\"}}")),
        );
    }
    journal.resource_version("v1/pods", "12345", 500);
    journal.cursor("plugin", "v1/pods", 500, None, "scope");
    flush(&journal).await;
    drop(state);
}

/// Opening must set the file aside with `want`, keep its bytes, and give a fresh usable state.
async fn assert_set_aside(dir: &Path, cluster: &str, want: impl Fn(&Refusal) -> bool) {
    let before = std::fs::read(dir.join(FILE_NAME)).unwrap();
    let (state, aside) = StateDir::open(dir, cluster).expect("a bad file is not an error");
    let aside = aside.expect("the file was set aside");
    assert!(want(&aside.reason), "unexpected refusal: {}", aside.reason);
    assert_eq!(aside.moved_to.parent(), Some(dir));
    let name = aside.moved_to.file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with("state.redb.set-aside-"), "{name}");
    assert_eq!(
        std::fs::read(&aside.moved_to).unwrap(),
        before,
        "the old file is kept as it was"
    );

    let snap = state.load().unwrap();
    assert!(
        snap.informers.is_empty() && snap.cursors.is_empty(),
        "fresh state: {snap:?}"
    );
    let journal = state.journal();
    journal.record("v1/pods", 1, "ns/a", Some("{}"));
    flush(&journal).await;
    assert_eq!(
        state.load().unwrap().informers["v1/pods"].versions["ns/a"],
        vec![(1, Some("{}".into()))]
    );
    assert!(journal.stats().degraded.is_none());
    drop(state);

    // The fresh file is now the state: reopening uses it.
    let (state, aside) = StateDir::open(dir, cluster).unwrap();
    assert!(aside.is_none());
    assert_eq!(state.load().unwrap().informers["v1/pods"].versions.len(), 1);
}

fn set_aside_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .contains("set-aside")
        })
        .collect()
}

#[tokio::test]
async fn a_file_cut_in_half_is_set_aside_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    write_real_state(dir.path()).await;
    let path = dir.path().join(FILE_NAME);
    let bytes = std::fs::read(&path).unwrap();
    assert!(
        bytes.len() > 500_000,
        "the state holds the objects: {} bytes",
        bytes.len()
    );
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    assert_set_aside(dir.path(), CLUSTER, |r| matches!(r, Refusal::Corrupt(_))).await;
}

#[tokio::test]
async fn random_bytes_are_set_aside_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(FILE_NAME),
        noise(256 * 1024, 0x9e37_79b9_7f4a_7c15),
    )
    .unwrap();
    assert_set_aside(dir.path(), CLUSTER, |r| matches!(r, Refusal::Corrupt(_))).await;
}

#[tokio::test]
async fn a_redb_file_that_is_not_a_state_file_is_set_aside_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Database::create(dir.path().join(FILE_NAME)).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(redb::TableDefinition::<u64, u64>::new("something-else"))
            .unwrap()
            .insert(1, 2)
            .unwrap();
        txn.commit().unwrap();
    }
    assert_set_aside(
        dir.path(),
        CLUSTER,
        |r| matches!(r, Refusal::Corrupt(m) if m.contains("meta")),
    )
    .await;
}

#[tokio::test]
async fn a_newer_format_is_set_aside_not_read() {
    let dir = tempfile::tempdir().unwrap();
    write_real_state(dir.path()).await;
    {
        let db = Database::open(dir.path().join(FILE_NAME)).unwrap();
        let txn = db.begin_write().unwrap();
        let newer = (FORMAT + 1).to_string();
        txn.open_table(META)
            .unwrap()
            .insert("format", newer.as_str())
            .unwrap();
        txn.commit().unwrap();
    }
    assert_set_aside(dir.path(), CLUSTER, |r| {
        *r == Refusal::NewerFormat {
            found: FORMAT + 1,
            supported: FORMAT,
        }
    })
    .await;
}

/// A state file as the first format wrote it: object JSON alone per version, no metadata.
fn write_format_1_state(dir: &Path) {
    const VERSIONS_1: redb::TableDefinition<(&str, &str, u64), Option<&str>> =
        redb::TableDefinition::new("versions");
    const INFORMERS_1: redb::TableDefinition<&str, (&str, u64)> =
        redb::TableDefinition::new("informers");
    const CURSORS_1: redb::TableDefinition<(&str, &str), (u64, &str)> =
        redb::TableDefinition::new("cursors");
    let db = Database::create(dir.join(FILE_NAME)).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut meta = txn.open_table(META).unwrap();
        meta.insert("format", "1").unwrap();
        meta.insert("cluster", CLUSTER).unwrap();
        let mut versions = txn.open_table(VERSIONS_1).unwrap();
        for i in 0..50u64 {
            let json = format!("{{\"metadata\":{{\"name\":\"pod-{i}\",\"namespace\":\"ns\"}}}}");
            versions
                .insert(
                    ("v1/pods", format!("ns/pod-{i}").as_str(), i + 1),
                    Some(json.as_str()),
                )
                .unwrap();
        }
        txn.open_table(INFORMERS_1)
            .unwrap()
            .insert("v1/pods", ("12345", 50))
            .unwrap();
        txn.open_table(CURSORS_1)
            .unwrap()
            .insert(("plugin", "v1/pods"), (50, "scope"))
            .unwrap();
    }
    txn.commit().unwrap();
}

#[tokio::test]
async fn an_earlier_format_is_set_aside_as_such_not_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    write_format_1_state(dir.path());
    assert_set_aside(dir.path(), CLUSTER, |r| {
        *r == Refusal::OlderFormat {
            found: 1,
            supported: FORMAT,
        } && r
            .to_string()
            .contains("written by an earlier format 1 that this version does not read")
    })
    .await;
}

#[tokio::test]
async fn another_clusters_state_is_set_aside() {
    let dir = tempfile::tempdir().unwrap();
    write_real_state(dir.path()).await;
    assert_set_aside(dir.path(), "https://127.0.0.2:6443", |r| {
        *r == Refusal::OtherCluster {
            found: CLUSTER.into(),
        }
    })
    .await;
    // Going back to the first cluster sets the second one's file aside in turn; both are kept.
    let (_state, aside) = open(dir.path());
    assert!(matches!(
        aside.unwrap().reason,
        Refusal::OtherCluster { .. }
    ));
    assert_eq!(set_aside_files(dir.path()).len(), 2);
}

#[tokio::test]
async fn reopening_the_same_cluster_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    write_real_state(dir.path()).await;
    let (state, aside) = open(dir.path());
    assert!(aside.is_none());
    let snap = state.load().unwrap();
    let pods = &snap.informers["v1/pods"];
    assert_eq!(
        (
            pods.resource_version.as_str(),
            pods.seq,
            pods.versions.len()
        ),
        ("12345", 500, 500)
    );
    assert_eq!(
        snap.cursors[&("plugin".into(), "v1/pods".into())].scope,
        "scope"
    );
    assert!(set_aside_files(dir.path()).is_empty());
}

#[tokio::test]
async fn a_file_open_elsewhere_is_an_error_and_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (_first, _) = open(dir.path());
    match StateDir::open(dir.path(), CLUSTER) {
        Err(StateError::InUse { dir: at, holder }) => {
            assert_eq!(at, dir.path());
            assert!(
                holder.starts_with(&format!("pid {} on host ", std::process::id())),
                "{holder}"
            );
        }
        other => panic!("expected InUse, got {other:?}"),
    }
    assert!(set_aside_files(dir.path()).is_empty());
}

#[test]
fn a_directory_that_cannot_be_created_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    let err = StateDir::open(&file.join("state"), CLUSTER).unwrap_err();
    assert!(
        matches!(&err, StateError::Unsafe { path, .. } if *path == file.join("state")),
        "{err}"
    );
    assert!(std::error::Error::source(&err).is_some());
}

#[tokio::test]
async fn an_empty_file_becomes_a_fresh_state_in_place() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(FILE_NAME), b"").unwrap();
    let (state, aside) = open(dir.path());
    assert!(aside.is_none());
    let journal = state.journal();
    journal.record("i", 1, "k", None);
    flush(&journal).await;
    drop(state);
    // Reading it without the journal proves the meta rows were written.
    let db = Database::open(dir.path().join(FILE_NAME)).unwrap();
    let txn = db.begin_read().unwrap();
    let meta = txn.open_table(META).unwrap();
    assert_eq!(meta.get("cluster").unwrap().unwrap().value(), CLUSTER);
}

#[tokio::test]
async fn noise_over_the_middle_of_a_file_is_set_aside_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    write_real_state(dir.path()).await;
    let path = dir.path().join(FILE_NAME);
    let mut bytes = std::fs::read(&path).unwrap();
    // Same length, same header: only the pages in the middle are rotten.
    let mid = bytes.len() / 2;
    bytes[mid..mid + 64 * 1024].copy_from_slice(&noise(64 * 1024, 7));
    std::fs::write(&path, &bytes).unwrap();
    assert_set_aside(dir.path(), CLUSTER, |r| matches!(r, Refusal::Corrupt(_))).await;
}

fn seal_of(dir: &Path) -> PathBuf {
    dir.join(format!("{FILE_NAME}.seal"))
}

#[tokio::test]
async fn a_cleanly_closed_file_is_sealed_and_reopens_without_the_check() {
    let dir = tempfile::tempdir().unwrap();
    write_real_state(dir.path()).await;
    assert!(seal_of(dir.path()).exists(), "a clean close seals the file");
    let (state, aside) = open(dir.path());
    assert!(aside.is_none());
    assert!(
        !state.checked_at_open(),
        "a sealed file is trusted as it is"
    );
    // Taken at open: while the file is open (and written), no seal describes it.
    assert!(!seal_of(dir.path()).exists());
    assert_eq!(state.versions("v1/pods").unwrap().len(), 500);
    state.close();
    assert!(seal_of(dir.path()).exists());
}

#[tokio::test]
async fn without_a_seal_the_file_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    write_real_state(dir.path()).await;
    // As a crash leaves it: the seal was taken at open and never written again.
    std::fs::remove_file(seal_of(dir.path())).unwrap();
    let (state, aside) = open(dir.path());
    assert!(aside.is_none());
    assert!(state.checked_at_open());
    assert_eq!(state.versions("v1/pods").unwrap().len(), 500);
}

#[tokio::test]
async fn a_garbled_seal_makes_the_open_check_the_file() {
    let dir = tempfile::tempdir().unwrap();
    write_real_state(dir.path()).await;
    std::fs::write(seal_of(dir.path()), noise(40, 3)).unwrap();
    let (state, aside) = open(dir.path());
    assert!(aside.is_none());
    assert!(state.checked_at_open());
}

#[tokio::test]
async fn a_file_changed_by_redb_after_its_seal_is_checked_and_used() {
    let dir = tempfile::tempdir().unwrap();
    write_real_state(dir.path()).await;
    {
        // Another writer (an older build, a tool) commits to the file behind the seal.
        let db = Database::open(dir.path().join(FILE_NAME)).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(crate::tables::VERSIONS)
            .unwrap()
            .insert(("v1/pods", 501), ("ns/extra", Some("{}")))
            .unwrap();
        txn.commit().unwrap();
    }
    let (state, aside) = open(dir.path());
    assert!(aside.is_none());
    assert!(state.checked_at_open());
    assert_eq!(state.versions("v1/pods").unwrap().len(), 501);
}

/// The bytes of one stored object changed on disk, still valid JSON of the same length, under a
/// seal of the file as it was: redb reads such a page without complaint unless it verifies its
/// checksum, so trusting the seal's mere presence would hand the changed object to plugins.
#[tokio::test]
async fn a_changed_object_under_a_stale_seal_is_set_aside_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    write_real_state(dir.path()).await;
    assert!(seal_of(dir.path()).exists());
    let path = dir.path().join(FILE_NAME);
    let mut bytes = std::fs::read(&path).unwrap();
    let needle = b"{\"i\":250,";
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the object is stored as written");
    bytes[at + 7] = b'7';
    std::fs::write(&path, &bytes).unwrap();
    assert_set_aside(dir.path(), CLUSTER, |r| matches!(r, Refusal::Corrupt(_))).await;
}
