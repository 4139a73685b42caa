//! A CA made now and a server certificate it signed for `127.0.0.1` and `localhost`: what the
//! tests' TLS servers on loopback present, and what their clients are told to trust.

/// The CA and the server's certificate and key, in both encodings the servers take.
pub struct LoopbackTls {
    /// The CA certificate (PEM): the file a client trusts.
    pub ca_pem: String,
    /// The CA certificate (DER).
    pub ca_der: rustls::pki_types::CertificateDer<'static>,
    /// The server certificate (PEM).
    pub leaf_pem: String,
    /// The server certificate (DER).
    pub leaf_der: rustls::pki_types::CertificateDer<'static>,
    /// The server's key (PKCS#8 PEM).
    pub key_pem: String,
    /// The server's key (PKCS#8 DER).
    pub key_der: Vec<u8>,
}

impl LoopbackTls {
    /// A new CA named `ca_name`, and a server certificate it signed.
    pub fn new(ca_name: &str) -> LoopbackTls {
        let ca_key = rcgen::KeyPair::generate().expect("a CA key");
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, ca_name);
        let ca_cert = ca.self_signed(&ca_key).expect("the CA certificate");
        let key = rcgen::KeyPair::generate().expect("a server key");
        let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
            .expect("server params")
            .signed_by(&key, &rcgen::Issuer::from_params(&ca, &ca_key))
            .expect("the server certificate");
        LoopbackTls {
            ca_pem: ca_cert.pem(),
            ca_der: ca_cert.der().clone(),
            leaf_pem: leaf.pem(),
            leaf_der: leaf.der().clone(),
            key_pem: key.serialize_pem(),
            key_der: key.serialize_der(),
        }
    }
}
