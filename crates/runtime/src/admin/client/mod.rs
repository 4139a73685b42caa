//! Reading a running host's admin server from outside: `informant status` (its plugins as a
//! table), `informant logs` (one plugin's log lines, followed if asked) and `informant
//! dead-letters` ([`dead_letters`]).
//!
//! Plain HTTP/1.1 over one TCP connection per request; the admin server has no TLS and no
//! authentication of its own (it is meant for loopback or a pod network).

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

use crate::plugin::imports::log::escape_controls;

pub mod dead_letters;

/// How long connecting and the answer's head may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Longest error text a table cell shows; `--output json` has it whole.
const ERROR_CELL: usize = 60;

/// Errors reading an admin server.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The address is not `HOST:PORT` (or `http://HOST:PORT`).
    #[error("admin address `{addr}`: expected HOST:PORT, e.g. 127.0.0.1:9090")]
    Address {
        /// What was given.
        addr: String,
    },
    /// No connection could be made.
    #[error("admin server at {addr}: cannot connect: {source}")]
    Connect {
        /// Where.
        addr: String,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
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

/// An admin server's address.
#[derive(Debug, Clone)]
pub struct AdminClient {
    authority: String,
}

impl AdminClient {
    /// The admin server at `addr`: `HOST:PORT`, or `http://HOST:PORT`.
    pub fn new(addr: &str) -> Result<Self> {
        let bare = addr.strip_prefix("http://").unwrap_or(addr);
        let bare = bare.strip_suffix('/').unwrap_or(bare);
        let valid = bare
            .parse::<http::uri::Authority>()
            .ok()
            .filter(|a| a.port_u16().is_some() && !a.as_str().contains('@'));
        match valid {
            Some(a) => Ok(AdminClient {
                authority: a.as_str().to_string(),
            }),
            None => Err(ClientError::Address {
                addr: addr.to_string(),
            }),
        }
    }

    /// Every plugin the host runs or waits to load, by tenant and name.
    pub async fn status(&self) -> Result<Vec<StatusRow>> {
        #[derive(serde::Deserialize)]
        struct Plugins {
            plugins: Vec<StatusRow>,
        }
        let path = "/plugins";
        let body = self.get(path).await?;
        let bytes = body
            .collect()
            .await
            .map_err(|source| self.http(source))?
            .to_bytes();
        let decoded: Plugins =
            serde_json::from_slice(&bytes).map_err(|source| self.decode(path, source))?;
        Ok(decoded.plugins)
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
        let body = self.get(&path).await?;
        Ok(LogStream {
            client: self.clone(),
            path,
            body,
            buf: BytesMut::new(),
            done: false,
        })
    }

    async fn get(&self, path: &str) -> Result<Incoming> {
        self.send(http::Method::GET, path, None).await
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
        let exchange = async {
            let tcp = tokio::net::TcpStream::connect(&self.authority)
                .await
                .map_err(|source| ClientError::Connect {
                    addr: self.authority.clone(),
                    source,
                })?;
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
                .await
                .map_err(|source| self.http(source))?;
            tokio::spawn(async move {
                // Ends with the response body (or its reader going away): nothing to report.
                let _ = conn.await;
            });
            let mut request = http::Request::builder()
                .method(method)
                .uri(path)
                .header(http::header::HOST, &self.authority);
            if body.is_some() {
                request = request.header(http::header::CONTENT_TYPE, "application/json");
            }
            let request = request
                .body(http_body_util::Full::new(bytes::Bytes::from(
                    body.unwrap_or_default(),
                )))
                .map_err(|_| ClientError::Address {
                    addr: self.authority.clone(),
                })?;
            sender
                .send_request(request)
                .await
                .map_err(|source| self.http(source))
        };
        let response = tokio::time::timeout(TIMEOUT, exchange)
            .await
            .map_err(|_| ClientError::Timeout {
                addr: self.authority.clone(),
            })??;
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
        let first = text.lines().next().unwrap_or_default();
        Err(ClientError::Status {
            addr: self.authority.clone(),
            path: path.to_string(),
            status: status.as_u16(),
            message: escape_controls(first).into_owned(),
        })
    }

    fn http(&self, source: hyper::Error) -> ClientError {
        ClientError::Http {
            addr: self.authority.clone(),
            source,
        }
    }

    fn decode(&self, path: &str, source: serde_json::Error) -> ClientError {
        ClientError::Decode {
            addr: self.authority.clone(),
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

/// How `informant status` shows a plugin's state: coloured for a terminal.
fn state_colour(state: &str) -> &'static str {
    match state {
        "running" => "\x1b[32m",
        "backing-off" => "\x1b[33m",
        "quarantined" => "\x1b[31m",
        _ => "\x1b[36m",
    }
}

/// The rows as an aligned table, one plugin a line under a header; `colour` adds ANSI colours
/// to the state (for a terminal only). `SINCE` is how long each has been in its state.
pub fn status_table(rows: &[StatusRow], colour: bool) -> String {
    table_at(rows, colour, jiff::Timestamp::now())
}

fn table_at(rows: &[StatusRow], colour: bool, now: jiff::Timestamp) -> String {
    const HEADER: [&str; 9] = [
        "TENANT",
        "PLUGIN",
        "STATE",
        "HANDLED",
        "FAILED",
        "RETRIED",
        "BACKLOG",
        "SINCE",
        "LAST ERROR",
    ];
    let cells: Vec<[String; 9]> = rows
        .iter()
        .map(|r| {
            let error = r
                .last_error
                .clone()
                .or_else(|| r.waiting.as_ref().map(|w| format!("waiting: {}", w.reason)))
                .unwrap_or_default();
            [
                if r.tenant.is_empty() {
                    "-".into()
                } else {
                    cell(&r.tenant, usize::MAX)
                },
                cell(&r.name, usize::MAX),
                cell(&r.state, usize::MAX),
                r.handled.to_string(),
                r.failed.to_string(),
                r.retried.to_string(),
                r.backlog.to_string(),
                age(&r.since, now),
                cell(&error, ERROR_CELL),
            ]
        })
        .collect();
    let mut widths = HEADER.map(|h| h.chars().count());
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let numeric = |i: usize| (3..=6).contains(&i);
    let mut out = String::new();
    let mut line = |row: &[String], header: bool| {
        let mut text = String::new();
        for (i, c) in row.iter().enumerate() {
            let pad = widths[i].saturating_sub(c.chars().count());
            let last = i == row.len() - 1;
            let shown = if colour && i == 2 && !header {
                format!("{}{c}\x1b[0m", state_colour(c))
            } else {
                c.clone()
            };
            if numeric(i) {
                text.push_str(&" ".repeat(pad));
                text.push_str(&shown);
            } else {
                text.push_str(&shown);
                if !last {
                    text.push_str(&" ".repeat(pad));
                }
            }
            if !last {
                text.push_str("  ");
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&HEADER.map(String::from), true);
    for row in &cells {
        line(row, false);
    }
    out
}

/// `text` on one line (controls escaped), cut to `max` characters.
fn cell(text: &str, max: usize) -> String {
    let one_line = escape_controls(text);
    if one_line.chars().count() <= max {
        return one_line.into_owned();
    }
    let mut cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// How long ago `since` was, as `kubectl` shows ages: `45s`, `3m12s`, `2h5m`, `4d3h`; `-` if it
/// is not a time.
fn age(since: &str, now: jiff::Timestamp) -> String {
    let Ok(then) = since.parse::<jiff::Timestamp>() else {
        return "-".into();
    };
    let secs = now.as_second().saturating_sub(then.as_second()).max(0);
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m{s}s"),
        (0, _, _) => format!("{h}h{m}m"),
        _ => format!("{d}d{h}h"),
    }
}

/// Rows as `informant status --output json` prints them: `{"plugins": [...]}`.
pub fn status_json(rows: &[StatusRow]) -> String {
    let mut map = BTreeMap::new();
    map.insert("plugins", rows);
    serde_json::to_string_pretty(&map).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(tenant: &str, name: &str, state: &str, error: Option<&str>) -> StatusRow {
        StatusRow {
            tenant: tenant.into(),
            name: name.into(),
            state: state.into(),
            handled: 1200,
            failed: 3,
            retried: 1,
            backlog: 0,
            last_error: error.map(str::to_string),
            since: "2026-11-27T08:00:00Z".into(),
            waiting: None,
        }
    }

    #[test]
    fn the_table_is_aligned_plain_without_colour_and_one_line_per_plugin() {
        let now: jiff::Timestamp = "2026-11-27T09:05:30Z".parse().unwrap();
        let rows = [
            row("", "echo", "running", None),
            row(
                "team-a",
                "flaky",
                "quarantined",
                Some("trap\n\x1b[2Jforged line"),
            ),
        ];
        let table = table_at(&rows, false, now);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3, "{table}");
        assert!(!table.contains('\x1b'), "{table}");
        assert_eq!(
            lines[0],
            "TENANT  PLUGIN  STATE        HANDLED  FAILED  RETRIED  BACKLOG  SINCE  LAST ERROR"
        );
        assert_eq!(
            lines[1],
            "-       echo    running         1200       3        1        0  1h5m"
        );
        assert!(
            lines[2].starts_with("team-a  flaky   quarantined     1200"),
            "{table}"
        );
        assert!(
            lines[2].ends_with("trap\\n\\u{1b}[2Jforged line"),
            "{table}"
        );
        let coloured = table_at(&rows, true, now);
        assert!(coloured.contains("\x1b[32mrunning\x1b[0m"), "{coloured}");
    }

    #[test]
    fn ages_read_like_kubectl() {
        let now: jiff::Timestamp = "2026-11-27T09:00:00Z".parse().unwrap();
        assert_eq!(age("2026-11-27T08:59:15Z", now), "45s");
        assert_eq!(age("2026-11-27T08:56:48Z", now), "3m12s");
        assert_eq!(age("2026-11-25T06:00:00Z", now), "2d3h");
        assert_eq!(age("", now), "-");
    }

    #[test]
    fn addresses_are_host_and_port() {
        for ok in ["127.0.0.1:9090", "http://localhost:9090/", "[::1]:9090"] {
            assert!(AdminClient::new(ok).is_ok(), "{ok}");
        }
        for bad in ["localhost", "user@host:1", "http://h:1/path", ""] {
            assert!(AdminClient::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn log_lines_show_on_one_line() {
        let l: LogLine = serde_json::from_str(
            r#"{"seq":3,"time":"2026-11-27T09:00:00Z","level":"info","message":"a\nb\u001b[2J"}"#,
        )
        .unwrap();
        assert_eq!(l.display(), "2026-11-27T09:00:00Z info  a\\nb\\u{1b}[2J");
        let d: LogLine = serde_json::from_str(r#"{"dropped":7}"#).unwrap();
        assert_eq!(d, LogLine::Dropped { dropped: 7 });
    }
}
