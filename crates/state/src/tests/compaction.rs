//! Compaction keeps exactly what a lagging cursor still needs, and nothing once all have passed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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

/// What [`history`] leaves for a plugin that has handled it up to 2: it has seen k1@1 and k2@2
/// (the "old" side of what comes next), and needs all after.
fn as_a_cursor_at_2_needs() -> Versions {
    want(&[
        (
            "k1",
            &[(1, Some("k1v1")), (3, Some("k1v2")), (5, Some("k1v3"))],
        ),
        ("k2", &[(2, Some("k2v1")), (4, None)]),
        ("k3", &[(6, Some("k3v1"))]),
    ])
}

/// k1: 1, 3, 5; k2: 2, deleted at 4; k3: 6.
fn history(journal: &crate::StateWriter) {
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
    journal.cursor("fast", "inf", 0, None, "s");
    journal.cursor("slow", "inf", 0, None, "s");
    history(&journal);
    journal.cursor("fast", "inf", 6, None, "s");
    journal.cursor("slow", "inf", 2, None, "s");
    // Another informer's cursors do not hold this one back, nor the other way round.
    journal.record("other", 1, "k1", Some("o1"));
    journal.record("other", 2, "k1", Some("o2"));
    journal.cursor("slow", "other", 2, None, "s");
    flush(&journal).await;
    // slow has seen k1@1 and k2@2 (the "old" side of what comes next), and needs all after.
    assert_eq!(versions(&state, "inf"), as_a_cursor_at_2_needs());
    assert_eq!(
        versions(&state, "other"),
        want(&[("k1", &[(2, Some("o2"))])])
    );

    journal.cursor("slow", "inf", 4, None, "s");
    flush(&journal).await;
    assert_eq!(
        versions(&state, "inf"),
        want(&[
            ("k1", &[(3, Some("k1v2")), (5, Some("k1v3"))]),
            ("k3", &[(6, Some("k3v1"))])
        ])
    );

    journal.cursor("slow", "inf", 6, None, "s");
    flush(&journal).await;
    let steady = want(&[("k1", &[(5, Some("k1v3"))]), ("k3", &[(6, Some("k3v1"))])]);
    assert_eq!(versions(&state, "inf"), steady);

    // Recreating a deleted key after its tombstone was collected starts a fresh history.
    journal.record("inf", 7, "k2", Some("k2v2"));
    journal.cursor("fast", "inf", 7, None, "s");
    journal.cursor("slow", "inf", 7, None, "s");
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
    journal.cursor("slow", "inf", 0, None, "s");
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
        journal.cursor("slow", "inf", 0, None, "s");
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
    journal.cursor("slow", "inf", 4, None, "s");
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
            t.insert(("inf", 1), ("a", Some("a1"))).unwrap();
            t.insert(("inf", 2), ("a", Some("a2"))).unwrap();
            t.insert(("inf", 3), ("b", Some("b3"))).unwrap();
            t.insert(("inf", 4), ("b", None::<&str>)).unwrap();
        }
        txn.commit().unwrap();
    }
    let (state, aside) = open(dir.path());
    assert!(aside.is_none());
    // As a restart reads them: all of them, and the compaction learns them.
    assert_eq!(state.versions("inf").unwrap().len(), 2);
    assert_eq!(versions(&state, "inf"), want(&[("a", &[(2, Some("a2"))])]));
}

/// A cursor source standing for plugins that handle each change as it is recorded, and one
/// that stopped at `slow`.
fn source(
    journal: &crate::StateWriter,
    head: Arc<AtomicU64>,
    slow: Option<u64>,
) -> crate::CursorSource {
    let journal = journal.clone();
    Arc::new(move || {
        journal.cursor("fast", "inf", head.load(Ordering::SeqCst), None, "s");
        if let Some(slow) = slow {
            journal.cursor("slow", "inf", slow, None, "s");
        }
    })
}

#[tokio::test]
async fn a_version_superseded_in_its_own_batch_and_passed_by_every_cursor_is_never_written() {
    const BIG: usize = 256 * 1024;
    let big = |c: char| c.to_string().repeat(BIG);
    let mut written = Vec::new();
    for fresh in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (state, _) = open(dir.path());
        let journal = state.journal();
        let head = Arc::new(AtomicU64::new(0));
        if fresh {
            journal.set_cursor_source(source(&journal, head.clone(), None));
        } else {
            // As before the journal read cursors itself: one saved before the changes.
            journal.cursor("fast", "inf", 0, None, "s");
        }
        // A batch begins once the last one committed: the three records below form one
        // batch (barring a pause of a whole batch window between two of them).
        journal.record("inf", 0, "warm-up", Some("{}"));
        flush(&journal).await;
        let before = journal.stats().bytes_written;
        for (seq, c) in [(1, 'a'), (2, 'b'), (3, 'c')] {
            journal.record("inf", seq, "k", Some(&big(c)));
            head.store(seq, Ordering::SeqCst);
        }
        flush(&journal).await;
        written.push(journal.stats().bytes_written - before);
        let kept = versions(&state, "inf");
        if fresh {
            // The source's cursor is committed with the records it covers.
            assert_eq!(state.load().unwrap().cursors.len(), 1);
            assert_eq!(kept["k"].len(), 1, "only the latest is kept");
            assert_eq!(kept["k"][0].0, 3);
        } else {
            assert_eq!(kept["k"].len(), 3, "a cursor at 0 needs every version");
        }
    }
    // Without fresh cursors three copies are written; with them, one (two, should a pause
    // split the batch).
    assert!(
        written[0] > 3 * BIG as u64 && written[1] < 5 * BIG as u64 / 2,
        "bytes written: {written:?}"
    );
}

#[tokio::test]
async fn fresh_cursors_still_keep_what_a_lagging_plugin_needs() {
    let dir = tempfile::tempdir().unwrap();
    let (state, _) = open(dir.path());
    let journal = state.journal();
    let head = Arc::new(AtomicU64::new(0));
    journal.set_cursor_source(source(&journal, head.clone(), Some(2)));
    history(&journal);
    head.store(6, Ordering::SeqCst);
    flush(&journal).await;
    // Exactly as when the same cursors are sent by hand (see the test above).
    assert_eq!(versions(&state, "inf"), as_a_cursor_at_2_needs());
    let cursors = state.load().unwrap().cursors;
    assert_eq!(
        cursors
            .iter()
            .map(|((p, _), c)| (p.as_str(), c.seq))
            .collect::<Vec<_>>(),
        vec![("fast", 6), ("slow", 2)]
    );
}

#[tokio::test]
async fn a_cursor_source_that_panics_costs_its_batch_the_fresh_cursors_not_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let (state, _) = open(dir.path());
    let journal = state.journal();
    journal.set_cursor_source(Arc::new(|| panic!("a plugin's gauges are broken")));
    history(&journal);
    flush(&journal).await;
    journal.record("inf", 7, "k4", Some("k4v1"));
    flush(&journal).await;
    let stats = journal.stats();
    assert!(stats.degraded.is_none(), "{stats:?}");
    assert_eq!(stats.queued, 0);
    assert_eq!(
        versions(&state, "inf")["k4"],
        vec![(7, Some("k4v1".into()))]
    );
}
