//! Speaking to the host's admission webhook server as the API server does: HTTPS verified
//! with the server's CA bundle, an AdmissionReview v1 in, the review out.

use std::net::SocketAddr;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;

use crate::guarded;

/// The webhook server of a running host.
#[derive(Clone)]
pub struct Webhook {
    /// Where it listens.
    pub addr: SocketAddr,
    connector: tokio_rustls::TlsConnector,
}

/// One answer: the HTTP status, and the body as JSON when it is JSON (else a string).
#[derive(Debug)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// The body.
    pub body: Value,
}

impl Answer {
    /// The review's `response`.
    pub fn response(&self) -> &Value {
        &self.body["response"]
    }

    /// Whether the review allowed the request.
    pub fn allowed(&self) -> bool {
        self.response()["allowed"] == true
    }

    /// The review's warnings.
    pub fn warnings(&self) -> Vec<String> {
        self.response()["warnings"]
            .as_array()
            .map(|w| {
                w.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The denial's message.
    pub fn message(&self) -> &str {
        self.response()["status"]["message"]
            .as_str()
            .unwrap_or_default()
    }
}

impl Webhook {
    /// The server at `addr`, trusted by the PEM certificates `ca_bundle` only.
    pub fn new(addr: SocketAddr, ca_bundle: &[u8]) -> Self {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_bundle) {
            roots.add(cert.expect("a PEM certificate")).expect("a CA");
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        Webhook {
            addr,
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
        }
    }

    /// `POST path` with `body` over a fresh verified connection.
    pub async fn post(&self, path: &str, body: &[u8]) -> Answer {
        guarded(&format!("POST {path}"), async {
            let tcp = tokio::net::TcpStream::connect(self.addr)
                .await
                .expect("connect");
            let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
            let mut tls = self.connector.connect(name, tcp).await.expect("TLS");
            let head = format!(
                "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                self.addr,
                body.len()
            );
            tls.write_all(head.as_bytes()).await.expect("send");
            // A refused body may be answered (and the connection closed) before it is all sent.
            let _ = tls.write_all(body).await;
            let mut raw = Vec::new();
            let _ = tls.read_to_end(&mut raw).await;
            let text = String::from_utf8_lossy(&raw);
            let (head, body) = text.split_once("\r\n\r\n").expect("a header block");
            let status = head
                .split(' ')
                .nth(1)
                .and_then(|c| c.parse().ok())
                .expect("a status code");
            let body = serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.into()));
            Answer { status, body }
        })
        .await
    }

    /// The certificate the server presents to a new connection (DER).
    pub async fn served_certificate(&self) -> Vec<u8> {
        guarded("a TLS handshake", async {
            let tcp = tokio::net::TcpStream::connect(self.addr)
                .await
                .expect("connect");
            let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
            let tls = self.connector.connect(name, tcp).await.expect("TLS");
            tls.get_ref().1.peer_certificates().expect("a certificate")[0].to_vec()
        })
        .await
    }

    /// Sends `review` (JSON) to `path`.
    pub async fn review(&self, path: &str, review: &Value) -> Answer {
        self.post(path, &serde_json::to_vec(review).unwrap()).await
    }
}

/// An AdmissionReview v1 request to `operation` (`CREATE`, ...) `object` (its kind, namespace
/// and name taken from it), with `uid`.
pub fn review(uid: &str, operation: &str, object: &Value) -> Value {
    let api_version = object["apiVersion"].as_str().unwrap_or("v1");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = object["kind"].as_str().unwrap_or_default();
    let resource = format!("{}s", kind.to_lowercase());
    let namespace = object["metadata"]["namespace"].clone();
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "name": object["metadata"]["name"],
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": "tester", "groups": ["system:authenticated"]},
            "object": object,
            "oldObject": null,
            "dryRun": false,
        }
    })
}

/// The webhook configurations' name the tests' hosts keep.
pub const WEBHOOK: &str = "informant-test";

/// Admission on a free loopback port, with a certificate made at start, registered with the
/// API server as [`WEBHOOK`] at the address it listens on.
pub fn loopback_admission() -> informant_runtime::admission::AdmissionOptions {
    use informant_runtime::admission::AdmissionOptions;
    use informant_runtime::admission::webhooks::Endpoint;
    AdmissionOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        tls: informant_runtime::tls::ServerTls::SelfSigned,
        register: Some((WEBHOOK.into(), Endpoint::Url(String::new()))),
        cert_secret: None,
        record: None,
    }
}

/// Waits until the [`WEBHOOK`] configurations `client` reads hold a webhook for each of the
/// hooks `runtime` runs.
pub async fn registered(client: kube::Client, runtime: &informant_runtime::runtime::Runtime) {
    use k8s_openapi::api::admissionregistration::v1::{
        MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
    };
    let hooks: usize = (runtime.host.as_ref().expect("plugins").admitters().iter())
        .map(|(_, a)| a.hooks().len())
        .sum();
    let validating: kube::Api<ValidatingWebhookConfiguration> = kube::Api::all(client.clone());
    let mutating: kube::Api<MutatingWebhookConfiguration> = kube::Api::all(client);
    guarded("the webhook configurations", async {
        loop {
            let v = validating.get_opt(WEBHOOK).await.ok().flatten();
            let m = mutating.get_opt(WEBHOOK).await.ok().flatten();
            let count = v.and_then(|c| c.webhooks).map_or(0, |w| w.len())
                + m.and_then(|c| c.webhooks).map_or(0, |w| w.len());
            if count == hooks {
                return;
            }
            // The registrar offers no signal outside the process: poll the condition.
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
}
