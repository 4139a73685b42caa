//! Holding a plugin's events until its caches are complete.
//!
//! A plugin is registered with its informers as soon as it is started, so no plugin waits for
//! another's informers; but its first events wait until every informer it watches has synced
//! (or been refused by RBAC, which lasts until someone changes RBAC): a cross-kind lookup made
//! while it handles its replay must not find a kind half-listed. Meanwhile its events queue in
//! its own listeners (coalesced per key), delaying nobody else.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::informer::{Event, Handler, SharedInformer, wait_all_settled};

/// Opened once a plugin's informers have settled; shared by all of its handlers.
#[derive(Debug, Clone)]
pub struct Gate(watch::Receiver<bool>);

impl Gate {
    /// A gate already open: for handlers whose plugin is already running.
    pub fn open() -> Gate {
        Gate(watch::channel(true).1)
    }

    /// Whether events pass.
    pub fn is_open(&self) -> bool {
        *self.0.borrow()
    }

    /// Waits until the gate opens (forever, if its opener was dropped before).
    pub(crate) async fn opened(&mut self) {
        // A dropped opener leaves the gate as it was; then nothing will open it, and the
        // handler's plugin is being unregistered anyway.
        let _ = self.0.wait_for(|open| *open).await;
    }
}

/// Opens a [`Gate`] when `informers` have settled, or after `wait` at the latest (with a
/// warning naming those still listing): a server that never answers must not stop the plugin
/// for good. Runs until then; abort it to give up.
pub(crate) fn open_when_settled(
    informers: Vec<Arc<SharedInformer>>,
    wait: Duration,
) -> (Gate, impl Future<Output = ()> + Send + 'static) {
    // Already settled (a new version of a running plugin, say): open from the start, so its
    // events do not wait even for the task to be scheduled.
    let settled = informers.iter().all(|i| i.is_settled());
    let (tx, rx) = watch::channel(settled);
    let opening = async move {
        if let Err(e) = wait_all_settled(&informers, wait).await {
            tracing::warn!(error = %e, "delivering events before every informer synced");
        }
        tx.send_replace(true);
    };
    (Gate(rx), opening)
}

/// A handler whose events wait for its gate.
pub(crate) struct Gated<H> {
    inner: H,
    /// `None` once open: after that a call costs nothing.
    gate: Option<Gate>,
}

impl<H> Gated<H> {
    /// `inner`, behind `gate`.
    pub(crate) fn new(inner: H, gate: Gate) -> Self {
        let gate = (!gate.is_open()).then_some(gate);
        Gated { inner, gate }
    }

    async fn pass(&mut self) {
        if let Some(mut gate) = self.gate.take() {
            gate.opened().await;
        }
    }
}

impl<H: Handler> Handler for Gated<H> {
    async fn handle(&mut self, event: Event) {
        self.pass().await;
        self.inner.handle(event).await;
    }

    async fn handle_batch(&mut self, events: Vec<Event>) {
        self.pass().await;
        self.inner.handle_batch(events).await;
    }
}
