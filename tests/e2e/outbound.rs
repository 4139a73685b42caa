//! Outbound HTTP from plugins through `wasi:http/outgoing-handler`: only to origins in both the
//! manifest's and the tenant's `allowed-outbound-hosts`, refused before any connection
//! otherwise; redirects handed back as they came; a receiver that never answers costs one
//! deadline. Every receiver is a TCP listener on 127.0.0.1 that counts its connections.

use std::net::SocketAddr;
use std::path::Path;

use informant_runtime::admin::{AdminServer, AdminState};
use informant_runtime::config;
use informant_runtime::plugin::id::PluginId;
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_tests::host_log::HostLog;
use informant_tests::http::get;
use informant_tests::plugins::PluginEnv;
use informant_tests::receiver::{Answer, Receiver, labelled, poster};
use informant_tests::{create_namespaces, guarded};
use serde_json::{Value, json};
use std::sync::atomic::Ordering;

fn id(tenant: &str, name: &str) -> PluginId {
    PluginId {
        tenant: tenant.into(),
        name: name.into(),
    }
}

#[tokio::test]
async fn only_allowed_origins_are_reached_and_the_rest_never_connect() {
    // `other` is where every refused request would go: it must see no connection at all.
    let other = Receiver::start(Answer::Ok { location: 1 }).await;
    let mut allowed = Receiver::start(Answer::Ok {
        location: other.port,
    })
    .await;
    let (a, o) = (allowed.origin(), other.origin());
    let config = format!(
        "operator-plugins = true\n[tenants.team-a]\nnamespaces = [\"team-a\"]\nallowed-outbound-hosts = [\"{a}\"]\n"
    );
    let env = PluginEnv::start(config::parse(&config, Path::new("informant.toml")).unwrap()).await;
    create_namespaces(&env.server, &["team-a"]);
    let port = allowed.port;
    let refused_urls = [
        ("to-other", format!("{o}/")),
        ("userinfo", format!("http://user@127.0.0.1:{port}/")),
        ("by-name", format!("http://localhost:{port}/")),
        ("tls", format!("https://127.0.0.1:{port}/")),
        ("suffix", format!("http://127.0.0.1:{port}.example.com/")),
    ];
    let only_a = [a.clone()];
    // Allowed, but nothing listens there: a failure, not a denial.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://127.0.0.1:{}", l.local_addr().unwrap().port())
    };
    env.install(
        None,
        "closed",
        "hostile",
        &poster(
            std::slice::from_ref(&closed),
            "team-a",
            &format!("{closed}/"),
            5000,
        ),
    );
    env.install(
        None,
        "op",
        "hostile",
        &poster(&only_a, "team-a", &format!("{a}/hook"), 5000),
    );
    env.install(
        None,
        "redirect",
        "hostile",
        &poster(&only_a, "team-a", &format!("{a}/redirect"), 5000),
    );
    for (name, url) in &refused_urls {
        env.install(None, name, "hostile", &poster(&only_a, "team-a", url, 5000));
    }
    env.install(
        Some("team-a"),
        "tenant",
        "hostile",
        &poster(&only_a, "team-a", &format!("{a}/t"), 5000),
    );
    // Allowed by its manifest, outside its tenant's ceiling: refused at load.
    env.install(
        Some("team-a"),
        "ceiling",
        "hostile",
        &poster(std::slice::from_ref(&o), "team-a", &o, 5000),
    );
    // Not an origin at all.
    env.install(
        None,
        "malformed",
        "hostile",
        &poster(&["https://*.example.com".into()], "team-a", &a, 5000),
    );
    let report = env.reconcile().await;

    let errors: Vec<(String, String)> = report
        .errors
        .iter()
        .map(|(id, e)| (id.to_string(), e.to_string()))
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    let error_of = |who: &str| {
        errors
            .iter()
            .find(|(id, _)| id.ends_with(who))
            .unwrap_or_else(|| panic!("{who} refused: {errors:?}"))
            .1
            .clone()
    };
    let ceiling = error_of("ceiling");
    assert!(
        ceiling.contains("ceiling.toml")
            && ceiling.contains("allowed-outbound-hosts[0]")
            && ceiling.contains("is outside tenant `team-a`'s `allowed-outbound-hosts` ceiling"),
        "{ceiling}"
    );
    let malformed = error_of("malformed");
    assert!(
        malformed.contains("malformed.toml")
            && malformed.contains("allowed-outbound-hosts")
            && malformed.contains("host wildcards are not supported"),
        "{malformed}"
    );

    env.server.create(labelled("team-a", "hello")).unwrap();
    let posters = ["op", "redirect", "tenant", "closed"]
        .into_iter()
        .chain(refused_urls.iter().map(|(n, _)| *n));
    for name in posters {
        env.logs
            .wait_until(&format!("{name}'s outcome"), || {
                env.logs
                    .json_of(name)
                    .iter()
                    .any(|v| v["key"] == "team-a/hello")
            })
            .await;
    }
    let outcome = |name: &str| env.logs.json_of(name)[0].clone();
    assert_eq!(outcome("op")["status"], 200);
    assert_eq!(outcome("tenant")["status"], 200);
    assert_eq!(
        outcome("redirect")["status"],
        302,
        "a redirect is handed back, not followed"
    );
    for (name, _) in &refused_urls {
        let error = outcome(name)["error"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(error.contains("denied by the host"), "{name}: {error}");
    }

    // What the allowed receiver got: the three allowed POSTs, each the event's JSON line.
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(guarded("a POST", allowed.requests.recv()).await.unwrap());
    }
    got.sort_by(|x, y| x.0.cmp(&y.0));
    let lines: Vec<&str> = got.iter().map(|(h, _)| h.lines().next().unwrap()).collect();
    assert_eq!(
        lines,
        [
            "POST /hook HTTP/1.1",
            "POST /redirect HTTP/1.1",
            "POST /t HTTP/1.1"
        ]
    );
    for (head, body) in &got {
        assert!(head.contains(&format!("host: 127.0.0.1:{port}")), "{head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: application/json")
        );
        assert_eq!(
            body,
            &json!({"tag": "t", "type": "added", "key": "team-a/hello"})
        );
    }
    assert_eq!(allowed.connections(), 3);
    assert_eq!(other.connections(), 0, "nothing refused ever connected");

    // Counters, per plugin version.
    let stats = |tenant: &str, name: &str| {
        let s = env.host.supervisor(&id(tenant, name)).expect("loaded");
        let o = s.outbound();
        (
            o.requests.load(Ordering::Relaxed),
            o.failures.load(Ordering::Relaxed),
            o.denied.load(Ordering::Relaxed),
            o.bytes_sent.load(Ordering::Relaxed),
            o.bytes_received.load(Ordering::Relaxed),
        )
    };
    let sent = json!({"tag": "t", "type": "added", "key": "team-a/hello"})
        .to_string()
        .len() as u64;
    assert_eq!(stats("", "op"), (1, 0, 0, sent, 2));
    assert_eq!(stats("", "to-other"), (0, 0, 1, 0, 0));
    assert_eq!(stats("team-a", "tenant"), (1, 0, 0, sent, 2));
    let refused = outcome("closed")["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(refused.contains("ConnectionRefused"), "{refused}");
    assert_eq!(stats("", "closed"), (1, 1, 0, 0, 0));

    // The same counters in /metrics.
    let state = AdminState::new(env.factory.clone(), Some(env.host.clone()));
    let admin = AdminServer::start(SocketAddr::from(([127, 0, 0, 1], 0)), state)
        .await
        .expect("admin server starts");
    let (status, _, text) = get(admin.addr(), "/metrics").await;
    assert_eq!(status, 200);
    for line in [
        "informant_plugin_http_requests_total{plugin=\"op\",tenant=\"\"} 1".to_string(),
        "informant_plugin_http_denied_total{plugin=\"to-other\",tenant=\"\"} 1".into(),
        format!(
            "informant_plugin_http_sent_bytes_total{{plugin=\"tenant\",tenant=\"team-a\"}} {sent}"
        ),
        "informant_plugin_http_received_bytes_total{plugin=\"op\",tenant=\"\"} 2".into(),
        "informant_plugin_http_failures_total{plugin=\"op\",tenant=\"\"} 0".into(),
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
}

// Current-thread: the host's log is captured on this thread.
#[tokio::test]
async fn a_receiver_that_never_answers_costs_one_deadline_and_nothing_else() {
    let (host_log, _capture) = HostLog::capture();
    let mut silent = Receiver::start(Answer::Never).await;
    let s = silent.origin();
    let env = PluginEnv::start(HostConfig::default()).await;
    create_namespaces(&env.server, &["ns"]);
    env.install(
        None,
        "stuck",
        "hostile",
        &poster(std::slice::from_ref(&s), "ns", &format!("{s}/"), 300),
    );
    env.install(
        None,
        "echo",
        "hostile",
        "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"ns\"\nlabel-selector = \"app=outbound\"\n[config]\nmode = \"echo\"\ntag = \"e\"\n",
    );
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);

    env.server.create(labelled("ns", "first")).unwrap();
    let failure = host_log
        .wait_for("stuck's missed deadline", |l| {
            l.field("plugin") == "stuck" && l.field("error").contains("deadline")
        })
        .await;
    assert_eq!(failure.field("key"), "ns/first");
    assert_eq!(
        guarded("the request", silent.requests.recv())
            .await
            .unwrap()
            .1["key"],
        "ns/first"
    );
    // The cut-off instance's request is dropped with it: the receiver sees the hang-up.
    let mut hung_up = silent.hung_up.clone();
    guarded("the hang-up", hung_up.wait_for(|n| *n >= 1))
        .await
        .unwrap();

    // The other plugin's events keep flowing, before and after.
    env.server.create(labelled("ns", "second")).unwrap();
    env.logs
        .wait_until("echo's two events", || {
            let keys: Vec<Value> = env
                .logs
                .json_of("echo")
                .iter()
                .map(|v| v["key"].clone())
                .collect();
            keys.contains(&json!("ns/first")) && keys.contains(&json!("ns/second"))
        })
        .await;
    let stuck = env.host.supervisor(&id("", "stuck")).expect("loaded");
    assert!(stuck.failed() >= 1);
    assert!(stuck.outbound().requests.load(Ordering::Relaxed) >= 1);
}
