//! Sharded mode end to end: replicas, each the library's `Replica` started as
//! `informant run --shard-group` starts it, share real compiled plugins against one embedded API
//! server over loopback. Every plugin runs on exactly one live member; when a member crashes,
//! leaves or joins, its plugins move, and every change made meanwhile is handled by every plugin
//! at least once — from the cursor the old owner published, not from a replay of the cache.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use informant_devserver::{DevServer, DevServerConfig};
use informant_runtime::informer::{FactoryOptions, InitialList};
use informant_runtime::leader::LeaseConfig;
use informant_runtime::plugin::{EngineOptions, PluginEngine, PluginLog};
use informant_runtime::runtime::{Replica, RuntimeOptions};
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
}

impl How {
    fn new(client: kube::Client, lease_secs: u64) -> How {
        How {
            client,
            lease_secs,
            pod_uid: None,
            admin: None,
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

/// Checks, every 10 ms until finished, that every plugin runs on exactly one of the members:
/// a plugin on two at once (a double run) or on none (a stopped group) is recorded.
struct Watchdog {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<(usize, Vec<String>)>,
}

impl Watchdog {
    fn start(members: &[&Member], plugins: &[String]) -> Watchdog {
        let shards: Vec<(String, informant_runtime::shard::Shard)> = members
            .iter()
            .map(|m| {
                (
                    m.id.clone(),
                    m.replica.as_ref().unwrap().shard().unwrap().clone(),
                )
            })
            .collect();
        let plugins = plugins.to_vec();
        let stop = Arc::new(AtomicBool::new(false));
        let done = stop.clone();
        let task = tokio::spawn(async move {
            let (mut samples, mut wrong) = (0, Vec::new());
            while !done.load(Ordering::SeqCst) {
                let running: Vec<(&str, Vec<String>)> = shards
                    .iter()
                    .map(|(id, s)| (id.as_str(), s.book.running()))
                    .collect();
                let mut on: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
                for (id, r) in &running {
                    for p in r {
                        on.entry(p.as_str()).or_default().push(id);
                    }
                }
                for p in &plugins {
                    let owners = on.get(p.as_str()).cloned().unwrap_or_default();
                    if owners.len() != 1 && wrong.len() < 50 {
                        wrong.push(format!("{p} on {owners:?} after {samples} samples"));
                    }
                }
                samples += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            (samples, wrong)
        });
        Watchdog { stop, task }
    }

    /// The samples taken and every one where a plugin ran twice or nowhere.
    async fn finish(self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap()
    }
}

/// Deliveries of one change (plugin, key, version) by more than one member.
fn delivered_twice(echoes: &Echoes) -> Vec<String> {
    let mut by: BTreeMap<(String, String, u64, String), BTreeSet<String>> = BTreeMap::new();
    for e in echoes.all() {
        by.entry((e.plugin, e.key, e.rv, e.event))
            .or_default()
            .insert(e.member);
    }
    by.into_iter()
        .filter(|(_, members)| members.len() > 1)
        .map(|((p, k, rv, ev), members)| format!("{p}: {ev} {k}@{rv} on {members:?}"))
        .collect()
}

/// Watches for `window` that every plugin runs on exactly one of `members` (the observation
/// is the point: nothing is waited for), then asserts it did.
async fn exactly_once_throughout(members: &[&Member], plugins: &[String], window: Duration) {
    let dog = Watchdog::start(members, plugins);
    tokio::time::sleep(window).await;
    let (samples, wrong) = dog.finish().await;
    assert!(samples > 10, "only {samples} samples in {window:?}");
    assert!(
        wrong.is_empty(),
        "a plugin ran twice or nowhere in {window:?} ({samples} samples): {wrong:?}"
    );
    println!("exactly one owner per plugin in each of {samples} samples over {window:?}");
}

/// What the members may do in the Lease namespace with `lease_verbs` on Leases: follow the
/// group's Pods, and read the ConfigMaps the plugins watch.
fn member_rules(lease_verbs: &[&str]) -> Vec<informant_devserver::audit::AllowRule> {
    let rule = |verbs: &[&str], resource: &str, ns: &str| informant_devserver::audit::AllowRule {
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        resource: resource.into(),
        namespace: Some(ns.into()),
    };
    vec![
        rule(lease_verbs, "leases.coordination.k8s.io", LEASE_NS),
        rule(&["list", "watch"], "pods", LEASE_NS),
        rule(&["get", "list", "watch"], "configmaps", "demo"),
    ]
}

/// The chart's old sharding Role granted every verb on Leases but `watch`: each member ran every
/// plugin. Now a member that cannot follow its group runs none and says why in `/readyz`; once
/// `watch` is granted, every plugin runs on exactly one member, and still so three lease
/// durations later, every change delivered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_lease_watch_is_refused_runs_no_plugin_and_says_why() {
    let (server, engine) = server().await;
    let plugins = plugin_names(6);
    let echoes = Echoes::default();
    let lease_secs = 3;
    let without_watch = ["create", "get", "list", "update", "delete"];
    server.restrict("informant", member_rules(&without_watch));
    let mut members: Vec<Member> = ["a", "b", "c"]
        .iter()
        .map(|id| {
            let mut how = How::new(server.client_as("informant"), lease_secs);
            how.admin = Some(informant_tests::http::free_addr());
            Member::start_in_pod(&server, &engine, &echoes, id, &plugins, how)
        })
        .collect();
    for m in &members {
        let body = informant_tests::http::get_until(
            m.admin.unwrap(),
            "/readyz",
            "/readyz to say the member cannot follow its group",
            |status, body| status == 503 && body.contains("cannot follow the group's Leases"),
        )
        .await;
        let line: Vec<&str> = body.lines().filter(|l| l.contains("shard group")).collect();
        assert_eq!(line.len(), 1, "{body}");
        assert!(
            line[0].contains("watching leases") && line[0].contains("403"),
            "{body}"
        );
    }
    // Two lease durations, with changes: nothing runs anywhere, nothing is delivered.
    let refused = create(&server, "refused", 10);
    let until = Instant::now() + Duration::from_secs(2 * lease_secs);
    while Instant::now() < until {
        for m in &members {
            assert!(
                m.running().is_empty() && !m.active(),
                "{} runs {:?} though it cannot follow its group",
                m.id,
                m.running()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(echoes.all().is_empty(), "{:?}", echoes.all());

    let mut with_watch = without_watch.to_vec();
    with_watch.push("watch");
    server.restrict("informant", member_rules(&with_watch));
    let refs: Vec<&Member> = members.iter().collect();
    settled(&refs, &plugins).await;
    for m in &members {
        assert_eq!(m.why(), None);
        informant_tests::http::get_until(m.admin.unwrap(), "/readyz", "ready", |s, _| s == 200)
            .await;
    }
    let granted = create(&server, "granted", 30);
    exactly_once_throughout(&refs, &plugins, Duration::from_secs(3 * lease_secs)).await;
    let mut all = refused;
    all.extend(granted);
    all_handled(
        &echoes,
        &plugins,
        &all,
        "every change, once the plugins run",
    )
    .await;
    let twice = delivered_twice(&echoes);
    assert!(twice.is_empty(), "delivered by two members: {twice:?}");
    for m in members.iter_mut() {
        m.leave().await;
    }
    server.shutdown().await;
}

/// A Lease in the group's namespace written by someone who is no member: with a holder and no
/// Pod, owned by a Pod that does not exist, or copying a live member's Pod under another name.
/// Each publishes, for the crashed member's plugins, a cursor at the current resourceVersion,
/// after changes made since the crash. The new owners resume from the crashed member's own
/// cursors and get every change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_published_by_a_non_member_with_a_higher_cursor_changes_nothing() {
    forged_cursors_change_nothing(true).await;
}

/// Without Pods a Lease with no holder takes no share, but its cursors were read, and the
/// highest won: one published at the current resourceVersion made the new owner skip every
/// change since the crash. The new owner resumes from the member it saw running the plugins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_pods_a_holderless_lease_with_a_higher_cursor_changes_nothing() {
    forged_cursors_change_nothing(false).await;
}

async fn forged_cursors_change_nothing(in_pods: bool) {
    let mut g = Group::start_with(6, 4, in_pods).await;
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
    let real = published(&g.server, victim).await;
    g.member(victim).crash().await;
    let (changed, deleted) = churn(&g.server, &g.seeded, 30, "after-kill");
    // The current resourceVersion: past every change just made.
    let now = rv(&g
        .server
        .create(configmap("default", "clock", "now"))
        .unwrap());
    let forged: serde_json::Map<String, serde_json::Value> = real
        .iter()
        .map(|(p, e)| {
            let at: BTreeMap<&String, u64> = e.at.keys().map(|k| (k, now)).collect();
            (
                p.clone(),
                serde_json::json!({"scope": e.scope, "at": at, "held": true}),
            )
        })
        .collect();
    let cursors = serde_json::json!({"v": 1, "plugins": forged}).to_string();
    let forgeries = if in_pods {
        let survivor = ["a", "b", "c"].into_iter().find(|m| *m != victim).unwrap();
        let uid = g.member(survivor).pod_uid.clone().unwrap();
        vec![
            ("hooks-mallory", Some("mallory"), serde_json::Value::Null),
            (
                "hooks-ghost",
                Some("ghost"),
                serde_json::json!([{"apiVersion": "v1", "kind": "Pod", "name": "ghost", "uid": "9d3c0f7e-0000-4000-8000-000000000000"}]),
            ),
            (
                "hooks-mirror",
                Some(survivor),
                serde_json::json!([{"apiVersion": "v1", "kind": "Pod", "name": survivor, "uid": uid}]),
            ),
        ]
    } else {
        vec![("hooks-forged", None, serde_json::Value::Null)]
    };
    let api: Api<Lease> = Api::namespaced(g.server.client(), LEASE_NS);
    for (name, holder, owner) in forgeries {
        let lease = serde_json::from_value::<Lease>(serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {
                "name": name, "namespace": LEASE_NS,
                "labels": {(GROUP_LABEL): GROUP},
                "annotations": {(cursors::ANNOTATION): cursors},
                "ownerReferences": owner,
            },
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 4},
        }))
        .unwrap();
        api.create(&Default::default(), &lease)
            .await
            .expect("forge");
    }
    let survivors: Vec<&Member> = g.members.iter().filter(|m| m.id != victim).collect();
    let after = settled(&survivors, &g.plugins).await;
    let moved: BTreeMap<String, String> =
        its.iter().map(|p| (p.clone(), after[p].clone())).collect();
    let untouched: BTreeSet<String> = g
        .seeded
        .keys()
        .filter(|k| !changed.contains_key(*k) && !deleted.contains(k))
        .cloned()
        .collect();
    handed_over_exactly(
        &g.echoes,
        &moved,
        victim,
        (&changed, &deleted),
        &untouched,
        &g.plugins,
    )
    .await;
    for m in g.members.iter_mut().filter(|m| m.replica.is_some()) {
        m.leave().await;
    }
    g.server.shutdown().await;
}

/// Writes, every 200 ms until dropped, the Lease `name` holding `holder` with the group's
/// label and `owner` as ownerReferences: a squatter renewing as a live member would.
struct Squatter(tokio::task::JoinHandle<()>);

impl Squatter {
    fn start(server: &DevServer, name: &str, holder: &str, owner: serde_json::Value) -> Squatter {
        let api: Api<Lease> = Api::namespaced(server.client(), LEASE_NS);
        let (name, holder) = (name.to_string(), holder.to_string());
        Squatter(tokio::spawn(async move {
            loop {
                let now = k8s_openapi::jiff::Timestamp::now().to_string();
                let lease = serde_json::from_value::<Lease>(serde_json::json!({
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {
                        "name": name, "namespace": LEASE_NS,
                        "labels": {(GROUP_LABEL): GROUP},
                        "ownerReferences": owner.clone(),
                    },
                    "spec": {"holderIdentity": holder, "leaseDurationSeconds": 3600, "renewTime": now},
                }))
                .unwrap();
                let _ = api
                    .patch(
                        &name,
                        &kube::api::PatchParams::apply("squatter").force(),
                        &kube::api::Patch::Apply(&lease),
                    )
                    .await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }))
    }
}

impl Drop for Squatter {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A Lease that keeps renewing under a name no Pod backs, and one claiming a replaced member's
/// identity (its Pod deleted, as its Deployment replaced it) and still owned by that Pod's uid:
/// neither takes a share. Every plugin runs on exactly one real member, throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_squatting_lease_takes_no_share() {
    let mut g = Group::start_with(12, 3, true).await;
    let _mallory = Squatter::start(
        &g.server,
        "hooks-mallory",
        "mallory",
        serde_json::Value::Null,
    );
    let c_uid = g.member("c").pod_uid.clone().unwrap();
    g.member("c").crash().await;
    g.server
        .delete("v1", "Pod", Some(LEASE_NS), "c")
        .expect("delete c's Pod");
    let _c = Squatter::start(
        &g.server,
        "hooks-c",
        "c",
        serde_json::json!([{"apiVersion": "v1", "kind": "Pod", "name": "c", "uid": c_uid}]),
    );
    let survivors: Vec<&Member> = g.members.iter().filter(|m| m.id != "c").collect();
    let placed = settled(&survivors, &g.plugins).await;
    assert!(placed.values().all(|o| o == "a" || o == "b"), "{placed:?}");
    exactly_once_throughout(&survivors, &g.plugins, Duration::from_secs(3 * 3)).await;
    let changed = create(&g.server, "squatted", 20);
    all_handled(
        &g.echoes,
        &g.plugins,
        &changed,
        "every change with squatters about",
    )
    .await;
    for m in g.members.iter_mut().filter(|m| m.replica.is_some()) {
        m.leave().await;
    }
    g.server.shutdown().await;
}

/// 1,000 Leases carrying the group's label, created over HTTP as fast as the server takes them,
/// then rewritten twice (each a "renewal"): no plugin runs on two members at once or on none,
/// the members see exactly themselves, and every change made meanwhile is delivered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_junk_leases_neither_run_a_plugin_twice_nor_stop_the_group() {
    use futures::StreamExt;
    let mut g = Group::start_with(12, 4, true).await;
    let members: Vec<&Member> = g.members.iter().collect();
    let dog = Watchdog::start(&members, &g.plugins);
    let junk = |i: usize| {
        serde_json::from_value::<Lease>(serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {
                "name": format!("hooks-junk-{i:04}"), "namespace": LEASE_NS,
                "labels": {(GROUP_LABEL): GROUP},
                "annotations": {(cursors::ANNOTATION): format!(
                    "{{\"v\":1,\"plugins\":{{\"p00\":{{\"scope\":\"x\",\"at\":{{\"i\":{i}}},\"held\":true}}}}}}"
                )},
            },
            "spec": {"holderIdentity": format!("junk-{i:04}"), "leaseDurationSeconds": 4},
        }))
        .unwrap()
    };
    let api: Api<Lease> = Api::namespaced(g.server.client(), LEASE_NS);
    let started = Instant::now();
    let created = futures::stream::iter(0..1000)
        .map(|i| {
            let (api, lease) = (api.clone(), junk(i));
            async move { api.create(&Default::default(), &lease).await.is_ok() }
        })
        .buffer_unordered(16)
        .filter(|ok| std::future::ready(*ok))
        .count()
        .await;
    assert_eq!(created, 1000);
    let during = create(&g.server, "flood", 30);
    for round in 0..2 {
        futures::stream::iter(0..1000)
            .map(|i| {
                let (api, mut lease) = (api.clone(), junk(i));
                lease.spec.as_mut().unwrap().renew_time =
                    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
                        k8s_openapi::jiff::Timestamp::now(),
                    ));
                let name = lease.metadata.name.clone().unwrap();
                async move {
                    api.patch(
                        &name,
                        &kube::api::PatchParams::apply("junk").force(),
                        &kube::api::Patch::Apply(&lease),
                    )
                    .await
                    .is_ok()
                }
            })
            .buffer_unordered(16)
            .count()
            .await;
        println!("junk round {round} done after {:?}", started.elapsed());
    }
    let flood = started.elapsed();
    // And two lease durations after the flood, while the junk expires.
    tokio::time::sleep(Duration::from_secs(2 * 4)).await;
    let (samples, wrong) = dog.finish().await;
    println!("flood of 1,000 junk leases and 2,000 rewrites took {flood:?}; {samples} samples");
    assert!(
        wrong.is_empty(),
        "a plugin ran twice or nowhere during the flood: {wrong:?}"
    );
    for m in &members {
        assert_eq!(m.members_seen(), ["a", "b", "c"], "{} sees junk", m.id);
    }
    all_handled(
        &g.echoes,
        &g.plugins,
        &during,
        "every change made during the flood",
    )
    .await;
    let twice = delivered_twice(&g.echoes);
    assert!(twice.is_empty(), "delivered by two members: {twice:?}");
    for m in g.members.iter_mut() {
        m.leave().await;
    }
    g.server.shutdown().await;
}

/// A replica killed (its Pod left, as a crashed container's is): its plugins run elsewhere
/// about one lease duration later, from its cursors, nothing lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replicas_plugins_run_elsewhere_within_about_one_lease_duration() {
    let lease_secs = 4;
    let mut g = Group::start_with(6, lease_secs, true).await;
    let victim = g.placed.values().next().unwrap().clone();
    let its: Vec<String> = g
        .placed
        .iter()
        .filter(|(_, o)| **o == victim)
        .map(|(p, _)| p.clone())
        .collect();
    let last = *g.seeded.values().max().unwrap();
    cursors_reach(&g.server, &victim, &its, last).await;
    g.member(&victim).crash().await;
    let killed = Instant::now();
    let survivors: Vec<&Member> = g.members.iter().filter(|m| m.id != victim).collect();
    eventually("the killed member's plugins to run elsewhere", || {
        let p = placement(&survivors);
        its.iter().all(|x| p.get(x).is_some_and(|o| o.len() == 1))
    })
    .await;
    let took = killed.elapsed();
    println!(
        "kill: {} plugins of {victim} ran elsewhere after {took:?} (lease {lease_secs} s)",
        its.len()
    );
    assert!(
        took < Duration::from_secs(lease_secs) + Duration::from_millis(2500),
        "took {took:?} with a {lease_secs} s lease"
    );
    g.after_departure_of(&victim).await;
}
