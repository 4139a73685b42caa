//! Outbound HTTP from plugins through `wasi:http/outgoing-handler`: only to origins in both the
//! manifest's and the tenant's `allowed-outbound-hosts`, refused before any connection
//! otherwise; redirects handed back as they came; a receiver that never answers costs one
//! deadline. Every receiver is a TCP listener on 127.0.0.1 that counts its connections.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use informant_runtime::admin::{AdminServer, AdminState};
use informant_runtime::config;
use informant_runtime::plugin::{HostConfig, PluginId};
use informant_tests::host_log::HostLog;
use informant_tests::http::get;
use informant_tests::plugins::PluginEnv;
use informant_tests::{create_namespaces, guarded};
use serde_json::{Value, json};
use std::sync::atomic::Ordering;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

/// How a receiver answers.
#[derive(Clone, Copy)]
enum Answer {
    /// `200 OK`, or `302` to `location` for a path starting with `/redirect`.
    Ok { location: u16 },
    /// Reads the request and never answers; reports when the client hangs up.
    Never,
}

/// A one-request-per-connection HTTP/1.1 receiver.
struct Receiver {
    port: u16,
    connections: watch::Receiver<usize>,
    requests: mpsc::UnboundedReceiver<(String, Value)>,
    hung_up: watch::Receiver<usize>,
}

impl Receiver {
    async fn start(answer: Answer) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().unwrap().port();
        let (conn_tx, connections) = watch::channel(0usize);
        let (hung_tx, hung_up) = watch::channel(0usize);
        let (req_tx, requests) = mpsc::unbounded_channel();
        let hung_tx = Arc::new(hung_tx);
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                conn_tx.send_modify(|c| *c += 1);
                let (req_tx, hung_tx) = (req_tx.clone(), hung_tx.clone());
                tokio::spawn(serve(socket, answer, req_tx, hung_tx));
            }
        });
        Receiver {
            port,
            connections,
            requests,
            hung_up,
        }
    }

    fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn connections(&self) -> usize {
        *self.connections.borrow()
    }
}

async fn serve(
    mut socket: TcpStream,
    answer: Answer,
    requests: mpsc::UnboundedSender<(String, Value)>,
    hung_up: Arc<watch::Sender<usize>>,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let (head, body_at) = loop {
        let n = socket.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break (String::from_utf8_lossy(&buf[..at]).to_string(), at + 4);
        }
    };
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buf.len() < body_at + length {
        let n = socket.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&buf[body_at..body_at + length]).unwrap_or(Value::Null);
    let request_line = head.lines().next().unwrap_or_default().to_string();
    let _ = requests.send((head.clone(), body));
    match answer {
        Answer::Ok { location } => {
            let response = if request_line.contains(" /redirect") {
                format!(
                    "HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:{location}/\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                )
            } else {
                "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok".to_string()
            };
            let _ = socket.write_all(response.as_bytes()).await;
        }
        Answer::Never => {
            // Wait for the client to give up: a read of 0 bytes (or an error) is its hang-up.
            let _ = socket.read(&mut chunk).await;
            hung_up.send_modify(|c| *c += 1);
        }
    }
}

fn poster(allowed: &[String], namespace: &str, url: &str, deadline_ms: u32) -> String {
    let allowed: Vec<String> = allowed.iter().map(|o| format!("{o:?}")).collect();
    format!(
        "allowed-outbound-hosts = [{}]\n[limits]\ndeadline-ms = {deadline_ms}\n[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"{namespace}\"\nlabel-selector = \"app=outbound\"\n[config]\nmode = \"post\"\ntag = \"t\"\nurl = {url:?}\n",
        allowed.join(", ")
    )
}

fn labelled(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "outbound"}},
        "data": {"k": "v"}})
}

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
