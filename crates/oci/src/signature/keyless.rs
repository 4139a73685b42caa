//! Keyless cosign signatures: made with a short-lived key whose certificate a Fulcio CA issued to
//! an OIDC identity, and logged in Rekor. Checked offline against a configured trust root, as
//! `cosign verify --certificate-identity-regexp … --certificate-oidc-issuer …` checks them with
//! the public-good instance's:
//!
//! - the layer's `dev.sigstore.cosign/bundle` (Rekor's signed entry timestamp) is signed by a
//!   Rekor key of the trust root, the one its `logID` names;
//! - the logged entry (`hashedrekord`) is of this payload's hash, this signature and this
//!   certificate;
//! - the certificate (`dev.sigstore.cosign/certificate`) chains to a Fulcio CA of the trust root
//!   (the layer's `dev.sigstore.cosign/chain` offering intermediates only), for code signing, at
//!   the time Rekor logged the entry: a Fulcio certificate lives ten minutes, the log proves the
//!   signature was made inside them;
//! - its identity (an e-mail or URI subject alternative name) and OIDC issuer (Fulcio's
//!   extension) match one of the policy's identities;
//! - and its key made the signature over the payload.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

use super::{KeyError, PublicKey, Rejected, Signer};

/// The layer annotation holding the signing certificate (PEM).
pub const CERTIFICATE_ANNOTATION: &str = "dev.sigstore.cosign/certificate";
/// The layer annotation holding the certificate's chain (PEM), untrusted.
pub const CHAIN_ANNOTATION: &str = "dev.sigstore.cosign/chain";
/// The layer annotation holding Rekor's signed entry timestamp.
pub const BUNDLE_ANNOTATION: &str = "dev.sigstore.cosign/bundle";
/// Fulcio's extension naming the OIDC issuer (a DER UTF8String).
const ISSUER_V2: &str = "1.3.6.1.4.1.57264.1.8";
/// Fulcio's first extension naming the OIDC issuer (raw bytes).
const ISSUER_V1: &str = "1.3.6.1.4.1.57264.1.1";
/// id-kp-codeSigning, 1.3.6.1.5.5.7.3.3, DER-encoded.
const CODE_SIGNING: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x03];
/// Signature algorithms a Fulcio chain is checked with.
static CHAIN_ALGORITHMS: &[&dyn rustls::pki_types::SignatureVerificationAlgorithm] = &[
    webpki::ring::ECDSA_P256_SHA256,
    webpki::ring::ECDSA_P384_SHA384,
    webpki::ring::ECDSA_P256_SHA384,
    webpki::ring::ECDSA_P384_SHA256,
    webpki::ring::ED25519,
    webpki::ring::RSA_PKCS1_2048_8192_SHA256,
    webpki::ring::RSA_PKCS1_2048_8192_SHA384,
    webpki::ring::RSA_PKCS1_2048_8192_SHA512,
];

/// An identity whose keyless signatures are trusted: an OIDC issuer, and a pattern its subject
/// must match whole.
#[derive(Debug, Clone)]
pub struct Identity {
    issuer: String,
    subject: regex::Regex,
}

impl Identity {
    /// Signatures of `issuer` (exactly: `https://token.actions.githubusercontent.com`) for a
    /// subject (an e-mail, or a URI such as a workflow's) that `pattern` matches whole.
    pub fn new(issuer: &str, pattern: &str) -> Result<Self, regex::Error> {
        Ok(Identity {
            issuer: issuer.to_string(),
            subject: regex::Regex::new(&format!("^(?:{pattern})$"))?,
        })
    }
}

/// A keyless trust root and the identities it vouches for.
#[derive(Debug, Clone)]
pub struct Keyless {
    roots: Vec<CertificateDer<'static>>,
    rekor: Vec<PublicKey>,
    identities: Vec<Identity>,
}

impl Keyless {
    /// Fulcio's CA certificates (PEM, in `fulcio`) and Rekor's public keys, trusting
    /// `identities`.
    pub fn from_files(
        fulcio: &Path,
        rekor: &[PathBuf],
        identities: Vec<Identity>,
    ) -> Result<Self, KeyError> {
        let shown = fulcio.display().to_string();
        let roots = CertificateDer::pem_file_iter(fulcio)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| KeyError::Parse {
                path: shown.clone(),
                expected: "PEM bundle of CA certificates",
                reason: e.to_string(),
            })?;
        if roots.is_empty() {
            return Err(KeyError::Parse {
                path: shown,
                expected: "PEM bundle of CA certificates",
                reason: "it holds no certificate".into(),
            });
        }
        let rekor = rekor
            .iter()
            .map(|p| PublicKey::from_file(p))
            .collect::<Result<_, _>>()?;
        Ok(Keyless {
            roots,
            rekor,
            identities,
        })
    }

    /// A trust root given as PEM text (tests, and callers holding it already).
    pub fn from_pem(
        fulcio: &str,
        rekor: Vec<PublicKey>,
        identities: Vec<Identity>,
    ) -> Result<Self, KeyError> {
        let roots = CertificateDer::pem_slice_iter(fulcio.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| KeyError::Parse {
                path: "fulcio roots".into(),
                expected: "PEM bundle of CA certificates",
                reason: e.to_string(),
            })?;
        Ok(Keyless {
            roots,
            rekor,
            identities,
        })
    }

    /// Whether `signer` (a keyless one) is an identity this trusts.
    pub(super) fn trusts(&self, signer: &Signer) -> bool {
        match (&signer.issuer, &signer.identity) {
            (Some(issuer), Some(subject)) => self.matches(issuer, subject),
            _ => false,
        }
    }

    fn matches(&self, issuer: &str, subject: &str) -> bool {
        self.identities
            .iter()
            .any(|i| i.issuer == issuer && i.subject.is_match(subject))
    }

    /// The signer of `payload` by `signature` with the certificate in `annotations`, or why not.
    pub(super) fn check(
        &self,
        payload: &[u8],
        signature: &[u8],
        signature_b64: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<Signer, Rejected> {
        let certificate = annotations
            .get(CERTIFICATE_ANNOTATION)
            .ok_or(Rejected::NoCertificate)?;
        let pem = |what| move |source| Rejected::CertificatePem { what, source };
        let leaf = CertificateDer::from_pem_slice(certificate.as_bytes()).map_err(pem(""))?;
        let bundle = annotations
            .get(BUNDLE_ANNOTATION)
            .ok_or(Rejected::NoBundle)?;
        let logged = self.logged(bundle)?;
        logged.vouches_for(payload, signature, signature_b64, &leaf)?;

        let intermediates: Vec<CertificateDer<'_>> = match annotations.get(CHAIN_ANNOTATION) {
            Some(chain) => CertificateDer::pem_slice_iter(chain.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(pem("chain "))?,
            None => Vec::new(),
        };
        let anchors: Vec<_> = self
            .roots
            .iter()
            .filter_map(|r| webpki::anchor_from_trusted_cert(r).ok())
            .collect();
        let end = webpki::EndEntityCert::try_from(&leaf)
            .map_err(|e| Rejected::Certificate(format!("{e:?}")))?;
        let at = UnixTime::since_unix_epoch(Duration::from_secs(logged.integrated_time));
        end.verify_for_usage(
            CHAIN_ALGORITHMS,
            &anchors,
            &intermediates,
            at,
            webpki::KeyUsage::required(CODE_SIGNING),
            None,
            None,
        )
        .map_err(Rejected::Chain)?;

        let (_, cert) =
            X509Certificate::from_der(&leaf).map_err(|e| Rejected::Certificate(e.to_string()))?;
        let (issuer, subject) = identity(&cert)?;
        if !self.matches(&issuer, &subject) {
            return Err(Rejected::UntrustedIdentity { subject, issuer });
        }
        let key = PublicKey::from_spki("certificate", cert.public_key().raw)?;
        if !key.verifies(payload, signature) {
            return Err(Rejected::NotByCertificate(subject));
        }
        Ok(Signer {
            key: "keyless".into(),
            fingerprint: key.fingerprint,
            issuer: Some(issuer),
            identity: Some(subject),
        })
    }

    /// Rekor's signed entry timestamp in `bundle`, checked against the trust root's keys.
    fn logged(&self, bundle: &str) -> Result<Logged, Rejected> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "PascalCase")]
        struct Bundle {
            signed_entry_timestamp: String,
            payload: Entry,
        }
        let bundle: Bundle = serde_json::from_str(bundle).map_err(Rejected::Bundle)?;
        let entry = bundle.payload;
        let rekor = self
            .rekor
            .iter()
            .find(|k| k.fingerprint.strip_prefix("sha256:") == Some(entry.log_id.as_str()))
            .ok_or_else(|| Rejected::UnknownLog(entry.log_id.clone()))?;
        // What Rekor signed: the entry's four fields as canonical JSON (keys sorted, no space),
        // which serde writes for this struct's field order.
        let signed = serde_json::to_vec(&entry).expect("serializes");
        let set = BASE64
            .decode(bundle.signed_entry_timestamp.trim())
            .map_err(|_| Rejected::BundleNotBase64 {
                what: "bundle's timestamp",
            })?;
        if !rekor.verifies(&signed, &set) {
            return Err(Rejected::BundleSignature);
        }
        let body = BASE64
            .decode(entry.body.trim())
            .map_err(|_| Rejected::BundleNotBase64 { what: "entry" })?;
        Ok(Logged {
            integrated_time: entry.integrated_time,
            body,
        })
    }
}

/// The entry Rekor signed, its fields in canonical (sorted) order.
#[derive(serde::Serialize, serde::Deserialize)]
struct Entry {
    body: String,
    #[serde(rename = "integratedTime")]
    integrated_time: u64,
    #[serde(rename = "logID")]
    log_id: String,
    #[serde(rename = "logIndex")]
    log_index: u64,
}

/// A Rekor entry whose timestamp verified.
struct Logged {
    integrated_time: u64,
    body: Vec<u8>,
}

impl Logged {
    /// Whether the logged entry is of `payload`, `signature` and `leaf`: a bundle of another
    /// signature proves nothing about this one.
    fn vouches_for(
        &self,
        payload: &[u8],
        signature: &[u8],
        signature_b64: &str,
        leaf: &CertificateDer<'_>,
    ) -> Result<(), Rejected> {
        #[derive(serde::Deserialize)]
        struct Body {
            kind: String,
            spec: Spec,
        }
        #[derive(serde::Deserialize)]
        struct Spec {
            data: Data,
            signature: Sig,
        }
        #[derive(serde::Deserialize)]
        struct Data {
            hash: Hash,
        }
        #[derive(serde::Deserialize)]
        struct Hash {
            algorithm: String,
            value: String,
        }
        #[derive(serde::Deserialize)]
        struct Sig {
            content: String,
            #[serde(rename = "publicKey")]
            public_key: Content,
        }
        #[derive(serde::Deserialize)]
        struct Content {
            content: String,
        }
        let body: Body = serde_json::from_slice(&self.body).map_err(Rejected::Entry)?;
        let spec = body.spec;
        let logged_signature = BASE64.decode(spec.signature.content.trim()).ok();
        let logged_cert = BASE64
            .decode(spec.signature.public_key.content.trim())
            .ok()
            .and_then(|pem| CertificateDer::from_pem_slice(&pem).ok());
        // `rekord`, the kind cosign logged before `hashedrekord`, has the same fields here.
        let matches = (body.kind == "hashedrekord" || body.kind == "rekord")
            && spec.data.hash.algorithm == "sha256"
            && spec.data.hash.value == crate::digest::sha256_hex(payload)
            && (logged_signature.as_deref() == Some(signature)
                || spec.signature.content.trim() == signature_b64.trim())
            && logged_cert.as_ref() == Some(leaf);
        match matches {
            true => Ok(()),
            false => Err(Rejected::EntryMismatch),
        }
    }
}

/// The OIDC issuer and subject Fulcio wrote into `cert`.
fn identity(cert: &X509Certificate<'_>) -> Result<(String, String), Rejected> {
    let mut issuer = None;
    for ext in cert.extensions() {
        let oid = ext.oid.to_id_string();
        if oid == ISSUER_V2 {
            let (_, s) = x509_parser::der_parser::der::parse_der_utf8string(ext.value)
                .map_err(|_| Rejected::Identity("'s issuer extension does not parse"))?;
            issuer = Some(
                s.as_str()
                    .map_err(|_| Rejected::Identity("'s issuer is not text"))?
                    .to_string(),
            );
        } else if oid == ISSUER_V1 && issuer.is_none() {
            issuer = std::str::from_utf8(ext.value).ok().map(str::to_string);
        }
    }
    let issuer = issuer.ok_or(Rejected::Identity("names no OIDC issuer (not Fulcio's)"))?;
    let san = cert
        .subject_alternative_name()
        .map_err(|_| Rejected::Identity("'s subject alternative name does not parse"))?
        .ok_or(Rejected::Identity("names no identity"))?;
    let subject = san
        .value
        .general_names
        .iter()
        .find_map(|n| match n {
            GeneralName::RFC822Name(s) | GeneralName::URI(s) => Some(s.to_string()),
            _ => None,
        })
        .ok_or(Rejected::Identity("names no e-mail or URI identity"))?;
    Ok((issuer, subject))
}

#[cfg(test)]
mod tests {
    use rcgen::SigningKey as _;
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, CustomExtension,
        ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType, date_time_ymd,
    };

    use super::*;
    use crate::signature::{PAYLOAD_TYPE, SIGNATURE_ANNOTATION, SigningKey, TrustPolicy};

    const ISSUER: &str = "https://token.actions.githubusercontent.com";
    const WORKFLOW: &str =
        "https://github.com/acme/hooks/.github/workflows/release.yml@refs/tags/v1";
    const DIGEST: &str = "sha256:3333333333333333333333333333333333333333333333333333333333333333";
    /// 2026-01-01T12:00:00Z: inside the leaf's day.
    const LOGGED: u64 = 1_767_268_800;

    /// A Fulcio of its own: a CA, and leaves it issues to an identity for a day.
    struct Fulcio {
        ca: CertifiedIssuer<'static, KeyPair>,
    }

    impl Fulcio {
        fn new() -> Self {
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
            params.not_before = date_time_ymd(2025, 1, 1);
            params.not_after = date_time_ymd(2028, 1, 1);
            let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
            Fulcio {
                ca: CertifiedIssuer::self_signed(params, key).unwrap(),
            }
        }

        /// A leaf for `subject` of `issuer`, and its key.
        fn issue(&self, subject: &str, issuer: &str) -> (String, SigningKey) {
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.subject_alt_names = vec![SanType::URI(subject.try_into().unwrap())];
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::CodeSigning];
            params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            params.not_before = date_time_ymd(2026, 1, 1);
            params.not_after = date_time_ymd(2026, 1, 2);
            let mut utf8 = vec![0x0c, issuer.len() as u8];
            utf8.extend_from_slice(issuer.as_bytes());
            params.custom_extensions = vec![CustomExtension::from_oid_content(
                &[1, 3, 6, 1, 4, 1, 57264, 1, 8],
                utf8,
            )];
            let key = SigningKey::generate();
            let cert = params.signed_by(&key.pair, &self.ca).unwrap();
            (cert.pem(), key)
        }
    }

    /// Rekor of its own: a key, and the bundles it signs.
    struct Rekor {
        key: SigningKey,
    }

    impl Rekor {
        fn bundle(&self, payload: &[u8], signature: &str, cert: &str, time: u64) -> String {
            let body = serde_json::json!({
                "apiVersion": "0.0.1",
                "kind": "hashedrekord",
                "spec": {
                    "data": {"hash": {"algorithm": "sha256", "value": crate::digest::sha256_hex(payload)}},
                    "signature": {"content": signature, "publicKey": {"content": BASE64.encode(cert)}},
                },
            });
            let entry = Entry {
                body: BASE64.encode(serde_json::to_vec(&body).unwrap()),
                integrated_time: time,
                log_id: self.key.public_key().fingerprint()["sha256:".len()..].to_string(),
                log_index: 7,
            };
            let set = self
                .key
                .pair
                .sign(&serde_json::to_vec(&entry).unwrap())
                .unwrap();
            serde_json::json!({"SignedEntryTimestamp": BASE64.encode(set), "Payload": entry})
                .to_string()
        }
    }

    fn payload(digest: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "critical": {
                "identity": {"docker-reference": "registry.example/acme/hooks"},
                "image": {"docker-manifest-digest": digest},
                "type": PAYLOAD_TYPE,
            },
            "optional": null,
        }))
        .unwrap()
    }

    /// A keyless signature layer's annotations, as cosign writes them.
    fn annotations(signature: &str, cert: &str, bundle: &str) -> BTreeMap<String, String> {
        [
            (SIGNATURE_ANNOTATION, signature),
            (CERTIFICATE_ANNOTATION, cert),
            (BUNDLE_ANNOTATION, bundle),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn policy(fulcio: &Fulcio, rekor: &Rekor, pattern: &str) -> TrustPolicy {
        let rekor_key = PublicKey::from_pem("rekor.pub", &rekor.key.public_key_pem()).unwrap();
        TrustPolicy::new(Vec::new()).with_keyless(
            Keyless::from_pem(
                &fulcio.ca.pem(),
                vec![rekor_key],
                vec![Identity::new(ISSUER, pattern).unwrap()],
            )
            .unwrap(),
        )
    }

    fn sign(key: &SigningKey, payload: &[u8]) -> String {
        BASE64.encode(key.pair.sign(payload).unwrap())
    }

    #[test]
    fn a_keyless_signature_of_a_trusted_identity_verifies() {
        let (fulcio, rekor) = (
            Fulcio::new(),
            Rekor {
                key: SigningKey::generate(),
            },
        );
        let (cert, key) = fulcio.issue(WORKFLOW, ISSUER);
        let payload = payload(DIGEST);
        let signature = sign(&key, &payload);
        let bundle = rekor.bundle(&payload, &signature, &cert, LOGGED);
        let policy = policy(&fulcio, &rekor, r"https://github\.com/acme/.+");
        let signer = policy
            .check(
                DIGEST,
                &payload,
                &signature,
                &annotations(&signature, &cert, &bundle),
            )
            .unwrap();
        assert_eq!(signer.identity.as_deref(), Some(WORKFLOW));
        assert_eq!(signer.issuer.as_deref(), Some(ISSUER));
        assert_eq!(signer.to_string(), format!("{WORKFLOW} (issuer {ISSUER})"));
        assert!(policy.trusts(&signer));
        // The same signer under a policy for another organization's workflows.
        assert!(!policy_for(&fulcio, &rekor, r"https://github\.com/other/.+").trusts(&signer));
    }

    fn policy_for(fulcio: &Fulcio, rekor: &Rekor, pattern: &str) -> TrustPolicy {
        policy(fulcio, rekor, pattern)
    }

    #[test]
    fn every_broken_link_of_a_keyless_signature_is_refused_with_its_reason() {
        let (fulcio, rekor) = (
            Fulcio::new(),
            Rekor {
                key: SigningKey::generate(),
            },
        );
        let (cert, key) = fulcio.issue(WORKFLOW, ISSUER);
        let payload = payload(DIGEST);
        let signature = sign(&key, &payload);
        let good_bundle = rekor.bundle(&payload, &signature, &cert, LOGGED);
        let policy = policy(&fulcio, &rekor, r"https://github\.com/acme/.+");
        let refused = |signature: &str, annotations: BTreeMap<String, String>| {
            policy
                .check(DIGEST, &payload, signature, &annotations)
                .unwrap_err()
                .to_string()
        };

        // A pattern matches the whole subject, not a part of it.
        let partial = policy_for(&fulcio, &rekor, r"acme");
        let err = partial
            .check(
                DIGEST,
                &payload,
                &signature,
                &annotations(&signature, &cert, &good_bundle),
            )
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("an identity the policy does not trust"),
            "{err}"
        );

        // Another issuer for the same subject.
        let (other_issuer, other_key) = fulcio.issue(WORKFLOW, "https://accounts.example");
        let s = sign(&other_key, &payload);
        let b = rekor.bundle(&payload, &s, &other_issuer, LOGGED);
        let err = refused(&s, annotations(&s, &other_issuer, &b));
        assert!(err.contains("issuer https://accounts.example"), "{err}");

        // A certificate from a CA the trust root does not hold.
        let (stranger_cert, stranger_key) = Fulcio::new().issue(WORKFLOW, ISSUER);
        let s = sign(&stranger_key, &payload);
        let b = rekor.bundle(&payload, &s, &stranger_cert, LOGGED);
        let err = refused(&s, annotations(&s, &stranger_cert, &b));
        assert!(
            err.contains("not one the trust root's Fulcio issued"),
            "{err}"
        );

        // Logged after the certificate expired.
        let late = rekor.bundle(&payload, &signature, &cert, LOGGED + 2 * 86_400);
        let err = refused(&signature, annotations(&signature, &cert, &late));
        assert!(err.contains("valid when it was logged"), "{err}");

        // No bundle: when the short-lived certificate was used is unproven.
        let mut no_bundle = annotations(&signature, &cert, &good_bundle);
        no_bundle.remove(BUNDLE_ANNOTATION);
        assert!(refused(&signature, no_bundle).contains("no Rekor bundle"));

        // A bundle from another log, and one whose timestamp was not signed by the log's key.
        let other_log = Rekor {
            key: SigningKey::generate(),
        };
        let foreign = other_log.bundle(&payload, &signature, &cert, LOGGED);
        assert!(
            refused(&signature, annotations(&signature, &cert, &foreign))
                .contains("not one the trust root holds")
        );
        let mut forged: serde_json::Value = serde_json::from_str(&good_bundle).unwrap();
        forged["Payload"]["integratedTime"] = (LOGGED + 60).into();
        let err = refused(
            &signature,
            annotations(&signature, &cert, &forged.to_string()),
        );
        assert!(
            err.contains("not signed by the trust root's Rekor key"),
            "{err}"
        );

        // A good bundle of another signature (another payload's).
        let other_payload = self::payload(OTHER_DIGEST);
        let other_signature = sign(&key, &other_payload);
        let theirs = rekor.bundle(&other_payload, &other_signature, &cert, LOGGED);
        let err = refused(&signature, annotations(&signature, &cert, &theirs));
        assert!(
            err.contains("another payload, signature or certificate"),
            "{err}"
        );

        // Signed by a key other than the certificate's, the bundle logging that signature.
        let impostor = SigningKey::generate();
        let s = sign(&impostor, &payload);
        let b = rekor.bundle(&payload, &s, &cert, LOGGED);
        let err = refused(&s, annotations(&s, &cert, &b));
        assert!(err.contains("not by the key of"), "{err}");

        // No certificate at all, and no key of the policy made it.
        let mut bare = annotations(&signature, &cert, &good_bundle);
        bare.remove(CERTIFICATE_ANNOTATION);
        assert!(refused(&signature, bare).contains("carries no certificate"));
    }

    /// A keyless signature the public-good Sigstore made (from sigstore-rs's tests): its Rekor
    /// bundle verifies with the real Rekor key, its entry is of this signature, and its
    /// certificate chains to the real Fulcio roots at the time it was logged. It predates
    /// Fulcio's issuer extension, so it stops exactly there.
    #[test]
    fn a_keyless_signature_sigstore_made_verifies_up_to_its_missing_issuer() {
        const FULCIO: &str = "-----BEGIN CERTIFICATE-----\nMIIB+DCCAX6gAwIBAgITNVkDZoCiofPDsy7dfm6geLbuhzAKBggqhkjOPQQDAzAq\nMRUwEwYDVQQKEwxzaWdzdG9yZS5kZXYxETAPBgNVBAMTCHNpZ3N0b3JlMB4XDTIx\nMDMwNzAzMjAyOVoXDTMxMDIyMzAzMjAyOVowKjEVMBMGA1UEChMMc2lnc3RvcmUu\nZGV2MREwDwYDVQQDEwhzaWdzdG9yZTB2MBAGByqGSM49AgEGBSuBBAAiA2IABLSy\nA7Ii5k+pNO8ZEWY0ylemWDowOkNa3kL+GZE5Z5GWehL9/A9bRNA3RbrsZ5i0Jcas\ntaRL7Sp5fp/jD5dxqc/UdTVnlvS16an+2Yfswe/QuLolRUCrcOE2+2iA5+tzd6Nm\nMGQwDgYDVR0PAQH/BAQDAgEGMBIGA1UdEwEB/wQIMAYBAf8CAQEwHQYDVR0OBBYE\nFMjFHQBBmiQpMlEk6w2uSu1KBtPsMB8GA1UdIwQYMBaAFMjFHQBBmiQpMlEk6w2u\nSu1KBtPsMAoGCCqGSM49BAMDA2gAMGUCMH8liWJfMui6vXXBhjDgY4MwslmN/TJx\nVe/83WrFomwmNf056y1X48F9c4m3a3ozXAIxAKjRay5/aj/jsKKGIkmQatjI8uup\nHr/+CxFvaJWmpYqNkLDGRU+9orzh5hI2RrcuaQ==\n-----END CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\nMIIB9zCCAXygAwIBAgIUALZNAPFdxHPwjeDloDwyYChAO/4wCgYIKoZIzj0EAwMw\nKjEVMBMGA1UEChMMc2lnc3RvcmUuZGV2MREwDwYDVQQDEwhzaWdzdG9yZTAeFw0y\nMTEwMDcxMzU2NTlaFw0zMTEwMDUxMzU2NThaMCoxFTATBgNVBAoTDHNpZ3N0b3Jl\nLmRldjERMA8GA1UEAxMIc2lnc3RvcmUwdjAQBgcqhkjOPQIBBgUrgQQAIgNiAAT7\nXeFT4rb3PQGwS4IajtLk3/OlnpgangaBclYpsYBr5i+4ynB07ceb3LP0OIOZdxex\nX69c5iVuyJRQ+Hz05yi+UF3uBWAlHpiS5sh0+H2GHE7SXrk1EC5m1Tr19L9gg92j\nYzBhMA4GA1UdDwEB/wQEAwIBBjAPBgNVHRMBAf8EBTADAQH/MB0GA1UdDgQWBBRY\nwB5fkUWlZql6zJChkyLQKsXF+jAfBgNVHSMEGDAWgBRYwB5fkUWlZql6zJChkyLQ\nKsXF+jAKBggqhkjOPQQDAwNpADBmAjEAj1nHeXZp+13NWBNa+EDsDP8G1WWg1tCM\nWP/WHPqpaVo0jhsweNFZgSs0eE7wYI4qAjEA2WB9ot98sIkoF3vZYdd3/VtWB5b9\nTNMea7Ix/stJ5TfcLLeABLE4BNJOsQ4vnBHJ\n-----END CERTIFICATE-----";
        const REKOR: &str = "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE2G2Y+2tabdTV5BcGiBIx0a9fAFwr\nkBbmLSGtks4L3qX6yYY0zufBnhC8Ur/iy55GhWP/9A/bY2LhC30M9+RYtw==\n-----END PUBLIC KEY-----";
        const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIICdzCCAfygAwIBAgITA+PsaKjaEZqn7IY94b1e/jJnizAKBggqhkjOPQQDAzAq\nMRUwEwYDVQQKEwxzaWdzdG9yZS5kZXYxETAPBgNVBAMTCHNpZ3N0b3JlMB4XDTIx\nMTAyMDA3MjUxNloXDTIxMTAyMDA3NDUxNVowADBZMBMGByqGSM49AgEGCCqGSM49\nAwEHA0IABINewQBS1f4AmNIENdL+U/HJotMSM7ZNnkTnYefxwV9TErpvnAZ0+DzL\nyfAAVaeJtKjFvbOTb8F1yhJFU0XY+RijggEpMIIBJTAOBgNVHQ8BAf8EBAMCB4Aw\nEwYDVR0lBAwwCgYIKwYBBQUHAwMwDAYDVR0TAQH/BAIwADAdBgNVHQ4EFgQUMf1R\nMMsqNFBrWbx8mRNdxOkEEYswHwYDVR0jBBgwFoAUyMUdAEGaJCkyUSTrDa5K7UoG\n0+wwgY0GCCsGAQUFBwEBBIGAMH4wfAYIKwYBBQUHMAKGcGh0dHA6Ly9wcml2YXRl\nY2EtY29udGVudC02MDNmZTdlNy0wMDAwLTIyMjctYmY3NS1mNGY1ZTgwZDI5NTQu\nc3RvcmFnZS5nb29nbGVhcGlzLmNvbS9jYTM2YTFlOTYyNDJiOWZjYjE0Ni9jYS5j\ncnQwIAYDVR0RAQH/BBYwFIESZmxhdmlvQGNhc3RlbGxpLm1lMAoGCCqGSM49BAMD\nA2kAMGYCMQC3Y2ulPTsPmNS4czaKeje0BnOQHz5e6NBX0Bqx9Xca+t2kOi17sopc\n/v/xH1xLuPoCMQDKND4WjHfKqXXOeUvZ9A96DqrEwGaqGMtnIuN4JzZYaULZrx9g\noXqqo/C9QnOHTto=\n-----END CERTIFICATE-----";
        const BUNDLE: &str = r#"{
          "SignedEntryTimestamp": "MEUCIDBGJijj2FqU25yRWzlEWHqE64XKwUvychBs1bSM1PaKAiEAwcR2u81c42TLBk3lWJqhtB7SnM7Lh0OYEl6Bfa7ZA4s=",
          "Payload": {
            "body": "eyJhcGlWZXJzaW9uIjoiMC4wLjEiLCJraW5kIjoicmVrb3JkIiwic3BlYyI6eyJkYXRhIjp7Imhhc2giOnsiYWxnb3JpdGhtIjoic2hhMjU2IiwidmFsdWUiOiJlNzgwMWRlOTM1NTEyZTIyYjIzN2M3YjU3ZTQyY2E0ZDIwZTIxMzRiZGYxYjk4Zjk3NmM4ZjU1ZDljZmU0MDY3In19LCJzaWduYXR1cmUiOnsiY29udGVudCI6Ik1FVUNJR3FXU2N6N3M5YVAyc0dYTkZLZXFpdnczQjZrUFJzNTZBSVRJSG52ZDVpZ0FpRUExa3piYVYyWTV5UEU4MUVOOTJOVUZPbDMxTExKU3Z3c2pGUTA3bTJYcWFBPSIsImZvcm1hdCI6Ing1MDkiLCJwdWJsaWNLZXkiOnsiY29udGVudCI6IkxTMHRMUzFDUlVkSlRpQkRSVkpVU1VaSlEwRlVSUzB0TFMwdENrMUpTVU5rZWtORFFXWjVaMEYzU1VKQlowbFVRU3RRYzJGTGFtRkZXbkZ1TjBsWk9UUmlNV1V2YWtwdWFYcEJTMEpuWjNGb2EycFBVRkZSUkVGNlFYRUtUVkpWZDBWM1dVUldVVkZMUlhkNGVtRlhaSHBrUnpsNVdsTTFhMXBZV1hoRlZFRlFRbWRPVmtKQlRWUkRTRTV3V2pOT01HSXpTbXhOUWpSWVJGUkplQXBOVkVGNVRVUkJNMDFxVlhoT2JHOVlSRlJKZUUxVVFYbE5SRUV6VGtSVmVFNVdiM2RCUkVKYVRVSk5SMEo1Y1VkVFRUUTVRV2RGUjBORGNVZFRUVFE1Q2tGM1JVaEJNRWxCUWtsT1pYZFJRbE14WmpSQmJVNUpSVTVrVEN0VkwwaEtiM1JOVTAwM1drNXVhMVJ1V1dWbWVIZFdPVlJGY25CMmJrRmFNQ3RFZWt3S2VXWkJRVlpoWlVwMFMycEdkbUpQVkdJNFJqRjVhRXBHVlRCWVdTdFNhV3BuWjBWd1RVbEpRa3BVUVU5Q1owNVdTRkU0UWtGbU9FVkNRVTFEUWpSQmR3cEZkMWxFVmxJd2JFSkJkM2REWjFsSlMzZFpRa0pSVlVoQmQwMTNSRUZaUkZaU01GUkJVVWd2UWtGSmQwRkVRV1JDWjA1V1NGRTBSVVpuVVZWTlpqRlNDazFOYzNGT1JrSnlWMko0T0cxU1RtUjRUMnRGUlZsemQwaDNXVVJXVWpCcVFrSm5kMFp2UVZWNVRWVmtRVVZIWVVwRGEzbFZVMVJ5UkdFMVN6ZFZiMGNLTUN0M2QyZFpNRWREUTNOSFFWRlZSa0ozUlVKQ1NVZEJUVWcwZDJaQldVbExkMWxDUWxGVlNFMUJTMGRqUjJnd1pFaEJOa3g1T1hkamJXd3lXVmhTYkFwWk1rVjBXVEk1ZFdSSFZuVmtRekF5VFVST2JWcFVaR3hPZVRCM1RVUkJkMHhVU1hsTmFtTjBXVzFaTTA1VE1XMU9SMWt4V2xSbmQxcEVTVFZPVkZGMUNtTXpVblpqYlVadVdsTTFibUl5T1c1aVIxWm9ZMGRzZWt4dFRuWmlVemxxV1ZSTk1sbFVSbXhQVkZsNVRrUkthVTlYV21wWmFrVXdUbWs1YWxsVE5Xb0tZMjVSZDBsQldVUldVakJTUVZGSUwwSkNXWGRHU1VWVFdtMTRhR1J0YkhaUlIwNW9Zek5TYkdKSGVIQk1iVEZzVFVGdlIwTkRjVWRUVFRRNVFrRk5SQXBCTW10QlRVZFpRMDFSUXpOWk1uVnNVRlJ6VUcxT1V6UmplbUZMWldwbE1FSnVUMUZJZWpWbE5rNUNXREJDY1hnNVdHTmhLM1F5YTA5cE1UZHpiM0JqQ2k5MkwzaElNWGhNZFZCdlEwMVJSRXRPUkRSWGFraG1TM0ZZV0U5bFZYWmFPVUU1TmtSeGNrVjNSMkZ4UjAxMGJrbDFUalJLZWxwWllWVk1Xbko0T1djS2IxaHhjVzh2UXpsUmJrOUlWSFJ2UFFvdExTMHRMVVZPUkNCRFJWSlVTVVpKUTBGVVJTMHRMUzB0Q2c9PSJ9fX19",
            "integratedTime": 1634714717,
            "logIndex": 783607,
            "logID": "c0d23d6ad406973f9559f3ba2d1ca01f84147d8ffc5b8445c224f98b9591801d"
          }
        }"#;
        let digest = "sha256:5f481572d088dc4023afb35fced9530ced3d9b03bf7299c6f492163cb9f0452e";
        let payload = format!(
            r#"{{"critical":{{"identity":{{"docker-reference":"registry-testing.svc.lan/kubewarden/disallow-service-nodeport"}},"image":{{"docker-manifest-digest":"{digest}"}},"type":"cosign container image signature"}},"optional":null}}"#
        );
        let signature = "MEUCIGqWScz7s9aP2sGXNFKeqivw3B6kPRs56AITIHnvd5igAiEA1kzbaV2Y5yPE81EN92NUFOl31LLJSvwsjFQ07m2XqaA=";
        let rekor = PublicKey::from_pem("rekor.pub", REKOR).unwrap();
        let identities = vec![Identity::new(ISSUER, ".*").unwrap()];
        let keyless = Keyless::from_pem(FULCIO, vec![rekor.clone()], identities.clone()).unwrap();
        let policy = TrustPolicy::new(Vec::new()).with_keyless(keyless);
        let err = policy
            .check(
                digest,
                payload.as_bytes(),
                signature,
                &annotations(signature, CERT, BUNDLE),
            )
            .unwrap_err()
            .to_string();
        assert_eq!(err, "its certificate names no OIDC issuer (not Fulcio's)");
        // Each earlier link is what let it get there: without the real roots, or a day too late.
        let other_roots =
            Keyless::from_pem(&Fulcio::new().ca.pem(), vec![rekor], identities).unwrap();
        let err = TrustPolicy::new(Vec::new())
            .with_keyless(other_roots)
            .check(
                digest,
                payload.as_bytes(),
                signature,
                &annotations(signature, CERT, BUNDLE),
            )
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("not one the trust root's Fulcio issued"),
            "{err}"
        );
        let mut late: serde_json::Value = serde_json::from_str(BUNDLE).unwrap();
        late["Payload"]["integratedTime"] = 1_634_801_117u64.into();
        let err = policy
            .check(
                digest,
                payload.as_bytes(),
                signature,
                &annotations(signature, CERT, &late.to_string()),
            )
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("not signed by the trust root's Rekor key"),
            "{err}"
        );
    }

    const OTHER_DIGEST: &str =
        "sha256:4444444444444444444444444444444444444444444444444444444444444444";
}
