//! Fault injection: what an informer must survive, on demand. Available as a Rust handle
//! ([`Faults`]) and over HTTP as `POST /_informant/faults/{close-watches,compact,pause,resume,restart}`;
//! the fault endpoints bypass the pause gate so a paused server can still be resumed.

use std::sync::Arc;

use tokio::sync::watch;

use super::Shared;

/// Shared fault switches.
pub(crate) struct FaultState {
    /// True while partitioned: requests and watch streams wait.
    paused: watch::Sender<bool>,
    /// Bumped by close-watches; every open watch ends when it changes.
    close_generation: watch::Sender<u64>,
}

impl Default for FaultState {
    fn default() -> Self {
        FaultState {
            paused: watch::Sender::new(false),
            close_generation: watch::Sender::new(0),
        }
    }
}

impl FaultState {
    pub fn close_watches(&self) {
        self.close_generation.send_modify(|g| *g += 1);
    }

    pub fn set_paused(&self, paused: bool) {
        self.paused.send_replace(paused);
    }

    pub fn subscribe_close(&self) -> watch::Receiver<u64> {
        self.close_generation.subscribe()
    }

    pub fn subscribe_paused(&self) -> watch::Receiver<bool> {
        self.paused.subscribe()
    }

    /// Waits until the server is not paused.
    pub async fn wait_resumed(&self) {
        let mut rx = self.paused.subscribe();
        // The sender lives in `self`, so the channel cannot close while we borrow it.
        let _ = rx.wait_for(|p| !*p).await;
    }
}

/// Fault-injection handle for one [`super::DevServer`]; clone freely.
#[derive(Clone)]
pub struct Faults {
    shared: Arc<Shared>,
}

impl Faults {
    pub(crate) fn new(shared: Arc<Shared>) -> Faults {
        Faults { shared }
    }

    /// Ends every open watch stream (clients see a clean end of stream and re-watch).
    pub fn close_watches(&self) {
        self.shared.faults.close_watches();
    }

    /// Drops the watch history: any watch resuming from before now gets 410 Expired.
    pub fn compact(&self) {
        self.shared.api.store.compact();
    }

    /// Simulates a partition: new requests hang and open watches stop sending until [`Faults::resume`].
    pub fn pause(&self) {
        self.shared.faults.set_paused(true);
    }

    /// Ends a [`Faults::pause`]; held requests and watches continue.
    pub fn resume(&self) {
        self.shared.faults.set_paused(false);
    }

    /// Stops the listener, drops every open connection and listens again on the same address
    /// with the same data; returns once the new listener accepts connections.
    pub async fn restart(&self) {
        super::server::restart(&self.shared).await;
    }
}
