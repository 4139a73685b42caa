//! Dead letters bounded per plugin and per tenant, and dropped with their plugin.

use std::collections::BTreeMap;

use super::{flush, open};
use crate::{
    DeadLetter, MAX_DEAD_LETTERS_PER_PLUGIN, MAX_DEAD_LETTERS_PER_TENANT, StateDir, StateWriter,
};

/// A letter of `plugin` given up on at `at` (ms), its key naming both.
fn letter(plugin: &str, at: i64) -> DeadLetter {
    DeadLetter {
        id: 0,
        plugin: plugin.into(),
        informer: "v1/configmaps".into(),
        key: format!("ns/{at}"),
        resource_version: at.to_string(),
        event: "added".into(),
        error: "boom".into(),
        attempts: 3,
        at_unix_ms: at,
    }
}

/// The letters in the file, counted per plugin; checked against the writers' counts.
fn counts(state: &StateDir) -> BTreeMap<String, u64> {
    let mut stored: BTreeMap<String, u64> = BTreeMap::new();
    for l in state.dead_letters(None).unwrap() {
        *stored.entry(l.plugin).or_default() += 1;
    }
    assert_eq!(
        state.dead_letter_counts(),
        stored,
        "the kept counts match the file"
    );
    stored
}

fn tenant_total(state: &StateDir, tenant: &str) -> u64 {
    counts(state)
        .iter()
        .filter(|(p, _)| crate::tenant_of(p) == tenant)
        .map(|(_, n)| n)
        .sum()
}

/// `n` letters of each of `plugins`, interleaved, at increasing times from `from`.
fn send(journal: &StateWriter, plugins: &[&str], n: usize, from: i64) -> i64 {
    let mut at = from;
    for _ in 0..n {
        for p in plugins {
            journal.dead_letter(letter(p, at));
            at += 1;
        }
    }
    at
}

#[tokio::test]
async fn a_tenants_plugins_together_keep_at_most_its_bound_dropping_its_oldest() {
    let dir = tempfile::tempdir().unwrap();
    let (state, _) = open(dir.path());
    let journal = state.journal();
    // Six plugins of one tenant, each under its own bound, together past the tenant's.
    let team: Vec<String> = (0..6).map(|i| format!("team-a/p{i}")).collect();
    let team: Vec<&str> = team.iter().map(String::as_str).collect();
    let per_plugin = MAX_DEAD_LETTERS_PER_TENANT / 5;
    assert!(per_plugin <= MAX_DEAD_LETTERS_PER_PLUGIN);
    // Another tenant's and the operator's letters, older than all of team-a's.
    let at = send(&journal, &["team-b/q", "top"], 10, 0);
    let end = send(&journal, &team, per_plugin, at);
    flush(&journal).await;

    assert_eq!(
        tenant_total(&state, "team-a"),
        MAX_DEAD_LETTERS_PER_TENANT as u64
    );
    let sent = (6 * per_plugin) as u64;
    assert_eq!(
        journal.stats().dead_letters_dropped,
        sent - MAX_DEAD_LETTERS_PER_TENANT as u64
    );
    // What was kept is the newest: every letter kept is newer than every one dropped.
    let kept: Vec<i64> = state
        .dead_letters(None)
        .unwrap()
        .into_iter()
        .filter(|l| l.plugin.starts_with("team-a/"))
        .map(|l| l.at_unix_ms)
        .collect();
    let oldest_kept = kept.iter().min().unwrap();
    assert_eq!(*oldest_kept, end - MAX_DEAD_LETTERS_PER_TENANT as i64);
    // Other tenants lost nothing to team-a's flood.
    assert_eq!(counts(&state)["team-b/q"], 10);
    assert_eq!(counts(&state)["top"], 10);
}

#[tokio::test]
async fn one_plugin_keeps_at_most_its_own_bound() {
    let dir = tempfile::tempdir().unwrap();
    let (state, _) = open(dir.path());
    let journal = state.journal();
    send(&journal, &["team-a/p"], MAX_DEAD_LETTERS_PER_PLUGIN + 7, 0);
    flush(&journal).await;
    assert_eq!(
        counts(&state)["team-a/p"],
        MAX_DEAD_LETTERS_PER_PLUGIN as u64
    );
    assert_eq!(journal.stats().dead_letters_dropped, 7);
    assert_eq!(
        state.dead_letters(Some("team-a/p")).unwrap()[0].at_unix_ms,
        7
    );
}

#[tokio::test]
async fn a_removed_plugins_letters_are_dropped_and_counted_and_no_one_elses() {
    let dir = tempfile::tempdir().unwrap();
    let (state, _) = open(dir.path());
    let journal = state.journal();
    send(&journal, &["team-a/gone", "team-a/stays", "gone"], 5, 0);
    journal.drop_dead_letters("team-a/gone");
    journal.drop_dead_letters("gone");
    flush(&journal).await;
    assert_eq!(
        counts(&state),
        BTreeMap::from([("team-a/stays".to_string(), 5)])
    );
    assert_eq!(journal.stats().dead_letters_dropped, 10);
    // A plugin of that name added later starts afresh.
    journal.dead_letter(letter("team-a/gone", 100));
    flush(&journal).await;
    assert_eq!(state.dead_letters(Some("team-a/gone")).unwrap()[0].id, 1);
}

#[tokio::test]
async fn letters_taken_by_an_operator_make_room_and_the_bound_holds_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (state, _) = open(dir.path());
        let journal = state.journal();
        let team: Vec<String> = (0..5).map(|i| format!("t/p{i}")).collect();
        let team: Vec<&str> = team.iter().map(String::as_str).collect();
        send(&journal, &team, MAX_DEAD_LETTERS_PER_TENANT / 5, 0);
        flush(&journal).await;
        assert_eq!(journal.stats().dead_letters_dropped, 0);
        // Ten taken: ten more (of another plugin, under its own bound) fit without dropping any.
        let ids: Vec<u64> = (1..=10).collect();
        assert_eq!(state.take_dead_letters("t/p0", &ids).unwrap().len(), 10);
        send(&journal, &["t/p5"], 10, 1_000_000);
        flush(&journal).await;
        assert_eq!(journal.stats().dead_letters_dropped, 0);
        assert_eq!(
            tenant_total(&state, "t"),
            MAX_DEAD_LETTERS_PER_TENANT as u64
        );
    }
    // Counted again at open: one more drops the tenant's oldest.
    let (state, _) = open(dir.path());
    let journal = state.journal();
    journal.dead_letter(letter("t/p4", 2_000_000));
    flush(&journal).await;
    assert_eq!(journal.stats().dead_letters_dropped, 1);
    assert_eq!(
        tenant_total(&state, "t"),
        MAX_DEAD_LETTERS_PER_TENANT as u64
    );
}
