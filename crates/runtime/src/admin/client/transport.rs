//! Where the client's bytes go: a TCP connection to `HOST:PORT`, or a pod's port reached
//! through the API server's port-forward (as `kubectl port-forward` does, so the pod exposes
//! nothing), either of them plain or inside TLS. The request code above is the same for all.
//!
//! A port-forward carries the admin request, the user's token included, inside the stream the
//! API server opened to the pod; the API server sees only that the user may `create`
//! `pods/portforward`. (Its pod proxy would not do: it strips the `Authorization` header.)

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use tokio::io::{AsyncRead, AsyncWrite};

use super::tls::Tls;
use super::{ClientError, Result};

/// A byte stream an HTTP/1.1 exchange runs over.
pub(crate) trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// What resolves with the API server's error text for a forwarded port (`None`: no error).
pub(crate) type ForwardError = Pin<Box<dyn Future<Output = Option<String>> + Send>>;

/// Where an admin server is reached.
#[derive(Clone)]
pub enum Endpoint {
    /// `HOST:PORT` over TCP.
    Direct {
        /// `HOST:PORT`.
        authority: http::uri::Authority,
        /// TLS, for `https://`.
        tls: Option<Tls>,
    },
    /// A pod's port, through the API server's port-forward.
    Pod {
        /// The pods of the pod's namespace, with the kubeconfig's client.
        pods: Box<Api<Pod>>,
        /// The namespace.
        namespace: String,
        /// The pod's name (checked as the API server checks one).
        name: String,
        /// The admin port inside the pod.
        port: u16,
        /// TLS, when the pod's admin serves HTTPS.
        tls: Option<Tls>,
    },
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label())
    }
}

impl Endpoint {
    /// How messages name it: `127.0.0.1:9090`, `https://host:9443`, `pod ns/name port 9090`.
    pub fn label(&self) -> String {
        match self {
            Endpoint::Direct { authority, tls } => match tls {
                Some(_) => format!("https://{authority}"),
                None => authority.to_string(),
            },
            Endpoint::Pod {
                namespace,
                name,
                port,
                tls,
                ..
            } => format!(
                "pod {namespace}/{name} port {port}{}",
                if tls.is_some() { " (https)" } else { "" }
            ),
        }
    }

    /// Whether a token may travel to it in the clear: over TLS, inside a port-forward (the API
    /// server's connection carries it), or to this machine's loopback; never over plain HTTP
    /// to another host.
    pub(crate) fn may_carry_token(&self) -> bool {
        match self {
            Endpoint::Direct { tls: Some(_), .. } | Endpoint::Pod { .. } => true,
            Endpoint::Direct {
                authority,
                tls: None,
            } => is_loopback(authority.host()),
        }
    }

    /// Opens the byte stream (TLS comes after, in [`Self::secure`]); for a port-forward also
    /// what says why the API server could not reach the port.
    pub(crate) async fn open(&self) -> Result<(Box<dyn Io>, Option<ForwardError>)> {
        match self {
            Endpoint::Direct { authority, .. } => {
                let tcp = tokio::net::TcpStream::connect(authority.as_str())
                    .await
                    .map_err(|source| ClientError::Connect {
                        addr: self.label(),
                        source,
                    })?;
                let _ = tcp.set_nodelay(true);
                Ok((Box::new(tcp), None))
            }
            Endpoint::Pod {
                pods, name, port, ..
            } => {
                let mut forwarder = pods.portforward(name, &[*port]).await.map_err(|source| {
                    ClientError::PortForward {
                        addr: self.label(),
                        source: Box::new(source),
                    }
                })?;
                let (Some(stream), Some(error)) =
                    (forwarder.take_stream(*port), forwarder.take_error(*port))
                else {
                    return Err(ClientError::PortForwardLost { addr: self.label() });
                };
                // The forwarder's task runs on by itself until the stream is dropped.
                drop(forwarder);
                Ok((Box::new(stream), Some(Box::pin(error))))
            }
        }
    }

    /// `io` inside TLS if this endpoint speaks it (the token is only sent after this).
    pub(crate) async fn secure(&self, io: Box<dyn Io>) -> Result<Box<dyn Io>> {
        let tls = match self {
            Endpoint::Direct { tls, .. } | Endpoint::Pod { tls, .. } => tls,
        };
        let Some(tls) = tls else {
            return Ok(io);
        };
        let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
        let stream = connector
            .connect(tls.server_name.clone(), io)
            .await
            .map_err(|source| ClientError::Tls {
                addr: self.label(),
                source,
            })?;
        Ok(Box::new(stream))
    }
}

/// `localhost`, or an IP address on loopback.
fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The name of a ready pod that `selector` (a label selector) matches in `pods`' namespace:
/// running, `Ready`, not being deleted; the first by name.
pub async fn ready_pod(pods: &Api<Pod>, namespace: &str, selector: &str) -> Result<String> {
    let list = pods
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(|source| ClientError::ListPods {
            namespace: namespace.to_string(),
            selector: selector.to_string(),
            source: Box::new(source),
        })?;
    let total = list.items.len();
    let mut ready: Vec<String> = list
        .items
        .into_iter()
        .filter(is_ready)
        .filter_map(|p| p.metadata.name)
        .collect();
    ready.sort();
    ready
        .into_iter()
        .next()
        .ok_or_else(|| ClientError::NoReadyPod {
            namespace: namespace.to_string(),
            selector: selector.to_string(),
            matched: total,
        })
}

fn is_ready(pod: &Pod) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let Some(status) = &pod.status else {
        return false;
    };
    status.phase.as_deref() == Some("Running")
        && status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_may_see_a_token_in_the_clear() {
        for host in ["127.0.0.1", "localhost", "[::1]", "127.3.4.5", "LOCALHOST"] {
            assert!(is_loopback(host), "{host}");
        }
        for host in [
            "10.0.0.1",
            "example.com",
            "localhost.example.com",
            "0.0.0.0",
        ] {
            assert!(!is_loopback(host), "{host}");
        }
    }
}
