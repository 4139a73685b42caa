//! A plugin answering `retry`: the object comes back after a backoff until the plugin is done
//! with it or the manifest's attempts run out; a newer event replaces a pending retry.

use informant_runtime::plugin::load::host_config::HostConfig;

use informant_runtime::plugin::id::PluginId;
use informant_tests::host_log::HostLog;
use informant_tests::plugins::PluginEnv;
use informant_tests::{configmap, create_namespaces};
use serde_json::json;

fn retrying(tag: &str, initial_backoff_ms: u64) -> String {
    format!(
        "[retry]\nmax-attempts = 3\ninitial-backoff-ms = {initial_backoff_ms}\n[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"{tag}\"\n[config]\nmode = \"retry\"\ntag = \"{tag}\"\n"
    )
}

/// `(type, rv)` of each delivery of `key` the plugin echoed.
fn deliveries(env: &PluginEnv, plugin: &str, key: &str) -> Vec<(String, String)> {
    env.logs
        .json_of(plugin)
        .iter()
        .filter(|v| v["key"] == key)
        .map(|v| {
            let text = |f: &str| v[f].as_str().unwrap_or_default().to_string();
            (text("type"), text("rv"))
        })
        .collect()
}

fn with_retries(ns: &str, name: &str, retries: u32) -> serde_json::Value {
    let mut cm = configmap(ns, name, "v");
    cm["metadata"]["labels"] = json!({ "retries": retries.to_string() });
    cm
}

// Current-thread: the host's log is captured on this thread.
#[tokio::test]
async fn a_retried_object_comes_back_until_done_or_out_of_attempts() {
    let (host_log, _capture) = HostLog::capture();
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["fast", "slow"]);
    env.install(None, "fast", "hostile", &retrying("fast", 10));
    env.install(None, "slow", "hostile", &retrying("slow", 600_000));
    env.reconcile().await;
    let id = |name: &str| PluginId {
        tenant: String::new(),
        name: name.into(),
    };
    let fast = env.host.supervisor(&id("fast")).expect("loaded");

    // Two retries asked, three attempts allowed: the third delivery is done.
    env.server.create(with_retries("fast", "twice", 2)).unwrap();
    // Ten asked: the first delivery and three retries, then the event counts as failed.
    env.server
        .create(with_retries("fast", "never", 10))
        .unwrap();
    let failure = host_log
        .wait_for("the plugin to give up on fast/never", |l| {
            l.field("key") == "fast/never" && l.field("error").contains("gave up")
        })
        .await;
    assert_eq!(
        failure.field("error"),
        "gave up after 3 retries: attempt 4 of 10"
    );
    env.logs
        .wait_until("the third delivery of fast/twice", || {
            deliveries(&env, "fast", "fast/twice").len() == 3
        })
        .await;
    let twice = deliveries(&env, "fast", "fast/twice");
    assert!(
        twice.iter().all(|d| d == &twice[0] && d.0 == "added"),
        "each retry redelivers the same (unchanged) object as it was: {twice:?}"
    );
    assert_eq!(deliveries(&env, "fast", "fast/never").len(), 4);
    assert_eq!((fast.retried(), fast.failed()), (5, 1));
    assert!(
        fast.last_error()
            .is_some_and(|e| e.contains("fast/never") && e.contains("gave up")),
        "{:?}",
        fast.last_error()
    );

    // A retry ten minutes away is replaced by the object's next version, delivered at once.
    let slow = env.host.supervisor(&id("slow")).expect("loaded");
    env.server.create(with_retries("slow", "s", 1)).unwrap();
    env.logs
        .wait_until("the first delivery of slow/s", || {
            deliveries(&env, "slow", "slow/s").len() == 1
        })
        .await;
    let mut changed = with_retries("slow", "s", 1);
    changed["data"] = json!({ "k": "changed" });
    env.server.update(changed).unwrap();
    env.logs
        .wait_until("the update of slow/s", || {
            deliveries(&env, "slow", "slow/s").len() == 2
        })
        .await;
    let s = deliveries(&env, "slow", "slow/s");
    assert_eq!((s[0].0.as_str(), s[1].0.as_str()), ("added", "updated"));
    assert_ne!(s[0].1, s[1].1, "the update carries the new version");
    assert_eq!((slow.retried(), slow.failed()), (1, 0));
}

fn labelled(ns: &str, name: &str, labels: serde_json::Value) -> serde_json::Value {
    let mut cm = configmap(ns, name, "v");
    cm["metadata"]["labels"] = labels;
    cm
}

/// Only an error made as a retry is one: an ordinary error passed up with `?` is a failure, and
/// so is a plain error returned after the handler made (and dropped) a retry. The one it
/// returns decides, and a retry's `after` reaches the host.
#[tokio::test]
async fn only_the_returned_error_decides_whether_an_event_is_retried() {
    let (host_log, _capture) = HostLog::capture();
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["plain"]);
    env.install(None, "plain", "hostile", &retrying("plain", 10));
    env.reconcile().await;
    let plain = env
        .host
        .supervisor(&PluginId {
            tenant: String::new(),
            name: "plain".into(),
        })
        .expect("loaded");

    // `retries=lots` does not parse: the `?` on that error fails the event.
    env.server
        .create(labelled("plain", "unparsed", json!({"retries": "lots"})))
        .unwrap();
    // Asks for a retry, drops it, then returns a plain error.
    env.server
        .create(labelled(
            "plain",
            "changed",
            json!({"retries": "2", "then-fail": "changed-its-mind"}),
        ))
        .unwrap();
    for (key, error) in [
        ("plain/unparsed", "invalid digit found in string"),
        ("plain/changed", "changed-its-mind"),
    ] {
        let failure = host_log
            .wait_for(&format!("the failure of {key}"), |l| {
                l.field("key") == key && !l.field("error").is_empty()
            })
            .await;
        assert_eq!(
            failure.field("error"),
            format!("returned an error: {error}"),
            "{key} fails at its first delivery, not after retries"
        );
    }
    assert_eq!((plain.retried(), plain.failed()), (0, 2));
    assert_eq!(deliveries(&env, "plain", "plain/unparsed").len(), 1);
    assert_eq!(deliveries(&env, "plain", "plain/changed").len(), 1);

    // A retry not before a second, against a 10 ms backoff: the redelivery waits for the plugin's
    // `after`. (Observed from the plugin's log, so the gap seen can only shrink by how late the
    // first delivery was seen; the margin covers that.)
    env.server
        .create(labelled(
            "plain",
            "later",
            json!({"retries": "1", "after-ms": "1000"}),
        ))
        .unwrap();
    env.logs
        .wait_until("the first delivery of plain/later", || {
            deliveries(&env, "plain", "plain/later").len() == 1
        })
        .await;
    let first = std::time::Instant::now();
    env.logs
        .wait_until("the redelivery of plain/later", || {
            deliveries(&env, "plain", "plain/later").len() == 2
        })
        .await;
    let gap = first.elapsed();
    assert!(
        gap >= std::time::Duration::from_millis(500),
        "redelivered {gap:?} after the first delivery, though the plugin asked for 1 s"
    );
    assert_eq!((plain.retried(), plain.failed()), (1, 2));
}

/// A retry is an event of the tenant's like any other: redeliveries draw from its
/// `events-per-second` budget, so a plugin answering `retry` cannot outrun it; another
/// tenant's plugin gets every event meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_draw_from_the_tenants_event_budget() {
    let config = informant_runtime::config::parse(
        "[tenants.team-a]\nnamespaces = [\"team-a\"]\nevents-per-second = 2\n[tenants.team-b]\nnamespaces = [\"team-b\"]\n",
        std::path::Path::new("informant.toml"),
    )
    .expect("valid config");
    let env = PluginEnv::start(config).await;
    create_namespaces(&env.server, &["team-a", "team-b"]);
    env.install(
        Some("team-a"),
        "r",
        "hostile",
        &retrying("team-a", 10).replace("max-attempts = 3", "max-attempts = 4"),
    );
    // team-b's plugin answers `retry` to nothing: it only echoes.
    env.install(Some("team-b"), "b", "hostile", &retrying("team-b", 10));
    env.reconcile().await;
    env.server.create(with_retries("team-a", "x", 4)).unwrap();
    env.logs
        .wait_until("the first delivery", || {
            deliveries(&env, "r", "team-a/x").len() == 1
        })
        .await;
    let first = std::time::Instant::now();
    // While team-a's redeliveries wait for its budget, team-b's events all arrive.
    for i in 0..20 {
        env.server
            .create(configmap("team-b", &format!("b{i}"), "v"))
            .unwrap();
    }
    env.logs
        .wait_until("team-b's 20 events", || {
            env.logs.keys_of("b", "team-b").len() == 20
        })
        .await;
    assert!(
        deliveries(&env, "r", "team-a/x").len() < 5,
        "team-b's events did not wait for team-a's throttled retries"
    );
    env.logs
        .wait_until("the fifth delivery", || {
            deliveries(&env, "r", "team-a/x").len() == 5
        })
        .await;
    // Unbudgeted, the four redeliveries would come within 10 + 20 + 40 + 80 ms. At 2 a second,
    // with the bucket's second token spent on the first redelivery, the other three wait for
    // refills a half second apart.
    let took = first.elapsed();
    assert!(
        took >= std::time::Duration::from_millis(1000),
        "four redeliveries in {took:?} at 2 events/s"
    );
}
