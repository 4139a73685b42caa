//! `informant status` and `informant logs -f` as a user runs them: the real binary against a
//! running host (the embedded API server, real compiled plugins, the admin server) started here.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::Arc;

use informant_runtime::admin::{AdminServer, AdminState};
use informant_runtime::plugin::HostConfig;
use informant_runtime::tenancy::{Tenancy, TenantPolicy};
use informant_tests::plugins::{PluginEnv, fast_restarts};
use informant_tests::{configmap, create_namespaces, guarded};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

fn echo(tag: &str) -> String {
    format!(
        "[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n[config]\nmode = \"echo\"\ntag = \"{tag}\"\n"
    )
}

fn informant(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_informant"));
    c.args(args)
        .env("RUST_LOG", "warn")
        .env("NO_COLOR", "1")
        .env_remove("INFORMANT_ADMIN")
        .kill_on_drop(true);
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_prints_a_row_per_plugin_and_logs_follows_one_plugin() {
    let tenants = BTreeMap::from(
        ["team-a", "team-b"].map(|t| (t.to_string(), Arc::new(TenantPolicy::operator()))),
    );
    let env = PluginEnv::start(HostConfig {
        restart: fast_restarts(),
        tenancy: Tenancy::new(true, tenants),
        ..Default::default()
    })
    .await;
    create_namespaces(&env.server, &["x"]);
    env.install(None, "top", "hostile", &echo("top"));
    env.install(Some("team-a"), "p", "hostile", &echo("a"));
    env.install(Some("team-b"), "p", "hostile", &echo("b"));
    let state = AdminState::new(env.factory.clone(), Some(env.host.clone()));
    let admin = AdminServer::start(SocketAddr::from(([127, 0, 0, 1], 0)), state)
        .await
        .unwrap();
    let addr = admin.addr().to_string();
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);

    // Following team-a's `p` before anything happens.
    let mut follow = informant(&["logs", "p", "--tenant", "team-a", "-f", "--admin", &addr])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();

    const N: usize = 4;
    for i in 0..N {
        env.server
            .create(configmap("x", &format!("cm{i}"), "v"))
            .unwrap();
    }
    for i in 0..N {
        let line = guarded("a line from `informant logs -f`", lines.next_line())
            .await
            .unwrap()
            .expect("logs -f keeps printing");
        // `TIME LEVEL MESSAGE`, team-a's plugin's lines only.
        let mut parts = line.splitn(3, ' ');
        let (time, level, message) = (parts.next().unwrap(), parts.next().unwrap(), parts.next());
        assert!(time.ends_with('Z') && time.contains('T'), "{line}");
        assert_eq!(level, "info", "{line}");
        let message = message.unwrap().trim_start();
        assert!(message.contains("\"tag\":\"a\""), "{line}");
        assert!(message.contains(&format!("\"key\":\"x/cm{i}\"")), "{line}");
    }
    env.logs
        .wait_until("every plugin to log every object", || {
            env.logs.json_of("p").len() == 2 * N && env.logs.json_of("top").len() == N
        })
        .await;

    let out = informant(&["status", "--admin", &addr])
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains('\x1b'), "no colour into a pipe: {text}");
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        [
            "TENANT", "PLUGIN", "STATE", "HANDLED", "FAILED", "RETRIED", "BACKLOG", "SINCE",
            "LAST", "ERROR"
        ],
        "{text}"
    );
    let expected = [["-", "top"], ["team-a", "p"], ["team-b", "p"]];
    assert_eq!(rows.len(), 1 + expected.len(), "{text}");
    for (row, [tenant, name]) in rows[1..].iter().zip(expected) {
        assert_eq!(
            &row[..7],
            [tenant, name, "running", "4", "0", "0", "0"],
            "{text}"
        );
    }

    let out = informant(&["status", "--admin", &addr, "--output", "json"])
        .output()
        .await
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["plugins"][1]["tenant"], "team-a", "{json}");
    assert_eq!(json["plugins"][1]["handled"], 4, "{json}");

    // No such tenant, no such plugin: a clear error, nothing printed on stdout.
    for args in [
        ["logs", "p", "--tenant", "team-z"],
        ["logs", "team-b/p", "--tenant", "team-a"],
    ] {
        let out = informant(&args)
            .arg("--admin")
            .arg(&addr)
            .output()
            .await
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(
            err.contains("404") && err.contains("no plugin"),
            "{args:?}: {err}"
        );
    }
    let out = informant(&["status", "--admin", "127.0.0.1:1"])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot connect"));

    // The host stops: the follower ends by itself.
    admin.shutdown().await;
    let status = guarded("logs -f to end with the host", follow.wait())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");
}
