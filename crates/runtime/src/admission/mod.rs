//! Admission webhooks answered by plugins: an HTTPS listener of its own that takes
//! AdmissionReview v1 requests from the API server and answers each from one plugin hook.
//!
//! It sits on top of the plugin layers and only reads them: the running plugin versions with
//! `[[admit]]` tables through [`PluginHost::admitter`], each holding its hooks, its tenant's
//! grant and a pool of instances ([`crate::plugin::exec::admit`]).
//!
//! Contract:
//! - One path per hook: `POST /admit/PLUGIN/HOOK` for the operator's plugins,
//!   `POST /admit/TENANT/PLUGIN/HOOK` for a tenant's. A path naming no running plugin or hook
//!   answers 404, and the API server applies the webhook configuration's failure policy (the
//!   hook's own, as [`webhooks`] writes it).
//! - A request the hook is not for (another kind or operation) or outside its tenant's grant is
//!   allowed without asking the plugin: a tenant's plugin never sees, and never denies, a
//!   request in another tenant's namespace.
//! - The plugin answers within the hook's `timeout-ms`, waiting for its caches to sync and for
//!   an instance included. No usable answer (a trap, an error, a timeout, a full pool, a patch
//!   from a validating hook, a patch that does not apply or changes the object's apiVersion,
//!   kind, name or namespace) applies the hook's failure policy: `fail` denies with 500 and
//!   says why, `ignore` allows with a warning that says why.
//! - Bodies are capped at [`MAX_REVIEW_BYTES`]; a body that is not an AdmissionReview v1
//!   request (nested too deep included) answers 400.
//! - Each request is counted per hook on `/metrics`, logged in a tracing span, and with traces
//!   on exported as an `admission` span ([`crate::telemetry::AdmissionSpan`]).
//!
//! - [`answer`]: one request to one hook, failure policy included.
//! - [`certs`]: certificates the host makes, rotates and shares through a Secret.
//! - [`review`]: AdmissionReview v1 to and from the contract's records.
//! - [`webhooks`]: the Validating- and MutatingWebhookConfigurations that send requests here.

pub(crate) mod answer;
pub mod certs;
pub(crate) mod review;
pub mod webhooks;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::post;
use kube::core::admission::AdmissionResponse;
use tokio::sync::watch;
use tracing::Instrument;

use crate::plugin::id::PluginId;
use crate::plugin::load::loader::PluginHost;
use crate::serve::Served;
use crate::tls::{self, ServerTls};

/// The largest AdmissionReview body accepted: an object and its old version, each up to the
/// API server's own request limit (3 MiB), with room to spare.
pub(crate) const MAX_REVIEW_BYTES: usize = 16 << 20;

/// Errors starting the webhook server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The listen address could not be bound.
    #[error("admission server: cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// HTTPS could not be set up.
    #[error("admission server: {0}")]
    Tls(#[from] tls::TlsError),
    /// The `--admission-record` file could not be opened.
    #[error("admission server: cannot record to `{path}`: {source}")]
    Record {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The managed certificates could not be set up.
    #[error(transparent)]
    Certs(#[from] certs::CertError),
    /// Admission webhooks are HTTPS only: the API server calls nothing else.
    #[error(
        "admission server: the API server calls webhooks over HTTPS only; give a certificate or use a self-signed one"
    )]
    Plain,
}

/// What `run` and `dev` start for admission.
#[derive(Debug, Clone)]
pub struct AdmissionOptions {
    /// Where the webhook server listens.
    pub addr: SocketAddr,
    /// Its certificate: mounted files (reloaded), or one made at start.
    pub tls: ServerTls,
    /// When set, the host keeps the webhook configurations of this name pointing at itself.
    pub register: Option<(String, webhooks::Endpoint)>,
    /// When set, certificates the host makes, rotates and shares with its other replicas
    /// through this Secret (`tls` is not used).
    pub cert_secret: Option<CertSecret>,
    /// When set, every AdmissionReview request that reaches a hook is appended to this file,
    /// one JSON object a line, for `informant replay --reviews` (`--admission-record`).
    pub record: Option<std::path::PathBuf>,
}

/// The Secret managed certificates live in.
#[derive(Debug, Clone)]
pub struct CertSecret {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Lifetimes, names and how often it is read.
    pub options: certs::CertOptions,
}

/// The running webhook server.
pub(crate) struct AdmissionServer {
    served: Served,
    /// What clients trust it by; changes with a managed CA's rollover.
    ca_bundle: watch::Receiver<Vec<u8>>,
    /// Keeps a fixed bundle's channel open.
    fixed_bundle: Option<watch::Sender<Vec<u8>>>,
    /// Keeps managed certificates in step with their Secret.
    managed: Option<Arc<certs::ManagedCerts>>,
}

impl AdmissionServer {
    /// Binds `addr` (port 0 picks a free one) and answers admission requests from `host`'s
    /// plugins over `tls` (never plain HTTP).
    pub(crate) async fn start(
        addr: SocketAddr,
        tls: &ServerTls,
        host: Arc<PluginHost>,
        record: Option<PathBuf>,
    ) -> Result<AdmissionServer, Error> {
        if *tls == ServerTls::Plain {
            return Err(Error::Plain);
        }
        let names = (!addr.ip().is_unspecified())
            .then(|| addr.ip().to_string())
            .into_iter()
            .collect::<Vec<_>>();
        let tls = tls::setup(tls, &names)?.ok_or(Error::Plain)?;
        let fixed = watch::channel(tls.ca_bundle()).0;
        let mut server =
            AdmissionServer::serve(addr, tls, fixed.subscribe(), (host, record)).await?;
        server.fixed_bundle = Some(fixed);
        Ok(server)
    }

    /// As [`AdmissionServer::start`], serving the certificates `certs` manages.
    pub(crate) async fn start_managed(
        addr: SocketAddr,
        certs: Arc<certs::ManagedCerts>,
        host: Arc<PluginHost>,
        record: Option<PathBuf>,
    ) -> Result<AdmissionServer, Error> {
        let bundle = certs.bundle();
        let tls = tls::serving(certs.resolver(), bundle.borrow().clone())?;
        let mut server = AdmissionServer::serve(addr, tls, bundle, (host, record)).await?;
        server.managed = Some(certs);
        Ok(server)
    }

    async fn serve(
        addr: SocketAddr,
        tls: tls::Tls,
        ca_bundle: watch::Receiver<Vec<u8>>,
        (host, record): (Arc<PluginHost>, Option<PathBuf>),
    ) -> Result<AdmissionServer, Error> {
        let app = Router::new()
            .route("/admit/{*path}", post(admit))
            .fallback(|| async { (StatusCode::NOT_FOUND, "no such hook\n") })
            .layer(DefaultBodyLimit::max(MAX_REVIEW_BYTES))
            .with_state(Routes {
                host,
                record: match record {
                    Some(path) => Some(Arc::new(Recording::open(&path).await?)),
                    None => None,
                },
            });
        let served = Served::bind(addr, app, Some(tls), "admission")
            .await
            .map_err(|source| Error::Bind { addr, source })?;
        tracing::info!(addr = %served.addr(), "admission server: POST /admit/[TENANT/]PLUGIN/HOOK");
        Ok(AdmissionServer {
            served,
            ca_bundle,
            fixed_bundle: None,
            managed: None,
        })
    }

    /// The address it listens on.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.served.addr()
    }

    /// The PEM certificates a client verifies this server with (a webhook's `caBundle`), as
    /// they change.
    pub(crate) fn ca_bundle(&self) -> watch::Receiver<Vec<u8>> {
        self.ca_bundle.clone()
    }

    /// The certificates it manages, when it does.
    pub(crate) fn certs(&self) -> Option<&Arc<certs::ManagedCerts>> {
        self.managed.as_ref()
    }

    /// Stops accepting connections and waits (a bounded time) for requests in flight.
    pub(crate) async fn shutdown(self) {
        self.served.shutdown().await;
    }
}

/// Which plugin and hook a request path names: `/admit/PLUGIN/HOOK` or
/// `/admit/TENANT/PLUGIN/HOOK`, each segment percent-decoded on its own, so an encoded `/`
/// stays inside its segment (and names nothing) rather than splitting one.
pub fn route(path: &str) -> Option<(PluginId, String)> {
    let rest = path.strip_prefix("/admit/")?;
    let decoded: Vec<String> = rest
        .split('/')
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .ok()
                .map(|s| s.into_owned())
        })
        .collect::<Option<_>>()?;
    let fits = |s: &String| {
        !s.is_empty()
            && s != "."
            && s != ".."
            && !s.contains(['/', '\\'])
            && !s.contains(char::is_control)
    };
    if !decoded.iter().all(fits) {
        return None;
    }
    let (tenant, name, hook) = match &decoded[..] {
        [name, hook] => (String::new(), name.clone(), hook.clone()),
        [tenant, name, hook] => (tenant.clone(), name.clone(), hook.clone()),
        _ => return None,
    };
    Some((PluginId { tenant, name }, hook))
}

/// What the routes share: the plugins, and where requests are recorded.
#[derive(Clone)]
struct Routes {
    host: Arc<PluginHost>,
    record: Option<Arc<Recording>>,
}

/// The file `--admission-record` appends requests to: one AdmissionReview a line, written whole
/// under a lock so lines never interleave.
struct Recording(tokio::sync::Mutex<tokio::fs::File>);

impl Recording {
    /// Opens `path` to append to, creating it readable by this user only (it holds objects).
    async fn open(path: &std::path::Path) -> Result<Recording, Error> {
        let file = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .await
            .map_err(|source| Error::Record {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(Recording(tokio::sync::Mutex::new(file)))
    }

    /// Appends `req` as a review; a failure is logged, never the request's.
    async fn append(
        &self,
        req: &kube::core::admission::AdmissionRequest<kube::core::DynamicObject>,
    ) {
        use tokio::io::AsyncWriteExt;
        let review = serde_json::json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": req,
        });
        let mut line = review.to_string();
        line.push('\n');
        if let Err(e) = self.0.lock().await.write_all(line.as_bytes()).await {
            tracing::warn!(error = %e, "admission: cannot record a request");
        }
    }
}

async fn admit(State(routes): State<Routes>, uri: Uri, body: Bytes) -> Response {
    let host = &routes.host;
    let start = Instant::now();
    let Some((id, hook_name)) = route(uri.path()) else {
        return (StatusCode::NOT_FOUND, "no such hook\n").into_response();
    };
    let Some(admitter) = host.admitter(&id) else {
        return (
            StatusCode::NOT_FOUND,
            format!("no plugin `{id}` with hooks runs here\n"),
        )
            .into_response();
    };
    let hook_name = hook_name.as_str();
    let Some(hook) = admitter.hook(hook_name) else {
        return (
            StatusCode::NOT_FOUND,
            format!("plugin `{id}` has no hook `{hook_name}`\n"),
        )
            .into_response();
    };
    let req = match review::decode(&body) {
        Ok(req) => req,
        Err(e) => {
            let invalid = AdmissionResponse::invalid(e.to_string()).into_review();
            return (StatusCode::BAD_REQUEST, Json(invalid)).into_response();
        }
    };
    if let Some(r) = &routes.record {
        r.append(&req).await;
    }
    let operation = review::operation(&req.operation);
    let span = tracing::info_span!(
        "admission",
        plugin = %id.name,
        tenant = %id.tenant,
        hook = hook_name,
        operation = operation.as_kubernetes(),
        uid = %req.uid,
    );
    let kind = crate::plugin::bindings::WitResource {
        group: req.kind.group.clone(),
        version: req.kind.version.clone(),
        kind: req.kind.kind.clone(),
    };
    let traced = crate::telemetry::AdmissionSpan::start(
        (&id.name, &id.tenant, hook_name),
        operation.as_kubernetes(),
        &kind,
        &req.uid,
        start,
    );
    let answered = answer::answer(&admitter, hook, &req)
        .instrument(span.clone())
        .await;
    traced.end(
        answered.decision.as_str(),
        answered.failure.as_ref().map(|(r, _)| *r),
    );
    if let Some((reason, why)) = &answered.failure {
        span.in_scope(|| {
            tracing::warn!(
                reason,
                policy = hook.table.failure_policy.as_kubernetes(),
                "admission hook failed: {why}"
            )
        });
    }
    hook.stats.count(
        operation,
        answered.decision,
        answered.failure.as_ref().map(|(r, _)| *r),
    );
    hook.stats.duration.observe(start.elapsed());
    Json(answered.response.into_review()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_names_a_hook_only_in_its_exact_segments() {
        let at = |p: &str| route(p).map(|(id, hook)| (id.tenant, id.name, hook));
        let owned = |t: &str, n: &str, h: &str| Some((t.into(), n.into(), h.into()));
        assert_eq!(at("/admit/deny/images"), owned("", "deny", "images"));
        assert_eq!(
            at("/admit/team-a/deny/images"),
            owned("team-a", "deny", "images")
        );
        assert_eq!(
            at("/admit/team%2Da/deny/images"),
            owned("team-a", "deny", "images")
        );
        for odd in [
            "/admit/deny%2Fimages",
            "/admit/team-a%2Fdeny/images",
            "/admit/../deny/images",
            "/admit/%2E%2E/deny/images",
            "/admit/deny//images",
            "/admit/deny/images/",
            "/admit/a/b/c/d",
            "/admit/deny",
            "/admit/deny/%FF",
            "/admit/deny/im%0Aages",
            "/admit/deny/images%5C",
            "/other/deny/images",
        ] {
            assert_eq!(at(odd), None, "{odd}");
        }
    }

    #[test]
    fn a_hooks_path_is_what_route_reads_back() {
        for (tenant, name, hook) in [
            ("", "deny", "images"),
            ("team-a", "p.v2", "h_1"),
            ("t", "ü", "a b"),
        ] {
            let id = PluginId {
                tenant: tenant.into(),
                name: name.into(),
            };
            let path = webhooks::path(&id, hook);
            assert_eq!(route(&path), Some((id, hook.to_string())), "{path}");
        }
    }
}
