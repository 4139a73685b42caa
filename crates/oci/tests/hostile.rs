//! Registries that misbehave, served in-process on loopback (plain HTTP, allowed for loopback):
//! one that never answers, one whose layer is not what its manifest's digest says, one whose
//! tag is an image index, one whose manifest is larger than any registry keeps. Each pull fails
//! with a clear error and nothing is returned as a plugin.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use informant_oci::layout::{WASM_CONFIG, WASM_LAYER};
use informant_oci::registry::PlainHttp;
use informant_oci::{Error, Options, Reference, Registry};
use sha2::{Digest, Sha256};

fn digest(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// What the fake registry serves, by repository.
struct Fake {
    layer: Vec<u8>,
    config: Vec<u8>,
}

impl Fake {
    fn manifest(&self) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": WASM_CONFIG, "digest": digest(&self.config), "size": self.config.len()},
            "layers": [{"mediaType": WASM_LAYER, "digest": digest(&self.layer), "size": self.layer.len()}],
        }))
        .unwrap()
    }

    async fn answer(&self, req: Request<Incoming>) -> Option<Response<Full<Bytes>>> {
        let path = req.uri().path().to_string();
        let reply = |status: StatusCode, kind: &str, body: Vec<u8>| {
            let mut r = Response::builder()
                .status(status)
                .header("Content-Type", kind);
            if kind != "text/plain" {
                r = r.header("Docker-Content-Digest", digest(&body));
            }
            Some(r.body(Full::new(Bytes::from(body))).unwrap())
        };
        if path == "/v2/" {
            return reply(StatusCode::OK, "text/plain", Vec::new());
        }
        let (repo, rest) = path.strip_prefix("/v2/")?.split_once('/')?;
        match (repo, rest.split('/').next()?) {
            // Accepts the connection and never answers.
            ("hang", _) => std::future::pending().await,
            ("index", "manifests") => reply(
                StatusCode::OK,
                "application/vnd.oci.image.index.v1+json",
                serde_json::to_vec(&serde_json::json!({
                    "schemaVersion": 2,
                    "mediaType": "application/vnd.oci.image.index.v1+json",
                    "manifests": [{"mediaType": OCI_MANIFEST, "digest": digest(&self.manifest()), "size": 1}],
                }))
                .unwrap(),
            ),
            ("huge", "manifests") => {
                // Valid JSON, 5 MiB of it: more than distribution keeps for a manifest.
                let mut m: serde_json::Value = serde_json::from_slice(&self.manifest()).unwrap();
                m["annotations"] = serde_json::json!({"padding": "x".repeat(5 << 20)});
                reply(StatusCode::OK, OCI_MANIFEST, serde_json::to_vec(&m).unwrap())
            }
            (_, "manifests") => reply(StatusCode::OK, OCI_MANIFEST, self.manifest()),
            ("mismatch", "blobs") => {
                // Not the bytes the manifest's digest names.
                let mut other = self.layer.clone();
                other[0] ^= 0xff;
                reply(StatusCode::OK, "application/octet-stream", other)
            }
            (_, "blobs") if rest.ends_with(&digest(&self.config)) => {
                reply(StatusCode::OK, "application/octet-stream", self.config.clone())
            }
            (_, "blobs") => reply(StatusCode::OK, "application/octet-stream", self.layer.clone()),
            _ => reply(StatusCode::NOT_FOUND, "text/plain", Vec::new()),
        }
    }
}

/// Serves `fake` on a loopback port; its `host:port`.
async fn serve(fake: Fake) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let fake = Arc::new(fake);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let fake = fake.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let fake = fake.clone();
                    async move {
                        Ok::<_, Infallible>(fake.answer(req).await.unwrap_or_else(|| {
                            Response::builder()
                                .status(StatusCode::NOT_FOUND)
                                .body(Full::new(Bytes::new()))
                                .unwrap()
                        }))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(socket), service)
                    .await;
            });
        }
    });
    addr.to_string()
}

async fn pull(addr: &str, repo: &str, timeout: Duration) -> Result<informant_oci::Artifact, Error> {
    let registry = Registry::new(Options {
        plain_http: PlainHttp::Loopback,
        timeout,
        ..Options::default()
    })
    .unwrap();
    let reference: Reference = format!("{addr}/{repo}:v1").parse().unwrap();
    // Bounded here too: a pull that hung past its own timeout would fail the test, not stall it.
    tokio::time::timeout(Duration::from_secs(60), registry.pull(&reference))
        .await
        .expect("the pull ended by itself")
}

fn fake() -> Fake {
    Fake {
        layer: b"\0asm\x0d\0\x01\0component bytes".to_vec(),
        config: serde_json::to_vec(
            &serde_json::json!({"architecture": "wasm", "os": "wasip2", "layerDigests": []}),
        )
        .unwrap(),
    }
}

#[tokio::test]
async fn the_fake_registry_serves_a_good_plugin() {
    let addr = serve(fake()).await;
    let artifact = pull(&addr, "good", Duration::from_secs(5)).await.unwrap();
    assert_eq!(artifact.wasm, fake().layer);
    assert!(artifact.pinned.starts_with(&format!("{addr}/good@sha256:")));
}

#[tokio::test]
async fn a_registry_that_never_answers_times_out() {
    let addr = serve(fake()).await;
    let e = pull(&addr, "hang", Duration::from_millis(500))
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::Registry { .. }) && e.to_string().contains(&format!("{addr}/hang:v1")),
        "{e}"
    );
}

#[tokio::test]
async fn a_layer_that_is_not_what_its_digest_says_is_refused() {
    let addr = serve(fake()).await;
    let e = pull(&addr, "mismatch", Duration::from_secs(5))
        .await
        .unwrap_err();
    let text = format!("{e}: {:?}", std::error::Error::source(&e));
    assert!(
        text.contains("reading its wasm layer") && text.to_lowercase().contains("digest"),
        "{text}"
    );
}

#[tokio::test]
async fn a_tag_that_is_an_image_index_is_not_a_plugin() {
    let addr = serve(fake()).await;
    let e = pull(&addr, "index", Duration::from_secs(5))
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "`{addr}/index:v1`: not a wasm plugin artifact: it is an image index (a list of manifests), not one plugin"
        )
    );
}

#[tokio::test]
async fn a_manifest_larger_than_registries_keep_is_refused() {
    let addr = serve(fake()).await;
    let e = pull(&addr, "huge", Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::TooLarge {
                what: "image manifest",
                ..
            }
        ),
        "{e}"
    );
}
