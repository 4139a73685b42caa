//! The journal under load and under a failing disk; dead letters.

use std::sync::atomic::Ordering;

use super::{CLUSTER, flush, open};
use crate::{DeadLetter, MAX_DEAD_LETTERS_PER_PLUGIN, StateDir};

fn object(i: u64) -> String {
    format!(
        "{{\"metadata\":{{\"name\":\"pod-{i}\",\"namespace\":\"ns-{}\"}},\"spec\":{{\"n\":{i}}}}}",
        i % 7
    )
}

#[tokio::test]
async fn a_hundred_thousand_records_round_trip() {
    const N: u64 = 100_000;
    let dir = tempfile::tempdir().unwrap();
    let (state, _) = open(dir.path());
    let journal = state.journal();
    // From several threads at once, as informers would: the journal is Send + Sync and cheap to clone.
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let journal = journal.clone();
            let informer = format!("informer-{t}");
            s.spawn(move || {
                for i in 0..N / 4 {
                    journal.record(
                        &informer,
                        i + 1,
                        &format!("ns-{}/pod-{i}", i % 7),
                        Some(&object(i)),
                    );
                }
                journal.resource_version(&informer, &format!("rv-{}", N / 4), N / 4);
            });
        }
    });
    flush(&journal).await;
    let stats = journal.stats();
    assert_eq!(
        (stats.ops, stats.queued, stats.dropped_ops),
        (N + 4, 0, 0),
        "{stats:?}"
    );
    assert!(
        stats.commits >= 1 && stats.bytes_written > N * 60,
        "{stats:?}"
    );
    assert!(stats.degraded.is_none());
    drop(journal);
    drop(state);

    let (state, aside) = open(dir.path());
    assert!(aside.is_none());
    let snap = state.load().unwrap();
    assert_eq!(snap.informers.len(), 4);
    for (name, informer) in &snap.informers {
        assert_eq!(
            (informer.seq, informer.versions.len()),
            (N / 4, (N / 4) as usize),
            "{name}"
        );
        assert_eq!(informer.resource_version, format!("rv-{}", N / 4));
    }
    let i = 12_345u64;
    assert_eq!(
        snap.informers["informer-2"].versions[&format!("ns-{}/pod-{i}", i % 7)],
        vec![(i + 1, Some(object(i).into()))]
    );
}

#[tokio::test]
async fn a_full_disk_degrades_the_journal_without_panics_and_keeps_the_committed_prefix() {
    let dir = tempfile::tempdir().unwrap();
    // Writes fail like ENOSPC once 1 MiB was written since open.
    let (state, _) = StateDir::open_with_budget(dir.path(), CLUSTER, Some(1 << 20)).unwrap();
    let journal = state.journal();
    journal.record("inf", 1, "before", Some("{\"kept\":true}"));
    journal.cursor("p", "inf", 1, None, "s");
    flush(&journal).await;
    assert!(journal.stats().degraded.is_none());

    let big = "y".repeat(2048);
    for i in 0..5_000u64 {
        journal.record("inf", i + 2, &format!("k{i}"), Some(&big));
        if i % 500 == 0 {
            // Several batches, so the failure lands mid-stream rather than in the first commit.
            flush(&journal).await;
        }
    }
    flush(&journal).await;
    let stats = journal.stats();
    let why = stats.degraded.clone().expect("degraded");
    assert!(
        why.contains(FILE) && why.to_lowercase().contains("space"),
        "{why}"
    );
    assert!(stats.dropped_ops > 0 && stats.queued == 0, "{stats:?}");

    // Degraded: ops are dropped at the door, flushes resolve at once, nothing blocks.
    let dropped = stats.dropped_ops;
    journal.record("inf", 99_999, "after", Some("{}"));
    journal.cursor("p", "inf", 99_999, None, "s");
    flush(&journal).await;
    assert_eq!(journal.stats().dropped_ops, dropped + 2);
    drop(journal);
    drop(state);

    // The file holds a committed prefix: it opens without being set aside and has the first batch.
    let (state, aside) = open(dir.path());
    assert!(aside.is_none(), "{aside:?}");
    let snap = state.load().unwrap();
    assert_eq!(
        snap.informers["inf"].versions["before"],
        vec![(1, Some("{\"kept\":true}".into()))]
    );
    assert!(!snap.informers["inf"].versions.contains_key("after"));
}

const FILE: &str = crate::FILE_NAME;

fn letter(plugin: &str, n: u32) -> DeadLetter {
    DeadLetter {
        id: 0,
        plugin: plugin.into(),
        informer: "v1/pods".into(),
        key: format!("ns/pod-{n}"),
        resource_version: format!("{n}"),
        event: "updated".into(),
        error: format!("boom {n}"),
        attempts: n,
        at_unix_ms: 1_700_000_000_000 + i64::from(n),
    }
}

#[tokio::test]
async fn dead_letters_are_bounded_per_plugin_and_ids_stay_monotonic() {
    let dir = tempfile::tempdir().unwrap();
    let extra = 5;
    {
        let (state, _) = open(dir.path());
        let journal = state.journal();
        for n in 0..(MAX_DEAD_LETTERS_PER_PLUGIN as u32 + extra) {
            journal.dead_letter(letter("p1", n));
        }
        journal.dead_letter(letter("p2", 0));
        flush(&journal).await;
        assert_eq!(journal.stats().dead_letters_dropped, u64::from(extra));

        let p1 = state.dead_letters(Some("p1")).unwrap();
        assert_eq!(p1.len(), MAX_DEAD_LETTERS_PER_PLUGIN);
        assert_eq!(p1[0].id, u64::from(extra) + 1, "the oldest were dropped");
        assert_eq!(
            p1[0],
            DeadLetter {
                id: 6,
                ..letter("p1", extra)
            }
        );
        assert_eq!(
            state.dead_letters(None).unwrap().len(),
            MAX_DEAD_LETTERS_PER_PLUGIN + 1
        );
        assert_eq!(
            state.dead_letter_counts(),
            [
                ("p1".to_string(), MAX_DEAD_LETTERS_PER_PLUGIN as u64),
                ("p2".to_string(), 1)
            ]
            .into()
        );

        let taken = state.take_dead_letters("p1", &[6, 7, 999_999]).unwrap();
        assert_eq!(taken.iter().map(|l| l.id).collect::<Vec<_>>(), vec![6, 7]);
        assert!(state.take_dead_letters("p2", &[6]).unwrap().is_empty());
        assert_eq!(
            state.dead_letters(Some("p1")).unwrap().len(),
            MAX_DEAD_LETTERS_PER_PLUGIN - 2
        );
    }
    // After a restart, ids go on from where they were: a retried id is never reused.
    let (state, _) = open(dir.path());
    let journal = state.journal();
    journal.dead_letter(letter("p1", 0));
    flush(&journal).await;
    let last = state.dead_letters(Some("p1")).unwrap().pop().unwrap();
    assert_eq!(
        last.id,
        u64::from(MAX_DEAD_LETTERS_PER_PLUGIN as u32 + extra) + 1
    );
    assert_eq!(state.dead_letters(Some("p2")).unwrap()[0].id, 1);
}

#[tokio::test]
async fn dropping_the_state_commits_what_is_queued() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (state, _) = open(dir.path());
        let journal = state.journal();
        for i in 0..1000u64 {
            journal.record("inf", i + 1, &format!("k{i}"), Some("{}"));
        }
        drop(state);
        // A journal outliving its state drops ops and never blocks.
        journal.record("inf", 5000, "late", Some("{}"));
        flush(&journal).await;
        assert_eq!(journal.stats().queued, 0);
    }
    let (state, _) = open(dir.path());
    assert_eq!(state.load().unwrap().informers["inf"].versions.len(), 1000);
}

#[test]
fn the_journal_is_send_sync_and_cheap_to_clone() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<crate::StateWriter>();
    let _ = Ordering::Relaxed;
}

#[tokio::test]
async fn a_shared_record_carries_the_resource_version_it_reached() {
    let dir = tempfile::tempdir().unwrap();
    let (state, _) = open(dir.path());
    let journal = state.journal();
    let informer: std::sync::Arc<str> = "v1/configmaps".into();
    let text = |s: &str| Some(std::sync::Arc::new(Box::<str>::from(s)) as crate::Text);
    journal.record_shared(&informer, 1, "ns/a", text("{\"a\":1}"), Some("10"));
    journal.record_shared(&informer, 2, "ns/b", text("{\"b\":1}"), Some("11"));
    // A change that moved nothing (a relist's delete) keeps the version reached before it.
    journal.record_shared(&informer, 3, "ns/a", None, None);
    flush(&journal).await;
    let snap = state.load().unwrap();
    let kept = &snap.informers["v1/configmaps"];
    assert_eq!((kept.resource_version.as_str(), kept.seq), ("11", 3));
    assert_eq!(kept.versions["ns/b"][0].1, Some("{\"b\":1}".into()));
}

/// An object that hands the journal metadata beside its JSON, as an informer's cache does.
struct WithMeta(&'static str, Vec<u8>);

impl crate::Stored for WithMeta {
    fn json(&self) -> &str {
        self.0
    }
    fn meta(&self) -> Vec<u8> {
        self.1.clone()
    }
}

#[tokio::test]
async fn metadata_stored_beside_the_json_is_read_back_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let informer: std::sync::Arc<str> = "v1/pods".into();
    // Any bytes: the state does not read them.
    let meta = vec![0, 0xff, 1, 2, 0, 0xc3];
    {
        let (state, _) = open(dir.path());
        let journal = state.journal();
        let with = |json, meta: &[u8]| {
            Some(std::sync::Arc::new(WithMeta(json, meta.to_vec())) as crate::Text)
        };
        journal.record_shared(&informer, 1, "ns/a", with("{\"a\":1}", &meta), None);
        journal.record_shared(&informer, 2, "ns/b", with("{\"b\":1}", &[]), None);
        journal.record("v1/pods", 3, "ns/c", Some("{\"c\":1}"));
        journal.record_shared(&informer, 4, "ns/d", with("{\"d\":1}", &[9]), None);
        // Supersedes d@4, which no cursor holds: compacted away, metadata and all.
        journal.record_shared(&informer, 5, "ns/d", with("{\"d\":2}", &[8]), None);
        // The same version written again without metadata keeps none of the first write's.
        journal.record_shared(&informer, 6, "ns/e", with("{\"e\":1}", &[7]), None);
        journal.record("v1/pods", 6, "ns/e", Some("{\"e\":0}"));
        flush(&journal).await;
    }
    let (state, aside) = open(dir.path());
    assert!(aside.is_none(), "{aside:?}");
    let want = |json: &str, meta: &[u8]| {
        Some(crate::StoredVersion {
            json: json.into(),
            meta: meta.into(),
        })
    };
    let versions = state.versions("v1/pods").unwrap();
    assert_eq!(versions["ns/a"], vec![(1, want("{\"a\":1}", &meta))]);
    assert_eq!(versions["ns/b"], vec![(2, want("{\"b\":1}", &[]))]);
    assert_eq!(versions["ns/c"], vec![(3, want("{\"c\":1}", &[]))]);
    assert_eq!(versions["ns/d"], vec![(5, want("{\"d\":2}", &[8]))]);
    assert_eq!(versions["ns/e"], vec![(6, want("{\"e\":0}", &[]))]);
    assert_eq!(
        state.load().unwrap().informers["v1/pods"].versions,
        versions
    );
    drop(state);

    let db = redb::Database::open(dir.path().join(crate::FILE_NAME)).unwrap();
    let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
    let metas = txn.open_table(crate::tables::VERSION_META).unwrap();
    let seqs: Vec<u64> = redb::ReadableTable::iter(&metas)
        .unwrap()
        .map(|r| r.unwrap().0.value().1)
        .collect();
    assert_eq!(seqs, [1, 5], "only the stored versions', and none empty");
}
