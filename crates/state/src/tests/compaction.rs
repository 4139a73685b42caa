//! Compaction keeps exactly what a lagging cursor still needs, and nothing once all have passed.

use std::collections::BTreeMap;

use redb::Database;

use super::{flush, open};
use crate::FILE_NAME;
use crate::tables::VERSIONS;

type Versions = BTreeMap<String, Vec<crate::Version>>;

fn versions(state: &crate::StateDir, informer: &str) -> Versions {
    state
        .load()
        .unwrap()
        .informers
        .get(informer)
        .map(|i| i.versions.clone())
        .unwrap_or_default()
}

/// A key and its expected (seq, json) versions.
type Expected<'a> = (&'a str, &'a [(u64, Option<&'a str>)]);

fn want(rows: &[Expected<'_>]) -> Versions {
    rows.iter()
        .map(|(k, vs)| {
            (
                (*k).to_owned(),
                vs.iter()
                    .map(|(s, j)| (*s, j.map(crate::StoredVersion::from)))
                    .collect(),
            )
        })
        .collect()
}

/// k1: 1, 3, 5; k2: 2, deleted at 4; k3: 6.
fn history(journal: &crate::Journal) {
    journal.record("inf", 1, "k1", Some("k1v1"));
    journal.record("inf", 2, "k2", Some("k2v1"));
    journal.record("inf", 3, "k1", Some("k1v2"));
    journal.record("inf", 4, "k2", None);
    journal.record("inf", 5, "k1", Some("k1v3"));
    journal.record("inf", 6, "k3", Some("k3v1"));
    journal.resource_version("inf", "rv6", 6);
}

#[tokio::test]
async fn a_lagging_cursor_keeps_exactly_what_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let (state, _) = open(dir.path());
    let journal = state.journal();
    journal.cursor("fast", "inf", 0, "s");
    journal.cursor("slow", "inf", 0, "s");
    history(&journal);
    journal.cursor("fast", "inf", 6, "s");
    journal.cursor("slow", "inf", 2, "s");
    // Another informer's cursors do not hold this one back, nor the other way round.
    journal.record("other", 1, "k1", Some("o1"));
    journal.record("other", 2, "k1", Some("o2"));
    journal.cursor("slow", "other", 2, "s");
    flush(&journal).await;
    // slow has seen k1@1 and k2@2 (the "old" side of what comes next), and needs all after.
    assert_eq!(
        versions(&state, "inf"),
        want(&[
            (
                "k1",
                &[(1, Some("k1v1")), (3, Some("k1v2")), (5, Some("k1v3"))]
            ),
            ("k2", &[(2, Some("k2v1")), (4, None)]),
            ("k3", &[(6, Some("k3v1"))]),
        ])
    );
    assert_eq!(
        versions(&state, "other"),
        want(&[("k1", &[(2, Some("o2"))])])
    );

    journal.cursor("slow", "inf", 4, "s");
    flush(&journal).await;
    assert_eq!(
        versions(&state, "inf"),
        want(&[
            ("k1", &[(3, Some("k1v2")), (5, Some("k1v3"))]),
            ("k3", &[(6, Some("k3v1"))])
        ])
    );

    journal.cursor("slow", "inf", 6, "s");
    flush(&journal).await;
    let steady = want(&[("k1", &[(5, Some("k1v3"))]), ("k3", &[(6, Some("k3v1"))])]);
    assert_eq!(versions(&state, "inf"), steady);

    // Recreating a deleted key after its tombstone was collected starts a fresh history.
    journal.record("inf", 7, "k2", Some("k2v2"));
    journal.cursor("fast", "inf", 7, "s");
    journal.cursor("slow", "inf", 7, "s");
    flush(&journal).await;
    let snap = state.load().unwrap();
    assert_eq!(
        snap.informers["inf"].versions["k2"],
        vec![(7, Some("k2v2".into()))]
    );
    assert_eq!(
        (
            snap.informers["inf"].seq,
            snap.informers["inf"].resource_version.as_str()
        ),
        (7, "rv6")
    );
}

#[tokio::test]
async fn without_cursors_only_the_latest_live_versions_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (state, _) = open(dir.path());
    let journal = state.journal();
    history(&journal);
    flush(&journal).await;
    assert_eq!(
        versions(&state, "inf"),
        want(&[("k1", &[(5, Some("k1v3"))]), ("k3", &[(6, Some("k3v1"))])])
    );
}

#[tokio::test]
async fn forgetting_the_lagging_plugin_lets_compaction_proceed() {
    let dir = tempfile::tempdir().unwrap();
    let (state, _) = open(dir.path());
    let journal = state.journal();
    journal.cursor("slow", "inf", 0, "s");
    history(&journal);
    flush(&journal).await;
    assert_eq!(
        versions(&state, "inf")
            .values()
            .map(Vec::len)
            .sum::<usize>(),
        6
    );
    journal.forget_plugin("slow");
    flush(&journal).await;
    assert_eq!(
        versions(&state, "inf"),
        want(&[("k1", &[(5, Some("k1v3"))]), ("k3", &[(6, Some("k3v1"))])])
    );
    assert!(state.load().unwrap().cursors.is_empty());
}

#[tokio::test]
async fn compaction_resumes_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (state, _) = open(dir.path());
        let journal = state.journal();
        journal.cursor("slow", "inf", 0, "s");
        history(&journal);
        flush(&journal).await;
    }
    let (state, _) = open(dir.path());
    assert_eq!(
        versions(&state, "inf")
            .values()
            .map(Vec::len)
            .sum::<usize>(),
        6
    );
    // The index rebuilt at open knows what each cursor move frees.
    let journal = state.journal();
    journal.cursor("slow", "inf", 4, "s");
    flush(&journal).await;
    assert_eq!(
        versions(&state, "inf"),
        want(&[
            ("k1", &[(3, Some("k1v2")), (5, Some("k1v3"))]),
            ("k3", &[(6, Some("k3v1"))])
        ])
    );
}

#[tokio::test]
async fn garbage_found_when_the_versions_are_read_is_deleted_then() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    {
        // History no journal would leave behind: superseded versions and a passed tombstone.
        let db = Database::open(dir.path().join(FILE_NAME)).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut t = txn.open_table(VERSIONS).unwrap();
            t.insert(("inf", "a", 1), Some("a1")).unwrap();
            t.insert(("inf", "a", 2), Some("a2")).unwrap();
            t.insert(("inf", "b", 3), Some("b3")).unwrap();
            t.insert(("inf", "b", 4), None::<&str>).unwrap();
        }
        txn.commit().unwrap();
    }
    let (state, aside) = open(dir.path());
    assert!(aside.is_none());
    // As a restart reads them: all of them, and the compaction learns them.
    assert_eq!(state.versions("inf").unwrap().len(), 2);
    assert_eq!(versions(&state, "inf"), want(&[("a", &[(2, Some("a2"))])]));
}
