//! Outbound HTTP through the host's `wasi:http/outgoing-handler`.
//!
//! The host sends a request only to an origin (`scheme://host:port`) listed in the plugin's
//! manifest `allowed-outbound-hosts` (and inside its tenant's ceiling); anything else fails
//! with an error saying the host denied it, before any connection. Redirects are not followed:
//! a `3xx` comes back as the [`Response`]. Time spent waiting counts against the event's
//! deadline, whatever `timeout` says.
//!
//! Natively (the [`testing`](crate::testing) harness, `cargo test`) there is no host to send
//! through: every call returns `Err` saying so, so a plugin's unit tests exercise its error
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

/// POSTs `value` as JSON (`content-type: application/json`) to `url`.
pub fn post_json(
    url: &str,
    value: &serde_json::Value,
    timeout: Duration,
) -> Result<Response, String> {
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
) -> Result<Response, String> {
    let target = Target::parse(url)?;
    backend(method, &target, headers, body, timeout).map_err(|why| format!("{method} {url}: {why}"))
}

/// A URL split as `wasi:http` wants it.
struct Target<'a> {
    https: bool,
    authority: &'a str,
    path_with_query: &'a str,
}

impl<'a> Target<'a> {
    fn parse(url: &'a str) -> Result<Self, String> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| format!("`{url}` is not an absolute http(s) URL"))?;
        let https = if scheme.eq_ignore_ascii_case("https") {
            true
        } else if scheme.eq_ignore_ascii_case("http") {
            false
        } else {
            return Err(format!("`{url}`: only http and https are supported"));
        };
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(end);
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
) -> Result<Response, String> {
    use crate::wit::wasi::http::outgoing_handler;
    use crate::wit::wasi::http::types::{
        ErrorCode, Fields, Method, OutgoingBody, OutgoingRequest, RequestOptions, Scheme,
    };
    use crate::wit::wasi::io::streams::StreamError;

    let fields = Fields::new();
    for (name, value) in headers {
        fields
            .append(name, value.as_bytes())
            .map_err(|e| format!("header `{name}`: {e:?}"))?;
    }
    // A length rather than chunked encoding: some webhook receivers refuse chunked bodies.
    if !body.is_empty()
        && !headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("content-length"))
    {
        fields
            .append("content-length", body.len().to_string().as_bytes())
            .map_err(|e| format!("header `content-length`: {e:?}"))?;
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
    let set = |ok: Result<(), ()>, what: &str| ok.map_err(|()| format!("invalid {what}"));
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

    let outgoing = request
        .body()
        .map_err(|()| "request body taken".to_string())?;
    {
        let stream = outgoing
            .write()
            .map_err(|()| "request body stream taken".to_string())?;
        for chunk in body.chunks(4096) {
            stream
                .blocking_write_and_flush(chunk)
                .map_err(|e| format!("writing the body: {e:?}"))?;
        }
    }
    let pending = outgoing_handler::handle(request, Some(options)).map_err(describe)?;
    OutgoingBody::finish(outgoing, None).map_err(describe)?;
    let response = loop {
        match pending.get() {
            Some(Ok(Ok(response))) => break response,
            Some(Ok(Err(code))) => return Err(describe(code)),
            Some(Err(())) => return Err("response already taken".into()),
            None => pending.subscribe().block(),
        }
    };
    let status = response.status();
    let incoming = response
        .consume()
        .map_err(|()| "response body taken".to_string())?;
    let mut received = Vec::new();
    {
        let stream = incoming
            .stream()
            .map_err(|()| "response body stream taken".to_string())?;
        loop {
            match stream.blocking_read(64 * 1024) {
                Ok(chunk) => received.extend_from_slice(&chunk),
                Err(StreamError::Closed) => break,
                Err(StreamError::LastOperationFailed(e)) => {
                    return Err(format!("reading the body: {}", e.to_debug_string()));
                }
            }
        }
    }
    fn describe(code: ErrorCode) -> String {
        match code {
            ErrorCode::HttpRequestDenied => "denied by the host: the origin is not in the \
                                             plugin's `allowed-outbound-hosts` (or its tenant's)"
                .to_string(),
            other => format!("{other:?}"),
        }
    }
    Ok(Response {
        status,
        body: received,
    })
}

#[cfg(not(target_arch = "wasm32"))]
fn backend(
    _method: &str,
    target: &Target<'_>,
    _headers: &[(&str, &str)],
    _body: &[u8],
    _timeout: Duration,
) -> Result<Response, String> {
    let scheme = if target.https { "https" } else { "http" };
    Err(format!(
        "not sent to {scheme}://{}{}: outbound HTTP needs the host, and the native test \
         harness has none",
        target.authority, target.path_with_query
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
        assert!(Target::parse("ftp://h").is_err());
        let err = post_json(
            "http://127.0.0.1:9/",
            &serde_json::json!({}),
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(err.contains("native test harness"), "{err}");
    }
}
