use super::*;
use std::sync::atomic::{AtomicU64, Ordering};

/// A watermark the test moves; 0 means unknown.
struct Mark(AtomicU64);

impl Watermark for Mark {
    fn handled_through_version(&self) -> Option<u64> {
        Some(self.0.load(Ordering::SeqCst)).filter(|v| *v != 0)
    }
}

fn mark(v: u64) -> Arc<Mark> {
    Arc::new(Mark(AtomicU64::new(v)))
}

/// A Lease read at resourceVersion 1,000,000, publishing `plugins` as (plugin, scope,
/// informer, watermark), each as running (`held`).
fn seen(member: &str, live: bool, plugins: &[(&str, &str, &str, u64)]) -> Seen {
    let mut map: BTreeMap<String, Entry> = BTreeMap::new();
    for (p, scope, inf, w) in plugins {
        let e = map.entry(p.to_string()).or_insert_with(|| Entry {
            scope: scope.to_string(),
            at: BTreeMap::new(),
            held: true,
        });
        e.at.insert(inf.to_string(), *w);
    }
    Seen {
        member: member.into(),
        live,
        version: Some(1_000_000),
        plugins: map,
    }
}

#[test]
fn without_a_known_last_holder_a_plugin_resumes_from_the_lowest_watermark_of_its_scope() {
    let book = CursorBook::new();
    book.observe(vec![
        seen("a", false, &[("t/p", "s1", "pods", 100)]),
        seen("b", false, &[("t/p", "s1", "pods", 250)]),
        // Another scope (a changed watch): not a cursor for this one.
        seen("c", true, &[("t/q", "s2", "pods", 900)]),
    ]);
    assert_eq!(book.cursor("t/p", "s1", "pods"), Some(100));
    assert_eq!(book.cursor("t/p", "s1", "configmaps"), None);
    assert_eq!(book.cursor("t/q", "s1", "pods"), None);
}

#[test]
fn the_member_seen_running_a_plugin_while_live_is_the_one_resumed_from() {
    let book = CursorBook::new();
    // b runs p, a's Lease still carries an old cursor of it from before.
    book.observe(vec![
        seen("a", false, &[("p", "s", "pods", 100)]),
        seen("b", true, &[("p", "s", "pods", 400)]),
    ]);
    // b crashes: its Lease stops changing. a's older cursor is the lowest, but b is who
    // last ran it, so the changes b handled are not handed over again.
    let mut a = seen("a", false, &[("p", "s", "pods", 100)]);
    a.plugins.get_mut("p").unwrap().held = false;
    book.observe(vec![a, seen("b", false, &[("p", "s", "pods", 400)])]);
    assert_eq!(book.cursor("p", "s", "pods"), Some(400));
    // While two live members both run it (a join, for up to a renewal), the lower counts.
    book.observe(vec![
        seen("b", true, &[("p", "s", "pods", 500)]),
        seen("d", true, &[("p", "s", "pods", 450)]),
    ]);
    assert_eq!(book.cursor("p", "s", "pods"), Some(450));
}

#[test]
fn a_cursor_at_or_past_its_leases_own_resource_version_is_ignored() {
    let book = CursorBook::new();
    let mut forged = seen("a", true, &[("p", "s", "pods", u64::MAX)]);
    forged.version = Some(5_000);
    let mut equal = seen("b", false, &[("p", "s", "pods", 7_000)]);
    equal.version = Some(7_000);
    let mut unreadable = seen("c", false, &[("p", "s", "pods", 10)]);
    unreadable.version = None;
    book.observe(vec![forged, equal, unreadable]);
    // a is the last holder, but its cursor is absurd: the lowest sane candidate is none.
    assert_eq!(book.cursor("p", "s", "pods"), None);
    let mut sane = seen("d", false, &[("p", "s", "pods", 4_000)]);
    sane.version = Some(4_001);
    let mut forged = seen("a", true, &[("p", "s", "pods", u64::MAX)]);
    forged.version = Some(5_000);
    book.observe(vec![forged, sane]);
    assert_eq!(book.cursor("p", "s", "pods"), Some(4_000));
}

#[test]
fn a_member_leaving_the_view_keeps_its_cursors_until_a_live_member_covers_them() {
    let book = CursorBook::new();
    book.observe(vec![
        seen("a", true, &[("p", "s", "pods", 300)]),
        seen("b", true, &[("q", "s", "pods", 10)]),
    ]);
    // a's Pod is gone: its Lease no longer counts, and is garbage-collected.
    book.observe(vec![seen("b", true, &[("q", "s", "pods", 10)])]);
    assert_eq!(book.cursor("p", "s", "pods"), Some(300));
    // b takes p over and publishes it further on: a's record is no longer needed.
    book.observe(vec![seen(
        "b",
        true,
        &[("q", "s", "pods", 10), ("p", "s", "pods", 350)],
    )]);
    assert_eq!(book.cursor("p", "s", "pods"), Some(350));
    assert!(book.book.lock().departed.is_empty());
    // Departed members are bounded.
    for i in 0..(MAX_DEPARTED + 10) {
        book.observe(vec![seen(
            &format!("m{i}"),
            false,
            &[("x", "s", "pods", 1)],
        )]);
    }
    book.observe(vec![]);
    assert_eq!(book.book.lock().departed.len(), MAX_DEPARTED);
}

#[test]
fn the_lowest_handler_on_an_informer_is_the_plugins_watermark_and_unknown_leaves_it_out() {
    let book = CursorBook::new();
    let (fast, slow, unknown) = (mark(50), mark(40), mark(0));
    book.track("p", "s", "pods", fast.clone());
    book.track("p", "s", "pods", slow.clone());
    book.track("p", "s", "cms", unknown.clone());
    let doc: Document = serde_json::from_str(&book.annotation()).unwrap();
    assert_eq!(
        doc.plugins["p"].at,
        BTreeMap::from([("pods".to_string(), 40)])
    );
    assert!(doc.plugins["p"].held);
    slow.0.store(60, Ordering::SeqCst);
    assert_eq!(book.cursor("p", "s", "pods"), Some(50));
}

#[test]
fn a_released_plugin_keeps_its_last_watermark_until_a_live_member_publishes_it() {
    let book = CursorBook::new();
    let m = mark(70);
    book.track("p", "s", "pods", m.clone());
    book.release("p");
    // Moving on after release changes nothing: the handler is gone.
    m.0.store(99, Ordering::SeqCst);
    assert_eq!(book.cursor("p", "s", "pods"), Some(70));
    let text = book.annotation();
    assert!(
        text.contains("\"pods\":70") && !text.contains("held"),
        "{text}"
    );
    // A dead member publishing it does not supersede; a live one does.
    book.observe(vec![seen("x", false, &[("p", "s", "pods", 75)])]);
    assert!(book.annotation().contains("\"pods\":70"));
    book.observe(vec![seen("y", true, &[("p", "s", "pods", 80)])]);
    assert!(!book.annotation().contains("\"p\""));
    assert_eq!(book.cursor("p", "s", "pods"), Some(80));
}

/// A live member's Lease claiming to run a plugin, with a watermark below this member's
/// release (as anyone with Lease write access can write it), does not make this member forget
/// its cursors: they stay published until a watermark reaches them.
#[test]
fn a_held_claim_below_a_release_does_not_supersede_it() {
    let book = CursorBook::new();
    book.track("p", "s", "pods", mark(70));
    book.release("p");
    book.observe(vec![seen("y", true, &[("p", "s", "pods", 10)])]);
    assert!(
        book.annotation().contains("\"pods\":70"),
        "{}",
        book.annotation()
    );
    book.observe(vec![seen("y", true, &[("p", "s", "pods", 70)])]);
    assert!(!book.annotation().contains("\"p\""));
}

#[test]
fn a_dead_lease_is_superseded_only_when_live_cursors_reach_every_one_of_its_own() {
    let book = CursorBook::new();
    book.track("a", "s", "pods", mark(10));
    book.observe(vec![seen("live", true, &[("b", "s", "pods", 30)])]);
    let dead = seen(
        "dead",
        false,
        &[("a", "s", "pods", 10), ("b", "s", "pods", 20)],
    );
    assert!(book.supersedes(&dead.plugins));
    // A plugin nobody live publishes, one published only further back, or under another
    // scope: the dead Lease holds the best cursor there is.
    for (p, scope, w) in [("c", "s", 1), ("b", "s", 31), ("a", "t", 1)] {
        let dead = seen("dead", false, &[(p, scope, "pods", w)]);
        assert!(!book.supersedes(&dead.plugins), "{p} {scope} {w}");
    }
    // A stale release here does not cover the newer cursors a member that left published.
    let book = CursorBook::new();
    book.track("p", "s", "pods", mark(5));
    book.release("p");
    let left = seen("left", false, &[("p", "s", "pods", 40)]);
    assert!(!book.supersedes(&left.plugins));
}

#[test]
fn hostile_annotations_count_as_no_cursors() {
    for text in [
        "",
        "null",
        "{\"v\":2,\"plugins\":{}}",
        "{\"v\":1,\"plugins\":{\"p\":{\"scope\":1}}}",
        "{\"v\":1,\"plugins\":{\"p\":{\"scope\":\"s\",\"at\":{\"pods\":-1}}}}",
        "{\"v\":1,\"plugins\":{\"p\":{\"scope\":\"s\",\"at\":{},\"held\":\"yes\"}}}",
        &"[".repeat(10_000),
    ] {
        assert_eq!(parse(text), None, "{text:.40}");
    }
    let ok = parse("{\"v\":1,\"plugins\":{\"p\":{\"scope\":\"s\",\"at\":{\"pods\":7}}}}");
    let ok = ok.unwrap();
    assert_eq!(ok["p"].at["pods"], 7);
    assert!(
        !ok["p"].held,
        "an entry of an older member is not a claim to run it"
    );
}

#[test]
fn an_oversized_book_is_trimmed_to_what_a_lease_holds() {
    let book = CursorBook::new();
    for i in 0..5000 {
        book.track(
            &format!("tenant/plugin-{i:05}"),
            &"s".repeat(24),
            &"i".repeat(40),
            mark(i + 1),
        );
    }
    let text = book.annotation();
    assert!(text.len() <= MAX_ANNOTATION_BYTES, "{}", text.len());
    assert!(parse(&text).unwrap().len() > 1000);
}

/// Per plugin, (scope, informer, watermark) as the state directory keeps them.
fn stored(plugins: &[(&str, &str, &str, u64)]) -> BTreeMap<String, Entry> {
    seen("me", false, plugins).plugins
}

#[test]
fn a_restarted_members_previous_life_counts_and_is_published_until_it_takes_the_plugin_back() {
    let book = CursorBook::new();
    // What its Lease said when it stopped, read at resourceVersion 5,000: one cursor forged
    // past the Lease's own version, one of a plugin it is no longer given.
    let mut life = seen(
        "me",
        false,
        &[
            ("p", "s", "pods", 4_000),
            ("q", "s", "pods", 4_100),
            ("forged", "s", "pods", 9_000),
        ],
    );
    life.version = Some(5_000);
    book.adopt_previous_lease(life.clone());
    assert_eq!(book.cursor("p", "s", "pods"), Some(4_000));
    assert_eq!(book.cursor("forged", "s", "pods"), None);
    assert_eq!(book.previous("p"), Some(Source::Lease));
    // Published as released, so a crash before it takes them back loses nothing, and a
    // member taking one over finds it.
    let doc = parse(&book.annotation()).unwrap();
    assert_eq!(doc["p"].at["pods"], 4_000);
    assert!(!doc["p"].held);
    assert!(!doc.contains_key("forged"));
    // Read again (a first renewal that failed and retried): the same, not doubled.
    book.adopt_previous_lease(life);
    assert_eq!(parse(&book.annotation()).unwrap().len(), 2);
    // Taken back: this life's watermark from then on.
    book.track("p", "s", "pods", mark(4_500));
    assert_eq!(book.previous("p"), None);
    assert!(parse(&book.annotation()).unwrap()["p"].held);
    // A plugin removed from the plugins directory while it was down is not handed on.
    let present = BTreeSet::from(["p".to_string()]);
    assert_eq!(book.keep_only(&present), ["q"]);
    assert!(!parse(&book.annotation()).unwrap().contains_key("q"));
}

#[test]
fn the_previous_life_never_replaces_what_this_life_released_or_runs() {
    let book = CursorBook::new();
    book.track("run", "s", "pods", mark(700));
    book.track("rel", "s", "pods", mark(600));
    book.release("rel");
    book.adopt_previous_lease(seen(
        "me",
        false,
        &[("run", "s", "pods", 10), ("rel", "s", "pods", 20)],
    ));
    book.adopt_stored(stored(&[
        ("run", "s", "pods", 11),
        ("rel", "s", "pods", 21),
    ]));
    assert_eq!(book.cursor("run", "s", "pods"), Some(700));
    assert_eq!(book.cursor("rel", "s", "pods"), Some(600));
    assert_eq!(book.previous("rel"), None);
}

#[test]
fn the_state_directorys_cursor_is_taken_over_the_leases_whichever_is_read_first() {
    for state_first in [false, true] {
        let book = CursorBook::new();
        // The Lease: a renewal older than the state on pods (a crash), or rewritten lower
        // by a Lease writer on cms; a third informer the state has no cursor for.
        let lease = seen(
            "me",
            false,
            &[
                ("p", "s", "pods", 100),
                ("p", "s", "cms", 10),
                ("p", "s", "svc", 70),
            ],
        );
        let state = stored(&[("p", "s", "pods", 150), ("p", "s", "cms", 90)]);
        if state_first {
            book.adopt_stored(state);
            book.adopt_previous_lease(lease);
        } else {
            book.adopt_previous_lease(lease);
            book.adopt_stored(state);
        }
        assert_eq!(book.cursor("p", "s", "pods"), Some(150), "{state_first}");
        assert_eq!(book.cursor("p", "s", "cms"), Some(90), "{state_first}");
        assert_eq!(book.cursor("p", "s", "svc"), Some(70), "{state_first}");
        assert_eq!(book.previous("p"), Some(Source::State));
    }
    // Under another scope the Lease's cursors are not merged in.
    let book = CursorBook::new();
    book.adopt_stored(stored(&[("p", "new", "pods", 150)]));
    book.adopt_previous_lease(seen("me", false, &[("p", "old", "cms", 5)]));
    assert_eq!(book.cursor("p", "old", "cms"), None);
    assert_eq!(book.cursor("p", "new", "pods"), Some(150));
}

#[test]
fn a_member_that_ran_the_plugin_meanwhile_wins_over_the_previous_life_and_the_state_forgets_it() {
    let book = CursorBook::new();
    let forgotten: Arc<Mutex<Vec<String>>> = Arc::default();
    let f = forgotten.clone();
    book.on_superseded(Arc::new(move |p| f.lock().push(p.to_string())));
    book.adopt_stored(stored(&[("p", "s", "pods", 150), ("q", "s", "pods", 150)]));
    // b took p over while this member was down and runs it: its cursor is the one, and this
    // member's record of p is no longer anyone's best.
    book.observe(vec![seen("b", true, &[("p", "s", "pods", 300)])]);
    assert_eq!(book.cursor("p", "s", "pods"), Some(300));
    assert_eq!(*forgotten.lock(), ["p"]);
    assert!(!parse(&book.annotation()).unwrap().contains_key("p"));
    // A live member's older release of q (its own previous life's, say) does not replace
    // this member's newer record; a further one does.
    let mut older = seen("c", true, &[("q", "s", "pods", 40)]);
    older.plugins.get_mut("q").unwrap().held = false;
    book.observe(vec![seen("b", true, &[("p", "s", "pods", 300)]), older]);
    assert_eq!(*forgotten.lock(), ["p"]);
    assert!(parse(&book.annotation()).unwrap().contains_key("q"));
    let mut further = seen("c", true, &[("q", "s", "pods", 160)]);
    further.plugins.get_mut("q").unwrap().held = false;
    book.observe(vec![further]);
    assert_eq!(*forgotten.lock(), ["p", "q"]);
}

#[test]
fn without_a_known_holder_the_previous_life_is_one_more_candidate_and_the_lowest_wins() {
    let book = CursorBook::new();
    book.adopt_stored(stored(&[("p", "s", "pods", 150)]));
    // A dead member's Lease, never seen live by this life: not a known holder. Its cursor
    // cannot be shown to be this member's own, so the lowest is resumed from.
    book.observe(vec![seen("b", false, &[("p", "s", "pods", 300)])]);
    assert_eq!(book.cursor("p", "s", "pods"), Some(150));
    book.observe(vec![seen("b", false, &[("p", "s", "pods", 90)])]);
    assert_eq!(book.cursor("p", "s", "pods"), Some(90));
}
