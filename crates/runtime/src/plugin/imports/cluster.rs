//! The clients plugins' writes are sent through.
//!
//! Two properties hold for every request such a client sends, whatever built it, because they
//! are layers of the client itself rather than parameters of each call:
//!
//! - **Dry-run** (`--dry-run-writes`): set once for the whole process, every request that is not
//!   a read carries `dryRun=All`, appended to the query of the URI as it leaves; no call can
//!   leave it out, and no name can cut it off (names are validated and percent-encoded, and the
//!   parameter is added after the path is final).
//! - **Impersonation**: a tenant's client sends `Impersonate-User` and `Impersonate-Group` on
//!   every request, replacing any such header a request carried, so the cluster's RBAC judges
//!   each write by the tenant's own rights.
//!
//! Both wrap the host's own client, so they keep its authentication, base URL and TLS.

use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::{HeaderValue, Method, Request, Response, Uri};
use kube::client::Body;
use tower::Service;

use crate::tenancy::Impersonate;

/// Why a client for writes could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The impersonated identity cannot be sent as an HTTP header.
    #[error("impersonated identity `{0}` is not a valid header value")]
    Identity(String),
    /// There is no API server here (`replay` runs without one).
    #[error("there is no cluster to write to here (`replay` runs without one)")]
    NoCluster,
}

/// Where writes go: the host's client, dry-run or not.
#[derive(Clone)]
pub struct Cluster {
    client: kube::Client,
    dry_run: bool,
}

impl Cluster {
    /// Writes through `client`; with `dry_run`, every write the returned clients send is
    /// validated and admitted by the server and never persisted.
    pub fn new(client: kube::Client, dry_run: bool) -> Self {
        let client = if dry_run {
            let ns = client.default_namespace().to_string();
            kube::Client::new(
                Layered {
                    inner: client,
                    dry_run: true,
                    identity: None,
                },
                ns,
            )
        } else {
            client
        };
        Cluster { client, dry_run }
    }

    /// Whether every write is a dry run.
    pub fn dry_run(&self) -> bool {
        self.dry_run
    }

    /// The client writes are sent with: as the host itself (`None`), or as `who`.
    pub fn client_as(&self, who: Option<&Impersonate>) -> Result<kube::Client, ClusterError> {
        let Some(who) = who else {
            return Ok(self.client.clone());
        };
        let value = |s: &str| {
            HeaderValue::from_str(s).map_err(|_| {
                ClusterError::Identity(crate::apimachinery::names::shown(s).to_string())
            })
        };
        let identity = Identity {
            user: value(&who.user)?,
            groups: who
                .groups
                .iter()
                .map(|g| value(g))
                .collect::<Result<_, _>>()?,
        };
        let ns = self.client.default_namespace().to_string();
        Ok(kube::Client::new(
            Layered {
                inner: self.client.clone(),
                dry_run: false,
                identity: Some(identity),
            },
            ns,
        ))
    }
}

/// Who a request is sent as.
#[derive(Clone)]
struct Identity {
    user: HeaderValue,
    groups: Vec<HeaderValue>,
}

/// A client wrapped in what every request through it must carry.
#[derive(Clone)]
struct Layered {
    inner: kube::Client,
    dry_run: bool,
    identity: Option<Identity>,
}

impl Service<Request<Body>> for Layered {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<Response<Body>, kube::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // The inner client buffers and waits for readiness itself, in `send`.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        if self.dry_run && is_write(request.method()) {
            let uri = with_dry_run(request.uri());
            *request.uri_mut() = uri;
        }
        if let Some(who) = &self.identity {
            let headers = request.headers_mut();
            headers.remove("impersonate-user");
            headers.remove("impersonate-group");
            headers.remove("impersonate-uid");
            headers.insert("impersonate-user", who.user.clone());
            for g in &who.groups {
                headers.append("impersonate-group", g.clone());
            }
        }
        let inner = self.inner.clone();
        Box::pin(async move { inner.send(request).await })
    }
}

/// Whether a request can change anything (everything but reads).
fn is_write(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// `uri` with `dryRun=All` added to its query (kept as it is when already there).
fn with_dry_run(uri: &Uri) -> Uri {
    let query = uri.query().unwrap_or_default();
    let has = form_urlencoded::parse(query.as_bytes()).any(|(k, v)| k == "dryRun" && v == "All");
    if has {
        return uri.clone();
    }
    let mut parts = uri.clone().into_parts();
    let path = uri.path();
    let query = if query.is_empty() {
        "dryRun=All".to_string()
    } else {
        format!("{query}&dryRun=All")
    };
    parts.path_and_query = Some(
        format!("{path}?{query}")
            .parse()
            .expect("a valid path and query with a parameter added is valid"),
    );
    Uri::from_parts(parts).expect("the same URI with a longer query")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use parking_lot::Mutex;

    /// Each request's method, URI and impersonation headers, as the "server" saw them.
    type Seen = Arc<Mutex<Vec<(Method, String, Vec<String>)>>>;

    /// A client whose "server" records each request it gets.
    fn recording() -> (kube::Client, Seen) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let service = tower::service_fn(move |req: Request<Body>| {
            let imp = req
                .headers()
                .iter()
                .filter(|(k, _)| k.as_str().starts_with("impersonate-"))
                .map(|(k, v)| format!("{k}={}", v.to_str().unwrap()))
                .collect();
            log.lock()
                .push((req.method().clone(), req.uri().to_string(), imp));
            async move {
                Ok::<_, std::convert::Infallible>(
                    Response::builder()
                        .status(200)
                        .body(Body::from(b"{}".to_vec()))
                        .unwrap(),
                )
            }
        });
        (kube::Client::new(service, "default"), seen)
    }

    fn request(method: Method, uri: &str) -> Request<Vec<u8>> {
        Request::builder()
            .method(method)
            .uri(uri)
            .header("Impersonate-User", "system:admin")
            .body(Vec::new())
            .unwrap()
    }

    #[tokio::test]
    async fn a_dry_run_client_marks_every_write_however_it_was_built() {
        let (client, seen) = recording();
        let cluster = Cluster::new(client, true);
        let who = Impersonate {
            user: "system:serviceaccount:a:hooks".into(),
            groups: vec!["hooks".into(), "g2".into()],
        };
        let tenant = cluster.client_as(Some(&who)).unwrap();
        for c in [cluster.client_as(None).unwrap(), tenant] {
            // Built by hand: no dryRun, and a query of its own.
            for (method, uri) in [
                (Method::DELETE, "/api/v1/namespaces/a/configmaps/x"),
                (
                    Method::PATCH,
                    "/api/v1/namespaces/a/configmaps/x?fieldManager=m",
                ),
                (Method::POST, "/api/v1/namespaces/a/configmaps?dryRun=All"),
                (Method::PUT, "/api/v1/namespaces/a/configmaps/x/status"),
                (Method::GET, "/api/v1/namespaces/a/configmaps/x"),
            ] {
                c.request_text(request(method, uri)).await.unwrap();
            }
        }
        let seen = seen.lock();
        assert_eq!(seen.len(), 10);
        for (method, uri, _) in seen.iter() {
            let q: Vec<(String, String)> =
                form_urlencoded::parse(uri.split_once('?').map_or("", |(_, q)| q).as_bytes())
                    .into_owned()
                    .collect();
            let dry = q
                .iter()
                .filter(|(k, v)| k == "dryRun" && v == "All")
                .count();
            if *method == Method::GET {
                assert_eq!(dry, 0, "{uri}");
            } else {
                assert_eq!(dry, 1, "{method} {uri}");
            }
        }
        // The host's own client sends what the request carried; the tenant's replaces it.
        assert_eq!(seen[0].2, ["impersonate-user=system:admin"]);
        assert_eq!(
            seen[5].2,
            [
                "impersonate-user=system:serviceaccount:a:hooks",
                "impersonate-group=hooks",
                "impersonate-group=g2"
            ]
        );
    }

    #[tokio::test]
    async fn without_dry_run_requests_pass_as_built() {
        let (client, seen) = recording();
        let cluster = Cluster::new(client, false);
        let c = cluster.client_as(None).unwrap();
        c.request_text(request(Method::DELETE, "/api/v1/namespaces/a/configmaps/x"))
            .await
            .unwrap();
        assert_eq!(seen.lock()[0].1, "/api/v1/namespaces/a/configmaps/x");
    }

    #[tokio::test]
    async fn an_identity_that_is_no_header_value_is_refused() {
        let (client, seen) = recording();
        let cluster = Cluster::new(client, false);
        for user in ["a\nb", "a\rImpersonate-User: system:admin"] {
            let who = Impersonate {
                user: user.into(),
                groups: vec![],
            };
            assert!(matches!(
                cluster.client_as(Some(&who)),
                Err(ClusterError::Identity(_))
            ));
        }
        assert!(seen.lock().is_empty());
    }
}
