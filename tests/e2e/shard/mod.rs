//! Sharded mode end to end: replicas, each the library's `Replica` started as
//! `informant run --shard-group` starts it, share real compiled plugins against one embedded API
//! server over loopback. Every plugin runs on exactly one live member; when a member crashes,
//! leaves or joins, its plugins move, and every change made meanwhile is handled by every plugin
//! at least once — from the cursor the old owner published, not from a replay of the cache.

mod hostile;
mod restart;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use informant_devserver::{DevServer, DevServerConfig};
use informant_runtime::informer::{FactoryOptions, InitialList};
use informant_runtime::leader::LeaseConfig;
use informant_runtime::plugin::exec::engine::{EngineOptions, PluginEngine};
use informant_runtime::plugin::imports::log::PluginLog;
use informant_runtime::runtime::{Replica, RuntimeOptions, StateOptions};
use informant_runtime::shard::{GROUP_LABEL, ShardBy, ShardConfig, cursors, rendezvous};
use informant_tests::plugins::wasm;
use informant_tests::{GUARD, configmap, create_namespaces};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use parking_lot::Mutex;
use tokio::sync::broadcast;

const GROUP: &str = "hooks";
const LEASE_NS: &str = "default";

/// One echo line: which member's plugin handled what.
#[derive(Debug, Clone)]
struct Echo {
    member: String,
    plugin: String,
    event: String,
    key: String,
    rv: u64,
    initial: bool,
}

/// Every echo of every member, in arrival order.
#[derive(Clone, Default)]
struct Echoes(Arc<Mutex<Vec<Echo>>>);

impl Echoes {
    fn record(&self, member: &str, mut rx: broadcast::Receiver<PluginLog>) {
        let (me, member) = (self.clone(), member.to_string());
        tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(line) => {
                        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line.message) else {
                            continue;
                        };
                        me.0.lock().push(Echo {
                            member: member.clone(),
                            plugin: v["tag"].as_str().unwrap_or_default().into(),
                            event: v["type"].as_str().unwrap_or_default().into(),
                            key: v["key"].as_str().unwrap_or_default().into(),
                            rv: v["rv"].as_str().and_then(|r| r.parse().ok()).unwrap_or(0),
                            initial: v["initial"].as_bool().unwrap_or(false),
                        });
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        panic!("the test's log recorder lagged and lost {n} plugin log lines")
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                }
            }
        });
    }

    fn all(&self) -> Vec<Echo> {
        self.0.lock().clone()
    }

    /// Whether `plugin` handled `key` at version `rv` or later (as the given event type).
    fn handled(&self, plugin: &str, key: &str, rv: u64, event: Option<&str>) -> bool {
        self.0.lock().iter().any(|e| {
            e.plugin == plugin && e.key == key && e.rv >= rv && event.is_none_or(|t| t == e.event)
        })
    }
}

/// Polls `cond` until it holds, failing the test past [`GUARD`]: for states only observable by
/// asking (which plugins a member runs), not a sleep in place of a condition.
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + GUARD;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What `plugins` have not handled of `keys` (at their versions) and `deleted`, for a failure
/// message.
fn missing(
    echoes: &Echoes,
    plugins: &[String],
    keys: &BTreeMap<String, u64>,
    deleted: &[String],
) -> Vec<String> {
    let mut out = Vec::new();
    for p in plugins {
        for (k, rv) in keys {
            if !echoes.handled(p, k, *rv, None) {
                out.push(format!("{p}: {k}@{rv}"));
            }
        }
        for k in deleted {
            if !echoes.handled(p, k, 0, Some("deleted")) {
                out.push(format!("{p}: deleted {k}"));
            }
        }
    }
    out
}

/// A TCP hop between one member and the API server, which the test can cut.
struct Cuttable {
    addr: SocketAddr,
    cut: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Cuttable {
    async fn start(upstream: SocketAddr) -> Cuttable {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
        let (c, k) = (cut.clone(), conns.clone());
        tokio::spawn(async move {
            while let Ok((mut down, _)) = listener.accept().await {
                if c.load(Ordering::SeqCst) {
                    continue;
                }
                let task = tokio::spawn(async move {
                    if let Ok(mut up) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
                    }
                });
                k.lock().push(task);
            }
        });
        Cuttable { addr, cut, conns }
    }

    /// Every connection dropped, every new one refused: the member can no longer reach the
    /// server (nor renew its Lease), while the others still can.
    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for t in self.conns.lock().drain(..) {
            t.abort();
        }
    }

    fn client(&self) -> kube::Client {
        let config = kube::Config::new(format!("http://{}", self.addr).parse().unwrap());
        kube::Client::try_from(config).unwrap()
    }
}

/// One member: a sharded `Replica` with its own copy of the plugins directory.
struct Member {
    id: String,
    replica: Option<Replica>,
    admin: Option<SocketAddr>,
    /// The uid of its Pod, when it runs in one.
    pod_uid: Option<String>,
    _dir: tempfile::TempDir,
}

/// How a member is started.
#[derive(Clone)]
struct How {
    /// Its client (a restricted identity's, or through a [`Cuttable`] hop).
    client: kube::Client,
    lease_secs: u64,
    /// The uid of the Pod the test made for it ([`pod`]): membership tied to the group's Pods.
    pod_uid: Option<String>,
    /// Where it serves `/readyz` and `/plugins`.
    admin: Option<SocketAddr>,
    /// Its state directory (`--state-dir`), kept across its restarts.
    state: Option<std::path::PathBuf>,
}

impl How {
    fn new(client: kube::Client, lease_secs: u64) -> How {
        How {
            client,
            lease_secs,
            pod_uid: None,
            admin: None,
            state: None,
        }
    }
}

/// Creates the Pod a member `name` would run in, labelled with the group, as its Deployment
/// would (the embedded server stores it; nothing runs it); its uid.
fn pod(server: &DevServer, name: &str) -> String {
    let obj = server
        .create(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": LEASE_NS, "labels": {(GROUP_LABEL): GROUP}},
            "spec": {"containers": [{"name": "informant", "image": "informant"}]},
        }))
        .expect("create the member's Pod");
    obj["metadata"]["uid"].as_str().expect("a uid").to_string()
}

impl Member {
    fn start(
        client: kube::Client,
        engine: &Arc<PluginEngine>,
        echoes: &Echoes,
        id: &str,
        plugins: &[String],
        lease_secs: u64,
    ) -> Member {
        Member::start_with(engine, echoes, id, plugins, How::new(client, lease_secs))
    }

    /// A member in its own Pod (created here), membership tied to Pods.
    fn start_in_pod(
        server: &DevServer,
        engine: &Arc<PluginEngine>,
        echoes: &Echoes,
        id: &str,
        plugins: &[String],
        mut how: How,
    ) -> Member {
        how.pod_uid = Some(pod(server, id));
        Member::start_with(engine, echoes, id, plugins, how)
    }

    fn start_with(
        engine: &Arc<PluginEngine>,
        echoes: &Echoes,
        id: &str,
        plugins: &[String],
        how: How,
    ) -> Member {
        let dir = tempfile::tempdir().expect("plugins dir");
        for p in plugins {
            std::fs::copy(wasm("hostile"), dir.path().join(format!("{p}.wasm"))).unwrap();
            std::fs::write(
                dir.path().join(format!("{p}.toml")),
                format!(
                    "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"demo\"\n[config]\nmode = \"echo\"\ntag = \"{p}\"\n"
                ),
            )
            .unwrap();
        }
        let logs = broadcast::channel(1 << 16).0;
        echoes.record(id, logs.subscribe());
        let opts = RuntimeOptions {
            plugins: Some(dir.path().to_path_buf()),
            factory: FactoryOptions {
                initial_list: InitialList::Paginated,
                ..Default::default()
            },
            engine: Some(engine.clone()),
            plugin_logs: Some(logs),
            admin: how.admin,
            state: how.state.clone().map(|dir| StateOptions {
                dir,
                cluster: "the embedded API server".into(),
                identity: Some(id.into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let shard = ShardConfig {
            group: GROUP.into(),
            lease: LeaseConfig::new(GROUP, LEASE_NS, id)
                .with_lease_duration(Duration::from_secs(how.lease_secs)),
            by: ShardBy::Plugin,
            pod_uid: how.pod_uid.clone(),
        };
        let replica = Replica::start_sharded(how.client, opts, shard).expect("sharded replica");
        Member {
            id: id.into(),
            replica: Some(replica),
            admin: how.admin,
            pod_uid: how.pod_uid,
            _dir: dir,
        }
    }

    /// The plugins running on this member now (none once stopped).
    fn running(&self) -> Vec<String> {
        self.replica
            .as_ref()
            .and_then(|r| r.shard())
            .map(|s| s.book.running())
            .unwrap_or_default()
    }

    fn members_seen(&self) -> Vec<String> {
        self.replica
            .as_ref()
            .and_then(|r| r.shard())
            .map(|s| s.assignment.borrow().members.clone())
            .unwrap_or_default()
    }

    fn active(&self) -> bool {
        self.replica
            .as_ref()
            .and_then(|r| r.shard())
            .is_some_and(|s| s.assignment.borrow().active)
    }

    /// Why it runs no plugin, as its membership says.
    fn why(&self) -> Option<String> {
        self.replica
            .as_ref()
            .and_then(|r| r.shard())
            .and_then(|s| s.why.borrow().clone())
    }

    /// As `kill -9`: nothing released, the Lease left held with its last cursors.
    async fn crash(&mut self) {
        self.replica.take().expect("replica").abort().await;
    }

    /// As SIGTERM: plugins stopped, their cursors published, the Lease released.
    async fn leave(&mut self) {
        let r = self.replica.take().expect("replica");
        r.shutdown().await.expect("clean leave");
    }
}

/// The server, a `demo` namespace and the engine the members share.
async fn server() -> (DevServer, Arc<PluginEngine>) {
    informant_tests::init_tracing();
    let server = DevServer::start(DevServerConfig::default())
        .await
        .expect("start API server");
    create_namespaces(&server, &["demo"]);
    let engine = Arc::new(PluginEngine::new(EngineOptions::default()).expect("engine"));
    (server, engine)
}

fn plugin_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("p{i:02}")).collect()
}

/// Which member runs each plugin.
fn placement(members: &[&Member]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for m in members {
        for p in m.running() {
            out.entry(p).or_default().push(m.id.clone());
        }
    }
    out
}

/// Waits until every plugin runs on exactly one of `members`, each seeing exactly them, and
/// checks each runs where rendezvous hashing puts it.
async fn settled(members: &[&Member], plugins: &[String]) -> BTreeMap<String, String> {
    let ids: Vec<String> = {
        let mut v: Vec<String> = members.iter().map(|m| m.id.clone()).collect();
        v.sort();
        v
    };
    eventually("every plugin to run on exactly one member", || {
        let p = placement(members);
        members.iter().all(|m| m.members_seen() == ids)
            && p.len() == plugins.len()
            && p.values().all(|owners| owners.len() == 1)
    })
    .await;
    let placed: BTreeMap<String, String> = placement(members)
        .into_iter()
        .map(|(p, o)| (p, o[0].clone()))
        .collect();
    for (p, owner) in &placed {
        let want = rendezvous::owner(&format!("/{p}"), ids.iter().map(String::as_str)).unwrap();
        assert_eq!(owner, want, "{p} runs on {owner}, rendezvous says {want}");
    }
    placed
}

/// Creates `n` ConfigMaps `prefix-i` in `demo`; their keys and versions.
fn create(server: &DevServer, prefix: &str, n: usize) -> BTreeMap<String, u64> {
    (0..n)
        .map(|i| {
            let name = format!("{prefix}-{i:03}");
            let obj = server.create(configmap("demo", &name, "v")).unwrap();
            (format!("demo/{name}"), rv(&obj))
        })
        .collect()
}

fn rv(obj: &serde_json::Value) -> u64 {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// Waits until every plugin handled every key at (at least) its version.
async fn all_handled(
    echoes: &Echoes,
    plugins: &[String],
    keys: &BTreeMap<String, u64>,
    what: &str,
) {
    all_handled_and_deleted(echoes, plugins, keys, &[], what).await;
}

/// Waits until every plugin handled every key at its version and every delete, naming what
/// is missing on a timeout.
async fn all_handled_and_deleted(
    echoes: &Echoes,
    plugins: &[String],
    keys: &BTreeMap<String, u64>,
    deleted: &[String],
    what: &str,
) {
    let deadline = Instant::now() + GUARD;
    loop {
        let left = missing(echoes, plugins, keys, deleted);
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; missing {} (first: {:?})",
            left.len(),
            &left[..left.len().min(10)]
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The cursors `member`'s Lease publishes.
async fn published(server: &DevServer, member: &str) -> BTreeMap<String, cursors::Entry> {
    let api: Api<Lease> = Api::namespaced(server.client(), LEASE_NS);
    api.get_opt(&format!("{GROUP}-{member}"))
        .await
        .unwrap()
        .and_then(|l| l.metadata.annotations)
        .and_then(|a| a.get(cursors::ANNOTATION).cloned())
        .and_then(|t| cursors::parse(&t))
        .unwrap_or_default()
}

/// Waits until `member` has published, for each of `plugins`, a cursor at `rv` or past it.
async fn cursors_reach(server: &DevServer, member: &str, plugins: &[String], rv: u64) {
    let deadline = Instant::now() + GUARD;
    loop {
        let doc = published(server, member).await;
        let ok = plugins.iter().all(|p| {
            doc.get(p)
                .is_some_and(|e| e.at.values().next().is_some_and(|w| *w >= rv))
        });
        if ok {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{member} never published cursors at {rv}: {doc:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Changes made while `moved` plugins have no owner: modifies, deletes and creates. Returns
/// the changes as key → version, and the deleted keys.
fn churn(
    server: &DevServer,
    seeded: &BTreeMap<String, u64>,
    creates: usize,
    tag: &str,
) -> (BTreeMap<String, u64>, Vec<String>) {
    let keys: Vec<&String> = seeded.keys().collect();
    let mut changed = BTreeMap::new();
    for k in &keys[..5] {
        let name = k.trim_start_matches("demo/");
        let obj = server
            .update(configmap("demo", name, &format!("changed-{tag}")))
            .unwrap();
        changed.insert(k.to_string(), rv(&obj));
    }
    let mut deleted = Vec::new();
    for k in &keys[5..8] {
        let name = k.trim_start_matches("demo/");
        server
            .delete("v1", "ConfigMap", Some("demo"), name)
            .unwrap();
        deleted.push(k.to_string());
    }
    changed.extend(create(server, tag, creates));
    (changed, deleted)
}

/// The moved plugins' deliveries on their new owners after `since` echoes: every change
/// handled, every delete delivered, no replay of the cache and nothing for untouched objects.
async fn handed_over_exactly(
    echoes: &Echoes,
    moved: &BTreeMap<String, String>,
    victim: &str,
    (changed, deleted): (&BTreeMap<String, u64>, &[String]),
    untouched: &BTreeSet<String>,
    plugins: &[String],
) {
    all_handled_and_deleted(
        echoes,
        plugins,
        changed,
        deleted,
        "every plugin to handle every change and delete made during the handover",
    )
    .await;
    let all = echoes.all();
    let mut overlap = 0;
    for (p, new_owner) in moved {
        let on_new: Vec<&Echo> = all
            .iter()
            .filter(|e| &e.plugin == p && &e.member == new_owner)
            .collect();
        assert!(
            !on_new.iter().any(|e| e.initial),
            "{p} was replayed the whole cache on {new_owner} instead of resuming from {victim}'s cursor"
        );
        let again: Vec<&&Echo> = on_new
            .iter()
            .filter(|e| untouched.contains(&e.key))
            .collect();
        assert!(
            again.is_empty(),
            "{p} was given objects untouched since {victim} handled them: {again:?}"
        );
        overlap += on_new
            .iter()
            .filter(|e| !changed.contains_key(&e.key) && !deleted.contains(&e.key))
            .count();
    }
    println!(
        "handover: {} plugins moved from {victim}; {} changes and {} deletes each handled by every plugin; {overlap} deliveries beyond them",
        moved.len(),
        changed.len(),
        deleted.len()
    );
}

/// Members `a`, `b`, `c` running `plugins` copies of the echo plugin with `lease_secs` Leases,
/// settled, with 30 seeded objects every plugin has handled.
struct Group {
    server: DevServer,
    engine: Arc<PluginEngine>,
    echoes: Echoes,
    plugins: Vec<String>,
    members: Vec<Member>,
    placed: BTreeMap<String, String>,
    seeded: BTreeMap<String, u64>,
}

impl Group {
    async fn start(plugins: usize, lease_secs: u64) -> Group {
        Group::start_with(plugins, lease_secs, false).await
    }

    /// With `in_pods`, each member runs in a Pod of the group and membership is tied to Pods.
    async fn start_with(plugins: usize, lease_secs: u64, in_pods: bool) -> Group {
        let (server, engine) = server().await;
        let plugins = plugin_names(plugins);
        let echoes = Echoes::default();
        let members: Vec<Member> = ["a", "b", "c"]
            .iter()
            .map(|id| {
                let how = How::new(server.client(), lease_secs);
                match in_pods {
                    true => Member::start_in_pod(&server, &engine, &echoes, id, &plugins, how),
                    false => Member::start_with(&engine, &echoes, id, &plugins, how),
                }
            })
            .collect();
        let placed = settled(&members.iter().collect::<Vec<_>>(), &plugins).await;
        let seeded = create(&server, "seed", 30);
        all_handled(
            &echoes,
            &plugins,
            &seeded,
            "every plugin to handle the seeded objects",
        )
        .await;
        Group {
            server,
            engine,
            echoes,
            plugins,
            members,
            placed,
            seeded,
        }
    }

    fn member(&mut self, id: &str) -> &mut Member {
        self.members.iter_mut().find(|m| m.id == id).unwrap()
    }

    /// After `gone` crashed or left: 500 creates, 5 modifies and 3 deletes while its plugins
    /// move; then each moved plugin resumed on its new member exactly from `gone`'s cursors,
    /// the others stayed put, and nothing was lost.
    async fn after_departure_of(mut self, gone: &str) {
        let (changed, deleted) = churn(&self.server, &self.seeded, 500, "during");
        let survivors: Vec<&Member> = self.members.iter().filter(|m| m.id != gone).collect();
        let after = settled(&survivors, &self.plugins).await;
        let mut moved = BTreeMap::new();
        for (p, o) in &self.placed {
            if o == gone {
                moved.insert(p.clone(), after[p].clone());
            } else {
                assert_eq!(&after[p], o, "{p} moved though its member stayed");
            }
        }
        assert!(!moved.is_empty(), "{gone} ran no plugin");
        let untouched: BTreeSet<String> = self
            .seeded
            .keys()
            .filter(|k| !changed.contains_key(*k) && !deleted.contains(k))
            .cloned()
            .collect();
        handed_over_exactly(
            &self.echoes,
            &moved,
            gone,
            (&changed, &deleted),
            &untouched,
            &self.plugins,
        )
        .await;
        for m in self.members.iter_mut().filter(|m| m.replica.is_some()) {
            m.leave().await;
        }
        self.server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_members_plugins_resume_elsewhere_from_its_cursors_without_loss() {
    // Long enough that a loaded machine renews within the 2/3 deadline.
    let mut g = Group::start(6, 4).await;
    // The member running most plugins crashes once its Lease says it handled them all.
    let victim = ["a", "b", "c"]
        .into_iter()
        .max_by_key(|m| g.placed.values().filter(|o| o == m).count())
        .unwrap();
    let its: Vec<String> = g
        .placed
        .iter()
        .filter(|(_, o)| *o == victim)
        .map(|(p, _)| p.clone())
        .collect();
    let last = *g.seeded.values().max().unwrap();
    cursors_reach(&g.server, victim, &its, last).await;
    g.member(victim).crash().await;
    g.after_departure_of(victim).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaving_member_hands_its_plugins_over_at_once_with_its_last_cursors() {
    // Leases far longer than the test's guard: the others can only take over within the guard
    // because the leaver released its Lease, never by waiting for it to expire.
    let mut g = Group::start(6, GUARD.as_secs() * 2).await;
    let leaver = g.placed.values().next().unwrap().clone();
    g.member(&leaver).leave().await;
    g.after_departure_of(&leaver).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_member_takes_only_the_plugins_it_wins_and_nothing_is_lost() {
    let g = Group::start(30, 4).await;
    let Group {
        server,
        engine,
        echoes,
        plugins,
        mut members,
        placed: before,
        seeded,
    } = g;
    members.push(Member::start(
        server.client(),
        &engine,
        &echoes,
        "d",
        &plugins,
        4,
    ));
    let (changed, deleted) = churn(&server, &seeded, 200, "during");
    let after = settled(&members.iter().collect::<Vec<_>>(), &plugins).await;
    let moved: Vec<&String> = plugins.iter().filter(|p| before[*p] != after[*p]).collect();
    assert!(
        moved.iter().all(|p| after[*p] == "d"),
        "plugins moved between old members: {before:?} -> {after:?}"
    );
    assert!(
        moved.len() * 3 <= plugins.len(),
        "{} of {} plugins moved on a join",
        moved.len(),
        plugins.len()
    );
    all_handled_and_deleted(
        &echoes,
        &plugins,
        &changed,
        &deleted,
        "every plugin to handle every change and delete made during the join",
    )
    .await;
    println!(
        "join: {} of {} plugins moved to the new member",
        moved.len(),
        plugins.len()
    );
    for m in members.iter_mut() {
        m.leave().await;
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_cannot_renew_stops_its_plugins_before_another_takes_them() {
    let (server, engine) = server().await;
    let plugins = plugin_names(6);
    let echoes = Echoes::default();
    let hop = Cuttable::start(server.addr()).await;
    let mut a = Member::start(hop.client(), &engine, &echoes, "a", &plugins, 4);
    let mut b = Member::start(server.client(), &engine, &echoes, "b", &plugins, 4);
    let placed = settled(&[&a, &b], &plugins).await;
    let on_a: Vec<String> = placed
        .iter()
        .filter(|(_, o)| *o == "a")
        .map(|(p, _)| p.clone())
        .collect();
    assert!(!on_a.is_empty(), "no plugin on a: {placed:?}");

    hop.cut();
    let cut_at = Instant::now();
    // Who stops and who starts, and when, as each member reports it.
    let (mut a_stopped, mut b_started) = (None, None);
    let deadline = Instant::now() + GUARD;
    while a_stopped.is_none() || b_started.is_none() {
        assert!(Instant::now() < deadline, "no handover after the cut");
        if a_stopped.is_none() && !a.active() && a.running().is_empty() {
            a_stopped = Some(Instant::now());
        }
        let b_runs = b.running();
        if b_started.is_none() && on_a.iter().any(|p| b_runs.contains(p)) {
            b_started = Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (stopped, started) = (a_stopped.unwrap(), b_started.unwrap());
    println!(
        "cut: a stopped its plugins after {:?}, b took them after {:?}",
        stopped - cut_at,
        started - cut_at
    );
    assert!(stopped < started, "b ran a's plugins before a stopped them");
    // And nothing made after the cut is lost.
    let during = create(&server, "after-cut", 50);
    all_handled(
        &echoes,
        &plugins,
        &during,
        "b to handle every change after the cut",
    )
    .await;
    a.crash().await;
    b.leave().await;
    server.shutdown().await;
}

/// Leases in the group that no member wrote: one claiming to be valid for 68 years and never
/// renewed, one whose cursors are garbage, one with cursors for every plugin far in the past
/// under a scope no plugin has. Every plugin still runs on exactly one real member once the
/// squatter's record is older than the group's lease duration, and every change is handled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_no_member_wrote_neither_hold_plugins_nor_steer_handovers() {
    let (server, engine) = server().await;
    let plugins = plugin_names(6);
    let api: Api<Lease> = Api::namespaced(server.client(), LEASE_NS);
    let squat = |name: &str, holder: Option<&str>, seconds: i32, cursors: &str| {
        serde_json::from_value::<Lease>(serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {
                "name": name, "namespace": LEASE_NS,
                "labels": {"informant.dev/shard-group": GROUP},
                "annotations": {(cursors::ANNOTATION): cursors},
            },
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": seconds},
        }))
        .unwrap()
    };
    let stale: serde_json::Map<String, serde_json::Value> = plugins
        .iter()
        .map(|p| {
            (
                p.clone(),
                serde_json::json!({"scope": "not-a-scope", "at": {"/v1/configmaps@demo": 1}}),
            )
        })
        .collect();
    for lease in [
        squat("hooks-mallory", Some("mallory"), i32::MAX, "{}"),
        squat("hooks-garbage", Some("garbage"), 1, &"[".repeat(4096)),
        squat(
            "hooks-stale",
            None,
            1,
            &serde_json::json!({"v": 1, "plugins": stale}).to_string(),
        ),
    ] {
        api.create(&Default::default(), &lease)
            .await
            .expect("squat");
    }
    let echoes = Echoes::default();
    let mut members: Vec<Member> = ["a", "b"]
        .iter()
        .map(|id| Member::start(server.client(), &engine, &echoes, id, &plugins, 3))
        .collect();
    // The squatters expire after the members' own 3 s, whatever they claim.
    settled(&members.iter().collect::<Vec<_>>(), &plugins).await;
    let changed = create(&server, "after", 50);
    all_handled(
        &echoes,
        &plugins,
        &changed,
        "every plugin to handle every change",
    )
    .await;
    // Each plugin started from a replay: no stale cursor under another scope was taken.
    let all = echoes.all();
    for p in &plugins {
        assert!(
            !all.iter().any(|e| &e.plugin == p && e.event == "deleted"),
            "{p} was handed deletes from a squatter's cursor"
        );
    }
    for m in members.iter_mut() {
        m.leave().await;
    }
    server.shutdown().await;
}
