//! Outbound HTTP for plugins: the standard `wasi:http/outgoing-handler` (wasmtime-wasi-http),
//! allowed per origin.
//!
//! A plugin may reach the origins in its manifest's `allowed-outbound-hosts`, each of which
//! admission has already checked against its tenant's ceiling (see
//! [`acceptance`](crate::plugin::load::acceptance)). Every request is checked here, in the `send_request` hook,
//! before anything touches the network: a request whose scheme, host or port is not allowed,
//! whose authority carries user info or is not a canonical host, or whose `Host` header differs
//! from its authority, fails with `HTTP-request-denied` without a DNS lookup or a connection.
//!
//! Redirects are not followed: wasmtime-wasi-http's client hands a `3xx` back to the plugin as
//! it came, and a plugin that follows one sends a new request, checked like any other.
//!
//! Time spent in a request counts against the event's deadline: the plugin waits for the
//! answer in a WASI poll, which is an async host call under the call's timeout, and a cut-off
//! instance's store (with the request's task) is dropped, which aborts the request.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;
use wasmtime_wasi_http::p2::bindings::http::types::ErrorCode;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

use crate::manifest::Origin;
use crate::manifest::outbound::{OriginFlaw, Scheme, canonical_host, parse_port, split_authority};
use crate::telemetry::{EventSpan, HostSpan};

/// Counters of one plugin version's outbound requests, read by `/metrics`.
#[derive(Debug, Default)]
pub struct OutboundStats {
    /// Requests allowed and sent.
    pub requests: AtomicU64,
    /// Sent requests that got no response (connect, TLS or protocol errors) or whose response
    /// body failed or ran over its bound.
    pub failures: AtomicU64,
    /// Requests refused by the allow-list, before any connection.
    pub denied: AtomicU64,
    /// Request body bytes handed to the connection.
    pub bytes_sent: AtomicU64,
    /// Response body bytes read by the plugin.
    pub bytes_received: AtomicU64,
}

/// One plugin version's outbound policy and counters, shared by its instances.
#[derive(Debug)]
pub struct Outbound {
    allowed: Vec<Origin>,
    max_response_bytes: u64,
    /// What it did.
    pub stats: OutboundStats,
}

impl Default for Outbound {
    /// No outbound HTTP at all.
    fn default() -> Self {
        Outbound::new(Vec::new(), 0)
    }
}

impl Outbound {
    /// Requests only to `allowed`, with response bodies up to `max_response_bytes`.
    pub fn new(allowed: Vec<Origin>, max_response_bytes: u64) -> Self {
        Outbound {
            allowed,
            max_response_bytes,
            stats: OutboundStats::default(),
        }
    }

    /// Why a request may not be sent, if it may not: checked on the request exactly as the
    /// client will send it (the authority it connects to, the `Host` header it writes).
    pub fn check(&self, request: &http::Request<WasiBody>) -> Result<(), Denied> {
        let uri = request.uri();
        // The URL as shown to the plugin and logged: without user info or query values.
        let shown = || crate::redact::url(&uri.to_string()).into_owned();
        let scheme = uri
            .scheme_str()
            .and_then(Scheme::parse)
            .ok_or_else(|| Denied::Scheme(shown()))?;
        let authority = uri
            .authority()
            .ok_or_else(|| Denied::NoHost(shown()))?
            .as_str();
        let (host, port) = split_authority(authority)?;
        let host = canonical_host(host)?;
        let port = match port {
            Some(p) => parse_port(p)?,
            None => scheme.default_port(),
        };
        for value in request.headers().get_all(http::header::HOST) {
            if value.as_bytes() != authority.as_bytes() {
                // `split_authority` refused user info, so the authority is a host and port.
                return Err(Denied::HostHeader {
                    header: format!("{value:?}"),
                    authority: authority.to_string(),
                });
            }
        }
        if self.allowed.iter().any(|o| o.matches(scheme, &host, port)) {
            Ok(())
        } else {
            Err(Denied::NotAllowed(format!(
                "{}://{host}:{port}",
                scheme.as_str()
            )))
        }
    }
}

/// Why an outbound request is refused before it is sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// Neither `http` nor `https`.
    #[error("scheme of `{0}` is not http or https")]
    Scheme(String),
    /// No authority to connect to.
    #[error("`{0}` has no host")]
    NoHost(String),
    /// An authority that is not a plain host and port (user info, a host that is not one).
    #[error(transparent)]
    Authority(#[from] OriginFlaw),
    /// A `Host` header naming another server than the one connected to.
    #[error("the Host header {header} differs from the request's authority `{authority}`")]
    HostHeader {
        /// The header's value, quoted.
        header: String,
        /// What the request connects to.
        authority: String,
    },
    /// An origin the manifest does not allow.
    #[error("`{0}` is not in the manifest's `allowed-outbound-hosts`")]
    NotAllowed(String),
}

/// The `wasi:http` hooks of one instance: every request goes through its plugin's allow-list.
///
/// With traces on, each request sent for an event gets a child span of the event's, and the
/// request carries that span as its W3C `traceparent`: the host's replaces any `traceparent` the
/// plugin set (and its `tracestate`, which would describe another trace), so a collector never
/// sees a plugin-chosen parent. With traces off the plugin's own headers go out as it set them.
pub(crate) struct Hooks {
    pub(crate) outbound: Arc<Outbound>,
    pub(crate) plugin: Arc<str>,
    pub(crate) tenant: Arc<str>,
    /// The span of the event in hand (inert with none, or with traces off).
    pub(crate) span: EventSpan,
}

type SendFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                ),
                HttpError,
            >,
        > + Send,
>;

impl WasiHttpHooks for Hooks {
    // The default hooks log every transport error at warn without naming the plugin: one
    // plugin retrying an unreachable receiver would flood the host's log. Its failures
    // counter shows them; the detail goes to debug, tagged.
    fn p2_error_from_hyper(&mut self, err: &hyper::Error) -> ErrorCode {
        tracing::debug!(plugin = %self.plugin, tenant = %self.tenant, error = %err, "outbound HTTP protocol error");
        ErrorCode::HttpProtocolError
    }

    fn p2_error_from_connect(&mut self, err: &std::io::Error) -> ErrorCode {
        tracing::debug!(plugin = %self.plugin, tenant = %self.tenant, error = %err, "outbound HTTP connect error");
        ErrorCode::ConnectionRefused
    }

    fn p2_error_from_tls(&mut self, err: &std::io::Error) -> ErrorCode {
        tracing::debug!(plugin = %self.plugin, tenant = %self.tenant, error = %err, "outbound HTTP TLS error");
        ErrorCode::TlsProtocolError
    }

    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> SendFuture {
        _ = fut;
        let outbound = self.outbound.clone();
        if let Err(reason) = outbound.check(&request) {
            outbound.stats.denied.fetch_add(1, Ordering::Relaxed);
            // Debug, not warn: a plugin decides how often this happens; the counter shows it.
            tracing::debug!(plugin = %self.plugin, tenant = %self.tenant, %reason, "outbound HTTP request denied");
            return Box::new(async { Err(HttpError::HttpRequestDenied) });
        }
        outbound.stats.requests.fetch_add(1, Ordering::Relaxed);
        let mut request = request;
        let span = self.traced(&mut request);
        let request = request.map(|body| {
            Counted {
                inner: body,
                outbound: outbound.clone(),
                direction: Direction::Sent,
                seen: 0,
            }
            .boxed_unsync()
        });
        Box::new(async move {
            let sent = wasmtime_wasi_http::default_send_request(request, options).await;
            if span.is_on() {
                match &sent {
                    Ok((response, _)) => {
                        let status = i64::from(response.status().as_u16());
                        span.set(|| KeyValue::new("http.response.status_code", status));
                        span.end(Some("ok"));
                    }
                    Err(e) => span.end(Some(&format!("{e:?}"))),
                }
            }
            match sent {
                Ok((response, io)) => {
                    let response = response.map(|body| {
                        Counted {
                            inner: body.boxed_unsync(),
                            outbound: outbound.clone(),
                            direction: Direction::Received,
                            seen: 0,
                        }
                        .boxed_unsync()
                    });
                    Ok((response, Box::new(io) as Box<dyn Future<Output = _> + Send>))
                }
                Err(e) => {
                    outbound.stats.failures.fetch_add(1, Ordering::Relaxed);
                    Err(e)
                }
            }
        })
    }
}

impl Hooks {
    /// The request's span, a child of the event's, and its `traceparent` header in place of
    /// any the plugin set; nothing while traces are off or no event is in hand.
    fn traced(&self, request: &mut http::Request<WasiBody>) -> HostSpan {
        if !self.span.is_on() {
            return HostSpan::default();
        }
        let uri = request.uri();
        let method = request.method().as_str().to_string();
        // Not the full URL: a query string may carry a token.
        let attributes = || {
            vec![
                KeyValue::new("http.request.method", method.clone()),
                KeyValue::new("server.address", uri.host().unwrap_or_default().to_string()),
                KeyValue::new("server.port", i64::from(uri.port_u16().unwrap_or_default())),
                KeyValue::new("url.path", uri.path().to_string()),
            ]
        };
        let span = self
            .span
            .child(format!("HTTP {method}"), SpanKind::Client, attributes);
        let headers = request.headers_mut();
        headers.remove(TRACESTATE);
        match span
            .traceparent()
            .and_then(|t| http::HeaderValue::from_str(&t).ok())
        {
            Some(value) => {
                headers.insert(TRACEPARENT, value);
            }
            None => {
                headers.remove(TRACEPARENT);
            }
        }
        span
    }
}

/// W3C trace context headers.
const TRACEPARENT: http::HeaderName = http::HeaderName::from_static("traceparent");
const TRACESTATE: http::HeaderName = http::HeaderName::from_static("tracestate");

#[derive(Clone, Copy)]
enum Direction {
    Sent,
    Received,
}

/// A body that counts its bytes into the plugin's stats and, for responses, ends with
/// `HTTP-response-body-size` past the bound instead of handing more to the plugin.
struct Counted {
    inner: WasiBody,
    outbound: Arc<Outbound>,
    direction: Direction,
    seen: u64,
}

impl Body for Counted {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = &mut *self;
        let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            Poll::Ready(Some(Err(e))) => {
                if let Direction::Received = this.direction {
                    this.outbound.stats.failures.fetch_add(1, Ordering::Relaxed);
                }
                return Poll::Ready(Some(Err(e)));
            }
            other => return other,
        };
        let len = frame.data_ref().map_or(0, |d| d.len() as u64);
        this.seen += len;
        let stats = &this.outbound.stats;
        match this.direction {
            Direction::Sent => {
                stats.bytes_sent.fetch_add(len, Ordering::Relaxed);
            }
            Direction::Received => {
                if this.seen > this.outbound.max_response_bytes {
                    stats.failures.fetch_add(1, Ordering::Relaxed);
                    return Poll::Ready(Some(Err(HttpError::HttpResponseBodySize(Some(
                        this.seen,
                    )))));
                }
                stats.bytes_received.fetch_add(len, Ordering::Relaxed);
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Empty;

    fn outbound(allowed: &[&str]) -> Outbound {
        Outbound::new(
            allowed
                .iter()
                .map(|o| Origin::try_from(o.to_string()).unwrap())
                .collect(),
            1 << 20,
        )
    }

    /// A request as wasmtime-wasi-http's `handle` builds it: the URI absolute, `Host` set from
    /// the authority.
    fn request(uri: &str, host: Option<&str>) -> http::Request<WasiBody> {
        let mut b = http::Request::builder().uri(uri);
        if let Some(h) = host {
            b = b.header(http::header::HOST, h);
        }
        b.body(
            Empty::<Bytes>::new()
                .map_err(|never| match never {})
                .boxed_unsync(),
        )
        .unwrap()
    }

    #[tokio::test]
    async fn a_response_body_past_its_bound_fails_and_bytes_are_counted() {
        let o = Arc::new(Outbound::new(Vec::new(), 4));
        let body = |text: &'static str| Counted {
            inner: http_body_util::Full::new(Bytes::from_static(text.as_bytes()))
                .map_err(|never| match never {})
                .boxed_unsync(),
            outbound: o.clone(),
            direction: Direction::Received,
            seen: 0,
        };
        assert_eq!(body("1234").collect().await.unwrap().to_bytes(), "1234");
        assert!(matches!(
            body("12345").collect().await,
            Err(HttpError::HttpResponseBodySize(Some(5)))
        ));
        let stats = &o.stats;
        assert_eq!(stats.bytes_received.load(Ordering::Relaxed), 4);
        assert_eq!(stats.failures.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn only_allowed_origins_pass_whatever_the_spelling() {
        let o = outbound(&[
            "http://127.0.0.1:8080",
            "https://hooks.slack.com",
            "http://[::1]:*",
        ]);
        for ok in [
            "http://127.0.0.1:8080/x",
            "HTTP://127.0.0.1:8080/",
            "https://HOOKS.slack.com/services/x",
            "https://hooks.slack.com:443/",
            "http://[0::1]:9/",
        ] {
            let authority = ok.parse::<http::Uri>().unwrap();
            let host = authority.authority().unwrap().as_str().to_string();
            assert_eq!(o.check(&request(ok, Some(&host))), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("http://127.0.0.1:8081/", "not in the manifest"),
            ("http://127.0.0.1/", "`http://127.0.0.1:80` is not in"),
            ("https://127.0.0.1:8080/", "not in the manifest"),
            (
                "http://hooks.slack.com/",
                "`http://hooks.slack.com:80` is not in",
            ),
            ("https://hooks.slack.com./", "not a host name"),
            ("https://hooks.slack.com:8443/", "not in the manifest"),
            ("http://user@127.0.0.1:8080/", "user info"),
            ("http://127.0.0.1:8080.evil.com/", "port `8080.evil.com`"),
            ("http://localhost:8080/", "not in the manifest"),
            ("http://2130706433:8080/", "not a dotted-decimal"),
            ("http://127.0.0.1%2e:8080/", "not a host name"),
        ] {
            let err = match bad.parse::<http::Uri>() {
                Ok(uri) => {
                    let host = uri.authority().map(|a| a.as_str().to_string());
                    o.check(&request(bad, host.as_deref()))
                        .unwrap_err()
                        .to_string()
                }
                // Not even a URI: wasmtime-wasi-http refuses it before the hook.
                Err(_) => continue,
            };
            assert!(err.contains(why), "{bad}: {err}");
        }
        let err = o
            .check(&request("http://127.0.0.1:8080/", Some("evil.example")))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("differs from the request's authority"),
            "{err}"
        );
        let err = outbound(&[])
            .check(&request("http://127.0.0.1:8080/", None))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not in the manifest"), "{err}");
    }

    #[test]
    fn a_refusal_never_repeats_a_password_or_a_query_token() {
        let o = outbound(&["http://127.0.0.1:8080"]);
        // User info (refused as such), another scheme, and no scheme at all.
        for url in [
            "http://alice:s3cret@127.0.0.1:8080/",
            "ftp://alice:s3cret@127.0.0.1:8080/?token=s3cret",
            "/hooks?token=s3cret",
        ] {
            let uri = url.parse::<http::Uri>().unwrap();
            let host = uri.authority().map(|a| a.as_str().to_string());
            for header in [host.as_deref(), Some("evil.example")] {
                let err = o.check(&request(url, header)).unwrap_err().to_string();
                assert!(!err.contains("s3cret"), "{url}: {err}");
            }
        }
    }
}
