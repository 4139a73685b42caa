//! Why one signature layer does not vouch for an artifact under a trust policy.

use std::fmt;

use super::{PAYLOAD_TYPE, SIGNATURE_ANNOTATION, Signer};

/// Why a signature layer was not accepted: its own fault, the policy's, or the trust root's.
#[derive(Debug, thiserror::Error)]
pub enum Rejected {
    /// The layer carries no signature annotation.
    #[error("no `{SIGNATURE_ANNOTATION}` annotation")]
    NoSignature,
    /// The signature annotation is not base64.
    #[error("its signature is not base64")]
    SignatureNotBase64,
    /// Its payload could not be read from the registry.
    #[error(transparent)]
    Fetch(Box<crate::Error>),
    /// No key of the policy made it, and the policy trusts no keyless signature.
    #[error("signed by no key the policy trusts")]
    NoTrustedKey,
    /// The payload is not simple-signing JSON.
    #[error("its payload is not a cosign simple-signing payload: {0}")]
    Payload(#[source] serde_json::Error),
    /// The payload is of another kind (an attestation, say).
    #[error("its payload is a {0:?}, not a {PAYLOAD_TYPE:?}")]
    PayloadType(String),
    /// A good signature, of another manifest.
    #[error("signed by {signer} for {named}, not for this artifact")]
    OtherArtifact {
        /// Who signed.
        signer: Signer,
        /// The digest the payload names.
        named: String,
    },
    /// Keyless: no key made it, and there is no certificate to check.
    #[error("no key the policy trusts made it, and it carries no certificate")]
    NoCertificate,
    /// Keyless: the certificate, or its chain, is not PEM.
    #[error("its certificate {what}is not PEM: {source}")]
    CertificatePem {
        /// `chain ` for the chain, empty for the certificate itself.
        what: &'static str,
        /// Why.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// Keyless: no Rekor bundle proves when the short-lived certificate was used.
    #[error("its certificate comes with no Rekor bundle: the time it was used is unproven")]
    NoBundle,
    /// Keyless: the Rekor bundle is not JSON of the expected shape.
    #[error("its Rekor bundle does not parse: {0}")]
    Bundle(#[source] serde_json::Error),
    /// Keyless: the bundle is from a log the trust root does not hold.
    #[error("its Rekor bundle is from log {0}, not one the trust root holds")]
    UnknownLog(String),
    /// Keyless: a base64 field of the bundle (`what`) is not base64.
    #[error("its Rekor {what} is not base64")]
    BundleNotBase64 {
        /// Which field.
        what: &'static str,
    },
    /// Keyless: the bundle's timestamp is not the log key's signature.
    #[error("its Rekor bundle is not signed by the trust root's Rekor key")]
    BundleSignature,
    /// Keyless: the logged entry is not a `hashedrekord`.
    #[error("its Rekor entry is not a hashedrekord: {0}")]
    Entry(#[source] serde_json::Error),
    /// Keyless: the logged entry is of something else.
    #[error("its Rekor entry is of another payload, signature or certificate")]
    EntryMismatch,
    /// Keyless: the certificate does not parse.
    #[error("its certificate does not parse: {0}")]
    Certificate(String),
    /// Keyless: the certificate does not chain to the trust root, for code signing, in time.
    #[error(
        "its certificate is not one the trust root's Fulcio issued for code signing, valid when it was logged: {0:?}"
    )]
    Chain(webpki::Error),
    /// Keyless: the certificate's identity cannot be read, or it names none.
    #[error("its certificate {0}")]
    Identity(&'static str),
    /// Keyless: an identity the policy does not trust.
    #[error("signed by {subject} (issuer {issuer}), an identity the policy does not trust")]
    UntrustedIdentity {
        /// The certificate's e-mail or URI.
        subject: String,
        /// Its OIDC issuer.
        issuer: String,
    },
    /// Keyless: the certificate's key is not one cosign signs with.
    #[error("its certificate's key {0}")]
    CertificateKey(&'static str),
    /// Keyless: the certificate's key did not make the signature.
    #[error("its signature is not by the key of {0}'s certificate")]
    NotByCertificate(String),
}

/// A rejected signature layer of an artifact: which one (1-based), and why.
#[derive(Debug)]
pub struct Rejection {
    /// The layer's place in the signature image.
    pub layer: usize,
    /// Why.
    pub why: Rejected,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "signature {}: {}", self.layer, self.why)
    }
}

/// `reasons`, as one line: each rejected layer, or that there was no simple-signing layer.
pub(super) fn all(reasons: &[Rejection]) -> String {
    if reasons.is_empty() {
        return "no simple-signing layer".into();
    }
    reasons
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
