//! A batch commits the cursors and holds the changes (for `WRITE_AFTER`); an informer that
//! could not be resumed from its stored cut (its resource versions are not numbers), or that
//! has none yet, is written with every batch; a close writes what is held.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{flush, open};
use crate::{Cursor, StateWriter, Version};

const PODS: &str = "v1/pods";

fn record(
    journal: &StateWriter,
    informer: &str,
    seq: u64,
    key: &str,
    json: Option<&str>,
    rv: &str,
) {
    let json = json.map(|j| Arc::new(Box::<str>::from(j)) as crate::Text);
    journal.record_shared(&Arc::from(informer), seq, key, json, Some(rv));
}

/// Waits until a batch sent after `commits` were counted is committed, without a flush (a
/// flush writes everything held).
async fn committed_after(journal: &StateWriter, commits: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stats = journal.stats();
        if stats.commits > commits && stats.queued == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "never committed: {stats:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn stored(v: &[(u64, Option<&str>)]) -> Vec<Version> {
    v.iter()
        .map(|(seq, json)| (*seq, json.map(crate::StoredVersion::from)))
        .collect()
}

#[tokio::test]
async fn a_batch_commits_the_cursors_and_holds_the_changes() {
    let dir = tempfile::tempdir().unwrap();
    let (state, _) = open(dir.path());
    let journal = state.journal();
    record(&journal, PODS, 1, "ns/a", Some("a1"), "10");
    record(&journal, PODS, 2, "ns/b", Some("b1"), "11");
    journal.cursor("p", PODS, 2, Some(11), "s");
    flush(&journal).await;

    let commits = journal.stats().commits;
    record(&journal, PODS, 3, "ns/a", Some("a2"), "12");
    record(&journal, PODS, 4, "ns/a", Some("a3"), "13");
    record(&journal, PODS, 5, "ns/b", None, "14");
    journal.cursor("p", PODS, 5, Some(14), "s");
    committed_after(&journal, commits).await;

    let disk = state.peek();
    assert_eq!(
        disk.cursors[&("p".to_string(), PODS.to_string())],
        Cursor {
            seq: 5,
            version: Some(14),
            scope: "s".into()
        },
        "the cursor is committed with its batch"
    );
    let pods = &disk.informers[PODS];
    assert_eq!(
        (pods.resource_version.as_str(), pods.seq),
        ("11", 2),
        "the cache on disk is still the last cut's, whole"
    );
    assert_eq!(pods.versions["ns/a"], stored(&[(1, Some("a1"))]));
    assert_eq!(pods.versions["ns/b"], stored(&[(2, Some("b1"))]));
    drop(journal);
    drop(state);

    // A close writes what was held: each object once, as the cursor left it.
    let (state, _) = open(dir.path());
    let disk = state.peek();
    let pods = &disk.informers[PODS];
    assert_eq!((pods.resource_version.as_str(), pods.seq), ("14", 5));
    assert_eq!(pods.versions["ns/a"], stored(&[(4, Some("a3"))]));
    assert!(
        !pods.versions.contains_key("ns/b"),
        "a delete every cursor passed leaves nothing: {:?}",
        pods.versions
    );
}

#[tokio::test]
async fn an_informer_whose_versions_are_not_numbers_is_written_with_every_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (state, _) = open(dir.path());
    let journal = state.journal();
    record(&journal, "opaque", 1, "a", Some("a1"), "x-1");
    flush(&journal).await;

    // A watch could not resume from a cut: nothing to compare a cursor's version with.
    let commits = journal.stats().commits;
    record(&journal, "opaque", 2, "a", Some("a2"), "x-2");
    journal.cursor("p", "opaque", 2, None, "s");
    committed_after(&journal, commits).await;
    let disk = state.peek();
    let opaque = &disk.informers["opaque"];
    assert_eq!((opaque.resource_version.as_str(), opaque.seq), ("x-2", 2));
    assert_eq!(opaque.versions["a"].last(), Some(&(2, Some("a2".into()))));
}

#[tokio::test]
async fn an_informers_first_changes_are_written_with_the_batch_that_brings_them() {
    let dir = tempfile::tempdir().unwrap();
    let (state, _) = open(dir.path());
    let journal = state.journal();
    record(&journal, PODS, 1, "ns/a", Some("a1"), "10");
    flush(&journal).await;

    // A crash before a new informer's first cut would lose its cache.
    let commits = journal.stats().commits;
    record(&journal, "v1/configmaps", 1, "ns/c", Some("c1"), "20");
    record(&journal, PODS, 2, "ns/a", Some("a2"), "21");
    committed_after(&journal, commits).await;
    let disk = state.peek();
    let configmaps = &disk.informers["v1/configmaps"];
    assert_eq!(
        (configmaps.resource_version.as_str(), configmaps.seq),
        ("20", 1)
    );
    assert_eq!(configmaps.versions["ns/c"], stored(&[(1, Some("c1"))]));
    assert_eq!(
        disk.informers[PODS].versions["ns/a"],
        stored(&[(1, Some("a1"))]),
        "one with a cut stored holds its changes"
    );
}

#[tokio::test]
async fn a_flush_writes_what_is_held_in_commits_of_bounded_size() {
    let dir = tempfile::tempdir().unwrap();
    let (state, _) = open(dir.path());
    let journal = state.journal();
    record(&journal, PODS, 1, "ns/first", Some("f"), "1");
    flush(&journal).await;

    // Held in several batches (the writer is parked meanwhile), then flushed at once.
    const N: u64 = 12_000;
    for i in 0..N {
        let seq = i + 2;
        record(
            &journal,
            PODS,
            seq,
            &format!("ns/pod-{i}"),
            Some("{}"),
            &seq.to_string(),
        );
        if i % 1000 == 999 {
            let commits = journal.stats().commits;
            committed_after(&journal, commits).await;
        }
    }
    let commits = journal.stats().commits;
    flush(&journal).await;
    let flushed = journal.stats().commits - commits;
    assert!(
        flushed >= 3,
        "12,000 held changes in {flushed} commit(s): one transaction's cost grows with its size"
    );
    let disk = state.peek();
    let pods = &disk.informers[PODS];
    assert_eq!(pods.versions.len() as u64, N + 1);
    assert_eq!(
        (pods.resource_version.as_str(), pods.seq),
        ((N + 1).to_string().as_str(), N + 1)
    );
}

#[tokio::test]
async fn a_flush_after_churn_writes_every_objects_latest_version() {
    let dir = tempfile::tempdir().unwrap();
    let (state, _) = open(dir.path());
    let journal = state.journal();
    const N: u64 = 3_000;
    let mut seq = 0;
    for i in 0..N {
        seq += 1;
        record(
            &journal,
            PODS,
            seq,
            &format!("ns/pod-{i}"),
            Some("v1"),
            &seq.to_string(),
        );
    }
    flush(&journal).await;

    // Every object changes three more times, the plugin keeping up: most changes are
    // superseded while held, and the batches' marks cover fewer changes than they brought.
    let handled = Arc::new(std::sync::atomic::AtomicU64::new(seq));
    {
        let (journal, handled) = (journal.clone(), handled.clone());
        journal.clone().set_cursor_source(Arc::new(move || {
            let at = handled.load(std::sync::atomic::Ordering::Relaxed);
            journal.cursor("p", PODS, at, Some(at), "s");
        }));
    }
    for round in 2..=4 {
        for i in 0..N {
            seq += 1;
            let json = format!("v{round}");
            record(
                &journal,
                PODS,
                seq,
                &format!("ns/pod-{i}"),
                Some(&json),
                &seq.to_string(),
            );
            handled.store(seq, std::sync::atomic::Ordering::Relaxed);
            if seq % 500 == 0 {
                // Paced, as a watch delivers: a batch takes several of these.
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    }
    flush(&journal).await;
    let disk = state.peek();
    let pods = &disk.informers[PODS];
    assert_eq!(
        (pods.resource_version.clone(), pods.seq),
        (seq.to_string(), seq)
    );
    let stale: Vec<&String> = pods
        .versions
        .iter()
        .filter(|(_, v)| v.last().and_then(|(_, j)| j.as_ref()).map(|j| &*j.json) != Some("v4"))
        .map(|(k, _)| k)
        .collect();
    assert!(
        stale.is_empty(),
        "{} of {N} objects stored older than their latest version after a flush",
        stale.len()
    );
}
