//! The store's unit tests: synthetic pods through applies, deletes and relists, checked
//! against its indexes and queries.

use super::*;
use crate::StoredObject;
use crate::event::EventType;
use kube::core::GroupVersionKind;

fn store() -> Store {
    Store::new(
        ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Pod")),
        StoreOptions::default(),
    )
}

fn pod(ns: &str, name: &str, rv: u32, labels: &str, owner: Option<&str>) -> RawObject {
    let owners = owner
        .map(|o| {
            format!(
                r#","ownerReferences":[{{"apiVersion":"v1","kind":"X","name":"o","uid":"{o}"}}]"#
            )
        })
        .unwrap_or_default();
    let json = format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"{ns}","uid":"uid-{name}","resourceVersion":"{rv}","labels":{{{labels}}}{owners}}},"spec":{{"nodeName":"node-{rv}"}}}}"#
    );
    serde_json::from_str(&json).unwrap()
}

fn collect(f: impl FnOnce(&mut dyn FnMut(Event))) -> Vec<(EventType, String, bool)> {
    let mut out = Vec::new();
    f(&mut |e: Event| out.push((e.event_type, e.key().to_string(), e.final_state_unknown)));
    out.sort_by(|a, b| a.1.cmp(&b.1));
    out
}

fn names(v: Vec<Arc<CachedObject>>) -> Vec<String> {
    let mut n: Vec<String> = v.iter().map(|o| o.key().to_string()).collect();
    n.sort();
    n
}

fn sel(s: &str) -> LabelSelector {
    s.parse().unwrap()
}

#[test]
fn indexes_follow_add_update_delete_and_label_changes() {
    let s = store();
    let mut sink = |_e: Event| {};
    s.apply(pod("a", "p1", 1, r#""app":"web""#, Some("rs1")), &mut sink);
    s.apply(pod("a", "p2", 2, r#""app":"db""#, Some("rs1")), &mut sink);
    s.apply(pod("b", "p3", 3, r#""app":"web""#, None), &mut sink);
    assert_eq!(
        names(s.by_index("label", "app=web").unwrap()),
        ["a/p1", "b/p3"]
    );
    assert_eq!(names(s.by_index("owner", "rs1").unwrap()), ["a/p1", "a/p2"]);
    assert_eq!(
        names(s.by_index("namespace", "a").unwrap()),
        ["a/p1", "a/p2"]
    );

    // Label change moves the key between index values; owner removed.
    s.apply(pod("a", "p1", 4, r#""app":"db""#, None), &mut sink);
    assert_eq!(names(s.by_index("label", "app=web").unwrap()), ["b/p3"]);
    assert_eq!(
        names(s.by_index("label", "app=db").unwrap()),
        ["a/p1", "a/p2"]
    );
    assert_eq!(names(s.by_index("owner", "rs1").unwrap()), ["a/p2"]);

    // Update that keeps a value must keep it indexed.
    s.apply(pod("a", "p2", 5, r#""app":"db""#, Some("rs1")), &mut sink);
    assert_eq!(names(s.by_index("owner", "rs1").unwrap()), ["a/p2"]);

    s.delete(pod("a", "p2", 6, r#""app":"db""#, Some("rs1")), &mut sink);
    assert!(s.by_index("owner", "rs1").unwrap().is_empty());
    assert_eq!(names(s.by_index("label", "app=db").unwrap()), ["a/p1"]);
    assert_eq!(s.len(), 2);
}

#[test]
fn field_indexes_are_held_shared_and_released() {
    let s = Arc::new(store());
    let mut sink = |_e: Event| {};
    s.apply(pod("a", "p1", 1, "", None), &mut sink);
    let node: FieldPath = "spec.nodeName".parse().unwrap();
    let held = s.add_field_index(node.clone());
    let look = |id, v: &str| names(s.lookup(id, v, Visibility::All));
    assert_eq!(look(held.id(), "node-1"), ["a/p1"]);
    s.apply(pod("a", "p1", 2, "", None), &mut sink);
    s.apply(pod("a", "p9", 2, "", None), &mut sink);
    assert!(look(held.id(), "node-1").is_empty());
    assert_eq!(look(held.id(), "node-2"), ["a/p1", "a/p9"]);
    // The same path again shares the index; another path gets its own.
    let again = s.add_field_index(node);
    assert_eq!(again.id(), held.id());
    let other = s.add_field_index("metadata.uid".parse().unwrap());
    assert_ne!(other.id(), held.id());
    assert_eq!(s.field_index_count(), 2);
    drop(held);
    assert_eq!(look(again.id(), "node-2"), ["a/p1", "a/p9"], "still held");
    drop(again);
    assert_eq!(s.field_index_count(), 1);
    // A freed position is reused, and filled from the objects already cached.
    let reused = s.add_field_index("spec.nodeName".parse().unwrap());
    assert_eq!(look(reused.id(), "node-2"), ["a/p1", "a/p9"]);
    assert_eq!(look(other.id(), "uid-p1"), ["a/p1"]);
    let err = s.by_index("nodes", "x").unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown index `nodes` (declared: namespace, label, owner)"
    );
}

#[test]
fn odd_spellings_of_a_key_find_nothing() {
    let s = store();
    let mut sink = |_e: Event| {};
    s.apply(pod("team-b", "b-secret", 1, "", None), &mut sink);
    assert!(s.get(Some("team-b"), "b-secret").is_some());
    assert!(s.get(None, "team-b/b-secret").is_none());
    assert!(s.get(Some("team-b/b-secret"), "").is_none());
    assert!(s.get(Some(""), "team-b/b-secret").is_none());
    assert!(s.get(Some("team"), "b/b-secret").is_none());
    assert!(s.list(Some(""), &sel("")).is_empty());
    assert!(s.by_index("namespace", "").unwrap().is_empty());
}

#[test]
fn a_limited_query_never_touches_other_namespaces() {
    let s = store();
    let mut sink = |_e: Event| {};
    s.apply(pod("a", "p1", 1, r#""app":"web""#, None), &mut sink);
    for i in 0..50 {
        s.apply(
            pod("b", &format!("q{i}"), 2, r#""app":"web""#, None),
            &mut sink,
        );
    }
    let asked = std::cell::RefCell::new(Vec::new());
    let only_a = |ns: Option<&str>| {
        asked.borrow_mut().push(ns.map(str::to_string));
        ns == Some("a")
    };
    let vis = Visibility::Only(&only_a);
    assert_eq!(names(s.list_in(None, &sel("app=web"), vis)), ["a/p1"]);
    assert_eq!(names(s.list_in(None, &sel(""), vis)), ["a/p1"]);
    assert_eq!(names(s.list_in(None, &sel("!tier"), vis)), ["a/p1"]);
    let label = Store::builtin_index("label").unwrap();
    assert_eq!(names(s.lookup(label, "app=web", vis)), ["a/p1"]);
    // Each query asked about each namespace group once, not about each of b's objects.
    assert_eq!(asked.borrow().len(), 8, "{:?}", asked.borrow());
}

#[test]
fn list_by_namespace_and_selector() {
    let s = store();
    let mut sink = |_e: Event| {};
    s.apply(
        pod("a", "p1", 1, r#""app":"web","tier":"fe""#, None),
        &mut sink,
    );
    s.apply(pod("a", "p2", 2, r#""app":"web""#, None), &mut sink);
    s.apply(
        pod("b", "p3", 3, r#""app":"web","tier":"fe""#, None),
        &mut sink,
    );
    assert_eq!(names(s.list(None, &sel(""))), ["a/p1", "a/p2", "b/p3"]);
    assert_eq!(names(s.list(Some("a"), &sel("app=web"))), ["a/p1", "a/p2"]);
    assert_eq!(names(s.list(Some("a"), &sel("tier"))), ["a/p1"]);
    assert_eq!(names(s.list(None, &sel("app=web,!tier"))), ["a/p2"]);
    assert_eq!(
        names(s.list(None, &sel("tier in (fe),app"))),
        ["a/p1", "b/p3"]
    );
    assert!(s.list(Some("zzz"), &sel("")).is_empty());
    assert!(s.list(None, &sel("app=nope")).is_empty());
}

#[test]
fn replace_diffs_against_the_store() {
    let s = store();
    let first = collect(|sink| {
        s.replace(
            vec![
                pod("a", "keep", 1, "", None),
                pod("a", "change", 1, "", None),
                pod("a", "gone", 1, "", None),
            ],
            &mut |e| sink(e),
        )
    });
    assert!(s.has_synced());
    assert_eq!(first.len(), 3);
    assert!(first.iter().all(|(t, _, _)| *t == EventType::Added));

    let mut initial_flags = Vec::new();
    let events = collect(|sink| {
        s.replace(
            vec![
                pod("a", "keep", 1, "", None),
                pod("a", "change", 2, "", None),
                pod("a", "new", 3, "", None),
            ],
            &mut |e| {
                initial_flags.push(e.initial);
                sink(e)
            },
        )
    });
    assert_eq!(
        events,
        vec![
            (EventType::Updated, "a/change".to_string(), false),
            (EventType::Deleted, "a/gone".to_string(), true),
            (EventType::Added, "a/new".to_string(), false),
        ]
    );
    assert!(
        initial_flags.iter().all(|i| !i),
        "only the first list is initial"
    );
    assert!(s.get(Some("a"), "gone").is_none());
    assert_eq!(s.get(Some("a"), "change").unwrap().resource_version(), "2");
}

#[test]
fn a_relist_shares_unchanged_objects_and_follows_indexes_declared_while_it_arrives() {
    let s = Arc::new(store());
    let mut sink = |_e: Event| {};
    s.replace(
        vec![
            pod("a", "keep", 1, "", None),
            pod("a", "change", 1, "", None),
        ],
        &mut sink,
    );
    let kept = s.get(Some("a"), "keep").unwrap();
    let mut relist = s.begin_relist();
    s.relist_push(&mut relist, pod("a", "keep", 1, "", None));
    s.relist_push(&mut relist, pod("a", "change", 2, "", None));
    // Declared after `change` was frozen with the old set of indexes, before `new`.
    let node = s.add_field_index("spec.nodeName".parse().unwrap());
    s.relist_push(&mut relist, pod("a", "new", 3, "", None));
    assert_eq!(relist.len(), 3);
    let events = collect(|sink| s.finish_relist(relist, &mut |e| sink(e)));
    assert_eq!(
        events,
        vec![
            (EventType::Updated, "a/change".to_string(), false),
            (EventType::Added, "a/new".to_string(), false),
        ]
    );
    assert!(
        Arc::ptr_eq(&kept, &s.get(Some("a"), "keep").unwrap()),
        "an unchanged object is the stored copy, not a second one"
    );
    let look = |v: &str| names(s.lookup(node.id(), v, Visibility::All));
    assert_eq!(look("node-1"), ["a/keep"]);
    assert_eq!(look("node-2"), ["a/change"], "recomputed for the new index");
    assert_eq!(look("node-3"), ["a/new"]);
}

#[test]
fn same_resource_version_is_not_an_event_and_unknown_deletes_are_ignored() {
    let s = store();
    let events = collect(|sink| {
        s.apply(pod("a", "p", 1, "", None), &mut |e| sink(e));
        s.apply(pod("a", "p", 1, "", None), &mut |e| sink(e));
        s.delete(pod("a", "ghost", 1, "", None), &mut |e| sink(e));
    });
    assert_eq!(events, vec![(EventType::Added, "a/p".to_string(), false)]);
}

/// What a resuming handler is given, comparable across orders among equal change numbers.
fn given(events: Vec<Event>) -> Vec<(u64, EventType, String, String, String)> {
    let mut out: Vec<_> = events
        .into_iter()
        .map(|e| {
            let old = e
                .old_object
                .as_ref()
                .map(|o| o.resource_version().to_string())
                .unwrap_or_default();
            (
                e.seq,
                e.event_type,
                e.key().to_string(),
                e.object.resource_version().to_string(),
                old,
            )
        })
        .collect();
    out.sort();
    out
}

/// Random restored histories, then random changes (updates, deletes, new keys, deletes of
/// restored keys): from every change a handler may have handled up to, the fast path gives
/// exactly what a scan of every key gives.
#[test]
fn changes_since_gives_what_a_scan_of_every_key_gives() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let json = |name: &str, rv: u64| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"ns","uid":"u-{name}","resourceVersion":"{rv}"}}}}"#
        )
    };
    for _ in 0..300 {
        let s = store();
        let mut seq = 0;
        let mut versions = Vec::new();
        for k in 0..8 {
            let name = format!("p{k}");
            let mut list = Vec::new();
            for _ in 0..next(4) {
                seq += 1 + next(2);
                let gone = next(4) == 0;
                list.push((seq, (!gone).then(|| json(&name, seq))));
            }
            if !list.is_empty() {
                versions.push((format!("ns/{name}"), list));
            }
        }
        let (restored, _) = s.restore(versions, seq + next(3));
        let mut sink = |_e: Event| {};
        for _ in 0..next(8) {
            let name = format!("p{}", next(10));
            let rv = 1000 + next(1000);
            if next(3) == 0 {
                s.delete(pod("ns", &name, rv as u32, "", None), &mut sink);
            } else {
                s.apply(pod("ns", &name, rv as u32, "", None), &mut sink);
            }
        }
        for since in 0..=s.seq() + 1 {
            let fast = s.changes_since(&restored, since, |_, events| events);
            let all = s.changes_since_scanning_all(&restored, since);
            assert_eq!(given(fast), given(all), "since {since}");
        }
    }
}

/// Deterministic bytes (xorshift64).
fn noise(len: usize) -> Vec<u8> {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}

/// A store's restore, given each object's JSON and, per `frozen`, its frozen metadata.
fn restored_from(
    s: &Store,
    objects: &[(&str, CachedObject)],
    frozen: impl Fn(&CachedObject) -> Vec<u8>,
) -> RestoreReport {
    let versions = objects.iter().enumerate().map(|(at, (key, o))| {
        let stored = StoredObject::new(o.json(), frozen(o));
        (*key, vec![(at as u64 + 1, Some(stored))])
    });
    s.restore(versions, 0).1
}

fn cached(raw: RawObject, strip_managed_fields: bool) -> CachedObject {
    let pods = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Pod"));
    CachedObject::from_raw(&mut raw.clone(), &pods, strip_managed_fields)
}

/// A cached object as a comparable tuple: key, metadata fields, labels, owner uids, JSON.
type Contents = (String, Vec<u8>, Vec<(String, String)>, Vec<String>, String);

/// Every cached object, sorted.
fn contents(s: &Store) -> Vec<Contents> {
    let mut all: Vec<_> = s
        .list(None, &LabelSelector::default())
        .iter()
        .map(|o| {
            (
                o.key().to_string(),
                o.metadata_fields().to_vec(),
                o.labels()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                o.owner_uids().map(str::to_string).collect(),
                o.json().to_string(),
            )
        })
        .collect();
    all.sort();
    all
}

fn some_pods() -> Vec<(&'static str, CachedObject)> {
    vec![
        (
            "a/p1",
            cached(pod("a", "p1", 1, r#""app":"web""#, Some("rs1")), true),
        ),
        (
            "a/p2",
            cached(pod("a", "p2", 2, r#""app":"db","z":"""#, None), true),
        ),
        ("b/p3", cached(pod("b", "p3", 3, "", Some("rs2")), true)),
    ]
}

#[test]
fn a_restore_from_frozen_metadata_caches_what_parsing_caches() {
    let objects = some_pods();
    let (frozen, parsed) = (store(), store());
    let report = restored_from(&frozen, &objects, CachedObject::frozen);
    assert_eq!(report, restored_from(&parsed, &objects, |_| Vec::new()));
    assert_eq!(report.objects, 3);
    assert_eq!(contents(&frozen).len(), 3);
    assert_eq!(contents(&frozen), contents(&parsed));
    for s in [&frozen, &parsed] {
        assert_eq!(names(s.by_index("label", "app=web").unwrap()), ["a/p1"]);
        assert_eq!(names(s.by_index("owner", "rs2").unwrap()), ["b/p3"]);
        assert_eq!(
            names(s.by_index("namespace", "a").unwrap()),
            ["a/p1", "a/p2"]
        );
    }
}

#[test]
fn a_restore_from_frozen_metadata_does_not_parse_the_json() {
    let s = store();
    let object = cached(pod("a", "p1", 1, r#""app":"web""#, None), true);
    let versions = vec![(
        "a/p1",
        vec![(1, Some(StoredObject::new("{not json", object.frozen())))],
    )];
    let (_, report) = s.restore(versions, 0);
    assert_eq!((report.objects, report.unreadable), (1, 0));
    let restored = s.get(Some("a"), "p1").unwrap();
    assert_eq!(restored.json(), "{not json", "kept as stored, never read");
    assert_eq!(restored.label("app"), Some("web"));
}

#[test]
fn frozen_metadata_that_does_not_read_falls_back_to_parsing() {
    let objects = some_pods();
    let parsed = store();
    restored_from(&parsed, &objects, |_| Vec::new());
    type Garble = fn(Vec<u8>) -> Vec<u8>;
    let garbles: [(&str, Garble); 6] = [
        ("truncated", |mut b| {
            b.truncate(b.len() / 2);
            b
        }),
        ("one byte", |b| b[..1].to_vec()),
        ("another version", |mut b| {
            b[0] = b[0].wrapping_add(1);
            b
        }),
        ("huge metadata length", |mut b| {
            b[2..6].copy_from_slice(&u32::MAX.to_le_bytes());
            b
        }),
        ("not UTF-8", |mut b| {
            // The namespace's first byte.
            b[10] = 0xff;
            b
        }),
        ("noise", |b| noise(b.len())),
    ];
    for (what, garble) in garbles {
        let s = store();
        let report = restored_from(&s, &objects, |o| garble(o.frozen()));
        assert_eq!((report.objects, report.unreadable), (3, 0), "{what}");
        assert_eq!(contents(&s), contents(&parsed), "{what}");
    }
    // Unreadable both ways: left out, as unreadable JSON always was.
    let s = store();
    let versions = vec![(
        "a/p1",
        vec![(1, Some(StoredObject::new("{not json", vec![1, 2])))],
    )];
    assert_eq!(s.restore(versions, 0).1.unreadable, 1);
}

#[test]
fn frozen_metadata_of_json_a_store_would_change_falls_back_to_parsing() {
    let raw: RawObject = serde_json::from_str(
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"a",
            "managedFields":[{"manager":"m"}]}}"#,
    )
    .unwrap();
    let kept = cached(raw, false);
    assert!(kept.json().contains("managedFields"));
    let s = store();
    assert!(s.options().strip_managed_fields);
    let (_, report) = s.restore(
        vec![(
            "a/p",
            vec![(1, Some(StoredObject::new(kept.json(), kept.frozen())))],
        )],
        0,
    );
    assert_eq!(report.objects, 1);
    let restored = s.get(Some("a"), "p").unwrap();
    assert!(
        !restored.json().contains("managedFields"),
        "stripped as parsing does"
    );
    assert_eq!(
        restored.frozen(),
        cached(serde_json::from_str(kept.json()).unwrap(), true).frozen()
    );
}

#[test]
fn frozen_metadata_of_another_key_or_scope_is_refused() {
    // Stored under another key: refused, not parsed instead.
    let s = store();
    let object = cached(pod("a", "p1", 1, "", None), true);
    let versions = vec![(
        "a/other",
        vec![(1, Some(StoredObject::new(object.json(), object.frozen())))],
    )];
    let (_, report) = s.restore(versions, 0);
    assert_eq!((report.objects, report.unreadable), (0, 1));

    // A namespaced object in a cluster-scoped store: refused and counted, as a parsed one is.
    let nodes = Store::new(
        ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Node")),
        StoreOptions {
            namespaced: Some(false),
            ..StoreOptions::default()
        },
    );
    let versions = vec![(
        "a/p1",
        vec![(1, Some(StoredObject::new(object.json(), object.frozen())))],
    )];
    let (_, report) = nodes.restore(versions, 0);
    assert_eq!((report.objects, report.unreadable), (0, 1));
    assert_eq!(nodes.refused_objects(), 1);
}
