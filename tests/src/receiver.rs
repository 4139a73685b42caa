//! A one-request-per-connection HTTP/1.1 receiver on 127.0.0.1, for plugins' outbound requests:
//! it counts connections, hands each request to the test, and answers as told.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

/// How a receiver answers.
#[derive(Clone, Copy)]
pub enum Answer {
    /// `200 OK`, or `302` to `location` for a path starting with `/redirect`.
    Ok {
        /// The port a redirect points at.
        location: u16,
    },
    /// Reads the request and never answers; reports when the client hangs up.
    Never,
    /// `500` to the first N requests, then `200 OK`.
    FailFirst(usize),
}

/// A one-request-per-connection HTTP/1.1 receiver.
pub struct Receiver {
    /// Its port on 127.0.0.1.
    pub port: u16,
    connections: watch::Receiver<usize>,
    /// Each request's head and JSON body (`null` if not JSON), as it arrives.
    pub requests: mpsc::UnboundedReceiver<(String, Value)>,
    /// How many clients hung up on an [`Answer::Never`].
    pub hung_up: watch::Receiver<usize>,
}

impl Receiver {
    /// Listens on a free port of 127.0.0.1.
    pub async fn start(answer: Answer) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().unwrap().port();
        let (conn_tx, connections) = watch::channel(0usize);
        let (hung_tx, hung_up) = watch::channel(0usize);
        let (req_tx, requests) = mpsc::unbounded_channel();
        let hung_tx = Arc::new(hung_tx);
        tokio::spawn(async move {
            let mut index = 0;
            while let Ok((socket, _)) = listener.accept().await {
                conn_tx.send_modify(|c| *c += 1);
                let (req_tx, hung_tx) = (req_tx.clone(), hung_tx.clone());
                // One request per connection (every answer closes it).
                tokio::spawn(serve(socket, answer, index, req_tx, hung_tx));
                index += 1;
            }
        });
        Receiver {
            port,
            connections,
            requests,
            hung_up,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        *self.connections.borrow()
    }
}

/// The manifest of a test plugin in `post` mode (the Rust `hostile`, `hostile-py` or
/// `hostile-ts`): it watches the ConfigMaps labelled `app=outbound` in `namespace` and POSTs
/// each event's line (tagged `t`) to `url`, allowed to reach the origins in `allowed`. Lines
/// appended to it extend its `[config]`.
pub fn poster(allowed: &[String], namespace: &str, url: &str, deadline_ms: u32) -> String {
    let allowed: Vec<String> = allowed.iter().map(|o| format!("{o:?}")).collect();
    format!(
        "allowed-outbound-hosts = [{}]\n[limits]\ndeadline-ms = {deadline_ms}\n[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nnamespace = \"{namespace}\"\nlabel-selector = \"app=outbound\"\n[config]\nmode = \"post\"\ntag = \"t\"\nurl = {url:?}\n",
        allowed.join(", ")
    )
}

/// A ConfigMap labelled `app=outbound`, which [`poster`] plugins watch.
pub fn labelled(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "outbound"}},
        "data": {"k": "v"}})
}

async fn serve(
    mut socket: TcpStream,
    answer: Answer,
    index: usize,
    requests: mpsc::UnboundedSender<(String, Value)>,
    hung_up: Arc<watch::Sender<usize>>,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let (head, body_at) = loop {
        let n = socket.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break (String::from_utf8_lossy(&buf[..at]).to_string(), at + 4);
        }
    };
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buf.len() < body_at + length {
        let n = socket.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&buf[body_at..body_at + length]).unwrap_or(Value::Null);
    let request_line = head.lines().next().unwrap_or_default().to_string();
    let _ = requests.send((head.clone(), body));
    match answer {
        Answer::Ok { location } => {
            let response = if request_line.contains(" /redirect") {
                format!(
                    "HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:{location}/\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                )
            } else {
                "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok".to_string()
            };
            let _ = socket.write_all(response.as_bytes()).await;
        }
        Answer::FailFirst(n) => {
            let response = if index < n {
                "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\nconnection: close\r\n\r\nfail"
            } else {
                "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
            };
            let _ = socket.write_all(response.as_bytes()).await;
        }
        Answer::Never => {
            // Wait for the client to give up: a read of 0 bytes (or an error) is its hang-up.
            let _ = socket.read(&mut chunk).await;
            hung_up.send_modify(|c| *c += 1);
        }
    }
}
