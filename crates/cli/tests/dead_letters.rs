//! Dead letters as a user meets them: `informant run --state-dir` (the real binary) against the
//! embedded API server, with the hostile test plugin failing some objects' events, and
//! `informant dead-letters list|retry|drop` (the real binary) against its admin server.

mod support;

use informant_tests::guarded;
use serde_json::{Value, json};
use support::{Host, Setup};
use tokio::process::Command;

/// The hostile plugin in `retry` mode on `demo`'s ConfigMaps: an object labelled
/// `then-fail=WHY` fails with WHY (a returned error), one labelled `retries=N` asks for N
/// retries; one redelivery is allowed, and every failed event is kept.
const MANIFEST: &str = r#"
[limits]
deadline-ms = 2000

[retry]
max-attempts = 1
initial-backoff-ms = 10
max-backoff-ms = 10
dead-letter = "failed"

[[watch]]
api-version = "v1"
kind = "ConfigMap"
namespaces = ["demo"]

[config]
mode = "retry"
tag = "dl"
"#;

/// A ConfigMap in `demo` with `labels`.
fn configmap(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "demo", "labels": labels},
        "data": {"value": name}})
}

/// The hostile plugin as `dl`.
async fn setup() -> Setup {
    Setup::new("dl", "hostile", MANIFEST).await
}

impl Setup {
    /// Creates `name` and returns its resource version.
    fn create(&self, name: &str, labels: Value) -> String {
        let made = self.server.create(configmap(name, labels)).unwrap();
        made["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string()
    }
}

impl Host {
    /// The plugin's echo lines (`{"tag", "type", "key", "rv", ...}`), in order.
    fn echoes(&self) -> Vec<Value> {
        self.json_lines()
            .into_iter()
            .filter(|v| v["tag"] == "dl" && v.get("rv").is_some())
            .collect()
    }

    async fn wait_for_echo(&self, what: &str, pred: impl Fn(&[Value]) -> bool) {
        guarded(what, async {
            while !pred(&self.echoes()) {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
        .await
    }

    /// `informant dead-letters ARGS --admin ADDR`: exit success, stdout, stderr.
    async fn cli(&self, args: &[&str]) -> (bool, String, String) {
        let out = guarded(
            "informant dead-letters",
            Command::new(env!("CARGO_BIN_EXE_informant"))
                .arg("dead-letters")
                .args(args)
                .arg("--admin")
                .arg(self.admin.to_string())
                .env("NO_COLOR", "1")
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

    /// The letters `list --output json` prints.
    async fn letters(&self) -> Vec<Value> {
        let (ok, out, err) = self.cli(&["list", "--output", "json"]).await;
        assert!(ok, "{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        v["dead_letters"].as_array().unwrap().clone()
    }

    async fn wait_for_letters(&self, what: &str, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        guarded(what, async {
            loop {
                let letters = self.letters().await;
                if pred(&letters) {
                    return letters;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        })
        .await
    }
}

fn letter_of<'a>(letters: &'a [Value], key: &str) -> &'a Value {
    letters
        .iter()
        .find(|l| l["key"] == key)
        .unwrap_or_else(|| panic!("no letter for {key}: {letters:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_events_are_kept_survive_a_restart_and_are_retried_or_dropped() {
    let setup = setup().await;
    let host = setup.host().await;
    let bad_rv = setup.create("bad", json!({"then-fail": "boom"}));
    let tired_rv = setup.create("tired", json!({"retries": "5"}));
    setup.create("fine", json!({}));

    let letters = host
        .wait_for_letters("both failures kept", |l| l.len() >= 2)
        .await;
    assert_eq!(letters.len(), 2, "`fine` is handled: {letters:?}");
    let bad = letter_of(&letters, "demo/bad");
    assert_eq!(
        (&bad["plugin"], &bad["event"], &bad["resource_version"]),
        (&json!("dl"), &json!("added"), &json!(bad_rv))
    );
    assert_eq!(bad["attempts"], 1);
    assert!(bad["error"].as_str().unwrap().contains("boom"), "{bad}");
    assert_eq!(bad["informer"], "/v1/configmaps@demo");
    let tired = letter_of(&letters, "demo/tired");
    assert_eq!(tired["resource_version"], json!(tired_rv));
    assert_eq!(tired["attempts"], 2, "the delivery and its one retry");
    assert!(
        tired["error"]
            .as_str()
            .unwrap()
            .starts_with("gave up after 1 retries: attempt 2 of 5"),
        "{tired}"
    );
    let (ok, table, _) = host.cli(&["list"]).await;
    assert!(ok);
    assert!(table.starts_with("ID  PLUGIN  KIND/KEY"), "{table}");
    assert!(table.contains("configmaps demo/bad"), "{table}");
    assert_eq!(
        host.metric("informant_dead_letters{").await,
        Some(2.0),
        "the gauge counts them"
    );
    assert!(host.metric("informant_state_ops_total ").await.unwrap() > 0.0);
    assert_eq!(host.metric("informant_state_degraded ").await, Some(0.0));
    host.stop().await;

    // Kept across a restart, with their ids.
    let host = setup.host().await;
    let after = host.letters().await;
    assert_eq!(after, letters);

    // `bad` no longer fails once its label is gone; retrying its letter delivers its current
    // state again, as the add it was, and removes the letter.
    let fixed_rv =
        setup.server.update(configmap("bad", json!({}))).unwrap()["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
    host.wait_for_echo("the fixed update handled", |e| {
        e.iter()
            .any(|v| v["key"] == "demo/bad" && v["rv"] == fixed_rv.as_str())
    })
    .await;
    let bad_id = bad["id"].to_string();
    let (ok, out, err) = host.cli(&["retry", "dl", &bad_id]).await;
    assert!(ok, "{err}");
    assert_eq!(out, format!("dl: delivered again: {bad_id}\n"));
    host.wait_for_echo("the re-driven add", |e| {
        e.iter().any(|v| {
            v["key"] == "demo/bad"
                && v["type"] == "added"
                && v["rv"] == fixed_rv.as_str()
                && v["initial"] == false
        })
    })
    .await;
    let left = host.letters().await;
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["key"], "demo/tired");

    // An add whose object is gone, and a deletion whose object is still gone: both kept with
    // the reason.
    setup.create("gone", json!({"then-fail": "nope"}));
    host.wait_for_letters("gone's add", |l| l.iter().any(|l| l["key"] == "demo/gone"))
        .await;
    setup
        .server
        .delete("v1", "ConfigMap", Some("demo"), "gone")
        .unwrap();
    let letters = host
        .wait_for_letters("gone's delete", |l| {
            l.iter()
                .any(|l| l["key"] == "demo/gone" && l["event"] == "deleted")
        })
        .await;
    assert_eq!(letters.len(), 3, "{letters:?}");
    let (ok, out, err) = host.cli(&["retry", "dl", "--all"]).await;
    assert!(ok, "{err}");
    assert!(
        out.contains("is gone; its deletion was delivered as an event of its own"),
        "{out}"
    );
    assert!(
        out.contains("still deleted and its last state is not kept"),
        "{out}"
    );
    assert!(
        out.contains("dl: delivered again: "),
        "tired's object is there: {out}"
    );
    // Still asking for retries, `tired` fails again: a new letter.
    let old_tired = tired["id"].clone();
    host.wait_for_letters("tired failed again", |l| {
        l.iter()
            .any(|l| l["key"] == "demo/tired" && l["id"] != old_tired)
    })
    .await;

    // Ids that name nothing, hostile plugin names: clean refusals.
    let (ok, out, _) = host.cli(&["drop", "dl", "999999"]).await;
    assert!(ok);
    assert_eq!(out, "dl: no such letter: 999999\n");
    for hostile in ["../dl", "dl%2F", "dl?plugin=dl", "dl ", "/dl"] {
        let (ok, _, err) = host.cli(&["drop", hostile, "--all"]).await;
        assert!(!ok, "{hostile}");
        assert!(err.contains("404"), "{hostile}: {err}");
    }

    let (ok, out, err) = host.cli(&["drop", "dl", "--all"]).await;
    assert!(ok, "{err}");
    assert!(out.starts_with("dl: dropped: "), "{out}");
    assert_eq!(host.letters().await, Vec::<Value>::new());
    assert_eq!(host.metric("informant_dead_letters{").await, Some(0.0));
    host.stop().await;
}

/// A tenant cycling plugin names once held thousands of letters of plugins long gone: a
/// plugin's letters now go with it, when a reconcile unloads it and, for one removed while the
/// host was down, at the next start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_plugins_letters_are_dropped_while_running_and_at_the_next_start() {
    let setup = setup().await;
    let plugins = setup.dir.path().join("plugins");
    std::fs::copy(plugins.join("dl.wasm"), plugins.join("keep.wasm")).unwrap();
    std::fs::write(
        plugins.join("keep.toml"),
        MANIFEST.replace("\"dl\"", "\"keep\""),
    )
    .unwrap();
    let host = setup.host().await;
    setup.create("bad", json!({"then-fail": "boom"}));
    let letters = host
        .wait_for_letters("a letter from each plugin", |l| l.len() >= 2)
        .await;
    let mut of: Vec<&str> = letters
        .iter()
        .map(|l| l["plugin"].as_str().unwrap())
        .collect();
    of.sort();
    assert_eq!(of, ["dl", "keep"]);

    std::fs::remove_file(plugins.join("dl.wasm")).unwrap();
    std::fs::remove_file(plugins.join("dl.toml")).unwrap();
    let left = host
        .wait_for_letters("dl's letter dropped", |l| {
            l.iter().all(|l| l["plugin"] != "dl")
        })
        .await;
    assert_eq!(left.len(), 1, "keep's stays: {left:?}");
    assert_eq!(left[0]["plugin"], "keep");
    assert_eq!(
        host.metric("informant_dead_letters_dropped_total ").await,
        Some(1.0),
        "counted"
    );
    host.stop().await;

    // Removed while the host is down: dropped at the next start.
    std::fs::remove_file(plugins.join("keep.wasm")).unwrap();
    std::fs::remove_file(plugins.join("keep.toml")).unwrap();
    let host = setup.host().await;
    host.wait_for_letters("keep's letter dropped", |l| l.is_empty())
        .await;
    assert_eq!(
        host.logged("plugin no longer in the plugins directory: its dead letters are dropped")
            .len(),
        1,
        "{:?}",
        host.lines()
    );
    host.stop().await;
}
