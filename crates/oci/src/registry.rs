//! Pushing and pulling plugins over the OCI distribution protocol.
//!
//! A pull resolves the reference to the digest of its image manifest and pins it: what is
//! read afterwards is that manifest's one layer, verified against its digest, so a tag moved
//! halfway through cannot mix two artifacts. Sizes are checked against the limits before a
//! body is read (from the descriptors) and while it is read (a registry may lie).
//!
//! The image manifest comes from the registry itself, read with a bound (oci-client reads a
//! manifest whole): a redirect elsewhere is refused. The layer may be redirected (registries send
//! blobs to S3 or a CDN): the login stays behind (reqwest drops `Authorization` when the host, port
//! or scheme changes) and the bytes are checked against the digest. A layer's `urls` are ignored.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use oci_client::client::{
    Certificate, CertificateEncoding, ClientConfig, ClientProtocol, Config, ImageLayer,
};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::{
    IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest,
    WASM_CONFIG_MEDIA_TYPE as LEGACY_WASM_CONFIG,
};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};

use crate::credentials::Credentials;
use crate::layout::{self, LEGACY_WASM_LAYER, WASM_CONFIG, WASM_LAYER, WasmConfig};

/// The largest image manifest read: distribution's own limit.
pub const MAX_MANIFEST_BYTES: usize = 4 << 20;

/// Why a push or a pull failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The CA bundle could not be read.
    #[error("registry CA bundle `{path}`: {source}")]
    Ca {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP client could not be made (a CA bundle that is not PEM, say).
    #[error("registry client: {0}")]
    Client(#[source] OciDistributionError),
    /// The registry refused or failed a request.
    #[error("`{reference}`: {what}: {source}")]
    Registry {
        /// The reference.
        reference: String,
        /// What was being done.
        what: &'static str,
        /// What the registry (or the connection) said.
        #[source]
        source: OciDistributionError,
    },
    /// Something is larger than its limit.
    #[error("`{reference}`: the {what} is {size} bytes, over the limit of {limit}")]
    TooLarge {
        /// The reference.
        reference: String,
        /// What is too large.
        what: &'static str,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The artifact is not a plugin in a layout this host reads.
    #[error("`{reference}`: not a wasm plugin artifact: {reason}")]
    Layout {
        /// The reference.
        reference: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A plugin name that cannot name files in a plugins directory.
    #[error("plugin name {name:?} {reason}")]
    Name {
        /// The name.
        name: String,
        /// Why it cannot be one.
        reason: &'static str,
    },
}

/// When plain HTTP (no TLS) is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PlainHttp {
    /// Never: HTTPS only.
    #[default]
    Never,
    /// For a registry on a loopback address (`127.0.0.0/8`, `::1`, `localhost`) only.
    Loopback,
    /// For every registry: only when explicitly allowed.
    Anywhere,
}

/// How a [`Registry`] connects, logs in and what it accepts.
#[derive(Debug, Clone)]
pub struct Options {
    /// The logins, by registry.
    pub credentials: Credentials,
    /// A PEM bundle of CAs trusted besides the system's.
    pub ca_file: Option<PathBuf>,
    /// When plain HTTP is used.
    pub plain_http: PlainHttp,
    /// The largest component (the wasm layer) accepted.
    pub max_wasm_bytes: u64,
    /// The largest plugin manifest (`NAME.toml`) accepted.
    pub max_manifest_bytes: u64,
    /// How long connecting may take, and how long a read may wait.
    pub timeout: Duration,
    /// Where a registry's artifacts are read from before the registry itself.
    pub mirrors: crate::mirror::Mirrors,
    /// Layers kept by digest: read from here when kept, kept here when pulled.
    pub cache: Option<crate::cache::BlobCache>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            credentials: Credentials::none(),
            ca_file: None,
            plain_http: PlainHttp::Never,
            max_wasm_bytes: 64 << 20,
            max_manifest_bytes: 1 << 20,
            timeout: Duration::from_secs(30),
            mirrors: crate::mirror::Mirrors::default(),
            cache: None,
        }
    }
}

/// A plugin pulled from a registry.
#[derive(Debug, Clone)]
pub struct Artifact {
    /// The reference pinned to what was pulled: `REGISTRY/REPO@sha256:…`.
    pub pinned: String,
    /// The digest of its image manifest.
    pub digest: String,
    /// The plugin's name, from the title annotation, if it has one (checked).
    pub name: Option<String>,
    /// The component.
    pub wasm: Vec<u8>,
    /// Its manifest (`NAME.toml`), if the artifact carries one.
    pub manifest: Option<String>,
    /// The layer's media type was the legacy one.
    pub legacy: bool,
}

/// What a push stored.
#[derive(Debug, Clone)]
pub struct Pushed {
    /// The reference pinned to it: `REGISTRY/REPO@sha256:…`.
    pub pinned: String,
    /// The digest of its image manifest.
    pub digest: String,
}

/// Pushes and pulls plugins.
#[derive(Debug, Clone)]
pub struct Registry {
    options: Options,
    extra_roots: Vec<Certificate>,
}

impl Registry {
    /// A registry client with `options`; reads the CA bundle now.
    pub fn new(options: Options) -> Result<Self, Error> {
        // The process's rustls provider: ring, as kube's. Already set is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let extra_roots = match &options.ca_file {
            Some(path) => vec![Certificate {
                encoding: CertificateEncoding::Pem,
                data: std::fs::read(path).map_err(|source| Error::Ca {
                    path: path.clone(),
                    source,
                })?,
            }],
            None => Vec::new(),
        };
        Ok(Registry {
            options,
            extra_roots,
        })
    }

    /// How it connects and what it accepts.
    pub(crate) fn options(&self) -> &Options {
        &self.options
    }

    /// The client for `reference`'s registry: plain HTTP only where allowed.
    pub(crate) fn client(&self, reference: &Reference) -> Result<Client, Error> {
        let config = ClientConfig {
            protocol: if self.plain(reference) {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            extra_root_certificates: self.extra_roots.clone(),
            connect_timeout: Some(self.options.timeout),
            read_timeout: Some(self.options.timeout),
            user_agent: concat!("informant/", env!("CARGO_PKG_VERSION")),
            // One platform: a plugin is one artifact, never an index.
            platform_resolver: None,
            ..ClientConfig::default()
        };
        Client::try_from(config).map_err(Error::Client)
    }

    /// Whether `reference`'s registry is reached over plain HTTP.
    fn plain(&self, reference: &Reference) -> bool {
        match self.options.plain_http {
            PlainHttp::Never => false,
            PlainHttp::Loopback => is_loopback(reference.resolve_registry()),
            PlainHttp::Anywhere => true,
        }
    }

    /// Reads `reference`'s image manifest, never more than [`MAX_MANIFEST_BYTES`] of it, from the
    /// registry itself; with the digest the registry says it has, if it says one. oci-client
    /// reads a manifest whole before anything can look at its size, so this one request is made
    /// here: the login is oci-client's (its token exchange), the HTTP client is configured as its
    /// (CAs, timeouts, agent), and a redirect off the registry's origin is an error.
    pub(crate) async fn read_manifest(
        &self,
        client: &Client,
        reference: &Reference,
        auth: &RegistryAuth,
    ) -> Result<(Vec<u8>, Option<String>), Error> {
        let failed = |source| Error::Registry {
            reference: reference.whole(),
            what: "reading its manifest",
            source,
        };
        let token = client
            .auth(reference, auth, RegistryOperation::Pull)
            .await
            .map_err(failed)?;
        let registry = reference.resolve_registry();
        let url = format!(
            "{scheme}://{registry}/v2/{repository}/manifests/{name}{ns}",
            scheme = if self.plain(reference) {
                "http"
            } else {
                "https"
            },
            repository = reference.repository(),
            name = reference.digest().or(reference.tag()).unwrap_or("latest"),
            ns = reference
                .namespace()
                .map(|ns| format!("?ns={ns}"))
                .unwrap_or_default(),
        );
        let redirects = reqwest::redirect::Policy::custom(|attempt| {
            let origin = |url: &reqwest::Url| {
                (
                    url.scheme().to_string(),
                    url.host_str().map(str::to_string),
                    url.port_or_known_default(),
                )
            };
            if attempt.previous().len() > 10 {
                attempt.error("too many redirects")
            } else if origin(attempt.url()) != origin(&attempt.previous()[0]) {
                let error = format!(
                    "a redirect to {}: a manifest is read from the registry itself",
                    attempt.url()
                );
                attempt.error(error)
            } else {
                attempt.follow()
            }
        });
        let roots = self
            .extra_roots
            .iter()
            .map(reqwest::Certificate::try_from)
            .collect::<Result<Vec<_>, _>>()
            .map_err(Error::Client)?;
        let http = reqwest::Client::builder()
            .tls_certs_merge(roots)
            .connect_timeout(self.options.timeout)
            .read_timeout(self.options.timeout)
            .user_agent(concat!("informant/", env!("CARGO_PKG_VERSION")))
            .redirect(redirects)
            .build()
            .map_err(|e| Error::Client(e.into()))?;
        let request = http.get(&url).header(
            http::header::ACCEPT,
            format!("{OCI_IMAGE_MEDIA_TYPE}, {IMAGE_MANIFEST_MEDIA_TYPE}"),
        );
        let request = match (token, auth) {
            (Some(token), _) => request.bearer_auth(token),
            (None, RegistryAuth::Basic(user, password)) => request.basic_auth(user, Some(password)),
            (None, _) => request,
        };
        let mut response = request.send().await.map_err(|e| failed(e.into()))?;
        let too_large = |size: u64| Error::TooLarge {
            reference: reference.whole(),
            what: "image manifest",
            size,
            limit: MAX_MANIFEST_BYTES as u64,
        };
        let status = response.status();
        if status != http::StatusCode::OK {
            // What an error says, bounded too: its first KiB.
            let mut message = Vec::new();
            while message.len() < 1024
                && let Ok(Some(chunk)) = response.chunk().await
            {
                message.extend_from_slice(&chunk);
            }
            message.truncate(1024);
            return Err(failed(match status {
                http::StatusCode::UNAUTHORIZED => OciDistributionError::UnauthorizedError { url },
                _ => OciDistributionError::ServerError {
                    code: status.as_u16(),
                    url,
                    message: String::from_utf8_lossy(&message).into_owned(),
                },
            }));
        }
        // The length it declares first; then what is read, as it is read (it may lie, or
        // declare none).
        if let Some(size) = response.content_length()
            && size > MAX_MANIFEST_BYTES as u64
        {
            return Err(too_large(size));
        }
        let said = response
            .headers()
            .get("Docker-Content-Digest")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| failed(e.into()))? {
            if body.len() + chunk.len() > MAX_MANIFEST_BYTES {
                return Err(too_large((body.len() + chunk.len()) as u64));
            }
            body.extend_from_slice(&chunk);
        }
        Ok((body, said))
    }

    /// The digest `reference` stands for now (a tag's current one), read from its mirrors
    /// first.
    pub async fn resolve(&self, reference: &Reference) -> Result<String, Error> {
        let candidates = self.options.mirrors.candidates(reference);
        crate::mirror::first_ok(candidates, |at| async move { self.resolve_at(&at).await }).await
    }

    async fn resolve_at(&self, reference: &Reference) -> Result<String, Error> {
        let auth = self.auth(reference);
        self.client(reference)?
            .fetch_manifest_digest(reference, &auth)
            .await
            .map_err(registry(reference, "resolving it"))
    }

    /// Pulls the plugin `reference` names, pinned to the digest it resolves to, from its mirrors
    /// first; pinned under its own registry's name wherever it was read.
    pub async fn pull(&self, reference: &Reference) -> Result<Artifact, Error> {
        let candidates = self.options.mirrors.candidates(reference);
        let mut artifact =
            crate::mirror::first_ok(candidates, |at| async move { self.pull_at(&at).await })
                .await?;
        artifact.pinned = Reference::with_digest(
            reference.resolve_registry().to_string(),
            reference.repository().to_string(),
            artifact.digest.clone(),
        )
        .whole();
        Ok(artifact)
    }

    async fn pull_at(&self, reference: &Reference) -> Result<Artifact, Error> {
        let client = self.client(reference)?;
        let auth = self.auth(reference);
        let shown = reference.whole();
        let (body, said) = self.read_manifest(&client, reference, &auth).await?;
        // The digest of what was read, whatever a header said: the pin must name these bytes.
        let digest = crate::digest::sha256(&body);
        for (expected, who) in [
            (said, "the registry said"),
            (reference.digest().map(str::to_string), "it was asked for"),
        ] {
            if let Some(expected) = expected
                && expected != digest
            {
                return Err(Error::Layout {
                    reference: shown,
                    reason: format!("its manifest's digest is {digest}, {who} {expected}"),
                });
            }
        }
        let manifest: OciImageManifest =
            serde_json::from_slice(&body).map_err(|e| Error::Layout {
                reference: shown.clone(),
                reason: match serde_json::from_slice::<serde_json::Value>(&body) {
                    Ok(v) if v.get("manifests").is_some() => {
                        "it is an image index (a list of manifests), not one plugin".into()
                    }
                    _ => format!("its manifest is not an OCI image manifest: {e}"),
                },
            })?;
        let mut layer = self.wasm_layer(&shown, &manifest)?.clone();
        // The layer is read from the registry (which may redirect it), never from the hosts its
        // descriptor's `urls` name: oci-client would try those, without the login, when the
        // registry does not serve it.
        layer.urls = None;
        let pinned = Reference::with_digest(
            reference.resolve_registry().to_string(),
            reference.repository().to_string(),
            digest.clone(),
        );
        let cache = self.options.cache.as_ref();
        let wasm = match cache.and_then(|c| c.get(&layer.digest)) {
            Some(kept) => kept,
            None => {
                let mut wasm = Limited::new(self.options.max_wasm_bytes);
                client.pull_blob(&pinned, &layer, &mut wasm).await.map_err(
                    |source| match wasm.over {
                        true => Error::TooLarge {
                            reference: shown.clone(),
                            what: "wasm layer",
                            size: wasm.seen,
                            limit: self.options.max_wasm_bytes,
                        },
                        false => Error::Registry {
                            reference: shown.clone(),
                            what: "reading its wasm layer",
                            source,
                        },
                    },
                )?;
                if let Some(cache) = cache {
                    cache.put(&layer.digest, &wasm.bytes);
                }
                wasm.bytes
            }
        };
        let annotations = manifest.annotations.unwrap_or_default();
        let name = annotations.get(layout::TITLE_ANNOTATION).cloned();
        if let Some(name) = &name {
            layout::check_name(name).map_err(|reason| Error::Name {
                name: name.clone(),
                reason,
            })?;
        }
        let text = annotations.get(layout::MANIFEST_ANNOTATION).cloned();
        if let Some(text) = &text
            && text.len() as u64 > self.options.max_manifest_bytes
        {
            return Err(Error::TooLarge {
                reference: shown,
                what: "plugin manifest",
                size: text.len() as u64,
                limit: self.options.max_manifest_bytes,
            });
        }
        Ok(Artifact {
            pinned: pinned.whole(),
            digest,
            name,
            wasm,
            manifest: text,
            legacy: layer.media_type == LEGACY_WASM_LAYER,
        })
    }

    /// The one wasm layer of `manifest`, within the size limit, under a config of a wasm layout.
    fn wasm_layer<'m>(
        &self,
        shown: &str,
        manifest: &'m OciImageManifest,
    ) -> Result<&'m OciDescriptor, Error> {
        let layout = |reason: String| Error::Layout {
            reference: shown.to_string(),
            reason,
        };
        let config = &manifest.config.media_type;
        if config != WASM_CONFIG && config != LEGACY_WASM_CONFIG {
            return Err(layout(format!(
                "its config is `{config}`, not `{WASM_CONFIG}` (or `{LEGACY_WASM_CONFIG}`)"
            )));
        }
        let [layer] = manifest.layers.as_slice() else {
            return Err(layout(format!(
                "it has {} layers, a plugin has exactly one",
                manifest.layers.len()
            )));
        };
        if layer.media_type != WASM_LAYER && layer.media_type != LEGACY_WASM_LAYER {
            return Err(layout(format!(
                "its layer is `{}`, not `{WASM_LAYER}` (or `{LEGACY_WASM_LAYER}`)",
                layer.media_type
            )));
        }
        let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
        if size > self.options.max_wasm_bytes {
            return Err(Error::TooLarge {
                reference: shown.to_string(),
                what: "wasm layer",
                size,
                limit: self.options.max_wasm_bytes,
            });
        }
        Ok(layer)
    }

    /// Pushes the plugin `name` (its component and manifest text) to `reference`, in the CNCF
    /// layout.
    pub async fn push(
        &self,
        reference: &Reference,
        name: &str,
        wasm: Vec<u8>,
        manifest: &str,
    ) -> Result<Pushed, Error> {
        layout::check_name(name).map_err(|reason| Error::Name {
            name: name.to_string(),
            reason,
        })?;
        let shown = reference.whole();
        for (what, size, limit) in [
            ("wasm layer", wasm.len(), self.options.max_wasm_bytes),
            (
                "plugin manifest",
                manifest.len(),
                self.options.max_manifest_bytes,
            ),
        ] {
            if size as u64 > limit {
                return Err(Error::TooLarge {
                    reference: shown,
                    what,
                    size: size as u64,
                    limit,
                });
            }
        }
        let layer = ImageLayer::new(wasm, WASM_LAYER.to_string(), None);
        let config = WasmConfig::component(layer.sha256_digest());
        let config = Config::new(
            serde_json::to_vec(&config).expect("the config serializes"),
            WASM_CONFIG.to_string(),
            None,
        );
        let layers = [layer];
        let mut image =
            OciImageManifest::build(&layers, &config, Some(layout::annotations(name, manifest)));
        image.media_type = Some(OCI_IMAGE_MEDIA_TYPE.to_string());
        let client = self.client(reference)?;
        let auth = self.auth(reference);
        client
            .store_auth_if_needed(reference.resolve_registry(), &auth)
            .await;
        for (data, digest) in [
            (layers[0].data.clone(), &image.layers[0].digest),
            (config.data.clone(), &image.config.digest),
        ] {
            client
                .push_blob(reference, data, digest)
                .await
                .map_err(registry(reference, "pushing"))?;
        }
        // Serialized here, not by oci-client: its canonical form leaves control characters
        // unescaped, and a manifest's newlines in an annotation are then invalid JSON.
        let body = serde_json::to_vec(&image).expect("the manifest serializes");
        let digest = crate::digest::sha256(&body);
        client
            .push_manifest_raw(
                reference,
                body,
                http::HeaderValue::from_static(OCI_IMAGE_MEDIA_TYPE),
            )
            .await
            .map_err(registry(reference, "pushing its manifest"))?;
        let pinned = Reference::with_digest(
            reference.resolve_registry().to_string(),
            reference.repository().to_string(),
            digest.clone(),
        );
        Ok(Pushed {
            pinned: pinned.whole(),
            digest,
        })
    }

    pub(crate) fn auth(&self, reference: &Reference) -> oci_client::secrets::RegistryAuth {
        self.options
            .credentials
            .auth_for(reference.resolve_registry())
    }
}

/// Maps a registry error of `what` on `reference`.
pub(crate) fn registry(
    reference: &Reference,
    what: &'static str,
) -> impl FnOnce(OciDistributionError) -> Error {
    let reference = reference.whole();
    move |source| Error::Registry {
        reference,
        what,
        source,
    }
}

/// Whether a registry's host (`host[:port]`) is a loopback address.
fn is_loopback(registry: &str) -> bool {
    let host = match registry.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => registry.rsplit_once(':').map_or(registry, |(h, _)| h),
    };
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// A sink that takes at most `limit` bytes, and fails the write that would pass it.
pub(crate) struct Limited {
    pub(crate) bytes: Vec<u8>,
    limit: u64,
    pub(crate) seen: u64,
    pub(crate) over: bool,
}

impl Limited {
    pub(crate) fn new(limit: u64) -> Self {
        Limited {
            bytes: Vec::new(),
            limit,
            seen: 0,
            over: false,
        }
    }
}

impl tokio::io::AsyncWrite for Limited {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.seen += buf.len() as u64;
        if self.seen > self.limit {
            self.over = true;
            return std::task::Poll::Ready(Err(std::io::Error::other("over the size limit")));
        }
        self.bytes.extend_from_slice(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_hosts_count_as_loopback() {
        for yes in [
            "127.0.0.1:5000",
            "localhost:5000",
            "[::1]:5000",
            "127.1.2.3",
            "localhost",
        ] {
            assert!(is_loopback(yes), "{yes}");
        }
        for no in [
            "registry.example:5000",
            "localhost.example.com",
            "10.0.0.1:5000",
            "[::2]:5000",
            "127.0.0.1.nip.io:5000",
        ] {
            assert!(!is_loopback(no), "{no}");
        }
    }
}
