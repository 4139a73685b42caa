//! How long reopening a state of 100k objects of 2 KB takes, step by step: `close` (which seals
//! the file), `open` (trusting the seal, or checking every page without it), `load_index`, and
//! reading one informer's versions.
//!
//! `cargo run --release -p informant-state --example reopen`

use std::time::Instant;

use informant_state::StateDir;

const OBJECTS: u64 = 100_000;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (state, _) = StateDir::open(dir.path(), "c").expect("open");
        let journal = state.journal();
        let pad = "x".repeat(2000);
        for i in 0..OBJECTS {
            let json = format!("{{\"metadata\":{{\"name\":\"pod-{i}\"}},\"data\":\"{pad}\"}}");
            journal.record("v1/pods", i + 1, &format!("ns/pod-{i}"), Some(&json));
        }
        journal.resource_version("v1/pods", "1", OBJECTS);
        journal.cursor("p", "v1/pods", OBJECTS, None, "s");
        journal.flush().await;
        let t = Instant::now();
        state.close();
        println!("close (and seal) {:.2?}", t.elapsed());
    }
    for sealed in [false, true] {
        if !sealed {
            // As a crash leaves it.
            std::fs::remove_file(
                dir.path()
                    .join(format!("{}.seal", informant_state::FILE_NAME)),
            )
            .expect("sealed at close");
        }
        let t = Instant::now();
        let (state, _) = StateDir::open(dir.path(), "c").expect("reopen");
        let open = t.elapsed();
        let t = Instant::now();
        let versions = state.versions("v1/pods").expect("versions");
        println!(
            "{}: open {open:.2?} (checked: {}), versions {:.2?} ({} keys)",
            if sealed { "sealed" } else { "unsealed" },
            state.checked_at_open(),
            t.elapsed(),
            versions.len()
        );
    }
    let t = Instant::now();
    let (state, _) = StateDir::open(dir.path(), "c").expect("reopen");
    let open = t.elapsed();
    let t = Instant::now();
    let index = state.load_index().expect("index");
    let index_time = t.elapsed();
    let t = Instant::now();
    let versions = state.versions("v1/pods").expect("versions");
    let read = t.elapsed();
    println!(
        "open {open:.2?}, load_index {index_time:.2?} ({} informers), versions {read:.2?} ({} keys)",
        index.informers.len(),
        versions.len()
    );
}
