//! Outbound HTTP from Python and TypeScript plugins, through their SDKs' `http` modules over
//! `wasi:http/outgoing-handler`, held to the same rules as a Rust plugin's
//! (`tests/e2e/outbound.rs`): a request to an allowed origin arrives with its body and its
//! status comes back (a redirect's too, not followed); a request to any other origin raises the
//! SDK's denial error and never connects; a receiver that never answers costs the plugin its
//! event's deadline (or its own timeout, when shorter) while other plugins keep getting events.
//! Every receiver listens on 127.0.0.1.

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use informant_runtime::plugin::load::host_config::HostConfig;

use informant_runtime::plugin::id::PluginId;
use informant_tests::host_log::HostLog;
use informant_tests::plugins::{PluginEnv, js_wasm, python_wasm};
use informant_tests::receiver::{Answer, Receiver, labelled, poster};
use informant_tests::{create_namespaces, guarded};
use serde_json::{Value, json};

/// One language's `post`-mode test plugin: the suffix its plugins' names get, its component,
/// and the error classes its SDK raises for a host denial and a timeout.
struct Lang {
    suffix: &'static str,
    component: PathBuf,
    denied: &'static str,
    timeout: &'static str,
}

/// Builds (or finds cached) both languages' test plugins, before any runtime work starts;
/// `None` after a printed skip when either toolchain is missing.
fn langs() -> Option<[Lang; 2]> {
    Some([
        Lang {
            suffix: "py",
            component: python_wasm("tests/plugins/hostile-py")?,
            denied: "Denied",
            timeout: "Timeout",
        },
        Lang {
            suffix: "ts",
            component: js_wasm("tests/plugins/hostile-ts")?,
            denied: "denied",
            timeout: "timeout",
        },
    ])
}

fn id(name: &str) -> PluginId {
    PluginId {
        tenant: String::new(),
        name: name.into(),
    }
}

/// The line `plugin` logged about `key` (a `post`-mode plugin logs one per event).
async fn outcome(env: &PluginEnv, plugin: &str, key: &str) -> Value {
    let find = || {
        env.logs
            .json_of(plugin)
            .into_iter()
            .find(|v| v["key"] == key)
    };
    env.logs
        .wait_until(&format!("{plugin}'s outcome for {key}"), || {
            find().is_some()
        })
        .await;
    find().expect("found above")
}

#[tokio::test]
async fn python_and_typescript_plugins_post_only_to_allowed_origins() {
    let Some(langs) = langs() else {
        return;
    };
    // `other` is where every refused request would go: it must see no connection at all.
    let other = Receiver::start(Answer::Ok { location: 1 }).await;
    let mut allowed = Receiver::start(Answer::Ok {
        location: other.port,
    })
    .await;
    let (a, o) = (allowed.origin(), other.origin());
    let only_a = [a.clone()];
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["ns"]);
    for l in &langs {
        let s = l.suffix;
        for (name, url) in [
            (format!("ok-{s}"), format!("{a}/ok-{s}")),
            (format!("redirect-{s}"), format!("{a}/redirect-{s}")),
            (format!("denied-{s}"), format!("{o}/denied-{s}")),
        ] {
            let manifest = poster(&only_a, "ns", &url, 5000);
            env.install_component(None, &name, &l.component, &manifest);
        }
    }
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);

    env.server.create(labelled("ns", "hello")).unwrap();
    for l in &langs {
        let s = l.suffix;
        let ok = outcome(&env, &format!("ok-{s}"), "ns/hello").await;
        assert_eq!(
            (&ok["status"], &ok["body"]),
            (&json!(200), &json!("ok")),
            "{ok}"
        );
        let redirect = outcome(&env, &format!("redirect-{s}"), "ns/hello").await;
        assert_eq!(
            redirect["status"], 302,
            "a redirect is handed back, not followed: {redirect}"
        );
        let denied = outcome(&env, &format!("denied-{s}"), "ns/hello").await;
        let error = denied["error"].as_str().unwrap_or_default();
        assert_eq!(denied["class"], l.denied, "{denied}");
        assert!(
            error.contains(&format!("POST {o}/denied-{s}")) && error.contains("denied by the host"),
            "{error}"
        );
    }

    // What the allowed receiver got: each allowed POST, the event's JSON line with its length.
    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(guarded("a POST", allowed.requests.recv()).await.unwrap());
    }
    got.sort_by(|x, y| x.0.cmp(&y.0));
    let lines: Vec<&str> = got.iter().map(|(h, _)| h.lines().next().unwrap()).collect();
    assert_eq!(
        lines,
        [
            "POST /ok-py HTTP/1.1",
            "POST /ok-ts HTTP/1.1",
            "POST /redirect-py HTTP/1.1",
            "POST /redirect-ts HTTP/1.1",
        ]
    );
    let line = json!({"tag": "t", "type": "added", "key": "ns/hello"});
    for (head, body) in &got {
        let head = head.to_ascii_lowercase();
        assert!(
            head.contains(&format!("host: 127.0.0.1:{}", allowed.port)),
            "{head}"
        );
        assert!(head.contains("content-type: application/json"), "{head}");
        // A length, not chunked encoding: the receiver reads exactly that many bytes.
        assert!(head.contains("content-length: "), "{head}");
        assert_eq!(body, &line, "{head}");
    }
    assert_eq!(allowed.connections(), 4);
    assert_eq!(other.connections(), 0, "nothing refused ever connected");

    // The host counted each plugin's requests like a Rust plugin's.
    for l in &langs {
        let outbound = |name: String| {
            let s = env.host.supervisor(&id(&name)).expect("loaded");
            let o = s.outbound();
            (
                o.requests.load(Ordering::Relaxed),
                o.failures.load(Ordering::Relaxed),
                o.denied.load(Ordering::Relaxed),
            )
        };
        assert_eq!(outbound(format!("ok-{}", l.suffix)), (1, 0, 0));
        assert_eq!(outbound(format!("denied-{}", l.suffix)), (0, 0, 1));
    }
}

// Current-thread: the host's log is captured on this thread.
#[tokio::test]
async fn a_receiver_that_never_answers_costs_python_and_typescript_plugins_their_deadline() {
    let Some(langs) = langs() else {
        return;
    };
    let (host_log, _capture) = HostLog::capture();
    let mut silent = Receiver::start(Answer::Never).await;
    let s = silent.origin();
    let only_s = [s.clone()];
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["ns"]);
    for l in &langs {
        let x = l.suffix;
        // Waits for the answer with the SDK's default timeout (30 s): the deadline cuts it.
        let stuck = poster(&only_s, "ns", &format!("{s}/stuck-{x}"), 2000);
        env.install_component(None, &format!("stuck-{x}"), &l.component, &stuck);
        // Its own timeout is shorter than its deadline: the SDK raises a timeout error.
        let brief = poster(&only_s, "ns", &format!("{s}/brief-{x}"), 10_000) + "timeout-ms = 200\n";
        env.install_component(None, &format!("brief-{x}"), &l.component, &brief);
        // A deadline with room for a language runtime's `init` on a loaded machine.
        let echo = "[limits]\ndeadline-ms = 5000\n[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"ns\"\nlabel-selector = \"app=outbound\"\n[config]\nmode = \"echo\"\ntag = \"e\"\n";
        env.install_component(None, &format!("echo-{x}"), &l.component, echo);
    }
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);

    env.server.create(labelled("ns", "first")).unwrap();
    for l in &langs {
        let name = format!("stuck-{}", l.suffix);
        let failure = host_log
            .wait_for(&format!("{name}'s missed deadline"), |line| {
                line.field("plugin") == name && line.field("error").contains("deadline")
            })
            .await;
        assert_eq!(failure.field("key"), "ns/first");
        let brief = outcome(&env, &format!("brief-{}", l.suffix), "ns/first").await;
        assert_eq!(brief["class"], l.timeout, "{brief}");
        let error = brief["error"].as_str().unwrap_or_default();
        assert!(error.contains("connection-read-timeout"), "{error}");
    }
    let mut paths = Vec::new();
    for _ in 0..4 {
        let (head, body) = guarded("a request", silent.requests.recv()).await.unwrap();
        assert_eq!(body["key"], "ns/first", "{head}");
        paths.push(head.lines().next().unwrap_or_default().to_string());
    }
    paths.sort();
    assert_eq!(
        paths,
        [
            "POST /brief-py HTTP/1.1",
            "POST /brief-ts HTTP/1.1",
            "POST /stuck-py HTTP/1.1",
            "POST /stuck-ts HTTP/1.1",
        ]
    );
    // Every request was given up on: the timed-out ones by the client, the cut-off
    // instances' with them.
    let mut hung_up = silent.hung_up.clone();
    guarded("the hang-ups", hung_up.wait_for(|n| *n >= 4))
        .await
        .unwrap();

    // The other plugins' events keep flowing, before and after.
    env.server.create(labelled("ns", "second")).unwrap();
    for l in &langs {
        let echo = format!("echo-{}", l.suffix);
        env.logs
            .wait_until(&format!("{echo}'s two events"), || {
                let keys = env.logs.keys_of(&echo, "e");
                keys.contains("ns/first") && keys.contains("ns/second")
            })
            .await;
        let stuck = env
            .host
            .supervisor(&id(&format!("stuck-{}", l.suffix)))
            .expect("loaded");
        assert!(stuck.failed() >= 1);
        assert_eq!(
            env.host
                .supervisor(&id(&format!("brief-{}", l.suffix)))
                .expect("loaded")
                .failed(),
            0,
            "a timeout raised in the plugin is the plugin's to handle"
        );
    }
}
