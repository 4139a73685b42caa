//! Reading a running host's admin server from outside: `informant status` (its plugins as a
//! table), `informant logs` (one plugin's log lines, followed if asked) and `informant
//! dead-letters` ([`dead_letters`]).
//!
//! One HTTP/1.1 exchange per request, over a [`transport::Endpoint`]: a TCP connection to
//! `HOST:PORT`, or a pod's admin port reached through the API server's port-forward; either
//! plain or inside TLS ([`tls`]). Requests carry the caller's bearer token ([`credentials`]):
//! `--token`, or the kubeconfig user's, which the admin server checks with a TokenReview. The
//! token is only sent once TLS is up, and never in the clear except to loopback or inside a
//! port-forward. `informant dev` publishes its admin address ([`dev_address`]) for `status` to
//! find.
//!
//! - [`credentials`]: the token, from the flag or the kubeconfig (exec plugins, token files).
//! - [`dead_letters`]: listing, retrying and dropping dead letters.
//! - [`dev_address`]: where `informant dev`'s admin listens.
//! - `table`: `status`'s table and JSON.
//! - [`tls`]: trusting an `https://` admin.
//! - [`transport`]: TCP, port-forward, and checks of pod names.

use std::time::Duration;

use bytes::{Buf, BytesMut};
use futures::future::Either;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use informant_apimachinery::names::{InvalidName, NameError, check_namespace, check_object_name};

use crate::plugin::text::escape_controls;

pub(crate) mod credentials;
pub mod dead_letters;
pub mod dev_address;
mod table;
pub(crate) mod tls;
pub mod transport;

pub use credentials::Credentials;
pub use table::{status_json, status_table};
pub use tls::{Tls, Trust};
pub use transport::Endpoint;

/// How long connecting and the answer's head may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// How long a failed exchange over a port-forward waits for the API server's reason.
const FORWARD_REASON: Duration = Duration::from_secs(2);

/// Errors reading an admin server.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The address is not `HOST:PORT`, `http://HOST:PORT` or `https://HOST:PORT`.
    #[error(
        "admin address `{addr}`: expected HOST:PORT, http://HOST:PORT or https://HOST:PORT, e.g. 127.0.0.1:9090"
    )]
    Address {
        /// What was given.
        addr: String,
    },
    /// TLS flags for a plain `http://` admin.
    #[error(
        "admin address `{addr}` is plain HTTP: --admin-ca and --insecure-skip-tls-verify are for https://"
    )]
    TlsFlagsWithoutTls {
        /// What was given.
        addr: String,
    },
    /// A namespace the API server would not have.
    #[error(transparent)]
    Namespace(#[from] NameError),
    /// A pod name the API server would not have.
    #[error(transparent)]
    PodName(#[from] InvalidName),
    /// No connection could be made.
    #[error("admin server at {addr}: cannot connect: {source}")]
    Connect {
        /// Where.
        addr: String,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
    /// The TLS handshake failed (an untrusted certificate, a server that is not TLS).
    #[error(
        "admin server at {addr}: TLS: {source} (a self-signed admin needs --admin-ca FILE, or --insecure-skip-tls-verify)"
    )]
    Tls {
        /// Where.
        addr: String,
        /// rustls' error.
        #[source]
        source: std::io::Error,
    },
    /// Setting up TLS failed.
    #[error(transparent)]
    TlsSetup(#[from] tls::TlsError),
    /// The API server refused or failed the port-forward.
    #[error("{addr}: port-forward through the API server: {source}")]
    PortForward {
        /// The pod and port.
        addr: String,
        /// kube's error (a 403 says which permission is missing).
        #[source]
        source: Box<kube::Error>,
    },
    /// The port-forward gave no stream for the port.
    #[error("{addr}: the port-forward gave no stream for the port")]
    PortForwardLost {
        /// The pod and port.
        addr: String,
    },
    /// The API server could not reach the port in the pod.
    #[error("{addr}: {text}")]
    Forwarded {
        /// The pod and port.
        addr: String,
        /// What the API server said (controls escaped).
        text: String,
    },
    /// Listing pods to choose one failed.
    #[error("listing pods in namespace {namespace} matching `{selector}`: {source}")]
    ListPods {
        /// Where.
        namespace: String,
        /// The label selector.
        selector: String,
        /// kube's error.
        #[source]
        source: Box<kube::Error>,
    },
    /// No pod to reach.
    #[error(
        "no ready pod in namespace {namespace} matches `{selector}` ({matched} match, none running and Ready)"
    )]
    NoReadyPod {
        /// Where.
        namespace: String,
        /// The label selector.
        selector: String,
        /// How many pods matched at all.
        matched: usize,
    },
    /// A token would travel in the clear to another host.
    #[error(
        "admin server at {addr}: refusing to send {credentials} over plain HTTP to a host other than this one; use https://"
    )]
    Cleartext {
        /// Where.
        addr: String,
        /// Where the token came from (never the token).
        credentials: String,
    },
    /// The token could not be had.
    #[error(transparent)]
    Credentials(#[from] credentials::CredentialsError),
    /// Connecting or the answer's head took longer than 10 seconds.
    #[error("admin server at {addr}: no answer within {TIMEOUT:?}")]
    Timeout {
        /// Where.
        addr: String,
    },
    /// The HTTP exchange failed.
    #[error("admin server at {addr}: {source}")]
    Http {
        /// Where.
        addr: String,
        /// hyper's error.
        #[source]
        source: hyper::Error,
    },
    /// The server wants a (valid) bearer token.
    #[error("admin server at {addr}: {path}: 401 Unauthorized: {hint}")]
    Unauthorized {
        /// Where.
        addr: String,
        /// What was asked.
        path: String,
        /// What was sent, and what to do.
        hint: String,
    },
    /// The server answered with an error status.
    #[error("admin server at {addr}: {path}: {status}: {message}")]
    Status {
        /// Where.
        addr: String,
        /// What was asked.
        path: String,
        /// The status code.
        status: u16,
        /// What the server said (its first line).
        message: String,
    },
    /// The answer is not what an admin server sends.
    #[error("admin server at {addr}: {path}: unexpected answer: {source}")]
    Decode {
        /// Where.
        addr: String,
        /// What was asked.
        path: String,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
}

/// `Result` with [`ClientError`].
pub type Result<T, E = ClientError> = std::result::Result<T, E>;

/// One plugin as `/plugins` reports it: the fields `informant status` shows.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
pub struct StatusRow {
    /// Tenant (empty for a top-level plugin).
    pub tenant: String,
    /// Name.
    pub name: String,
    /// `running`, `backing-off`, `quarantined` or `waiting`.
    pub state: String,
    /// Events handled.
    pub handled: u64,
    /// Events failed.
    pub failed: u64,
    /// Redeliveries scheduled by `retry` answers.
    #[serde(default)]
    pub retried: u64,
    /// Events queued.
    pub backlog: u64,
    /// The most recent failure.
    pub last_error: Option<String>,
    /// Since when it is in its state (RFC 3339).
    #[serde(default)]
    pub since: String,
    /// Why it waits, if it does.
    #[serde(default)]
    pub waiting: Option<Waiting>,
    /// Its admission hooks.
    #[serde(default)]
    pub admission: Vec<crate::plugin::load::status::HookStatus>,
    /// The registry it is pulled from, what was pulled, and why the latest pull failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<crate::plugin::load::status::SourceStatus>,
}

/// Why a plugin waits, as `/plugins` says.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
pub struct Waiting {
    /// The reason, in words.
    pub reason: String,
}

/// One line of `/logs`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(untagged)]
pub enum LogLine {
    /// Lines logged and lost before the next one.
    Dropped {
        /// How many.
        dropped: u64,
    },
    /// A line the plugin logged.
    Record {
        /// Its place in the plugin's journal.
        seq: u64,
        /// When (RFC 3339).
        time: String,
        /// Severity.
        level: String,
        /// The text.
        message: String,
    },
}

impl LogLine {
    /// The line for a terminal: time, level and message on one line, control characters
    /// escaped (a plugin's text cannot move the cursor or forge a line).
    pub fn display(&self) -> String {
        match self {
            LogLine::Dropped { dropped } => format!("… {dropped} line(s) dropped …"),
            LogLine::Record {
                time,
                level,
                message,
                ..
            } => format!(
                "{} {:<5} {}",
                escape_controls(time),
                escape_controls(level),
                escape_controls(message)
            ),
        }
    }
}

/// An admin server, where it is and what to show it.
#[derive(Debug, Clone)]
pub struct AdminClient {
    endpoint: Endpoint,
    credentials: Credentials,
}

impl AdminClient {
    /// The admin server at `addr` (`HOST:PORT`, `http://HOST:PORT`, or `https://HOST:PORT`
    /// trusted by the platform's store), sending no token.
    pub fn new(addr: &str) -> Result<Self> {
        Self::from_url(addr, &Trust::Platform, None)
    }

    /// The admin server at `addr`; for `https://`, its certificate checked by `trust` for
    /// `server_name` (default: the address's host). Sends no token until
    /// [`with_credentials`](Self::with_credentials).
    pub fn from_url(addr: &str, trust: &Trust, server_name: Option<&str>) -> Result<Self> {
        let lower = addr.to_ascii_lowercase();
        let (https, bare) = if lower.starts_with("https://") {
            (true, &addr["https://".len()..])
        } else if lower.starts_with("http://") {
            (false, &addr["http://".len()..])
        } else {
            (false, addr)
        };
        let bare = bare.strip_suffix('/').unwrap_or(bare);
        let authority = bare
            .parse::<http::uri::Authority>()
            .ok()
            .filter(|a| a.port_u16().is_some() && !a.as_str().contains('@'))
            .ok_or_else(|| ClientError::Address {
                addr: escape_controls(addr).into_owned(),
            })?;
        let tls = match https {
            true => {
                let host = authority
                    .host()
                    .trim_start_matches('[')
                    .trim_end_matches(']');
                Some(Tls::new(trust, server_name.unwrap_or(host))?)
            }
            false if trust.is_explicit() => {
                return Err(ClientError::TlsFlagsWithoutTls {
                    addr: escape_controls(addr).into_owned(),
                });
            }
            false => None,
        };
        Ok(AdminClient {
            endpoint: Endpoint::Direct { authority, tls },
            credentials: Credentials::none("none was asked for"),
        })
    }

    /// The admin server of pod `name` in `namespace`, on `port`, through the API server's
    /// port-forward (`pods` is that namespace's pods with the kubeconfig's client); `tls` when
    /// it serves HTTPS. The names are checked first: nothing odd is spliced into a path.
    pub fn pod(
        pods: Api<Pod>,
        namespace: &str,
        name: &str,
        port: u16,
        tls: Option<Tls>,
    ) -> Result<Self> {
        check_pod(namespace, name)?;
        Ok(AdminClient {
            endpoint: Endpoint::Pod {
                pods: Box::new(pods),
                namespace: namespace.to_string(),
                name: name.to_string(),
                port,
                tls,
            },
            credentials: Credentials::none("none was asked for"),
        })
    }

    /// The same server, shown `credentials`.
    pub fn with_credentials(mut self, credentials: Credentials) -> Self {
        self.credentials = credentials;
        self
    }

    /// Where it is, as messages name it.
    pub fn label(&self) -> String {
        self.endpoint.label()
    }

    /// What it is shown.
    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// Every plugin the host runs or waits to load, by tenant and name.
    pub async fn status(&self) -> Result<Vec<StatusRow>> {
        #[derive(serde::Deserialize)]
        struct Plugins {
            plugins: Vec<StatusRow>,
        }
        let decoded: Plugins = self.json(http::Method::GET, "/plugins", None).await?;
        Ok(decoded.plugins)
    }

    /// Has the source of `plugin` (`tenant/name`, or `name`) checked now; its status once the
    /// check is done (its `error` saying why a check failed).
    pub async fn poll_source(
        &self,
        plugin: &str,
    ) -> Result<crate::plugin::load::status::SourceStatus> {
        let body = serde_json::to_vec(&crate::admin::sources::PollRequest {
            plugin: plugin.to_string(),
        })
        .map_err(|source| self.decode("/sources/poll", source))?;
        self.json(http::Method::POST, "/sources/poll", Some(body))
            .await
    }

    /// One plugin's log lines (`tenant` empty for a top-level plugin): those kept (the last
    /// `tail`, if given), then, with `follow`, the lines as they are logged.
    pub async fn logs(
        &self,
        tenant: &str,
        plugin: &str,
        follow: bool,
        tail: Option<usize>,
    ) -> Result<LogStream> {
        let mut query = form_urlencoded::Serializer::new(String::new());
        query.append_pair("plugin", plugin);
        if !tenant.is_empty() {
            query.append_pair("tenant", tenant);
        }
        if follow {
            query.append_pair("follow", "1");
        }
        if let Some(t) = tail {
            query.append_pair("tail", &t.to_string());
        }
        let path = format!("/logs?{}", query.finish());
        let body = self.send(http::Method::GET, &path, None).await?;
        Ok(LogStream {
            client: self.clone(),
            path,
            body,
            buf: BytesMut::new(),
            done: false,
        })
    }

    /// `path`'s answer, read whole and decoded as JSON; `body`, if any, is sent as JSON with
    /// `method`.
    pub(crate) async fn json<T: serde::de::DeserializeOwned>(
        &self,
        method: http::Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<T> {
        let answer = self.send(method, path, body).await?;
        let bytes = answer
            .collect()
            .await
            .map_err(|source| self.http(source))?
            .to_bytes();
        serde_json::from_slice(&bytes).map_err(|source| self.decode(path, source))
    }

    async fn send(
        &self,
        method: http::Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Incoming> {
        if self.credentials.sends_token() && !self.endpoint.may_carry_token() {
            return Err(ClientError::Cleartext {
                addr: self.label(),
                credentials: self.credentials.describe(),
            });
        }
        let exchange = async {
            let (io, forward_error) = self.endpoint.open().await?;
            let work = Box::pin(self.exchange(io, method, path, body));
            let Some(forward_error) = forward_error else {
                return work.await;
            };
            // Over a port-forward, a port the API server could not reach shows as a stream
            // that ends; its reason arrives on the port's error channel.
            match futures::future::select(work, forward_error).await {
                Either::Left((Ok(response), _)) => Ok(response),
                Either::Left((Err(e), reason)) => {
                    match tokio::time::timeout(FORWARD_REASON, reason).await {
                        Ok(Some(text)) => Err(self.forwarded(&text)),
                        _ => Err(e),
                    }
                }
                Either::Right((Some(text), _)) => Err(self.forwarded(&text)),
                Either::Right((None, work)) => work.await,
            }
        };
        let response = tokio::time::timeout(TIMEOUT, exchange)
            .await
            .map_err(|_| ClientError::Timeout { addr: self.label() })??;
        let status = response.status();
        if status.is_success() {
            return Ok(response.into_body());
        }
        let text = response
            .into_body()
            .collect()
            .await
            .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
            .unwrap_or_default();
        let first = escape_controls(text.lines().next().unwrap_or_default()).into_owned();
        if status == http::StatusCode::UNAUTHORIZED {
            let hint = if self.credentials.sends_token() {
                format!(
                    "{} was refused (expired, revoked, or not one the cluster knows){}",
                    self.credentials.describe(),
                    if first.is_empty() {
                        String::new()
                    } else {
                        format!(": {first}")
                    }
                )
            } else {
                format!(
                    "it asks for a bearer token and {}; pass --token (e.g. from `kubectl create token`) or use a kubeconfig user with a token",
                    self.credentials.describe()
                )
            };
            return Err(ClientError::Unauthorized {
                addr: self.label(),
                path: path.to_string(),
                hint,
            });
        }
        Err(ClientError::Status {
            addr: self.label(),
            path: path.to_string(),
            status: status.as_u16(),
            message: first,
        })
    }

    /// TLS if any, then the request (authorized last, once the channel is secure).
    async fn exchange(
        &self,
        io: Box<dyn transport::Io>,
        method: http::Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<http::Response<Incoming>> {
        let io = self.endpoint.secure(io).await?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .map_err(|source| self.http(source))?;
        tokio::spawn(async move {
            // Ends with the response body (or its reader going away): nothing to report.
            let _ = conn.await;
        });
        let host = match &self.endpoint {
            Endpoint::Direct { authority, .. } => authority.to_string(),
            Endpoint::Pod { port, .. } => format!("localhost:{port}"),
        };
        let mut request = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::HOST, host);
        if body.is_some() {
            request = request.header(http::header::CONTENT_TYPE, "application/json");
        }
        let request = request
            .body(http_body_util::Full::new(bytes::Bytes::from(
                body.unwrap_or_default(),
            )))
            .map_err(|_| ClientError::Address {
                addr: path.to_string(),
            })?;
        let request = self.credentials.authorize(request).await?;
        sender
            .send_request(request)
            .await
            .map_err(|source| self.http(source))
    }

    fn forwarded(&self, text: &str) -> ClientError {
        ClientError::Forwarded {
            addr: self.label(),
            text: escape_controls(text).into_owned(),
        }
    }

    fn http(&self, source: hyper::Error) -> ClientError {
        ClientError::Http {
            addr: self.label(),
            source,
        }
    }

    fn decode(&self, path: &str, source: serde_json::Error) -> ClientError {
        ClientError::Decode {
            addr: self.label(),
            path: path.to_string(),
            source,
        }
    }
}

/// The lines of a `/logs` answer, read as they arrive.
pub struct LogStream {
    client: AdminClient,
    path: String,
    body: Incoming,
    buf: BytesMut,
    done: bool,
}

impl LogStream {
    /// The next line, or `None` once the server ends the answer (the plugin was removed, or
    /// the server stopped; without `follow`, after the lines kept).
    pub async fn next(&mut self) -> Result<Option<LogLine>> {
        loop {
            if let Some(end) = self.buf.iter().position(|b| *b == b'\n') {
                let line = self.buf.split_to(end + 1);
                let line = &line[..end];
                if line.is_empty() {
                    continue;
                }
                return serde_json::from_slice(line)
                    .map(Some)
                    .map_err(|source| self.client.decode(&self.path, source));
            }
            if self.done {
                return Ok(None);
            }
            match self.body.frame().await {
                Some(frame) => {
                    let frame = frame.map_err(|source| self.client.http(source))?;
                    if let Ok(mut data) = frame.into_data() {
                        while data.has_remaining() {
                            let chunk = data.chunk();
                            self.buf.extend_from_slice(chunk);
                            let n = chunk.len();
                            data.advance(n);
                        }
                    }
                }
                None => self.done = true,
            }
        }
    }
}

/// Refuses a namespace or pod name the API server would not have: anything else would be
/// spliced into the port-forward's path (`../x`, `a%2Fb`, `a?b`), so it is refused, not sent.
fn check_pod(namespace: &str, name: &str) -> Result<()> {
    check_namespace(namespace)?;
    check_object_name("", "Pod", name)?;
    Ok(())
}

#[cfg(test)]
mod tests;
