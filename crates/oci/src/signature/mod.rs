//! Cosign signatures of plugin artifacts, in the format `cosign sign --key` writes and `cosign
//! verify --key` reads: beside the artifact, under the tag `sha256-<HEX>.sig` of its repository, an
//! image manifest whose layers are simple-signing payloads
//! (`application/vnd.dev.cosign.simplesigning.v1+json`), each with its signature in the layer's
//! `dev.cosignproject.cosign/signature` annotation. A payload names the manifest digest it vouches
//! for, so a layer replaced after signing (a new manifest digest) is unsigned, and a signature
//! copied to another artifact's tag names the wrong digest.
//!
//! What is checked, in order: the signature over the payload's exact bytes by one of the trust
//! policy's keys (ECDSA P-256 or P-384 with SHA-256/384, or Ed25519: the keys cosign makes);
//! then, of a payload so signed, its type and the digest it names. Nothing in a payload is read
//! before its signature holds. A transparency-log entry is neither required nor looked up: the
//! policy's keys are the trust root, as `cosign verify --key … --insecure-ignore-tlog` has it, so
//! a cluster without internet verifies offline.
//!
//! Not sigstore-rs: its releases need OpenSSL or aws-lc-rs as their crypto backend, and its
//! `rustls-tls` feature switches oci-client's and reqwest's rustls to aws-lc, a second provider
//! beside the process's ring. The checks here use ring, as rustls does, and the registry client
//! of [`crate::registry`], with its limits, CAs and logins.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use oci_client::client::ImageLayer;
use oci_client::errors::OciDistributionError;
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use oci_client::{Client, Reference};
use rcgen::{PublicKeyData, SigningKey as _};
use ring::signature::{
    ECDSA_P256_SHA256_ASN1, ECDSA_P384_SHA384_ASN1, ED25519, UnparsedPublicKey,
    VerificationAlgorithm,
};

use crate::registry::{Error, Limited, Registry, registry};

pub mod keyless;
mod rejected;
pub use keyless::{Identity, Keyless};
pub use rejected::{Rejected, Rejection};

/// The media type of a simple-signing payload layer.
pub const SIMPLE_SIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the payload's signature (base64).
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The `critical.type` of a container image signature payload.
pub const PAYLOAD_TYPE: &str = "cosign container image signature";
/// The config media type of the signature image.
const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
/// The largest payload read: a payload is a few hundred bytes.
const MAX_PAYLOAD_BYTES: u64 = 64 << 10;
/// The most signature layers looked at.
const MAX_SIGNATURES: usize = 32;

/// A key that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Its file could not be read.
    #[error("key `{path}`: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It is not a key in the expected PEM form.
    #[error("key `{path}`: not a {expected}: {reason}")]
    Parse {
        /// Where it came from.
        path: String,
        /// What was expected.
        expected: &'static str,
        /// Why it is not one.
        reason: String,
    },
    /// A keyless identity's subject pattern is not a regular expression.
    #[error("identity pattern {pattern:?}: {source}")]
    Pattern {
        /// The pattern.
        pattern: String,
        /// Why it does not compile.
        #[source]
        source: regex::Error,
    },
    /// A key of an algorithm cosign signatures are not made with.
    #[error("key `{path}`: not an ECDSA P-256 or P-384, or Ed25519 key")]
    Unsupported {
        /// Where it came from.
        path: String,
    },
}

/// A public key a trust policy trusts.
#[derive(Clone)]
pub struct PublicKey {
    shown: String,
    algorithm: &'static dyn VerificationAlgorithm,
    raw: Vec<u8>,
    fingerprint: String,
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({} {})", self.shown, self.fingerprint)
    }
}

impl PublicKey {
    /// The PEM public key (`-----BEGIN PUBLIC KEY-----`, as `cosign generate-key-pair` writes
    /// `cosign.pub`) in `path`.
    pub fn from_file(path: &Path) -> Result<Self, KeyError> {
        let (shown, text) = read_key(path)?;
        Self::from_pem(&shown, &text)
    }

    /// The PEM public key `text`, shown in messages as `shown`.
    pub fn from_pem(shown: &str, text: &str) -> Result<Self, KeyError> {
        let spki = rcgen::SubjectPublicKeyInfo::from_pem(text).map_err(|e| KeyError::Parse {
            path: shown.to_string(),
            expected: "PEM public key (SubjectPublicKeyInfo)",
            reason: e.to_string(),
        })?;
        Self::from_data(shown, &spki)
    }

    /// The DER SubjectPublicKeyInfo `der` (a certificate's key), shown as `shown`.
    fn from_spki(shown: &str, der: &[u8]) -> Result<Self, Rejected> {
        let spki = rcgen::SubjectPublicKeyInfo::from_der(der)
            .map_err(|_| Rejected::CertificateKey("does not parse"))?;
        Self::from_data(shown, &spki)
            .map_err(|_| Rejected::CertificateKey("is of an algorithm cosign does not sign with"))
    }

    fn from_data(shown: &str, key: &impl PublicKeyData) -> Result<Self, KeyError> {
        let algorithm = verification(key.algorithm()).ok_or_else(|| KeyError::Unsupported {
            path: shown.to_string(),
        })?;
        Ok(PublicKey {
            shown: shown.to_string(),
            algorithm,
            raw: key.der_bytes().to_vec(),
            fingerprint: crate::digest::sha256(&key.subject_public_key_info()),
        })
    }

    /// Where the key came from, as given.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The SHA-256 of its SubjectPublicKeyInfo: `sha256:…`.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Whether `signature` is this key's over `payload`.
    fn verifies(&self, payload: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(self.algorithm, &self.raw)
            .verify(payload, signature)
            .is_ok()
    }

    /// Who signed, when this key verified.
    fn signer(&self) -> Signer {
        Signer {
            key: self.shown.clone(),
            fingerprint: self.fingerprint.clone(),
            issuer: None,
            identity: None,
        }
    }
}

/// The text of the key file `path`, and how it is shown in messages.
fn read_key(path: &Path) -> Result<(String, String), KeyError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| KeyError::Read {
        path: shown.clone(),
        source,
    })?;
    Ok((shown, text))
}

/// ring's verification of signatures by keys of `algorithm`, if cosign makes such keys.
fn verification(
    algorithm: &'static rcgen::SignatureAlgorithm,
) -> Option<&'static dyn VerificationAlgorithm> {
    if algorithm == &rcgen::PKCS_ECDSA_P256_SHA256 {
        Some(&ECDSA_P256_SHA256_ASN1)
    } else if algorithm == &rcgen::PKCS_ECDSA_P384_SHA384 {
        Some(&ECDSA_P384_SHA384_ASN1)
    } else if algorithm == &rcgen::PKCS_ED25519 {
        Some(&ED25519)
    } else {
        None
    }
}

/// A private key that signs plugin artifacts.
pub struct SigningKey {
    pair: rcgen::KeyPair,
    public: PublicKey,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey({:?})", self.public)
    }
}

impl SigningKey {
    /// The unencrypted PKCS#8 PEM private key (`-----BEGIN PRIVATE KEY-----`, as `openssl
    /// genpkey` writes) in `path`.
    pub fn from_file(path: &Path) -> Result<Self, KeyError> {
        let (shown, text) = read_key(path)?;
        Self::from_pem(&shown, &text)
    }

    /// The PKCS#8 PEM private key `text`, shown in messages as `shown`.
    pub fn from_pem(shown: &str, text: &str) -> Result<Self, KeyError> {
        let pair = rcgen::KeyPair::from_pem(text).map_err(|e| KeyError::Parse {
            path: shown.to_string(),
            expected: "PKCS#8 PEM private key (`-----BEGIN PRIVATE KEY-----`, unencrypted)",
            reason: e.to_string(),
        })?;
        let public = PublicKey::from_data(shown, &pair)?;
        Ok(SigningKey { pair, public })
    }

    /// A new ECDSA P-256 key, cosign's default.
    pub fn generate() -> Self {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .expect("ring makes P-256 keys");
        let public = PublicKey::from_data("generated", &pair).expect("a P-256 key");
        SigningKey { pair, public }
    }

    /// Its public half.
    pub fn public_key(&self) -> &PublicKey {
        &self.public
    }

    /// Its public half as PEM, for a trust policy's key file.
    pub fn public_key_pem(&self) -> String {
        self.pair.public_key_pem()
    }

    /// Itself as PKCS#8 PEM.
    pub fn private_key_pem(&self) -> String {
        self.pair.serialize_pem()
    }
}

/// Who a verified artifact was signed by.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Signer {
    /// The trust policy's key that verified it, as configured (its file); `keyless` for a
    /// certificate's.
    pub key: String,
    /// That key's fingerprint: `sha256:…` of its SubjectPublicKeyInfo.
    pub fingerprint: String,
    /// A keyless signature's OIDC issuer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// A keyless signature's identity: the certificate's e-mail or URI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
}

impl fmt::Display for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.identity, &self.issuer) {
            (Some(identity), Some(issuer)) => write!(f, "{identity} (issuer {issuer})"),
            _ => write!(f, "key {} ({})", self.key, self.fingerprint),
        }
    }
}

/// The keys, or keyless identities, whose signatures an artifact must carry one of.
#[derive(Debug, Clone)]
pub struct TrustPolicy {
    keys: Vec<PublicKey>,
    keyless: Option<Keyless>,
}

impl TrustPolicy {
    /// A policy trusting `keys`.
    pub fn new(keys: Vec<PublicKey>) -> Self {
        TrustPolicy {
            keys,
            keyless: None,
        }
    }

    /// This policy, trusting keyless signatures of `keyless`'s identities too.
    pub fn with_keyless(mut self, keyless: Keyless) -> Self {
        self.keyless = Some(keyless);
        self
    }

    /// Its keys.
    pub fn keys(&self) -> &[PublicKey] {
        &self.keys
    }

    /// Whether `signer` (of an earlier check) is one this policy trusts now.
    pub fn trusts(&self, signer: &Signer) -> bool {
        match (&signer.identity, &self.keyless) {
            (Some(_), Some(keyless)) => keyless.trusts(signer),
            (Some(_), None) => false,
            (None, _) => self
                .keys
                .iter()
                .any(|k| k.fingerprint == signer.fingerprint),
        }
    }

    /// The signer of `payload` (a signature layer's bytes) by `signature` (as the layer's
    /// `annotations` hold it, in base64), if one of the keys, or a certificate of a trusted
    /// identity, made it and the payload vouches for `digest`; else why not.
    pub fn check(
        &self,
        digest: &str,
        payload: &[u8],
        signature: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<Signer, Rejected> {
        let raw = BASE64
            .decode(signature.trim())
            .map_err(|_| Rejected::SignatureNotBase64)?;
        let signer = match self.keys.iter().find(|k| k.verifies(payload, &raw)) {
            Some(key) => key.signer(),
            None => match &self.keyless {
                Some(keyless) => keyless.check(payload, &raw, signature, annotations)?,
                None => return Err(Rejected::NoTrustedKey),
            },
        };
        let payload: Payload = serde_json::from_slice(payload).map_err(Rejected::Payload)?;
        if payload.critical.kind != PAYLOAD_TYPE {
            return Err(Rejected::PayloadType(payload.critical.kind));
        }
        let named = payload.critical.image.docker_manifest_digest;
        if named != digest {
            return Err(Rejected::OtherArtifact { signer, named });
        }
        Ok(signer)
    }
}

/// A simple-signing payload, as far as it is checked.
#[derive(serde::Deserialize)]
struct Payload {
    critical: Critical,
}

#[derive(serde::Deserialize)]
struct Critical {
    #[serde(rename = "type")]
    kind: String,
    image: Image,
}

#[derive(serde::Deserialize)]
struct Image {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: String,
}

/// Why an artifact is not run under a trust policy.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The registry failed or refused.
    #[error(transparent)]
    Registry(#[from] Error),
    /// No signature is stored for it.
    #[error("`{pinned}` is not signed: no cosign signature at `{tag}`")]
    Unsigned {
        /// The artifact.
        pinned: String,
        /// Where its signatures would be.
        tag: String,
    },
    /// Its signatures are none the policy accepts.
    #[error(
        "`{pinned}` is not signed by a key the policy trusts: {}",
        rejected::all(reasons)
    )]
    Untrusted {
        /// The artifact.
        pinned: String,
        /// What is wrong with each signature (none: no simple-signing layer at all).
        reasons: Vec<Rejection>,
    },
}

/// What a signing stored.
#[derive(Debug, Clone)]
pub struct Signed {
    /// The artifact signed: `REGISTRY/REPO@sha256:…`.
    pub pinned: String,
    /// Where its signatures are: `REGISTRY/REPO:sha256-….sig`.
    pub tag: String,
}

/// The tag cosign keeps `digest`'s signatures under, in `reference`'s repository.
pub fn signature_tag(reference: &Reference, digest: &str) -> Reference {
    Reference::with_tag(
        reference.resolve_registry().to_string(),
        reference.repository().to_string(),
        format!("{}.sig", digest.replacen(':', "-", 1)),
    )
}

impl Registry {
    /// The signer of the artifact of `digest` in `reference`'s repository under `policy`, or
    /// why it has none.
    pub async fn verify(
        &self,
        reference: &Reference,
        digest: &str,
        policy: &TrustPolicy,
    ) -> Result<Signer, VerifyError> {
        let candidates = self.options().mirrors.candidates(reference);
        let shown = pinned(reference, digest);
        crate::mirror::first_ok(candidates, |at| {
            let shown = shown.clone();
            async move {
                self.verify_at(&at, digest, policy)
                    .await
                    .map_err(|e| match e {
                        // Named as the registry's, wherever it was read.
                        VerifyError::Unsigned { tag, .. } => {
                            VerifyError::Unsigned { pinned: shown, tag }
                        }
                        VerifyError::Untrusted { reasons, .. } => VerifyError::Untrusted {
                            pinned: shown,
                            reasons,
                        },
                        other => other,
                    })
            }
        })
        .await
    }

    async fn verify_at(
        &self,
        reference: &Reference,
        digest: &str,
        policy: &TrustPolicy,
    ) -> Result<Signer, VerifyError> {
        let pinned = pinned(reference, digest);
        let tag = signature_tag(reference, digest);
        let client = self.client(&tag)?;
        let Some(manifest) = self.signatures(&client, &tag).await? else {
            return Err(VerifyError::Unsigned {
                pinned,
                tag: tag.whole(),
            });
        };
        let mut reasons = Vec::new();
        for (i, layer) in manifest.layers.iter().take(MAX_SIGNATURES).enumerate() {
            if layer.media_type != SIMPLE_SIGNING {
                continue;
            }
            let annotations = layer.annotations.clone().unwrap_or_default();
            let checked = match annotations.get(SIGNATURE_ANNOTATION) {
                None => Err(Rejected::NoSignature),
                Some(signature) => match self.payload(&client, &tag, layer).await {
                    Ok(payload) => policy.check(digest, &payload, signature, &annotations),
                    Err(e) => Err(Rejected::Fetch(Box::new(e))),
                },
            };
            match checked {
                Ok(signer) => return Ok(signer),
                Err(why) => reasons.push(Rejection { layer: i + 1, why }),
            }
        }
        Err(VerifyError::Untrusted { pinned, reasons })
    }

    /// Signs the artifact `reference` names (a tag's current digest) with `key`, beside the
    /// signatures it has.
    pub async fn sign(&self, reference: &Reference, key: &SigningKey) -> Result<Signed, Error> {
        let digest = match reference.digest() {
            Some(d) => d.to_string(),
            None => self.resolve(reference).await?,
        };
        let tag = signature_tag(reference, &digest);
        let client = self.client(&tag)?;
        let auth = self.auth(&tag);
        client
            .store_auth_if_needed(tag.resolve_registry(), &auth)
            .await;
        let payload = serde_json::to_vec(&serde_json::json!({
            "critical": {
                "identity": {"docker-reference": format!("{}/{}", reference.resolve_registry(), reference.repository())},
                "image": {"docker-manifest-digest": digest},
                "type": PAYLOAD_TYPE,
            },
            "optional": null,
        }))
        .expect("the payload serializes");
        let signature = key
            .pair
            .sign(&payload)
            .expect("ring signs with a key it parsed");
        let layer = ImageLayer::new(
            payload,
            SIMPLE_SIGNING.to_string(),
            Some([(SIGNATURE_ANNOTATION.to_string(), BASE64.encode(signature))].into()),
        );
        let mut layers: Vec<OciDescriptor> = match self.signatures(&client, &tag).await? {
            Some(kept) => kept.layers,
            None => Vec::new(),
        };
        let descriptor = OciDescriptor {
            media_type: layer.media_type.clone(),
            digest: layer.sha256_digest(),
            size: layer.data.len() as i64,
            urls: None,
            annotations: layer.annotations.clone(),
            artifact_type: None,
        };
        client
            .push_blob(&tag, layer.data.clone(), &descriptor.digest)
            .await
            .map_err(registry(&tag, "pushing a signature"))?;
        layers.push(descriptor);
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": "",
            "os": "",
            "config": {},
            "rootfs": {"type": "layers", "diff_ids": layers.iter().map(|l| &l.digest).collect::<Vec<_>>()},
        }))
        .expect("the config serializes");
        let config_digest = crate::digest::sha256(&config);
        let config_size = config.len() as i64;
        client
            .push_blob(&tag, config, &config_digest)
            .await
            .map_err(registry(&tag, "pushing a signature"))?;
        let manifest = OciImageManifest {
            schema_version: 2,
            media_type: Some(OCI_IMAGE_MEDIA_TYPE.to_string()),
            config: OciDescriptor {
                media_type: CONFIG_MEDIA_TYPE.to_string(),
                digest: config_digest,
                size: config_size,
                urls: None,
                annotations: None,
                artifact_type: None,
            },
            layers,
            subject: None,
            artifact_type: None,
            annotations: None,
        };
        let body = serde_json::to_vec(&manifest).expect("the manifest serializes");
        client
            .push_manifest_raw(
                &tag,
                body,
                http::HeaderValue::from_static(OCI_IMAGE_MEDIA_TYPE),
            )
            .await
            .map_err(registry(&tag, "pushing its signatures"))?;
        Ok(Signed {
            pinned: pinned(reference, &digest),
            tag: tag.whole(),
        })
    }

    /// The signature image at `tag`, if there is one.
    async fn signatures(
        &self,
        client: &Client,
        tag: &Reference,
    ) -> Result<Option<OciImageManifest>, Error> {
        let body = match self.read_manifest(client, tag, &self.auth(tag)).await {
            Ok((body, _)) => body,
            Err(Error::Registry { source, .. }) if not_found(&source) => return Ok(None),
            Err(e) => return Err(e),
        };
        serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| Error::Layout {
                reference: tag.whole(),
                reason: format!("its signatures are not an OCI image manifest: {e}"),
            })
    }

    /// One signature layer's payload, within its limit and verified against its digest.
    async fn payload(
        &self,
        client: &Client,
        tag: &Reference,
        layer: &OciDescriptor,
    ) -> Result<Vec<u8>, Error> {
        let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
        let too_large = |size| Error::TooLarge {
            reference: tag.whole(),
            what: "signature payload",
            size,
            limit: MAX_PAYLOAD_BYTES,
        };
        if size > MAX_PAYLOAD_BYTES {
            return Err(too_large(size));
        }
        let mut sink = Limited::new(MAX_PAYLOAD_BYTES);
        client
            .pull_blob(tag, layer, &mut sink)
            .await
            .map_err(|source| match sink.over {
                true => too_large(sink.seen),
                false => Error::Registry {
                    reference: tag.whole(),
                    what: "reading a signature",
                    source,
                },
            })?;
        Ok(sink.bytes)
    }
}

/// `reference`'s repository pinned to `digest`, as shown.
fn pinned(reference: &Reference, digest: &str) -> String {
    Reference::with_digest(
        reference.resolve_registry().to_string(),
        reference.repository().to_string(),
        digest.to_string(),
    )
    .whole()
}

/// Whether a registry said there is no such manifest.
fn not_found(error: &OciDistributionError) -> bool {
    match error {
        OciDistributionError::ImageManifestNotFoundError(_) => true,
        OciDistributionError::ServerError { code, .. } => *code == 404,
        OciDistributionError::RegistryError { envelope, .. } => envelope.errors.iter().any(|e| {
            matches!(
                e.code,
                oci_client::errors::OciErrorCode::ManifestUnknown
                    | oci_client::errors::OciErrorCode::NameUnknown
            )
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
