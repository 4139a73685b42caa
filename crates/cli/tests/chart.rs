//! Every chart mode run as a cluster would run it: the chart rendered by Helm's own engine, its
//! RBAC for the host's ServiceAccount enforced per verb by the embedded API server, and real
//! `informant` processes started with exactly the rendered arguments and environment (the
//! downward API filled in, each pod's volumes as directories, each pod on a loopback address of
//! its own), each holding the ServiceAccount's token.
//!
//! Without helm-python-sdk (Python and PyPI) each test skips with a printed reason (fails under
//! `INFORMANT_REQUIRE_ALL=1`).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use informant_devserver::{DevServer, DevServerConfig};
use informant_tests::chart::{PodRun, Rendered, allow_rules, python, render, service_account};
use informant_tests::http::{free_addr, get, get_until};
use informant_tests::{GUARD, configmap, create_namespaces};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

/// The release namespace the chart is installed into.
const RELEASE_NS: &str = "ops";
/// The namespace the test plugins watch.
const WATCHED_NS: &str = "demo";

/// The chart installed on the embedded API server: its RBAC bound to the ServiceAccount, and a
/// kubeconfig holding that account's token, as a pod's mounted token would.
struct Install {
    server: DevServer,
    rendered: Rendered,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    health_port: u16,
}

impl Install {
    /// `helm install demo -n ops` with `values` (free admin and health ports added, so tests
    /// running at once never share a port); `None` after a printed skip without the SDK.
    async fn new(values: Value) -> Option<Install> {
        python()?;
        let health_port = free_addr().port();
        let mut values = values;
        values["admin"]["port"] = json!(free_addr().port());
        values["health"] = json!({"port": health_port});
        let rendered = render(values).expect("render");
        let server = DevServer::start(DevServerConfig::default())
            .await
            .expect("start API server");
        create_namespaces(&server, &[RELEASE_NS, WATCHED_NS]);
        let (_, user) = service_account(&rendered);
        server.restrict(&user, allow_rules(&rendered));
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("serviceaccount-kubeconfig");
        server.write_kubeconfig_as(&user, &kubeconfig).unwrap();
        Some(Install {
            server,
            rendered,
            dir,
            kubeconfig,
            health_port,
        })
    }

    /// Pod `index` of the workload, laid out under this install's directory.
    fn pod(&self, index: usize) -> PodRun {
        self.rendered.pod(index, self.dir.path())
    }

    /// Starts pod `index` with `plugins` (`(name, manifest)`, each the echo test program) in
    /// its plugins volume, as the chart's init container would put them there: the Pod object
    /// is created (or kept, for a restart) and the process runs with the rendered arguments.
    async fn start(&self, index: usize, plugins: &[(String, String)]) -> Replica {
        let pod = self.pod(index);
        let dir = pod.volume("plugins");
        for (name, manifest) in plugins {
            // `TENANT/NAME` goes into the tenant's directory.
            let wasm = dir.join(format!("{name}.wasm"));
            std::fs::create_dir_all(wasm.parent().unwrap()).unwrap();
            std::fs::copy(informant_tests::plugins::wasm("hostile"), &wasm).unwrap();
            std::fs::write(dir.join(format!("{name}.toml")), manifest).unwrap();
        }
        let uid = self.pod_uid(&pod).await;
        let env = pod.environment(&uid);
        let args = pod.expanded_args(&env);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_informant"));
        cmd.args(&args)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("KUBECONFIG", &self.kubeconfig);
        let (child, lines) = support::spawn_logged(cmd);
        Replica {
            name: pod.name.clone(),
            child: Some(child),
            lines,
            health: SocketAddr::new(pod.ip.into(), self.health_port),
        }
    }

    /// The uid of `pod`'s Pod object, created running at its address on first use.
    async fn pod_uid(&self, pod: &PodRun) -> String {
        match self.server.create(pod.object()) {
            Ok(obj) => obj["metadata"]["uid"]
                .as_str()
                .expect("a pod uid")
                .to_string(),
            Err(informant_devserver::Error::AlreadyExists { .. }) => {
                let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
                    kube::Api::namespaced(self.server.client(), &pod.namespace);
                let found = pods.get(&pod.name).await.expect("get pod");
                found.metadata.uid.expect("a pod uid")
            }
            Err(e) => panic!("create pod {}: {e}", pod.name),
        }
    }

    /// `n` echo plugins watching ConfigMaps in the watched namespace, tagged with their names.
    fn echo_plugins(n: usize, extra: &str) -> Vec<(String, String)> {
        (0..n)
            .map(|i| {
                let name = format!("echo-{i}");
                let manifest = format!(
                    "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"{WATCHED_NS}\"\n{extra}[config]\nmode = \"echo\"\ntag = \"{name}\"\n"
                );
                (name, manifest)
            })
            .collect()
    }
}

/// One running pod's process.
struct Replica {
    name: String,
    child: Option<Child>,
    lines: Arc<Mutex<Vec<String>>>,
    health: SocketAddr,
}

/// One echo line: a plugin's handling of one event.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Echo {
    plugin: String,
    event: String,
    key: String,
    initial: bool,
}

impl Replica {
    /// Waits until `/readyz` on the plain health port answers 200; a process that exits
    /// first fails the test with its log.
    async fn ready(&mut self) {
        let deadline = tokio::time::Instant::now() + GUARD;
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "{} exited ({status}) before it was ready:\n{}",
                    self.name,
                    self.lines.lock().join("\n")
                );
            }
            let answer = tokio::net::TcpStream::connect(self.health).await.is_ok();
            if answer && get(self.health, "/readyz").await.0 == 200 {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} not ready in time:\n{}",
                self.name,
                self.lines.lock().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `/readyz` now: status and body.
    async fn readyz(&self) -> (u16, String) {
        let (status, _, body) = get(self.health, "/readyz").await;
        (status, body)
    }

    /// Every echo the plugins of this process logged, in order (the chart logs JSON lines; a
    /// plugin's line is the `message`).
    fn echoes(&self) -> Vec<Echo> {
        self.lines
            .lock()
            .iter()
            .filter_map(|l| {
                let line: Value = serde_json::from_str(l).ok()?;
                let msg: Value = serde_json::from_str(line["message"].as_str()?).ok()?;
                Some(Echo {
                    plugin: msg["tag"].as_str()?.to_string(),
                    event: msg["type"].as_str()?.to_string(),
                    key: msg["key"].as_str()?.to_string(),
                    initial: msg["initial"].as_bool().unwrap_or(false),
                })
            })
            .collect()
    }

    /// Log lines containing `text`.
    fn logged(&self, text: &str) -> Vec<String> {
        self.lines
            .lock()
            .iter()
            .filter(|l| l.contains(text))
            .cloned()
            .collect()
    }

    /// SIGKILL: a crash, an OOM kill, a node gone.
    async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.start_kill().unwrap();
            let _ = informant_tests::guarded("the replica to die", child.wait()).await;
        }
    }

    /// SIGTERM, as Kubernetes stops a pod, and a clean exit.
    async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = child.id().expect("running") as i32;
            // SAFETY: `kill` with a pid this test started and still holds.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            let status = informant_tests::guarded("the replica to exit", child.wait())
                .await
                .unwrap();
            assert!(
                status.success(),
                "{} exit: {status}\n{}",
                self.name,
                self.lines.lock().join("\n")
            );
        }
    }
}

/// Waits until `cond` holds, polling the replicas' logs; fails after [`GUARD`] with `what`.
async fn eventually(what: &str, cond: impl FnMut() -> bool) {
    eventually_showing(what, cond, String::new).await
}

/// [`eventually`], and on failure the text `show` gives (a replica's log, say).
async fn eventually_showing(
    what: &str,
    mut cond: impl FnMut() -> bool,
    show: impl FnOnce() -> String,
) {
    let deadline = tokio::time::Instant::now() + GUARD;
    while !cond() {
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out waiting for {what}\n{}", show());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Per plugin, the replicas whose copy handled `key` (any event).
fn handlers_of(replicas: &[&Replica], key: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in replicas {
        for e in r.echoes().into_iter().filter(|e| e.key == key) {
            out.entry(e.plugin).or_default().insert(r.name.clone());
        }
    }
    out
}

/// Creates ConfigMap `name` in the watched namespace.
fn create(install: &Install, name: &str) {
    install
        .server
        .create(configmap(WATCHED_NS, name, "v"))
        .unwrap();
}

/// Waits until every plugin of `plugins` handled `key` on exactly one of `replicas`, and
/// returns which; a plugin handling it on two replicas fails the test at once.
async fn each_once(
    replicas: &[&Replica],
    plugins: &[(String, String)],
    key: &str,
) -> BTreeMap<String, String> {
    eventually(&format!("every plugin to handle {key}"), || {
        let seen = handlers_of(replicas, key);
        for (p, on) in &seen {
            assert_eq!(on.len(), 1, "{p} handled {key} on {on:?}");
        }
        plugins.iter().all(|(p, _)| seen.contains_key(p))
    })
    .await;
    handlers_of(replicas, key)
        .into_iter()
        .map(|(p, on)| (p, on.into_iter().next().unwrap()))
        .collect()
}

/// Sharded mode as the chart renders it (a StatefulSet, Leases watched, Pods backing
/// membership): three replicas under exactly the chart's RBAC run every plugin on exactly one
/// replica, still so after three lease durations; a killed replica's plugins are handled
/// elsewhere, and the change made after the kill reaches every plugin once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_replicas_under_the_charts_rbac_run_each_plugin_once_and_survive_a_kill() {
    let lease = 3;
    let Some(install) = Install::new(json!({
        "replicaCount": 3,
        "sharding": {"enabled": true, "leaseDurationSeconds": lease},
    }))
    .await
    else {
        return;
    };
    let plugins = Install::echo_plugins(6, "");
    let mut replicas = Vec::new();
    for i in 0..3 {
        replicas.push(install.start(i, &plugins).await);
    }
    for r in replicas.iter_mut() {
        r.ready().await;
    }
    create(&install, "first");
    let all: Vec<&Replica> = replicas.iter().collect();
    let placed = each_once(&all, &plugins, "demo/first").await;

    // Three lease durations: renewals, surveys and watches go on; nothing moves, nothing
    // runs twice.
    tokio::time::sleep(Duration::from_secs(3 * lease)).await;
    create(&install, "later");
    let again = each_once(&all, &plugins, "demo/later").await;
    assert_eq!(placed, again, "plugins moved while every member was live");
    for r in &replicas {
        assert!(
            r.logged("forbidden").is_empty(),
            "{}: {:?}",
            r.name,
            r.logged("forbidden")
        );
    }

    // Kill the replica running the most plugins; the change made right after reaches each
    // of its plugins on a survivor, once.
    let mut load: BTreeMap<&String, usize> = BTreeMap::new();
    for on in placed.values() {
        *load.entry(on).or_default() += 1;
    }
    let victim = load.iter().max_by_key(|(_, n)| **n).unwrap().0.to_string();
    let v = replicas.iter().position(|r| r.name == victim).unwrap();
    replicas[v].kill().await;
    create(&install, "after-kill");
    let survivors: Vec<&Replica> = replicas.iter().filter(|r| r.name != victim).collect();
    let moved = each_once(&survivors, &plugins, "demo/after-kill").await;
    for (p, on) in &moved {
        assert_ne!(on, &victim, "{p}");
        if placed[p] != victim {
            assert_eq!(&placed[p], on, "{p} moved though its member lives");
        }
    }
    for r in replicas.iter_mut() {
        r.stop().await;
    }
    install.server.shutdown().await;
}

/// The chart's sharding Role as it was before `watch` was granted: a member that cannot follow
/// its group runs no plugin (never every plugin), and `/readyz` says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_cannot_watch_the_group_runs_nothing_and_says_why() {
    let Some(install) = Install::new(json!({
        "replicaCount": 2,
        "sharding": {"enabled": true, "leaseDurationSeconds": 3},
    }))
    .await
    else {
        return;
    };
    let (_, user) = service_account(&install.rendered);
    let rules = allow_rules(&install.rendered)
        .into_iter()
        .map(|mut r| {
            if r.resource == "leases.coordination.k8s.io" {
                r.verbs.retain(|v| v != "watch");
            }
            r
        })
        .collect();
    install.server.restrict(&user, rules);
    let plugins = Install::echo_plugins(4, "");
    let mut replicas = [
        install.start(0, &plugins).await,
        install.start(1, &plugins).await,
    ];
    for r in &replicas {
        get_until(r.health, "/readyz", "a refusal in /readyz", |s, body| {
            s == 503 && body.contains("shard")
        })
        .await;
    }
    // A marker object: nothing handles it anywhere while the group cannot be followed.
    create(&install, "unseen");
    for r in &replicas {
        let (status, body) = r.readyz().await;
        assert_eq!(status, 503, "{body}");
    }
    for r in &replicas {
        assert!(
            r.echoes().iter().all(|e| e.key != "demo/unseen"),
            "{} ran a plugin without seeing its group",
            r.name
        );
    }
    for r in replicas.iter_mut() {
        r.stop().await;
    }
    install.server.shutdown().await;
}

/// Durable delivery as the chart mounts it (one replica, leader election, state on an
/// emptyDir that outlives the container): a restart delivers exactly what changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_under_the_charts_rbac_restarts_with_exactly_what_changed() {
    let Some(install) = Install::new(json!({
        "replicaCount": 1,
        "state": {"enabled": true},
    }))
    .await
    else {
        return;
    };
    restart_delivers_exactly_the_changes(&install, 0, Restart::SamePod).await;
    install.server.shutdown().await;
}

/// State and sharding together, as the chart renders them (a claim per replica): a member
/// restarted with its Pod resumes from what its Lease published and its state kept; one whose
/// Pod was replaced (a rollout: a new uid, the old Lease collected with the old Pod) resumes
/// from its state alone. Then each replica opens a state of its own beside the other's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_and_sharding_together_give_each_replica_its_own_state() {
    let Some(install) = Install::new(json!({
        "replicaCount": 1,
        "sharding": {"enabled": true, "leaseDurationSeconds": 3},
        "state": {"enabled": true, "volume": "volumeClaimTemplate"},
    }))
    .await
    else {
        return;
    };
    let sts = install.rendered.one("StatefulSet");
    assert_eq!(
        sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"],
        "state"
    );
    restart_delivers_exactly_the_changes(&install, 0, Restart::SamePod).await;
    restart_delivers_exactly_the_changes(&install, 0, Restart::NewPod).await;
    // A second replica opens its own claim beside the first's: both run, neither is refused.
    let plugins = Install::echo_plugins(4, "");
    let mut a = install.start(0, &plugins).await;
    let mut b = install.start(1, &plugins).await;
    a.ready().await;
    b.ready().await;
    assert_ne!(
        install.pod(0).volume("state"),
        install.pod(1).volume("state")
    );
    for r in [&a, &b] {
        assert!(r.logged("in use").is_empty(), "{:?}", r.logged("in use"));
    }
    create(&install, "both");
    each_once(&[&a, &b], &plugins, "demo/both").await;
    for mut r in [a, b] {
        r.stop().await;
    }
    install.server.shutdown().await;
}

/// How a stopped pod comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Restart {
    /// The same Pod object (a container restart; its Lease stays).
    SamePod,
    /// The Pod deleted and created again under its name with a new uid, as a StatefulSet's
    /// rollout does; the old Pod's Lease is deleted with it, as Kubernetes' garbage collector
    /// does (the embedded server has none).
    NewPod,
}

/// Pod `index` with four echo plugins on the watched namespace and one selecting namespaces
/// labelled `team=a`. While the pod is stopped, in each namespace one object is updated, one
/// deleted and one created, two left alone; and a namespace is relabelled into the selection.
/// After the restart each plugin gets exactly those changes once each (the relabelled
/// namespace's objects as added), and nothing for the untouched objects nor an unselected
/// namespace.
async fn restart_delivers_exactly_the_changes(install: &Install, index: usize, how: Restart) {
    let round = match how {
        Restart::SamePod => "same",
        Restart::NewPod => "new",
    };
    let name = |n: &str| format!("{round}-{n}");
    // Selected, never selected, and selected only once relabelled while the pod is stopped.
    let (team_a, team_b, team_c) = (name("a"), name("b"), name("c"));
    for (ns, team) in [(&team_a, "a"), (&team_b, "b"), (&team_c, "c")] {
        install
            .server
            .create(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "labels": {"team": team}}}))
            .unwrap();
    }
    let mut plugins = Install::echo_plugins(4, "");
    // Its `init` takes a while, as a real plugin's may: the Namespace informer, restored from
    // disk, has caught up with the relabelling by the time its handler registers, so the
    // selection it resumes with must be the one it had, not the one now.
    plugins.push((
        "selected".to_string(),
        "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace-selector = \"team=a\"\n[limits]\ndeadline-ms = 2000\n[config]\nmode = \"echo\"\ntag = \"selected\"\ninit-nap-ms = 500\n".to_string(),
    ));
    let key = |ns: &str, n: &str| format!("{ns}/{}", name(n));
    let mut r = install.start(index, &plugins).await;
    r.ready().await;
    for ns in [WATCHED_NS, &team_a, &team_b, &team_c] {
        for n in ["keep-1", "keep-2", "edit", "drop"] {
            install.server.create(configmap(ns, &name(n), "v")).unwrap();
        }
    }
    eventually_showing(
        "every plugin to handle what was created",
        || {
            let e = r.echoes();
            plugins.iter().all(|(p, _)| {
                let ns = if p == "selected" { &team_a } else { WATCHED_NS };
                let seen = |n: &str| e.iter().any(|x| &x.plugin == p && x.key == key(ns, n));
                ["keep-1", "keep-2", "edit", "drop"].iter().all(|n| seen(n))
            })
        },
        || r.lines.lock().join("\n"),
    )
    .await;
    r.stop().await;
    let old_uid = install.pod_uid(&install.pod(index)).await;

    for ns in [WATCHED_NS, &team_a, &team_b, &team_c] {
        install
            .server
            .update(configmap(ns, &name("edit"), "changed"))
            .unwrap();
        install
            .server
            .delete("v1", "ConfigMap", Some(ns), &name("drop"))
            .unwrap();
        install
            .server
            .create(configmap(ns, &name("new"), "v"))
            .unwrap();
    }
    install
        .server
        .update(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": team_c, "labels": {"team": "a"}}}))
        .unwrap();
    if how == Restart::NewPod {
        let pod = install.pod(index);
        install
            .server
            .delete("v1", "Pod", Some(&pod.namespace), &pod.name)
            .unwrap();
        let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
            kube::Api::namespaced(install.server.client(), &pod.namespace);
        for l in leases.list(&Default::default()).await.unwrap() {
            let owners = l.metadata.owner_references.clone().unwrap_or_default();
            if owners.iter().any(|o| o.uid == old_uid) {
                let name = l.metadata.name.clone().unwrap();
                leases.delete(&name, &Default::default()).await.unwrap();
            }
        }
        assert_ne!(install.pod_uid(&pod).await, old_uid, "a new Pod");
    }

    // Per plugin, each (event, key) the restart must deliver exactly once, and nothing else.
    let expected = |p: &str| -> BTreeSet<(String, String)> {
        let ns = if p == "selected" { &team_a } else { WATCHED_NS };
        let mut want: BTreeSet<(String, String)> = [
            ("updated", key(ns, "edit")),
            ("deleted", key(ns, "drop")),
            ("added", key(ns, "new")),
            ("added", key(ns, "fence")),
        ]
        .into_iter()
        .map(|(e, k)| (e.to_string(), k))
        .collect();
        if p == "selected" {
            for n in ["keep-1", "keep-2", "edit", "new"] {
                want.insert(("added".into(), key(&team_c, n)));
            }
        }
        want
    };
    let mut r = install.start(index, &plugins).await;
    r.ready().await;
    let got = |r: &Replica, p: &str| -> Vec<(String, String)> {
        r.echoes()
            .into_iter()
            .filter(|x| x.plugin == p)
            .map(|x| (x.event, x.key))
            .collect()
    };
    eventually(
        &format!("every plugin to get what changed ({how:?})"),
        || {
            plugins.iter().all(|(p, _)| {
                let got = got(&r, p);
                expected(p)
                    .iter()
                    .filter(|(_, k)| !k.ends_with("-fence"))
                    .all(|w| got.contains(w))
            })
        },
    )
    .await;
    // A fence created after the restart: once every plugin handled it, whatever the resume
    // would give has been given.
    for ns in [WATCHED_NS, &team_a] {
        install
            .server
            .create(configmap(ns, &name("fence"), "v"))
            .unwrap();
    }
    eventually("every plugin to handle the fence", || {
        plugins
            .iter()
            .all(|(p, _)| got(&r, p).iter().any(|(_, k)| k.ends_with("-fence")))
    })
    .await;
    for (p, _) in &plugins {
        let mut got = got(&r, p);
        got.sort();
        let want: Vec<(String, String)> = expected(p).into_iter().collect();
        assert_eq!(got, want, "{p} after the restart ({how:?})");
        let echoes = r.echoes();
        let initial: Vec<&Echo> = echoes
            .iter()
            .filter(|x| &x.plugin == p && x.initial)
            .collect();
        assert!(initial.is_empty(), "{p} replayed ({how:?}): {initial:?}");
    }
    r.stop().await;
}

/// A plugin with a `namespace-selector` under the chart's default RBAC (Namespaces readable):
/// it runs and gets the selected namespace's objects only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_selector_plugins_run_under_the_default_rbac() {
    let Some(install) = Install::new(json!({"replicaCount": 1})).await else {
        return;
    };
    for (ns, team) in [("team-a", "a"), ("team-b", "b")] {
        install
            .server
            .create(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "labels": {"team": team}}}))
            .unwrap();
    }
    let plugins = vec![(
        "selected".to_string(),
        "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace-selector = \"team=a\"\n[config]\nmode = \"echo\"\ntag = \"selected\"\n".to_string(),
    )];
    let mut r = install.start(0, &plugins).await;
    r.ready().await;
    install
        .server
        .create(configmap("team-b", "other", "v"))
        .unwrap();
    install
        .server
        .create(configmap("team-a", "mine", "v"))
        .unwrap();
    eventually("the selected namespace's object", || {
        r.echoes().iter().any(|e| e.key == "team-a/mine")
    })
    .await;
    assert!(r.echoes().iter().all(|e| e.key != "team-b/other"));
    r.stop().await;
    install.server.shutdown().await;
}

/// The chart's defaults: two replicas active/standby under exactly its RBAC. Only the leader
/// runs plugins; killed, the standby takes over and handles what comes next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_values_run_one_leader_and_fail_over_to_the_standby() {
    let Some(install) = Install::new(json!({
        "leaderElection": {"leaseDurationSeconds": 3},
    }))
    .await
    else {
        return;
    };
    assert_eq!(install.rendered.workload()["kind"], "Deployment");
    let plugins = Install::echo_plugins(3, "");
    let mut replicas = [
        install.start(0, &plugins).await,
        install.start(1, &plugins).await,
    ];
    for r in replicas.iter_mut() {
        r.ready().await;
    }
    create(&install, "first");
    let placed = {
        let all: Vec<&Replica> = replicas.iter().collect();
        each_once(&all, &plugins, "demo/first").await
    };
    let leaders: BTreeSet<&String> = placed.values().collect();
    assert_eq!(leaders.len(), 1, "every plugin on the leader: {placed:?}");
    let leader = leaders.into_iter().next().unwrap().clone();
    let l = replicas.iter().position(|r| r.name == leader).unwrap();
    replicas[l].kill().await;
    create(&install, "after-failover");
    let standby: Vec<&Replica> = replicas.iter().filter(|r| r.name != leader).collect();
    each_once(&standby, &plugins, "demo/after-failover").await;
    for r in replicas.iter_mut() {
        r.stop().await;
    }
    install.server.shutdown().await;
}

/// `rbac.clusterWideRead` for wildcard watches: a `kind = "*"` plugin under exactly that RBAC
/// covers kinds no `watchedResources` entry names (Secrets here), and nothing is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_wide_read_lets_wildcard_watches_cover_every_kind() {
    let Some(install) = Install::new(json!({
        "replicaCount": 1,
        "rbac": {"clusterWideRead": true},
    }))
    .await
    else {
        return;
    };
    let plugins = vec![(
        "everything".to_string(),
        format!(
            "[[watch]]\napi-version = \"*\"\nkind = \"*\"\nnamespaces = [\"{WATCHED_NS}\"]\n[config]\nmode = \"echo\"\ntag = \"everything\"\n"
        ),
    )];
    let mut r = install.start(0, &plugins).await;
    r.ready().await;
    install
        .server
        .create(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "token", "namespace": WATCHED_NS}, "data": {}}))
        .unwrap();
    eventually("the wildcard to cover Secrets", || {
        r.echoes().iter().any(|e| e.key == "demo/token")
    })
    .await;
    let (_, user) = service_account(&install.rendered);
    let refused: Vec<_> = install
        .server
        .requests()
        .into_iter()
        .filter(|q| q.user.as_deref() == Some(user.as_str()) && !q.allowed)
        .collect();
    assert!(refused.is_empty(), "{refused:?}");
    r.stop().await;
    install.server.shutdown().await;
}

/// `informant status` as `user` (with its own kubeconfig token) against pod `pod` through the
/// API server's port-forward, as an operator or a tenant reaches a pod nothing exposes: success,
/// stdout and stderr.
async fn status_as(install: &Install, user: &str, pod: &PodRun) -> (bool, String, String) {
    let kubeconfig = install.dir.path().join(format!("{user}.kubeconfig"));
    install
        .server
        .write_kubeconfig_as(user, &kubeconfig)
        .unwrap();
    let port = install.rendered.workload()["spec"]["template"]["spec"]["containers"][0]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "admin")
        .unwrap()["containerPort"]
        .to_string();
    let out = informant_tests::guarded(
        "informant status",
        Command::new(env!("CARGO_BIN_EXE_informant"))
            .args(["status", "--kubeconfig"])
            .arg(&kubeconfig)
            .args([
                "--pod",
                &pod.name,
                "-n",
                &pod.namespace,
                "--pod-port",
                &port,
            ])
            // The chart's self-signed certificate: encrypted, not verified.
            .args(["--insecure-skip-tls-verify", "--output", "json"])
            .env("NO_COLOR", "1")
            .env_remove("KUBECONFIG")
            .env_remove("INFORMANT_TOKEN")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The admin surface as the chart configures it (HTTPS, authenticated, authorized per tenant,
/// reached through the API server's port-forward): the operator bound by `admin.access.operators`
/// sees every plugin, a tenant's user bound by `admin.access.tenants` only its tenant's, and an
/// identity bound to nothing is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_surface_shows_each_identity_what_the_charts_access_roles_grant() {
    let config = "operator-plugins = true\n[tenants.team-a]\nnamespaces = [\"team-a\"]\n[tenants.team-b]\nnamespaces = [\"team-b\"]\n";
    let Some(install) = Install::new(json!({
        "replicaCount": 1,
        "config": config,
        "admin": {"access": {
            "operators": [{"kind": "User", "name": "ops-admin"}],
            "tenants": [{"name": "team-a", "subjects": [{"kind": "User", "name": "alice"}]}],
        }},
    }))
    .await
    else {
        return;
    };
    create_namespaces(&install.server, &["team-a", "team-b"]);
    let echo = |ns: &str, tag: &str| {
        format!(
            "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"{ns}\"\n[config]\nmode = \"echo\"\ntag = \"{tag}\"\n"
        )
    };
    let plugins = vec![
        (
            "operators-own".to_string(),
            echo(WATCHED_NS, "operators-own"),
        ),
        ("team-a/alpha".to_string(), echo("team-a", "alpha")),
        ("team-b/bravo".to_string(), echo("team-b", "bravo")),
    ];
    let mut r = install.start(0, &plugins).await;
    r.ready().await;
    let pod = install.pod(0);
    // Reaching a pod's port through the API server is a grant of its own, in the release
    // namespace (the chart grants it to no one: whoever may port-forward to the pods).
    for user in ["ops-admin", "alice", "nobody"] {
        let subject = json!({"kind": "User", "name": user});
        let mut rules = informant_tests::chart::allow_rules_for(&install.rendered, &subject);
        rules.push(informant_devserver::audit::AllowRule {
            namespace: Some(RELEASE_NS.into()),
            ..informant_devserver::audit::AllowRule::new(&["create"], "pods/portforward")
        });
        install.server.restrict(user, rules);
    }

    let (ok, out, err) = status_as(&install, "ops-admin", &pod).await;
    assert!(ok, "{err}");
    for name in ["operators-own", "alpha", "bravo"] {
        assert!(out.contains(name), "the operator misses {name}: {out}");
    }
    let (ok, out, err) = status_as(&install, "alice", &pod).await;
    assert!(ok, "{err}");
    assert!(out.contains("alpha"), "{out}");
    for hidden in ["operators-own", "bravo", "team-b"] {
        assert!(!out.contains(hidden), "alice sees {hidden}: {out}");
    }
    let (ok, out, err) = status_as(&install, "nobody", &pod).await;
    assert!(
        !ok,
        "an identity bound to nothing read the admin surface: {out}"
    );
    assert!(err.contains("403"), "{err}");
    r.stop().await;
    install.server.shutdown().await;
}
