//! The process's tokio runtime, with a CPU of its own for each worker when the process was given
//! exactly one per worker.
//!
//! Why: on a two-CPU machine, Linux often ran both workers on one CPU while the other idled
//! (`perf sched`: one CPU 64 % idle while the other ran both workers back to back, a runnable
//! worker waiting up to 2.3 ms). The reflector wakes plugin tasks, the woken worker lands beside
//! the waker, and every event queued behind it waits. Pinned one per CPU, the dispatch p99 at
//! 10k events/s into 50 plugins went from ≤ 1.0–1.41 ms to ≤ 0.71 ms (`--bench plugins`).
//!
//! Pinning is only right when the CPUs are the process's own: with a CPU quota smaller than the
//! CPUs it may run on (a Kubernetes limit without a static CPU manager), fewer workers than
//! allowed CPUs are started and nothing is pinned, so the scheduler can still move a worker off
//! a CPU another process is busy on.

use std::cell::Cell;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Whether workers get a CPU each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorkerAffinity {
    /// One CPU per worker when the process may run on exactly as many CPUs as it has workers.
    #[default]
    Auto,
    /// Never pin: the scheduler places every thread.
    Off,
}

impl std::str::FromStr for WorkerAffinity {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(WorkerAffinity::Auto),
            "off" => Ok(WorkerAffinity::Off),
            _ => Err(format!(
                "worker affinity must be `auto` or `off`, not {s:?}"
            )),
        }
    }
}

/// A multi-threaded runtime with every driver enabled: as many workers as
/// `TOKIO_WORKER_THREADS` says, or as [`std::thread::available_parallelism`] (which honours a
/// cgroup CPU quota), each pinned as `affinity` says.
pub fn runtime(affinity: WorkerAffinity) -> io::Result<tokio::runtime::Runtime> {
    let workers = worker_count()?;
    let cpus = allowed_cpus()?;
    build(workers, cpus, affinity, "informant-worker")
}

/// The plan for `workers` workers on `cpus`: the CPU of each worker in start order, if pinned.
fn plan(workers: usize, cpus: &[usize], affinity: WorkerAffinity) -> Option<Vec<usize>> {
    (affinity == WorkerAffinity::Auto && workers > 1 && workers == cpus.len())
        .then(|| cpus.to_vec())
}

fn build(
    workers: usize,
    cpus: Vec<usize>,
    affinity: WorkerAffinity,
    thread_name: &str,
) -> io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .worker_threads(workers)
        .thread_name(thread_name)
        .enable_all();
    if let Some(plan) = plan(workers, &cpus, affinity) {
        tracing::debug!(workers, cpus = ?plan, "one CPU per tokio worker");
        let plan = Arc::new(plan);
        let next = Arc::new(AtomicUsize::new(0));
        let all = Arc::new(cpus);
        builder
            // Threads inherit their creator's mask: a blocking thread (or anything it starts)
            // spawned from a pinned worker must get every CPU back.
            .on_thread_start(move || {
                let _ = set_current_affinity(&all);
            })
            // Only workers park: each pins itself the first time it does, which a new worker with
            // nothing to do does at once.
            .on_thread_park(move || {
                thread_local!(static PINNED: Cell<bool> = const { Cell::new(false) });
                if PINNED.replace(true) {
                    return;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if let Some(cpu) = plan.get(i)
                    && let Err(e) = set_current_affinity(&[*cpu])
                {
                    tracing::warn!(cpu, error = %e, "could not pin a tokio worker to its CPU");
                }
            });
    }
    builder.build()
}

fn worker_count() -> io::Result<usize> {
    match std::env::var("TOKIO_WORKER_THREADS") {
        Ok(n) => match n.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("TOKIO_WORKER_THREADS must be a positive number of threads, not {n:?}"),
            )),
        },
        Err(_) => Ok(std::thread::available_parallelism()?.get()),
    }
}

/// The CPUs the calling thread may run on.
fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is the empty set; the kernel writes at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let bits = 8 * std::mem::size_of_val(&set);
    Ok((0..bits)
        .filter(|cpu| unsafe { libc::CPU_ISSET(*cpu, &set) })
        .collect())
}

/// Lets the calling thread run on `cpus` (as `allowed_cpus` lists them) only.
fn set_current_affinity(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: as in `allowed_cpus`; every CPU it lists is within the set's size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for cpu in cpus {
        unsafe { libc::CPU_SET(*cpu, &mut set) };
    }
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_only_when_the_process_has_exactly_one_cpu_per_worker() {
        use WorkerAffinity::*;
        assert_eq!(plan(2, &[0, 1], Auto), Some(vec![0, 1]));
        // A cpuset of odd CPUs: the workers get those, not 0 and 1.
        assert_eq!(plan(2, &[3, 7], Auto), Some(vec![3, 7]));
        // A quota below the CPUs allowed (a Kubernetes limit): the scheduler keeps placing them.
        assert_eq!(plan(2, &[0, 1, 2, 3], Auto), None);
        assert_eq!(plan(4, &[0, 1], Auto), None);
        // One worker has no sibling to be stacked on.
        assert_eq!(plan(1, &[5], Auto), None);
        assert_eq!(plan(2, &[0, 1], Off), None);
        assert_eq!("auto".parse(), Ok(Auto));
        assert_eq!("off".parse(), Ok(Off));
        for odd in ["Auto", " off", "on", ""] {
            let e = odd.parse::<WorkerAffinity>().unwrap_err();
            assert!(e.contains(&format!("{odd:?}")), "{e}");
        }
    }

    /// The CPUs each thread named `name` may run on, sorted, read from `/proc`.
    fn threads_cpus(name: &str) -> Vec<Vec<usize>> {
        let mut seen = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let path = task.path();
            let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
            if comm.trim_end() != name {
                continue;
            }
            let status = std::fs::read_to_string(path.join("status")).unwrap_or_default();
            let Some(list) = status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            else {
                continue;
            };
            seen.push(parse_cpu_list(list.trim()));
        }
        seen.sort();
        seen
    }

    /// `0-2,5` as `[0, 1, 2, 5]`.
    fn parse_cpu_list(list: &str) -> Vec<usize> {
        list.split(',')
            .flat_map(|part| match part.split_once('-') {
                Some((a, b)) => (a.parse().unwrap()..=b.parse().unwrap()).collect::<Vec<_>>(),
                None => vec![part.parse().unwrap()],
            })
            .collect()
    }

    /// Polls `threads_cpus(name)` until `done` holds of it, for at most 10 s.
    fn wait_for(name: &str, done: impl Fn(&[Vec<usize>]) -> bool) -> Vec<Vec<usize>> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let seen = threads_cpus(name);
            if done(&seen) || std::time::Instant::now() > deadline {
                return seen;
            }
            std::thread::yield_now();
        }
    }

    #[test]
    fn each_worker_runs_on_a_cpu_of_its_own_and_blocking_threads_on_all() {
        let cpus = allowed_cpus().unwrap();
        let workers = cpus.len();
        if workers < 2 {
            eprintln!("one CPU: nothing to pin");
            return;
        }
        let name = "wk-pinned";
        let rt = build(workers, cpus.clone(), WorkerAffinity::Auto, name).unwrap();
        // A new worker with nothing to do parks, and pins itself then.
        let seen = wait_for(name, |s| {
            s.len() == workers && s.iter().all(|c| c.len() == 1)
        });
        let each: Vec<Vec<usize>> = cpus.iter().map(|c| vec![*c]).collect();
        assert_eq!(seen, each, "one worker on each allowed CPU");
        // A blocking thread started by a pinned worker inherits its mask unless given it back.
        let blocking = rt
            .block_on(rt.spawn(async { tokio::task::spawn_blocking(allowed_cpus).await }))
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(blocking, cpus);
    }

    #[test]
    fn workers_are_left_to_the_scheduler_when_off_or_outnumbering_the_cpus() {
        let cpus = allowed_cpus().unwrap();
        let n = cpus.len();
        for (workers, affinity, name) in [
            (n, WorkerAffinity::Off, "wk-off"),
            (n + 1, WorkerAffinity::Auto, "wk-extra"),
        ] {
            let rt = build(workers, cpus.clone(), affinity, name).unwrap();
            // Every worker started, parked and ran tasks: none pinned itself.
            let started = wait_for(name, |s| s.len() == workers);
            assert_eq!(started.len(), workers);
            rt.block_on(async {
                let tasks: Vec<_> = (0..4 * workers).map(|_| tokio::spawn(async {})).collect();
                for t in tasks {
                    t.await.unwrap();
                }
            });
            let seen = threads_cpus(name);
            assert!(seen.iter().all(|c| *c == cpus), "{affinity:?}: {seen:?}");
        }
    }
}
