//! One accept loop for the host's HTTP servers (the admin server, the admission webhooks):
//! HTTPS (see [`crate::tls`]) or plain HTTP/1.1 on a listener of their own.
//!
//! A TLS handshake runs in the connection's task (a slow client holds up no one) within
//! [`HANDSHAKE_TIMEOUT`], a request's headers must arrive within [`HEADER_TIMEOUT`], and a
//! shutdown waits [`SHUTDOWN_GRACE`] at most for requests in flight.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

use crate::tls::Tls;

/// Longest a TLS handshake may take before the connection is dropped.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest a request's headers may take to arrive.
pub(crate) const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest a shutdown waits for requests in flight before dropping them.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// A listener serving a router; stops when [`Served::shutdown`] is called or it is dropped.
pub(crate) struct Served {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Served {
    /// Binds `addr` (port 0 picks a free one) and serves `app` on it, over `tls` when given;
    /// `what` names the server in logs.
    pub(crate) async fn bind(
        addr: SocketAddr,
        app: Router,
        tls: Option<Tls>,
        what: &'static str,
    ) -> std::io::Result<Served> {
        let listener = TcpListener::bind(addr).await?;
        let bound = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(accept_loop(listener, app, tls, stopped, what));
        Ok(Served {
            addr: bound,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The address it listens on.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting connections and waits (a bounded time) for requests in flight.
    pub(crate) async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Accepts until `stopped`, each connection in a task of its own (dropped with the loop).
async fn accept_loop(
    listener: TcpListener,
    app: Router,
    tls: Option<Tls>,
    mut stopped: oneshot::Receiver<()>,
    what: &'static str,
) {
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    let acceptor = tls.as_ref().map(|t| t.acceptor.clone());
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let service = TowerToHyperService::new(app.clone());
                    let watcher = graceful.watcher();
                    let acceptor = acceptor.clone();
                    connections.spawn(async move {
                        let http = || {
                            let mut b = hyper::server::conn::http1::Builder::new();
                            b.timer(TokioTimer::new()).header_read_timeout(HEADER_TIMEOUT);
                            b
                        };
                        match acceptor {
                            None => {
                                let conn = http().serve_connection(TokioIo::new(stream), service);
                                let _ = watcher.watch(conn).await;
                            }
                            Some(acceptor) => {
                                let shake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream));
                                // A failed or slow handshake is the client's problem: drop it.
                                if let Ok(Ok(stream)) = shake.await {
                                    let conn = http().serve_connection(TokioIo::new(stream), service);
                                    let _ = watcher.watch(conn).await;
                                }
                            }
                        }
                    });
                }
                Err(e) => {
                    // Typically EMFILE: back off instead of spinning.
                    tracing::warn!(error = %e, server = what, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = &mut stopped => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown()).await;
    // Whatever is left (a handshake, a request past the grace) goes with the set.
}
