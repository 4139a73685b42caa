//! `GET /api/v1/namespaces/NS/pods/NAME/portforward?ports=P[,P...]`: the pod port-forward
//! websocket clients speak (kube-rs' `Api::portforward`, kubectl's websocket mode), as
//! kube-apiserver and the kubelet serve it.
//!
//! There is no kubelet and no container: a Pod here is a stored object, so the forward
//! connects to the Pod's `status.podIP` on each requested port, as the kubelet connects inside
//! the pod's network namespace. Tests set `status.podIP` to `127.0.0.1` and listen there.
//!
//! Contract, as the kubelet's `portforward/websocket.go` (subprotocol `v4.channel.k8s.io`):
//! - Authorization (done by the caller, before anything here runs) is `create` on
//!   `pods/portforward` in the pod's namespace, as kube-apiserver requires of a websocket
//!   upgrade; RBAC's 403 otherwise.
//! - Port `i` of the query has two channels: `2i` carries data both ways, `2i+1` carries at
//!   most one error text from the server. The first message on each channel is the port
//!   number (two bytes, little-endian) after the channel byte.
//! - A port that cannot be connected gets `error forwarding port P to pod NS/NAME, uid U: ...`
//!   on its error channel; once every port is finished (refused, or closed by the pod side),
//!   the server closes the websocket, so a client never waits on a port nothing listens on.
//! - Only loopback pod IPs are dialled: a stored object must not turn this server into a proxy
//!   to other hosts (a Pod whose `status.podIP` is anything else is refused with 400).
//! - A forward ends when the client closes the websocket, every port is finished, or the
//!   server shuts down or closes its watches (the same signal ends both).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::{Message, Role};

use super::resources::ResourceType;
use super::{Error, Result, Shared};

/// The one subprotocol served: binary frames, a channel byte first.
pub(crate) const PROTOCOL: &str = "v4.channel.k8s.io";

/// At most this many ports in one request (kube-rs and kubectl's own limit).
const MAX_PORTS: usize = 128;

/// How long connecting to one port may take.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest chunk read from a pod port before it is sent on.
const CHUNK: usize = 32 * 1024;

/// Answers a port-forward request on pod `name` in `ns`: checks the pod, the ports and the
/// websocket handshake, then answers 101 and forwards on a task of its own.
pub(crate) fn serve(
    shared: &Arc<Shared>,
    res: &ResourceType,
    ns: &str,
    name: &str,
    ports: Option<&str>,
    mut req: Request,
) -> Result<Response> {
    let ports = parse_ports(ports)?;
    let pod = shared.api.get(res, ns, name)?;
    let pod: Value =
        serde_json::from_slice(&pod.json).map_err(|source| Error::Unreadable { source })?;
    let ip = pod_ip(&pod, name)?;
    let uid = pod["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let key = handshake(req.headers())?;
    let on_upgrade = hyper::upgrade::on(&mut req);
    let target = Target {
        label: format!("{ns}/{name}"),
        uid,
        ip,
        ports,
    };
    let mut close = shared.faults.subscribe_close();
    close.borrow_and_update();
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        tokio::select! {
            () = forward(ws, target) => {}
            _ = close.changed() => {}
        }
    });
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let mut resp = (StatusCode::SWITCHING_PROTOCOLS, Body::empty()).into_response();
    let headers = resp.headers_mut();
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(
        header::SEC_WEBSOCKET_PROTOCOL,
        HeaderValue::from_static(PROTOCOL),
    );
    if let Ok(v) = HeaderValue::from_str(&accept) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    Ok(resp)
}

/// The `ports` query parameter: comma-separated, each 1-65535, no repeats, at most 128.
fn parse_ports(ports: Option<&str>) -> Result<Vec<u16>> {
    let Some(ports) = ports.filter(|p| !p.is_empty()) else {
        return Err(Error::BadRequest(
            "query parameter \"ports\" is required".into(),
        ));
    };
    let mut out: Vec<u16> = Vec::new();
    for p in ports.split(',') {
        let port: u16 = p.trim().parse().map_err(|_| {
            Error::BadRequest(format!("unable to parse {p:?} as a port: not 1-65535"))
        })?;
        if port == 0 {
            return Err(Error::BadRequest(format!("port {p:?} must be > 0")));
        }
        if out.contains(&port) {
            return Err(Error::BadRequest(format!(
                "ports must be unique, found multiple {port}"
            )));
        }
        out.push(port);
    }
    if out.len() > MAX_PORTS {
        return Err(Error::BadRequest(format!(
            "the number of ports cannot be more than {MAX_PORTS}"
        )));
    }
    Ok(out)
}

/// The pod's `status.podIP`, if it is one this server may connect to.
fn pod_ip(pod: &Value, name: &str) -> Result<IpAddr> {
    let Some(ip) = pod["status"]["podIP"].as_str().filter(|s| !s.is_empty()) else {
        return Err(Error::BadRequest(format!(
            "pod {name:?} has no status.podIP: the embedded API server runs no kubelet, so a port-forward connects to the IP the pod's status names"
        )));
    };
    let parsed: IpAddr = ip.parse().map_err(|_| {
        Error::BadRequest(format!(
            "pod {name:?}: status.podIP {ip:?} is not an IP address"
        ))
    })?;
    if !parsed.is_loopback() {
        return Err(Error::BadRequest(format!(
            "pod {name:?}: status.podIP {ip} is not a loopback address: the embedded API server forwards only to this machine's loopback"
        )));
    }
    Ok(parsed)
}

/// The client's `Sec-WebSocket-Key`, once the request is a websocket upgrade offering
/// [`PROTOCOL`].
fn handshake(headers: &HeaderMap) -> Result<String> {
    let has = |name: header::HeaderName, want: &str| {
        headers.get_all(name).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(want)))
        })
    };
    if !has(header::UPGRADE, "websocket") || !has(header::CONNECTION, "upgrade") {
        return Err(Error::BadRequest(
            "Upgrade request required: port-forward is served over a websocket (subprotocol v4.channel.k8s.io)".into(),
        ));
    }
    if !has(header::SEC_WEBSOCKET_VERSION, "13") {
        return Err(Error::BadRequest(
            "websocket: unsupported Sec-WebSocket-Version (13 is)".into(),
        ));
    }
    if !has(header::SEC_WEBSOCKET_PROTOCOL, PROTOCOL) {
        let offered: Vec<&str> = headers
            .get_all(header::SEC_WEBSOCKET_PROTOCOL)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        return Err(Error::BadRequest(format!(
            "requested protocol(s) are not supported: {offered:?}; supports [{PROTOCOL:?}]"
        )));
    }
    headers
        .get(header::SEC_WEBSOCKET_KEY)
        .and_then(|v| v.to_str().ok())
        .filter(|k| !k.is_empty())
        .map(String::from)
        .ok_or_else(|| Error::BadRequest("websocket: missing Sec-WebSocket-Key".into()))
}

/// What one forward connects to.
struct Target {
    /// `NS/NAME`, for error texts.
    label: String,
    uid: String,
    ip: IpAddr,
    ports: Vec<u16>,
}

/// What the pod side of a port says.
enum FromPod {
    /// Bytes read from port `index`.
    Data(usize, Bytes),
    /// Port `index` is finished: closed by the pod side, or never connected (with the text
    /// for its error channel).
    Done(usize, Option<String>),
}

/// Runs one forward until the client closes, every port is finished, or a send fails.
async fn forward<S>(ws: WebSocketStream<S>, target: Target)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut sink, mut stream) = ws.split();
    // The first message on every channel: its port number.
    for (i, port) in target.ports.iter().enumerate() {
        for ch in [2 * i, 2 * i + 1] {
            let [lo, hi] = port.to_le_bytes();
            if sink.send(binary(ch, &[lo, hi])).await.is_err() {
                return;
            }
        }
    }
    // Every port is dialled before the client's data is read, so none of it arrives for a
    // port not yet connected.
    let ip = target.ip;
    let dials = target.ports.iter().map(|&port| async move {
        match tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect((ip, port))).await {
            Ok(Ok(s)) => Ok(s),
            Ok(Err(e)) => Err(format!("dial tcp {ip}:{port}: {e}")),
            Err(_) => Err(format!("dial tcp {ip}:{port}: i/o timeout")),
        }
    });
    let dialled = futures::future::join_all(dials).await;
    let (tx, mut rx) = mpsc::channel::<FromPod>(16);
    let mut open = 0;
    // Dropped (aborting every reader) however the forward ends.
    let mut readers = tokio::task::JoinSet::new();
    let mut writers: Vec<Option<tokio::net::tcp::OwnedWriteHalf>> = Vec::new();
    for (i, (dial, port)) in dialled.into_iter().zip(&target.ports).enumerate() {
        let stream = match dial {
            Ok(s) => s,
            Err(e) => {
                let text = format!(
                    "error forwarding port {port} to pod {}, uid {}: {e}",
                    target.label, target.uid
                );
                if sink.send(binary(2 * i + 1, text.as_bytes())).await.is_err() {
                    return;
                }
                writers.push(None);
                continue;
            }
        };
        let (mut read, write) = stream.into_split();
        writers.push(Some(write));
        open += 1;
        let tx = tx.clone();
        readers.spawn(async move {
            let mut buf = vec![0u8; CHUNK];
            loop {
                match read.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let data = FromPod::Data(i, Bytes::copy_from_slice(&buf[..n]));
                        if tx.send(data).await.is_err() {
                            return;
                        }
                    }
                }
            }
            let _ = tx.send(FromPod::Done(i, None)).await;
        });
    }
    drop(tx);
    while open > 0 {
        tokio::select! {
            from_pod = rx.recv() => match from_pod {
                Some(FromPod::Data(i, bytes)) => {
                    if sink.send(binary(2 * i, &bytes)).await.is_err() {
                        return;
                    }
                }
                Some(FromPod::Done(i, error)) => {
                    if let Some(text) = error
                        && sink.send(binary(2 * i + 1, text.as_bytes())).await.is_err()
                    {
                        return;
                    }
                    writers[i] = None;
                    open -= 1;
                }
                None => break,
            },
            message = stream.next() => match message {
                Some(Ok(Message::Binary(bytes))) => {
                    let Some((&ch, data)) = bytes.split_first() else { continue };
                    // Data for a port goes to it; anything on an error channel or an unknown
                    // channel is dropped, as the kubelet ignores it.
                    let writer = (ch % 2 == 0)
                        .then(|| writers.get_mut(usize::from(ch) / 2))
                        .flatten()
                        .and_then(Option::as_mut);
                    if let Some(w) = writer
                        && w.write_all(data).await.is_err()
                    {
                        writers[usize::from(ch) / 2] = None;
                    }
                }
                // A close is answered (below) so the client sees a clean end.
                Some(Ok(Message::Close(_))) => break,
                None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            },
        }
    }
    // Sends our close (or the answer to the client's) and flushes it.
    let _ = sink.close().await;
}

/// A binary message on channel `ch`.
fn binary(ch: usize, data: &[u8]) -> Message {
    let mut out = Vec::with_capacity(data.len() + 1);
    // Channels are `2i` and `2i+1` for at most 128 ports: always below 256.
    out.push(ch as u8);
    out.extend_from_slice(data);
    Message::binary(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_numbers_from_1_without_repeats() {
        assert_eq!(parse_ports(Some("9090")).unwrap(), [9090]);
        assert_eq!(parse_ports(Some("80,1234")).unwrap(), [80, 1234]);
        for bad in [
            None,
            Some(""),
            Some("0"),
            Some("x"),
            Some("80,80"),
            Some("70000"),
            Some("-1"),
        ] {
            assert!(parse_ports(bad).is_err(), "{bad:?}");
        }
        let many: Vec<String> = (1..=129).map(|p| p.to_string()).collect();
        assert!(parse_ports(Some(&many.join(","))).is_err());
    }

    #[test]
    fn only_loopback_pod_ips_are_dialled() {
        let pod = |ip: &str| serde_json::json!({"status": {"podIP": ip}});
        assert!(pod_ip(&pod("127.0.0.1"), "p").is_ok());
        assert!(pod_ip(&pod("::1"), "p").is_ok());
        for bad in ["10.0.0.7", "0.0.0.0", "169.254.169.254", "localhost", ""] {
            assert!(pod_ip(&pod(bad), "p").is_err(), "{bad}");
        }
        assert!(pod_ip(&serde_json::json!({}), "p").is_err());
    }
}
