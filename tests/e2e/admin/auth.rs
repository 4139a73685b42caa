//! The admin server as someone who can reach the pod meets it: `informant run`'s runtime with
//! `--admin-auth=kubernetes` against the embedded API server, its tokens checked with real
//! TokenReviews and its tenants authorized with real SubjectAccessReviews, the host itself
//! holding only what the chart grants (reads plus `system:auth-delegator`). Hostile callers
//! first: no token, a garbage one, an expired one, another tenant's; then the right one.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use informant_devserver::audit::AllowRule;
use informant_devserver::{DevServer, DevServerConfig};
use informant_runtime::admin::{AdminAuth, AdminServer, AdminState, AuthOptions};
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_runtime::runtime::{Runtime, RuntimeOptions, StateOptions};
use informant_runtime::tenancy::{Tenancy, TenantPolicy};
use informant_runtime::tls::ServerTls;
use informant_tests::http::free_addr;
use informant_tests::plugins::{fast_restarts, wasm};
use informant_tests::rbac::{HOST, reader_rules};
use informant_tests::{GUARD, create_namespaces, guarded};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls;

/// A tenant-a reader, a tenant-a writer, a tenant-b reader, the operator, a Prometheus
/// scraper, and an authenticated identity granted nothing.
const ALICE: &str = "alice";
const ALICE_WRITER: &str = "alice-writer";
const BOB: &str = "bob";
const OPS: &str = "ops";
const PROM: &str = "system:serviceaccount:monitoring:prometheus";
const NOBODY: &str = "nobody";

fn tenants(verbs: &[&str], names: &[&str]) -> AllowRule {
    AllowRule::new(verbs, "tenants.informant.dev").named(names)
}

/// The hostile plugin in `retry` mode on `namespace`'s ConfigMaps: an object labelled
/// `then-fail=WHY` fails with WHY and is kept as a dead letter; every delivery is logged.
fn manifest(namespace: &str, tag: &str) -> String {
    format!(
        "[limits]\ndeadline-ms = 2000\n[retry]\nmax-attempts = 1\ninitial-backoff-ms = 10\nmax-backoff-ms = 10\ndead-letter = \"failed\"\n[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespaces = [\"{namespace}\"]\n[config]\nmode = \"retry\"\ntag = \"{tag}\"\n"
    )
}

fn install(plugins: &Path, tenant: Option<&str>, name: &str, manifest: &str) {
    let dir = match tenant {
        Some(t) => plugins.join(t),
        None => plugins.to_path_buf(),
    };
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(wasm("hostile"), dir.join(format!("{name}.wasm"))).unwrap();
    std::fs::write(dir.join(format!("{name}.toml")), manifest).unwrap();
}

/// Short caches, so that a revoked token is refused within the test and a paused API server
/// is noticed quickly.
fn auth_options() -> AuthOptions {
    AuthOptions {
        authenticated_ttl: Duration::from_millis(300),
        unauthenticated_ttl: Duration::from_millis(100),
        allowed_ttl: Duration::from_millis(300),
        denied_ttl: Duration::from_millis(100),
        review_timeout: Duration::from_millis(800),
        ..AuthOptions::default()
    }
}

/// The runtime with tenants `team-a` (plugin `pa` on namespace `a`), `team-b` (`pb` on `b`)
/// and a top-level plugin `op` (on `op`), dead letters kept, the admin server authenticating
/// through the API server and the probes on their own listener.
struct Secured {
    server: DevServer,
    runtime: Option<Runtime>,
    admin: SocketAddr,
    probes: SocketAddr,
    _plugins: tempfile::TempDir,
    _state: tempfile::TempDir,
}

impl Secured {
    async fn start(host_rules: Vec<AllowRule>, extra: impl FnOnce(&Path)) -> Secured {
        informant_tests::init_tracing();
        let server = DevServer::start(DevServerConfig::default()).await.unwrap();
        create_namespaces(&server, &["a", "b", "op"]);
        server.restrict(HOST, host_rules);
        server.restrict(ALICE, vec![tenants(&["get"], &["team-a"])]);
        server.restrict(ALICE_WRITER, vec![tenants(&["get", "update"], &["team-a"])]);
        server.restrict(BOB, vec![tenants(&["get"], &["team-b"])]);
        server.restrict(
            OPS,
            vec![AllowRule::new(&["get", "update"], "tenants.informant.dev")],
        );
        server.restrict(PROM, vec![AllowRule::paths(&["get"], &["/metrics"])]);
        server.restrict(NOBODY, vec![]);
        let plugins = tempfile::tempdir().unwrap();
        install(plugins.path(), Some("team-a"), "pa", &manifest("a", "pa"));
        install(plugins.path(), Some("team-b"), "pb", &manifest("b", "pb"));
        install(plugins.path(), None, "op", &manifest("op", "op"));
        extra(plugins.path());
        let state = tempfile::tempdir().unwrap();
        let policies =
            ["team-a", "team-b"].map(|t| (t.to_string(), Arc::new(TenantPolicy::operator())));
        let (admin, probes) = (free_addr(), free_addr());
        let runtime = guarded(
            "the runtime to start",
            Runtime::start(
                server.client_as(HOST),
                RuntimeOptions {
                    plugins: Some(plugins.path().to_path_buf()),
                    admin: Some(admin),
                    admin_auth: AdminAuth::Kubernetes(auth_options()),
                    health: Some(probes),
                    config: HostConfig {
                        restart: fast_restarts(),
                        tenancy: Tenancy::new(true, BTreeMap::from(policies)),
                        ..Default::default()
                    },
                    state: Some(StateOptions {
                        dir: state.path().to_path_buf(),
                        cluster: server.url(),
                        identity: None,
                        server_starts_empty: false,
                    }),
                    ..Default::default()
                },
            ),
        )
        .await
        .expect("runtime starts");
        Secured {
            server,
            runtime: Some(runtime),
            admin,
            probes,
            _plugins: plugins,
            _state: state,
        }
    }

    fn token(&self, user: &str) -> String {
        self.server.issue_token(user, &[], None)
    }

    /// A failing ConfigMap for each plugin (`n` each), and waits until the operator sees every
    /// letter.
    async fn fail(&self, n: usize) -> Vec<Value> {
        for (ns, secret) in [("a", "secret-a"), ("b", "secret-b"), ("op", "secret-op")] {
            for i in 0..n {
                self.server
                    .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": format!("cm-{ns}-{i}"), "namespace": ns,
                            "labels": {"then-fail": secret}}}))
                    .unwrap();
            }
        }
        let ops = self.token(OPS);
        let want = 3 * n;
        let deadline = tokio::time::Instant::now() + GUARD;
        loop {
            let all = letters(self.admin, &ops, "").await;
            if all.len() == want {
                return all;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{want} letters never appeared: {all:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn stop(mut self) {
        if let Some(r) = self.runtime.take() {
            r.stop().await;
        }
        self.server.shutdown().await;
    }
}

/// One answer: its status, headers (lowercased names) and body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }
}

/// Reads a whole HTTP/1.1 answer from `io` (the request asked for `Connection: close`).
async fn read_answer(mut io: impl AsyncRead + Unpin) -> Answer {
    let mut raw = Vec::new();
    io.read_to_end(&mut raw).await.expect("read the answer");
    let text = String::from_utf8(raw).expect("utf-8 answer");
    let (head, body) = text.split_once("\r\n\r\n").expect("a header block");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        let mut out = String::new();
        let mut rest = body;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let size = usize::from_str_radix(size.trim(), 16).expect("a chunk size");
            if size == 0 {
                break;
            }
            out.push_str(&after[..size]);
            rest = &after[size + 2..];
        }
        out
    } else {
        body.to_string()
    };
    Answer {
        status,
        headers,
        body,
    }
}

/// `METHOD path` with `headers` (and `body`), over `io`.
async fn exchange(
    mut io: impl AsyncRead + AsyncWrite + Unpin,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    io.write_all(req.as_bytes()).await.expect("send");
    read_answer(io).await
}

/// `METHOD path` as the holder of `token` (none: no `Authorization` at all).
async fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> Answer {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth
        .as_deref()
        .map(|a| ("Authorization", a))
        .into_iter()
        .collect();
    guarded(&format!("{method} {path}"), async {
        let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        exchange(stream, method, path, &headers, body).await
    })
    .await
}

async fn get_as(addr: SocketAddr, path: &str, token: &str) -> Answer {
    call(addr, "GET", path, Some(token), "").await
}

/// Every dead letter `token` may see (following the pages), `query` added to each request.
async fn letters(addr: SocketAddr, token: &str, query: &str) -> Vec<Value> {
    let mut all = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let mut path = format!("/dead-letters?limit=2{query}");
        if let Some(t) = &next {
            path.push_str(&format!("&continue={t}"));
        }
        let a = get_as(addr, &path, token).await;
        assert_eq!(a.status, 200, "{path}: {}", a.body);
        let page = a.json();
        all.extend(page["dead_letters"].as_array().unwrap().iter().cloned());
        match page["continue"].as_str() {
            Some(t) => next = Some(t.to_string()),
            None => return all,
        }
    }
}

fn plugin_names(a: &Answer) -> Vec<String> {
    assert_eq!(a.status, 200, "{}", a.body);
    a.json()["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| match p["tenant"].as_str().unwrap() {
            "" => p["name"].as_str().unwrap().to_string(),
            t => format!("{t}/{}", p["name"].as_str().unwrap()),
        })
        .collect()
}

/// What `/logs` answers for a plugin that does not exist, or that the caller may not see.
fn missing_log(tenant: &str, name: &str) -> String {
    format!("no plugin `{name}` of tenant `{tenant}` is loaded or waiting (see /plugins)\n")
}

/// The endpoints, each as (method, path, body).
const ENDPOINTS: &[(&str, &str, &str)] = &[
    ("GET", "/plugins", ""),
    ("GET", "/readyz", ""),
    ("GET", "/metrics", ""),
    ("GET", "/logs?plugin=pa&tenant=team-a", ""),
    ("GET", "/dead-letters", ""),
    (
        "POST",
        "/dead-letters/retry",
        r#"{"plugin": "team-a/pa", "all": true}"#,
    ),
    (
        "POST",
        "/dead-letters/drop",
        r#"{"plugin": "team-a/pa", "all": true}"#,
    ),
    ("POST", "/sources/poll", r#"{"plugin": "team-a/pa"}"#),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_refuses_strangers_and_shows_each_tenant_only_its_own() {
    let mut host_rules = reader_rules();
    host_rules.extend(AllowRule::auth_delegator());
    let s = Secured::start(host_rules, |_| {}).await;
    let all = s.fail(2).await;
    assert_eq!(all.len(), 6);

    // Strangers: no token, a malformed header, a token nobody issued, an expired one.
    let expired = s.server.issue_token(ALICE, &[], Some(Duration::ZERO));
    for (method, path, body) in ENDPOINTS {
        let none = call(s.admin, method, path, None, body).await;
        assert_eq!(none.status, 401, "{method} {path}: {}", none.body);
        assert_eq!(
            none.header("www-authenticate"),
            Some("Bearer realm=\"informant\"")
        );
        assert_eq!(none.body.lines().count(), 1, "{}", none.body);
        for garbage in ["garbage", "informant-0000", &format!("{expired}x")] {
            let a = call(s.admin, method, path, Some(garbage), body).await;
            assert_eq!(a.status, 401, "{method} {path} {garbage}: {}", a.body);
        }
        let a = call(s.admin, method, path, Some(&expired), body).await;
        assert_eq!(a.status, 401, "expired: {method} {path}: {}", a.body);
        assert!(a.body.contains("TokenReview"), "{}", a.body);
        for header in ["Basic YWxpY2U6cHc=", "Bearer", "Bearer a b", "bearer"] {
            let a = guarded("a malformed Authorization", async {
                let stream = tokio::net::TcpStream::connect(s.admin).await.unwrap();
                exchange(stream, method, path, &[("Authorization", header)], body).await
            })
            .await;
            assert_eq!(a.status, 401, "{header}: {}", a.body);
        }
        // An authenticated identity allowed nothing: 403, one line, whatever it asks.
        let a = call(s.admin, method, path, Some(&s.token(NOBODY)), body).await;
        assert_eq!(a.status, 403, "{method} {path}: {}", a.body);
        assert_eq!(a.body.lines().count(), 1, "{}", a.body);
        assert!(a.body.contains("tenants.informant.dev"), "{}", a.body);
    }
    // Nothing above changed anything.
    assert_eq!(letters(s.admin, &s.token(OPS), "").await, all);
    // /healthz is the one route that asks nothing.
    let health = call(s.admin, "GET", "/healthz", None, "").await;
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));

    // Tenant A's reader sees team-a's plugin, lines and letters, and nothing of B's or the
    // operator's.
    let alice = s.token(ALICE);
    let bob = s.token(BOB);
    let plugins = get_as(s.admin, "/plugins", &alice).await;
    assert_eq!(plugin_names(&plugins), ["team-a/pa"]);
    assert_eq!(
        plugin_names(&get_as(s.admin, "/plugins", &bob).await),
        ["team-b/pb"]
    );
    let logs = get_as(s.admin, "/logs?plugin=pa&tenant=team-a", &alice).await;
    assert_eq!(logs.status, 200, "{}", logs.body);
    assert!(
        logs.body.contains("\\\"tag\\\":\\\"pa\\\""),
        "{}",
        logs.body
    );
    let mine = letters(s.admin, &alice, "").await;
    assert_eq!(mine.len(), 2);
    assert!(mine.iter().all(|l| l["plugin"] == "team-a/pa"), "{mine:?}");
    let readyz = get_as(s.admin, "/readyz", &alice).await;
    assert_eq!(readyz.status, 200, "{}", readyz.body);
    for a in [&plugins, &logs, &readyz] {
        for theirs in ["team-b", "pb", "secret-b", "secret-op", "\"op\""] {
            assert!(!a.body.contains(theirs), "{theirs} in {}", a.body);
        }
    }
    let mine_text = serde_json::to_string(&mine).unwrap();
    assert!(!mine_text.contains("secret-b") && !mine_text.contains("secret-op"));

    // Another tenant's plugin is exactly a missing plugin, however it is spelled.
    for (tenant, name) in [
        ("team-b", "pb"),
        ("team-b", "nope"),
        ("", "op"),
        ("team-a/../team-b", "pb"),
        ("team-a", "../team-b/pb"),
        ("team-b ", "pb"),
        ("t\u{0435}am-b", "pb"),
        ("TEAM-B", "pb"),
        ("..", "pb"),
    ] {
        let query: String = form_urlencoded_pairs(&[("plugin", name), ("tenant", tenant)]);
        let a = get_as(s.admin, &format!("/logs?{query}"), &alice).await;
        assert_eq!(a.status, 404, "{tenant}/{name}: {}", a.body);
        let expected = if tenant.is_empty() {
            format!("no top-level plugin `{name}` is loaded or waiting (see /plugins)\n")
        } else {
            missing_log(tenant, name)
        };
        assert_eq!(a.body, expected, "{tenant}/{name}");
    }
    for raw in [
        "/logs?plugin=pb&tenant=team-b%20",
        "/logs?plugin=pb&tenant=team-a%2F..%2Fteam-b",
        "/logs?plugin=..%2Fteam-b%2Fpb&tenant=team-a",
        "/dead-letters?plugin=team-b%2Fpb",
        "/dead-letters?plugin=team-a%2F..%2Fteam-b%2Fpb",
        "/dead-letters?plugin=team-b/pb%20",
        "/dead-letters?plugin=t%D0%B5am-b/pb",
        "/dead-letters?plugin=op",
    ] {
        let a = get_as(s.admin, raw, &alice).await;
        assert_eq!(a.status, 404, "{raw}: {}", a.body);
        assert!(!a.body.contains("secret"), "{}", a.body);
    }
    // A letters query naming B's plugin answers as for a plugin that never existed.
    let theirs = get_as(s.admin, "/dead-letters?plugin=team-b/pb", &alice).await;
    let never = get_as(s.admin, "/dead-letters?plugin=team-b/never", &alice).await;
    assert_eq!(
        theirs.body.replace("team-b/pb", "X"),
        never.body.replace("team-b/never", "X")
    );

    // Retry and drop need `update` on the tenant: refused to readers and to other tenants,
    // before anything is looked up, and nothing is dropped.
    let writer = s.token(ALICE_WRITER);
    for (token, plugin) in [
        (&alice, "team-a/pa"),
        (&bob, "team-a/pa"),
        (&bob, "team-b/pb"),
        (&writer, "team-b/pb"),
        (&writer, "team-b/nothing"),
        (&writer, "op"),
    ] {
        for action in ["retry", "drop"] {
            let body = json!({"plugin": plugin, "all": true}).to_string();
            let a = call(
                s.admin,
                "POST",
                &format!("/dead-letters/{action}"),
                Some(token),
                &body,
            )
            .await;
            assert_eq!(a.status, 403, "{action} {plugin}: {}", a.body);
            assert_eq!(a.body.lines().count(), 1);
        }
        // Having a plugin's source checked needs the same.
        let body = json!({ "plugin": plugin }).to_string();
        let a = call(s.admin, "POST", "/sources/poll", Some(token), &body).await;
        assert_eq!(a.status, 403, "poll {plugin}: {}", a.body);
        assert!(a.body.contains("plugin sources"), "{}", a.body);
    }
    // Past the grant, a host that follows no source says so.
    let a = call(
        s.admin,
        "POST",
        "/sources/poll",
        Some(&writer),
        &json!({"plugin": "team-a/pa"}).to_string(),
    )
    .await;
    assert_eq!(a.status, 503, "{}", a.body);
    // An odd spelling inside the writer's own tenant names no plugin there.
    let sneaky = json!({"plugin": "team-a/../team-b/pb", "all": true}).to_string();
    let a = call(
        s.admin,
        "POST",
        "/dead-letters/drop",
        Some(&writer),
        &sneaky,
    )
    .await;
    assert_eq!(a.status, 404, "{}", a.body);
    assert_eq!(
        letters(s.admin, &s.token(OPS), "").await,
        all,
        "nothing dropped"
    );
    // The writer drops its own tenant's letter.
    let id = mine[0]["id"].as_u64().unwrap();
    let body = json!({"plugin": "team-a/pa", "ids": [id]}).to_string();
    let a = call(s.admin, "POST", "/dead-letters/drop", Some(&writer), &body).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.json()["dropped"], json!([id]));
    assert_eq!(letters(s.admin, &alice, "").await.len(), 1);

    // The operator sees every plugin, every letter and the whole scrape; the scraper's
    // identity the scrape and nothing else.
    let ops = s.token(OPS);
    let mut every = plugin_names(&get_as(s.admin, "/plugins", &ops).await);
    every.sort();
    assert_eq!(every, ["op", "team-a/pa", "team-b/pb"]);
    assert_eq!(letters(s.admin, &ops, "").await.len(), 5);
    let scrape = get_as(s.admin, "/metrics", &ops).await;
    assert_eq!(scrape.status, 200);
    assert!(
        scrape.body.contains("informant_informer_synced"),
        "{}",
        scrape.body
    );
    let prom = s.token(PROM);
    assert_eq!(get_as(s.admin, "/metrics", &prom).await.status, 200);
    for (method, path, body) in ENDPOINTS.iter().filter(|(_, p, _)| *p != "/metrics") {
        let a = call(s.admin, method, path, Some(&prom), body).await;
        assert_eq!(a.status, 403, "{path}: {}", a.body);
    }
    // A tenant's scrape is cut to its own plugins' series: no other tenant's, no operator
    // plugin's, none of the host's.
    let mine = get_as(s.admin, "/metrics", &alice).await;
    assert_eq!(mine.status, 200, "{}", mine.body);
    assert!(mine.body.contains("tenant=\"team-a\""), "{}", mine.body);
    for hidden in ["team-b", "plugin=\"op\"", "informant_informer_synced"] {
        assert!(
            !mine.body.contains(hidden),
            "alice's scrape has {hidden}: {}",
            mine.body
        );
    }
    s.stop().await;
}

/// `k=v&...` with each value percent-encoded.
fn form_urlencoded_pairs(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| {
            let enc: String = v
                .bytes()
                .map(|b| match b {
                    b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                        (b as char).to_string()
                    }
                    _ => format!("%{b:02X}"),
                })
                .collect();
            format!("{k}={enc}")
        })
        .collect::<Vec<_>>()
        .join("&")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_page_through_every_letter_exactly_once() {
    let mut host_rules = reader_rules();
    host_rules.extend(AllowRule::auth_delegator());
    let s = Secured::start(host_rules, |_| {}).await;
    let all = s.fail(5).await;
    let ops = s.token(OPS);
    let key = |l: &Value| {
        (
            l["plugin"].as_str().unwrap().to_string(),
            l["id"].as_u64().unwrap(),
        )
    };
    let mut keys: Vec<_> = all.iter().map(key).collect();
    let listed = keys.clone();
    keys.sort();
    keys.dedup();
    assert_eq!(keys, listed, "two at a time, in key order, none twice");
    assert_eq!(keys.len(), 15);

    // Letters dropped between pages: the rest are each listed once.
    let first = get_as(s.admin, "/dead-letters?limit=4", &ops).await.json();
    let page: Vec<_> = first["dead_letters"]
        .as_array()
        .unwrap()
        .iter()
        .map(key)
        .collect();
    assert_eq!(page, keys[..4]);
    let drop = |plugin: &str, id: u64| json!({"plugin": plugin, "ids": [id]}).to_string();
    for (plugin, id) in [&keys[1], &keys[9]] {
        let a = call(
            s.admin,
            "POST",
            "/dead-letters/drop",
            Some(&ops),
            &drop(plugin, *id),
        )
        .await;
        assert_eq!(a.status, 200, "{}", a.body);
    }
    let token = first["continue"].as_str().unwrap();
    let rest = get_as(
        s.admin,
        &format!("/dead-letters?limit=100&continue={token}"),
        &ops,
    )
    .await
    .json();
    assert!(rest.get("continue").is_none(), "the last page: {rest}");
    let rest: Vec<_> = rest["dead_letters"]
        .as_array()
        .unwrap()
        .iter()
        .map(key)
        .collect();
    let expected: Vec<_> = keys[4..]
        .iter()
        .filter(|k| **k != keys[9])
        .cloned()
        .collect();
    assert_eq!(rest, expected);

    // A tenant pages through its own letters only; its tokens never reach further.
    let alice = s.token(ALICE);
    let mine = letters(s.admin, &alice, "").await;
    let expected: Vec<_> = keys
        .iter()
        .filter(|(p, id)| p == "team-a/pa" && (p, *id) != (&keys[9].0, keys[9].1))
        .cloned()
        .collect();
    assert_eq!(mine.iter().map(key).collect::<Vec<_>>(), expected);
    let theirs = get_as(s.admin, "/dead-letters?limit=1", &s.token(BOB))
        .await
        .json();
    let bob_token = theirs["continue"].as_str().unwrap();
    let a = get_as(
        s.admin,
        &format!("/dead-letters?continue={bob_token}"),
        &alice,
    )
    .await;
    assert!(
        a.json()["dead_letters"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["plugin"] == "team-a/pa")
    );

    // Bad paging is a bad request, saying what is wrong.
    for bad in [
        "limit=0",
        "limit=-1",
        "limit=x",
        "continue=garbage",
        "continue=W10",
    ] {
        let a = get_as(s.admin, &format!("/dead-letters?{bad}"), &ops).await;
        assert_eq!(a.status, 400, "{bad}: {}", a.body);
        assert_eq!(a.body.lines().count(), 1);
    }
    // A page never exceeds the server's bound, whatever is asked.
    let a = get_as(s.admin, "/dead-letters?limit=999999999", &ops).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.json()["dead_letters"].as_array().unwrap().len(), 13);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_are_refused_when_the_api_server_cannot_vouch_for_them() {
    // A host without `system:auth-delegator`: nobody gets in, and the answer says why.
    let s = Secured::start(reader_rules(), |_| {}).await;
    let a = get_as(s.admin, "/plugins", &s.token(OPS)).await;
    assert_eq!(a.status, 503, "{}", a.body);
    assert!(a.body.contains("system:auth-delegator"), "{}", a.body);
    s.stop().await;

    let mut host_rules = reader_rules();
    host_rules.extend(AllowRule::auth_delegator());
    let s = Secured::start(host_rules, |_| {}).await;
    let ops = s.token(OPS);
    assert_eq!(get_as(s.admin, "/plugins", &ops).await.status, 200);

    // A revoked token stops working once its cached answer expires, not later.
    assert!(s.server.revoke_token(&ops));
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        let a = get_as(s.admin, "/plugins", &ops).await;
        if a.status == 401 {
            break;
        }
        assert_eq!(a.status, 200, "{}", a.body);
        assert!(
            tokio::time::Instant::now() < deadline,
            "the revoked token still works"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // So does a withdrawn grant.
    let alice = s.token(ALICE);
    assert_eq!(get_as(s.admin, "/plugins", &alice).await.status, 200);
    s.server.restrict(ALICE, vec![]);
    let deadline = tokio::time::Instant::now() + GUARD;
    while get_as(s.admin, "/plugins", &alice).await.status != 403 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the withdrawn grant still works"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // An API server that does not answer: a token it never checked is refused, never let in.
    let fresh = s.token(OPS);
    s.server.faults().pause();
    for (method, path, body) in ENDPOINTS {
        let a = call(s.admin, method, path, Some(&fresh), body).await;
        assert_eq!(a.status, 503, "{path}: {}", a.body);
        assert!(a.body.contains("did not answer"), "{}", a.body);
    }
    s.server.faults().resume();
    assert_eq!(get_as(s.admin, "/plugins", &fresh).await.status, 200);
    s.stop().await;

    // An API server that is not there at all.
    let gone = free_addr();
    let config = kube::Config::new(format!("http://{gone}").parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    let factory = Arc::new(informant_runtime::informer::InformerFactory::new(
        client,
        Default::default(),
    ));
    let state = AdminState::new(factory, None);
    let admin = AdminServer::start_with(
        free_addr(),
        state,
        &AdminAuth::Kubernetes(auth_options()),
        &ServerTls::Plain,
    )
    .await
    .unwrap();
    for (method, path, body) in ENDPOINTS {
        let a = call(admin.addr(), method, path, Some("any-token"), body).await;
        assert_eq!(a.status, 503, "{path}: {}", a.body);
        assert!(
            a.body.starts_with("cannot authenticate the caller"),
            "{}",
            a.body
        );
    }
    admin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_ask_for_nothing_and_name_nothing() {
    let mut host_rules = reader_rules();
    host_rules.extend(AllowRule::auth_delegator());
    // A plugin of team-b that cannot load keeps the host unready.
    let s = Secured::start(host_rules, |dir| {
        std::fs::write(dir.join("team-b").join("broken.wasm"), b"not wasm").unwrap();
        std::fs::write(
            dir.join("team-b").join("broken.toml"),
            manifest("b", "broken"),
        )
        .unwrap();
    })
    .await;
    let probe = call(s.probes, "GET", "/readyz", None, "").await;
    assert_eq!(probe.status, 503, "{}", probe.body);
    assert_eq!(
        probe.body,
        "not ready:\n- 1 line not shown here (the authenticated admin server's /readyz has them)\n"
    );
    let health = call(s.probes, "GET", "/healthz", None, "").await;
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
    // The probe listener serves nothing else, with or without a token.
    for path in [
        "/plugins",
        "/metrics",
        "/logs?plugin=pa&tenant=team-a",
        "/dead-letters",
    ] {
        let a = call(s.probes, "GET", path, Some(&s.token(OPS)), "").await;
        assert_eq!(a.status, 404, "{path}: {}", a.body);
    }
    // The operator reads the reason; a tenant reads that there is one it may not see.
    let ops = get_as(s.admin, "/readyz", &s.token(OPS)).await;
    assert_eq!(ops.status, 503);
    assert!(
        ops.body
            .contains("plugin `team-b/broken` is on disk but not loaded"),
        "{}",
        ops.body
    );
    let alice = get_as(s.admin, "/readyz", &s.token(ALICE)).await;
    assert_eq!(alice.status, 503);
    assert!(!alice.body.contains("team-b"), "{}", alice.body);
    assert!(
        alice.body.contains("1 line not shown here"),
        "{}",
        alice.body
    );
    let bob = get_as(s.admin, "/readyz", &s.token(BOB)).await;
    assert!(bob.body.contains("team-b/broken"), "{}", bob.body);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_authentication_is_refused_off_loopback() {
    let server = DevServer::start(DevServerConfig::default()).await.unwrap();
    let factory = Arc::new(informant_runtime::informer::InformerFactory::new(
        server.client(),
        Default::default(),
    ));
    let state = AdminState::new(factory, None);
    for addr in ["0.0.0.0:0", "[::]:0"] {
        let addr: SocketAddr = addr.parse().unwrap();
        let Err(e) = AdminServer::start(addr, state.clone()).await else {
            panic!("served {addr} without authentication");
        };
        assert!(e.to_string().contains("without authentication"), "{e}");
        // Authenticated but plain: every caller's token would cross the network in clear.
        let Err(e) = AdminServer::start_with(
            addr,
            state.clone(),
            &AdminAuth::Kubernetes(AuthOptions::default()),
            &ServerTls::Plain,
        )
        .await
        else {
            panic!("took tokens over plain HTTP on {addr}");
        };
        assert!(e.to_string().contains("plain HTTP"), "{e}");
    }
    // Loopback without authentication is the operator's (dev, tests), as before.
    let local = AdminServer::start("127.0.0.1:0".parse().unwrap(), state.clone())
        .await
        .unwrap();
    assert_eq!(
        call(local.addr(), "GET", "/plugins", None, "").await.status,
        200
    );
    local.shutdown().await;
    server.shutdown().await;
}

/// A client that trusts only `root` (or anything, for a self-signed certificate).
fn tls_client(root: Option<&rustls::pki_types::CertificateDer<'static>>) -> TlsConnector {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let config = match root {
        Some(root) => {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(root.clone()).unwrap();
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth(),
    };
    let mut config = config;
    // Every connection shows the certificate served now, not a session resumed from before.
    config.resumption = rustls::client::Resumption::disabled();
    TlsConnector::from(Arc::new(config))
}

/// Accepts whatever certificate the server shows (its signatures still checked).
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `GET path` as `token` over TLS through `client`; `Err` if the handshake fails.
async fn get_tls(
    client: &TlsConnector,
    addr: SocketAddr,
    path: &str,
    token: &str,
) -> Result<Answer, std::io::Error> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = client.connect(name, stream).await?;
    let auth = format!("Bearer {token}");
    Ok(exchange(tls, "GET", path, &[("Authorization", &auth)], "").await)
}

/// A fresh self-signed pair for `localhost`: (certificate DER, certificate PEM, key PEM).
fn pair() -> (rustls::pki_types::CertificateDer<'static>, String, String) {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    (
        made.cert.der().clone(),
        made.cert.pem(),
        made.signing_key.serialize_pem(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_serves_mounted_certificates_reloads_a_rotation_and_can_sign_its_own() {
    let server = DevServer::start(DevServerConfig::default()).await.unwrap();
    server.restrict(OPS, vec![AllowRule::new(&["get"], "tenants.informant.dev")]);
    let ops = server.issue_token(OPS, &[], None);
    let factory = Arc::new(informant_runtime::informer::InformerFactory::new(
        server.client(),
        Default::default(),
    ));
    let state = AdminState::new(factory, None);
    state.startup_complete();
    let dir = tempfile::tempdir().unwrap();
    let (cert_path, key_path) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));

    // Files that are not a certificate are refused at start, naming the file.
    std::fs::write(&cert_path, "not a certificate").unwrap();
    std::fs::write(&key_path, "not a key").unwrap();
    let auth = AdminAuth::Kubernetes(auth_options());
    let files = ServerTls::Files {
        cert: cert_path.clone(),
        key: key_path.clone(),
        reload_every: Duration::from_millis(50),
    };
    let Err(e) = AdminServer::start_with(free_addr(), state.clone(), &auth, &files).await else {
        panic!("started with garbage certificate files");
    };
    assert!(e.to_string().contains("tls.crt"), "{e}");
    let (der_a, cert_a, key_a) = pair();
    let (_, _, key_b) = pair();
    std::fs::write(&cert_path, &cert_a).unwrap();
    std::fs::write(&key_path, &key_b).unwrap();
    let Err(e) = AdminServer::start_with(free_addr(), state.clone(), &auth, &files).await else {
        panic!("started with a key of another certificate");
    };
    assert!(e.to_string().contains("does not go with"), "{e}");

    std::fs::write(&key_path, &key_a).unwrap();
    let admin = AdminServer::start_with(free_addr(), state.clone(), &auth, &files)
        .await
        .unwrap();
    let trusts_a = tls_client(Some(&der_a));
    let a = get_tls(&trusts_a, admin.addr(), "/plugins", &ops)
        .await
        .unwrap();
    assert_eq!(a.status, 200, "{}", a.body);
    // Plain HTTP to the HTTPS port gets no answer a client could mistake for one.
    let plain = guarded("plain HTTP to the TLS port", async {
        let mut s = tokio::net::TcpStream::connect(admin.addr()).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw).await;
        raw
    })
    .await;
    assert!(
        !plain.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&plain)
    );

    // A rotation is picked up; a half-written one is not, and the last good pair stays.
    let (der_b, cert_b, key_b) = pair();
    std::fs::write(&key_path, &key_b).unwrap();
    std::fs::write(&cert_path, &cert_b).unwrap();
    let trusts_b = tls_client(Some(&der_b));
    let deadline = tokio::time::Instant::now() + GUARD;
    while get_tls(&trusts_b, admin.addr(), "/healthz", &ops)
        .await
        .is_err()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the rotation was never served"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        get_tls(&trusts_a, admin.addr(), "/healthz", &ops)
            .await
            .is_err()
    );
    std::fs::write(&cert_path, "-----BEGIN CERTIFICATE-----\ntruncated").unwrap();
    // Two reload periods pass; the good pair is still served.
    let (_, _, key_c) = pair();
    std::fs::write(&key_path, &key_c).unwrap();
    for _ in 0..5 {
        let a = get_tls(&trusts_b, admin.addr(), "/plugins", &ops)
            .await
            .unwrap();
        assert_eq!(a.status, 200);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    admin.shutdown().await;

    // Self-signed: HTTPS at once, no files needed, authentication as ever.
    let own = AdminServer::start_with(free_addr(), state.clone(), &auth, &ServerTls::SelfSigned)
        .await
        .unwrap();
    let any = tls_client(None);
    let a = get_tls(&any, own.addr(), "/plugins", &ops).await.unwrap();
    assert_eq!(a.status, 200, "{}", a.body);
    let a = get_tls(&any, own.addr(), "/plugins", "garbage")
        .await
        .unwrap();
    assert_eq!(a.status, 401);
    assert!(
        get_tls(&trusts_b, own.addr(), "/plugins", &ops)
            .await
            .is_err(),
        "not b's"
    );
    own.shutdown().await;
    server.shutdown().await;
}
