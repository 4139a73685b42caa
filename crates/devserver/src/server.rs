//! The listener: our own accept loop (rather than `axum::serve`) so that a restart or shutdown
//! can drop every open connection at once — aborting the loop drops its `JoinSet`, which aborts
//! each connection task.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

use super::{Error, Result, Shared, handlers};

/// The running accept loop and the address it is bound to.
#[derive(Default)]
pub(crate) struct ListenerSlot {
    addr: Mutex<Option<SocketAddr>>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl ListenerSlot {
    /// The bound address (the configured one before the first bind).
    pub fn addr(&self) -> SocketAddr {
        self.addr
            .lock()
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    /// Stops accepting and drops every connection, without waiting.
    pub fn abort(&self) {
        if let Some(task) = self.task.lock().take() {
            task.abort();
        }
    }
}

/// Binds `addr` and spawns the accept loop.
pub(crate) async fn start(shared: &Arc<Shared>, addr: SocketAddr) -> Result<()> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| Error::Bind { addr, source })?;
    *shared.listener.addr.lock() = Some(bound);
    let task = tokio::spawn(accept_loop(listener, shared.clone()));
    if let Some(old) = shared.listener.task.lock().replace(task) {
        old.abort();
    }
    Ok(())
}

/// Stops the accept loop and waits until the listening socket is closed.
pub(crate) async fn stop(shared: &Shared) {
    let task = shared.listener.task.lock().take();
    if let Some(task) = task {
        task.abort();
        // An aborted task reports Cancelled; either way the socket is gone afterwards.
        let _ = task.await;
    }
}

/// Stop, then listen again on the same address.
pub(crate) async fn restart(shared: &Arc<Shared>) {
    stop(shared).await;
    let addr = shared.listener.addr();
    // The port was ours a moment ago; retry briefly in case the kernel is slow to release it.
    for attempt in 0..50 {
        match start(shared, addr).await {
            Ok(()) => return,
            Err(e) if attempt == 49 => tracing::error!(error = %e, "devserver: restart failed"),
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let router = handlers::router(shared);
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let service = TowerToHyperService::new(router.clone());
                    connections.spawn(async move {
                        // Client-side disconnects surface here; nothing to do about them.
                        // Upgrades: a pod port-forward's websocket takes the connection over.
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .with_upgrades()
                            .await;
                    });
                }
                Err(e) => {
                    // Typically EMFILE: back off instead of spinning.
                    tracing::warn!(error = %e, "devserver: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}
