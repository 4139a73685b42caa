//! The shared informer driven by hand, as its reflector would drive it.

use super::*;
use crate::event::EventType;
use crate::processor::FnHandler;
use kube::core::GroupVersionKind;
use std::collections::HashMap;

/// An informer that is never started: tests drive `apply` directly, as the reflector would.
pub(super) fn informer() -> Arc<SharedInformer> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    let api = Api::all_with(client, &ar);
    SharedInformer::new(
        api,
        ar,
        "test".into(),
        ReflectorConfig::default(),
        StoreOptions::default(),
    )
}

pub(super) fn cm(name: &str, rv: u64) -> RawObject {
    serde_json::from_str(&format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}},"data":{{"v":"{rv}"}}}}"#
    ))
    .unwrap()
}

/// What a handler believes the world is, rebuilt from its events; any gap or duplicate
/// shows up as an event that does not fit the state before it.
#[derive(Default)]
pub(super) struct Mirror {
    pub(super) objects: HashMap<String, String>,
    pub(super) violations: Vec<String>,
    pub(super) seen_end: bool,
}

impl Mirror {
    fn apply(&mut self, e: &Event) {
        let key = e.key().to_string();
        let rv = e.object.resource_version().to_string();
        if key == "ns/end" {
            self.seen_end = true;
            return;
        }
        match e.event_type {
            EventType::Added => {
                if let Some(prev) = self.objects.insert(key.clone(), rv) {
                    self.violations
                        .push(format!("duplicate add of {key} (had {prev})"));
                }
            }
            EventType::Updated => {
                let old = e
                    .old_object
                    .as_ref()
                    .map(|o| o.resource_version().to_string());
                let had = self.objects.insert(key.clone(), rv);
                if had != old {
                    self.violations
                        .push(format!("update of {key} from {old:?} but had {had:?}"));
                }
            }
            EventType::Deleted => {
                if self.objects.remove(&key).is_none() {
                    self.violations.push(format!("delete of unknown {key}"));
                }
            }
            EventType::Resync => {}
        }
    }
}

pub(super) fn mirror_handler(
    m: Arc<parking_lot::Mutex<Mirror>>,
    done: Arc<tokio::sync::Notify>,
) -> impl Handler {
    FnHandler(move |e: Event| {
        let mut m = m.lock();
        m.apply(&e);
        if m.seen_end {
            done.notify_one();
        }
    })
}

/// Waits until every handler saw the `end` marker, then checks that each one's mirror has no
/// gap or duplicate and ends with the store's state; the handles, for more checks.
pub(super) async fn mirrors_end_at_the_store(
    inf: &SharedInformer,
    handlers: Vec<(
        ListenerHandle,
        Arc<parking_lot::Mutex<Mirror>>,
        Arc<tokio::sync::Notify>,
    )>,
) -> Vec<ListenerHandle> {
    let expected: HashMap<String, String> = inf.store().read_consistent(|_, objs| {
        objs.filter(|o| o.name() != "end")
            .map(|o| (o.key().to_string(), o.resource_version().to_string()))
            .collect()
    });
    let mut out = Vec::new();
    for (h, mirror, done) in handlers {
        tokio::time::timeout(Duration::from_secs(30), async {
            while !mirror.lock().seen_end {
                done.notified().await;
            }
        })
        .await
        .expect("handler did not reach the end marker");
        let m = mirror.lock();
        assert!(
            m.violations.is_empty(),
            "{}: {:?}",
            h.name(),
            &m.violations[..m.violations.len().min(5)]
        );
        assert_eq!(
            m.objects,
            expected,
            "{} ends with the store's state",
            h.name()
        );
        drop(m);
        out.push(h);
    }
    out
}

/// An informer with 200 objects, and a thread writing 40,000 changes to it (updates, and a
/// delete every 97th) while a test registers handlers.
pub(super) fn informer_under_writes() -> (Arc<SharedInformer>, std::thread::JoinHandle<()>) {
    let inf = informer();
    inf.apply(Delta::Replace(
        (0..200).map(|i| cm(&format!("k{i}"), i + 1)).collect(),
    ));
    let writer = {
        let inf = inf.clone();
        std::thread::spawn(move || {
            let mut rv = 1_000u64;
            for i in 0..40_000u64 {
                let name = format!("k{}", (i * 31) % 300);
                rv += 1;
                if i % 97 == 0 {
                    inf.apply(Delta::Delete(cm(&name, rv)));
                } else {
                    inf.apply(Delta::Apply(cm(&name, rv)));
                }
            }
        })
    };
    (inf, writer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_registration_under_concurrent_writes_has_no_gap_and_no_duplicate() {
    let (inf, writer) = informer_under_writes();

    let mut handlers = Vec::new();
    for n in 0..8 {
        let mirror = Arc::new(parking_lot::Mutex::new(Mirror::default()));
        let done = Arc::new(tokio::sync::Notify::new());
        let h = inf.add_handler(
            &format!("h{n}"),
            mirror_handler(mirror.clone(), done.clone()),
            HandlerOptions::default(),
        );
        handlers.push((h, mirror, done));
        tokio::task::yield_now().await;
        std::thread::sleep(Duration::from_micros(300)); // spread registrations across the writes
    }
    writer.join().unwrap();
    inf.apply(Delta::Apply(cm("end", 1_000_000)));

    for h in mirrors_end_at_the_store(&inf, handlers).await {
        assert!(
            h.is_synced(),
            "{} was registered after sync and replayed",
            h.name()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_handler_delays_nobody_and_stays_bounded() {
    let inf = informer();
    inf.apply(Delta::Replace(vec![]));
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    struct Stalled(Arc<tokio::sync::Semaphore>);
    impl Handler for Stalled {
        async fn handle(&mut self, _e: Event) {
            let _ = self.0.acquire().await;
        }
    }
    let stalled = inf.add_handler("stalled", Stalled(gate.clone()), HandlerOptions::default());
    let mirror = Arc::new(parking_lot::Mutex::new(Mirror::default()));
    let done = Arc::new(tokio::sync::Notify::new());
    let fast = inf.add_handler(
        "fast",
        mirror_handler(mirror.clone(), done.clone()),
        HandlerOptions::default(),
    );
    for i in 0..20_000u64 {
        inf.apply(Delta::Apply(cm(&format!("k{}", i % 50), i + 1)));
    }
    inf.apply(Delta::Apply(cm("end", 1_000_000)));
    tokio::time::timeout(Duration::from_secs(30), async {
        while !mirror.lock().seen_end {
            done.notified().await;
        }
    })
    .await
    .expect("the fast handler was held up");
    assert_eq!(mirror.lock().objects.len(), 50);
    assert!(
        stalled.backlog() <= 51,
        "stalled backlog {} is bounded by keys",
        stalled.backlog()
    );
    assert!(fast.is_synced());
    gate.close();
    stalled.remove();
    fast.remove();
    assert_eq!(inf.handler_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn resync_redelivers_the_cache_per_handler() {
    let inf = informer();
    inf.apply(Delta::Replace(vec![cm("a", 1), cm("b", 2)]));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let h = inf.add_handler(
        "resyncing",
        FnHandler(move |e: Event| {
            let _ = tx.send((e.event_type, e.object.name().to_string(), e.initial));
        }),
        HandlerOptions {
            resync_period: Some(Duration::from_secs(60)),
            ..Default::default()
        },
    );
    let mut initial = vec![rx.recv().await.unwrap(), rx.recv().await.unwrap()];
    initial.sort();
    assert_eq!(
        initial,
        vec![
            (EventType::Added, "a".into(), true),
            (EventType::Added, "b".into(), true)
        ]
    );
    h.wait_synced().await;
    // Paused time jumps to the next tick as soon as everything is idle.
    let mut resynced = vec![rx.recv().await.unwrap(), rx.recv().await.unwrap()];
    resynced.sort();
    assert_eq!(
        resynced,
        vec![
            (EventType::Resync, "a".into(), false),
            (EventType::Resync, "b".into(), false)
        ]
    );
    // A handler without a period never gets resyncs.
    let (tx2, mut rx2) = tokio::sync::mpsc::unbounded_channel();
    let _quiet = inf.add_handler(
        "quiet",
        FnHandler(move |e: Event| {
            let _ = tx2.send(e.event_type);
        }),
        HandlerOptions::default(),
    );
    tokio::time::sleep(Duration::from_secs(600)).await;
    let mut kinds = Vec::new();
    while let Ok(k) = rx2.try_recv() {
        kinds.push(k);
    }
    assert_eq!(kinds, vec![EventType::Added, EventType::Added]);
}

#[tokio::test]
async fn handler_registered_before_sync_is_synced_after_the_first_list() {
    let inf = informer();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let h = inf.add_handler(
        "early",
        FnHandler(move |e: Event| {
            let _ = tx.send(e.initial);
        }),
        HandlerOptions::default(),
    );
    assert!(!h.is_synced());
    inf.apply(Delta::Replace(vec![cm("a", 1)]));
    h.wait_synced().await;
    assert!(rx.recv().await.unwrap(), "first-list events are initial");
    assert!(inf.has_synced());
}

#[tokio::test]
async fn a_list_arrives_object_by_object_and_one_begun_again_starts_over() {
    let inf = informer();
    inf.apply(Delta::ListBegin);
    inf.apply(Delta::ListItem(cm("abandoned", 1)));
    assert!(
        inf.store().is_empty(),
        "nothing is stored before the list ends"
    );
    // The watcher restarts a list that failed half way: what came before does not count.
    inf.apply(Delta::ListBegin);
    inf.apply(Delta::ListItem(cm("a", 1)));
    inf.apply(Delta::ListItem(cm("b", 2)));
    assert!(!inf.has_synced());
    inf.apply(Delta::ListEnd);
    assert!(inf.has_synced());
    let mut keys: Vec<String> = inf
        .store()
        .list(None, &informant_apimachinery::LabelSelector::default())
        .iter()
        .map(|o| o.key().to_string())
        .collect();
    keys.sort();
    assert_eq!(keys, ["ns/a", "ns/b"]);
}

#[tokio::test(start_paused = true)]
async fn a_filter_hides_other_objects_in_replay_live_and_resync() {
    let inf = informer();
    inf.apply(Delta::Replace(vec![cm("a", 1), cm("b", 2)]));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let h = inf.add_handler(
        "only-a",
        FnHandler(move |e: Event| {
            let _ = tx.send((e.event_type, e.object.name().to_string()));
        }),
        HandlerOptions {
            resync_period: Some(Duration::from_secs(60)),
            filter: Some(EventFilter::new(|o| o.name() == "a")),
            ..Default::default()
        },
    );
    // Received before the update so the queue cannot coalesce the two.
    assert_eq!(rx.recv().await.unwrap(), (EventType::Added, "a".into()));
    inf.apply(Delta::Apply(cm("b", 3)));
    inf.apply(Delta::Apply(cm("a", 4)));
    inf.apply(Delta::Delete(cm("b", 5)));
    assert_eq!(rx.recv().await.unwrap(), (EventType::Updated, "a".into()));
    assert_eq!(rx.recv().await.unwrap(), (EventType::Resync, "a".into()));
    assert_eq!(h.backlog(), 0, "rejected events never queue");
}

#[tokio::test(start_paused = true)]
async fn a_change_filter_drops_only_updates_it_does_not_pass() {
    let inf = informer();
    inf.apply(Delta::Replace(vec![cm("a", 1)]));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let offered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = offered.clone();
    let h = inf.add_handler(
        "odd-only",
        FnHandler(move |e: Event| {
            let _ = tx.send((e.event_type, e.object.resource_version().to_string()));
        }),
        HandlerOptions {
            resync_period: Some(Duration::from_secs(60)),
            // Passes an update only to an odd resourceVersion.
            changes: Some(super::ChangeFilter::new(move |e| {
                counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                e.object.resource_version().parse::<u64>().unwrap() % 2 == 1
            })),
            ..Default::default()
        },
    );
    assert_eq!(rx.recv().await.unwrap(), (EventType::Added, "1".into()));
    // Queued before the handler's task runs: coalesced into one update, 1 -> 3, offered once.
    inf.apply(Delta::Apply(cm("a", 2)));
    inf.apply(Delta::Apply(cm("a", 3)));
    assert_eq!(rx.recv().await.unwrap(), (EventType::Updated, "3".into()));
    // a's update to 4 is dropped: b, queued after it, comes next.
    inf.apply(Delta::Apply(cm("a", 4)));
    inf.apply(Delta::Apply(cm("b", 5)));
    assert_eq!(rx.recv().await.unwrap(), (EventType::Added, "5".into()));
    inf.apply(Delta::Delete(cm("a", 6)));
    assert_eq!(rx.recv().await.unwrap(), (EventType::Deleted, "6".into()));
    assert_eq!(rx.recv().await.unwrap(), (EventType::Resync, "5".into()));
    assert_eq!(
        offered.load(std::sync::atomic::Ordering::Relaxed),
        2,
        "only the two (coalesced) updates were offered to the filter"
    );
    assert_eq!(h.backlog(), 0);
}

/// A change filter runs on its handler's task, not while the informer distributes: one that
/// blocks holds back neither the informer nor another handler of the same informer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_change_filter_delays_only_its_own_handler() {
    let inf = informer();
    inf.apply(Delta::Replace(vec![cm("a", 1)]));
    let (release, released) = std::sync::mpsc::channel::<()>();
    let released = parking_lot::Mutex::new(released);
    let waited_for_release = Arc::new(parking_lot::Mutex::new(None));
    let outcome = waited_for_release.clone();
    let (slow_tx, mut slow_rx) = tokio::sync::mpsc::unbounded_channel();
    let slow = inf.add_handler(
        "slow-filter",
        FnHandler(move |e: Event| {
            let _ = slow_tx.send(e.event_type);
        }),
        HandlerOptions {
            // The first update offered waits to be released; later ones pass at once.
            changes: Some(super::ChangeFilter::new(move |_| {
                let mut outcome = outcome.lock();
                if outcome.is_none() {
                    let got = released.lock().recv_timeout(Duration::from_secs(30));
                    *outcome = Some(got.is_ok());
                }
                true
            })),
            ..Default::default()
        },
    );
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let other = inf.add_handler(
        "other",
        FnHandler(move |e: Event| {
            let _ = tx.send((e.event_type, e.object.resource_version().to_string()));
        }),
        HandlerOptions::default(),
    );
    assert_eq!(slow_rx.recv().await.unwrap(), EventType::Added);
    assert_eq!(rx.recv().await.unwrap(), (EventType::Added, "1".into()));
    let guard = Duration::from_secs(20);
    for rv in 2..=50 {
        inf.apply(Delta::Apply(cm("a", rv)));
        let got = tokio::time::timeout(guard, rx.recv()).await;
        assert_eq!(
            got.expect("the other handler is not held back").unwrap(),
            (EventType::Updated, rv.to_string())
        );
    }
    release.send(()).unwrap();
    assert_eq!(slow_rx.recv().await.unwrap(), EventType::Updated);
    assert_eq!(
        *waited_for_release.lock(),
        Some(true),
        "the filter was released, not timed out"
    );
    slow.remove();
    other.remove();
}

/// A resource that goes away: each object its handler saw gets exactly one Deleted (from the
/// watch, or inferred at retirement), and nothing reaches the handler afterwards.
#[tokio::test]
async fn a_retired_handler_gets_deleted_for_what_is_left_then_nothing() {
    let inf = informer();
    inf.apply(Delta::Replace(vec![cm("a", 1), cm("b", 2), cm("c", 3)]));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let h = inf.add_handler(
        "retiring",
        FnHandler(move |e: Event| {
            let _ = tx.send((e.event_type, e.key().to_string(), e.final_state_unknown));
        }),
        HandlerOptions::default(),
    );
    h.wait_synced().await;
    inf.apply(Delta::Delete(cm("a", 4)));
    h.retire(inf.store()).await;
    inf.apply(Delta::Apply(cm("d", 5)));
    let mut seen = Vec::new();
    while let Ok(e) = rx.try_recv() {
        seen.push(e);
    }
    let mut deletes: Vec<_> = seen
        .iter()
        .filter(|(t, _, _)| *t == EventType::Deleted)
        .map(|(_, k, unknown)| (k.as_str(), *unknown))
        .collect();
    deletes.sort();
    assert_eq!(
        deletes,
        [("ns/a", false), ("ns/b", true), ("ns/c", true)],
        "{seen:?}"
    );
    assert!(!seen.iter().any(|(_, k, _)| k == "ns/d"), "{seen:?}");
}

fn json(name: &str, rv: u64) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}},"data":{{"v":"{rv}"}}}}"#
    )
}

/// Everything a handler got, as `type name rv[<-old]`, until `until` is seen.
async fn collect(
    inf: &Arc<SharedInformer>,
    options: HandlerOptions,
) -> (ListenerHandle, Arc<parking_lot::Mutex<Vec<String>>>) {
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let sink = seen.clone();
    let handle = inf.add_handler(
        "cursor",
        FnHandler(move |e: Event| {
            let old = e
                .old_object
                .as_ref()
                .map(|o| format!("<-{}", o.resource_version()))
                .unwrap_or_default();
            sink.lock().push(format!(
                "{:?} {} {}{old}",
                e.event_type,
                e.object.name(),
                e.object.resource_version()
            ));
        }),
        options,
    );
    (handle, seen)
}

#[tokio::test]
async fn a_restored_cache_brings_a_resuming_handler_exactly_what_it_missed() {
    let inf = informer();
    // As persisted: a@1 then a@5 (seq 1, 4); b@2 (seq 2); d@3 (seq 3); e@6 deleted at 5.
    let versions = vec![
        (
            "ns/a",
            vec![(1, Some(json("a", 1))), (4, Some(json("a", 5)))],
        ),
        ("ns/b", vec![(2, Some(json("b", 2)))]),
        ("ns/d", vec![(3, Some(json("d", 3)))]),
        ("ns/e", vec![(3, Some(json("e", 6))), (5, None)]),
        // Hostile: another key's object, unreadable text.
        ("ns/x", vec![(3, Some(json("y", 9)))]),
        ("ns/z", vec![(3, Some("{not json".to_string()))]),
    ];
    let report = inf.restore("7", 5, versions);
    assert_eq!(
        report,
        RestoreReport {
            objects: 3,
            unreadable: 2
        }
    );
    assert!(inf.store().get(Some("ns"), "e").is_none());

    // While the host was down: b deleted, c created (the resumed watch delivers these).
    inf.apply(Delta::Delete(cm("b", 8)));
    inf.apply(Delta::Apply(cm("c", 9)));
    inf.apply(Delta::Resumed);
    assert!(inf.has_synced());

    // Handled everything up to seq 3 before the restart: it missed a@5 and e's delete.
    let holds = Holds::new();
    let options = HandlerOptions {
        cursor: Some(CursorOptions {
            since: Some(3),
            holds: holds.clone(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let (handle, seen) = collect(&inf, options).await;
    handle.wait_synced().await;
    let mut got = seen.lock().clone();
    got.sort();
    assert_eq!(
        got,
        ["Added c 9", "Deleted b 2", "Deleted e 6", "Updated a 5<-1"],
        "d unchanged since seq 3 is not re-sent"
    );
    // Caught up to the last change distributed (c's add, seq 7).
    assert_eq!(handle.handled_through(), Some(7));

    // A retry held at a later change holds the cursor below it.
    inf.apply(Delta::Apply(cm("d", 10)));
    let hold = holds.hold(inf.store().seq(), 0);
    while handle.backlog() > 0 || seen.lock().len() < 5 {
        tokio::task::yield_now().await;
    }
    assert_eq!(handle.handled_through(), Some(7));
    drop(hold);
    assert_eq!(handle.handled_through(), Some(8));

    // A handler with no cursor still gets the whole cache.
    let (fresh, all) = collect(&inf, HandlerOptions::default()).await;
    fresh.wait_synced().await;
    assert_eq!(all.lock().len(), 3);
    assert_eq!(fresh.handled_through(), None, "not tracked");
}

#[tokio::test]
async fn a_cursor_stays_below_what_is_queued_and_follows_what_is_handled() {
    let inf = informer();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (tx, mut entered) = tokio::sync::mpsc::unbounded_channel();
    struct Slow(
        Arc<tokio::sync::Semaphore>,
        tokio::sync::mpsc::UnboundedSender<String>,
    );
    impl Handler for Slow {
        async fn handle(&mut self, e: Event) {
            let _ = self.1.send(e.object.resource_version().to_string());
            self.0.acquire().await.unwrap().forget();
        }
    }
    let options = HandlerOptions {
        cursor: Some(CursorOptions::default()),
        ..Default::default()
    };
    let handle = inf.add_handler("slow", Slow(gate.clone(), tx), options);
    assert_eq!(
        handle.handled_through(),
        None,
        "nothing handled from nothing yet"
    );
    inf.apply(Delta::Replace(vec![cm("a", 1), cm("b", 2)]));
    gate.add_permits(2);
    handle.wait_synced().await;
    assert_eq!(handle.handled_through(), Some(2));
    assert_eq!(
        (entered.recv().await, entered.recv().await),
        (Some("1".into()), Some("2".into()))
    );
    // One update in flight, one queued behind it.
    inf.apply(Delta::Apply(cm("a", 3)));
    assert_eq!(entered.recv().await.as_deref(), Some("3"));
    inf.apply(Delta::Apply(cm("b", 4)));
    assert_eq!(handle.handled_through(), Some(2), "seq 3 is being handled");
    gate.add_permits(1);
    assert_eq!(entered.recv().await.as_deref(), Some("4"));
    assert_eq!(handle.handled_through(), Some(3), "seq 4 is being handled");
    gate.add_permits(1);
    // The consumer asks for more only after handling: until then seq 4 counts as in flight.
    while handle.handled_through() != Some(4) {
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn a_handler_resumed_past_changes_seen_again_gets_only_what_it_had_not_handled() {
    let inf = informer();
    // A cache stored at version 2; the handler had handled every change up to version 5 since.
    let versions = vec![
        ("ns/a", vec![(1, Some(json("a", 1)))]),
        ("ns/b", vec![(2, Some(json("b", 2)))]),
        ("ns/gone", vec![(3, Some(json("gone", 2)))]),
    ];
    inf.restore("2", 3, versions);
    let resumed = HandlerOptions {
        cursor: Some(CursorOptions {
            since: Some(3),
            skip_through_version: Some(5),
            ..Default::default()
        }),
        ..Default::default()
    };
    let (handle, seen) = collect(&inf, resumed).await;
    let (_every, all) = collect(&inf, HandlerOptions::default()).await;
    assert_eq!(
        handle.handled_through_version(),
        Some(2),
        "the restored cache's version: the skipped ones count once the watch passes them"
    );

    // The watch resumes from the stored cache: 3..=5 were handled before, 6 and 7 were not.
    inf.apply(Delta::Apply(cm("a", 3)));
    inf.apply(Delta::Delete(cm("b", 4)));
    inf.apply(Delta::Apply(cm("c", 5)));
    // A resourceVersion that is not a number says nothing of what was handled.
    let mut opaque = cm("e", 0);
    opaque.metadata.resource_version = Some("opaque".into());
    inf.apply(Delta::Apply(opaque.clone()));
    inf.apply(Delta::Apply(cm("a", 6)));
    inf.apply(Delta::Apply(cm("d", 7)));
    // A relist infers a delete: when it happened is unknown, so it is delivered.
    inf.apply(Delta::Replace(vec![
        cm("a", 6),
        cm("c", 5),
        cm("d", 7),
        opaque,
    ]));
    // From a relist on, versions may be another server's numbering: nothing is skipped.
    inf.apply(Delta::Apply(cm("g", 4)));
    inf.apply(Delta::Apply(cm("f", 8)));

    let done = tokio::time::timeout(Duration::from_secs(5), async {
        let last = |v: &Arc<parking_lot::Mutex<Vec<String>>>| v.lock().last().cloned();
        while last(&all).as_deref() != Some("Added f 8")
            || last(&seen).as_deref() != Some("Added f 8")
        {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(
        done.is_ok(),
        "resumed {:?}, every {:?}",
        seen.lock(),
        all.lock()
    );
    assert_eq!(
        *seen.lock(),
        [
            "Added e opaque",
            "Updated a 6<-3",
            "Added d 7",
            "Deleted gone 2",
            "Added g 4",
            "Added f 8"
        ],
        "the old side of an update is the version it had handled"
    );
    let all = all.lock().clone();
    assert!(
        all.iter().any(|e| e == "Deleted b 4"),
        "a handler without a cursor gets every event: {all:?}"
    );
}

/// The watch resumed from the stored cache applies changes the handler had handled (up to its
/// skip) before the handler registers: they reach it as the restored difference, and an add or
/// update of them is not delivered again. A delete there is (its version is not kept).
#[tokio::test]
async fn a_restored_difference_skips_what_a_handler_resumed_past_it_had_handled() {
    let inf = informer();
    let versions = vec![
        ("ns/a", vec![(1, Some(json("a", 1)))]),
        ("ns/b", vec![(2, Some(json("b", 2)))]),
    ];
    inf.restore("2", 2, versions);
    // Applied before the handler registers: 3..=5 handled (elsewhere), 6 not.
    inf.apply(Delta::Apply(cm("a", 3)));
    inf.apply(Delta::Delete(cm("b", 4)));
    inf.apply(Delta::Apply(cm("c", 5)));
    inf.apply(Delta::Apply(cm("d", 6)));
    let resumed = HandlerOptions {
        cursor: Some(CursorOptions {
            since: Some(2),
            skip_through_version: Some(5),
            floor_version: Some(5),
            ..Default::default()
        }),
        ..Default::default()
    };
    let (_handle, seen) = collect(&inf, resumed).await;
    inf.apply(Delta::Apply(cm("a", 7)));
    let done = tokio::time::timeout(Duration::from_secs(5), async {
        while seen.lock().last().map(String::as_str) != Some("Updated a 7<-3") {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(done.is_ok(), "{:?}", seen.lock());
    assert_eq!(*seen.lock(), ["Deleted b 2", "Added d 6", "Updated a 7<-3"]);
}

#[tokio::test]
async fn a_handler_resumed_on_a_restored_cache_stands_at_its_change_before_any_event() {
    let inf = informer();
    inf.restore("7", 3, vec![("ns/a", vec![(3, Some(json("a", 7)))])]);
    let resumed = HandlerOptions {
        cursor: Some(CursorOptions {
            since: Some(3),
            ..Default::default()
        }),
        ..Default::default()
    };
    let (handle, _seen) = collect(&inf, resumed).await;
    inf.apply(Delta::Resumed);
    let synced = tokio::time::timeout(Duration::from_secs(5), async {
        while !handle.is_synced() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(synced.is_ok(), "the handler synced");
    // Saved as its cursor, 0 would replay the whole restored cache after a crash.
    assert_eq!(handle.handled_through(), Some(3));
}
