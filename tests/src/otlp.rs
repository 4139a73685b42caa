//! An OTLP/HTTP trace collector on 127.0.0.1 for the trace tests: it decodes each
//! `POST /v1/traces` protobuf body (`ExportTraceServiceRequest`) into [`ExportedSpan`]s, or
//! reads requests and never answers, as a stuck collector does. Over plain HTTP, or over TLS
//! ([`Collector::start_tls`]) with a CA and a certificate for `127.0.0.1` and `localhost` made
//! for the test; it keeps each request's headers.

use std::collections::BTreeMap;
use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use parking_lot::Mutex;
use prost::Message;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// One span as the collector received it, ids in lowercase hex.
#[derive(Debug, Clone)]
pub struct ExportedSpan {
    /// The resource's `service.name`.
    pub service: String,
    /// The span's name.
    pub name: String,
    /// Its trace id (32 hex digits).
    pub trace_id: String,
    /// Its span id (16 hex digits).
    pub span_id: String,
    /// Its parent's span id, empty for a root span.
    pub parent_span_id: String,
    /// Its attributes, values as text.
    pub attributes: BTreeMap<String, String>,
    /// Start, nanoseconds since the epoch.
    pub start: u64,
    /// End, nanoseconds since the epoch.
    pub end: u64,
}

impl ExportedSpan {
    /// The attribute `key`, empty if absent.
    pub fn attr(&self, key: &str) -> &str {
        self.attributes.get(key).map_or("", String::as_str)
    }
}

/// A collector on a free port of 127.0.0.1.
pub struct Collector {
    /// Its port.
    pub port: u16,
    spans: Arc<Mutex<Vec<ExportedSpan>>>,
    /// Each request's head (request line and headers), in order.
    heads: Arc<Mutex<Vec<String>>>,
    /// Requests read so far (answered or not).
    requests: watch::Receiver<usize>,
    /// With TLS: the PEM of the CA its certificate is signed by, and a file holding it.
    tls: Option<(String, tempfile::NamedTempFile)>,
}

/// What serving one connection shares with the collector.
#[derive(Clone)]
struct Shared {
    answer: bool,
    spans: Arc<Mutex<Vec<ExportedSpan>>>,
    heads: Arc<Mutex<Vec<String>>>,
    count: Arc<watch::Sender<usize>>,
}

impl Collector {
    /// Listens; answers every request `200` if `answer`, else reads them and never answers.
    pub async fn start(answer: bool) -> Collector {
        Collector::listen(answer, None).await
    }

    /// Listens over TLS with a certificate for `127.0.0.1` and `localhost`, signed by a CA
    /// made now ([`Collector::ca_file`]); answers every request `200`.
    pub async fn start_tls() -> Collector {
        let tls = crate::loopback_tls::LoopbackTls::new("informant test collector CA");
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![tls.leaf_der.clone(), tls.ca_der.clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(tls.key_der.clone().into()),
        )
        .expect("a server TLS config");
        let pem = tls.ca_pem.clone();
        let mut file = tempfile::NamedTempFile::new().expect("a CA file");
        std::io::Write::write_all(&mut file, pem.as_bytes()).expect("write the CA file");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let mut c = Collector::listen(true, Some(acceptor)).await;
        c.tls = Some((pem, file));
        c
    }

    async fn listen(answer: bool, tls: Option<tokio_rustls::TlsAcceptor>) -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().unwrap().port();
        let (count, requests) = watch::channel(0usize);
        let shared = Shared {
            answer,
            spans: Arc::default(),
            heads: Arc::default(),
            count: Arc::new(count),
        };
        let (spans, heads) = (shared.spans.clone(), shared.heads.clone());
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (shared, tls) = (shared.clone(), tls.clone());
                tokio::spawn(async move {
                    match tls {
                        // A client that does not trust the certificate gives up in the
                        // handshake: nothing is read.
                        Some(tls) => {
                            if let Ok(stream) = tls.accept(socket).await {
                                serve(stream, shared).await;
                            }
                        }
                        None => serve(socket, shared).await,
                    }
                });
            }
        });
        Collector {
            port,
            spans,
            heads,
            requests,
            tls: None,
        }
    }

    /// `http://127.0.0.1:PORT` (`https://` with TLS), the OTLP/HTTP base URL.
    pub fn endpoint(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// With TLS: a PEM file of the CA the collector's certificate is signed by.
    pub fn ca_file(&self) -> &std::path::Path {
        self.tls.as_ref().expect("a TLS collector").1.path()
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ExportedSpan> {
        self.spans.lock().clone()
    }

    /// Each request's head so far (request line and headers, as sent).
    pub fn heads(&self) -> Vec<String> {
        self.heads.lock().clone()
    }

    /// Export requests read so far.
    pub fn requests(&self) -> usize {
        *self.requests.borrow()
    }

    /// Waits (up to [`crate::GUARD`]) until `pred` holds of the spans received, and returns them.
    pub async fn wait_until(
        &self,
        what: &str,
        pred: impl Fn(&[ExportedSpan]) -> bool,
    ) -> Vec<ExportedSpan> {
        let mut requests = self.requests.clone();
        let done = crate::guarded(what, async {
            loop {
                let spans = self.spans();
                if pred(&spans) {
                    return spans;
                }
                requests.changed().await.expect("collector running");
            }
        });
        done.await
    }
}

/// Serves one connection's requests (clients keep connections alive between exports).
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(mut socket: S, shared: Shared) {
    let Shared {
        answer,
        spans,
        heads,
        count,
    } = shared;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let (head, body_at) = loop {
            if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break (String::from_utf8_lossy(&buf[..at]).to_string(), at + 4);
            }
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
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
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body: Vec<u8> = buf.drain(..body_at + length).skip(body_at).collect();
        assert!(
            head.starts_with("POST /v1/traces "),
            "an OTLP trace export: {head}"
        );
        let request = ExportTraceServiceRequest::decode(body.as_slice())
            .expect("an OTLP protobuf ExportTraceServiceRequest");
        heads.lock().push(head);
        spans.lock().extend(flatten(request));
        count.send_modify(|c| *c += 1);
        if !answer {
            // Hold the connection without answering until the client gives up.
            let _ = socket.read(&mut chunk).await;
            return;
        }
        let ok =
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if socket.write_all(ok.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn flatten(request: ExportTraceServiceRequest) -> Vec<ExportedSpan> {
    let mut out = Vec::new();
    for rs in request.resource_spans {
        let resource = rs
            .resource
            .map(|r| attributes(r.attributes))
            .unwrap_or_default();
        let service = resource.get("service.name").cloned().unwrap_or_default();
        for ss in rs.scope_spans {
            for span in ss.spans {
                out.push(ExportedSpan {
                    service: service.clone(),
                    name: span.name,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    attributes: attributes(span.attributes),
                    start: span.start_time_unix_nano,
                    end: span.end_time_unix_nano,
                });
            }
        }
    }
    out
}

fn attributes(kvs: Vec<KeyValue>) -> BTreeMap<String, String> {
    kvs.into_iter()
        .map(|kv| (kv.key, kv.value.map(text).unwrap_or_default()))
        .collect()
}

fn text(v: AnyValue) -> String {
    match v.value {
        Some(any_value::Value::StringValue(s)) => s,
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
