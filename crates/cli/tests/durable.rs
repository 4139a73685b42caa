//! Durable delivery as a user runs it: `informant run --state-dir` (the real binary) against the
//! embedded API server, with kubediff (the real compiled plugin) reporting what it was given;
//! stopped, killed, restarted.

mod support;

use std::path::{Path, PathBuf};

use informant_devserver::{DevServer, DevServerConfig};
use informant_tests::{configmap, create_namespaces, guarded};
use serde_json::{Value, json};
use support::{Host, Setup};
use tokio::process::Command;

/// kubediff on the ConfigMaps of `demo` only, so every line it logs is about the test's objects.
const KUBEDIFF: &str = r#"
[limits]
memory-mib = 32
deadline-ms = 2000

[[watch]]
api-version = "v1"
kind = "ConfigMap"
namespaces = ["demo"]

[config]
ignore-status = true
"#;

/// kubediff on `demo`'s ConfigMaps.
async fn kubediff() -> Setup {
    Setup::new("kubediff", "kubediff", KUBEDIFF).await
}

/// kubediff on the ConfigMaps of the namespaces labelled `team=a`: `demo` and `leaving`
/// (holding `leaving-cm`), not `elsewhere` (holding `not-selected`).
async fn kubediff_selecting_team_a() -> Setup {
    let manifest = KUBEDIFF.replace(
        r#"namespaces = ["demo"]"#,
        r#"namespace-selector = "team=a""#,
    );
    let setup = Setup::new("kubediff", "kubediff", &manifest).await;
    let namespace = |name: &str, team: &str| {
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"team": team}}})
    };
    setup.server.update(namespace("demo", "a")).unwrap();
    for (ns, team, cm) in [
        ("elsewhere", "b", "not-selected"),
        ("leaving", "a", "leaving-cm"),
    ] {
        setup.server.create(namespace(ns, team)).unwrap();
        setup.server.create(configmap(ns, cm, "x")).unwrap();
    }
    setup
}

impl Setup {
    /// Relabels `ns` `team=<team>`.
    fn relabel(&self, ns: &str, team: &str) {
        self.server
            .update(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "labels": {"team": team}}}))
            .unwrap();
    }
}

impl Setup {
    /// Replaces the server with a new, empty one at the same address (as `informant dev`
    /// restarted, or a cluster rebuilt behind the same URL).
    async fn replace_server(&mut self) {
        let addr = self.server.addr();
        let placeholder = DevServer::start(DevServerConfig::default()).await.unwrap();
        std::mem::replace(&mut self.server, placeholder)
            .shutdown()
            .await;
        let new = DevServer::start(DevServerConfig {
            listen: addr,
            ..Default::default()
        })
        .await
        .unwrap();
        std::mem::replace(&mut self.server, new).shutdown().await;
        create_namespaces(&self.server, &["demo"]);
        self.server
            .write_kubeconfig(&self.dir.path().join("kubeconfig"))
            .unwrap();
    }

    /// `untouched` ConfigMaps nobody changes, plus `a` (to modify) and `b` (to delete).
    fn seed_untouched_and_a_b(&self, untouched: usize) {
        let mut objects: Vec<Value> = (0..untouched)
            .map(|i| configmap("demo", &format!("same-{i:03}"), "x"))
            .collect();
        objects.push(configmap("demo", "a", "before"));
        objects.push(configmap("demo", "b", "doomed"));
        self.server.seed(objects).unwrap();
    }

    /// While the host is down: `a` modified, `b` deleted, `c` created.
    fn change_a_b_c(&self) {
        self.set("a", "after");
        self.server
            .delete("v1", "ConfigMap", Some("demo"), "b")
            .unwrap();
        self.server.create(configmap("demo", "c", "new")).unwrap();
    }

    /// 20 ConfigMaps `old-NN` handled by a host and stored by its clean stop (a stop writes
    /// everything held); then a host running again on that state.
    async fn stored_then_running(&self) -> Host {
        self.server
            .seed((0..20).map(|i| configmap("demo", &format!("old-{i:02}"), "x")))
            .unwrap();
        let host = self.host().await;
        host.wait_for("the first replay", |r| r.len() >= 20).await;
        host.stop().await;
        self.host().await
    }

    /// Creates `new` ConfigMaps `new-NNN` and sets the first `updated` of `old-NN` to `y`.
    fn create_and_update(&self, new: usize, updated: usize) {
        for i in 0..new {
            self.server
                .create(configmap("demo", &format!("new-{i:03}"), "n"))
                .unwrap();
        }
        for i in 0..updated {
            self.set(&format!("old-{i:02}"), "y");
        }
    }

    fn set(&self, name: &str, value: &str) {
        let mut cm = configmap("demo", name, value);
        cm["metadata"]["resourceVersion"] = Value::Null;
        self.server.update(cm).unwrap();
    }
}

impl Host {
    /// kubediff's records, in the order it logged them.
    fn records(&self) -> Vec<Value> {
        self.json_lines()
            .into_iter()
            .filter(|v| v.get("event").is_some() && v.get("name").is_some())
            .collect()
    }

    /// The sum of `/metrics` samples of `family` whose labels mention `configmaps`.
    async fn configmap_metric(&self, family: &str) -> u64 {
        let (_, _, body) = informant_tests::http::get(self.admin, "/metrics").await;
        body.lines()
            .filter(|l| l.starts_with(family) && l.contains("configmaps"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    async fn wait_for(&self, what: &str, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        guarded(what, async {
            loop {
                let records = self.records();
                if pred(&records) {
                    return records;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
        .await
    }

    /// Everything kubediff logged up to the record of `marker`'s creation, made now: what it was
    /// given before it, and nothing it may still be given.
    async fn records_until_marker(&self, setup: &Setup, marker: &str) -> Vec<Value> {
        setup.server.create(configmap("demo", marker, "m")).unwrap();
        let records = self
            .wait_for("the marker's record", |r| {
                r.iter().any(|v| v["name"] == marker)
            })
            .await;
        records
            .into_iter()
            .take_while(|v| v["name"] != marker)
            .collect()
    }
}

/// `event name` of each record, and the diff of `data.value` for updates.
fn summary(records: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = records
        .iter()
        .map(|v| {
            let change = v["changes"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["path"] == "/data/value")
                .map(|c| format!(" {}->{}", c["old"], c["new"]))
                .unwrap_or_default();
            format!(
                "{} {}{change}",
                v["event"].as_str().unwrap_or("?"),
                v["name"].as_str().unwrap_or("?")
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_delivers_exactly_what_changed_while_the_host_was_down() {
    let setup = kubediff().await;
    setup.seed_untouched_and_a_b(100);

    let host = setup.host().await;
    host.wait_for("the first replay", |r| r.len() >= 102).await;
    assert_eq!(summary(&host.records()).len(), 102);
    host.stop().await;

    setup.change_a_b_c();

    let host = setup.host().await;
    let given = host.records_until_marker(&setup, "marker").await;
    assert_eq!(
        summary(&given),
        ["added c", "deleted b", r#"updated a "before"->"after""#],
        "exactly the changes made while down, A diffed against its version before the restart"
    );
    assert_eq!(
        host.configmap_metric("informant_informer_lists").await,
        0,
        "the watch resumed from the stored resourceVersion: no list"
    );
    assert_eq!(
        host.logged("cache restored from the state directory").len(),
        1
    );
    host.stop().await;
}

/// The same with a `namespace-selector`: the selection is known before the resumed
/// difference is filtered, so the plugin gets exactly what changed in the selected namespace
/// (not its whole selection again as added, the deleted object included), and nothing of a
/// namespace not selected where something changed too; a namespace that gained the label while
/// the host was down brings its objects in, one that lost it sends its objects as deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_with_a_namespace_selector_delivers_exactly_what_changed_in_the_selection() {
    let setup = kubediff_selecting_team_a().await;
    setup.seed_untouched_and_a_b(2);

    let host = setup.host().await;
    let given = host.records_until_marker(&setup, "marker-1").await;
    assert_eq!(
        summary(&given),
        [
            "added a",
            "added b",
            "added leaving-cm",
            "added same-000",
            "added same-001"
        ],
        "the selected namespaces' objects, once"
    );
    host.stop().await;

    setup.change_a_b_c();
    let mut elsewhere = configmap("elsewhere", "not-selected", "changed");
    elsewhere["metadata"]["resourceVersion"] = Value::Null;
    setup.server.update(elsewhere).unwrap();

    let host = setup.host().await;
    let given = host.records_until_marker(&setup, "marker-2").await;
    assert_eq!(
        summary(&given),
        ["added c", "deleted b", r#"updated a "before"->"after""#],
        "exactly the changes made in the selection while down"
    );
    host.stop().await;

    // Namespaces relabelled while down: `elsewhere` joins the selection, `leaving` leaves it.
    setup.relabel("elsewhere", "a");
    setup.relabel("leaving", "b");
    let host = setup.host().await;
    // Namespaces and ConfigMaps are two watches: a marker orders nothing against the first.
    host.wait_for("the relabelled namespaces' objects", |r| {
        let s = summary(r);
        s.contains(&"added not-selected".to_string())
            && s.contains(&"deleted leaving-cm".to_string())
    })
    .await;
    let given = host.records_until_marker(&setup, "marker-3").await;
    assert_eq!(
        summary(&given),
        ["added not-selected", "deleted leaving-cm"],
        "the selection's change while down, as adds and deletes"
    );
    assert!(
        host.logged("resuming a plugin from its stored cursor")
            .len()
            == 1,
        "{:?}",
        host.logged("cursor")
    );
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_build_keeps_its_cursor_and_a_changed_watch_starts_over() {
    let setup = kubediff().await;
    setup
        .server
        .seed((0..10).map(|i| configmap("demo", &format!("cm-{i}"), "x")))
        .unwrap();
    let manifest = setup.dir.path().join("plugins/kubediff.toml");
    let host = setup.host().await;
    host.wait_for("the first replay", |r| r.len() >= 10).await;
    host.stop().await;

    // Another version of the plugin (here its limits; its code counts the same): same cursor.
    let changed = KUBEDIFF.replace("deadline-ms = 2000", "deadline-ms = 3000");
    std::fs::write(&manifest, &changed).unwrap();
    setup.set("cm-1", "y");
    let host = setup.host().await;
    let given = host.records_until_marker(&setup, "marker-1").await;
    assert_eq!(summary(&given), [r#"updated cm-1 "x"->"y""#]);
    host.stop().await;

    // What it watches changed: its old cursor means nothing for the new watch.
    std::fs::write(
        &manifest,
        changed.replace("[config]", "label-selector = \"app=demo\"\n\n[config]"),
    )
    .unwrap();
    let host = setup.host().await;
    let given = host.records_until_marker(&setup, "marker-2").await;
    assert_eq!(
        given.len(),
        11,
        "the whole cache again: {:?}",
        summary(&given)
    );
    assert!(given.iter().all(|v| v["event"] == "added"));
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_history_relists_against_the_restored_cache_with_the_same_deliveries() {
    let setup = kubediff().await;
    setup.seed_untouched_and_a_b(20);
    let host = setup.host().await;
    host.wait_for("the first replay", |r| r.len() >= 22).await;
    host.stop().await;

    setup.change_a_b_c();
    // The server forgets its history: the stored resourceVersion is too old (410).
    setup.server.faults().compact();

    let host = setup.host().await;
    // The server accepts the watch, then answers 410 on it: the host is ready on the restored
    // cache before the relist that follows brings it current.
    host.wait_for("the relist's delete", |r| {
        r.iter()
            .any(|v| v["event"] == "deleted" && v["name"] == "b")
    })
    .await;
    let given = host.records_until_marker(&setup, "marker").await;
    assert_eq!(
        summary(&given),
        ["added c", "deleted b", r#"updated a "before"->"after""#]
    );
    assert_eq!(
        host.configmap_metric("informant_informer_lists").await,
        1,
        "a 410 costs a list"
    );
    assert_eq!(host.logged("too old (410 Gone)").len(), 1);
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_in_the_middle_of_a_burst_loses_no_change() {
    let setup = kubediff().await;
    // Objects handled long before the crash, their cursor on disk (a clean stop saves it): a
    // host that lost its state would give them again after the crash.
    setup
        .server
        .seed((0..200).map(|i| configmap("demo", &format!("old-{i:03}"), "x")))
        .unwrap();
    let host = setup.host().await;
    host.wait_for("the first replay", |r| r.len() >= 200).await;
    host.stop().await;

    let host = setup.host().await;
    const N: usize = 1000;
    // Half the burst while the host runs, the kill in the middle of it, the rest while down.
    for i in 0..N / 2 {
        setup
            .server
            .create(configmap("demo", &format!("burst-{i:04}"), &i.to_string()))
            .unwrap();
    }
    host.wait_for("some of the burst handled", |r| r.len() >= 50)
        .await;
    let before_kill = host.records();
    host.kill().await;
    for i in N / 2..N {
        setup
            .server
            .create(configmap("demo", &format!("burst-{i:04}"), &i.to_string()))
            .unwrap();
    }

    let host = setup.host().await;
    let after = host.records_until_marker(&setup, "marker").await;
    let old_again: Vec<&Value> = after
        .iter()
        .filter(|r| r["name"].as_str().is_some_and(|n| n.starts_with("old-")))
        .collect();
    assert!(
        old_again.is_empty(),
        "handled before the crash and saved, given again: {} of them; the host's state log: {:#?}",
        old_again.len(),
        host.logged("durable")
    );
    let mut seen: std::collections::BTreeMap<String, usize> = Default::default();
    for r in before_kill.iter().chain(&after) {
        if r["event"] == "added" {
            *seen
                .entry(r["name"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
    }
    let missing: Vec<String> = (0..N)
        .map(|i| format!("burst-{i:04}"))
        .filter(|n| !seen.contains_key(n))
        .collect();
    assert!(missing.is_empty(), "never handled: {missing:?}");
    let again = seen.values().filter(|n| **n > 1).count();
    // At least once: only what was handled after the last saved cursor comes again.
    assert!(
        again <= before_kill.len(),
        "{again} redelivered of {}",
        before_kill.len()
    );
    println!(
        "kill -9 mid-burst: {} handled before the kill, {} after the restart, {again} delivered twice",
        before_kill.len(),
        after.len()
    );
    host.stop().await;
}

/// A crash after the plugin handled changes not yet written (they are held for a while): the
/// restart resumes the watch from the stored cut, and the plugin gets none of those changes
/// again (its cursor, committed with every batch, says up to which resource version it had
/// handled them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_before_changes_are_written_gives_nothing_handled_again() {
    let setup = kubediff().await;
    let host = setup.stored_then_running().await;
    setup.create_and_update(100, 10);
    let handled = host.wait_for("the burst handled", |r| r.len() >= 110).await;
    // The cursor covering the burst is committed: a change after it is, and a cursor with it.
    let ops = host.metric("informant_state_ops_total ").await.unwrap();
    setup
        .server
        .create(configmap("demo", "fence", "f"))
        .unwrap();
    host.wait_for("the fence handled", |r| {
        r.iter().any(|v| v["name"] == "fence")
    })
    .await;
    guarded("the fence's cursor committed", async {
        while host.metric("informant_state_ops_total ").await.unwrap() < ops + 2.0 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    host.kill().await;

    let host = setup.host().await;
    let after = host.records_until_marker(&setup, "marker").await;
    let restored = host.logged("cache restored from the state directory");
    assert!(
        restored.iter().any(|l| l.contains("objects=20")),
        "restored from the cut before the burst: {restored:?}"
    );
    let again: Vec<String> = summary(&after)
        .into_iter()
        .filter(|r| !r.contains("fence"))
        .collect();
    // A cursor read while the last change was being handled may leave that one out.
    assert!(
        again.len() <= 1,
        "handled before the crash, given again: {again:?} (of {} handled)",
        handled.len()
    );
    host.stop().await;
}

/// A crash, and the server's history compacted before the restart: the watch cannot bring the
/// held changes again, so the relist gives them as differences from the stored cache, the
/// handled ones included. At least once: nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_and_a_compacted_history_give_the_held_changes_again_never_lose_them() {
    let setup = kubediff().await;
    let host = setup.stored_then_running().await;
    setup.create_and_update(30, 5);
    setup
        .server
        .delete("v1", "ConfigMap", Some("demo"), "old-05")
        .unwrap();
    host.wait_for("the burst handled", |r| r.len() >= 36).await;
    host.kill().await;
    setup.set("old-10", "down");
    setup.server.faults().compact();

    let host = setup.host().await;
    host.wait_for("the relist's delete", |r| {
        r.iter()
            .any(|v| v["event"] == "deleted" && v["name"] == "old-05")
    })
    .await;
    let given = host.records_until_marker(&setup, "marker").await;
    let mut want: Vec<String> = (0..30).map(|i| format!("added new-{i:03}")).collect();
    want.extend((0..5).map(|i| format!(r#"updated old-{i:02} "x"->"y""#)));
    want.push("deleted old-05".into());
    want.push(r#"updated old-10 "x"->"down""#.into());
    want.sort();
    assert_eq!(summary(&given), want);
    assert_eq!(
        host.configmap_metric("informant_informer_lists").await,
        1,
        "a 410 costs a list"
    );
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_server_behind_the_same_address_is_relisted_not_trusted() {
    let mut setup = kubediff().await;
    setup
        .server
        .seed((0..30).map(|i| configmap("demo", &format!("old-{i:02}"), "x")))
        .unwrap();
    let host = setup.host().await;
    host.wait_for("the first replay", |r| r.len() >= 30).await;
    // Enough writes that the old history's resourceVersions are ahead of the new server's.
    for i in 0..30 {
        setup.set(&format!("old-{i:02}"), "y");
    }
    host.wait_for("the updates", |r| r.len() >= 60).await;
    host.stop().await;

    setup.replace_server().await;
    setup
        .server
        .create(configmap("demo", "old-00", "z"))
        .unwrap();
    setup
        .server
        .create(configmap("demo", "fresh", "n"))
        .unwrap();

    let host = setup.host().await;
    host.wait_for("the relist's deletes", |r| {
        r.iter().filter(|v| v["event"] == "deleted").count() == 29
    })
    .await;
    let given = host.records_until_marker(&setup, "marker").await;
    let mut want: Vec<String> = (1..30).map(|i| format!("deleted old-{i:02}")).collect();
    want.push("added fresh".into());
    want.push(r#"updated old-00 "y"->"z""#.into());
    want.sort();
    assert_eq!(summary(&given), want);
    assert_eq!(
        host.logged("Too large resource version").len(),
        1,
        "{:?}",
        host.logged("resum")
    );
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_state_is_moved_aside_and_the_host_starts_without_it() {
    let setup = kubediff().await;
    setup
        .server
        .seed((0..5).map(|i| configmap("demo", &format!("cm-{i}"), "x")))
        .unwrap();
    let state = setup.state_dir();
    std::fs::create_dir_all(&state).unwrap();
    let garbage: Vec<u8> = (0..64 * 1024u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(state.join("state.redb"), &garbage).unwrap();

    let host = setup.host().await;
    host.wait_for("the whole cache replayed", |r| r.len() >= 5)
        .await;
    let warned = host.logged("state refused and moved aside");
    assert_eq!(warned.len(), 1, "{:?}", host.lines());
    let aside: Vec<PathBuf> = std::fs::read_dir(&state)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .contains("set-aside")
        })
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(std::fs::read(&aside[0]).unwrap(), garbage, "kept as it was");
    assert!(
        warned[0].contains(&*aside[0].to_string_lossy()),
        "{}",
        warned[0]
    );
    host.stop().await;

    // The fresh state works: the next restart delivers nothing for unchanged objects.
    let host = setup.host().await;
    let given = host.records_until_marker(&setup, "marker").await;
    assert_eq!(summary(&given), Vec::<String>::new());
    host.stop().await;
}

/// `informant run --state-dir DIR` that is expected to fail at once: its exit and output.
async fn run_failing(setup: &Setup, state: &Path) -> (std::process::ExitStatus, String) {
    let out = guarded(
        "informant run to exit",
        Command::new(env!("CARGO_BIN_EXE_informant"))
            .arg("run")
            .arg("--kubeconfig")
            .arg(setup.dir.path().join("kubeconfig"))
            .arg("--plugins")
            .arg(setup.dir.path().join("plugins"))
            .arg("--state-dir")
            .arg(state)
            .env("NO_COLOR", "1")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap();
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    (out.status, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_dir_in_use_or_not_a_directory_is_refused_with_its_path() {
    let setup = kubediff().await;
    let host = setup.host().await;
    // A second host on the same state: refused, and the first one's state left alone.
    let (status, text) = run_failing(&setup, &setup.state_dir()).await;
    assert!(!status.success());
    let state = setup.state_dir();
    assert!(
        text.contains(&format!(
            "state directory `{}` is in use by pid {} on host ",
            state.display(),
            host.pid()
        )),
        "names the holder: {text}"
    );
    let aside = std::fs::read_dir(setup.state_dir())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains("set-aside")
        })
        .count();
    assert_eq!(aside, 0);
    host.stop().await;

    // A file where the directory should be.
    let file = setup.dir.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let (status, text) = run_failing(&setup, &file).await;
    assert!(!status.success());
    assert!(text.contains("not-a-dir"), "{text}");
}

/// `informant dev --state-dir` restarted: a new embedded API server on another port, seeded
/// anew. The state is the same `dev`'s, not another cluster's: each plugin gets the difference
/// from what it had handled, not the whole cache again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_dev_resumes_its_state_on_a_new_port() {
    let setup = kubediff().await;
    let seed = |name: &str, cms: &[&str]| {
        let mut docs =
            vec!["apiVersion: v1\nkind: Namespace\nmetadata:\n  name: demo\n".to_string()];
        docs.extend(cms.iter().map(|cm| {
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {cm}\n  namespace: demo\ndata:\n  value: x\n")
        }));
        let path = setup.dir.path().join(name);
        std::fs::write(&path, docs.join("---\n")).unwrap();
        path
    };
    let first = seed("first.yaml", &["a", "b"]);
    let state = setup.state_dir();

    let listen = informant_tests::http::free_addr();
    let dev = Host::dev(setup.dir.path(), &state, listen, &first).await;
    dev.wait_for("the seeded objects", |r| r.len() >= 2).await;
    create_on(listen, "c").await;
    dev.wait_for("c", |r| r.iter().any(|v| v["name"] == "c"))
        .await;
    assert_eq!(summary(&dev.records()), ["added a", "added b", "added c"]);
    dev.stop().await;

    // Restarted on another port, seeded anew: `b` and `c` are gone, `d`, `e` and `f` new.
    // The new server's versions pass the stored one (`c`'s): a watch resumed from it would
    // take the new server's history from there as the changes since, and miss the rest.
    let second = seed("second.yaml", &["a", "d", "e", "f"]);
    let listen = informant_tests::http::free_addr();
    let dev = Host::dev(setup.dir.path(), &state, listen, &second).await;
    let marker = "marker";
    create_on(listen, marker).await;
    let given = dev
        .wait_for("the marker", |r| r.iter().any(|v| v["name"] == marker))
        .await;
    let given: Vec<Value> = given
        .into_iter()
        .take_while(|v| v["name"] != marker)
        .collect();
    assert_eq!(
        summary(&given),
        ["added d", "added e", "added f", "deleted b", "deleted c"],
        "the difference from what it had handled, not `a` again"
    );
    assert!(
        dev.logged("set aside").is_empty(),
        "{:?}",
        dev.logged("set aside")
    );
    assert_eq!(
        dev.logged("cache restored from the state directory").len(),
        1
    );
    dev.stop().await;
}

/// Creates ConfigMap `name` in `demo` on the embedded API server at `addr`, through kube's
/// client as a plugin author's kubectl would.
async fn create_on(addr: std::net::SocketAddr, name: &str) {
    let uri = format!("http://{addr}").parse().unwrap();
    let client = kube::Client::try_from(kube::Config::new(uri)).unwrap();
    let api: kube::Api<kube::core::DynamicObject> = kube::Api::namespaced_with(
        client,
        "demo",
        &kube::core::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
            "",
            "v1",
            "ConfigMap",
        )),
    );
    let cm: kube::core::DynamicObject =
        serde_json::from_value(configmap("demo", name, "m")).unwrap();
    guarded("the create", api.create(&Default::default(), &cm))
        .await
        .unwrap();
}
