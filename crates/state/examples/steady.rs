//! The writer's CPU per event in steady state: 100k objects of 2.4 KB stored, then 100k
//! updates paced at 10k events/s, with one plugin whose cursor follows the informer (it
//! handles each change as it is recorded; the journal reads it before each commit).
//!
//! `cargo run --release -p informant-state --example steady`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use informant_state::StateDir;

mod common;

const OBJECTS: u64 = 100_000;
const SIZE: usize = 2400;

fn object(i: u64, generation: u64) -> String {
    common::object(i, generation, SIZE)
}

/// CPU seconds of the state's writer thread.
fn writer_cpu() -> f64 {
    let mut total = 0.0;
    for task in std::fs::read_dir("/proc/self/task").expect("tasks") {
        let path = task.expect("task").path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if comm.trim() != "informant-state" {
            continue;
        }
        let stat = std::fs::read_to_string(path.join("stat")).expect("stat");
        let rest = &stat[stat.rfind(')').expect(")") + 2..];
        let f: Vec<&str> = rest.split(' ').collect();
        let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
        total += ticks / 100.0;
    }
    total
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (state, _) = StateDir::open(dir.path(), "https://127.0.0.1:6443").expect("open");
    let journal = state.journal();
    let mut seq = 0;
    let objects: Vec<(String, String)> = (0..OBJECTS)
        .map(|i| (format!("ns-{}/pod-{i}", i % 50), object(i, 1)))
        .collect();
    for (key, json) in &objects {
        seq += 1;
        journal.record("v1/pods", seq, key, Some(json));
    }
    journal.cursor("plugin", "v1/pods", seq, None, "scope");
    journal.flush().await;
    let updates: Vec<String> = (0..OBJECTS).map(|i| object(i, 2)).collect();
    let handled = Arc::new(AtomicU64::new(seq));
    let source = {
        let (journal, handled) = (journal.clone(), handled.clone());
        move || {
            let at = handled.load(Ordering::Relaxed);
            journal.cursor("plugin", "v1/pods", at, Some(at), "scope")
        }
    };
    // `PERIODIC=1`: the cursor is only saved every second, as without a source.
    let periodic = std::env::var("PERIODIC").is_ok();
    if !periodic {
        journal.set_cursor_source(Arc::new(source));
    }
    let (cpu0, bytes0, t0) = (writer_cpu(), journal.stats().bytes_written, Instant::now());
    for (i, json) in updates.iter().enumerate() {
        seq += 1;
        journal.record("v1/pods", seq, &objects[i].0, Some(json));
        handled.store(seq, Ordering::Relaxed);
        if periodic && seq % 10_000 == 0 {
            journal.cursor("plugin", "v1/pods", seq, None, "scope");
        }
        if seq % 1000 == 0 {
            journal.resource_version("v1/pods", &seq.to_string(), seq);
            // 10k events/s.
            let due = t0 + Duration::from_millis(i as u64 / 10);
            tokio::time::sleep_until(due.into()).await;
        }
    }
    journal.flush().await;
    let cpu = writer_cpu() - cpu0;
    let bytes = journal.stats().bytes_written - bytes0;
    println!(
        "writer {:.1} µs CPU per update, {:.0} bytes written per update, {:.1} s wall, file {:.0} MiB",
        cpu * 1e6 / OBJECTS as f64,
        bytes as f64 / OBJECTS as f64,
        t0.elapsed().as_secs_f64(),
        std::fs::metadata(state.path()).unwrap().len() as f64 / 1048576.0
    );
}
