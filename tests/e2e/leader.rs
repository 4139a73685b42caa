//! Leader election end to end: two replicas, each the library's `Replica` (what
//! `informant run --leader-elect` runs: an elector plus, while leading, informers and a real
//! compiled plugin), against one embedded API server over loopback. Only the leader's plugin
//! sees events; when the leader crashes (its elector aborted, the Lease left held) or releases,
//! the standby takes over and its plugin gets a full replay of the cache, then live events.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use informant_devserver::{DevServer, DevServerConfig};
use informant_runtime::informer::{FactoryOptions, InitialList};
use informant_runtime::leader::{LeaderElector, Leadership, LeaseConfig};
use informant_runtime::plugin::exec::engine::{EngineOptions, PluginEngine};
use informant_runtime::runtime::{Replica, ReplicaState, RuntimeOptions};
use informant_tests::plugins::wasm;
use informant_tests::{GUARD, configmap, create_namespaces, guarded, wait_for_change};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use parking_lot::Mutex;
use tokio::sync::{broadcast, watch};

const LEASE: &str = "informant-e2e";
const NS: &str = "default";

/// Every echo line a replica's plugin logged, with condition waits.
#[derive(Clone, Default)]
struct Echoes {
    lines: Arc<Mutex<Vec<serde_json::Value>>>,
    count: Arc<watch::Sender<usize>>,
}

impl Echoes {
    fn record(
        &self,
        mut rx: broadcast::Receiver<informant_runtime::plugin::imports::log::PluginLog>,
    ) {
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(line) => {
                        if let Ok(v) = serde_json::from_str(&line.message) {
                            me.lines.lock().push(v);
                            me.count.send_modify(|c| *c += 1);
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        panic!("the test's log recorder lagged and lost {n} plugin log lines")
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                }
            }
        });
    }

    /// `(key, initial)` of every event the plugin echoed, in order.
    fn seen(&self) -> Vec<(String, bool)> {
        self.lines
            .lock()
            .iter()
            .map(|v| {
                (
                    v["key"].as_str().unwrap_or_default().to_string(),
                    v["initial"].as_bool().unwrap_or(false),
                )
            })
            .collect()
    }

    async fn wait_until(&self, what: &str, pred: impl Fn(&[(String, bool)]) -> bool) {
        let ok = wait_for_change(&self.count, || pred(&self.seen())).await;
        assert!(ok, "timed out waiting for {what}; saw {:?}", self.seen());
    }
}

/// One replica: the library's [`Replica`] — what `informant run --leader-elect` runs — with a
/// compiled echo plugin, and a recorder of what that plugin logged.
struct TestReplica {
    replica: Option<Replica>,
    state: watch::Receiver<ReplicaState>,
    leadership: watch::Receiver<Leadership>,
    echoes: Echoes,
    _dir: tempfile::TempDir,
}

impl TestReplica {
    /// Starts campaigning; the runtime starts only on becoming leader.
    fn start(server: &DevServer, engine: &Arc<PluginEngine>, lease: LeaseConfig) -> TestReplica {
        let dir = tempfile::tempdir().expect("plugins dir");
        let tag = lease.identity.clone();
        std::fs::write(
            dir.path().join("echo.toml"),
            format!(
                "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"demo\"\n[config]\nmode = \"echo\"\ntag = \"{tag}\"\n"
            ),
        )
        .expect("manifest");
        std::fs::copy(wasm("hostile"), dir.path().join("echo.wasm")).expect("copy wasm");
        let echoes = Echoes::default();
        let logs = broadcast::channel(1 << 16).0;
        echoes.record(logs.subscribe());
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
        let replica = Replica::start(server.client(), opts, Some(lease)).expect("replica");
        TestReplica {
            state: replica.state(),
            leadership: replica.leadership().expect("elected"),
            replica: Some(replica),
            echoes,
            _dir: dir,
        }
    }

    async fn wait_state(&self, what: &str, pred: impl Fn(&Leadership) -> bool) -> Leadership {
        let mut rx = self.leadership.clone();
        guarded(what, rx.wait_for(|s| pred(s)))
            .await
            .expect("elector state channel")
            .clone()
    }

    async fn wait_started(&self, what: &str) {
        let mut rx = self.state.clone();
        guarded(what, rx.wait_for(|s| *s == ReplicaState::Running))
            .await
            .expect("replica state channel");
    }

    fn leadership(&self) -> Leadership {
        self.leadership.borrow().clone()
    }

    fn is_running(&self) -> bool {
        *self.state.borrow() != ReplicaState::Standby
    }

    /// A crash: the elector stops without releasing, the informers and plugins die with it.
    async fn crash(&mut self) {
        self.replica.take().expect("replica").abort().await;
    }

    /// A clean shutdown (SIGTERM): stop the work, then release the Lease.
    async fn shut_down(&mut self) {
        let replica = self.replica.take().expect("replica");
        replica.shutdown().await.expect("clean shutdown");
    }
}

fn lease(identity: &str, duration_secs: u64) -> LeaseConfig {
    LeaseConfig::new(LEASE, NS, identity).with_lease_duration(Duration::from_secs(duration_secs))
}

async fn holder(server: &DevServer) -> (Option<String>, i32) {
    let api: Api<Lease> = Api::namespaced(server.client(), NS);
    let spec = api
        .get(LEASE)
        .await
        .expect("lease")
        .spec
        .unwrap_or_default();
    (spec.holder_identity, spec.lease_transitions.unwrap_or(0))
}

/// Every key in `keys` was echoed as an initial event.
fn replayed(seen: &[(String, bool)], keys: &BTreeSet<String>) -> bool {
    let initial: BTreeSet<_> = seen.iter().filter(|e| e.1).map(|e| e.0.clone()).collect();
    keys.is_subset(&initial)
}

/// Starts the server with `seeded` ConfigMaps in `demo`, then replica `a` (which leads) and
/// replica `b` (standby, having seen `a` hold the Lease).
async fn two_replicas(
    duration_secs: u64,
    retry: Option<Duration>,
) -> (DevServer, TestReplica, TestReplica, BTreeSet<String>) {
    informant_tests::init_tracing();
    let server = DevServer::start(DevServerConfig::default())
        .await
        .expect("start API server");
    create_namespaces(&server, &["demo"]);
    let mut keys = BTreeSet::new();
    for i in 0..5 {
        server
            .create(configmap("demo", &format!("seed{i}"), "v"))
            .unwrap();
        keys.insert(format!("demo/seed{i}"));
    }
    let engine = Arc::new(PluginEngine::new(EngineOptions::default()).expect("engine"));
    let cfg = |id: &str| {
        let mut c = lease(id, duration_secs);
        if let Some(r) = retry {
            c.retry_period = r;
        }
        c
    };
    let a = TestReplica::start(&server, &engine, cfg("a"));
    a.wait_state("a to lead", |s| *s == Leadership::Leading)
        .await;
    let b = TestReplica::start(&server, &engine, cfg("b"));
    let seen = b
        .wait_state("b to see a holding the lease", |s| {
            matches!(s, Leadership::Standby { holder: Some(_) })
        })
        .await;
    assert_eq!(
        seen,
        Leadership::Standby {
            holder: Some("a".into())
        }
    );

    // Only the leader runs: its plugin replays the cache and gets live events; the standby
    // started no informers and no plugins.
    a.wait_started("a's runtime").await;
    a.echoes
        .wait_until("a's replay of the seeded objects", |s| replayed(s, &keys))
        .await;
    server.create(configmap("demo", "live-a", "v")).unwrap();
    keys.insert("demo/live-a".into());
    a.echoes
        .wait_until("a to get the live event", |s| {
            s.contains(&("demo/live-a".into(), false))
        })
        .await;
    assert_eq!(b.leadership(), seen, "b stays standby while a renews");
    assert!(!b.is_running(), "the standby started its runtime");
    assert!(b.echoes.seen().is_empty(), "the standby's plugin ran");
    (server, a, b, keys)
}

/// After a takeover: `b`'s plugin gets every existing object as an initial event, then live ones.
async fn standby_took_over(server: &DevServer, b: &TestReplica, keys: &mut BTreeSet<String>) {
    b.wait_started("b's runtime").await;
    b.echoes
        .wait_until("b's full replay of the cache", |s| replayed(s, keys))
        .await;
    let initial: BTreeSet<_> = b
        .echoes
        .seen()
        .into_iter()
        .filter(|e| e.1)
        .map(|e| e.0)
        .collect();
    assert_eq!(
        &initial, keys,
        "b's replay is exactly the objects in the cache"
    );
    server.create(configmap("demo", "live-b", "v")).unwrap();
    b.echoes
        .wait_until("b to get live events", |s| {
            s.contains(&("demo/live-b".into(), false))
        })
        .await;
    keys.insert("demo/live-b".into());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_takes_over_when_the_leader_crashes() {
    // Long enough that a loaded CI machine still renews within the 2/3 deadline.
    let (server, mut a, b, mut keys) = two_replicas(8, None).await;

    a.crash().await;
    // Nothing released the Lease: b may take it only after it expires.
    assert_eq!(holder(&server).await, (Some("a".into()), 0));
    server
        .create(configmap("demo", "while-leaderless", "v"))
        .unwrap();
    keys.insert("demo/while-leaderless".into());

    b.wait_state("b to take over the expired lease", |s| {
        *s == Leadership::Leading
    })
    .await;
    assert_eq!(holder(&server).await, (Some("b".into()), 1));
    standby_took_over(&server, &b, &mut keys).await;
    assert!(
        !a.echoes.seen().iter().any(|e| e.0 == "demo/live-b"),
        "the crashed leader's plugin still ran"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_takes_over_at_once_when_the_leader_releases() {
    // A lease far longer than the test's guard: b can only lead within the guard if a's release
    // cleared the holder, never by waiting for expiry.
    let long = GUARD.as_secs() * 2;
    let (server, mut a, b, mut keys) = two_replicas(long, Some(Duration::from_millis(200))).await;

    a.shut_down().await;
    assert_eq!(a.leadership(), Leadership::Released);
    b.wait_state("b to acquire the released lease", |s| {
        *s == Leadership::Leading
    })
    .await;
    let (holder, transitions) = holder(&server).await;
    assert_eq!(holder.as_deref(), Some("b"));
    assert_eq!(transitions, 1);
    standby_took_over(&server, &b, &mut keys).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_steps_down_when_another_holder_takes_the_lease() {
    informant_tests::init_tracing();
    let server = DevServer::start(DevServerConfig::default())
        .await
        .expect("start API server");
    create_namespaces(&server, &["demo"]);
    let a = LeaderElector::start(server.client(), lease("a", 4)).expect("elector");
    guarded("a to lead", a.acquired()).await.expect("a leads");

    // An intruder overwrites the Lease (as a misconfigured second deployment might).
    let api: Api<Lease> = Api::namespaced(server.client(), NS);
    let mut stolen = api.get(LEASE).await.expect("lease");
    let spec = stolen.spec.as_mut().expect("spec");
    spec.holder_identity = Some("intruder".into());
    spec.renew_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    api.replace(LEASE, &Default::default(), &stolen)
        .await
        .expect("overwrite lease");

    assert_eq!(guarded("a to step down", a.lost()).await, Leadership::Lost);
    assert_eq!(a.leadership(), Leadership::Lost);
    // It does not fight back: the intruder still holds the Lease.
    assert_eq!(holder(&server).await.0.as_deref(), Some("intruder"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_steps_down_when_it_cannot_renew_within_the_deadline() {
    informant_tests::init_tracing();
    let server = DevServer::start(DevServerConfig::default())
        .await
        .expect("start API server");
    create_namespaces(&server, &["demo"]);
    let a = LeaderElector::start(server.client(), lease("a", 3)).expect("elector");
    guarded("a to lead", a.acquired()).await.expect("a leads");

    // The API server stops answering: renewals hang until the renew deadline.
    server.faults().pause();
    assert_eq!(guarded("a to step down", a.lost()).await, Leadership::Lost);
    server.faults().resume();
    server.shutdown().await;
}
