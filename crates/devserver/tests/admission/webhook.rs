//! The test webhook: an HTTPS server on 127.0.0.1 whose answers each test decides, and the
//! configurations and answers the tests build.

use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use informant_devserver::{DevServer, DevServerConfig};
use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;
use serde_json::{Value, json};

/// What the test webhook answers.
pub enum Reply {
    /// This AdmissionReview (or any JSON).
    Json(Value),
    /// Nothing, ever.
    Hang,
}

type Decide = Arc<dyn Fn(&str, &Value) -> Reply + Send + Sync>;

/// An HTTPS webhook server on 127.0.0.1 that keeps every AdmissionReview it is sent, with
/// the path it was posted to.
pub struct Webhook {
    pub base: String,
    ca_bundle: String,
    pub seen: Arc<Mutex<Vec<(String, Value)>>>,
}

impl Webhook {
    pub async fn start(decide: impl Fn(&str, &Value) -> Reply + Send + Sync + 'static) -> Webhook {
        use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};
        let decide: Decide = Arc::new(decide);
        let made = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
            .unwrap();
        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(made.cert.pem());
        let key = PrivatePkcs8KeyDer::from(made.signing_key.serialize_der());
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(made.cert.der().to_vec())],
            key.into(),
        )
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("https://{}", listener.local_addr().unwrap());
        let seen: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
        let kept = seen.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, kept, decide) = (acceptor.clone(), kept.clone(), decide.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service =
                        hyper::service::service_fn(move |req: http::Request<Incoming>| {
                            let (kept, decide) = (kept.clone(), decide.clone());
                            async move {
                                let path = req.uri().path().to_string();
                                let query = req.uri().query().unwrap_or_default().to_string();
                                let body = req.into_body().collect().await.unwrap().to_bytes();
                                let review: Value = serde_json::from_slice(&body).unwrap();
                                kept.lock()
                                    .push((format!("{path}?{query}"), review.clone()));
                                let reply = decide(&path, &review);
                                let answer = match reply {
                                    Reply::Json(v) => v,
                                    Reply::Hang => std::future::pending().await,
                                };
                                let mut resp = http::Response::new(Full::new(Bytes::from(
                                    serde_json::to_vec(&answer).unwrap(),
                                )));
                                resp.headers_mut().insert(
                                    http::header::CONTENT_TYPE,
                                    http::HeaderValue::from_static("application/json"),
                                );
                                Ok::<_, std::convert::Infallible>(resp)
                            }
                        });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        Webhook {
            base,
            ca_bundle,
            seen,
        }
    }

    /// A webhook entry calling `path` here, for CREATE of ConfigMaps unless `extra` says
    /// otherwise (its fields replace the defaults).
    pub fn hook(&self, name: &str, path: &str, extra: Value) -> Value {
        let mut hook = json!({
            "name": name,
            "clientConfig": {"url": format!("{}{path}", self.base), "caBundle": self.ca_bundle},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["configmaps"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        });
        for (k, v) in extra.as_object().into_iter().flatten() {
            hook[k] = v.clone();
        }
        hook
    }

    /// The reviews posted to `path` so far.
    pub fn calls(&self, path: &str) -> Vec<Value> {
        self.seen
            .lock()
            .iter()
            .filter(|(p, _)| p.split('?').next() == Some(path))
            .map(|(_, r)| r.clone())
            .collect()
    }
}

pub fn response(review: &Value, fields: Value) -> Value {
    let mut response = json!({"uid": review["request"]["uid"], "allowed": true});
    for (k, v) in fields.as_object().into_iter().flatten() {
        response[k] = v.clone();
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

pub fn admit(review: &Value) -> Reply {
    Reply::Json(response(review, json!({})))
}

pub fn refuse(review: &Value, message: &str) -> Reply {
    Reply::Json(response(
        review,
        json!({"allowed": false, "status": {"message": message}}),
    ))
}

/// A JSON patch answer, base64 as Go sends it.
pub fn patch(review: &Value, ops: Value) -> Reply {
    let patch = base64::engine::general_purpose::STANDARD.encode(ops.to_string());
    Reply::Json(response(
        review,
        json!({"patch": patch, "patchType": "JSONPatch"}),
    ))
}

fn configuration(kind: &str, name: &str, webhooks: Vec<Value>) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
        "metadata": {"name": name}, "webhooks": webhooks,
    })
}

pub fn validating(name: &str, webhooks: Vec<Value>) -> Value {
    configuration("ValidatingWebhookConfiguration", name, webhooks)
}

pub fn mutating(name: &str, webhooks: Vec<Value>) -> Value {
    configuration("MutatingWebhookConfiguration", name, webhooks)
}

pub fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app": "demo"}}, "data": {"k": "v"},
    }))
    .unwrap()
}

pub async fn server() -> DevServer {
    DevServer::start(DevServerConfig::default()).await.unwrap()
}

/// The API error a kube call failed with.
pub fn status(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("not an API error: {other:?}"),
    }
}

/// An address nothing listens on: a port bound and released.
pub async fn closed_port() -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap().port()
}
