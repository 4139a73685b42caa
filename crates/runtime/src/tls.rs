//! HTTPS for the host's servers (the admin server, the admission webhooks): a certificate and key from files (a mounted Secret, cert-manager's
//! or the operator's), reloaded when they change, or one generated at start for in-cluster use
//! when none is mounted.
//!
//! Contract:
//! - [`ServerTls::Files`]: both files are read at start (a missing or unreadable file, a key that
//!   does not match the certificate, is an error naming the file), then every
//!   `reload_every` they are read again; when their content changed, new
//!   connections get the new pair. A pair that fails to load then is logged and the old one
//!   kept, so a half-written rotation never takes the server down. Reading the content (not the
//!   modification time) follows the symbolic-link swap a Kubernetes Secret volume makes.
//! - [`ServerTls::SelfSigned`]: a fresh key and a self-signed certificate for `localhost`, the
//!   loopback addresses, the host name (`$HOSTNAME`, the pod's name) and `$POD_IP` when set.
//!   Clients cannot verify it against a CA: it keeps tokens off the wire in clear, and a
//!   scraper configured with `insecureSkipVerify` (or the certificate's fingerprint) uses it.
//! - TLS 1.2 and 1.3 with rustls' ring provider (the one kube's client uses here); HTTP/1.1.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;

/// Whether and how a server speaks HTTPS.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ServerTls {
    /// Plain HTTP.
    #[default]
    Plain,
    /// A certificate chain and its key, PEM files, reloaded when they change.
    Files {
        /// The certificate chain, leaf first.
        cert: PathBuf,
        /// The private key (PKCS#8, PKCS#1 or SEC1).
        key: PathBuf,
        /// How often the files are read again for a rotation.
        reload_every: Duration,
    },
    /// A self-signed certificate generated at start.
    SelfSigned,
}

impl ServerTls {
    /// [`ServerTls::Files`] read again every [`RELOAD_EVERY`].
    pub fn files(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> ServerTls {
        ServerTls::Files {
            cert: cert.into(),
            key: key.into(),
            reload_every: RELOAD_EVERY,
        }
    }
}

/// How often mounted certificate files are read again by default.
pub(crate) const RELOAD_EVERY: Duration = Duration::from_secs(10);

/// Errors setting up HTTPS.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate or key file could not be read.
    #[error("TLS: cannot read `{path}`: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file holds no PEM certificate, or no PEM private key.
    #[error("TLS: `{path}` holds no {what} in PEM")]
    NoPem {
        /// The file.
        path: PathBuf,
        /// `certificate` or `private key`.
        what: &'static str,
        /// Why the PEM did not parse.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// The key does not fit the certificate, or is of a kind rustls cannot sign with.
    #[error("TLS: the key `{key}` does not go with the certificate `{cert}`: {source}")]
    Mismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// What rustls said.
        #[source]
        source: rustls::Error,
    },
    /// Generating the self-signed certificate failed.
    #[error("TLS: cannot generate a self-signed certificate: {0}")]
    Generate(#[source] rcgen::Error),
    /// rustls refused the configuration or the generated pair.
    #[error("TLS: {0}")]
    Rustls(#[source] rustls::Error),
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The certificate new connections get, swapped in place by the reloader.
#[derive(Debug)]
pub(crate) struct Current(RwLock<Arc<CertifiedKey>>);

impl Current {
    /// Serving `key` until [`Current::set`].
    pub(crate) fn new(key: CertifiedKey) -> Arc<Current> {
        Arc::new(Current(RwLock::new(Arc::new(key))))
    }

    /// New connections get `key`.
    pub(crate) fn set(&self, key: CertifiedKey) {
        *self.0.write() = Arc::new(key);
    }
}

/// An acceptor serving whatever `current` holds, with `ca_bundle` as what clients trust.
pub(crate) fn serving(current: Arc<Current>, ca_bundle: Vec<u8>) -> Result<Tls, TlsError> {
    Ok(Tls {
        acceptor: acceptor(current)?,
        ca_bundle,
        _reloader: None,
    })
}

/// The pair in PEM `cert` (a chain, leaf first) and `key`.
pub(crate) fn certified_key(cert: &[u8], key: &[u8]) -> Result<CertifiedKey, TlsError> {
    pair(Path::new("tls.crt"), cert, Path::new("tls.key"), key)
}

fn acceptor(current: Arc<Current>) -> Result<tokio_rustls::TlsAcceptor, TlsError> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Rustls)?
        .with_no_client_auth()
        .with_cert_resolver(current);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

impl ResolvesServerCert for Current {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().clone())
    }
}

/// A TLS acceptor and what keeps its certificate current; reloading stops when it is dropped.
pub(crate) struct Tls {
    pub(crate) acceptor: tokio_rustls::TlsAcceptor,
    /// What a client trusts the server by, in PEM: the generated CA, or the last certificate
    /// of the mounted chain as read at start.
    ca_bundle: Vec<u8>,
    _reloader: Option<tokio::task::JoinHandle<()>>,
}

impl Tls {
    /// The PEM certificates a client verifies this server with (a webhook's `caBundle`).
    pub(crate) fn ca_bundle(&self) -> Vec<u8> {
        self.ca_bundle.clone()
    }
}

impl Drop for Tls {
    fn drop(&mut self) {
        if let Some(r) = &self._reloader {
            r.abort();
        }
    }
}

/// The acceptor `mode` asks for (`None` for plain HTTP); `names` go into a self-signed
/// certificate besides the usual ones.
pub(crate) fn setup(mode: &ServerTls, names: &[String]) -> Result<Option<Tls>, TlsError> {
    let (key, ca_bundle, reload) = match mode {
        ServerTls::Plain => return Ok(None),
        ServerTls::SelfSigned => {
            let (key, ca) = self_signed(names)?;
            (key, ca, None)
        }
        ServerTls::Files {
            cert,
            key,
            reload_every,
        } => {
            let (pair, read) = load(cert, key)?;
            let last = pair.cert.last().map(|c| pem("CERTIFICATE", c));
            (
                pair,
                last.unwrap_or_default(),
                Some((cert.clone(), key.clone(), *reload_every, read)),
            )
        }
    };
    let current = Current::new(key);
    let acceptor = acceptor(current.clone())?;
    let reloader = reload
        .map(|(cert, key, every, read)| tokio::spawn(reload_loop(current, cert, key, every, read)));
    Ok(Some(Tls {
        acceptor,
        ca_bundle,
        _reloader: reloader,
    }))
}

/// Reads both files again every `every`, and swaps in a pair whose content changed.
async fn reload_loop(
    current: Arc<Current>,
    cert: PathBuf,
    key: PathBuf,
    every: Duration,
    mut last: Contents,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let read = (std::fs::read(&cert), std::fs::read(&key));
        let (Ok(c), Ok(k)) = read else {
            tracing::warn!(cert = %cert.display(), key = %key.display(), "TLS: cannot read the certificate files; keeping the one in use");
            continue;
        };
        if (&c, &k) == (&last.0, &last.1) {
            continue;
        }
        match pair(&cert, &c, &key, &k) {
            Ok(pair) => {
                *current.0.write() = Arc::new(pair);
                tracing::info!(cert = %cert.display(), "TLS: certificate reloaded");
                last = (c, k);
            }
            Err(e) => {
                tracing::warn!(error = %e, "TLS: the changed certificate files do not load; keeping the one in use");
            }
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// The bytes of the certificate and key files, as last read.
type Contents = (Vec<u8>, Vec<u8>);

/// The pair in `cert` and `key`, and the bytes read (to tell a change).
fn load(cert: &Path, key: &Path) -> Result<(CertifiedKey, Contents), TlsError> {
    let (c, k) = (read(cert)?, read(key)?);
    let pair = pair(cert, &c, key, &k)?;
    Ok((pair, (c, k)))
}

fn pair(
    cert_path: &Path,
    cert: &[u8],
    key_path: &Path,
    key: &[u8],
) -> Result<CertifiedKey, TlsError> {
    let no_pem = |path: &Path, what, source| TlsError::NoPem {
        path: path.to_path_buf(),
        what,
        source,
    };
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| no_pem(cert_path, "certificate", e))?;
    if chain.is_empty() {
        return Err(no_pem(
            cert_path,
            "certificate",
            rustls::pki_types::pem::Error::NoItemsFound,
        ));
    }
    let private =
        PrivateKeyDer::from_pem_slice(key).map_err(|e| no_pem(key_path, "private key", e))?;
    CertifiedKey::from_der(chain, private, &provider()).map_err(|source| TlsError::Mismatch {
        cert: cert_path.to_path_buf(),
        key: key_path.to_path_buf(),
        source,
    })
}

/// A certificate for `names`, `localhost`, the loopback addresses, `$HOSTNAME` and `$POD_IP`,
/// signed by a CA made for it (whose key is dropped at once), and that CA's certificate in PEM:
/// what a client is given to trust, as a webhook's `caBundle`.
fn self_signed(names: &[String]) -> Result<(CertifiedKey, Vec<u8>), TlsError> {
    let mut sans: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec();
    for var in ["HOSTNAME", "POD_IP"] {
        if let Ok(v) = std::env::var(var) {
            sans.push(v.trim().to_string());
        }
    }
    sans.extend(names.iter().cloned());
    // A name a certificate cannot carry is left out rather than failing the start.
    sans.retain(|s| !s.is_empty() && s.is_ascii() && !s.contains(char::is_whitespace));
    sans.sort();
    sans.dedup();
    let generate = TlsError::Generate;
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(generate)?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "informant self-signed CA");
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = rcgen::KeyPair::generate().map_err(generate)?;
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).map_err(generate)?;
    let leaf_key = rcgen::KeyPair::generate().map_err(generate)?;
    let leaf = rcgen::CertificateParams::new(sans)
        .and_then(|p| p.signed_by(&leaf_key, &ca))
        .map_err(generate)?;
    let chain = vec![leaf.der().clone(), ca.der().clone()];
    let key = PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into());
    let certified = CertifiedKey::from_der(chain, key, &provider()).map_err(TlsError::Rustls)?;
    Ok((certified, ca.pem().into_bytes()))
}

/// `der` as one PEM block labelled `label`.
fn pem(label: &str, der: &[u8]) -> Vec<u8> {
    use base64::Engine;
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out.into_bytes()
}
