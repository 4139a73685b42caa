//! The HTTP client exports are sent with: reqwest's blocking client over rustls with the
//! `ring` provider (already the tree's, through kube; no OpenSSL, no aws-lc), trusting the
//! system's CAs and, given one, a PEM file of others; and the configured headers set on every
//! request.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use opentelemetry_http::{HttpClient, HttpError};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use super::config::Target;
use super::error::Error;

/// The client for `target`: TLS when it is `https://`, the headers on every request.
pub(super) fn build(
    target: &Target,
    ca_file: Option<&Path>,
    timeout: Duration,
) -> Result<WithHeaders, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match target.tls {
        true => {
            let extra = match ca_file {
                Some(path) => certificates(path)?,
                None => Vec::new(),
            };
            Arc::new(
                rustls_platform_verifier::Verifier::new_with_extra_roots(extra, provider.clone())
                    .map_err(Error::Tls)?,
            )
        }
        // A plain http:// endpoint never shakes hands; reqwest still wants a TLS config.
        false => Arc::new(NoTls(provider.clone())),
    };
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(Error::Tls)?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    let client = reqwest::blocking::Client::builder()
        .timeout(timeout)
        .tls_backend_preconfigured(tls)
        // Redirects would carry the credentials elsewhere.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(Error::Client)?;
    Ok(WithHeaders {
        client,
        headers: target.headers.clone(),
    })
}

/// The certificates of a PEM file, or why not (naming the file).
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    crate::files::ca_certificates(path).map_err(|source| Error::Certificates {
        path: path.to_path_buf(),
        source,
    })
}

/// The blocking client with the export's headers set on each request, replacing any the
/// exporter set (it reads `OTEL_EXPORTER_OTLP_HEADERS` itself; ours are that, checked, and the
/// flags over it).
#[derive(Debug)]
pub(super) struct WithHeaders {
    client: reqwest::blocking::Client,
    headers: HeaderMap,
}

impl HttpClient for WithHeaders {
    // What `#[async_trait]` makes of the trait's `async fn`, written out.
    fn send_bytes<'a, 'b>(
        &'a self,
        mut request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'b>>
    where
        'a: 'b,
        Self: 'b,
    {
        for (name, value) in &self.headers {
            request.headers_mut().insert(name.clone(), value.clone());
        }
        Box::pin(async move { self.client.send_bytes(request).await })
    }
}

/// The verifier of a client that only speaks plain HTTP: refuses every certificate.
#[derive(Debug)]
struct NoTls(Arc<CryptoProvider>);

impl ServerCertVerifier for NoTls {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Err(rustls::Error::General(
            "the OTLP endpoint is http://: no certificate is trusted".into(),
        ))
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("no TLS for http://".into()))
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("no TLS for http://".into()))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
