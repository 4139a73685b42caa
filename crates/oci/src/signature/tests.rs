//! Trust policies over keys: payloads, signatures and keys as cosign makes them.

use super::*;

fn payload(digest: &str, kind: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "critical": {
            "identity": {"docker-reference": "registry.example/team/p"},
            "image": {"docker-manifest-digest": digest},
            "type": kind,
        },
        "optional": null,
    }))
    .unwrap()
}

/// `key`'s signature of `payload`, as a layer's annotation holds it.
fn sign(key: &SigningKey, payload: &[u8]) -> String {
    BASE64.encode(key.pair.sign(payload).unwrap())
}

fn none() -> BTreeMap<String, String> {
    BTreeMap::new()
}

const DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const OTHER: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

#[test]
fn a_payload_signed_by_a_trusted_key_for_this_digest_verifies_and_nothing_else_does() {
    let trusted = SigningKey::generate();
    let stranger = SigningKey::generate();
    let policy = TrustPolicy::new(vec![
        PublicKey::from_pem("team.pub", &trusted.public_key_pem()).unwrap(),
    ]);
    let good = payload(DIGEST, PAYLOAD_TYPE);
    let signer = policy
        .check(DIGEST, &good, &sign(&trusted, &good), &none())
        .unwrap();
    assert_eq!(signer.key, "team.pub");
    assert_eq!(signer.fingerprint, trusted.public_key().fingerprint());
    assert!(policy.trusts(&signer));
    assert!(!policy.trusts(&stranger.public_key().signer()));

    let by_stranger = policy
        .check(DIGEST, &good, &sign(&stranger, &good), &none())
        .unwrap_err()
        .to_string();
    assert_eq!(by_stranger, "signed by no key the policy trusts");
    // One byte of the payload changed after signing.
    let mut tampered = good.clone();
    let at = tampered.len() - 3;
    tampered[at] ^= 1;
    let signature = sign(&trusted, &good);
    assert!(
        policy
            .check(DIGEST, &tampered, &signature, &none())
            .is_err()
    );
    // A good signature of another artifact, copied beside this one.
    let other = payload(OTHER, PAYLOAD_TYPE);
    let copied = policy
        .check(DIGEST, &other, &sign(&trusted, &other), &none())
        .unwrap_err()
        .to_string();
    assert!(
        copied.contains(OTHER) && copied.contains("not for this artifact"),
        "{copied}"
    );
    // Signed, but not an image signature.
    let attestation = payload(DIGEST, "https://in-toto.io/Statement/v1");
    let wrong = policy
        .check(DIGEST, &attestation, &sign(&trusted, &attestation), &none())
        .unwrap_err()
        .to_string();
    assert!(wrong.contains("in-toto"), "{wrong}");
}

#[test]
fn keys_round_trip_through_pem_and_odd_keys_are_refused_by_name() {
    let key = SigningKey::generate();
    let again = SigningKey::from_pem("k.pem", &key.private_key_pem()).unwrap();
    assert_eq!(
        again.public_key().fingerprint(),
        key.public_key().fingerprint()
    );
    let p384 = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).unwrap();
    assert!(PublicKey::from_pem("p384.pub", &p384.public_key_pem()).is_ok());
    let ed = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    assert!(PublicKey::from_pem("ed.pub", &ed.public_key_pem()).is_ok());

    let not_pem = PublicKey::from_pem("junk.pub", "not a key\n").unwrap_err();
    assert!(
        not_pem
            .to_string()
            .starts_with("key `junk.pub`: not a PEM public key")
    );
    // A private key where a public one belongs.
    let private = PublicKey::from_pem("cosign.key", &key.private_key_pem()).unwrap_err();
    assert!(private.to_string().contains("cosign.key"), "{private}");
    let public_as_private = SigningKey::from_pem("cosign.pub", &key.public_key_pem());
    assert!(public_as_private.is_err());
    let missing = PublicKey::from_file(Path::new("/nonexistent/cosign.pub")).unwrap_err();
    assert!(
        missing
            .to_string()
            .starts_with("key `/nonexistent/cosign.pub`:")
    );
}

/// A signature `cosign sign --key` made (the one sigstore-rs's tests carry), checked with
/// its `cosign.pub`: the format is cosign's, not only this module's own.
#[test]
fn a_signature_cosign_made_verifies() {
    let public = "-----BEGIN PUBLIC KEY-----\n\
        MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAENptdY/l3nB0yqkXLBWkZWQwo6+cu\n\
        OSWS1X9vPavpiQOoTTGC0xX57OojUadxF1cdQmrsiReWg2Wn4FneJfa8xw==\n\
        -----END PUBLIC KEY-----\n";
    let digest = "sha256:f3cfc9d0dbf931d3db4685ec659b7ac68e2a578219da4aae65427886e649b06b";
    let payload = format!(
        r#"{{"critical":{{"identity":{{"docker-reference":"registry-testing.svc.lan/busybox"}},"image":{{"docker-manifest-digest":"{digest}"}},"type":"cosign container image signature"}},"optional":null}}"#
    );
    let signature = "MEUCIQD6q/COgzOyW0YH1Dk+CCYSt4uAhm3FDHUwvPI55zwnlwIgE0ZK58ZOWpZw8YVmBapJhBqCfdPekIknimuO0xH8Jh8=";
    let policy = TrustPolicy::new(vec![PublicKey::from_pem("cosign.pub", public).unwrap()]);
    let signer = policy
        .check(digest, payload.as_bytes(), signature, &none())
        .unwrap();
    assert_eq!(signer.key, "cosign.pub");
    assert!(
        policy
            .check(OTHER, payload.as_bytes(), signature, &none())
            .is_err()
    );
}

#[test]
fn signatures_live_under_the_digest_tag() {
    let reference: Reference = "registry.example:5000/team/policy:stable".parse().unwrap();
    assert_eq!(
        signature_tag(&reference, DIGEST).whole(),
        format!(
            "registry.example:5000/team/policy:sha256-{}.sig",
            &DIGEST["sha256:".len()..]
        )
    );
}
