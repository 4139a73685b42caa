//! Bytes the state file is written per recorded event: 100k objects of 2 KB, each created and
//! then updated once, with one plugin whose cursor follows the informer.
//!
//! `cargo run --release -p informant-state --example bytes_per_event`
//!
//! Two paces: everything sent at once (the writer batches as much as it can), and a flush after
//! every 1000 events (about what a steady stream under the 100 ms batch window looks like at
//! 10k events/s).

use std::time::Instant;

use informant_state::StateDir;

mod common;

const OBJECTS: u64 = 100_000;
const SIZE: usize = 2048;

fn object(i: u64, generation: u64) -> String {
    common::object(i, generation, SIZE)
}

async fn run(flush_every: Option<u64>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (state, _) = StateDir::open(dir.path(), "https://127.0.0.1:6443").expect("open");
    let journal = state.journal();
    let before = journal.stats().bytes_written;
    let start = Instant::now();
    let mut seq = 0;
    for generation in 1..=2 {
        for i in 0..OBJECTS {
            seq += 1;
            let json = object(i, generation);
            journal.record(
                "v1/pods",
                seq,
                &format!("ns-{}/pod-{i}", i % 50),
                Some(&json),
            );
            if seq % 100 == 0 {
                journal.cursor("plugin", "v1/pods", seq, None, "scope");
                journal.resource_version("v1/pods", &seq.to_string(), seq);
            }
            if let Some(n) = flush_every
                && seq % n == 0
            {
                journal.flush().await;
            }
        }
    }
    journal.flush().await;
    let elapsed = start.elapsed();
    let stats = journal.stats();
    let written = stats.bytes_written - before;
    let events = 2 * OBJECTS;
    let file = std::fs::metadata(state.path()).expect("metadata").len();
    let stored: usize = state.load().expect("load").informers["v1/pods"]
        .versions
        .values()
        .map(Vec::len)
        .sum();
    let pace = match flush_every {
        Some(n) => format!("flush every {n}"),
        None => "all at once".to_owned(),
    };
    println!(
        "{pace:>18}: {events} events of {SIZE} B, {} commits, {:.0} bytes written per event ({:.1}x the object), \
         file {:.1} MiB, {stored} versions stored, {:.1} s",
        stats.commits,
        written as f64 / events as f64,
        written as f64 / events as f64 / SIZE as f64,
        file as f64 / (1 << 20) as f64,
        elapsed.as_secs_f64(),
    );
    assert!(stats.degraded.is_none(), "{stats:?}");
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    run(None).await;
    run(Some(1000)).await;
}
