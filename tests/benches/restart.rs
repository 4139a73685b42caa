//! Restart benchmark of durable delivery (`--state-dir`): how long a host takes to come back,
//! and what its plugins are given when it does. Prints figures; asserts nothing about speed, but
//! fails loudly when a plugin is given the wrong events.
//!
//! As in `e2e.rs`, the parent process runs the embedded API server with `RESTART_PODS` pods
//! (default 100 000) of the same realistic JSON, and runs Informant as `informant run` starts it
//! (`Runtime::start` over a plugins directory, with a state dir) in a child process re-executing
//! this binary, so the client's RSS and CPU are its own. The plugins are `RESTART_PLUGINS`
//! (default 10) copies of the bench plugin (`tests/plugins/bench`), counting what they are given
//! by type and reporting their counts when a marker pod appears.
//!
//! 1. Cold start, empty state dir: from the client's start until every plugin has handled its
//!    whole replay. Then a marker pod: every plugin's counts up to it. Then SIGTERM, as
//!    Kubernetes stops a pod: the client stops as `informant run` does (cursors saved, journal
//!    flushed).
//! 2. While no client runs: 1 000 pods modified and 100 deleted (`RESTART_MODIFY`,
//!    `RESTART_DELETE`), through the devserver.
//! 3. Restart on the same state dir: from the client's start until every plugin has handled as
//!    many changes as were made; a second marker then gives each plugin's exact counts, which
//!    must be the updates and deletes made and nothing else (extras would be redeliveries).
//!
//! For each phase: the time, the client's RSS (then and at its peak), its CPU, the LIST requests
//! the server received from it (the devserver's request log, verb `list`; a streamed watch-list
//! would be a `watch`, so the informers' own count of lists, streamed or not, is printed too),
//! and the state dir's size on disk once the client stopped. The target: a restart in at most a
//! quarter of a cold start.
//!
//! `cargo bench -p informant-tests --bench restart` (builds the plugins for wasm32-wasip2 first);
//! small: `RESTART_PODS=10000 cargo bench -p informant-tests --bench restart`.

/// The allocator `informant run` uses, so the client's RSS is the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use informant_devserver::{DevServer, DevServerConfig};
use informant_runtime::plugin::exec::supervisor::PluginState;
use informant_runtime::plugin::imports::log::PluginLog;
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_runtime::runtime::{Runtime, RuntimeOptions, StateOptions};
use informant_runtime::workers::{self, WorkerAffinity};
use informant_tests::proc::{cpu_seconds, rss_bytes};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::broadcast;

mod common;
use common::{NAMESPACE, dir_bytes, env_number, mib, pod, pod_name, warm_compile_cache};

/// The name prefix of the marker pods (not counted by the plugins; each makes them report).
const MARKER: &str = "marker-";
/// How often the client samples its plugins' states and reports progress.
const PROGRESS: Duration = Duration::from_secs(3);

fn main() {
    let client = std::env::var("RESTART_ROLE").as_deref() == Ok("client");
    let affinity = if client {
        WorkerAffinity::default()
    } else {
        WorkerAffinity::Off
    };
    let runtime = workers::runtime(affinity).expect("tokio runtime");
    {
        use tracing_subscriber::filter::EnvFilter;
        let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into());
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .try_init();
    }
    if client {
        runtime.block_on(client::run());
    } else {
        runtime.block_on(parent::run());
    }
}

/// What one plugin was given, as it reports it at a marker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct Counts {
    initial: u64,
    added: u64,
    updated: u64,
    deleted: u64,
}

impl Counts {
    fn changes(&self) -> u64 {
        self.added + self.updated + self.deleted
    }
}

/// One line the client writes to stdout.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Report {
    /// `started` (`Runtime::start` returned), the goal (`replayed` or `changed`: every plugin
    /// reached it), `counts` (every plugin reported at a marker), `progress` or `stopped`.
    phase: String,
    /// Seconds since the client started.
    t: f64,
    /// Resident set size, and its peak so far, bytes.
    rss: u64,
    peak_rss: u64,
    /// CPU time since the client started, seconds.
    cpu: f64,
    /// Lists the informers made (paginated or streamed).
    lists: u64,
    /// Plugins that reached the goal.
    finished: usize,
    /// Each plugin's counts (in `counts`).
    counts: BTreeMap<String, Counts>,
}

mod parent {
    //! The server, the writes while no client runs, the two clients and the table.

    use super::*;

    /// What one client run measured.
    struct Phase {
        goal: Report,
        counts: BTreeMap<String, Counts>,
        stopped: Report,
        /// Requests the server received from the client's start until it stopped.
        list_requests: usize,
        watch_requests: usize,
        /// The state dir's size once the client stopped.
        state_bytes: u64,
    }

    pub(super) async fn run() {
        let pods = env_number("RESTART_PODS", 100_000).max(1);
        let plugins = env_number("RESTART_PLUGINS", 10).max(1);
        let modify = env_number("RESTART_MODIFY", 1_000).min(pods);
        let delete = env_number("RESTART_DELETE", 100).min(pods - modify);
        let goal_secs = env_number("RESTART_GOAL_SECS", 600) as u64;

        let wasm = informant_tests::plugins::wasm("bench-plugin");
        warm_compile_cache(&wasm);
        let server = DevServer::start(DevServerConfig {
            // The restart resumes its watch from where it stopped: that must still be served.
            watch_history: pods + modify + delete + 10_000,
            ..Default::default()
        })
        .await
        .expect("start the API server");
        server
            .create(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
            )
            .expect("create the namespace");
        let seeding = Instant::now();
        assert_eq!(
            server
                .seed((0..pods).map(|i| pod(i, 0, 0)))
                .expect("seed the pods"),
            pods
        );
        println!(
            "restart: {pods} pods (seeded in {:.1}s), {plugins} bench plugins, {modify} modified and {delete} deleted while the host is down; {} cores",
            seeding.elapsed().as_secs_f64(),
            std::thread::available_parallelism().map_or(0, |n| n.get()),
        );

        let plugins_dir = tempfile::tempdir().expect("plugins dir");
        let state_dir = tempfile::tempdir().expect("state dir");
        install(
            plugins_dir.path(),
            &wasm,
            plugins,
            pods,
            (modify + delete) as u64,
        );
        let client = Client {
            server: &server,
            plugins_dir: plugins_dir.path(),
            state_dir: state_dir.path(),
            plugins,
            goal_timeout: Duration::from_secs(goal_secs),
        };

        let cold = client.run("cold", "replayed", 0).await;

        let writing = Instant::now();
        for i in 0..modify {
            server.replace_verbatim(pod(i, 1, i)).expect("modify a pod");
        }
        for i in modify..modify + delete {
            server
                .delete("v1", "Pod", Some(NAMESPACE), &pod_name(i))
                .expect("delete a pod");
        }
        println!(
            "\nwhile down: {modify} pods modified, {delete} deleted in {:.2}s",
            writing.elapsed().as_secs_f64()
        );

        let restart = client.run("restart", "changed", 1).await;

        let expected_cold = Counts {
            initial: pods as u64,
            ..Default::default()
        };
        let expected_restart = Counts {
            updated: modify as u64,
            deleted: delete as u64,
            ..Default::default()
        };
        let wrong = print_table(
            &[
                ("cold", &cold, expected_cold),
                ("restart", &restart, expected_restart),
            ],
            plugins,
        );
        server.shutdown().await;
        assert!(
            wrong.is_empty(),
            "plugins given the wrong events: {}",
            wrong.join("; ")
        );
    }

    /// `pNN.wasm` + `pNN.toml` for `plugins` copies of the bench plugin, counting changes and
    /// reporting at markers.
    fn install(dir: &Path, wasm: &Path, plugins: usize, pods: usize, changes: u64) {
        // No push reaches a final round here: `final-round` is one no pod is given.
        let manifest = format!(
            "description = \"restart benchmark\"\n[limits]\ndeadline-ms = {}\n\
             [[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace = \"{NAMESPACE}\"\n\
             [config]\nmode = \"meta\"\npods = {pods}\nfinal-round = {}\nchanges = {changes}\n\
             marker = \"{MARKER}\"\n",
            HostConfig::default().max_deadline_ms,
            u32::MAX,
        );
        for p in 0..plugins {
            // Manifest first: the reloader must never see the component without it.
            std::fs::write(dir.join(format!("p{p:02}.toml")), &manifest).expect("write manifest");
            std::fs::copy(wasm, dir.join(format!("p{p:02}.wasm"))).expect("copy wasm");
        }
    }

    /// What both client runs share.
    struct Client<'a> {
        server: &'a DevServer,
        plugins_dir: &'a Path,
        state_dir: &'a Path,
        plugins: usize,
        goal_timeout: Duration,
    }

    impl Client<'_> {
        /// Runs one client until every plugin reached `goal`, asks for the counts with marker
        /// `marker`, and stops it with SIGTERM.
        async fn run(&self, name: &str, goal: &str, marker: usize) -> Phase {
            println!("\n[{name}] starting the client");
            let spawned = Instant::now();
            let exe = std::env::current_exe().expect("this benchmark's executable");
            let mut child = tokio::process::Command::new(exe)
                .env("RESTART_ROLE", "client")
                .env("RESTART_SERVER", self.server.url())
                .env("RESTART_PLUGINS_DIR", self.plugins_dir)
                .env("RESTART_STATE_DIR", self.state_dir)
                .env("RESTART_PLUGINS", self.plugins.to_string())
                .env("RESTART_GOAL", goal)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()
                .expect("start the client");
            let mut lines = BufReader::new(child.stdout.take().expect("client stdout")).lines();
            // The next report that is not progress, printing progress meanwhile; `None` when
            // `limit` passes first.
            let next = async |lines: &mut tokio::io::Lines<_>, limit: Duration| {
                let deadline = tokio::time::Instant::now() + limit;
                loop {
                    let line = match tokio::time::timeout_at(deadline, lines.next_line()).await {
                        Err(_) => return None,
                        Ok(Ok(Some(line))) => line,
                        Ok(_) => panic!("[{name}] the client ended early"),
                    };
                    let report: Report = serde_json::from_str(&line).unwrap_or_else(|e| {
                        panic!("[{name}] unreadable client line {line:?}: {e}")
                    });
                    if report.phase == "progress" {
                        println!(
                            "[{name}] {:>6.1}s  {goal} {}/{}  RSS {:.0} MiB  CPU {:.1}s",
                            report.t,
                            report.finished,
                            self.plugins,
                            mib(report.rss),
                            report.cpu
                        );
                        continue;
                    }
                    return Some(report);
                }
            };
            let started = next(&mut lines, self.goal_timeout)
                .await
                .unwrap_or_else(|| panic!("[{name}] the client did not start"));
            assert_eq!(started.phase, "started");
            println!(
                "[{name}] started (plugins loaded) at {:.2}s, RSS {:.0} MiB",
                started.t,
                mib(started.rss)
            );
            let goal_report = match next(&mut lines, self.goal_timeout).await {
                Some(r) => {
                    assert_eq!(r.phase, goal, "[{name}] the client's report");
                    println!(
                        "[{name}] every plugin {goal} at {:.2}s, RSS {:.0} MiB (peak {:.0}), CPU {:.1}s, informer lists {}",
                        r.t,
                        mib(r.rss),
                        mib(r.peak_rss),
                        r.cpu,
                        r.lists
                    );
                    r
                }
                None => {
                    // Reported below with the counts, which say what was given instead.
                    println!(
                        "[{name}] NOT every plugin {goal} within {:?}; asking for their counts",
                        self.goal_timeout
                    );
                    Report {
                        phase: format!("{goal} (not reached)"),
                        t: f64::NAN,
                        ..Default::default()
                    }
                }
            };
            let mut marker_pod = pod(0, 0, 0);
            marker_pod["metadata"]["name"] = format!("{MARKER}{marker}").into();
            self.server.create(marker_pod).expect("create the marker");
            let counts = next(&mut lines, self.goal_timeout)
                .await
                .unwrap_or_else(|| panic!("[{name}] no counts at the marker"));
            assert_eq!(counts.phase, "counts");
            // SAFETY: `kill` on the child this function started and still holds.
            unsafe { libc::kill(child.id().expect("the client runs") as i32, libc::SIGTERM) };
            let stopped = next(&mut lines, self.goal_timeout)
                .await
                .unwrap_or_else(|| panic!("[{name}] the client did not stop"));
            assert_eq!(stopped.phase, "stopped");
            let status = child.wait().await.expect("wait for the client");
            assert!(status.success(), "[{name}] the client failed: {status}");
            let requests: Vec<_> = self
                .server
                .requests()
                .into_iter()
                .filter(|r| r.at >= spawned && r.resource == "pods")
                .collect();
            Phase {
                goal: goal_report,
                counts: counts.counts,
                list_requests: requests.iter().filter(|r| r.verb == "list").count(),
                watch_requests: requests.iter().filter(|r| r.verb == "watch").count(),
                stopped,
                state_bytes: dir_bytes(self.state_dir),
            }
        }
    }

    /// Prints the table; returns what was wrong with the plugins' counts.
    fn print_table(phases: &[(&str, &Phase, Counts)], plugins: usize) -> Vec<String> {
        let mut wrong = Vec::new();
        println!(
            "\n{:<8} {:>8} {:>9} {:>9} {:>8} {:>10} {:>11} {:>15} {:>9} {:>9} {:>9} {:>9} {:>7} {:>14}",
            "phase",
            "time s",
            "RSS MiB",
            "peak MiB",
            "CPU s",
            "LIST reqs",
            "watch reqs",
            "informer lists",
            "initial",
            "added",
            "updated",
            "deleted",
            "extras",
            "state dir MiB",
        );
        for (name, p, expected) in phases {
            // Per plugin, the same for all when right; otherwise each distinct one is listed.
            let distinct: BTreeSet<Counts> = p.counts.values().copied().collect();
            if p.counts.len() != plugins {
                wrong.push(format!(
                    "{name}: {} of {plugins} plugins reported counts",
                    p.counts.len()
                ));
            }
            for c in &distinct {
                if c != expected {
                    let who: Vec<&str> = p
                        .counts
                        .iter()
                        .filter(|(_, v)| *v == c)
                        .map(|(k, _)| k.as_str())
                        .collect();
                    wrong.push(format!(
                        "{name}: {who:?} were given {c:?}, expected {expected:?}"
                    ));
                }
            }
            for c in &distinct {
                let extras = (c.changes() + c.initial) as i64
                    - (expected.changes() + expected.initial) as i64;
                println!(
                    "{:<8} {:>8.2} {:>9.0} {:>9.0} {:>8.1} {:>10} {:>11} {:>15} {:>9} {:>9} {:>9} {:>9} {:>7} {:>14.1}",
                    name,
                    p.goal.t,
                    mib(p.goal.rss),
                    mib(p.stopped.peak_rss),
                    p.goal.cpu,
                    p.list_requests,
                    p.watch_requests,
                    p.stopped.lists,
                    c.initial,
                    c.added,
                    c.updated,
                    c.deleted,
                    extras,
                    mib(p.state_bytes),
                );
            }
        }
        println!(
            "(time: from the client's start until every plugin handled its replay (cold) or as many \
             changes as were made (restart); counts per plugin, one line per distinct set, up to a \
             marker made after that; LIST/watch: requests for pods the server received from the \
             client's start until it stopped; informer lists: the informers' own count)"
        );
        if let [(_, cold, _), (_, restart, _)] = phases {
            let ratio = restart.goal.t / cold.goal.t;
            println!(
                "restart / cold start: {:.2}s / {:.2}s = {ratio:.3}x (target <= 0.25x: {})",
                restart.goal.t,
                cold.goal.t,
                if ratio <= 0.25 { "met" } else { "NOT met" }
            );
        }
        wrong
    }
}

mod client {
    //! Informant as `informant run --state-dir` starts it, reporting on stdout.

    use super::*;

    fn var(name: &str) -> String {
        std::env::var(name).unwrap_or_else(|_| panic!("client: {name} is not set"))
    }

    /// The peak resident set size (`VmHWM`), bytes.
    fn peak_rss_bytes() -> u64 {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                let line = s.lines().find(|l| l.starts_with("VmHWM:"))?.to_owned();
                line.split_whitespace().nth(1)?.parse::<u64>().ok()
            })
            .map_or(0, |kib| kib * 1024)
    }

    pub(super) async fn run() {
        let started = Instant::now();
        let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("a SIGTERM handler");
        let server = var("RESTART_SERVER");
        let plugins: usize = var("RESTART_PLUGINS").parse().expect("RESTART_PLUGINS");
        let goal = var("RESTART_GOAL");
        let client = kube::Client::try_from(kube::Config::new(
            server.parse().expect("RESTART_SERVER is a URI"),
        ))
        .expect("plain-http kube client");
        // Subscribed before anything loads: a plugin's lines cannot be missed.
        let (logs_tx, mut logs) = broadcast::channel::<PluginLog>(1 << 16);
        let options = RuntimeOptions {
            plugins: Some(PathBuf::from(var("RESTART_PLUGINS_DIR"))),
            plugin_logs: Some(logs_tx),
            config: HostConfig::default(),
            state: Some(StateOptions {
                dir: PathBuf::from(var("RESTART_STATE_DIR")),
                cluster: server,
                ..Default::default()
            }),
            ..Default::default()
        };
        // On a worker, as `Replica::start` runs it for `informant run`.
        let runtime = tokio::spawn(Runtime::start(client, options))
            .await
            .expect("the start task")
            .expect("start the runtime");
        let host = runtime.host.clone().expect("a plugin host");
        let factory = runtime.factory.clone();
        let lists = || -> u64 {
            factory
                .informers()
                .iter()
                .map(|i| i.stats().lists.load(Ordering::Relaxed))
                .sum()
        };
        let report = |phase: &str, finished: usize| Report {
            phase: phase.into(),
            t: started.elapsed().as_secs_f64(),
            rss: rss_bytes(),
            peak_rss: peak_rss_bytes(),
            cpu: cpu_seconds(),
            lists: lists(),
            finished,
            counts: BTreeMap::new(),
        };
        emit(&report("started", 0));
        assert_eq!(
            host.running().len(),
            plugins,
            "plugins running after start (see the errors above)"
        );

        let mut reached = BTreeSet::new();
        let mut counts = BTreeMap::new();
        let mut tick = tokio::time::interval(PROGRESS);
        loop {
            tokio::select! {
                line = logs.recv() => {
                    let line = line.expect("plugin logs (a lag would lose a report)");
                    let Ok(message) = serde_json::from_str::<Value>(&line.message) else {
                        panic!("plugin {}: unexpected log line {:?}", line.plugin, line.message);
                    };
                    if let Some(c) = message.get("counts") {
                        let c: Counts = serde_json::from_value(c.clone()).expect("the plugin's counts");
                        counts.insert(line.plugin.to_string(), c);
                        if counts.len() == plugins {
                            let mut r = report("counts", reached.len());
                            r.counts = std::mem::take(&mut counts);
                            emit(&r);
                        }
                    } else if message.get(goal.as_str()).is_some() {
                        assert!(reached.insert(line.plugin.clone()), "{} reached {goal} twice", line.plugin);
                        if reached.len() == plugins {
                            emit(&report(&goal, plugins));
                        }
                    }
                }
                _ = tick.tick() => {
                    for p in host.status() {
                        assert!(
                            p.failed == 0 && p.state == PluginState::Running,
                            "plugin {} is {:?} after {} failed events: {:?}",
                            p.name, p.state, p.failed, p.last_error
                        );
                    }
                    emit(&report("progress", reached.len()));
                }
                _ = sigterm.recv() => break,
            }
        }
        // As `informant run` stops on SIGTERM: cursors saved, the journal flushed.
        let lists = lists();
        runtime.stop().await;
        let mut stopped = report("stopped", reached.len());
        stopped.lists = lists;
        emit(&stopped);
    }

    fn emit(report: &Report) {
        let mut stdout = std::io::stdout().lock();
        // The parent reads lines; a broken pipe means it is gone, and so should we be.
        serde_json::to_writer(&mut stdout, report).expect("write a report");
        stdout.write_all(b"\n").expect("write a report");
        stdout.flush().expect("write a report");
    }
}
