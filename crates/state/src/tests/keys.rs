//! Object keys, informer ids and plugin ids are opaque strings: every one round-trips exactly and
//! none collides with another, whatever separators or look-alikes it holds.

use std::collections::BTreeMap;

use super::{flush, open};

const NASTY: &[&str] = &[
    "",
    " ",
    "a",
    "a ",
    "a/b",
    "a/b ",
    "a%2Fb",
    "a%2fb",
    "a//b",
    "/a/b",
    "a/b/",
    "..",
    "../a",
    "a/../b",
    ".",
    "ns/name",
    "ns\u{2215}name", // division slash
    "ns\u{ff0f}name", // fullwidth solidus
    "ｎｓ/name",      // fullwidth letters
    "caf\u{e9}",      // precomposed é
    "cafe\u{301}",    // e + combining acute
    "a\u{0}b",
    "a\u{0}",
    "|",
    "a|b",
    "a,b",
    "\u{1f600}/\u{1f600}",
    "a\tb",
    "a\nb",
];

#[tokio::test]
async fn nasty_keys_round_trip_exactly_and_never_collide() {
    let dir = tempfile::tempdir().unwrap();
    let (state, _) = open(dir.path());
    let journal = state.journal();
    let informers = [
        "apps/v1/deployments|ns=a,b|labels=x",
        "apps/v1/deployments|ns=a",
        "",
        "a/b",
    ];
    let mut want: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut seq = 0;
    for informer in informers {
        for key in NASTY {
            seq += 1;
            let json = format!("{{\"informer\":{informer:?},\"key\":{key:?}}}");
            journal.record(informer, seq, key, Some(&json));
            want.entry(informer.into())
                .or_default()
                .insert((*key).into(), json);
        }
        // A cursor per informer that has seen everything keeps only the latest versions.
        journal.cursor("p", informer, seq, None, "s");
    }
    // Plugin and informer ids that would collide if joined naively.
    journal.cursor("a", "bc", 1, None, "a+bc");
    journal.cursor("ab", "c", 2, None, "ab+c");
    journal.cursor("a/b", "c", 3, None, "a/b+c");
    journal.cursor("a", "b/c", 4, None, "a+b/c");
    flush(&journal).await;
    drop(journal);
    drop(state);

    let (state, aside) = open(dir.path());
    assert!(aside.is_none());
    let snap = state.load().unwrap();
    let got: BTreeMap<String, BTreeMap<String, String>> = snap
        .informers
        .iter()
        .map(|(informer, st)| {
            let keys = st
                .versions
                .iter()
                .map(|(k, vs)| {
                    assert_eq!(vs.len(), 1, "{informer:?} {k:?}: {vs:?}");
                    (k.clone(), vs[0].1.as_ref().unwrap().json.to_string())
                })
                .collect();
            (informer.clone(), keys)
        })
        .collect();
    assert_eq!(got, want);
    // Read one informer at a time, the same, and never a neighbour's (`a/b` vs `a/b ...`).
    for informer in informers {
        let one: BTreeMap<String, String> = state
            .versions(informer)
            .unwrap()
            .into_iter()
            .map(|(k, vs)| (k, vs[0].1.as_ref().unwrap().json.to_string()))
            .collect();
        assert_eq!(one, want[informer], "{informer:?}");
    }
    assert!(
        state
            .versions("apps/v1/deployments|ns=")
            .unwrap()
            .is_empty()
    );
    let index = state.load_index().unwrap();
    assert!(index.informers.values().all(|i| i.versions.is_empty()));
    assert_eq!(index.cursors, snap.cursors);
    let scopes: Vec<(&str, &str, &str)> = snap
        .cursors
        .iter()
        .filter(|((p, _), _)| p != "p")
        .map(|((p, i), c)| (p.as_str(), i.as_str(), c.scope.as_str()))
        .collect();
    assert_eq!(
        scopes,
        vec![
            ("a", "b/c", "a+b/c"),
            ("a", "bc", "a+bc"),
            ("a/b", "c", "a/b+c"),
            ("ab", "c", "ab+c")
        ]
    );
}

#[tokio::test]
async fn forgetting_a_plugin_leaves_plugins_with_prefix_names_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (state, _) = open(dir.path());
    let journal = state.journal();
    for plugin in ["a", "a ", "ab", "a/b", "", "a\u{0}"] {
        journal.cursor(plugin, "i", 1, None, plugin);
    }
    journal.forget_plugin("a");
    flush(&journal).await;
    let plugins: Vec<String> = state
        .load()
        .unwrap()
        .cursors
        .into_keys()
        .map(|(p, _)| p)
        .collect();
    assert_eq!(plugins, vec!["", "a\u{0}", "a ", "a/b", "ab"]);
}
