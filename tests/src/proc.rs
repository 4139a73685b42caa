//! What this process and the machine used, read from `/proc` (for the benchmarks' figures).

use std::sync::LazyLock;

/// Clock ticks per second, the unit of `/proc`'s CPU times.
static TICKS: LazyLock<f64> = LazyLock::new(|| {
    // SAFETY: sysconf only reads a system constant.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
});

/// This process's resident set size in bytes, from `/proc/self/status`.
pub fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// CPU seconds the whole machine was busy (steal included: this may be a VM), from `/proc/stat`.
pub fn machine_busy_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let at = |i: usize| ticks.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal; guest time is already in user.
    (at(0) + at(1) + at(2) + at(5) + at(6) + at(7)) as f64 / *TICKS
}

/// CPU seconds (user + system) this process used, from `/proc/self/stat`.
pub fn cpu_seconds() -> f64 {
    cpu_ticks(&std::fs::read_to_string("/proc/self/stat").unwrap_or_default()) as f64 / *TICKS
}

/// CPU seconds (user + system) this process's threads named `name` (`comm`) used.
pub fn thread_cpu_seconds(name: &str) -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    let ticks: u64 = tasks
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim_end() == name)
        })
        .map(|t| cpu_ticks(&std::fs::read_to_string(t.path().join("stat")).unwrap_or_default()))
        .sum();
    ticks as f64 / *TICKS
}

/// utime + stime of a `/proc/.../stat` line, in clock ticks.
fn cpu_ticks(stat: &str) -> u64 {
    // The command name (field 2) may hold spaces; fields are counted after its closing paren.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15; `rest` starts at field 3.
    field(11) + field(12)
}

/// The CPUs each thread of process `pid` whose name (`comm`, at most 15 bytes) is `name` may run
/// on, sorted, from `/proc/<pid>/task/*/status`.
pub fn thread_cpus(pid: u32, name: &str) -> Vec<Vec<usize>> {
    let mut seen = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return seen;
    };
    for task in tasks.flatten() {
        let path = task.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let status = std::fs::read_to_string(path.join("status")).unwrap_or_default();
        if let Some(list) = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        {
            seen.push(cpu_list(list.trim()));
        }
    }
    seen.sort();
    seen
}

/// A kernel CPU list (`0-2,5`) as its CPUs (`[0, 1, 2, 5]`).
pub fn cpu_list(list: &str) -> Vec<usize> {
    list.split(',')
        .filter(|part| !part.is_empty())
        .flat_map(|part| match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().unwrap_or(0), b.parse().unwrap_or(0));
                (a..=b).collect::<Vec<_>>()
            }
            None => part.parse().into_iter().collect(),
        })
        .collect()
}
