//! One webhook call: an HTTPS POST of the AdmissionReview to the webhook's `clientConfig.url`,
//! as kube-apiserver's webhook client makes it.
//!
//! Contract:
//! - Only `clientConfig.url` is called. A `service` reference is a failed call: this server
//!   runs no Services to resolve.
//! - HTTPS only, HTTP/1.1, trusting exactly the certificates of `clientConfig.caBundle` (PEM):
//!   never the system's roots, so a webhook without a caBundle is a failed call saying so. The
//!   server name checked is the URL's host (a DNS name, or an IP address in the certificate's
//!   IP SANs). No client certificate is presented.
//! - The URL gets `timeout=<N>s` added to its query, as kube-apiserver adds it, and the body is
//!   sent as `Content-Type: application/json` with `Accept: application/json`.
//! - The whole call (connect, TLS handshake, request and the complete response) is bounded by
//!   the webhook's `timeoutSeconds`; past it the call fails with `context deadline exceeded`,
//!   kube-apiserver's words. A response of more than [`RESPONSE_LIMIT`] bytes fails too.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::admissionregistration::v1::WebhookClientConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;

use super::error::{CallError, PostError};

/// The largest webhook response read, in bytes (a request body's limit on a real cluster).
pub(crate) const RESPONSE_LIMIT: usize = 3 * 1024 * 1024;

/// A resolved webhook endpoint: where to connect and whom to trust.
pub(crate) struct Endpoint {
    /// The URL posted to, with its `timeout` parameter (as error messages quote it).
    pub url: String,
    uri: Uri,
    host: String,
    port: u16,
    tls: Arc<rustls::ClientConfig>,
}

/// The endpoint of `client` for a call bounded by `timeout`.
pub(crate) fn endpoint(
    client: &WebhookClientConfig,
    timeout: Duration,
) -> Result<Endpoint, CallError> {
    let configured = match (&client.url, &client.service) {
        (Some(url), _) => url,
        (None, Some(s)) => {
            return Err(CallError::Service {
                namespace: s.namespace.clone(),
                name: s.name.clone(),
            });
        }
        (None, None) => return Err(CallError::NoClient),
    };
    let bad = |why: &str| CallError::Url {
        url: configured.clone(),
        why: why.into(),
    };
    let parsed: Uri = configured
        .parse()
        .map_err(|e: http::uri::InvalidUri| bad(&e.to_string()))?;
    if parsed.scheme_str() != Some("https") {
        return Err(bad("'https' is the only allowed URL scheme"));
    }
    let host = parsed.host().ok_or_else(|| bad("host must be specified"))?;
    // `[::1]` connects and is verified as the address inside the brackets.
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = parsed.port_u16().unwrap_or(443);
    let param = format!("timeout={}s", timeout.as_secs());
    let path_and_query = match parsed.path_and_query().map(|p| (p.path(), p.query())) {
        Some((path, Some(q))) if !q.is_empty() => format!("{path}?{q}&{param}"),
        Some((path, _)) => format!("{path}?{param}"),
        None => format!("/?{param}"),
    };
    let authority = parsed.authority().map(|a| a.as_str()).unwrap_or_default();
    let url = format!("https://{authority}{path_and_query}");
    let uri: Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| bad(&e.to_string()))?;
    Ok(Endpoint {
        tls: tls_config(client.ca_bundle.as_ref().map(|b| b.0.as_slice()))?,
        url,
        uri,
        host,
        port,
    })
}

/// A TLS client configuration trusting exactly the certificates of `ca_bundle`.
fn tls_config(ca_bundle: Option<&[u8]>) -> Result<Arc<rustls::ClientConfig>, CallError> {
    let pem = ca_bundle
        .filter(|b| !b.iter().all(u8::is_ascii_whitespace))
        .ok_or(CallError::NoCaBundle)?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| CallError::CaBundle {
            why: format!("not PEM: {e}"),
        })?;
        roots.add(cert).map_err(|e| CallError::CaBundle {
            why: format!("unusable certificate: {e}"),
        })?;
    }
    if roots.is_empty() {
        return Err(CallError::CaBundle {
            why: "no PEM certificate in it".into(),
        });
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| CallError::CaBundle {
            why: format!("no TLS version available: {e}"),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// POSTs `body` to `to`, the whole exchange bounded by `timeout`; the response body of a 200.
pub(crate) async fn post(
    to: &Endpoint,
    timeout: Duration,
    body: Vec<u8>,
) -> Result<Bytes, CallError> {
    let failed = |source| CallError::Post {
        url: to.url.clone(),
        source,
    };
    let (status, bytes) = tokio::time::timeout(timeout, exchange(to, body))
        .await
        .map_err(|_| failed(PostError::Timeout))?
        .map_err(failed)?;
    if status != StatusCode::OK {
        let text = String::from_utf8_lossy(&bytes);
        return Err(CallError::Status {
            code: status.as_u16(),
            body: text.chars().take(200).collect(),
        });
    }
    Ok(bytes)
}

async fn exchange(to: &Endpoint, body: Vec<u8>) -> Result<(StatusCode, Bytes), PostError> {
    let addr = format!("{}:{}", to.host, to.port);
    let tcp = TcpStream::connect((to.host.as_str(), to.port))
        .await
        .map_err(|source| PostError::Dial { addr, source })?;
    let _ = tcp.set_nodelay(true);
    let name = ServerName::try_from(to.host.clone()).map_err(|e| PostError::Tls {
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, e),
    })?;
    let tls = tokio_rustls::TlsConnector::from(to.tls.clone())
        .connect(name, tcp)
        .await
        .map_err(|source| PostError::Tls { source })?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|source| PostError::Http { source })?;
    let authority = to.uri.authority().map(|a| a.as_str()).unwrap_or_default();
    let request = Request::builder()
        .method(Method::POST)
        .uri(to.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/"))
        .header(header::HOST, authority)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json")
        .header(header::USER_AGENT, "informant-devserver")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| PostError::Body { source: e.into() })?;
    let answer = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|source| PostError::Http { source })?;
        let status = response.status();
        let bytes = Limited::new(response.into_body(), RESPONSE_LIMIT)
            .collect()
            .await
            .map_err(|source| PostError::Body { source })?
            .to_bytes();
        Ok((status, bytes))
    };
    // The connection is driven here, not spawned, so that it ends with the call (a timeout
    // drops it, closing the socket).
    tokio::pin!(answer, conn);
    tokio::select! {
        biased;
        done = &mut answer => done,
        closed = &mut conn => match closed {
            // The connection may finish as the body completes; the answer has it by then.
            Ok(()) => answer.await,
            Err(source) => Err(PostError::Http { source }),
        },
    }
}
