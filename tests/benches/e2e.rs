//! End-to-end benchmark, the user's path: HTTP in, plugins out. Prints figures; asserts nothing
//! about speed, but fails loudly when something is wrong (a plugin fails an event, miscounts, a
//! watch relists, or a client stops making progress for `E2E_STALL_SECS`).
//!
//! The parent process runs the embedded API server with `E2E_PODS` pods (default 100 000) of
//! realistic JSON (~2.4 KB as written, ~1 KB of it `metadata.managedFields`, which the server
//! keeps and sends, as a real API server does) and, for
//! each configuration, re-executes this binary as a client in a child process (so the client's
//! RSS and CPU are its own) and pushes `E2E_MODS` modifications (default 200 000, rounded up to a
//! whole number of rounds over the pods) in-process as fast as it can. By default
//! (`E2E_WRITES=verbatim`) each modification is stored as given (`DevServer::replace_verbatim`),
//! so the stream is as fast as the client takes it, as the synthetic stream was: through
//! the server's full write path (`E2E_WRITES=api`: defaulting, validation, field management)
//! the server writes 12-15k pods/s on two cores, less than the clients can take, and it is the
//! server that is measured. Configurations
//! (`E2E_CONFIGS`, comma-separated, run in the order given; default all five):
//! - `kube`: the baseline, `kube::runtime::watcher` + `reflector` over `Api<Pod>` with 10 inline
//!   closures that read the labels of every event;
//! - `meta1`, `meta10`, `meta50`: Informant started as `informant run` starts it
//!   (`Runtime::start` over a plugins directory) with 1, 10, 50 copies of the bench plugin
//!   (`tests/plugins/bench`) reading the label from the host-parsed metadata;
//! - `parse10`: 10 plugins that parse the object's JSON and read the label from it;
//! - any Informant configuration with an `s` suffix (`meta10s`, not in the default set): the
//!   same with durable delivery (`--state-dir` in a new temporary directory), for what
//!   persistence costs. `E2E_CONFIGS=meta10,meta10s E2E_RATE=10000` compares CPU%, events/s and
//!   RSS with and without it at 10k events/s; a table at the end gives the bytes the state's
//!   journal wrote per pod of the replay and per modification of the push (which starts once
//!   the replay's writes are on disk, so that it measures its own), and the state dir's size
//!   on disk.
//!
//! Completion is counted, never guessed: modification `m` sets label `round` on pod
//! `m % pods`, so the last round touches every pod last. Each plugin (and each kube handler)
//! counts the replay and the events carrying the configuration's final round, and reports when
//! both reach the pod count (the host coalesces per key, but every key's final version arrives
//! exactly once).
//!
//! Per configuration it prints (one line as it finishes, a table at the end, progress every few
//! seconds in between):
//! - sync: the informer's first list applied (kube: the first `InitDone`; Informant: the
//!   informer's own `synced` event, caught by a tracing layer), and start: `Runtime::start`
//!   returned, i.e. every plugin loaded and registered (kube: the same as sync);
//! - replay: every handler had its initial replay;
//! - the informer's watch events/s, from the first modification until it had received them all;
//! - final: from the first modification until every handler saw every key's final version, and
//!   events/s from that (against the baseline's in `vs kube`); handler (plugin) calls/s then;
//! - the client's RSS per pod at sync and at the end, its CPU over the whole run and the push;
//! - for Informant, the dispatch delay's p50 and p99 (the informer receiving an event to a plugin
//!   taking it, bucket bounds of `informant_plugin_dispatch_delay_seconds`, over every plugin);
//! - the pusher's rate (the devserver's writes, in-process) and `others%`: CPU the rest of the
//!   machine (other processes, a hypervisor's steal) took meanwhile. Server, pusher and client
//!   share the machine's cores, and anything but ~0 there skews every figure.
//!
//! `cargo bench -p informant-tests --bench e2e` (builds the plugins for wasm32-wasip2 first);
//! small: `E2E_PODS=5000 E2E_MODS=10000 E2E_CONFIGS=kube,meta10 cargo bench -p informant-tests --bench e2e`.
//! Paced: `E2E_RATE=10000` pushes that many modifications per second (in 1 ms ticks) instead of
//! as fast as it can, for the dispatch delay at a given load (the target: p99 under 1 ms
//! at 10k events/s into 50 plugins, `E2E_CONFIGS=meta50`).
//! `E2E_AFFINITY=pin` runs each client as `informant run --worker-affinity pin`.
//! `E2E_SERVER_CPU=idle` runs the server and pusher at `SCHED_IDLE`, so that they only take CPU
//! the client leaves: a stand-in for a server on another machine (the client's CPU figures are
//! unchanged; it needs CAP_SYS_NICE to give the client the normal policy back).
//! `E2E_ROUNDS=N` runs the configurations N times, interleaved (the baseline once more first, to
//! warm up, when it leads the list), and prints each one's ratio to the baseline of its round
//! and their median. `E2E_GUARD=FILE` is CI's regression guard: the file fixes the sizes, the
//! rounds and the configurations, and the run fails when a median ratio falls more than the
//! file's margin below the figure committed there (`tests/benches/e2e-guard.toml`; see
//! `informant_tests::bench_guard`).
//! The full default run takes about three and a half minutes on two cores.

/// The allocator `informant run` uses, so the client's RSS is the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use informant_tests::proc::{cpu_seconds, machine_busy_seconds, rss_bytes, thread_cpu_seconds};
use std::time::{Duration, Instant};

use futures::StreamExt;
use informant_devserver::{DevServer, DevServerConfig};
use informant_runtime::informer::{FactoryOptions, InitialList};
use informant_runtime::plugin::exec::histogram::DurationHistogram;
use informant_runtime::plugin::exec::supervisor::PluginState;
use informant_runtime::plugin::imports::log::PluginLog;
use informant_runtime::plugin::load::host_config::HostConfig;
use informant_runtime::runtime::{Runtime, RuntimeOptions, StateOptions};
use informant_runtime::workers::{self, WorkerAffinity};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher::{self, Event as WatcherEvent};
use kube::runtime::{WatchStreamExt, reflector};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::broadcast;

mod common;
use common::{NAMESPACE, dir_bytes, env_number, mib, pod, pod_name, warm_compile_cache};
use informant_tests::bench_guard::{Guard, median};

/// Handlers of the kube-runtime baseline.
const KUBE_HANDLERS: usize = 10;
/// How often the client samples its counters (for the informer's receive time and stall checks).
const SAMPLE: Duration = Duration::from_millis(50);
/// How often the client reports progress.
const PROGRESS: Duration = Duration::from_secs(3);

/// How the parent stores each modification (`E2E_WRITES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Writes {
    /// `DevServer::replace_verbatim`: stored as given, a synthetic stream.
    Verbatim,
    /// `DevServer::update`: the server's write path, as a client's PUT takes it.
    Api,
}

impl Writes {
    fn from_env() -> Writes {
        match std::env::var("E2E_WRITES").as_deref() {
            Err(_) | Ok("verbatim") => Writes::Verbatim,
            Ok("api") => Writes::Api,
            Ok(other) => panic!("E2E_WRITES must be `verbatim` or `api`, not {other:?}"),
        }
    }
}

fn main() {
    // One binary, two roles: the parent re-executes itself as the measured client, so that the
    // client's RSS and CPU are its own and not the server's.
    let client = std::env::var("E2E_ROLE").as_deref() == Ok("client");
    // The client's workers are placed as `informant run` places them (`E2E_AFFINITY=pin` gives each its
    // own CPU); the server's never pinned, as it stands in for another machine.
    let affinity = match std::env::var("E2E_AFFINITY") {
        _ if !client => WorkerAffinity::Off,
        Err(_) => WorkerAffinity::default(),
        Ok(a) => a.parse().unwrap_or_else(|e| panic!("E2E_AFFINITY: {e}")),
    };
    if !client && server_cpu() == ServerCpu::Idle {
        // Before the runtime starts: every thread it starts inherits the policy.
        set_policy(libc::SCHED_IDLE).expect("SCHED_IDLE for the server's threads");
    }
    let runtime = workers::runtime(affinity).expect("tokio runtime");
    init_tracing(client);
    if client {
        runtime.block_on(client::run());
    } else {
        runtime.block_on(parent::run());
    }
}

/// How the server's threads share the CPUs with the client (`E2E_SERVER_CPU`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ServerCpu {
    /// As any other process: the two compete.
    Shared,
    /// `SCHED_IDLE`: the server and pusher run only on CPU the client leaves, standing in for a
    /// server on another machine (the client is given the normal policy back).
    Idle,
}

fn server_cpu() -> ServerCpu {
    match std::env::var("E2E_SERVER_CPU").as_deref() {
        Err(_) | Ok("shared") => ServerCpu::Shared,
        Ok("idle") => ServerCpu::Idle,
        Ok(other) => panic!("E2E_SERVER_CPU must be `shared` or `idle`, not {other:?}"),
    }
}

/// Sets the calling thread's scheduling policy (priority 0), inherited by what it starts.
fn set_policy(policy: libc::c_int) -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler only reads `param`; 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, policy, &param) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Warnings and errors only (unless `RUST_LOG` says otherwise), on stderr: the child's stdout is
/// its report channel. The client also listens for its informer's `synced` event.
fn init_tracing(client: bool) {
    use tracing_subscriber::filter::{EnvFilter, Targets};
    use tracing_subscriber::prelude::*;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into());
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(filter);
    let list_applied = client.then(|| {
        client::ListApplied
            .with_filter(Targets::new().with_target("informant_informer", tracing::Level::INFO))
    });
    let _ = tracing_subscriber::registry()
        .with(fmt)
        .with(list_applied)
        .try_init();
}

/// One configuration of the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Setup {
    /// kube-runtime watcher + reflector with inline handlers.
    Kube,
    /// Informant with this many bench plugins, parsing the JSON or not, with durable delivery
    /// (`--state-dir`) or not.
    Informant {
        plugins: usize,
        parse: bool,
        state: bool,
    },
}

impl Setup {
    fn parse(name: &str) -> Setup {
        let name = name.trim();
        if name == "kube" {
            return Setup::Kube;
        }
        let (state, rest) = match name.strip_suffix('s') {
            Some(rest) => (true, rest),
            None => (false, name),
        };
        let (parse, count) = if let Some(n) = rest.strip_prefix("meta") {
            (false, n)
        } else if let Some(n) = rest.strip_prefix("parse") {
            (true, n)
        } else {
            panic!("unknown configuration `{name}`: expected kube, metaN[s] or parseN[s]");
        };
        let plugins = count
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or_else(|| panic!("`{name}`: expected a plugin count > 0 after the mode"));
        Setup::Informant {
            plugins,
            parse,
            state,
        }
    }

    fn name(self) -> String {
        match self {
            Setup::Kube => "kube".into(),
            Setup::Informant {
                plugins,
                parse,
                state,
            } => format!(
                "{}{plugins}{}",
                if parse { "parse" } else { "meta" },
                if state { "s" } else { "" }
            ),
        }
    }

    /// Handlers (or plugins) each seeing every event.
    fn handlers(self) -> usize {
        match self {
            Setup::Kube => KUBE_HANDLERS,
            Setup::Informant { plugins, .. } => plugins,
        }
    }
}

/// One line the client writes to stdout: a phase reached, or progress.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Report {
    /// `starting`, `synced`, `ready` (every handler had its replay), `flushed` (with a state
    /// dir: the replay on disk), `progress`, `done` or `journal` (with a state dir, last).
    phase: String,
    /// Seconds since the client started.
    t: f64,
    /// Resident set size, bytes.
    rss: u64,
    /// CPU time (user + system) since the client started, seconds.
    cpu: f64,
    /// Objects the informer received (listed and watched), cumulative.
    received: u64,
    /// Handler (plugin) calls completed, cumulative.
    calls: u64,
    /// Handlers that reached the goal of the current phase.
    finished: usize,
    /// Client time at which the informer had received every modification (in `done`).
    received_all: Option<f64>,
    /// When the informer's first list was applied (in `synced`).
    list_t: f64,
    /// The RSS then.
    list_rss: u64,
    /// Dispatch delay p50 and p99 over every plugin, as bucket bounds in seconds (none: above
    /// the last bound), in Informant's `done`.
    dispatch: Option<[Option<f64>; 2]>,
    /// With a state dir: the journal's counters (at `ready` as they stand; at `flushed`, right
    /// after it, and at `journal`, after `done`, once everything journaled is on disk).
    journal: Option<JournalFigures>,
}

/// The durable journal's counters, as the client reports them.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
struct JournalFigures {
    /// Bytes written to the state file.
    bytes: u64,
    /// Ops committed (object versions, deletions, cursors).
    ops: u64,
    /// CPU seconds the state's writer thread used.
    writer_cpu: f64,
}

mod parent {
    //! The server, the pusher, the children and the table.

    use super::*;

    /// What one configuration measured.
    struct Outcome {
        setup: Setup,
        synced: Report,
        ready: Report,
        done: Report,
        /// From the first modification until the client reported every final version handled.
        final_time: Duration,
        /// Wall time of the push, and the part of it spent inside `DevServer::update`.
        push_time: Duration,
        in_update: Duration,
        /// CPU the rest of the machine (other processes, the hypervisor's steal) took while the
        /// client ran, in % of one core: anything but ~0 skews the figures.
        others: f64,
        /// With a state dir: the journal once flushed at the end, and the dir's size on disk.
        journal: Option<JournalFigures>,
        /// The report once the replay's journal was on disk, before the push.
        flushed: Option<Report>,
        state_bytes: Option<u64>,
    }

    /// Sizes, in one place for the children's environment and the report.
    struct Sizes {
        pods: usize,
        mods: usize,
        rounds: u64,
    }

    pub(super) async fn run() {
        let begun = Instant::now();
        let guard = std::env::var_os("E2E_GUARD").map(|path| {
            if let Some(set) = [
                "E2E_PODS",
                "E2E_MODS",
                "E2E_CONFIGS",
                "E2E_ROUNDS",
                "E2E_RATE",
            ]
            .into_iter()
            .find(|v| std::env::var_os(v).is_some())
            {
                panic!("E2E_GUARD's file fixes the run: unset {set}");
            }
            // cargo runs a bench in its package's directory: a path from the workspace root,
            // as CI and the book give it, is found there too.
            let path = PathBuf::from(path);
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
            let path = match path.is_relative() && !path.exists() {
                true => root.join(path),
                false => path,
            };
            Guard::load(&path).unwrap_or_else(|e| panic!("{e}"))
        });
        let pods = guard
            .as_ref()
            .map_or_else(|| env_number("E2E_PODS", 100_000), |g| g.pods)
            .max(1);
        let asked = guard
            .as_ref()
            .map_or_else(|| env_number("E2E_MODS", 200_000), |g| g.mods)
            .max(1);
        let repeats = guard
            .as_ref()
            .map_or_else(|| env_number("E2E_ROUNDS", 1), |g| g.rounds)
            .max(1);
        // Whole rounds, so that the last round is the last write of every pod.
        let rounds = asked.div_ceil(pods) as u64;
        let sizes = Sizes {
            pods,
            mods: rounds as usize * pods,
            rounds,
        };
        let setups: Vec<Setup> = guard
            .as_ref()
            .map(Guard::configs)
            .or_else(|| std::env::var("E2E_CONFIGS").ok())
            .unwrap_or_else(|| "kube,meta1,meta10,meta50,parse10".into())
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(Setup::parse)
            .collect();
        let stall = env_number("E2E_STALL_SECS", 120);
        let writes = Writes::from_env();
        let rate = std::env::var("E2E_RATE").ok().map(|r| {
            r.parse::<u32>().ok().filter(|r| *r > 0).unwrap_or_else(|| {
                panic!("E2E_RATE must be a positive number of events/s, not {r:?}")
            })
        });

        let wasm = setups
            .iter()
            .any(|s| matches!(s, Setup::Informant { .. }))
            .then(|| {
                let wasm = informant_tests::plugins::wasm("bench-plugin");
                warm_compile_cache(&wasm);
                wasm
            });

        let server = Arc::new(
            DevServer::start(DevServerConfig {
                // Every event of one configuration's push stays resumable: a client that falls
                // behind is measured slow rather than sent down the relist path.
                watch_history: sizes.mods + sizes.pods + 10_000,
                ..Default::default()
            })
            .await
            .expect("start the API server"),
        );
        server
            .create(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
            )
            .expect("create the namespace");
        let seeding = Instant::now();
        let seeded = server
            .seed((0..pods).map(|i| pod(i, 0, 0)))
            .expect("seed the pods");
        assert_eq!(seeded, pods);
        let seed_time = seeding.elapsed();

        let written = serde_json::to_vec(&pod(0, 0, 0)).expect("pod JSON").len();
        let managed = serde_json::to_vec(&pod(0, 0, 0)["metadata"]["managedFields"])
            .expect("managedFields JSON")
            .len();
        let served = served_size(&server).await;
        println!(
            "e2e: {pods} pods, {} modifications per configuration ({rounds} rounds), configurations: {}",
            sizes.mods,
            setups
                .iter()
                .map(|s| s.name())
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!(
            "     pod JSON: {written} B as written ({managed} B managedFields), {served} B as the server serves it{}",
            if served + managed / 2 < written {
                " (the devserver drops managedFields on write)"
            } else {
                ""
            }
        );
        println!(
            "     seeded in {:.1}s; {} cores; server and pusher in this process, each client in its own; modifications written {}",
            seed_time.as_secs_f64(),
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            match writes {
                Writes::Verbatim => "verbatim (E2E_WRITES=api: through the server's write path)",
                Writes::Api => "through the server's write path",
            }
        );
        if let Some(rate) = rate {
            println!("     paced at {rate} modifications/s (E2E_RATE)");
        }
        if server_cpu() == ServerCpu::Idle {
            println!(
                "     server and pusher at SCHED_IDLE (E2E_SERVER_CPU=idle): only CPU the client leaves, as if on another machine"
            );
        }
        if std::env::var("E2E_AFFINITY").is_ok_and(|a| a.parse() == Ok(WorkerAffinity::Pin)) {
            println!("     each client's tokio workers pinned, one per CPU (E2E_AFFINITY=pin)");
        }

        if repeats > 1 {
            println!("     {repeats} rounds of every configuration, interleaved (E2E_ROUNDS)");
        }
        if let Some(g) = &guard {
            println!(
                "     guarded by {}: ratios to the baseline of the same round",
                g.path().display()
            );
        }

        let mut outcomes = Vec::new();
        let mut ratios: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        // Over several rounds the first baseline runs once more, uncounted, before them: the
        // first client of a run was measured up to a fifth slower (a cold server and page cache).
        let warm_up = repeats > 1 && setups.first() == Some(&Setup::Kube);
        if warm_up {
            println!("     the baseline runs once first to warm up, not counted");
        }
        let runs = warm_up
            .then_some(Setup::Kube)
            .into_iter()
            .chain((0..repeats).flat_map(|_| setups.iter().copied()));
        for (k, setup) in runs.enumerate() {
            // The baseline of this round: the last one run before (each round runs the list in
            // order, so a round's own when it lists `kube` first).
            let baseline = outcomes
                .iter()
                .rev()
                .find(|o: &&Outcome| o.setup == Setup::Kube);
            let dir = tempfile::tempdir().expect("plugins dir");
            let final_round = (k as u64 + 1) * sizes.rounds;
            if let Setup::Informant { plugins, parse, .. } = setup {
                let wasm = wasm.as_deref().expect("plugins were built");
                install(dir.path(), wasm, plugins, parse, pods, final_round);
            }
            let run = Run {
                server: &server,
                sizes: &sizes,
                stall,
                writes,
                rate,
            };
            // Durable delivery's state, new for the configuration (`meta10s`).
            let state = matches!(setup, Setup::Informant { state: true, .. })
                .then(|| tempfile::tempdir().expect("state dir"));
            let outcome = run
                .one(
                    setup,
                    final_round,
                    dir.path(),
                    state.as_ref().map(|d| d.path()),
                )
                .await;
            print_line(&outcome, &sizes, baseline);
            if warm_up && k == 0 {
                continue;
            }
            if let Some(r) = baseline.and_then(|b| to_baseline(&outcome, b, &sizes)) {
                ratios.entry(setup.name()).or_default().push(r);
            }
            outcomes.push(outcome);
        }
        print_table(&outcomes, &sizes);
        print_durable(&outcomes, &sizes);
        let medians = print_ratios(&ratios, repeats);
        println!("\nwhole run: {:.0}s", begun.elapsed().as_secs_f64());
        match Arc::try_unwrap(server) {
            Ok(server) => server.shutdown().await,
            Err(_) => unreachable!("the pushers have finished"),
        }
        if let Some(g) = guard {
            for (config, measured, committed) in g.outgrown(&medians) {
                println!(
                    "guard: {config} at {measured:.2}x has outgrown its figure {committed:.2}x in {}: worth raising",
                    g.path().display()
                );
            }
            let fell = g.check(&medians);
            if !fell.is_empty() {
                for f in &fell {
                    eprintln!("guard: {f}");
                }
                eprintln!(
                    "guard: {} of the configurations in {} fell; a regression, or a figure to lower with the reason in the commit",
                    fell.len(),
                    g.path().display()
                );
                std::process::exit(1);
            }
            println!("guard: every configuration within its margin");
        }
    }

    /// Events/s of `o` as a multiple of the baseline `b`'s.
    fn to_baseline(o: &Outcome, b: &Outcome, sizes: &Sizes) -> Option<f64> {
        (o.setup != Setup::Kube && b.setup == Setup::Kube)
            .then(|| figures(o, sizes).events_per_s / figures(b, sizes).events_per_s)
    }

    /// Prints each configuration's ratio to the baseline per round and their median; returns
    /// the medians.
    fn print_ratios(ratios: &BTreeMap<String, Vec<f64>>, repeats: usize) -> BTreeMap<String, f64> {
        if repeats > 1 && !ratios.is_empty() {
            println!(
                "\nevents/s to the kube-runtime baseline of the same round: each round, median"
            );
        }
        ratios
            .iter()
            .filter_map(|(config, rs)| {
                let m = median(rs)?;
                if repeats > 1 {
                    let each: Vec<String> = rs.iter().map(|r| format!("{r:.2}x")).collect();
                    println!("{config:<8} {}   median {m:.2}x", each.join(" "));
                }
                Some((config.clone(), m))
            })
            .collect()
    }

    /// The size of one pod as a client receives it.
    async fn served_size(server: &DevServer) -> usize {
        let request = kube::core::Request::new(format!("/api/v1/namespaces/{NAMESPACE}/pods"))
            .get(&pod_name(0), &Default::default())
            .expect("GET request");
        let body = server
            .client()
            .request_text(request)
            .await
            .expect("GET one pod");
        // Compact, as watch events carry it.
        let v: Value = serde_json::from_str(&body).expect("pod JSON");
        serde_json::to_vec(&v).expect("pod JSON").len()
    }

    /// `pNN.wasm` + `pNN.toml` for `plugins` copies of the bench plugin.
    fn install(
        dir: &Path,
        wasm: &Path,
        plugins: usize,
        parse: bool,
        pods: usize,
        final_round: u64,
    ) {
        let mode = if parse { "parse" } else { "meta" };
        // The longest deadline a host allows: two busy cores may preempt a call for a while, and
        // a call cut off would lose an event and fail the run.
        let manifest = format!(
            "description = \"e2e benchmark\"\n[limits]\ndeadline-ms = {}\n\
             [[watch]]\napi-version = \"v1\"\nkind = \"Pod\"\nnamespace = \"{NAMESPACE}\"\n\
             [config]\nmode = \"{mode}\"\npods = {pods}\nfinal-round = {final_round}\n",
            HostConfig::default().max_deadline_ms
        );
        for p in 0..plugins {
            // Manifest first: the reloader must never see the component without it.
            std::fs::write(dir.join(format!("p{p:02}.toml")), &manifest).expect("write manifest");
            std::fs::copy(wasm, dir.join(format!("p{p:02}.wasm"))).expect("copy wasm");
        }
    }

    /// What every configuration's run shares.
    struct Run<'a> {
        server: &'a Arc<DevServer>,
        sizes: &'a Sizes,
        stall: usize,
        writes: Writes,
        /// Modifications per second, or as fast as the pusher goes.
        rate: Option<u32>,
    }

    impl Run<'_> {
        /// Runs one client through sync, replay and the push; fails loudly if it does not finish.
        async fn one(
            &self,
            setup: Setup,
            final_round: u64,
            plugins_dir: &Path,
            state_dir: Option<&Path>,
        ) -> Outcome {
            let Run {
                server,
                sizes,
                stall,
                writes,
                rate,
            } = *self;
            let name = setup.name();
            println!("\n[{name}] starting the client");
            let (wall0, busy0, ours0) = (Instant::now(), machine_busy_seconds(), cpu_seconds());
            let exe = std::env::current_exe().expect("this benchmark's executable");
            let mut command = tokio::process::Command::new(exe);
            if server_cpu() == ServerCpu::Idle {
                // SAFETY: only a syscall runs between fork and exec.
                unsafe { command.pre_exec(|| set_policy(libc::SCHED_OTHER)) };
            }
            let mut child = command
                .env("E2E_ROLE", "client")
                .env("E2E_SERVER", server.url())
                .env("E2E_SETUP", &name)
                .env("E2E_PODS", sizes.pods.to_string())
                .env("E2E_MODS", sizes.mods.to_string())
                .env("E2E_FINAL_ROUND", final_round.to_string())
                .env("E2E_PLUGINS", plugins_dir)
                .env("E2E_STALL_SECS", stall.to_string())
                .env("E2E_STATE_DIR", state_dir.unwrap_or(Path::new("")))
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()
                .unwrap_or_else(|e| {
                    panic!("start the client (with E2E_SERVER_CPU=idle, giving it the normal scheduling policy back needs CAP_SYS_NICE): {e}")
                });
            let mut lines = BufReader::new(child.stdout.take().expect("client stdout")).lines();
            let pushed = Arc::new(AtomicU64::new(0));
            let (mut synced, mut ready, mut pusher) = (None, None, None);
            // With a state dir: the client's report once the replay's journal is on disk (the
            // push waits for it, so that it measures the push's writes alone).
            let mut flushed: Option<Report> = None;
            let mut push_started = None;
            // The previous report, for the client's CPU use between two of them.
            let mut last = Report::default();
            let done = loop {
                let line = match lines.next_line().await {
                    Ok(Some(line)) => line,
                    Ok(None) | Err(_) => {
                        let status = child.wait().await;
                        panic!("[{name}] the client ended before finishing: {status:?}");
                    }
                };
                let report: Report = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("[{name}] unreadable client line {line:?}: {e}"));
                let previous = std::mem::replace(&mut last, report.clone());
                match report.phase.as_str() {
                    "synced" => {
                        println!(
                            "[{name}] first list applied at {:.1}s (RSS {:.0} MiB); started at {:.1}s (RSS {:.0} MiB)",
                            report.list_t,
                            mib(report.list_rss),
                            report.t,
                            mib(report.rss)
                        );
                        synced = Some(report);
                    }
                    "ready" | "flushed" => {
                        if report.phase == "ready" {
                            println!(
                                "[{name}] every handler had its replay at {:.1}s; pushing {} modifications{}",
                                report.t,
                                sizes.mods,
                                if state_dir.is_some() {
                                    " once the state's journal has written the replay"
                                } else {
                                    ""
                                }
                            );
                            ready = Some(report);
                            if state_dir.is_some() {
                                continue;
                            }
                        } else {
                            println!("[{name}] the replay's journal on disk at {:.1}s", report.t);
                            flushed = Some(report);
                        }
                        push_started = Some(Instant::now());
                        let (server, pushed) = (server.clone(), pushed.clone());
                        let (pods, mods) = (sizes.pods, sizes.mods);
                        let base = final_round - sizes.rounds;
                        pusher = Some(tokio::task::spawn_blocking(move || {
                            push(&server, writes, rate, pods, mods, base, &pushed)
                        }));
                    }
                    "done" => break report,
                    _ => {
                        let goal = if ready.is_some() { "final" } else { "replay" };
                        let push = match push_started {
                            Some(_) => {
                                format!(
                                    "  pushed {}/{}",
                                    pushed.load(Ordering::Relaxed),
                                    sizes.mods
                                )
                            }
                            None => String::new(),
                        };
                        println!(
                            "[{name}] {:>6.1}s  received {:>9}  calls {:>10}  {goal} {}/{}{push}  RSS {:.0} MiB  CPU {:.0}%",
                            report.t,
                            report.received,
                            report.calls,
                            report.finished,
                            setup.handlers(),
                            mib(report.rss),
                            100.0 * (report.cpu - previous.cpu) / (report.t - previous.t).max(1e-9),
                        );
                    }
                }
            };
            let final_time = push_started.expect("the push started").elapsed();
            let others = machine_busy_seconds() - busy0 - (cpu_seconds() - ours0) - done.cpu;
            let others = 100.0 * others.max(0.0) / wall0.elapsed().as_secs_f64();
            let (push_time, in_update) = pusher
                .expect("the push started")
                .await
                .expect("the pusher panicked");
            // With a state dir, the client's last line: the journal once flushed.
            let journal = match state_dir {
                None => None,
                Some(_) => {
                    let line = lines
                        .next_line()
                        .await
                        .ok()
                        .flatten()
                        .unwrap_or_else(|| panic!("[{name}] no journal line after done"));
                    let report: Report = serde_json::from_str(&line).unwrap_or_else(|e| {
                        panic!("[{name}] unreadable client line {line:?}: {e}")
                    });
                    assert_eq!(report.phase, "journal", "[{name}] the line after done");
                    report.journal
                }
            };
            let status = child.wait().await.expect("wait for the client");
            assert!(status.success(), "[{name}] the client failed: {status}");
            Outcome {
                journal,
                flushed,
                state_bytes: state_dir.map(dir_bytes),
                setup,
                synced: synced.expect("a synced report"),
                ready: ready.expect("a ready report"),
                done,
                final_time,
                push_time,
                in_update,
                others,
            }
        }
    }

    /// Modifications `0..mods` in-process, as fast as one thread can or at `rate` per second:
    /// modification `m` moves pod `m % pods` to round `base + m / pods + 1`. Returns the wall
    /// time and the part of it inside the server's `update`.
    fn push(
        server: &DevServer,
        writes: Writes,
        rate: Option<u32>,
        pods: usize,
        mods: usize,
        base: u64,
        pushed: &AtomicU64,
    ) -> (Duration, Duration) {
        let started = Instant::now();
        let mut in_update = Duration::ZERO;
        for m in 0..mods {
            if let Some(rate) = rate {
                // In 1 ms ticks: each writes what the rate allows by then.
                while (m as f64) >= started.elapsed().as_secs_f64() * f64::from(rate) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            let object = pod(m % pods, base + (m / pods) as u64 + 1, m);
            let t = Instant::now();
            match writes {
                Writes::Verbatim => server.replace_verbatim(object),
                Writes::Api => server.update(object),
            }
            .expect("update a pod");
            in_update += t.elapsed();
            pushed.store(m as u64 + 1, Ordering::Relaxed);
        }
        (started.elapsed(), in_update)
    }

    /// The figures of one outcome, derived once for the line and the table.
    struct Figures {
        sync: f64,
        start: f64,
        replay: f64,
        received_per_s: f64,
        final_s: f64,
        events_per_s: f64,
        calls_per_s: f64,
        rss_sync: u64,
        rss_end: u64,
        cpu_run: f64,
        cpu_push: f64,
        push_per_s: f64,
        update_share: f64,
    }

    fn figures(o: &Outcome, sizes: &Sizes) -> Figures {
        let mods = sizes.mods as f64;
        let phase = (o.done.t - o.ready.t).max(1e-9);
        let received_window = o.done.received_all.unwrap_or(o.done.t) - o.ready.t;
        Figures {
            sync: o.synced.list_t,
            start: o.synced.t,
            replay: o.ready.t,
            received_per_s: (o.done.received - o.ready.received) as f64 / received_window.max(1e-9),
            final_s: o.final_time.as_secs_f64(),
            events_per_s: mods / o.final_time.as_secs_f64(),
            calls_per_s: (o.done.calls - o.ready.calls) as f64 / phase,
            rss_sync: o.synced.list_rss,
            rss_end: o.done.rss,
            cpu_run: 100.0 * o.done.cpu / o.done.t,
            cpu_push: 100.0 * (o.done.cpu - o.ready.cpu) / phase,
            push_per_s: mods / o.push_time.as_secs_f64(),
            update_share: o.in_update.as_secs_f64() / o.push_time.as_secs_f64(),
        }
    }

    fn ratio(o: &Outcome, baseline: Option<&Outcome>, sizes: &Sizes) -> String {
        baseline
            .and_then(|b| to_baseline(o, b, sizes))
            .map_or_else(|| "-".into(), |r| format!("{r:.2}x"))
    }

    fn print_line(o: &Outcome, sizes: &Sizes, baseline: Option<&Outcome>) {
        let f = figures(o, sizes);
        println!(
            "[{}] done: sync {:.1}s, started {:.1}s, replay {:.1}s, watch {:.0} ev/s received, \
             final versions {:.1}s after the first modification = {:.0} ev/s{}, {:.0} calls/s, \
             RSS {:.0} -> {:.0} MiB, CPU {:.0}% (push {:.0}%); push {:.0}/s ({:.0}% inside \
             update); other processes {:.0}% CPU{}",
            o.setup.name(),
            f.sync,
            f.start,
            f.replay,
            f.received_per_s,
            f.final_s,
            f.events_per_s,
            match ratio(o, baseline, sizes).as_str() {
                "-" => String::new(),
                r => format!(" ({r} kube's)"),
            },
            f.calls_per_s,
            mib(f.rss_sync),
            mib(f.rss_end),
            f.cpu_run,
            f.cpu_push,
            f.push_per_s,
            100.0 * f.update_share,
            o.others,
            match o.done.dispatch {
                Some([p50, p99]) =>
                    format!("; dispatch p50 {}, p99 {}", bound_ms(p50), bound_ms(p99)),
                None => String::new(),
            },
        );
    }

    /// What persistence wrote, for the configurations with a state dir.
    fn print_durable(outcomes: &[Outcome], sizes: &Sizes) {
        let with_state: Vec<&Outcome> = outcomes.iter().filter(|o| o.journal.is_some()).collect();
        if with_state.is_empty() {
            return;
        }
        println!(
            "\ndurable delivery (state dir): bytes the journal wrote to the state file; replay: \
             from the start until the replay was on disk ({} pods), push: from then until the \
             end, once on disk ({} modifications); the writer thread's CPU over the push",
            sizes.pods, sizes.mods
        );
        println!(
            "{:<8} {:>12} {:>11} {:>12} {:>11} {:>11} {:>13} {:>14} {:>11} {:>14}",
            "config",
            "replay MiB",
            "B/pod",
            "push MiB",
            "B/event",
            "ops/event",
            "flush@ready s",
            "state dir MiB",
            "writer CPU%",
            "writer us/event",
        );
        for o in with_state {
            let (Some(end), Some((ready, flushed_at))) = (
                o.journal,
                o.flushed.as_ref().and_then(|f| Some((f.journal?, f.t))),
            ) else {
                continue;
            };
            let push_bytes = end.bytes.saturating_sub(ready.bytes);
            let writer = end.writer_cpu - ready.writer_cpu;
            println!(
                "{:<8} {:>12.1} {:>11.0} {:>12.1} {:>11.0} {:>11.2} {:>13} {:>14.1} {:>11.0} {:>14.1}",
                o.setup.name(),
                mib(ready.bytes),
                ready.bytes as f64 / sizes.pods as f64,
                mib(push_bytes),
                push_bytes as f64 / sizes.mods as f64,
                end.ops.saturating_sub(ready.ops) as f64 / sizes.mods as f64,
                format!("{:.1}", flushed_at - o.ready.t),
                mib(o.state_bytes.unwrap_or(0)),
                100.0 * writer / (o.done.t - flushed_at).max(1e-9),
                writer * 1e6 / sizes.mods as f64,
            );
        }
    }

    /// A quantile's bucket bound as `<= x ms`.
    fn bound_ms(bound: Option<f64>) -> String {
        match bound {
            Some(b) => format!("<= {:.2} ms", b * 1e3),
            None => "above the last bucket".into(),
        }
    }

    fn print_table(outcomes: &[Outcome], sizes: &Sizes) {
        let per_pod = |bytes: u64| bytes as f64 / 1024.0 / sizes.pods as f64;
        println!(
            "\n{} pods, {} modifications per configuration; times from the client's start \
             (sync: first list applied; start: ready to serve, plugins loaded; replay) or from \
             the first modification (final)",
            sizes.pods, sizes.mods
        );
        println!(
            "{:<8} {:>6} {:>7} {:>8} {:>10} {:>8} {:>9} {:>10} {:>12} {:>11} {:>16} {:>5} {:>8} {:>7} {:>8} {:>7}",
            "config",
            "sync s",
            "start s",
            "replay s",
            "recv ev/s",
            "final s",
            "ev/s",
            "calls/s",
            "KiB/pod@sync",
            "KiB/pod@end",
            "RSS MiB sync/end",
            "CPU%",
            "CPU%push",
            "vs kube",
            "push/s",
            "others%",
        );
        for (i, o) in outcomes.iter().enumerate() {
            let f = figures(o, sizes);
            // Each row against the baseline of its own round.
            let baseline = outcomes[..i].iter().rev().find(|b| b.setup == Setup::Kube);
            println!(
                "{:<8} {:>6.1} {:>7.1} {:>8.1} {:>10.0} {:>8.1} {:>9.0} {:>10.0} {:>12.2} {:>11.2} {:>16} {:>5.0} {:>8.0} {:>7} {:>8.0} {:>7.0}",
                o.setup.name(),
                f.sync,
                f.start,
                f.replay,
                f.received_per_s,
                f.final_s,
                f.events_per_s,
                f.calls_per_s,
                per_pod(f.rss_sync),
                per_pod(f.rss_end),
                format!("{:.0}/{:.0}", mib(f.rss_sync), mib(f.rss_end)),
                f.cpu_run,
                f.cpu_push,
                ratio(o, baseline, sizes),
                f.push_per_s,
                o.others,
            );
        }
    }
}

mod client {
    //! The measured client: a kube-runtime baseline or an Informant runtime, reporting on stdout.

    use super::*;

    /// The client's settings, from the parent's environment.
    struct Settings {
        setup: Setup,
        pods: u64,
        mods: u64,
        final_round: String,
        plugins: PathBuf,
        stall: Duration,
        /// Durable delivery's state dir (`meta10s`), and the cluster it is for.
        state: Option<StateOptions>,
    }

    fn var(name: &str) -> String {
        std::env::var(name).unwrap_or_else(|_| panic!("client: {name} is not set"))
    }

    pub(super) async fn run() {
        let started = Instant::now();
        let settings = Settings {
            setup: Setup::parse(&var("E2E_SETUP")),
            pods: var("E2E_PODS").parse().expect("E2E_PODS"),
            mods: var("E2E_MODS").parse().expect("E2E_MODS"),
            final_round: var("E2E_FINAL_ROUND"),
            plugins: PathBuf::from(var("E2E_PLUGINS")),
            stall: Duration::from_secs(var("E2E_STALL_SECS").parse().expect("E2E_STALL_SECS")),
            state: Some(var("E2E_STATE_DIR"))
                .filter(|d| !d.is_empty())
                .map(|dir| StateOptions {
                    dir: dir.into(),
                    cluster: var("E2E_SERVER"),
                    ..Default::default()
                }),
        };
        let uri = var("E2E_SERVER").parse().expect("E2E_SERVER is a URI");
        let client =
            kube::Client::try_from(kube::Config::new(uri)).expect("plain-http kube client");
        let mut out = Out {
            started,
            phase: Phase::Replay,
            ready: Report::default(),
            received_all: None,
            dispatch: None,
            journal: None,
            stall: Stall::new(settings.stall),
            last_progress: Instant::now(),
        };
        match settings.setup {
            Setup::Kube => kube_client(client, &settings, &mut out).await,
            Setup::Informant { .. } => informant_client(client, &settings, &mut out).await,
        }
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Phase {
        Replay,
        Final,
    }

    /// Writes reports, tracks the phase and watches for stalls.
    struct Out {
        started: Instant,
        phase: Phase,
        /// The counters when every handler had its replay.
        ready: Report,
        received_all: Option<f64>,
        /// Dispatch delay p50 and p99 (Informant), once known.
        dispatch: Option<[Option<f64>; 2]>,
        /// The journal's counters (durable delivery), once known.
        journal: Option<JournalFigures>,
        stall: Stall,
        last_progress: Instant,
    }

    impl Out {
        fn report(&self, phase: &str, received: u64, calls: u64, finished: usize) -> Report {
            Report {
                phase: phase.into(),
                t: self.started.elapsed().as_secs_f64(),
                rss: rss_bytes(),
                cpu: cpu_seconds(),
                received,
                calls,
                finished,
                received_all: self.received_all,
                dispatch: self.dispatch,
                journal: self.journal,
                ..Default::default()
            }
        }

        fn emit(&self, report: &Report) {
            let mut stdout = std::io::stdout().lock();
            // The parent reads lines; a broken pipe means it is gone, and so should we be.
            serde_json::to_writer(&mut stdout, report).expect("write a report");
            stdout.write_all(b"\n").expect("write a report");
            stdout.flush().expect("write a report");
        }

        fn phase(&mut self, phase: &str, received: u64, calls: u64, finished: usize) {
            let report = self.report(phase, received, calls, finished);
            self.emit(&report);
            if phase == "ready" {
                self.phase = Phase::Final;
                self.ready = report;
            }
        }

        /// Notes when the informer has received every modification, reports progress now and
        /// then, and fails the run when nothing moves for the stall limit.
        fn sample(&mut self, received: u64, calls: u64, finished: usize, mods: u64) {
            if self.phase == Phase::Final
                && self.received_all.is_none()
                && received - self.ready.received >= mods
            {
                self.received_all = Some(self.started.elapsed().as_secs_f64());
            }
            self.stall.check(received, calls);
            if self.last_progress.elapsed() >= PROGRESS {
                self.last_progress = Instant::now();
                let report = self.report("progress", received, calls, finished);
                self.emit(&report);
            }
        }
    }

    /// Fails the run when the counters have not moved for `limit`: a lost event or a hung
    /// plugin would otherwise leave it waiting forever.
    struct Stall {
        limit: Duration,
        last: (u64, u64),
        since: Instant,
    }

    impl Stall {
        fn new(limit: Duration) -> Self {
            Stall {
                limit,
                last: (0, 0),
                since: Instant::now(),
            }
        }

        fn check(&mut self, received: u64, calls: u64) {
            if (received, calls) != self.last {
                self.last = (received, calls);
                self.since = Instant::now();
            }
            assert!(
                self.since.elapsed() < self.limit,
                "client: no event received or handled for {:?} (received {received}, calls {calls})",
                self.limit
            );
        }
    }

    /// When the informer applied its first list, and the RSS then.
    static LIST_APPLIED: OnceLock<(Instant, u64)> = OnceLock::new();

    /// A tracing layer catching the informer's `synced` event (logged as it applies its first
    /// list): the one moment `Runtime::start` does not expose, as it returns only after every
    /// plugin is loaded and registered.
    pub(crate) struct ListApplied;

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for ListApplied {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            struct IsSynced(bool);
            impl tracing::field::Visit for IsSynced {
                fn record_debug(
                    &mut self,
                    field: &tracing::field::Field,
                    value: &dyn std::fmt::Debug,
                ) {
                    if field.name() == "message" {
                        self.0 = format!("{value:?}") == "synced";
                    }
                }
            }
            let mut synced = IsSynced(false);
            event.record(&mut synced);
            if synced.0 {
                LIST_APPLIED.get_or_init(|| (Instant::now(), rss_bytes()));
            }
        }
    }

    /// Counters of one inline handler of the baseline.
    #[derive(Default)]
    struct Tally {
        calls: AtomicU64,
        replayed: AtomicU64,
        finals: AtomicU64,
    }

    /// One inline handler of the baseline.
    type KubeHandler = Box<dyn FnMut(&WatcherEvent<Pod>) + Send>;

    /// The baseline as kube-rs users write it: a reflector-backed watcher stream, each event
    /// handed to every handler inline.
    async fn kube_client(client: kube::Client, s: &Settings, out: &mut Out) {
        let api: Api<Pod> = Api::namespaced(client, NAMESPACE);
        let (store, writer) = reflector::store();
        let stream =
            reflector(writer, watcher::watcher(api, watcher::Config::default())).default_backoff();
        let mut stream = std::pin::pin!(stream);
        let tallies: Vec<Arc<Tally>> = (0..KUBE_HANDLERS).map(|_| Arc::default()).collect();
        let mut handlers: Vec<KubeHandler> = tallies
            .iter()
            .map(|tally| {
                let (tally, final_round) = (tally.clone(), s.final_round.clone());
                Box::new(move |ev: &WatcherEvent<Pod>| {
                    let (pod, initial) = match ev {
                        WatcherEvent::InitApply(p) => (p, true),
                        WatcherEvent::Apply(p) | WatcherEvent::Delete(p) => (p, false),
                        WatcherEvent::Init | WatcherEvent::InitDone => return,
                    };
                    let round = pod.metadata.labels.as_ref().and_then(|l| l.get("round"));
                    tally.calls.fetch_add(1, Ordering::Relaxed);
                    if initial {
                        tally.replayed.fetch_add(1, Ordering::Relaxed);
                    } else if round == Some(&final_round) {
                        tally.finals.fetch_add(1, Ordering::Relaxed);
                    }
                }) as KubeHandler
            })
            .collect();
        let calls = || -> u64 {
            tallies
                .iter()
                .map(|t| t.calls.load(Ordering::Relaxed))
                .sum()
        };
        let reached = |count: fn(&Tally) -> &AtomicU64| {
            tallies
                .iter()
                .filter(|t| count(t).load(Ordering::Relaxed) >= s.pods)
                .count()
        };
        let mut received = 0u64;
        let mut lists = 0;
        let mut tick = tokio::time::interval(SAMPLE);
        loop {
            tokio::select! {
                item = stream.next() => {
                    let ev = match item {
                        Some(Ok(ev)) => ev,
                        Some(Err(e)) => {
                            eprintln!("client: watch error (kube-runtime retries): {e}");
                            continue;
                        }
                        None => panic!("client: the watch stream ended"),
                    };
                    if matches!(ev, WatcherEvent::InitApply(_) | WatcherEvent::Apply(_) | WatcherEvent::Delete(_)) {
                        received += 1;
                    }
                    for handler in &mut handlers {
                        handler(&ev);
                    }
                    match ev {
                        WatcherEvent::Init if lists > 0 => {
                            panic!("client: the watcher relisted; the run would count the replay twice")
                        }
                        WatcherEvent::InitDone => {
                            lists += 1;
                            assert_eq!(store.state().len() as u64, s.pods, "pods in the store after the list");
                            let mut synced = out.report("synced", received, calls(), 0);
                            (synced.list_t, synced.list_rss) = (synced.t, synced.rss);
                            out.emit(&synced);
                            let replayed = reached(|t| &t.replayed);
                            assert_eq!(replayed, KUBE_HANDLERS, "every handler saw the list");
                            out.phase("ready", received, calls(), replayed);
                        }
                        _ => {}
                    }
                    if out.phase == Phase::Final && reached(|t| &t.finals) == KUBE_HANDLERS {
                        out.sample(received, calls(), KUBE_HANDLERS, s.mods);
                        out.phase("done", received, calls(), KUBE_HANDLERS);
                        break;
                    }
                }
                _ = tick.tick() => {
                    let finished = match out.phase {
                        Phase::Replay => reached(|t| &t.replayed),
                        Phase::Final => reached(|t| &t.finals),
                    };
                    out.sample(received, calls(), finished, s.mods);
                }
            }
        }
        let miscounted = tallies
            .iter()
            .map(|t| t.finals.load(Ordering::Relaxed))
            .find(|f| *f != s.pods);
        assert_eq!(
            miscounted, None,
            "a handler counted more final versions than pods"
        );
    }

    /// Informant as `informant run` starts it, over a directory of bench plugins.
    async fn informant_client(client: kube::Client, s: &Settings, out: &mut Out) {
        let Setup::Informant { plugins, .. } = s.setup else {
            unreachable!("an Informant setup")
        };
        // Subscribed before anything loads: a plugin's lines cannot be missed.
        let (logs_tx, mut logs) = broadcast::channel::<PluginLog>(1 << 16);
        let options = RuntimeOptions {
            plugins: Some(s.plugins.clone()),
            plugin_logs: Some(logs_tx),
            config: HostConfig::default(),
            factory: FactoryOptions {
                initial_list: match std::env::var("E2E_INITIAL_LIST").as_deref() {
                    Ok("paginated") => InitialList::Paginated,
                    Ok("streaming") => InitialList::Streaming,
                    _ => InitialList::Auto,
                },
                ..Default::default()
            },
            state: s.state.clone(),
            ..Default::default()
        };
        let mut tick = tokio::time::interval(SAMPLE);
        let runtime = {
            // On a worker, as `Replica::start` runs it for `informant run`, not on this thread.
            let mut start = tokio::spawn(Runtime::start(client, options));
            loop {
                tokio::select! {
                    r = &mut start => break r.expect("the start task").expect("start the runtime"),
                    _ = tick.tick() => {
                        if out.last_progress.elapsed() >= PROGRESS {
                            out.last_progress = Instant::now();
                            let report = out.report("starting", 0, 0, 0);
                            out.emit(&report);
                        }
                    }
                }
            }
        };
        let host = runtime.host.clone().expect("a plugin host");
        let factory = runtime.factory.clone();
        let durable = runtime.durable.clone();
        let journal = || {
            durable.as_ref().map(|d| {
                let j = d.stats();
                assert_eq!(j.degraded, None, "the state journal degraded");
                JournalFigures {
                    bytes: j.bytes_written,
                    ops: j.ops,
                    writer_cpu: thread_cpu_seconds("informant-state"),
                }
            })
        };
        let received = || -> u64 {
            factory
                .informers()
                .iter()
                .map(|i| i.stats().objects_received.load(Ordering::Relaxed))
                .sum()
        };
        let calls = || -> u64 { host.running().iter().map(|r| r.supervisor.handled()).sum() };
        let running = host.running().len();
        assert_eq!(
            running, plugins,
            "plugins running after start (see the errors above)"
        );
        let (list_at, list_rss) = *LIST_APPLIED.get().expect(
            "the informer's `synced` event was not seen (did its message or target change?)",
        );
        let mut synced = out.report("synced", received(), calls(), 0);
        synced.list_t = list_at.duration_since(out.started).as_secs_f64();
        synced.list_rss = list_rss;
        out.emit(&synced);

        let mut replayed = BTreeSet::new();
        let mut done = BTreeSet::new();
        loop {
            tokio::select! {
                line = logs.recv() => {
                    let line = line.expect("plugin logs (a lag would lose a report)");
                    let Ok(message) = serde_json::from_str::<Value>(&line.message) else {
                        panic!("plugin {}: unexpected log line {:?}", line.plugin, line.message);
                    };
                    if message.get("replayed").is_some() {
                        assert!(replayed.insert(line.plugin.clone()), "{} replayed twice", line.plugin);
                    } else if message.get("done").is_some() {
                        assert!(out.phase == Phase::Final, "{} done before the push", line.plugin);
                        assert!(done.insert(line.plugin.clone()), "{} done twice", line.plugin);
                    }
                    if out.phase == Phase::Replay && replayed.len() == plugins {
                        out.journal = journal();
                        out.phase("ready", received(), calls(), plugins);
                        if let Some(d) = &durable {
                            // The parent pushes once this is reported: the push's writes alone.
                            d.close().await;
                            out.journal = journal();
                            let report = out.report("flushed", received(), calls(), plugins);
                            out.emit(&report);
                        }
                    } else if done.len() == plugins {
                        out.sample(received(), calls(), plugins, s.mods);
                        let running = host.running();
                        let quantile = |q| {
                            DurationHistogram::quantile_bound(running.iter().map(|r| r.supervisor.dispatch()), q)
                                .map(|d| d.as_secs_f64())
                        };
                        out.dispatch = Some([quantile(0.5), quantile(0.99)]);
                        out.phase("done", received(), calls(), plugins);
                        break;
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
                    let finished = match out.phase {
                        Phase::Replay => replayed.len(),
                        Phase::Final => done.len(),
                    };
                    out.sample(received(), calls(), finished, s.mods);
                }
            }
        }
        let lists: u64 = factory
            .informers()
            .iter()
            .map(|i| i.stats().lists.load(Ordering::Relaxed))
            .sum();
        assert_eq!(lists, 1, "the informer relisted during the run");
        if let Some(d) = &durable {
            // After `done`, so the flush is not timed: the journal once on disk.
            d.close().await;
            out.journal = journal();
            let report = out.report("journal", received(), calls(), plugins);
            out.emit(&report);
        }
        runtime.stop().await;
    }
}
