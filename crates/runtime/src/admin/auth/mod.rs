//! Who may read the admin endpoints, and what of them: bearer tokens checked with a
//! TokenReview, access decided with SubjectAccessReviews, as kube-rbac-proxy and
//! controller-runtime's secure metrics (`filters.WithAuthenticationAndAuthorization`) do.
//!
//! Authorization is per tenant, on a virtual cluster-scoped resource, `tenants` in the group
//! `informant.dev` (nothing stores it; RBAC rules name it like any other resource):
//!
//! | RBAC rule | lets the caller |
//! |---|---|
//! | `get` on `tenants` with `resourceNames: [T]` | read tenant T's plugins (`/plugins`, `/readyz`), log lines (`/logs`), dead letters and metric series |
//! | `update` on `tenants` with `resourceNames: [T]` | retry and drop tenant T's dead letters |
//! | `get` on `tenants` (no names) | read everything: every tenant, the operator's top-level plugins, the host's own series, the shard |
//! | `update` on `tenants` (no names) | retry and drop every plugin's dead letters |
//! | `get` on the non-resource URL `/metrics` | scrape all of `/metrics` (a Prometheus ServiceMonitor's identity) |
//!
//! Contract:
//! - Fail closed: no token, a token the API server does not accept, or an API server that does
//!   not answer (within [`AuthOptions::review_timeout`]) is a refusal (401, or 503 when nothing
//!   could be checked), never an open door. A caller allowed nothing is 403 with one line
//!   saying what it lacks.
//! - Answers are cached briefly, by a SHA-256 of the token (never the token itself) and by user
//!   and question, in bounded maps ([`AuthOptions::max_cached`]): accepted tokens and allowed
//!   questions for [`AuthOptions::authenticated_ttl`] / [`AuthOptions::allowed_ttl`], refusals
//!   for shorter; failures to get an answer are not cached at all. A revoked token or role
//!   therefore keeps working for at most its TTL, as with the API server's own webhook caches.
//! - At most [`AuthOptions::max_reviews_in_flight`] reviews are asked at once, whatever the
//!   number of callers, so a flood of made-up tokens cannot flood the API server.
//! - The tenants asked about are the configured ones (`informant.toml`), never a name taken
//!   from a request: a spelling in a query (`%2F`, `..`, trailing spaces, look-alikes) is
//!   compared exactly against the caller's [`Scope`] and can only fail to match.
//! - With [`AdminAuth::None`] (accepted on a loopback address only) every caller is the
//!   operator, as before authentication existed: `informant dev` and the tests.

mod cache;
pub(crate) mod review;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use review::Question;
pub(crate) use review::{GROUP, RESOURCE, ReviewError, User};

use self::cache::TtlCache;
use super::AdminState;
use super::scope::Scope;
use crate::plugin::text::escape_controls;

/// How the admin server authenticates its callers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AdminAuth {
    /// Nobody is asked for anything: every caller is the operator. Accepted on a loopback
    /// address only (`informant dev`, tests, a sidecar on the pod's loopback).
    #[default]
    None,
    /// Bearer tokens, checked with TokenReviews and authorized with SubjectAccessReviews.
    Kubernetes(AuthOptions),
}

/// How long answers are cached and how long the API server is waited for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthOptions {
    /// How long an accepted token is trusted without asking again.
    pub authenticated_ttl: Duration,
    /// How long a refused token is refused without asking again.
    pub unauthenticated_ttl: Duration,
    /// How long an allowed question stays allowed.
    pub allowed_ttl: Duration,
    /// How long a refused question stays refused (short: a new RoleBinding should work soon).
    pub denied_ttl: Duration,
    /// How long one review may take, waiting for a free slot included; then the request is
    /// refused with 503.
    pub review_timeout: Duration,
    /// Most answers kept, tokens and questions each.
    pub max_cached: usize,
    /// Most reviews asked of the API server at once.
    pub max_reviews_in_flight: usize,
}

impl Default for AuthOptions {
    fn default() -> Self {
        AuthOptions {
            authenticated_ttl: Duration::from_secs(30),
            unauthenticated_ttl: Duration::from_secs(5),
            allowed_ttl: Duration::from_secs(30),
            denied_ttl: Duration::from_secs(10),
            review_timeout: Duration::from_secs(5),
            max_cached: 4096,
            max_reviews_in_flight: 16,
        }
    }
}

/// Who a request comes from.
#[derive(Debug, Clone)]
pub(crate) enum Caller {
    /// Nobody was asked ([`AdminAuth::None`]): the operator.
    Operator,
    /// A user the API server vouched for.
    User(Arc<User>),
}

/// A refusal: its status and one line saying why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

impl Refusal {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Refusal {
        Refusal {
            status,
            message: message.into(),
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut resp = (self.status, format!("{}\n", self.message)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"informant\""),
            );
        }
        resp
    }
}

/// Longest token sent for review: real ones are a few KiB at most.
const MAX_TOKEN_BYTES: usize = 16 << 10;

/// Decides who a caller is and what it may see; one per admin server.
pub(crate) struct Gate {
    reviews: Option<Reviews>,
}

struct Reviews {
    client: kube::Client,
    opts: AuthOptions,
    tokens: TtlCache<[u8; 32], Option<Arc<User>>>,
    answers: TtlCache<(Arc<User>, Question), bool>,
    in_flight: Semaphore,
}

impl Gate {
    /// A gate for `auth`, asking the API server `client` talks to.
    pub(crate) fn new(auth: &AdminAuth, client: &kube::Client) -> Gate {
        match auth {
            AdminAuth::None => Gate::open(),
            AdminAuth::Kubernetes(opts) => Gate {
                reviews: Some(Reviews {
                    client: client.clone(),
                    tokens: TtlCache::new(opts.max_cached),
                    answers: TtlCache::new(opts.max_cached),
                    in_flight: Semaphore::new(opts.max_reviews_in_flight.max(1)),
                    opts: opts.clone(),
                }),
            },
        }
    }

    /// A gate that asks nothing: every caller is the operator.
    pub(crate) fn open() -> Gate {
        Gate { reviews: None }
    }

    /// Whether every caller is let in as the operator.
    pub(crate) fn is_open(&self) -> bool {
        self.reviews.is_none()
    }

    /// The caller `headers` authenticate: 401 without an accepted bearer token, 503 when the
    /// API server cannot be asked.
    pub(crate) async fn caller(&self, headers: &HeaderMap) -> Result<Caller, Refusal> {
        let Some(reviews) = &self.reviews else {
            return Ok(Caller::Operator);
        };
        let token = bearer(headers)?;
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let user = match reviews.tokens.get(&key) {
            Some(user) => user,
            None => {
                let user = reviews
                    .bounded("TokenReview", review::token(&reviews.client, token))
                    .await
                    .map_err(|e| unavailable("authenticate", &e))?
                    .map(Arc::new);
                let ttl = match user {
                    Some(_) => reviews.opts.authenticated_ttl,
                    None => reviews.opts.unauthenticated_ttl,
                };
                reviews.tokens.insert(key, user.clone(), ttl);
                user
            }
        };
        user.map(Caller::User).ok_or_else(|| {
            Refusal::new(
                StatusCode::UNAUTHORIZED,
                "the bearer token was not accepted by the API server (TokenReview)",
            )
        })
    }

    /// Whether `caller` may do what `question` asks.
    async fn allowed(&self, caller: &Caller, question: Question) -> Result<bool, Refusal> {
        let (Some(reviews), Caller::User(user)) = (&self.reviews, caller) else {
            // Only an open gate lets the operator in unasked; nothing else is allowed unasked.
            return Ok(self.reviews.is_none() && matches!(caller, Caller::Operator));
        };
        let key = (user.clone(), question);
        if let Some(allowed) = reviews.answers.get(&key) {
            return Ok(allowed);
        }
        let allowed = reviews
            .bounded(
                "SubjectAccessReview",
                review::access(&reviews.client, user, &key.1),
            )
            .await
            .map_err(|e| unavailable("authorize", &e))?;
        let ttl = if allowed {
            reviews.opts.allowed_ttl
        } else {
            reviews.opts.denied_ttl
        };
        reviews.answers.insert(key, allowed, ttl);
        Ok(allowed)
    }

    /// The tenants `caller` may `verb` (`get` or `update`): every one if allowed on all
    /// tenants, else those of `candidates` it is allowed on by name.
    pub(crate) async fn scope(
        &self,
        caller: &Caller,
        verb: &'static str,
        candidates: &[String],
    ) -> Result<Scope, Refusal> {
        if self
            .allowed(caller, Question::Tenants { verb, name: None })
            .await?
        {
            return Ok(Scope::Everything);
        }
        let asks = candidates
            .iter()
            .filter(|t| !t.is_empty())
            .map(|t| async move {
                let q = Question::Tenants {
                    verb,
                    name: Some(t.clone()),
                };
                self.allowed(caller, q)
                    .await
                    .map(|ok| ok.then(|| t.clone()))
            });
        let mut tenants = std::collections::BTreeSet::new();
        for answer in futures::future::join_all(asks).await {
            if let Some(t) = answer? {
                tenants.insert(t);
            }
        }
        Ok(Scope::Tenants(tenants))
    }
}

impl Reviews {
    /// Runs `review` in one of the in-flight slots, within the review timeout.
    async fn bounded<T>(
        &self,
        what: &'static str,
        review: impl Future<Output = Result<T, ReviewError>>,
    ) -> Result<T, ReviewError> {
        let after = self.opts.review_timeout;
        let run = async {
            let _slot = self.in_flight.acquire().await;
            review.await
        };
        tokio::time::timeout(after, run)
            .await
            .map_err(|_| ReviewError::Timeout { what, after })?
    }
}

/// 503 for a review that could not be made, logged: the operator must hear of it.
fn unavailable(doing: &str, e: &ReviewError) -> Refusal {
    tracing::warn!(error = %e, "admin server: cannot {doing} a caller; refusing it");
    Refusal::new(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("cannot {doing} the caller: {}", one_line(&e.to_string())),
    )
}

fn one_line(s: &str) -> String {
    escape_controls(s).into_owned()
}

/// The token of `Authorization: Bearer TOKEN`, exactly one such header.
fn bearer(headers: &HeaderMap) -> Result<&str, Refusal> {
    let unauthorized = |why: &str| Refusal::new(StatusCode::UNAUTHORIZED, why);
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return Err(unauthorized(
            "authentication required: send one `Authorization: Bearer TOKEN` header with a token the cluster's API server accepts",
        ));
    };
    let token = value
        .to_str()
        .ok()
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|token| !token.is_empty() && !token.contains(char::is_whitespace))
        .ok_or_else(|| unauthorized("only `Authorization: Bearer TOKEN` is accepted"))?;
    if token.len() > MAX_TOKEN_BYTES {
        return Err(unauthorized(
            "the bearer token is too long to be a real one",
        ));
    }
    Ok(token)
}

/// Authenticates every request it wraps and hands the [`Caller`] on; refuses the rest.
pub(crate) async fn authenticate(mut req: Request, next: Next) -> Response {
    let Some(gate) = req.extensions().get::<Arc<Gate>>().cloned() else {
        return Refusal::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "no authentication configured",
        )
        .into_response();
    };
    match gate.caller(req.headers()).await {
        Ok(caller) => {
            req.extensions_mut().insert(caller);
            next.run(req).await
        }
        Err(refusal) => {
            tracing::debug!(path = %req.uri().path(), status = %refusal.status, "admin server: request refused");
            refusal.into_response()
        }
    }
}

/// What one authenticated request may do: its caller and the gate to ask about it. Taken from
/// the request by the handlers; a request that did not pass [`authenticate`] is refused.
pub(crate) struct Access {
    gate: Arc<Gate>,
    caller: Caller,
}

impl<S: Send + Sync> FromRequestParts<S> for Access {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let gate = parts.extensions.get::<Arc<Gate>>().cloned();
        let caller = parts.extensions.get::<Caller>().cloned();
        match (gate, caller) {
            (Some(gate), Some(caller)) => Ok(Access { gate, caller }),
            _ => Err(Refusal::new(
                StatusCode::UNAUTHORIZED,
                "authentication required",
            )),
        }
    }
}

impl Access {
    /// The caller's name, for refusals.
    fn who(&self) -> String {
        match &self.caller {
            Caller::Operator => "the operator".into(),
            Caller::User(u) => format!("User \"{}\"", one_line(&u.name)),
        }
    }

    /// What the caller may read: 403 if nothing at all.
    pub(crate) async fn read(&self, state: &AdminState) -> Result<Scope, Refusal> {
        let scope = self
            .gate
            .scope(&self.caller, "get", &state.tenants())
            .await?;
        if scope == Scope::Tenants(Default::default()) {
            return Err(Refusal::new(
                StatusCode::FORBIDDEN,
                format!(
                    "{} may read no tenant: it needs `get` on {RESOURCE}.{GROUP}, named for a tenant or unnamed for all",
                    self.who()
                ),
            ));
        }
        Ok(scope)
    }

    /// What the caller may read of `/metrics`: all of it with `get` on the non-resource URL
    /// `/metrics`, else as [`Access::read`].
    pub(crate) async fn metrics(&self, state: &AdminState) -> Result<Scope, Refusal> {
        let whole = Question::Path {
            verb: "get",
            path: "/metrics",
        };
        if self.gate.allowed(&self.caller, whole).await? {
            return Ok(Scope::Everything);
        }
        self.read(state).await
    }

    /// Whether the caller may act on `tenant`'s plugins (`""`: top-level plugins, the
    /// operator's) — retry and drop their dead letters, have their sources checked — where
    /// `what` names the plugins' things acted on (`dead letters`): 403 if not.
    pub(crate) async fn update(
        &self,
        state: &AdminState,
        tenant: &str,
        what: &str,
    ) -> Result<(), Refusal> {
        // Only a configured tenant is asked about by name; any other needs the operator's grant.
        let candidates: Vec<String> = state
            .tenants()
            .into_iter()
            .filter(|t| !tenant.is_empty() && t == tenant)
            .collect();
        let scope = self.gate.scope(&self.caller, "update", &candidates).await?;
        if scope.sees_tenant(tenant) {
            return Ok(());
        }
        let what = if tenant.is_empty() {
            format!("top-level plugins' {what} need `update` on all {RESOURCE}.{GROUP}")
        } else {
            format!(
                "it needs `update` on {RESOURCE}.{GROUP} `{}` to act on its {what}",
                one_line(tenant)
            )
        };
        Err(Refusal::new(
            StatusCode::FORBIDDEN,
            format!("{} may not do that: {what}", self.who()),
        ))
    }
}
