//! `informant status` and `informant logs -f` as a user runs them: the real binary against a
//! running host (the embedded API server, real compiled plugins, the admin server) started here.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;

use informant_runtime::admin::{AdminServer, AdminState};
use informant_runtime::plugin::load::host_config::HostConfig;
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
    informant_in(Path::new("/nonexistent-informant-home"), args)
}

/// The binary with `home` as its home and runtime directory (no kubeconfig, no dev admin
/// published unless the test puts them there) and none of the caller's admin settings.
fn informant_in(home: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_informant"));
    c.args(args)
        .env("RUST_LOG", "warn")
        .env("NO_COLOR", "1")
        .env("HOME", home)
        .env("XDG_RUNTIME_DIR", home)
        .env_remove("XDG_CACHE_HOME")
        .env_remove("KUBECONFIG")
        .env_remove("INFORMANT_ADMIN")
        .env_remove("INFORMANT_TOKEN")
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
            "TENANT", "PLUGIN", "STATE", "HANDLED", "FAILED", "RETRIED", "BACKLOG", "HOOKS",
            "SINCE", "LAST", "ERROR"
        ],
        "{text}"
    );
    let expected = [["-", "top"], ["team-a", "p"], ["team-b", "p"]];
    assert_eq!(rows.len(), 1 + expected.len(), "{text}");
    for (row, [tenant, name]) in rows[1..].iter().zip(expected) {
        assert_eq!(
            &row[..8],
            [tenant, name, "running", "4", "0", "0", "0", "-"],
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

/// Runs `cmd` to its end: success, stdout, stderr.
async fn run(cmd: &mut Command) -> (bool, String, String) {
    let out = guarded("the command to end", cmd.output()).await.unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_with_no_flags_reads_a_running_dev() {
    let home = tempfile::tempdir().unwrap();
    // Hold dev's default port if it is free, so the fallback is what runs; if something else
    // holds it, dev falls back all the same.
    let held = std::net::TcpListener::bind("127.0.0.1:9091").ok();
    let mut dev = informant_in(home.path(), &["dev", "--no-seed", "--kubeconfig-out"])
        .arg(home.path().join("dev.kubeconfig"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(dev.stderr.take().unwrap()).lines();
    let mut said = Vec::new();
    let addr: SocketAddr = guarded("dev to say where its admin is", async {
        loop {
            let line = stderr.next_line().await.unwrap().expect("dev runs");
            said.push(line.clone());
            if let Some(rest) = line.strip_prefix("admin on http://") {
                break rest
                    .split(':')
                    .take(2)
                    .collect::<Vec<_>>()
                    .join(":")
                    .parse()
                    .unwrap();
            }
        }
    })
    .await;
    if held.is_some() {
        assert_ne!(addr.port(), 9091);
        assert!(
            said.iter().any(|l| l.contains("127.0.0.1:9091 is taken")),
            "{said:?}"
        );
    }

    let (ok, out, err) = run(&mut informant_in(home.path(), &["status", "-v"])).await;
    assert!(ok, "{err}");
    assert!(out.starts_with("TENANT  PLUGIN  STATE"), "{out}");
    assert!(
        err.contains(&format!("admin server: {addr}; sending no token")),
        "{err}"
    );
    let (ok, out, err) = run(&mut informant_in(home.path(), &["logs", "nothing-here"])).await;
    assert!(!ok && out.is_empty(), "{out}");
    assert!(err.contains("404"), "{err}");

    // Stopped, dev takes its address back.
    let file = home.path().join("informant").join("dev-admin");
    assert!(file.exists());
    // SAFETY: kill only signals the child this test started.
    unsafe { libc::kill(dev.id().unwrap() as i32, libc::SIGTERM) };
    let status = guarded("dev to stop", dev.wait()).await.unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!file.exists());
    drop(held);
}

/// A stand-in admin server on loopback: answers `/plugins` with one row, or 401 when asked to
/// and no token comes (or any token but `valid`, when given), and keeps every request's
/// `Authorization` header.
struct FakeAdmin {
    addr: SocketAddr,
    seen: Arc<parking_lot::Mutex<Vec<Option<String>>>>,
}

async fn fake_admin(require_token: bool) -> FakeAdmin {
    fake_admin_accepting(require_token, None).await
}

async fn fake_admin_accepting(require_token: bool, valid: Option<&'static str>) -> FakeAdmin {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let kept = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if conn.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let auth = head.lines().find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("authorization")
                        .then(|| v.trim().to_string())
                });
                let refused = (require_token && auth.is_none())
                    || valid.is_some_and(|v| auth.as_deref() != Some(v));
                kept.lock().push(auth);
                let (status, body) = if refused {
                    ("401 Unauthorized", "Unauthorized\n".to_string())
                } else {
                    (
                        "200 OK",
                        r#"{"plugins":[{"tenant":"","name":"fake","state":"running","handled":1,"failed":0,"backlog":0,"last_error":null}]}"#.to_string(),
                    )
                };
                let answer = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(answer.as_bytes()).await;
            });
        }
    });
    FakeAdmin { addr, seen }
}

const SECRET: &str = "informant-test-secret-7f3a9c";

/// A kubeconfig whose user is `user` (YAML flow mapping), for a cluster nothing needs.
fn kubeconfig_with(dir: &Path, server: &str, user: &str) -> std::path::PathBuf {
    let path = dir.join("token.kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n\
             contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n    namespace: demo\n\
             current-context: c\nusers:\n- name: u\n  user: {user}\n"
        ),
    )
    .unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_is_sent_and_never_printed() {
    let home = tempfile::tempdir().unwrap();
    let admin = fake_admin(true).await;
    let addr = admin.addr.to_string();
    let last = || admin.seen.lock().last().cloned().flatten();

    // No kubeconfig, no flag: no token, and the 401 says why and what to do.
    let (ok, _, err) = run(&mut informant_in(
        home.path(),
        &["status", "--admin", &addr],
    ))
    .await;
    assert!(!ok);
    assert!(
        err.contains("401 Unauthorized: it asks for a bearer token and no token"),
        "{err}"
    );
    assert!(err.contains("--token"), "{err}");

    // Not named, the default address is not shown the kubeconfig's token: whoever listens on
    // that port of this machine would get the user's cluster credentials.
    let kc = kubeconfig_with(
        home.path(),
        "http://127.0.0.1:1",
        &format!("{{token: {SECRET}}}"),
    );
    let (_, out, err) = run(&mut informant_in(
        home.path(),
        &["status", "-v", "--kubeconfig", kc.to_str().unwrap()],
    ))
    .await;
    assert!(
        err.contains("admin server: 127.0.0.1:9090; sending no token") && err.contains("--admin"),
        "{err}"
    );
    assert!(!out.contains(SECRET) && !err.contains(SECRET), "{out}{err}");

    // The kubeconfig user's static token, traced as loudly as the binary logs.
    let kc = kubeconfig_with(
        home.path(),
        "http://127.0.0.1:1",
        &format!("{{token: {SECRET}}}"),
    );
    let kc = kc.to_str().unwrap();
    let (ok, out, err) = run(informant_in(
        home.path(),
        &["status", "-v", "--admin", &addr, "--kubeconfig", kc],
    )
    .env("RUST_LOG", "trace"))
    .await;
    assert!(ok, "{err}");
    assert_eq!(last().as_deref(), Some(format!("Bearer {SECRET}").as_str()));
    assert!(err.contains("sending the kubeconfig user's token"), "{err}");
    assert!(!out.contains(SECRET) && !err.contains(SECRET), "{out}{err}");

    // An exec credential plugin, as cloud kubeconfigs have.
    let plugin = home.path().join("get-token.sh");
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\necho '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{SECRET}-exec\"}}}}'\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let exec = format!(
        "{{exec: {{apiVersion: client.authentication.k8s.io/v1, command: {}, interactiveMode: Never}}}}",
        plugin.display()
    );
    let kc = kubeconfig_with(home.path(), "http://127.0.0.1:1", &exec);
    let (ok, out, err) = run(informant_in(
        home.path(),
        &[
            "status",
            "--admin",
            &addr,
            "--kubeconfig",
            kc.to_str().unwrap(),
        ],
    )
    .env("RUST_LOG", "trace"))
    .await;
    assert!(ok, "{err}");
    assert_eq!(
        last().as_deref(),
        Some(format!("Bearer {SECRET}-exec").as_str())
    );
    assert!(!out.contains(SECRET) && !err.contains(SECRET), "{out}{err}");

    // --token and INFORMANT_TOKEN win over the kubeconfig.
    let (ok, _, err) = run(&mut informant_in(
        home.path(),
        &[
            "status",
            "--admin",
            &addr,
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--token",
            "flag-token",
        ],
    ))
    .await;
    assert!(ok, "{err}");
    assert_eq!(last().as_deref(), Some("Bearer flag-token"));
    let (ok, out, err) = run(
        informant_in(home.path(), &["status", "-v", "--admin", &addr])
            .env("INFORMANT_TOKEN", SECRET)
            .env("RUST_LOG", "trace"),
    )
    .await;
    assert!(ok, "{err}");
    assert_eq!(last().as_deref(), Some(format!("Bearer {SECRET}").as_str()));
    assert!(!out.contains(SECRET) && !err.contains(SECRET), "{out}{err}");
    // Nor does --help show the variable's value.
    let (_, out, _) =
        run(informant_in(home.path(), &["status", "--help"]).env("INFORMANT_TOKEN", SECRET)).await;
    assert!(!out.contains(SECRET), "{out}");

    // A refused token: the 401 says the token was refused, not what it was.
    let strict = fake_admin_accepting(true, Some("Bearer another")).await;
    let (ok, _, err) = run(informant_in(
        home.path(),
        &["logs", "x", "--admin", &strict.addr.to_string()],
    )
    .env("INFORMANT_TOKEN", SECRET))
    .await;
    assert!(!ok);
    assert!(
        err.contains("401 Unauthorized: the token from --token/INFORMANT_TOKEN was refused"),
        "{err}"
    );
    assert!(!err.contains(SECRET), "{err}");
}

/// A Pod `name` in `demo` at `127.0.0.1`, Ready, with `labels`.
fn loopback_pod(name: &str, labels: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "demo", "labels": labels},
        "spec": {"containers": [{"name": "informant", "image": "informant"}]},
        "status": {"phase": "Running", "podIP": "127.0.0.1",
            "conditions": [{"type": "Ready", "status": "True"}]},
    })
}

fn allow(verbs: &[&str], resource: &str) -> informant_devserver::audit::AllowRule {
    informant_devserver::audit::AllowRule {
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        resource: resource.into(),
        namespace: Some("demo".into()),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reaches_a_pods_loopback_admin_through_port_forward() {
    let env = PluginEnv::start(HostConfig {
        restart: fast_restarts(),
        ..Default::default()
    })
    .await;
    create_namespaces(&env.server, &["demo"]);
    env.install(None, "top", "hostile", &echo("top"));
    let state = AdminState::new(env.factory.clone(), Some(env.host.clone()));
    let admin = AdminServer::start(SocketAddr::from(([127, 0, 0, 1], 0)), state)
        .await
        .unwrap();
    let port = admin.addr().port().to_string();
    let report = env.reconcile().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    env.server
        .create(loopback_pod(
            "informant-0",
            serde_json::json!({"app.kubernetes.io/instance": "rel"}),
        ))
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let kc = home.path().join("alice.kubeconfig");
    env.server.write_kubeconfig_as("alice", &kc).unwrap();
    let kc = kc.to_str().unwrap().to_string();
    let status = |extra: &[&str]| {
        let mut c = informant_in(
            home.path(),
            &[
                "status",
                "--kubeconfig",
                &kc,
                "-n",
                "demo",
                "--pod-port",
                &port,
                "--pod-plain-http",
            ],
        );
        c.args(extra);
        c
    };

    // Without `create` on pods/portforward: refused, in the API server's words.
    env.server.restrict(
        "alice",
        vec![
            allow(&["get", "list"], "pods"),
            allow(&["get"], "pods/portforward"),
        ],
    );
    let (ok, out, err) = run(&mut status(&["--pod", "informant-0"])).await;
    assert!(!ok && out.is_empty(), "{out}");
    assert!(
        err.contains("pod demo/informant-0 port")
            && err.contains("port-forward through the API server")
            && err.contains("User \"alice\" cannot create resource \"pods/portforward\" in API group \"\" in the namespace \"demo\""),
        "{err}"
    );

    env.server.restrict(
        "alice",
        vec![
            allow(&["get", "list"], "pods"),
            allow(&["create"], "pods/portforward"),
        ],
    );
    for how in [
        &["--pod", "informant-0"][..],
        &["--release", "rel"],
        &["-l", "app.kubernetes.io/instance=rel"],
    ] {
        let (ok, out, err) = run(&mut status(how)).await;
        assert!(ok, "{how:?}: {err}");
        let rows: Vec<Vec<&str>> = out
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows.len(), 2, "{how:?}: {out}");
        assert_eq!(&rows[1][..3], ["-", "top", "running"], "{out}");
    }

    // A release with no ready pod says so.
    env.server
        .create(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "pending-0", "namespace": "demo", "labels": {"app.kubernetes.io/instance": "other"}},
            "spec": {"containers": [{"name": "informant", "image": "informant"}]},
            "status": {"phase": "Pending"},
        }))
        .unwrap();
    let (ok, _, err) = run(&mut status(&["--release", "other"])).await;
    assert!(!ok);
    assert!(
        err.contains(
            "no ready pod in namespace demo matches `app.kubernetes.io/instance=other` (1 match"
        ),
        "{err}"
    );

    // A port nothing listens on: the API server's reason, at once.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = std::time::Instant::now();
    let (ok, _, err) = run(&mut informant_in(
        home.path(),
        &[
            "status",
            "--kubeconfig",
            &kc,
            "--pod",
            "informant-0",
            "-n",
            "demo",
            "--pod-plain-http",
            "--pod-port",
            &dead.to_string(),
        ],
    ))
    .await;
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "error forwarding port {dead} to pod demo/informant-0"
        )),
        "{err}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );

    // Odd spellings of the pod's name are refused before any request is made.
    let before = env.server.requests().len();
    for odd in ["../x", "a%2Fb", "a?b", "informant-0/../../x", "A", ""] {
        let (ok, out, err) = run(&mut status(&["--pod", odd])).await;
        assert!(!ok && out.is_empty(), "{odd}: {out}");
        assert!(err.contains("is not a valid Pod name"), "{odd}: {err}");
    }
    let (ok, _, err) = run(&mut informant_in(
        home.path(),
        &[
            "status",
            "--kubeconfig",
            &kc,
            "--pod",
            "informant-0",
            "-n",
            "../kube-system",
        ],
    ))
    .await;
    assert!(
        !ok && err.contains("`../kube-system` is not a namespace name"),
        "{err}"
    );
    assert_eq!(
        env.server.requests().len(),
        before,
        "no request left for an odd name"
    );
    admin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_travels_inside_the_port_forward() {
    let server = informant_devserver::DevServer::start(Default::default())
        .await
        .unwrap();
    create_namespaces(&server, &["demo"]);
    server
        .create(loopback_pod("informant-0", serde_json::json!({})))
        .unwrap();
    let admin = fake_admin(true).await;
    let home = tempfile::tempdir().unwrap();
    let kc = home.path().join("alice.kubeconfig");
    server.write_kubeconfig_as("alice", &kc).unwrap();
    let token = server.token_for("alice");
    let port = admin.addr.port().to_string();
    let (ok, out, err) = run(informant_in(
        home.path(),
        &[
            "status",
            "-v",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--pod",
            "informant-0",
            "-n",
            "demo",
            "--pod-plain-http",
            "--pod-port",
            &port,
        ],
    )
    .env("RUST_LOG", "trace"))
    .await;
    assert!(ok, "{err}");
    assert!(out.contains("fake"), "{out}");
    assert_eq!(
        admin.seen.lock().last().cloned().flatten(),
        Some(format!("Bearer {token}"))
    );
    assert!(!out.contains(&token) && !err.contains(&token), "{out}{err}");
}
