//! The process's tokio runtime, optionally with a CPU of its own for each worker.
//!
//! Why pinning exists: on a two-CPU machine, Linux often ran both workers on one CPU while the
//! other idled (`perf sched`: one CPU 64 % idle while the other ran both workers back to back, a
//! runnable worker waiting up to 2.3 ms). The reflector wakes plugin tasks, the woken worker lands
//! beside the waker, and every event queued behind it waits. Pinned one per CPU, the dispatch p99
//! at 10k events/s into 50 plugins went from ≤ 1.0–1.41 ms to ≤ 0.71 ms (`--bench plugins`).
//!
//! Why it is off by default: a pinned worker cannot leave a CPU another process is busy on. With
//! the API server on the same two CPUs, pinning cut the end-to-end throughput into 1 and 10
//! plugins by 45 % and 37 %. It is for CPUs the process has to itself (a Kubernetes pod with
//! whole CPUs under the static CPU manager policy, a dedicated machine).

use std::cell::Cell;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Whether workers get a CPU each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorkerAffinity {
    /// The scheduler places every thread.
    #[default]
    Off,
    /// Each worker on one CPU of its own; the process must be allowed exactly one CPU per worker.
    Pin,
}

impl std::str::FromStr for WorkerAffinity {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" => Ok(WorkerAffinity::Off),
            "pin" => Ok(WorkerAffinity::Pin),
            _ => Err(format!("worker affinity must be `off` or `pin`, not {s:?}")),
        }
    }
}

/// A multi-threaded runtime with every driver enabled: as many workers as
/// `TOKIO_WORKER_THREADS` says, or as [`std::thread::available_parallelism`] (which honours a
/// cgroup CPU quota), placed as `affinity` says.
pub fn runtime(affinity: WorkerAffinity) -> io::Result<tokio::runtime::Runtime> {
    let workers = worker_count()?;
    let cpus = allowed_cpus()?;
    build(workers, cpus, affinity, "informant-worker")
}

/// The CPU of each worker in start order, if pinned; an error when asked to pin workers that do
/// not match the CPUs one to one.
fn plan(
    workers: usize,
    cpus: &[usize],
    affinity: WorkerAffinity,
) -> io::Result<Option<Vec<usize>>> {
    match affinity {
        WorkerAffinity::Off => Ok(None),
        WorkerAffinity::Pin if workers == cpus.len() => Ok(Some(cpus.to_vec())),
        WorkerAffinity::Pin => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "pinning workers needs exactly one allowed CPU per worker: {workers} workers, \
                 {} CPUs allowed ({cpus:?}); set TOKIO_WORKER_THREADS={} or restrict the CPUs \
                 (taskset, a cpuset)",
                cpus.len(),
                cpus.len()
            ),
        )),
    }
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
    if let Some(plan) = plan(workers, &cpus, affinity)? {
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

/// The CPUs the calling thread may run on (its affinity mask).
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
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
    fn pins_only_one_worker_per_allowed_cpu_and_says_why_not_otherwise() {
        use WorkerAffinity::*;
        assert_eq!(plan(2, &[0, 1], Pin).unwrap(), Some(vec![0, 1]));
        // A cpuset of odd CPUs: the workers get those, not 0 and 1.
        assert_eq!(plan(2, &[3, 7], Pin).unwrap(), Some(vec![3, 7]));
        assert_eq!(plan(1, &[5], Pin).unwrap(), Some(vec![5]));
        assert_eq!(plan(2, &[0, 1], Off).unwrap(), None);
        assert_eq!(plan(2, &[0, 1, 2, 3], Off).unwrap(), None);
        // A quota below the CPUs allowed (a Kubernetes limit), or more workers than CPUs.
        for (workers, cpus) in [(2, vec![0, 1, 2, 3]), (4, vec![0, 1])] {
            let e = plan(workers, &cpus, Pin).unwrap_err().to_string();
            assert!(e.contains(&format!("{workers} workers")), "{e}");
            assert!(
                e.contains(&format!("TOKIO_WORKER_THREADS={}", cpus.len())),
                "{e}"
            );
        }
        assert_eq!("off".parse(), Ok(Off));
        assert_eq!("pin".parse(), Ok(Pin));
        for odd in ["Pin", " off", "auto", "on", ""] {
            let e = odd.parse::<WorkerAffinity>().unwrap_err();
            assert!(e.contains(&format!("{odd:?}")), "{e}");
        }
    }

    #[test]
    fn a_blocking_thread_started_by_a_pinned_worker_runs_on_every_cpu() {
        let cpus = allowed_cpus().unwrap();
        let workers = cpus.len();
        let rt = build(workers, cpus.clone(), WorkerAffinity::Pin, "wk-pinned").unwrap();
        // A worker pins itself when it first parks, which a new worker with nothing to do does
        // at once; a task may still land on one that has not yet.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let (worker, blocking) = loop {
            let (worker, blocking) = rt.block_on(async {
                tokio::spawn(async {
                    let worker = allowed_cpus().unwrap();
                    (worker, tokio::task::spawn_blocking(allowed_cpus).await)
                })
                .await
                .unwrap()
            });
            if worker.len() == 1 || std::time::Instant::now() > deadline {
                break (worker, blocking.unwrap().unwrap());
            }
        };
        assert_eq!(worker.len(), 1, "the worker is pinned");
        assert!(cpus.contains(&worker[0]));
        // It would inherit the worker's one CPU, were it not given them all back.
        assert_eq!(blocking, cpus);
        // Asked to pin more workers than CPUs: refused before any thread starts.
        let e = build(workers + 1, cpus, WorkerAffinity::Pin, "wk-refused").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
