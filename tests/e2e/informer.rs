//! The informer against the embedded API server over loopback HTTP: initial sync, watch cuts,
//! 410 Gone relists, CRDs through discovery, bad input, objects outside their kind's scope.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use informant_devserver::{DevServer, DevServerConfig};
use informant_runtime::informer::{
    Error, EventType, FactoryOptions, HandlerOptions, IndexSpec, InformerFactory, InitialList,
    LabelSelector, Visibility, WatchScope,
};
use informant_runtime::tenancy::{Grant, NamespacePattern, ResourceRule};
use informant_tests::{Recorder, configmap, create_namespaces, guarded};

async fn server() -> DevServer {
    DevServer::start(DevServerConfig::default())
        .await
        .expect("start embedded API server")
}

fn factory(server: &DevServer, initial_list: InitialList) -> InformerFactory {
    InformerFactory::new(
        server.client(),
        FactoryOptions {
            initial_list,
            ..Default::default()
        },
    )
}

async fn initial_sync_of(n: usize, initial_list: InitialList) {
    let server = server().await;
    create_namespaces(
        &server,
        &[
            "a", "w", "ns0", "ns1", "ns2", "ns3", "ns4", "ns5", "ns6", "ns7", "ns8", "ns9",
        ],
    );
    server
        .seed((0..n).map(|i| configmap(&format!("ns{}", i % 10), &format!("cm{i}"), "v")))
        .unwrap();
    let factory = factory(&server, initial_list);
    let informer = factory
        .informer("v1", "ConfigMap", WatchScope::default())
        .await
        .unwrap();
    let rec = Recorder::new();
    let handle = informer.add_handler("rec", rec.clone(), HandlerOptions::default());
    factory.start();
    guarded("sync", factory.wait_for_sync(informant_tests::GUARD))
        .await
        .unwrap();
    guarded("handler sync", handle.wait_synced()).await;
    assert_eq!(informer.store().len(), n);
    let events = rec.events();
    assert_eq!(events.len(), n);
    assert!(
        events
            .iter()
            .all(|e| e.event_type == EventType::Added && e.initial)
    );
    let keys: BTreeSet<_> = events.iter().map(|e| e.key.clone()).collect();
    assert_eq!(keys.len(), n, "no duplicates");
    let ns3 = informer
        .store()
        .list(Some("ns3"), &LabelSelector::default());
    assert_eq!(ns3.len(), n / 10);
    // The server records managedFields on every write; the cache drops them.
    let served =
        kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(server.client(), "ns3")
            .get("cm3")
            .await
            .expect("cm3 is served");
    assert!(
        served
            .metadata
            .managed_fields
            .is_some_and(|m| !m.is_empty())
    );
    assert!(
        ns3.iter()
            .all(|o| o.to_value()["metadata"].get("managedFields").is_none())
    );
    assert_eq!(informer.stats().lists.load(Ordering::Relaxed), 1);
    let streamed = informer.stats().streaming_lists.load(Ordering::Relaxed);
    assert_eq!(
        streamed,
        initial_list != InitialList::Paginated,
        "the embedded server supports watch-list"
    );
    factory.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_sync_of_10k_objects_paginated() {
    initial_sync_of(10_000, InitialList::Paginated).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_sync_of_10k_objects_streaming() {
    initial_sync_of(10_000, InitialList::Streaming).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_detects_streaming_lists_and_syncs() {
    initial_sync_of(100, InitialList::Auto).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_cut_mid_flight_resumes_without_loss() {
    let server = server().await;
    create_namespaces(
        &server,
        &[
            "a", "w", "ns0", "ns1", "ns2", "ns3", "ns4", "ns5", "ns6", "ns7", "ns8", "ns9",
        ],
    );
    let factory = factory(&server, InitialList::Paginated);
    let informer = factory
        .informer("v1", "ConfigMap", WatchScope::default())
        .await
        .unwrap();
    let rec = Recorder::new();
    informer.add_handler("rec", rec.clone(), HandlerOptions::default());
    factory.start();
    guarded("sync", informer.wait_for_sync()).await;

    let faults = server.faults();
    for round in 0..5 {
        for i in 0..50 {
            server
                .create(configmap("a", &format!("r{round}-{i}"), "v"))
                .unwrap();
        }
        // Cut every watch while the events may still be in flight.
        faults.close_watches();
    }
    let last = server.create(configmap("a", "last", "v")).unwrap();
    let last_rv = last["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let events = rec
        .wait_until("the last object", |evs| {
            evs.iter().any(|e| e.resource_version == last_rv)
        })
        .await;
    let keys: BTreeSet<_> = events.iter().map(|e| e.key.clone()).collect();
    assert_eq!(keys.len(), 251, "every object arrived once");
    assert_eq!(events.len(), 251, "no duplicates across resumed watches");
    assert_eq!(informer.store().len(), 251);
    factory.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compacted_history_gives_410_and_relist_reports_what_changed() {
    let server = server().await;
    create_namespaces(
        &server,
        &[
            "a", "w", "ns0", "ns1", "ns2", "ns3", "ns4", "ns5", "ns6", "ns7", "ns8", "ns9",
        ],
    );
    server
        .seed((0..20).map(|i| configmap("a", &format!("cm{i}"), "v")))
        .unwrap();
    let factory = factory(&server, InitialList::Paginated);
    let informer = factory
        .informer("v1", "ConfigMap", WatchScope::default())
        .await
        .unwrap();
    let rec = Recorder::new();
    let handle = informer.add_handler("rec", rec.clone(), HandlerOptions::default());
    factory.start();
    guarded("handler sync", handle.wait_synced()).await;

    // A partition during which objects are deleted, created and changed; then history is
    // compacted so the resumed watch must get 410 Gone and relist.
    let faults = server.faults();
    faults.pause();
    for i in 0..5 {
        server
            .delete("v1", "ConfigMap", Some("a"), &format!("cm{i}"))
            .unwrap();
    }
    for i in 0..3 {
        server
            .create(configmap("a", &format!("new{i}"), "v"))
            .unwrap();
    }
    server.update(configmap("a", "cm10", "changed")).unwrap();
    faults.compact();
    faults.close_watches();
    faults.resume();

    let events = rec
        .wait_until("relist events", |evs| {
            evs.iter().filter(|e| e.final_state_unknown).count() == 5
                && evs.iter().filter(|e| e.key.starts_with("a/new")).count() == 3
                && evs
                    .iter()
                    .any(|e| e.key == "a/cm10" && e.event_type == EventType::Updated)
        })
        .await;
    let after_sync: Vec<_> = events.iter().filter(|e| !e.initial).collect();
    let deleted: BTreeSet<_> = after_sync
        .iter()
        .filter(|e| e.event_type == EventType::Deleted)
        .map(|e| (e.key.as_str(), e.final_state_unknown))
        .collect();
    assert_eq!(
        deleted,
        (0..5)
            .map(|i| (["a/cm0", "a/cm1", "a/cm2", "a/cm3", "a/cm4"][i], true))
            .collect()
    );
    let added: BTreeSet<_> = after_sync
        .iter()
        .filter(|e| e.event_type == EventType::Added)
        .map(|e| e.key.as_str())
        .collect();
    assert_eq!(added, ["a/new0", "a/new1", "a/new2"].into_iter().collect());
    assert_eq!(after_sync.len(), 9, "nothing else changed: {after_sync:?}");
    assert!(
        informer.stats().gone.load(Ordering::Relaxed) >= 1,
        "the resume saw 410 Gone"
    );
    assert!(
        informer.stats().lists.load(Ordering::Relaxed) >= 2,
        "a relist happened"
    );
    assert_eq!(informer.store().len(), 18);
    factory.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_objects_are_watched_through_discovery() {
    let server = server().await;
    create_namespaces(
        &server,
        &[
            "a", "w", "ns0", "ns1", "ns2", "ns3", "ns4", "ns5", "ns6", "ns7", "ns8", "ns9",
        ],
    );
    server
        .create(serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
        }))
        .unwrap();
    let widget = |name: &str, owner: &str| {
        serde_json::json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": "w", "labels": {"team": owner}},
            "spec": {"size": name.len(), "owner": owner}})
    };
    server.create(widget("small", "blue")).unwrap();
    let factory = factory(&server, InitialList::Auto);
    let informer = factory
        .informer("example.com/v1", "Widget", WatchScope::default())
        .await
        .unwrap();
    let owner_field = informer
        .store()
        .add_field_index("spec.owner".parse().unwrap());
    let rec = Recorder::new();
    informer.add_handler("rec", rec.clone(), HandlerOptions::default());
    factory.start();
    guarded("sync", informer.wait_for_sync()).await;
    server.create(widget("larger", "red")).unwrap();
    rec.wait_until("both widgets", |evs| evs.len() == 2).await;
    let red = informer
        .store()
        .lookup(owner_field.id(), "red", Visibility::All);
    assert_eq!(red.len(), 1);
    assert_eq!(red[0].name(), "larger");
    let blue = informer
        .store()
        .list(Some("w"), &"team=blue".parse().unwrap());
    assert_eq!(blue.len(), 1);
    let v = blue[0].to_value();
    assert_eq!(v["kind"], "Widget");
    assert_eq!(v["apiVersion"], "example.com/v1");
    factory.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_scope_shares_one_informer() {
    let server = server().await;
    create_namespaces(
        &server,
        &[
            "a", "w", "ns0", "ns1", "ns2", "ns3", "ns4", "ns5", "ns6", "ns7", "ns8", "ns9",
        ],
    );
    let factory = factory(&server, InitialList::Paginated);
    let scoped = |selector: &str| WatchScope {
        namespace: Some("x".into()),
        label_selector: Some(selector.into()),
    };
    // `a==1` and `a=1` are the same selector, so they must share one informer.
    let a = factory
        .informer("v1", "ConfigMap", scoped("a==1"))
        .await
        .unwrap();
    let b = factory
        .informer("v1", "ConfigMap", scoped("a=1"))
        .await
        .unwrap();
    let c = factory
        .informer("v1", "ConfigMap", WatchScope::default())
        .await
        .unwrap();
    assert!(std::sync::Arc::ptr_eq(a.informer(), b.informer()));
    assert_eq!(a.key(), b.key());
    assert!(!std::sync::Arc::ptr_eq(a.informer(), c.informer()));
    assert_eq!(factory.informers().len(), 2);
}

/// A claim gives its informer back when dropped: the informer lives while any claim (or a
/// clone of one) does, the last drop forgets it, and a kept claim is never given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_informer_lives_exactly_as_long_as_its_claims() {
    let server = server().await;
    let factory = factory(&server, InitialList::Paginated);
    let first = factory
        .informer("v1", "ConfigMap", WatchScope::default())
        .await
        .unwrap();
    let second = factory
        .informer("v1", "ConfigMap", WatchScope::default())
        .await
        .unwrap();
    let cloned = second.clone();
    let informer = first.informer().clone();
    factory.start();
    informer.wait_for_sync().await;
    drop(first);
    drop(second);
    assert_eq!(factory.informers().len(), 1, "a clone still holds it");
    drop(cloned);
    assert!(factory.informers().is_empty(), "the last claim forgets it");
    // And stops it: its list/watch task, which holds the informer, ends.
    guarded("the forgotten informer's list/watch task to end", async {
        while std::sync::Arc::strong_count(&informer) > 1 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    let again = factory
        .informer("v1", "ConfigMap", WatchScope::default())
        .await
        .unwrap();
    assert!(
        !std::sync::Arc::ptr_eq(again.informer(), &informer),
        "a forgotten informer is not handed out again"
    );
    let kept = again.keep();
    assert_eq!(factory.informers().len(), 1);
    assert!(std::sync::Arc::ptr_eq(&factory.informers()[0], &kept));
    assert!(
        std::sync::Arc::strong_count(&kept) > 2,
        "a kept informer's task still runs (it, the factory and this test hold it)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gives_clear_errors() {
    let server = server().await;
    create_namespaces(
        &server,
        &[
            "a", "w", "ns0", "ns1", "ns2", "ns3", "ns4", "ns5", "ns6", "ns7", "ns8", "ns9",
        ],
    );
    let factory = factory(&server, InitialList::Paginated);
    let err = factory
        .informer("v1", "Pdo", WatchScope::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnknownResource { .. }), "{err:?}");
    assert!(err.to_string().contains("`v1` `Pdo`"), "{err}");

    let err = factory
        .informer("nope.example.com/v1", "Thing", WatchScope::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnknownResource { .. }), "{err:?}");

    let err = factory
        .informer("a/b/c", "Pod", WatchScope::default())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("invalid resource `a/b/c`"),
        "{err}"
    );

    let scope = WatchScope {
        namespace: None,
        label_selector: Some("app in (web".into()),
    };
    let err = factory.informer("v1", "Pod", scope).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("invalid label selector `app in (web`"),
        "{err}"
    );

    let scope = WatchScope {
        namespace: Some("x".into()),
        label_selector: None,
    };
    let err = factory.informer("v1", "Node", scope).await.unwrap_err();
    assert!(err.to_string().contains("cluster-scoped"), "{err}");

    let err = IndexSpec::field("by-node", "spec..nodeName").unwrap_err();
    assert!(
        err.to_string()
            .contains("index `by-node` path `spec..nodeName`"),
        "{err}"
    );

    let informer = factory
        .informer("v1", "ConfigMap", WatchScope::default())
        .await
        .unwrap();
    let err = informer.store().by_index("no-such-index", "x").unwrap_err();
    assert!(
        err.to_string().contains("unknown index `no-such-index`"),
        "{err}"
    );
}

/// A server that serves a ConfigMap without its namespace (stored so by
/// `DevServer::replace_verbatim`, the one way to make this server do it) does not get it
/// cached, indexed or shown as a cluster-scoped object, to anyone — not to a tenant granted
/// cluster-scoped objects — while every other object keeps flowing, through the watch and
/// through a relist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_outside_its_kinds_scope_is_never_cached_or_shown() {
    let server = server().await;
    create_namespaces(&server, &["a", "b"]);
    // Without a namespace, a verbatim replace finds the object in `default`.
    server.create(configmap("default", "leak", "v")).unwrap();
    let factory = factory(&server, InitialList::Paginated);
    let informer = factory
        .informer("v1", "ConfigMap", WatchScope::default())
        .await
        .unwrap();
    let everyone = Recorder::new();
    informer.add_handler("everyone", everyone.clone(), HandlerOptions::default());
    // A tenant of namespace `b` that may also see cluster-scoped objects.
    let grant = std::sync::Arc::new(Grant::new(
        "t",
        vec![NamespacePattern::try_from("b".to_string()).unwrap()],
        vec![ResourceRule::try_from("v1/ConfigMap".to_string()).unwrap()],
        true,
    ));
    let tenant = Recorder::new();
    informer.add_handler(
        "tenant",
        tenant.clone(),
        HandlerOptions {
            filter: grant.event_filter(),
            ..Default::default()
        },
    );
    factory.start();
    guarded("sync", informer.wait_for_sync()).await;

    let mut stripped = configmap("default", "leak", "stripped");
    stripped["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("namespace");
    let stored = server.replace_verbatim(stripped).unwrap();
    assert!(stored["metadata"].get("namespace").is_none(), "{stored}");
    server.create(configmap("b", "after", "v")).unwrap();
    server.create(configmap("a", "after", "v")).unwrap();
    everyone
        .wait_until("the objects written after it", |evs| {
            ["a/after", "b/after"]
                .iter()
                .all(|k| evs.iter().any(|e| e.key == *k))
        })
        .await;
    tenant
        .wait_until("the tenant's object", |evs| {
            evs.iter().any(|e| e.key == "b/after")
        })
        .await;
    let store = informer.store();
    assert!(
        store.get(None, "leak").is_none(),
        "not cached as cluster-scoped"
    );
    let cached = store
        .get(Some("default"), "leak")
        .expect("the last good version");
    assert_eq!(cached.to_value()["data"]["value"], "v");
    assert_eq!(store.refused_objects(), 1);
    let visible = |ns: Option<&str>| grant.allows_namespace(ns);
    let seen: Vec<String> = store
        .list_in(None, &LabelSelector::default(), Visibility::Only(&visible))
        .iter()
        .map(|o| o.key().to_string())
        .collect();
    assert_eq!(seen, ["b/after"], "the tenant's view of the cache");

    // A write missed during a partition, history compacted, watches cut: the resumed watch
    // gets 410 Gone, and the relist lists the object without its namespace.
    let faults = server.faults();
    faults.pause();
    server.create(configmap("b", "relisted", "v")).unwrap();
    faults.compact();
    faults.close_watches();
    faults.resume();
    let events = everyone
        .wait_until("the relist", |evs| {
            evs.iter().any(|e| e.key == "b/relisted")
                && evs
                    .iter()
                    .any(|e| e.key == "default/leak" && e.final_state_unknown)
        })
        .await;
    assert!(
        informer.stats().gone.load(Ordering::Relaxed) >= 1,
        "a relist happened"
    );
    assert!(store.get(None, "leak").is_none() && store.get(Some("default"), "leak").is_none());
    assert!(store.refused_objects() >= 2, "listed and refused again");
    tenant
        .wait_until("the tenant's relisted object", |evs| {
            evs.iter().any(|e| e.key == "b/relisted")
        })
        .await;
    for (who, events) in [("everyone", events), ("tenant", tenant.events())] {
        assert!(
            !events.iter().any(|e| e.key == "leak"),
            "{who} never saw it: {events:?}"
        );
    }
    assert!(
        !tenant
            .events()
            .iter()
            .any(|e| e.key.starts_with("a/") || e.key.starts_with("default/")),
        "nor anything of other namespaces"
    );
    factory.stop();
}
