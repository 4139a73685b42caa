//! Sharding benchmark: the real `informant` binary (release), as replicas of a shard group
//! against one embedded API server, each in its own process so its RSS is its own. Prints
//! figures; asserts only what the run must show to be meaningful (every plugin placed once,
//! every plugin's events counted).
//!
//! Setup: `SHARD_TENANTS` tenants (default 3), each with `SHARD_PLUGINS` copies (default 10) of
//! the bench plugin (`tests/plugins/bench`, counting in its own memory) watching the Pods of its
//! own namespace, which holds `SHARD_PODS` pods (default 10 000) of realistic JSON;
//! `shard-by = "tenant"`, so a tenant's plugins share their informer on one replica.
//!
//! 1. One process holding every plugin (`informant run`, no group): its RSS once every plugin
//!    handled its replay.
//! 2. Three replicas (`--shard-group bench`, lease 6 s): the time until every plugin runs on
//!    exactly one replica, each replica's RSS once every plugin handled its replay, and the
//!    largest against the single process.
//! 3. `kill -9` of the replica running most plugins, then `SHARD_CHANGES` (default 500)
//!    modifications of its tenants' pods: the time until its plugins run elsewhere, and until
//!    every plugin watching those pods has handled the modifications.
//! 4. A fourth replica joins: the plugins that moved to it, and the time until the group
//!    settled.
//!
//! `cargo bench -p informant-tests --bench shard`.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use informant_devserver::{DevServer, DevServerConfig};
use informant_tests::http::free_addr;
use informant_tests::plugins::wasm;
use serde_json::Value;

// Shared by the benches; this one uses part of it.
#[allow(dead_code)]
mod common;
use common::{env_number, mib, pod, pod_name, warm_compile_cache};

const GROUP: &str = "bench";
const LEASE_SECS: u64 = 6;
/// How long any phase may take before the bench gives up on it.
const PHASE_LIMIT: Duration = Duration::from_secs(600);

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    runtime.block_on(run());
}

/// `cargo build --release -p informant`: the binary users run.
fn informant_binary() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--release", "-p", "informant"])
        .current_dir(root)
        .status()
        .expect("run cargo build");
    assert!(
        status.success(),
        "cargo build --release -p informant failed"
    );
    informant_tests::plugins::target_dir().join("release/informant")
}

/// One `informant run` process and its admin address.
struct Host {
    name: String,
    child: Child,
    admin: SocketAddr,
}

impl Host {
    fn start(bin: &Path, work: &Path, name: &str, shard: bool) -> Host {
        let admin = free_addr();
        let log = std::fs::File::create(work.join(format!("{name}.log"))).unwrap();
        let mut cmd = Command::new(bin);
        cmd.arg("run")
            .arg("--kubeconfig")
            .arg(work.join("kubeconfig"))
            .arg("--plugins")
            .arg(work.join("plugins"))
            .arg("--config")
            .arg(work.join("informant.toml"))
            .arg("--admin")
            .arg(admin.to_string())
            .arg("--admin-auth=none")
            .env("RUST_LOG", "warn,informant_runtime::shard=info")
            .stdout(Stdio::null())
            .stderr(log);
        if shard {
            cmd.args(["--shard-group", GROUP, "--lease-namespace", "default"])
                .args(["--lease-duration", &LEASE_SECS.to_string()])
                .args(["--identity", name]);
        }
        let child = cmd.spawn().expect("start informant run");
        Host {
            name: name.into(),
            child,
            admin,
        }
    }

    fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    }

    /// `tenant/plugin` of the plugins it runs (from `/plugins`).
    async fn owned(&self) -> BTreeSet<String> {
        let (status, _, body) = get(self.admin, "/plugins").await;
        if status != 200 {
            return BTreeSet::new();
        }
        let v: Value = serde_json::from_str(&body).unwrap_or_default();
        v["plugins"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["state"] != "waiting")
            .filter_map(|p| Some(format!("{}/{}", p["tenant"].as_str()?, p["name"].as_str()?)))
            .collect()
    }

    /// Events each plugin has handled here (`informant_plugin_events_dispatched_total`).
    async fn dispatched(&self) -> BTreeMap<String, u64> {
        let (status, _, body) = get(self.admin, "/metrics").await;
        let mut out = BTreeMap::new();
        if status != 200 {
            return out;
        }
        for line in body.lines() {
            let Some(rest) = line.strip_prefix("informant_plugin_events_dispatched_total{") else {
                continue;
            };
            let Some((labels, value)) = rest.split_once("} ") else {
                continue;
            };
            let label = |k: &str| {
                labels
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(&format!("{k}=\"")))
                    .map(|v| v.trim_end_matches('"').to_string())
            };
            if let (Some(p), Some(t), Ok(n)) = (label("plugin"), label("tenant"), value.parse()) {
                out.insert(format!("{t}/{p}"), n);
            }
        }
        out
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn term(&mut self) {
        // SAFETY: signalling our own child process by its pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// `GET path` on an admin server, `(0, "")` while it is not up yet (or gone).
async fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    if tokio::net::TcpStream::connect(addr).await.is_err() {
        return (0, String::new(), String::new());
    }
    informant_tests::http::get(addr, path).await
}

impl Drop for Host {
    /// A bench that gives up leaves no replica running.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `cond` (a cheap HTTP scrape) until it holds; the time it took.
async fn until<F, Fut>(what: &str, mut cond: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !cond().await {
        assert!(start.elapsed() < PHASE_LIMIT, "gave up waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    start.elapsed()
}

/// Where each plugin runs.
async fn placement(hosts: &[&Host]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for h in hosts {
        for p in h.owned().await {
            out.entry(p).or_default().push(h.name.clone());
        }
    }
    out
}

async fn placed_once(hosts: &[&Host], plugins: &BTreeSet<String>) -> bool {
    let p = placement(hosts).await;
    p.keys().cloned().collect::<BTreeSet<_>>() == *plugins && p.values().all(|o| o.len() == 1)
}

/// Events each plugin handled, summed over `hosts`.
async fn dispatched(hosts: &[&Host]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for h in hosts {
        for (p, n) in h.dispatched().await {
            *out.entry(p).or_default() += n;
        }
    }
    out
}

async fn run() {
    let tenants = env_number("SHARD_TENANTS", 3);
    let per_tenant = env_number("SHARD_PLUGINS", 10);
    let pods = env_number("SHARD_PODS", 10_000);
    let changes = env_number("SHARD_CHANGES", 500);
    let bin = informant_binary();
    let work = tempfile::tempdir().expect("work dir");
    let server = DevServer::start(DevServerConfig::default())
        .await
        .expect("start API server");
    server
        .write_kubeconfig(&work.path().join("kubeconfig"))
        .unwrap();
    let bench = wasm("bench-plugin");
    warm_compile_cache(&bench);
    let mut config = String::from("shard-by = \"tenant\"\n");
    let mut plugins = BTreeSet::new();
    for t in 0..tenants {
        let ns = format!("t{t}");
        informant_tests::create_namespaces(&server, &[&ns]);
        for i in 0..pods {
            let mut p = pod(i, 0, 0);
            p["metadata"]["namespace"] = ns.clone().into();
            server.create(p).expect("create pod");
        }
        config.push_str(&format!(
            "[tenants.{ns}]\nnamespaces = [\"{ns}\"]\nmax-plugins = {per_tenant}\n"
        ));
        let dir = work.path().join("plugins").join(&ns);
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..per_tenant {
            let name = format!("p{i:02}");
            std::fs::copy(&bench, dir.join(format!("{name}.wasm"))).unwrap();
            std::fs::write(
                dir.join(format!("{name}.toml")),
                format!(
                    "[limits]\nmemory-mib = 16\n[[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace = \"{ns}\"\n[config]\nmode = \"meta\"\npods = {pods}\nfinal-round = 999999\n"
                ),
            )
            .unwrap();
            plugins.insert(format!("{ns}/{name}"));
        }
    }
    std::fs::write(work.path().join("informant.toml"), &config).unwrap();
    println!(
        "shard bench: {tenants} tenants x {per_tenant} plugins, {pods} pods per tenant namespace, lease {LEASE_SECS} s"
    );

    // 1. One process holding every plugin.
    let mut solo = Host::start(&bin, work.path(), "solo", false);
    let took = until("the single process to replay every plugin", || async {
        let d = dispatched(&[&solo]).await;
        plugins
            .iter()
            .all(|p| d.get(p).is_some_and(|n| *n >= pods as u64))
    })
    .await;
    let solo_rss = solo.rss();
    println!(
        "one process, {} plugins: replayed in {:.1} s, RSS {:.0} MiB",
        plugins.len(),
        took.as_secs_f64(),
        mib(solo_rss)
    );
    solo.term();

    // 2. Three replicas.
    let started = Instant::now();
    let mut hosts: Vec<Host> = (0..3)
        .map(|i| Host::start(&bin, work.path(), &format!("replica-{i}"), true))
        .collect();
    let refs: Vec<&Host> = hosts.iter().collect();
    until("every plugin on exactly one replica", || {
        placed_once(&refs, &plugins)
    })
    .await;
    let placed_in = started.elapsed();
    until("every plugin's replay on its replica", || async {
        let d = dispatched(&refs).await;
        plugins
            .iter()
            .all(|p| d.get(p).is_some_and(|n| *n >= pods as u64))
    })
    .await;
    let place = placement(&refs).await;
    let mut worst = 0;
    for h in &hosts {
        let owned = place.values().filter(|o| o[0] == h.name).count();
        let rss = h.rss();
        worst = worst.max(rss);
        println!(
            "{}: {owned} plugins, RSS {:.0} MiB ({:.2}x the single process)",
            h.name,
            mib(rss),
            rss as f64 / solo_rss as f64
        );
    }
    println!(
        "3 replicas: every plugin placed once {:.1} s after start ({:.1} lease durations); largest replica {:.2}x the single process",
        placed_in.as_secs_f64(),
        placed_in.as_secs_f64() / LEASE_SECS as f64,
        worst as f64 / solo_rss as f64
    );

    // 3. kill -9 of the replica running most plugins, and changes while its plugins move.
    let victim = (0..hosts.len())
        .max_by_key(|i| place.values().filter(|o| o[0] == hosts[*i].name).count())
        .unwrap();
    let moved: BTreeSet<String> = place
        .iter()
        .filter(|(_, o)| o[0] == hosts[victim].name)
        .map(|(p, _)| p.clone())
        .collect();
    let namespaces: BTreeSet<String> = moved
        .iter()
        .map(|p| p.split('/').next().unwrap().to_string())
        .collect();
    let before = dispatched(&refs).await;
    hosts[victim].kill();
    let killed = Instant::now();
    let mut modified = 0;
    for ns in &namespaces {
        for i in 0..changes {
            let mut p = pod(i, 1, 1);
            p["metadata"]["namespace"] = ns.clone().into();
            p["metadata"]["name"] = pod_name(i).into();
            server.update(p).expect("modify pod");
            modified += 1;
        }
    }
    let victim_name = hosts[victim].name.clone();
    let survivors: Vec<&Host> = hosts.iter().filter(|h| h.name != victim_name).collect();
    until("the crashed replica's plugins to run elsewhere", || {
        placed_once(&survivors, &plugins)
    })
    .await;
    let moved_in = killed.elapsed();
    until("every moved plugin to handle the changes", || async {
        let d = dispatched(&survivors).await;
        moved
            .iter()
            .all(|p| d.get(p).is_some_and(|n| *n >= changes as u64))
    })
    .await;
    let handled_in = killed.elapsed();
    let after = dispatched(&survivors).await;
    let extra: u64 = moved
        .iter()
        .map(|p| {
            after
                .get(p)
                .copied()
                .unwrap_or(0)
                .saturating_sub(changes as u64)
        })
        .sum();
    println!(
        "kill -9 of {victim_name} ({} plugins): running elsewhere after {:.1} s (lease {LEASE_SECS} s), {modified} modifications handled by each of them after {:.1} s; {extra} deliveries beyond them (redelivered past the last published cursor); before the kill they had handled {}",
        moved.len(),
        moved_in.as_secs_f64(),
        handled_in.as_secs_f64(),
        moved
            .iter()
            .map(|p| before.get(p).copied().unwrap_or(0))
            .sum::<u64>()
    );

    // 4. A fourth replica joins.
    let before_join = placement(&survivors).await;
    let joined = Instant::now();
    hosts.push(Host::start(&bin, work.path(), "replica-3", true));
    let alive: Vec<&Host> = hosts.iter().filter(|h| h.name != victim_name).collect();
    // Settled once the newcomer sees the group: it publishes the members on /plugins.
    until("the group to settle with the new replica", || async {
        let (status, _, body) = get(alive.last().unwrap().admin, "/plugins").await;
        status == 200
            && serde_json::from_str::<Value>(&body).is_ok_and(|v| {
                v["shard"]["members"]
                    .as_array()
                    .is_some_and(|m| m.len() == 3)
            })
            && placed_once(&alive, &plugins).await
    })
    .await;
    let after_join = placement(&alive).await;
    let moved_on_join = plugins
        .iter()
        .filter(|p| before_join.get(*p) != after_join.get(*p))
        .count();
    println!(
        "join of replica-3: {moved_on_join} of {} plugins moved ({:.2}), settled after {:.1} s",
        plugins.len(),
        moved_on_join as f64 / plugins.len() as f64,
        joined.elapsed().as_secs_f64()
    );
    for h in hosts.iter_mut().filter(|h| h.name != victim_name) {
        h.term();
    }
    server.shutdown().await;
}
