//! `--worker-affinity` as a user runs it: the real binary, its threads read from `/proc`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use informant_runtime::workers::allowed_cpus;
use informant_tests::proc::thread_cpus;

/// The workers' thread name as `/proc` shows it (15 bytes of `informant-worker`).
const WORKER: &str = "informant-worke";

/// `informant apiserver` on a free port with `args` before the subcommand, once it listens.
fn apiserver(args: &[&str], workers: usize) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_informant"))
        .args(args)
        .args(["apiserver", "--listen", "127.0.0.1:0"])
        .env("TOKIO_WORKER_THREADS", workers.to_string())
        .env("RUST_LOG", "warn")
        .stderr(Stdio::piped())
        .spawn()
        .expect("run informant");
    let stderr = BufReader::new(child.stderr.take().unwrap());
    for line in stderr.lines() {
        if line.expect("stderr").contains("API server listening") {
            return child;
        }
    }
    panic!(
        "informant apiserver ended before listening: {:?}",
        child.wait()
    );
}

/// The workers' CPUs once `done` holds of them, or as they are after 10 s.
fn workers_cpus(child: &Child, done: impl Fn(&[Vec<usize>]) -> bool) -> Vec<Vec<usize>> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen = thread_cpus(child.id(), WORKER);
        if done(&seen) || Instant::now() > deadline {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn stop(mut child: Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn pinned_workers_each_run_on_a_cpu_of_their_own() {
    let cpus = allowed_cpus().unwrap();
    let child = apiserver(&["--worker-affinity", "pin"], cpus.len());
    let seen = workers_cpus(&child, |s| {
        s.len() == cpus.len() && s.iter().all(|c| c.len() == 1)
    });
    stop(child);
    let each: Vec<Vec<usize>> = cpus.iter().map(|c| vec![*c]).collect();
    assert_eq!(seen, each, "one worker on each allowed CPU");
}

#[test]
fn by_default_the_scheduler_places_the_workers() {
    let cpus = allowed_cpus().unwrap();
    let child = apiserver(&[], cpus.len());
    // Serving, so every worker has started and parked: none pinned itself.
    let seen = workers_cpus(&child, |s| s.len() == cpus.len());
    stop(child);
    assert_eq!(seen.len(), cpus.len());
    assert!(seen.iter().all(|c| *c == cpus), "{seen:?}");
}

#[test]
fn pinning_more_workers_than_cpus_is_refused_saying_what_to_change() {
    let n = allowed_cpus().unwrap().len();
    for (affinity, workers) in [("pin", n + 1), ("pinned", n), ("pin", 0)] {
        let out = Command::new(env!("CARGO_BIN_EXE_informant"))
            .args([
                "--worker-affinity",
                affinity,
                "apiserver",
                "--listen",
                "127.0.0.1:0",
            ])
            .env("TOKIO_WORKER_THREADS", workers.to_string())
            .env_remove("RUST_BACKTRACE")
            .env_remove("RUST_LIB_BACKTRACE")
            .output()
            .expect("run informant");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{affinity} {workers}: {stderr}");
        let expect = match (affinity, workers) {
            ("pinned", _) => "worker affinity must be `off` or `pin`, not \"pinned\"".to_string(),
            (_, 0) => "TOKIO_WORKER_THREADS must be a positive number of threads, not \"0\"".into(),
            _ => format!("{workers} workers, {n} CPUs allowed"),
        };
        assert!(stderr.contains(&expect), "{affinity} {workers}: {stderr}");
        assert!(!stderr.contains("API server listening"), "{stderr}");
    }
}
