//! Recording a live stream: a handler on each informer writes every event it receives (the
//! first list as `initial` adds, then live changes) as one [`Record`] line.
//!
//! The recording handler is an ordinary informer handler, so it sees exactly what a plugin
//! registered at the same moment would. Like any handler its queue coalesces per key if it falls
//! behind (consecutive updates merge), which keeps the recording consistent: every line applies
//! cleanly to the cache the earlier lines built. Lines are flushed whenever the queue is empty,
//! so an interrupted recording is complete up to its last line.

use std::io::Write;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::ReplayError;
use super::format::Record;
use crate::informer::{Event, FnHandler, HandlerOptions, ListenerHandle, SharedInformer};

/// Writes the events of some informers to a recording until [`finish`](Recorder::finish)ed.
pub struct Recorder {
    handles: Vec<ListenerHandle>,
    tx: mpsc::UnboundedSender<Record>,
    written: watch::Receiver<u64>,
    writer: JoinHandle<std::io::Result<u64>>,
}

impl Recorder {
    /// Registers a recording handler on each informer. Registered before the informers start,
    /// it records their first list as `initial` adds; registered later, the cache's replay.
    pub fn start(informers: &[Arc<SharedInformer>], out: Box<dyn Write + Send>) -> Recorder {
        let (tx, rx) = mpsc::unbounded_channel::<Record>();
        let (count_tx, written) = watch::channel(0u64);
        let writer = tokio::task::spawn_blocking(move || write_all(rx, out, count_tx));
        let handles = informers
            .iter()
            .map(|informer| {
                let ar = informer.store().api_resource();
                let (api_version, kind) = (ar.api_version.clone(), ar.kind.clone());
                let tx = tx.clone();
                informer.add_handler(
                    "record",
                    FnHandler(move |e: Event| {
                        if let Some(r) = Record::from_event(&api_version, &kind, &e) {
                            let _ = tx.send(r);
                        }
                    }),
                    HandlerOptions::default(),
                )
            })
            .collect();
        Recorder {
            handles,
            tx,
            written,
            writer,
        }
    }

    /// Lines written so far.
    pub fn recorded(&self) -> u64 {
        *self.written.borrow()
    }

    /// Waits until at least `n` lines are written (or the writer failed).
    pub async fn wait_for(&self, n: u64) {
        let mut rx = self.written.clone();
        let _ = rx.wait_for(|c| *c >= n).await;
    }

    /// Unregisters the handlers and flushes the file; returns the number of lines written.
    pub async fn finish(self) -> Result<u64, ReplayError> {
        for h in self.handles {
            h.shutdown().await;
        }
        drop(self.tx);
        self.writer
            .await
            .map_err(|e| ReplayError::Recording(e.to_string()))?
            .map_err(|e| ReplayError::Recording(e.to_string()))
    }
}

fn write_all(
    mut rx: mpsc::UnboundedReceiver<Record>,
    out: Box<dyn Write + Send>,
    count: watch::Sender<u64>,
) -> std::io::Result<u64> {
    let mut out = std::io::BufWriter::new(out);
    let mut n = 0u64;
    while let Some(first) = rx.blocking_recv() {
        let mut next = Some(first);
        // Write what is queued, then flush once: one syscall per burst, never a stale tail.
        while let Some(r) = next {
            r.write_line(&mut out)?;
            n += 1;
            next = rx.try_recv().ok();
        }
        out.flush()?;
        count.send_replace(n);
    }
    out.flush()?;
    Ok(n)
}
