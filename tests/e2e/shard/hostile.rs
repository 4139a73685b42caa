//! Sharded mode under what a deployment meets: a Role without `watch` on Leases, Leases written
//! by identities that are no member (forged cursors, squatters, a replaced member's identity, a
//! flood of junk), and a kill timed against the lease duration. Each member runs in a Pod of the
//! group (`--pod-uid`) unless the test says otherwise.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use informant_devserver::DevServer;
use informant_runtime::shard::{GROUP_LABEL, cursors};
use informant_tests::configmap;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

use super::{
    Echoes, GROUP, Group, How, LEASE_NS, Member, all_handled, churn, create, cursors_reach,
    eventually, handed_over_exactly, placement, plugin_names, published, rv, server, settled,
};

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
        ..Default::default()
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
