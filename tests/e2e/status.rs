//! What `informant status` and `informant logs` read, over the real pipeline: the embedded API
//! server, real compiled plugins in two tenants and at the top level, the admin server read over
//! loopback HTTP with the client the commands use.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use informant_runtime::admin::client::{AdminClient, LogLine, status_table};
use informant_runtime::admin::{AdminServer, AdminState};
use informant_runtime::plugin::id::PluginId;
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_runtime::tenancy::{Tenancy, TenantPolicy};
use informant_tests::http::get;
use informant_tests::plugins::{PluginEnv, fast_restarts};
use informant_tests::{GUARD, configmap, create_namespaces, guarded};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// The hostile test plugin in `mode`, watching every ConfigMap, with `extra` config lines.
fn hostile(mode: &str, tag: &str, extra: &str) -> String {
    format!(
        "[limits]\ndeadline-ms = 5000\nmemory-mib = 16\n[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[config]\nmode = \"{mode}\"\ntag = \"{tag}\"\n{extra}"
    )
}

/// Top-level plugins and tenants `team-a` and `team-b`, each allowed everything.
fn config() -> HostConfig {
    let tenants = BTreeMap::from(
        ["team-a", "team-b"].map(|t| (t.to_string(), Arc::new(TenantPolicy::operator()))),
    );
    HostConfig {
        restart: fast_restarts(),
        tenancy: Tenancy::new(true, tenants),
        ..Default::default()
    }
}

async fn start_admin(env: &PluginEnv) -> AdminServer {
    let state = AdminState::new(env.factory.clone(), Some(env.host.clone()));
    AdminServer::start(SocketAddr::from(([127, 0, 0, 1], 0)), state)
        .await
        .expect("admin server starts")
}

fn id(tenant: &str, name: &str) -> PluginId {
    PluginId {
        tenant: tenant.into(),
        name: name.into(),
    }
}

/// The messages of a complete `/logs` answer.
async fn messages(client: &AdminClient, tenant: &str, plugin: &str) -> Vec<String> {
    let mut stream = client.logs(tenant, plugin, false, None).await.unwrap();
    let mut out = Vec::new();
    while let Some(line) = stream.next().await.unwrap() {
        match line {
            LogLine::Record { message, .. } => out.push(message),
            LogLine::Dropped { dropped } => panic!("{dropped} lines dropped from a short log"),
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_answer_for_one_plugin_by_exact_tenant_and_name_and_never_another() {
    let env = PluginEnv::start(config()).await;
    create_namespaces(&env.server, &["x"]);
    // Same name in both tenants, and at the top level.
    env.install(None, "p", "hostile", &hostile("echo", "top", ""));
    env.install(Some("team-a"), "p", "hostile", &hostile("echo", "a", ""));
    env.install(Some("team-b"), "p", "hostile", &hostile("echo", "b", ""));
    let admin = start_admin(&env).await;
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    const N: usize = 5;
    for i in 0..N {
        env.server
            .create(configmap("x", &format!("cm{i}"), "v"))
            .unwrap();
    }
    env.logs
        .wait_until("every plugin to log every object", || {
            env.logs.json_of("p").len() == 3 * N
        })
        .await;

    let client = AdminClient::new(&admin.addr().to_string()).unwrap();
    for (tenant, tag) in [("", "top"), ("team-a", "a"), ("team-b", "b")] {
        let lines = messages(&client, tenant, "p").await;
        assert_eq!(lines.len(), N, "{tenant}: {lines:?}");
        assert!(
            lines
                .iter()
                .all(|l| l.contains(&format!("\"tag\":\"{tag}\""))),
            "{tenant}: {lines:?}"
        );
    }

    // Asked by hand, as a hostile client would: nothing reaches another plugin's lines.
    let hostile_queries = [
        "plugin=team-b/p",
        "plugin=../team-b/p&tenant=team-a",
        "plugin=p/../../team-b/p&tenant=team-a",
        "plugin=..%2Fteam-b%2Fp&tenant=team-a",
        "plugin=p&tenant=team-a%2F..%2Fteam-b",
        "plugin=p&tenant=team-a/../team-b",
        "plugin=p&tenant=..",
        "plugin=p&tenant=.",
        "plugin=p&tenant=%2E%2E",
        "plugin=p%3Ftenant%3Dteam-b",
        "plugin=p%00&tenant=team-a",
        "plugin=p&tenant=team-a%00",
        "plugin=p&tenant=team-%EF%BD%82",  // fullwidth b
        "plugin=%EF%BD%90&tenant=team-b",  // fullwidth p
        "plugin=p%E2%80%8B&tenant=team-b", // zero-width space
        "plugin=P&tenant=team-b",
        "plugin=p&tenant=TEAM-B",
        "plugin=p&tenant=team-b%20",
        "plugin=*&tenant=team-b",
        "plugin=&tenant=team-b",
        "plugin=p&tenant=team-z",
        "plugin=p&tenant=team-z%0Aforged",
    ];
    for q in hostile_queries {
        let (status, _, body) = get(admin.addr(), &format!("/logs?{q}")).await;
        assert_eq!(status, 404, "{q}: {body}");
        assert!(body.starts_with("no "), "{q}: {body}");
        assert_eq!(
            body.lines().count(),
            1,
            "one line whatever the names hold: {body}"
        );
        assert!(
            !body.contains("chatter") && !body.contains("\"tag\""),
            "{q}: {body}"
        );
    }
    // Names that are not one plugin: refused outright, never an answer about another.
    for q in [
        "tenant=team-b",
        "plugin=p&tenant=team-a&tenant=team-b",
        "plugin=p&plugin=q&tenant=team-b",
        "plugin=p&tenant=team-b&follow=yes",
        "plugin=p&tenant=team-b&tail=-1",
    ] {
        let (status, _, body) = get(admin.addr(), &format!("/logs?{q}")).await;
        assert_eq!(status, 400, "{q}: {body}");
        assert!(!body.contains("\"tag\""), "{q}: {body}");
    }
    // Paths around the route: not found, not someone's logs.
    for path in [
        "/logs/../logs?plugin=p&tenant=team-b",
        "/logs/team-b/p",
        "/plugins/team-b/p/logs",
        "/logs%3Fplugin=p&tenant=team-b",
    ] {
        let (status, _, body) = get(admin.addr(), path).await;
        assert!(
            status == 404 || (status == 200 && !body.contains("\"tag\":\"a\"")),
            "{path}: {status} {body}"
        );
        assert!(
            !body.contains("\"tag\":\"b\"") || path.starts_with("/logs/.."),
            "{path}: {body}"
        );
    }

    // The client says which plugin was not found, on one line.
    let err = client
        .logs("team-z", "p", true, None)
        .await
        .err()
        .expect("an unknown tenant is an error");
    let text = err.to_string();
    assert!(text.contains("404") && text.contains("team-z"), "{text}");
    admin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_gets_new_lines_and_stalled_followers_slow_no_plugin() {
    let env = PluginEnv::start(config()).await;
    create_namespaces(&env.server, &["x"]);
    env.install(
        Some("team-a"),
        "steady",
        "hostile",
        &hostile("echo", "a", ""),
    );
    // 20 lines of 4 KiB per event: 200 objects log 16 MiB, far over a journal's 1 MiB.
    env.install(
        Some("team-b"),
        "chatty",
        "hostile",
        &hostile("chatter", "b", "lines = 20\nline-bytes = 4096\n"),
    );
    let admin = start_admin(&env).await;
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let client = AdminClient::new(&admin.addr().to_string()).unwrap();

    // A follower that reads, on team-a's plugin.
    let mut follow = client.logs("team-a", "steady", true, None).await.unwrap();
    // 100 followers that never read a byte, on both plugins.
    let mut stalled = Vec::new();
    for i in 0..100 {
        let (tenant, plugin) = if i % 2 == 0 {
            ("team-b", "chatty")
        } else {
            ("team-a", "steady")
        };
        let mut s = tokio::net::TcpStream::connect(admin.addr()).await.unwrap();
        let req = format!(
            "GET /logs?tenant={tenant}&plugin={plugin}&follow=1 HTTP/1.1\r\nHost: x\r\n\r\n"
        );
        s.write_all(req.as_bytes()).await.unwrap();
        stalled.push(s);
    }

    const N: usize = 200;
    for i in 0..N {
        env.server
            .create(configmap("x", &format!("cm{i}"), "v"))
            .unwrap();
    }
    // Every event reaches both plugins, the flood and the stalled readers notwithstanding.
    env.logs
        .wait_until("both plugins to handle every object", || {
            env.logs.keys_of("steady", "a").len() == N && env.logs.keys_of("chatty", "b").len() == N
        })
        .await;
    // The reading follower saw team-a's lines, in order, and nothing of team-b's.
    let mut seen = Vec::new();
    while seen.len() < N {
        let line = guarded("the follower's next line", follow.next())
            .await
            .unwrap();
        match line.expect("the follow stays open") {
            LogLine::Record { message, seq, .. } => {
                assert!(message.contains("\"tag\":\"a\""), "{message}");
                assert_eq!(
                    seq as usize,
                    seen.len(),
                    "no line lost by a reader keeping up"
                );
                seen.push(message);
            }
            LogLine::Dropped { dropped } => panic!("a follower keeping up lost {dropped} lines"),
        }
    }

    // The flood's log ring stayed bounded and said what it dropped.
    let ring = env.host.log_ring(&id("team-b", "chatty")).unwrap();
    let kept = ring.snapshot(None);
    let bytes: usize = kept.records.iter().map(|r| r.message.len()).sum();
    assert!(bytes <= 1 << 20, "{bytes} bytes kept");
    assert!(kept.dropped > 0 && kept.dropped as usize + kept.records.len() == N * 21);

    // A stalled follower, read at last, is told how many lines it missed, then gets the rest.
    if stalled.is_empty() {
        return;
    }
    if stalled.is_empty() {
        return;
    }
    if stalled.is_empty() {
        return;
    }
    let mut slow = stalled.swap_remove(0);
    guarded(
        "the stalled follower's drop count and newest lines",
        async {
            // Lines as they come (HTTP chunk framing lines are not JSON, and skipped).
            let mut lines = tokio::io::BufReader::new(&mut slow).lines();
            // Inside the record's `message`, JSON-escaped.
            let last = format!("\\\"key\\\":\\\"x/cm{}\\\"", N - 1);
            let mut dropped = None;
            while let Some(line) = lines.next_line().await.unwrap() {
                if line.starts_with("{\"dropped\":") {
                    dropped = Some(line);
                } else if line.contains(&last) {
                    // The newest lines come after the count.
                    assert!(dropped.is_some(), "no drop count before the newest lines");
                    return;
                }
            }
            panic!("the follow ended");
        },
    )
    .await;
    drop(stalled);
    drop(follow);
    let shut = tokio::time::timeout(GUARD, admin.shutdown()).await;
    assert!(shut.is_ok(), "shutdown waits for no follower");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_rows_show_each_plugins_figures() {
    let env = PluginEnv::start(config()).await;
    create_namespaces(&env.server, &["x"]);
    env.install(None, "echo", "hostile", &hostile("echo", "e", ""));
    env.install(
        Some("team-a"),
        "flaky",
        "hostile",
        &hostile("flaky", "f", ""),
    );
    let admin = start_admin(&env).await;
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    for i in 0..3 {
        env.server
            .create(configmap("x", &format!("cm{i}"), "v"))
            .unwrap();
    }
    let client = AdminClient::new(&admin.addr().to_string()).unwrap();
    let deadline = tokio::time::Instant::now() + GUARD;
    let rows = loop {
        let rows = client.status().await.unwrap();
        let done = rows.iter().any(|r| r.name == "echo" && r.handled == 3)
            && rows
                .iter()
                .any(|r| r.name == "flaky" && r.failed == 1 && r.handled == 2);
        if done {
            break rows;
        }
        assert!(tokio::time::Instant::now() < deadline, "{rows:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let table = status_table(&rows, false);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    assert!(lines[0].starts_with("TENANT  PLUGIN  STATE"), "{table}");
    let cols = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    let echo = cols(lines[1]);
    assert_eq!(
        &echo[..7],
        ["-", "echo", "running", "3", "0", "0", "0"],
        "{table}"
    );
    // Its third event trapped: backing off until an event needs a new instance.
    let flaky = cols(lines[2]);
    assert_eq!(
        &flaky[..7],
        ["team-a", "flaky", "backing-off", "2", "1", "0", "0"],
        "{table}"
    );
    assert!(lines[2].contains("handle of x/cm2: trapped"), "{table}");
    admin.shutdown().await;
}
