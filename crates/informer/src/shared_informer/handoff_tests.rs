//! Handing a handler over between replicas: its version watermark, and registration from the
//! state it had seen elsewhere (`CursorOptions::prior`), read back with `list_at`.

use super::tests::{
    Mirror, cm, informer, informer_under_writes, mirror_handler, mirrors_end_at_the_store,
};
use super::*;
use crate::processor::FnHandler;
use kube::core::GroupVersionKind;

/// Waits, on the handler's own progress, until `handle`'s version watermark is `want`.
async fn watermark_becomes(handle: &ListenerHandle, want: Option<u64>, what: &str) {
    let reached = tokio::time::timeout(Duration::from_secs(30), async {
        while handle.handled_through_version() != want {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(
        reached.is_ok(),
        "{what}: watermark {:?}, want {want:?}",
        handle.handled_through_version()
    );
}

/// A handler that reports each event's `name rv` as it takes it, then waits for a permit.
struct Gated(
    Arc<tokio::sync::Semaphore>,
    tokio::sync::mpsc::UnboundedSender<String>,
);

impl Handler for Gated {
    async fn handle(&mut self, e: Event) {
        let _ = self.1.send(format!(
            "{} {}",
            e.object.name(),
            e.object.resource_version()
        ));
        self.0.acquire().await.unwrap().forget();
    }
}

fn gated(
    inf: &Arc<SharedInformer>,
    cursor: CursorOptions,
) -> (
    ListenerHandle,
    Arc<tokio::sync::Semaphore>,
    tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (tx, entered) = tokio::sync::mpsc::unbounded_channel();
    let options = HandlerOptions {
        cursor: Some(cursor),
        ..Default::default()
    };
    let handle = inf.add_handler("gated", Gated(gate.clone(), tx), options);
    (handle, gate, entered)
}

#[tokio::test]
async fn the_version_watermark_stays_below_what_is_queued_in_flight_or_held() {
    let inf = informer();
    let holds = Holds::new();
    let cursor = CursorOptions {
        holds: holds.clone(),
        ..Default::default()
    };
    let (handle, gate, mut entered) = gated(&inf, cursor);
    assert_eq!(handle.handled_through_version(), None, "nothing known yet");

    // The first list: nothing is claimed past what was handled of it.
    inf.apply(Delta::Replace(vec![cm("a", 1), cm("b", 2)]));
    assert_eq!(entered.recv().await.as_deref(), Some("a 1"));
    assert_eq!(handle.handled_through_version(), None, "a@1 is in flight");
    gate.add_permits(2);
    assert_eq!(entered.recv().await.as_deref(), Some("b 2"));
    handle.wait_synced().await;
    watermark_becomes(&handle, Some(2), "list handled").await;

    // a@3 in flight; b@4 then b@5 merged into one queued update that still stands for 4.
    inf.apply(Delta::Apply(cm("a", 3)));
    assert_eq!(entered.recv().await.as_deref(), Some("a 3"));
    inf.apply(Delta::Apply(cm("b", 4)));
    inf.apply(Delta::Apply(cm("b", 5)));
    assert_eq!(handle.backlog(), 1, "b's updates merged");
    assert_eq!(handle.handled_through_version(), Some(2));
    gate.add_permits(1);
    assert_eq!(entered.recv().await.as_deref(), Some("b 5"));
    assert_eq!(
        handle.handled_through_version(),
        Some(3),
        "the merged update is in flight for b@4 as well"
    );
    gate.add_permits(1);
    watermark_becomes(&handle, Some(5), "nothing pending: the reached version").await;

    // A retry held for b@4 holds the watermark below it until released.
    let hold = holds.hold(inf.store().seq(), 4);
    assert_eq!(handle.handled_through_version(), Some(3));
    drop(hold);
    assert_eq!(handle.handled_through_version(), Some(5));

    // A relist that finds b gone: its delete carries b's last known version, 5.
    inf.apply(Delta::Replace(vec![cm("a", 3)]));
    assert_eq!(entered.recv().await.as_deref(), Some("b 5"));
    assert_eq!(handle.handled_through_version(), Some(4));
    gate.add_permits(1);
    watermark_becomes(&handle, Some(5), "relist handled").await;

    // A late handler claims nothing past its replay until it has handled it.
    let (late, late_gate, mut late_entered) = gated(&inf, CursorOptions::default());
    assert_eq!(late_entered.recv().await.as_deref(), Some("a 3"));
    assert_eq!(late.handled_through_version(), Some(2));
    late_gate.add_permits(1);
    late.wait_synced().await;
    watermark_becomes(&late, Some(5), "replay handled").await;

    // A resourceVersion that is not a number: no watermark at all, from then on.
    let opaque: RawObject = serde_json::from_str(
        r#"{"metadata":{"name":"o","namespace":"ns","resourceVersion":"a1b2"}}"#,
    )
    .unwrap();
    inf.apply(Delta::Apply(opaque));
    assert_eq!(entered.recv().await.as_deref(), Some("o a1b2"));
    gate.add_permits(1);
    inf.apply(Delta::Apply(cm("a", 9)));
    assert_eq!(entered.recv().await.as_deref(), Some("a 9"));
    gate.add_permits(1);
    assert_eq!(handle.handled_through_version(), None);
    assert_eq!(late.handled_through_version(), None);
    assert_eq!(
        inf.add_handler("untracked", FnHandler(|_| {}), HandlerOptions::default())
            .handled_through_version(),
        None
    );
}

#[tokio::test]
async fn a_handler_registered_from_a_prior_state_gets_exactly_the_difference() {
    let inf = informer();
    inf.apply(Delta::Replace(vec![cm("a", 1), cm("b", 2), cm("c", 3)]));
    // Another replica's handler had handled everything up to 4: the state then.
    let prior: Vec<Arc<CachedObject>> = [cm("a", 1), cm("b", 2), cm("c", 3)]
        .into_iter()
        .filter_map(|o| inf.store().prepare(o))
        .collect();
    inf.apply(Delta::Apply(cm("a", 5)));
    inf.apply(Delta::Delete(cm("c", 6)));
    inf.apply(Delta::Apply(cm("d", 7)));

    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    struct Recorder(
        Arc<tokio::sync::Semaphore>,
        Arc<parking_lot::Mutex<Vec<String>>>,
    );
    impl Handler for Recorder {
        async fn handle(&mut self, e: Event) {
            self.0.acquire().await.unwrap().forget();
            let old = e
                .old_object
                .as_ref()
                .map(|o| format!("<-{}", o.resource_version()))
                .unwrap_or_default();
            self.1.lock().push(format!(
                "{:?} {} {}{old}{}{}",
                e.event_type,
                e.object.name(),
                e.object.resource_version(),
                if e.initial { " initial" } else { "" },
                if e.final_state_unknown {
                    " unknown"
                } else {
                    ""
                },
            ));
        }
    }
    let options = HandlerOptions {
        cursor: Some(CursorOptions {
            prior: Some(Arc::new(Restored::from_objects(prior))),
            floor_version: Some(4),
            ..Default::default()
        }),
        ..Default::default()
    };
    let handle = inf.add_handler("prior", Recorder(gate.clone(), seen.clone()), options);
    assert_eq!(handle.backlog(), 3, "b, unchanged, is not re-sent");
    assert_eq!(
        handle.handled_through_version(),
        Some(4),
        "the floor, while the difference waits"
    );
    gate.add_permits(3);
    handle.wait_synced().await;
    let mut got = seen.lock().clone();
    got.sort();
    assert_eq!(
        got,
        ["Added d 7", "Deleted c 3 unknown", "Updated a 5<-1"],
        "no replay, only the difference"
    );
    watermark_becomes(&handle, Some(7), "difference handled").await;

    // Then live events, as any handler.
    inf.apply(Delta::Apply(cm("b", 8)));
    gate.add_permits(1);
    watermark_becomes(&handle, Some(8), "live update handled").await;
    assert_eq!(
        seen.lock().last().map(String::as_str),
        Some("Updated b 8<-2")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_from_a_prior_state_under_concurrent_writes_has_no_gap_and_no_duplicate() {
    let (inf, writer) = informer_under_writes();

    let mut handlers = Vec::new();
    for n in 0..8 {
        // The state some other replica's handler was left at, a moment ago.
        let prior: Vec<Arc<CachedObject>> = inf
            .store()
            .read_consistent(|_, objects| objects.filter(|o| o.name() != "k7").cloned().collect());
        let mirror = Arc::new(parking_lot::Mutex::new(Mirror::default()));
        mirror.lock().objects = prior
            .iter()
            .map(|o| (o.key().to_string(), o.resource_version().to_string()))
            .collect();
        std::thread::sleep(Duration::from_micros(300)); // let the writer move on
        let done = Arc::new(tokio::sync::Notify::new());
        let options = HandlerOptions {
            cursor: Some(CursorOptions {
                prior: Some(Arc::new(Restored::from_objects(prior))),
                ..Default::default()
            }),
            ..Default::default()
        };
        let h = inf.add_handler(
            &format!("h{n}"),
            mirror_handler(mirror.clone(), done.clone()),
            options,
        );
        handlers.push((h, mirror, done));
        tokio::task::yield_now().await;
    }
    writer.join().unwrap();
    inf.apply(Delta::Apply(cm("end", 1_000_000)));

    mirrors_end_at_the_store(&inf, handlers).await;
}

#[tokio::test]
async fn list_at_reads_the_informers_selection_as_it_was() {
    use informant_devserver::{DevServer, DevServerConfig};
    let srv = DevServer::start(DevServerConfig::default()).await.unwrap();
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
    let api = Api::namespaced_with(srv.client(), "ns", &ar);
    let config = ReflectorConfig {
        label_selector: Some("app=demo".into()),
        page_size: Some(1),
        ..Default::default()
    };
    let inf = SharedInformer::new(api, ar, "cm".into(), config, StoreOptions::default());
    let object = |name: &str, ns: &str, app: &str, v: &str| {
        serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": app},
                "managedFields": [{"manager": "test", "operation": "Update"}]},
            "data": {"v": v}
        })
    };
    srv.create(
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}),
    )
    .unwrap();
    for name in ["a", "b", "c"] {
        srv.create(object(name, "ns", "demo", "1")).unwrap();
    }
    srv.create(object("other", "ns", "else", "1")).unwrap();
    srv.create(object("away", "default", "demo", "1")).unwrap();
    inf.start();
    inf.wait_for_sync().await;
    let rv = |o: &serde_json::Value| {
        o["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let at = rv(&srv
        .create(object("marker", "default", "else", "1"))
        .unwrap());
    let then: Vec<(String, String)> = inf.store().read_consistent(|_, objects| {
        let mut v: Vec<_> = objects
            .map(|o| (o.name().to_string(), o.json().to_string()))
            .collect();
        v.sort();
        v
    });

    srv.update(object("a", "ns", "demo", "2")).unwrap();
    srv.delete("v1", "ConfigMap", Some("ns"), "b").unwrap();
    srv.create(object("d", "ns", "demo", "1")).unwrap();
    srv.update(object("other", "ns", "demo", "2")).unwrap();

    let listed = inf
        .list_at(&at)
        .await
        .unwrap()
        .expect("still in the history");
    let mut listed: Vec<(String, String)> = listed
        .iter()
        .map(|o| (o.name().to_string(), o.json().to_string()))
        .collect();
    listed.sort();
    assert_eq!(
        listed, then,
        "the selection at {at}, prepared as the cache holds it"
    );
    assert!(
        listed
            .iter()
            .all(|(_, json)| !json.contains("managedFields"))
    );

    // Refused for another reason than 410: an error, not "gone".
    assert!(inf.list_at("not-a-version").await.is_err());
    srv.faults().compact();
    assert!(inf.list_at(&at).await.unwrap().is_none(), "compacted: 410");
    inf.stop();
    srv.shutdown().await;
}
