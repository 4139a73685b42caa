//! Outbound HTTP through the host's `wasi:http/outgoing-handler`.
//!
//! The host sends a request only to an origin (`scheme://host:port`) listed in the plugin's
//! manifest `allowed-outbound-hosts` (and inside its tenant's ceiling); anything else fails
//! with an [`HttpError`] of kind [`HttpErrorKind::Denied`], before any connection. Redirects are not followed:
//! a `3xx` comes back as the [`Response`]. Time spent waiting counts against the event's
//! deadline, whatever `timeout` says.
//!
//! Natively (the [`testing`](crate::testing) harness, `cargo test`) there is no host to send
//! through: every call returns an `Err` ([`HttpErrorKind::Failed`]) saying so, so a plugin's unit tests exercise its error
//! path; test the requests themselves end to end against the host.

use std::time::Duration;

/// An HTTP response: its status and its whole body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code (a redirect's `3xx` included: redirects are not followed).
    pub status: u16,
    /// The body, read to its end.
    pub body: Vec<u8>,
}

/// Why a request got no response; `kind` says why, the message names the request.
///
/// A status of any kind (a 4xx, a 5xx, a redirect's 3xx) is a [`Response`], not an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{method} {url}: {message}")]
pub struct HttpError {
    /// Why, by kind: what a plugin decides on (fail the event, or ask for a retry).
    pub kind: HttpErrorKind,
    /// The request's method.
    pub method: String,
    /// The request's URL.
    pub url: String,
    /// What went wrong, for a person.
    pub message: String,
}

/// The kinds of [`HttpError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HttpErrorKind {
    /// Refused by the host before any connection: the origin is not in the plugin's
    /// `allowed-outbound-hosts` (or its tenant's).
    Denied,
    /// Resolving, connecting, or a wait for bytes outlasted the request's timeout.
    Timeout,
    /// The URL, method or a header cannot be sent.
    Invalid,
    /// Anything else: the connection was refused or broke, the body could not be written or
    /// read, or (natively) there is no host to send through.
    Failed,
}

/// POSTs `value` as JSON (`content-type: application/json`) to `url`.
pub fn post_json(
    url: &str,
    value: &serde_json::Value,
    timeout: Duration,
) -> Result<Response, HttpError> {
    send(
        "POST",
        url,
        &[("content-type", "application/json")],
        value.to_string().as_bytes(),
        timeout,
    )
}

/// Sends one request; `timeout` bounds connecting and each wait for bytes (the host's
/// deadline bounds the whole).
pub fn send(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> Result<Response, HttpError> {
    Target::parse(url)
        .and_then(|target| backend(method, &target, headers, body, timeout))
        .map_err(|(kind, message)| HttpError {
            kind,
            method: method.to_string(),
            url: url.to_string(),
            message,
        })
}

/// What went wrong inside [`send`], before the request is named.
type Failure = (HttpErrorKind, String);

fn invalid(message: impl Into<String>) -> Failure {
    (HttpErrorKind::Invalid, message.into())
}

/// A URL split as `wasi:http` wants it.
// Natively only checked: there is no host to send it to.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
struct Target<'a> {
    https: bool,
    authority: &'a str,
    path_with_query: &'a str,
}

impl<'a> Target<'a> {
    fn parse(url: &'a str) -> Result<Self, Failure> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| invalid("not an absolute http(s) URL"))?;
        let https = if scheme.eq_ignore_ascii_case("https") {
            true
        } else if scheme.eq_ignore_ascii_case("http") {
            false
        } else {
            return Err(invalid("only http and https are supported"));
        };
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(end);
        if authority.is_empty() {
            return Err(invalid("the URL names no host"));
        }
        Ok(Target {
            https,
            authority,
            path_with_query: if path.is_empty() { "/" } else { path },
        })
    }
}

#[cfg(target_arch = "wasm32")]
fn backend(
    method: &str,
    target: &Target<'_>,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> Result<Response, Failure> {
    use crate::wit::wasi::http::outgoing_handler;
    use crate::wit::wasi::http::types::{
        ErrorCode, Fields, Method, OutgoingBody, OutgoingRequest, RequestOptions, Scheme,
    };
    use crate::wit::wasi::io::streams::StreamError;

    let fields = Fields::new();
    for (name, value) in headers {
        fields
            .append(name, value.as_bytes())
            .map_err(|e| invalid(format!("header `{name}`: {e:?}")))?;
    }
    // A length rather than chunked encoding: some webhook receivers refuse chunked bodies.
    if !body.is_empty()
        && !headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("content-length"))
    {
        fields
            .append("content-length", body.len().to_string().as_bytes())
            .map_err(|e| invalid(format!("header `content-length`: {e:?}")))?;
    }
    let request = OutgoingRequest::new(fields);
    let method = match method {
        "GET" => Method::Get,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "PATCH" => Method::Patch,
        "DELETE" => Method::Delete,
        "HEAD" => Method::Head,
        other => Method::Other(other.to_string()),
    };
    let set = |ok: Result<(), ()>, what: &str| ok.map_err(|()| invalid(format!("invalid {what}")));
    set(request.set_method(&method), "method")?;
    let scheme = if target.https {
        Scheme::Https
    } else {
        Scheme::Http
    };
    set(request.set_scheme(Some(&scheme)), "scheme")?;
    set(request.set_authority(Some(target.authority)), "host")?;
    set(
        request.set_path_with_query(Some(target.path_with_query)),
        "path",
    )?;
    let options = RequestOptions::new();
    let ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
    // Setting a timeout the host does not support is no reason to fail the request.
    let _ = options.set_connect_timeout(Some(ns));
    let _ = options.set_first_byte_timeout(Some(ns));
    let _ = options.set_between_bytes_timeout(Some(ns));

    let failed = |message: &str| (HttpErrorKind::Failed, message.to_string());
    let outgoing = request.body().map_err(|()| failed("request body taken"))?;
    {
        let stream = outgoing
            .write()
            .map_err(|()| failed("request body stream taken"))?;
        for chunk in body.chunks(4096) {
            stream
                .blocking_write_and_flush(chunk)
                .map_err(|e| failed(&format!("writing the body: {e:?}")))?;
        }
    }
    let pending = outgoing_handler::handle(request, Some(options)).map_err(describe)?;
    OutgoingBody::finish(outgoing, None).map_err(describe)?;
    let response = loop {
        match pending.get() {
            Some(Ok(Ok(response))) => break response,
            Some(Ok(Err(code))) => return Err(describe(code)),
            Some(Err(())) => return Err(failed("response already taken")),
            None => pending.subscribe().block(),
        }
    };
    let status = response.status();
    let incoming = response
        .consume()
        .map_err(|()| failed("response body taken"))?;
    let mut received = Vec::new();
    {
        let stream = incoming
            .stream()
            .map_err(|()| failed("response body stream taken"))?;
        loop {
            match stream.blocking_read(64 * 1024) {
                Ok(chunk) => received.extend_from_slice(&chunk),
                Err(StreamError::Closed) => break,
                Err(StreamError::LastOperationFailed(e)) => {
                    return Err(failed(&format!(
                        "reading the body: {}",
                        e.to_debug_string()
                    )));
                }
            }
        }
    }
    fn describe(code: ErrorCode) -> Failure {
        let kind = match &code {
            ErrorCode::HttpRequestDenied => {
                return (
                    HttpErrorKind::Denied,
                    "denied by the host: the origin is not in the plugin's \
                     `allowed-outbound-hosts` (or its tenant's)"
                        .to_string(),
                );
            }
            ErrorCode::DnsTimeout
            | ErrorCode::ConnectionTimeout
            | ErrorCode::ConnectionReadTimeout
            | ErrorCode::ConnectionWriteTimeout
            | ErrorCode::HttpResponseTimeout => HttpErrorKind::Timeout,
            ErrorCode::HttpRequestMethodInvalid | ErrorCode::HttpRequestUriInvalid => {
                HttpErrorKind::Invalid
            }
            _ => HttpErrorKind::Failed,
        };
        (kind, format!("{code:?}"))
    }
    Ok(Response {
        status,
        body: received,
    })
}

#[cfg(not(target_arch = "wasm32"))]
fn backend(
    _method: &str,
    _target: &Target<'_>,
    _headers: &[(&str, &str)],
    _body: &[u8],
    _timeout: Duration,
) -> Result<Response, Failure> {
    Err((
        HttpErrorKind::Failed,
        "not sent: outbound HTTP needs the host, and the native test harness has none".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_and_natively_fail_with_a_reason() {
        let t = Target::parse("HTTPS://hooks.slack.com/services/x?y=1").unwrap();
        assert!(t.https);
        assert_eq!(
            (t.authority, t.path_with_query),
            ("hooks.slack.com", "/services/x?y=1")
        );
        assert_eq!(Target::parse("http://h:8080").unwrap().path_with_query, "/");
        for bad in ["ftp://h", "http:///x", "h/x"] {
            let err = send("GET", bad, &[], b"", Duration::from_secs(1)).unwrap_err();
            assert_eq!((err.kind, err.url.as_str()), (HttpErrorKind::Invalid, bad));
        }
        let err = post_json(
            "http://127.0.0.1:9/",
            &serde_json::json!({}),
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert_eq!(err.kind, HttpErrorKind::Failed);
        assert_eq!(
            err.to_string(),
            "POST http://127.0.0.1:9/: not sent: outbound HTTP needs the host, and the native \
             test harness has none"
        );
    }
}
