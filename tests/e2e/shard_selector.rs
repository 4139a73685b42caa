//! A shard handover of a plugin with a `namespace-selector`: the new owner resumes from the
//! cursor the crashed owner published, with the selection it had there (the namespaces listed
//! at the cursor's resourceVersion), so it gets exactly what changed in the selected namespace
//! while the plugin ran nowhere, a namespace relabelled meanwhile as adds or deletes of its
//! objects, and nothing again of what its old owner had handled.

use std::sync::Arc;
use std::time::{Duration, Instant};

use informant_devserver::{DevServer, DevServerConfig};
use informant_runtime::informer::{FactoryOptions, InitialList};
use informant_runtime::leader::LeaseConfig;
use informant_runtime::plugin::exec::engine::{EngineOptions, PluginEngine};
use informant_runtime::plugin::imports::log::PluginLog;
use informant_runtime::runtime::{Replica, RuntimeOptions};
use informant_runtime::shard::{ShardBy, ShardConfig, cursors};
use informant_tests::plugins::wasm;
use informant_tests::{GUARD, configmap};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::broadcast;

const GROUP: &str = "selectors";
const LEASE_NS: &str = "default";

/// One delivery: `(member, type, key, initial)`.
type Delivery = (String, String, String, bool);

/// Every delivery, in arrival order.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<Delivery>>>);

impl Seen {
    fn record(&self, member: &str, mut rx: broadcast::Receiver<PluginLog>) {
        let (me, member) = (self.clone(), member.to_string());
        tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(line) => {
                        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line.message) else {
                            continue;
                        };
                        let text = |k: &str| v[k].as_str().unwrap_or_default().to_string();
                        let initial = v["initial"].as_bool().unwrap_or(false);
                        me.0.lock()
                            .push((member.clone(), text("type"), text("key"), initial));
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        panic!("the test's log recorder lagged and lost {n} plugin log lines")
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                }
            }
        });
    }

    /// What `member` was given, as `type key` (`+` marks an initial one).
    fn on(&self, member: &str) -> Vec<String> {
        self.0
            .lock()
            .iter()
            .filter(|(m, ..)| m == member)
            .map(|(_, t, k, i)| format!("{t} {k}{}", if *i { " +" } else { "" }))
            .collect()
    }
}

/// Polls `cond` until it holds, failing past [`GUARD`]: for states only observable by asking.
async fn eventually(what: &str, mut cond: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + GUARD;
    while !cond().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A sharded replica running the echo plugin `sel` on the ConfigMaps of namespaces labelled
/// `team=a`.
fn member(
    server: &DevServer,
    engine: &Arc<PluginEngine>,
    seen: &Seen,
    id: &str,
) -> (Replica, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("plugins dir");
    std::fs::copy(wasm("hostile"), dir.path().join("sel.wasm")).unwrap();
    std::fs::write(
        dir.path().join("sel.toml"),
        "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace-selector = \"team=a\"\n[config]\nmode = \"echo\"\ntag = \"sel\"\n",
    )
    .unwrap();
    let logs = broadcast::channel(1 << 16).0;
    seen.record(id, logs.subscribe());
    let opts = RuntimeOptions {
        plugins: Some(dir.path().to_path_buf()),
        factory: FactoryOptions {
            initial_list: InitialList::Paginated,
            ..Default::default()
        },
        engine: Some(engine.clone()),
        plugin_logs: Some(logs),
        ..Default::default()
    };
    let shard = ShardConfig {
        group: GROUP.into(),
        lease: LeaseConfig::new(GROUP, LEASE_NS, id).with_lease_duration(Duration::from_secs(4)),
        by: ShardBy::Plugin,
        pod_uid: None,
    };
    let replica = Replica::start_sharded(server.client(), opts, shard).expect("sharded replica");
    (replica, dir)
}

/// A member: its id, its replica (until it crashed) and its plugins directory.
type Member = (String, Option<Replica>, tempfile::TempDir);

/// Which member runs `sel` now.
fn owner(members: &[Member]) -> Option<String> {
    members
        .iter()
        .find(|(_, r, _)| {
            r.as_ref()
                .and_then(Replica::shard)
                .is_some_and(|s| s.book.running().contains(&"sel".to_string()))
        })
        .map(|(id, ..)| id.clone())
}

fn rv(obj: &serde_json::Value) -> u64 {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handed_over_selector_plugin_gets_exactly_what_changed_in_its_selection() {
    informant_tests::init_tracing();
    let server = DevServer::start(DevServerConfig::default())
        .await
        .expect("start API server");
    let namespace = |name: &str, team: &str| {
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"team": team}}})
    };
    server.create(namespace("sel", "a")).unwrap();
    server.create(namespace("other", "b")).unwrap();
    server.create(namespace("leaving", "a")).unwrap();
    server.create(configmap("other", "x", "v")).unwrap();
    server.create(configmap("leaving", "y", "v")).unwrap();
    let mut last = 0;
    for name in ["same-1", "same-2", "changed", "gone"] {
        last = rv(&server.create(configmap("sel", name, "v")).unwrap());
    }

    let engine = Arc::new(PluginEngine::new(EngineOptions::default()).expect("engine"));
    let seen = Seen::default();
    let mut members: Vec<Member> = ["a", "b"]
        .into_iter()
        .map(|id| {
            let (r, dir) = member(&server, &engine, &seen, id);
            (id.to_string(), Some(r), dir)
        })
        .collect();
    eventually("one member to run sel", async || owner(&members).is_some()).await;
    let first = owner(&members).unwrap();
    eventually(
        "sel to handle the selected namespaces' objects",
        async || seen.on(&first).len() >= 5,
    )
    .await;
    let mut initial = seen.on(&first);
    initial.sort();
    assert_eq!(
        initial,
        [
            "added leaving/y +",
            "added sel/changed +",
            "added sel/gone +",
            "added sel/same-1 +",
            "added sel/same-2 +"
        ]
    );
    // Its cursor published at (or past) everything it was given, then a crash: nothing
    // released, the plugin runs nowhere until the Lease expires.
    let leases: Api<Lease> = Api::namespaced(server.client(), LEASE_NS);
    eventually("the owner's cursor to be published", async || {
        leases
            .get_opt(&format!("{GROUP}-{first}"))
            .await
            .unwrap()
            .and_then(|l| l.metadata.annotations)
            .and_then(|a| a.get(cursors::ANNOTATION).cloned())
            .and_then(|t| cursors::parse(&t))
            .and_then(|doc| doc.get("sel").cloned())
            .is_some_and(|e| e.at.values().next().is_some_and(|w| *w >= last))
    })
    .await;
    let (_, replica, _) = members.iter_mut().find(|(id, ..)| *id == first).unwrap();
    replica.take().unwrap().abort().await;

    // While it runs nowhere: in the selection an update, a delete, a create; outside it, an
    // update; and `other` joins the selection while `leaving` leaves it.
    server.update(configmap("sel", "changed", "after")).unwrap();
    server
        .delete("v1", "ConfigMap", Some("sel"), "gone")
        .unwrap();
    server.create(configmap("sel", "new", "v")).unwrap();
    server.update(configmap("other", "x", "after")).unwrap();
    server.update(namespace("other", "a")).unwrap();
    server.update(namespace("leaving", "b")).unwrap();

    let second = if first == "a" { "b" } else { "a" };
    eventually("the other member to take sel over", async || {
        owner(&members).as_deref() == Some(second)
    })
    .await;
    // Namespaces and ConfigMaps are two watches: the relabelled namespaces' objects are
    // awaited on their own, then a marker (one informer's events reach a plugin in order)
    // bounds what the takeover gave.
    eventually("the relabelled namespaces' objects", async || {
        let on = seen.on(second);
        on.contains(&"added other/x".to_string()) && on.contains(&"deleted leaving/y".to_string())
    })
    .await;
    server.create(configmap("sel", "marker", "v")).unwrap();
    eventually("the marker", async || {
        seen.on(second).iter().any(|e| e.ends_with("sel/marker"))
    })
    .await;
    let mut given: Vec<String> = seen
        .on(second)
        .into_iter()
        .take_while(|e| !e.ends_with("sel/marker"))
        .collect();
    given.sort();
    assert_eq!(
        given,
        [
            "added other/x",
            "added sel/new",
            "deleted leaving/y",
            "deleted sel/gone",
            "updated sel/changed"
        ],
        "exactly what changed in the selection while the plugin ran nowhere"
    );
    for (_, r, _) in &mut members {
        if let Some(r) = r.take() {
            r.shutdown().await.expect("clean leave");
        }
    }
    server.shutdown().await;
}
