//! Registries that misbehave, served in-process on loopback (plain HTTP, allowed for loopback;
//! nothing here talks to anything but 127.0.0.1): one that never answers, one whose layer is not
//! what its manifest's digest says, one whose tag is an image index, manifests larger than any
//! registry keeps (up to hundreds of MB, made as they are sent), redirects and foreign `urls` to
//! a second host, and media types no wasm layout uses. Each pull fails with a clear error and
//! nothing is returned as a plugin.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::{Request, Response, StatusCode};
use informant_oci::credentials::Credentials;
use informant_oci::layout::{LEGACY_WASM_LAYER, WASM_CONFIG, WASM_LAYER};
use informant_oci::registry::{MAX_MANIFEST_BYTES, PlainHttp};
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

type Body = BoxBody<Bytes, Infallible>;

fn full(body: impl Into<Bytes>) -> Body {
    Full::new(body.into()).boxed()
}

/// The login the registries that want one take, and the `Authorization` it makes.
const USER: &str = "informant";
const PASSWORD: &str = "s3cret";
const BASIC: &str = "Basic aW5mb3JtYW50OnMzY3JldA=="; // base64("informant:s3cret")

/// What a fake answers.
trait Answer: Send + Sync + 'static {
    fn answer(&self, req: Request<Incoming>)
    -> impl Future<Output = Option<Response<Body>>> + Send;
}

/// A fake registry: what it serves, by repository.
struct Fake {
    layer: Vec<u8>,
    config: Vec<u8>,
    /// The `Authorization` every request under `/v2/` must carry, if any.
    login: Option<&'static str>,
    /// Another host (`host:port`) that redirects and foreign `urls` point at.
    elsewhere: Option<String>,
    /// How many bytes of the huge manifests were handed to a connection.
    sent: Arc<AtomicU64>,
    /// How many times the layer was asked for.
    layer_gets: Arc<AtomicU64>,
}

/// 300 MB: a manifest far beyond any limit, made as it is sent, never whole.
const HUGE: u64 = 300 << 20;

static PAD: [u8; 64 << 10] = [b' '; 64 << 10];

/// A body of `left` bytes of padding, handed out 64 KiB at a time and counted in `sent`: it is
/// only made as fast as the connection takes it. `exact` gives it a `Content-Length`; without,
/// it is sent chunked.
struct Lazy {
    left: u64,
    exact: bool,
    sent: Arc<AtomicU64>,
}

impl hyper::body::Body for Lazy {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let n = self.left.min(PAD.len() as u64);
        self.left -= n;
        self.sent.fetch_add(n, Ordering::SeqCst);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(
            &PAD[..n as usize],
        )))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> SizeHint {
        match self.exact {
            true => SizeHint::with_exact(self.left),
            false => SizeHint::default(),
        }
    }
}

fn reply(status: StatusCode, kind: &str, body: Vec<u8>) -> Option<Response<Body>> {
    let mut r = Response::builder()
        .status(status)
        .header("Content-Type", kind);
    if kind != "text/plain" {
        r = r.header("Docker-Content-Digest", digest(&body));
    }
    Some(r.body(full(body)).unwrap())
}

fn redirect(to: String) -> Option<Response<Body>> {
    Some(
        Response::builder()
            .status(StatusCode::TEMPORARY_REDIRECT)
            .header("Location", to)
            .body(full(Vec::new()))
            .unwrap(),
    )
}

impl Fake {
    /// The image manifest `repo` serves: a plugin, or one with the config's or the layer's
    /// media type (or its `urls`) changed.
    fn manifest(&self, repo: &str) -> Vec<u8> {
        let mut config = serde_json::json!({"mediaType": WASM_CONFIG, "digest": digest(&self.config), "size": self.config.len()});
        let mut layer = serde_json::json!({"mediaType": WASM_LAYER, "digest": digest(&self.layer), "size": self.layer.len()});
        match repo {
            "odd-config" => config["mediaType"] = "application/vnd.oci.image.config.v1+json".into(),
            "odd-layer" => {
                layer["mediaType"] = "application/vnd.oci.image.layer.v1.tar+gzip".into()
            }
            "legacy" => {
                config["mediaType"] = "application/vnd.wasm.config.v1+json".into();
                layer["mediaType"] = LEGACY_WASM_LAYER.into();
            }
            "foreign-urls" => {
                let url = format!(
                    "http://{}/good/{}",
                    self.elsewhere.as_ref().unwrap(),
                    digest(&self.layer)
                );
                layer["urls"] = serde_json::json!([url]);
            }
            _ => {}
        }
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": config,
            "layers": [layer],
        }))
        .unwrap()
    }
}

impl Answer for Fake {
    async fn answer(&self, req: Request<Incoming>) -> Option<Response<Body>> {
        let path = req.uri().path().to_string();
        if let Some(login) = self.login
            && req
                .headers()
                .get("Authorization")
                .is_none_or(|v| v != login)
        {
            return Some(
                Response::builder()
                    .status(StatusCode::UNAUTHORIZED)
                    .header("WWW-Authenticate", r#"Basic realm="fake""#)
                    .body(full(Vec::new()))
                    .unwrap(),
            );
        }
        if path == "/v2/" {
            return reply(StatusCode::OK, "text/plain", Vec::new());
        }
        let (repo, rest) = path.strip_prefix("/v2/")?.split_once('/')?;
        let elsewhere = || self.elsewhere.clone().unwrap();
        match (repo, rest.split('/').next()?) {
            // Accepts the connection and never answers.
            ("hang", _) => std::future::pending().await,
            ("index", "manifests") => reply(
                StatusCode::OK,
                "application/vnd.oci.image.index.v1+json",
                serde_json::to_vec(&serde_json::json!({
                    "schemaVersion": 2,
                    "mediaType": "application/vnd.oci.image.index.v1+json",
                    "manifests": [{"mediaType": OCI_MANIFEST, "digest": digest(&self.manifest(repo)), "size": 1}],
                }))
                .unwrap(),
            ),
            ("huge", "manifests") => {
                // Valid JSON, 5 MiB of it: more than distribution keeps for a manifest.
                let mut m: serde_json::Value = serde_json::from_slice(&self.manifest(repo)).unwrap();
                m["annotations"] = serde_json::json!({"padding": "x".repeat(5 << 20)});
                reply(StatusCode::OK, OCI_MANIFEST, serde_json::to_vec(&m).unwrap())
            }
            ("huge-length" | "huge-chunked", "manifests") => Some(
                Response::builder()
                    .header("Content-Type", OCI_MANIFEST)
                    .body(
                        Lazy {
                            left: HUGE,
                            exact: repo == "huge-length",
                            sent: self.sent.clone(),
                        }
                        .boxed(),
                    )
                    .unwrap(),
            ),
            ("redirect-manifest", "manifests") => {
                redirect(format!("http://{}/manifest", elsewhere()))
            }
            (_, "manifests") => reply(StatusCode::OK, OCI_MANIFEST, self.manifest(repo)),
            ("mismatch", "blobs") => {
                // Not the bytes the manifest's digest names.
                let mut other = self.layer.clone();
                other[0] ^= 0xff;
                reply(StatusCode::OK, "application/octet-stream", other)
            }
            (_, "blobs") if rest.ends_with(&digest(&self.config)) => {
                reply(StatusCode::OK, "application/octet-stream", self.config.clone())
            }
            // The layer is kept in storage elsewhere, as S3 or a CDN would keep it.
            ("redirect-blob", "blobs") => {
                redirect(format!("http://{}/good/{}", elsewhere(), digest(&self.layer)))
            }
            ("redirect-tampered", "blobs") => {
                redirect(format!("http://{}/bad/{}", elsewhere(), digest(&self.layer)))
            }
            // Only the `urls` of its descriptor would find it.
            ("foreign-urls", "blobs") => reply(StatusCode::NOT_FOUND, "text/plain", Vec::new()),
            (_, "blobs") => {
                self.layer_gets.fetch_add(1, Ordering::SeqCst);
                reply(StatusCode::OK, "application/octet-stream", self.layer.clone())
            }
            _ => reply(StatusCode::NOT_FOUND, "text/plain", Vec::new()),
        }
    }
}

/// Another host: blob storage a registry redirects to. It records every request (its path and
/// `Authorization`, if any) and serves the layer under `/good/`, other bytes under `/bad/`, and
/// a plugin's image manifest at `/manifest`.
struct Storage {
    layer: Vec<u8>,
    manifest: Vec<u8>,
    seen: Mutex<Vec<(String, Option<String>)>>,
}

impl Storage {
    fn new() -> Self {
        let fake = fake();
        Storage {
            manifest: fake.manifest("good"),
            layer: fake.layer,
            seen: Mutex::default(),
        }
    }

    fn seen(&self) -> Vec<(String, Option<String>)> {
        self.seen.lock().unwrap().clone()
    }
}

impl Answer for Storage {
    async fn answer(&self, req: Request<Incoming>) -> Option<Response<Body>> {
        let path = req.uri().path().to_string();
        let authorization = req
            .headers()
            .get("Authorization")
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        self.seen
            .lock()
            .unwrap()
            .push((path.clone(), authorization));
        if path == "/manifest" {
            return reply(StatusCode::OK, OCI_MANIFEST, self.manifest.clone());
        }
        let mut layer = self.layer.clone();
        if path.starts_with("/bad/") {
            layer[0] ^= 0xff;
        }
        reply(StatusCode::OK, "application/octet-stream", layer)
    }
}

/// Serves `answer` on a loopback port; its `host:port`.
async fn serve<A: Answer>(answer: Arc<A>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let answer = answer.clone();
                    async move {
                        Ok::<_, Infallible>(answer.answer(req).await.unwrap_or_else(|| {
                            Response::builder()
                                .status(StatusCode::NOT_FOUND)
                                .body(full(Vec::new()))
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

fn options(timeout: Duration) -> Options {
    Options {
        plain_http: PlainHttp::Loopback,
        timeout,
        ..Options::default()
    }
}

/// The options of a client with the login the fakes that want one take, for `addr` only.
fn logged_in(addr: &str) -> Options {
    let config = serde_json::json!({"auths": {addr: {"username": USER, "password": PASSWORD}}});
    Options {
        credentials: Credentials::from_json(config.to_string().as_bytes(), "test").unwrap(),
        ..options(Duration::from_secs(5))
    }
}

async fn pull_with(
    addr: &str,
    repo: &str,
    options: Options,
) -> Result<informant_oci::Artifact, Error> {
    let registry = Registry::new(options).unwrap();
    let reference: Reference = format!("{addr}/{repo}:v1").parse().unwrap();
    // Bounded here too: a pull that hung past its own timeout would fail the test, not stall it.
    tokio::time::timeout(Duration::from_secs(60), registry.pull(&reference))
        .await
        .expect("the pull ended by itself")
}

async fn pull(addr: &str, repo: &str, timeout: Duration) -> Result<informant_oci::Artifact, Error> {
    pull_with(addr, repo, options(timeout)).await
}

fn fake() -> Fake {
    Fake {
        layer: b"\0asm\x0d\0\x01\0component bytes".to_vec(),
        config: serde_json::to_vec(
            &serde_json::json!({"architecture": "wasm", "os": "wasip2", "layerDigests": []}),
        )
        .unwrap(),
        login: None,
        elsewhere: None,
        sent: Arc::default(),
        layer_gets: Arc::default(),
    }
}

/// A registry that wants the login and sends some answers to `storage`, and `storage`:
/// their addresses.
async fn registry_and_storage(storage: &Arc<Storage>) -> String {
    let elsewhere = serve(storage.clone()).await;
    serve(Arc::new(Fake {
        login: Some(BASIC),
        elsewhere: Some(elsewhere),
        ..fake()
    }))
    .await
}

/// The error and its sources, as one text.
fn chain(e: &Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text += &format!(": {s}");
        source = s.source();
    }
    text
}

#[tokio::test]
async fn the_fake_registry_serves_a_good_plugin() {
    let addr = serve(Arc::new(fake())).await;
    let artifact = pull(&addr, "good", Duration::from_secs(5)).await.unwrap();
    assert_eq!(artifact.wasm, fake().layer);
    assert!(artifact.pinned.starts_with(&format!("{addr}/good@sha256:")));
}

#[tokio::test]
async fn a_registry_that_never_answers_times_out() {
    let addr = serve(Arc::new(fake())).await;
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
    let addr = serve(Arc::new(fake())).await;
    let e = pull(&addr, "mismatch", Duration::from_secs(5))
        .await
        .unwrap_err();
    let text = chain(&e);
    assert!(
        text.contains("reading its wasm layer") && text.to_lowercase().contains("digest"),
        "{text}"
    );
}

#[tokio::test]
async fn a_tag_that_is_an_image_index_is_not_a_plugin() {
    let addr = serve(Arc::new(fake())).await;
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
    let addr = serve(Arc::new(fake())).await;
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

/// A 300 MB manifest, with a `Content-Length` and without one (chunked): the pull fails with
/// the size error naming the limit, having read no more than the limit and what the connection
/// buffers, not the whole. What the registry handed to the connection bounds what the client
/// can have read.
#[tokio::test]
async fn a_manifest_of_hundreds_of_mb_is_not_read_whole() {
    for repo in ["huge-length", "huge-chunked"] {
        let fake = Arc::new(fake());
        let addr = serve(fake.clone()).await;
        let e = pull(&addr, repo, Duration::from_secs(5)).await.unwrap_err();
        let sent = fake.sent.load(Ordering::SeqCst);
        assert!(
            matches!(
                e,
                Error::TooLarge {
                    what: "image manifest",
                    limit,
                    ..
                } if limit == MAX_MANIFEST_BYTES as u64
            ),
            "{repo}: {e}"
        );
        assert!(
            e.to_string()
                .contains(&format!("over the limit of {MAX_MANIFEST_BYTES}")),
            "{repo}: {e}"
        );
        assert!(
            sent < 32 << 20,
            "{repo}: the registry sent {sent} bytes of {HUGE} before the pull gave up"
        );
    }
}

/// Registries send blob downloads to storage elsewhere (S3, a CDN): followed, with the login
/// left behind (the storage host never sees it), and the layer still checked against its digest.
#[tokio::test]
async fn a_blob_redirected_to_another_host_is_verified_and_gets_no_login() {
    let storage = Arc::new(Storage::new());
    let addr = registry_and_storage(&storage).await;
    let artifact = pull_with(&addr, "redirect-blob", logged_in(&addr))
        .await
        .unwrap();
    assert_eq!(artifact.wasm, fake().layer);
    let seen = storage.seen();
    assert!(
        seen.iter().any(|(path, _)| path.starts_with("/good/")),
        "{seen:?}"
    );
    assert!(seen.iter().all(|(_, auth)| auth.is_none()), "{seen:?}");

    let storage = Arc::new(Storage::new());
    let addr = registry_and_storage(&storage).await;
    let e = pull_with(&addr, "redirect-tampered", logged_in(&addr))
        .await
        .unwrap_err();
    let text = chain(&e);
    assert!(
        text.contains("reading its wasm layer") && text.to_lowercase().contains("digest"),
        "{text}"
    );
    let seen = storage.seen();
    assert!(
        seen.iter().any(|(path, _)| path.starts_with("/bad/")),
        "{seen:?}"
    );
    assert!(seen.iter().all(|(_, auth)| auth.is_none()), "{seen:?}");
}

/// A manifest is read from the registry itself: a tag's manifest decides what is pulled, so a
/// redirect to another host is refused, and that host is never asked (nor sent the login).
#[tokio::test]
async fn a_manifest_redirected_to_another_host_is_refused() {
    let storage = Arc::new(Storage::new());
    let addr = registry_and_storage(&storage).await;
    let e = pull_with(&addr, "redirect-manifest", logged_in(&addr))
        .await
        .unwrap_err();
    let text = chain(&e);
    assert!(
        text.contains("reading its manifest") && text.contains("redirect"),
        "{text}"
    );
    assert_eq!(storage.seen(), Vec::new());
}

/// A layer descriptor's `urls` would have the client fetch the layer from any host the
/// manifest names: the layer is read from the registry only.
#[tokio::test]
async fn a_layers_foreign_urls_are_not_followed() {
    let storage = Arc::new(Storage::new());
    let addr = registry_and_storage(&storage).await;
    let e = pull_with(&addr, "foreign-urls", logged_in(&addr))
        .await
        .unwrap_err();
    assert!(
        chain(&e).contains("reading its wasm layer"),
        "{}",
        chain(&e)
    );
    assert_eq!(storage.seen(), Vec::new());
}

/// A config or a layer of a media type neither the CNCF wasm layout nor the legacy one uses.
#[tokio::test]
async fn media_types_of_no_wasm_layout_are_refused() {
    let addr = serve(Arc::new(fake())).await;
    for (repo, kind) in [
        ("odd-config", "application/vnd.oci.image.config.v1+json"),
        ("odd-layer", "application/vnd.oci.image.layer.v1.tar+gzip"),
    ] {
        let e = pull(&addr, repo, Duration::from_secs(5)).await.unwrap_err();
        assert!(
            matches!(e, Error::Layout { .. }) && e.to_string().contains(&format!("`{kind}`")),
            "{repo}: {e}"
        );
    }
    // The legacy layout's config and layer are still read.
    let artifact = pull(&addr, "legacy", Duration::from_secs(5)).await.unwrap();
    assert!(artifact.legacy);
    assert_eq!(artifact.wasm, fake().layer);
}

/// Layers kept by digest: a second pull of the same artifact asks for no layer; a kept file
/// changed on disk, or a link planted in its place, is not used but pulled again and replaced.
#[tokio::test]
async fn a_kept_layer_is_used_only_while_it_is_what_its_digest_says() {
    let fake = Arc::new(fake());
    let addr = serve(fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let cached = || Options {
        cache: Some(informant_oci::cache::BlobCache::new(
            dir.path().to_path_buf(),
            1 << 20,
        )),
        ..options(Duration::from_secs(5))
    };
    let gets = || fake.layer_gets.load(Ordering::SeqCst);
    let file = dir.path().join(digest(&fake.layer).replace(':', "-"));

    let first = pull_with(&addr, "good", cached()).await.unwrap();
    assert_eq!((first.wasm.as_slice(), gets()), (fake.layer.as_slice(), 1));
    assert_eq!(std::fs::read(&file).unwrap(), fake.layer);
    let again = pull_with(&addr, "good", cached()).await.unwrap();
    assert_eq!(
        (again.wasm.as_slice(), gets()),
        (fake.layer.as_slice(), 1),
        "read from the cache"
    );

    // Changed on disk: not used, pulled again, replaced.
    std::fs::write(&file, b"\0asm planted").unwrap();
    let healed = pull_with(&addr, "good", cached()).await.unwrap();
    assert_eq!((healed.wasm.as_slice(), gets()), (fake.layer.as_slice(), 2));
    assert_eq!(std::fs::read(&file).unwrap(), fake.layer);

    // A link in its place, even to the right bytes: not followed.
    let elsewhere = dir.path().join("elsewhere");
    std::fs::write(&elsewhere, &fake.layer).unwrap();
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
    pull_with(&addr, "good", cached()).await.unwrap();
    assert_eq!(gets(), 3);
    assert!(!std::fs::symlink_metadata(&file).unwrap().is_symlink());

    // Without a cache, every pull asks.
    pull(&addr, "good", Duration::from_secs(5)).await.unwrap();
    assert_eq!(gets(), 4);
}
