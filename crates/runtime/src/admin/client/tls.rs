//! How the client trusts an `https://` admin server: the CA file given (`--admin-ca`), the
//! platform's trust store, or, asked for by name, nothing (`--insecure-skip-tls-verify`, for a
//! server's self-signed certificate, as kubectl spells it).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::files::CaError;

/// Errors setting up TLS.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The CA file cannot be used.
    #[error("--admin-ca {path}: {source}")]
    Ca {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: CaError,
    },
    /// Both a CA and no verification were asked for.
    #[error(
        "--admin-ca and --insecure-skip-tls-verify together: verify with the CA, or skip verification, not both"
    )]
    Conflict,
    /// rustls refused the configuration (the platform verifier could not start).
    #[error("TLS setup: {0}")]
    Rustls(#[source] rustls::Error),
    /// The server name to verify is not a DNS name or an IP address.
    #[error("TLS server name `{name}`: not a DNS name or an IP address")]
    ServerName {
        /// What was given.
        name: String,
    },
}

/// How the server's certificate is checked.
#[derive(Debug, Clone, Default)]
pub enum Trust {
    /// The platform's trust store.
    #[default]
    Platform,
    /// The certificates of this PEM file.
    Ca(PathBuf),
    /// None: any certificate is accepted (the handshake's signatures are still checked, so
    /// the server holds the key of the certificate it shows). For a self-signed admin.
    InsecureSkipVerify,
}

impl Trust {
    /// From the flags: `--admin-ca FILE` and `--insecure-skip-tls-verify` exclude each other.
    pub fn from_flags(ca: Option<&Path>, insecure: bool) -> Result<Trust, TlsError> {
        match (ca, insecure) {
            (Some(_), true) => Err(TlsError::Conflict),
            (Some(path), false) => Ok(Trust::Ca(path.to_path_buf())),
            (None, true) => Ok(Trust::InsecureSkipVerify),
            (None, false) => Ok(Trust::Platform),
        }
    }

    /// Whether anything but the default was asked for (so a plain `http://` target can say
    /// the flag does nothing there).
    pub fn is_explicit(&self) -> bool {
        !matches!(self, Trust::Platform)
    }
}

/// A TLS client configuration and the name the certificate must carry.
#[derive(Clone)]
pub struct Tls {
    pub(crate) config: Arc<rustls::ClientConfig>,
    pub(crate) server_name: ServerName<'static>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl Tls {
    /// TLS checking the certificate by `trust`, for `server_name` (a DNS name or an IP).
    pub fn new(trust: &Trust, server_name: &str) -> Result<Tls, TlsError> {
        let name =
            ServerName::try_from(server_name.to_string()).map_err(|_| TlsError::ServerName {
                name: server_name.to_string(),
            })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Rustls)?;
        let config = match trust {
            Trust::Platform => {
                use rustls_platform_verifier::BuilderVerifierExt;
                builder
                    .with_platform_verifier()
                    .map_err(TlsError::Rustls)?
                    .with_no_client_auth()
            }
            Trust::Ca(path) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in read_ca(path)? {
                    roots.add(cert).map_err(|e| TlsError::Ca {
                        path: path.clone(),
                        source: CaError::Unusable(e),
                    })?;
                }
                builder.with_root_certificates(roots).with_no_client_auth()
            }
            Trust::InsecureSkipVerify => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(
                    provider.signature_verification_algorithms,
                )))
                .with_no_client_auth(),
        };
        Ok(Tls {
            config: Arc::new(config),
            server_name: name,
        })
    }
}

/// The PEM certificates of `path` (at least one).
fn read_ca(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    crate::files::ca_certificates(path).map_err(|source| TlsError::Ca {
        path: path.to_path_buf(),
        source,
    })
}

/// Accepts any certificate; still checks that the handshake is signed by its key.
#[derive(Debug)]
struct AnyCertificate(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}
