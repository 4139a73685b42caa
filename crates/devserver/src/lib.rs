//! Embedded Kubernetes-compatible API server, for development mode and as the test harness.
//!
//! It speaks enough of the real API for `kubectl` (1.27–1.33) and kube-rs 5 (including
//! kube-runtime's `watcher` in list-watch and streaming-list mode): discovery, get/list/watch,
//! create/update/patch/delete, the `status` and `scale` subresources, JSON, YAML and protobuf
//! request bodies, CustomResourceDefinitions that start serving their resources, and
//! metav1.Status errors with the real codes.
//!
//! Where things live: `handlers` routes HTTP (lists in `handlers/list`, watches in `watch`);
//! `api` is the write path both HTTP and [`DevServer`]'s direct calls take, with the per-kind
//! rules in `strategy` (status vs main resource, `metadata.generation`) and `scale`; `store`
//! holds objects and the watch history; `resources` is the registry and discovery; `protobuf`
//! decodes protobuf bodies with Kubernetes' own schema (`proto/`, compiled by `build.rs`);
//! `patch` does the four patch types, `ssa` managedFields and server-side apply's field
//! ownership; `openapi` the skeletal OpenAPI kubectl checks. `identity` decides who a request
//! is made as, `rbac` what that identity may do, `review` answers the access and token
//! reviews, `admission` shows HTTP writes to the configured admission webhooks, and `audit`
//! records every request.
//!
//! Contract, in the terms a client cares about:
//! - Every write takes the next value of ONE global resourceVersion counter (like etcd), so
//!   resourceVersions are comparable across resources; a list's resourceVersion is the counter
//!   at list time and a watch from it misses nothing.
//! - The watch history keeps the last [`DevServerConfig::watch_history`] events (all resources
//!   together). A watch from an older resourceVersion gets the apiserver's 410 Expired ERROR
//!   event, which drives clients down their relist path.
//! - Objects are stored as serialized JSON bytes, shared between the store, the watch history and
//!   every response that carries them.
//! - `metadata.generation` behaves as kube-apiserver 1.33's: 1 on create and +1 when `.spec`
//!   changes for workloads (for a Deployment also its annotations), any non-metadata change for
//!   custom resources, none at all for kinds such as ConfigMap, Secret, Namespace or Service;
//!   status-subresource writes never bump it. Over HTTP, main-resource writes to a kind with a
//!   status subresource keep the stored status, and status writes change only status.
//! - No controllers run. So that `kubectl rollout status` fails at once instead of waiting
//!   forever, a Deployment's new generation is marked observed with a `Progressing` condition
//!   of reason `ProgressDeadlineExceeded` whose message says so. Direct writes that carry their
//!   own status (a test playing the controller) are stored as given.
//! - [`Faults`] injects the failures informers must survive: closed watches, compaction, a network
//!   partition (pause/resume) and a restart that keeps the data.
//! - Identities, as a least-privilege cluster has them: a request carries no credentials and is
//!   made as an unrestricted admin (every client from [`DevServer::client`]), or a bearer token
//!   from [`DevServer::kubeconfig_as`] / [`DevServer::client_as`] makes it a named user, or
//!   `Impersonate-User` does. [`DevServer::restrict`] holds a user to RBAC-like rules for every
//!   request, reads included, with the apiserver's own 401/403 answers; the self access reviews
//!   answer for the caller, and [`DevServer::requests`] shows what was asked.
//! - Admission webhooks: every HTTP write is shown, before it is stored, to the webhooks of the
//!   stored `MutatingWebhookConfiguration`s and `ValidatingWebhookConfiguration`s whose rules
//!   match it, over HTTPS as kube-apiserver calls them (see [`admission`]). Writes through
//!   [`DevServer`]'s own methods are not admitted.
//! - Delegated authentication and authorization, as kube-rbac-proxy and controller-runtime's
//!   secure metrics use them: `TokenReview` (tokens from [`DevServer::issue_token`] expire or
//!   are revoked with [`DevServer::revoke_token`]) and `SubjectAccessReview`, with rules that
//!   name objects (`resourceNames`) and non-resource URLs (see [`audit::AllowRule`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), informant_devserver::Error> {
//! use informant_devserver::{DevServer, DevServerConfig};
//! let server = DevServer::start(DevServerConfig::default()).await?;
//! server.create(serde_json::json!({
//!     "apiVersion": "v1", "kind": "ConfigMap",
//!     "metadata": {"name": "demo", "namespace": "default"}, "data": {"k": "v"}
//! }))?;
//! let client = server.client();
//! # let _ = client;
//! server.shutdown().await;
//! # Ok(()) }
//! ```

pub mod admission;
mod api;
pub mod audit;
mod defaults;
mod discovery;
mod faults;
mod handlers;
mod identity;
mod kubeconfig;
mod metadata;
mod openapi;
mod patch;
mod portforward;
mod protobuf;
mod rbac;
mod resources;
mod review;
mod scale;
mod selector;
mod server;
mod ssa;
mod store;
mod strategy;
mod structural;
mod table;
mod validation;
mod watch;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use faults::Faults;

/// Result alias for this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the embedded API server; HTTP responses map each variant to
/// the metav1.Status code and reason a real apiserver would send.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The listen address could not be bound.
    #[error("devserver: cannot listen on {addr}")]
    Bind {
        /// The address we tried.
        addr: SocketAddr,
        /// Why binding failed.
        #[source]
        source: std::io::Error,
    },
    /// Writing the kubeconfig file failed.
    #[error("devserver: cannot write kubeconfig `{path}`")]
    WriteKubeconfig {
        /// The file we tried to write.
        path: PathBuf,
        /// Why writing failed.
        #[source]
        source: std::io::Error,
    },
    /// The request names a resource (or apiVersion/kind) this server does not serve.
    #[error("the server could not find the requested resource ({what})")]
    UnknownResource {
        /// The resource path, or apiVersion/kind, that was asked for.
        what: String,
    },
    /// The named object does not exist.
    #[error("{resource} \"{name}\" not found")]
    NotFound {
        /// Resource plural with group, e.g. `deployments.apps`.
        resource: String,
        /// The object name.
        name: String,
    },
    /// Create of an object whose name is taken.
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists {
        /// Resource plural with group.
        resource: String,
        /// The object name.
        name: String,
    },
    /// Optimistic-concurrency failure: the caller's resourceVersion (or uid precondition) is stale.
    #[error("Operation cannot be fulfilled on {resource} \"{name}\": {reason}")]
    Conflict {
        /// Resource plural with group.
        resource: String,
        /// The object name.
        name: String,
        /// Why: [`OPTIMISTIC_LOCK`] for a stale resourceVersion, the storage error's words for a
        /// failed delete precondition.
        reason: String,
    },
    /// The object fails validation (422 Invalid), worded as apimachinery's `NewInvalid`.
    #[error(
        "{} \"{name}\" is invalid: {}",
        qualified_kind(kind, group),
        causes_text(causes)
    )]
    Invalid {
        /// Kind of the rejected object (`Deployment`, `PatchOptions`).
        kind: String,
        /// API group of that kind, empty for the core group.
        group: String,
        /// Name of the rejected object (may be empty when the name is the problem).
        name: String,
        /// One entry per field error, as `details.causes`.
        causes: Vec<Cause>,
    },
    /// A write the apiserver itself refuses with 422 without naming fields (a JSON patch that
    /// cannot be applied), as `NewGenericServerResponse(422, ...)` words it: the generic message,
    /// the specific error as the single `UnexpectedServerResponse` cause.
    #[error("the server rejected our request due to an error in our request")]
    Unprocessable {
        /// What went wrong, carried as the single cause's message.
        cause: String,
    },
    /// The request itself is malformed: bad JSON, wrong kind/apiVersion, bad selector (400).
    #[error("{0}")]
    BadRequest(String),
    /// The requested resourceVersion is older than the retained history (410 Expired).
    #[error("too old resource version: {requested} ({oldest})")]
    Expired {
        /// resourceVersion the client asked for.
        requested: u64,
        /// Oldest resourceVersion still resumable.
        oldest: u64,
    },
    /// The requested resourceVersion is newer than anything this server has written: a client
    /// resuming from another server's history (the apiserver's words and code, after its wait).
    #[error("Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion {
        /// resourceVersion the client asked for.
        requested: u64,
        /// The newest resourceVersion written.
        current: u64,
    },
    /// A `continue` token older than the retained history (410 Expired, the apiserver's words).
    #[error(
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
    )]
    ContinueExpired,
    /// The verb is not supported on this path (405).
    #[error("the server does not allow this method on the requested resource ({0})")]
    MethodNotAllowed(String),
    /// The request body exceeds [`DevServerConfig::max_body_bytes`] (413).
    #[error("Request entity too large: limit is {limit}")]
    TooLarge {
        /// The configured limit in bytes.
        limit: usize,
    },
    /// Server-side apply would change fields other managers own (409), as `NewApplyConflict`
    /// words it; `force=true` takes them instead.
    #[error("{message}")]
    ApplyConflict {
        /// `Apply failed with N conflict(s): ...`.
        message: String,
        /// One `FieldManagerConflict` per field.
        causes: Vec<Cause>,
    },
    /// The identity the request was made as may not do this (403), in RBAC's words.
    #[error("{message}")]
    Forbidden {
        /// `... is forbidden: User "..." cannot ...`.
        message: String,
        /// API group of the refused resource (empty for the core group and for paths).
        group: String,
        /// The refused resource's plural (empty for a non-resource path).
        resource: String,
        /// The object's name, if the request named one.
        name: Option<String>,
    },
    /// The request's credentials are not this server's (401).
    #[error("Unauthorized")]
    Unauthorized,
    /// The patch content type is unknown or not allowed for this resource (415).
    #[error("the body of the request was in an unknown format - accepted media types include: {0}")]
    UnsupportedMediaType(String),
    /// An admission webhook refused the write, or could not be asked (see [`admission`]); the
    /// code and reason are kube-apiserver's for the case.
    #[error(transparent)]
    Admission(#[from] admission::Error),
    /// A stored object does not parse back (500); nothing is written on top of it.
    #[error("a stored object cannot be read back: {source}")]
    Unreadable {
        /// Why it does not parse.
        #[source]
        source: serde_json::Error,
    },
}

impl Error {
    /// HTTP status code and metav1.Status reason a real apiserver uses for this error (the
    /// reason is empty only for a webhook's denial that names none).
    pub fn code_and_reason(&self) -> (u16, &str) {
        match self {
            Error::Admission(e) => e.code_and_reason(),
            Error::UnknownResource { .. } | Error::NotFound { .. } => (404, "NotFound"),
            Error::AlreadyExists { .. } => (409, "AlreadyExists"),
            Error::Conflict { .. } | Error::ApplyConflict { .. } => (409, "Conflict"),
            Error::Invalid { .. } | Error::Unprocessable { .. } => (422, "Invalid"),
            Error::BadRequest(_) => (400, "BadRequest"),
            Error::Forbidden { .. } => (403, "Forbidden"),
            Error::Unauthorized => (401, "Unauthorized"),
            Error::Expired { .. } | Error::ContinueExpired => (410, "Expired"),
            Error::TooLargeResourceVersion { .. } => (504, "Timeout"),
            Error::MethodNotAllowed(_) => (405, "MethodNotAllowed"),
            Error::TooLarge { .. } => (413, "RequestEntityTooLarge"),
            Error::UnsupportedMediaType(_) => (415, "UnsupportedMediaType"),
            Error::Bind { .. } | Error::WriteKubeconfig { .. } | Error::Unreadable { .. } => {
                (500, "InternalError")
            }
        }
    }

    /// The error as a metav1.Status object.
    pub fn to_status(&self) -> serde_json::Value {
        let (code, reason) = self.code_and_reason();
        let mut status = serde_json::json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": reason,
            "code": code,
        });
        if reason.is_empty() {
            // metav1.Status leaves an empty reason out.
            status.as_object_mut().map(|s| s.remove("reason"));
        }
        let details = match self {
            Error::NotFound { resource, name, .. }
            | Error::AlreadyExists { resource, name, .. }
            | Error::Conflict { resource, name, .. } => {
                // apimachinery names the resource (plural), not the kind, in these errors.
                let (kind, group) = resource.split_once('.').unwrap_or((resource, ""));
                let mut d = serde_json::json!({"name": name, "kind": kind});
                if !group.is_empty() {
                    d["group"] = group.into();
                }
                Some(d)
            }
            Error::Invalid {
                kind,
                group,
                name,
                causes,
            } => {
                let mut d = serde_json::json!({"name": name, "kind": kind,
                    "causes": causes.iter().map(Cause::to_json).collect::<Vec<_>>()});
                if !group.is_empty() {
                    d["group"] = group.clone().into();
                }
                if name.is_empty() {
                    d.as_object_mut().map(|m| m.remove("name"));
                }
                Some(d)
            }
            Error::Forbidden {
                group,
                resource,
                name,
                ..
            } => {
                // `NewForbidden` names the resource (not the kind) and always has details.
                let mut d = serde_json::Map::new();
                if let Some(name) = name {
                    d.insert("name".into(), name.clone().into());
                }
                if !group.is_empty() {
                    d.insert("group".into(), group.clone().into());
                }
                if !resource.is_empty() {
                    d.insert("kind".into(), resource.clone().into());
                }
                Some(serde_json::Value::Object(d))
            }
            Error::ApplyConflict { causes, .. } => Some(serde_json::json!({
                "causes": causes.iter().map(Cause::to_json).collect::<Vec<_>>()
            })),
            Error::Unprocessable { cause } => Some(serde_json::json!({
                "causes": [{"reason": "UnexpectedServerResponse", "message": cause}]
            })),
            Error::Admission(e) => e.details(),
            _ => None,
        };
        if let Some(details) = details {
            status["details"] = details;
        }
        status
    }
}

/// Message of a Conflict from a stale resourceVersion, word for word the apiserver's.
pub const OPTIMISTIC_LOCK: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// One field error of a 422 Invalid: apimachinery's `field.Error` as a `metav1.StatusCause`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueNotSupported`, ...
    pub reason: &'static str,
    /// Path of the field, e.g. `spec.replicas`.
    pub field: String,
    /// The error body, e.g. `Invalid value: -1: must be greater than or equal to 0`.
    pub message: String,
}

impl Cause {
    /// `field.Invalid`: `value` is already rendered as Go prints it (`"x"` for strings, `-1`).
    pub fn invalid(field: &str, value: &str, detail: &str) -> Cause {
        Cause {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: format!("Invalid value: {value}: {detail}"),
        }
    }

    /// `field.Required`, with an optional detail.
    pub fn required(field: &str, detail: &str) -> Cause {
        let message = if detail.is_empty() {
            "Required value".to_string()
        } else {
            format!("Required value: {detail}")
        };
        Cause {
            reason: "FieldValueRequired",
            field: field.into(),
            message,
        }
    }

    /// `field.NotSupported`: the value and the quoted list of supported ones.
    pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> Cause {
        let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        Cause {
            reason: "FieldValueNotSupported",
            field: field.into(),
            message: format!(
                "Unsupported value: {value:?}: supported values: {}",
                list.join(", ")
            ),
        }
    }

    /// `field.Forbidden`.
    pub fn forbidden(field: &str, detail: &str) -> Cause {
        Cause {
            reason: "FieldValueForbidden",
            field: field.into(),
            message: format!("Forbidden: {detail}"),
        }
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"reason": self.reason, "message": self.message, "field": self.field})
    }
}

/// `Kind.group` as apimachinery's `GroupKind.String()` prints it.
fn qualified_kind(kind: &str, group: &str) -> String {
    if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    }
}

/// `field.ErrorList.ToAggregate()`: one error bare, several in brackets.
fn causes_text(causes: &[Cause]) -> String {
    let each: Vec<String> = causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect();
    match each.as_slice() {
        [one] => one.clone(),
        _ => format!("[{}]", each.join(", ")),
    }
}

/// How to run the server.
#[derive(Debug, Clone)]
pub struct DevServerConfig {
    /// Where to listen; port 0 picks a free port. Plain HTTP, meant for loopback.
    pub listen: SocketAddr,
    /// How many watch events (across all resources) stay resumable before 410 Expired.
    pub watch_history: usize,
    /// How often a watch that asked for bookmarks gets one.
    pub bookmark_interval: Duration,
    /// Largest accepted request body, in bytes (Kubernetes uses 3 MiB).
    pub max_body_bytes: usize,
}

impl Default for DevServerConfig {
    fn default() -> Self {
        DevServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            watch_history: 10_000,
            bookmark_interval: Duration::from_secs(1),
            max_body_bytes: 3 * 1024 * 1024,
        }
    }
}

/// State shared by the listener, the handlers, watches and [`Faults`].
pub(crate) struct Shared {
    pub(crate) api: api::Api,
    pub(crate) config: DevServerConfig,
    pub(crate) faults: faults::FaultState,
    pub(crate) listener: server::ListenerSlot,
    pub(crate) audit: audit::Audit,
    pub(crate) rbac: rbac::Rbac,
    pub(crate) tokens: identity::Tokens,
}

/// A running embedded API server. Dropping it stops the listener; prefer [`DevServer::shutdown`].
pub struct DevServer {
    shared: Arc<Shared>,
}

impl DevServer {
    /// Binds the listener and starts serving; the `default`, `kube-system`, `kube-public` and
    /// `kube-node-lease` namespaces exist from the start, as on a real cluster. Objects go only
    /// into namespaces that exist (404 otherwise, as the apiserver's NamespaceLifecycle admission).
    pub async fn start(config: DevServerConfig) -> Result<DevServer> {
        let shared = Arc::new(Shared {
            api: api::Api::new(config.watch_history),
            faults: faults::FaultState::default(),
            listener: server::ListenerSlot::default(),
            audit: audit::Audit::default(),
            rbac: rbac::Rbac::default(),
            tokens: identity::Tokens::default(),
            config,
        });
        // The namespaces every kube-apiserver creates for itself (its system namespaces
        // controller, pkg/controlplane/controller/systemnamespaces).
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            shared.api.create(
                serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                &api::WriteOpts::default(),
            )?;
        }
        server::start(&shared, shared.config.listen).await?;
        Ok(DevServer { shared })
    }

    /// The bound address (with the real port when configured with port 0).
    pub fn addr(&self) -> SocketAddr {
        self.shared.listener.addr()
    }

    /// Base URL, e.g. `http://127.0.0.1:43117`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// A kubeconfig with one cluster/user/context (`informant`) pointing at this server; its
    /// user carries no credentials, so requests are made as the unrestricted admin.
    pub fn kubeconfig(&self) -> kube::config::Kubeconfig {
        kubeconfig::kubeconfig(&self.url(), None)
    }

    /// Writes [`DevServer::kubeconfig`] as YAML to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<()> {
        kubeconfig::write(&self.url(), None, path)
    }

    /// A plain-HTTP kube client for this server as the unrestricted admin, default namespace
    /// `default`. Must be called inside a tokio runtime (kube's client spawns its buffer worker).
    pub fn client(&self) -> kube::Client {
        kubeconfig::client(&self.url(), None)
    }

    /// The bearer token this server maps to `user` (the same one on every call); it never
    /// expires.
    pub fn token_for(&self, user: &str) -> String {
        self.shared.tokens.issue(user)
    }

    /// A new bearer token for `user`, in `groups` as a TokenReview reports them (besides
    /// `system:authenticated`, and a service account's groups), valid for `lifetime` (`None`:
    /// until revoked). Requests with it after that get the apiserver's 401, and TokenReviews
    /// of it `authenticated: false`.
    pub fn issue_token(&self, user: &str, groups: &[&str], lifetime: Option<Duration>) -> String {
        self.shared.tokens.issue_with(user, groups, lifetime)
    }

    /// Makes `token` (from [`DevServer::issue_token`] or [`DevServer::token_for`]) unknown from
    /// now on, as a deleted ServiceAccount's tokens are; whether it was known. A revoked
    /// [`DevServer::token_for`] token is replaced by a new one at its next call.
    pub fn revoke_token(&self, token: &str) -> bool {
        self.shared.tokens.revoke(token)
    }

    /// [`DevServer::kubeconfig`] whose user carries `user`'s bearer token. kube-rs sends it
    /// over this plain HTTP; kubectl (client-go) does not: it reads a kubeconfig's credentials
    /// only for a TLS server, so give kubectl the identity with `--as` instead.
    pub fn kubeconfig_as(&self, user: &str) -> kube::config::Kubeconfig {
        kubeconfig::kubeconfig(&self.url(), Some(&self.token_for(user)))
    }

    /// Writes [`DevServer::kubeconfig_as`] as YAML to `path`.
    pub fn write_kubeconfig_as(&self, user: &str, path: &Path) -> Result<()> {
        kubeconfig::write(&self.url(), Some(&self.token_for(user)), path)
    }

    /// [`DevServer::client`] making every request as `user` (by its bearer token).
    pub fn client_as(&self, user: &str) -> kube::Client {
        kubeconfig::client(&self.url(), Some(&self.token_for(user)))
    }

    /// Handle for fault injection; cheap to clone and usable from any task.
    pub fn faults(&self) -> Faults {
        Faults::new(self.shared.clone())
    }

    /// Creates an object directly in the store (works while paused); the resource comes from
    /// apiVersion/kind, a namespaced object without namespace lands in `default`.
    pub fn create(&self, obj: serde_json::Value) -> Result<serde_json::Value> {
        self.shared.api.create(obj, &api::WriteOpts::default())
    }

    /// Replaces an object directly (status included); a set `metadata.resourceVersion` must
    /// match the stored one, an absent one makes the update unconditional.
    pub fn update(&self, obj: serde_json::Value) -> Result<serde_json::Value> {
        self.shared.api.update_direct(obj)
    }

    /// Stores `obj` as the next version of an existing object exactly as given (it keeps its
    /// uid and creationTimestamp and gets a fresh resourceVersion), emitting `MODIFIED`, with
    /// none of a write's defaulting, validation, field management or status rules: a synthetic
    /// stream for benchmarks that measure a client rather than this server's write path.
    ///
    /// It is also the one way to make this server serve what no API server should: an object
    /// without its namespace (the object stays under the namespace it was created in, `default`
    /// if none was given), so tests can prove a client does not trust it. Every other write
    /// keeps a namespaced object's namespace and uid. Like every write, it refuses an object
    /// nested deeper than the server can read back.
    pub fn replace_verbatim(&self, obj: serde_json::Value) -> Result<serde_json::Value> {
        self.shared.api.replace_verbatim(obj)
    }

    /// Deletes an object directly; cascades like the HTTP path (namespaces, CRDs).
    pub fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<()> {
        let res = self.shared.api.resolve_kind(api_version, kind)?;
        self.shared
            .api
            .delete(&res, namespace, name, &api::WriteOpts::default())
            .map(drop)
    }

    /// Creates many objects under one lock; returns how many were created.
    pub fn seed(&self, objs: impl IntoIterator<Item = serde_json::Value>) -> Result<usize> {
        self.shared.api.seed(objs)
    }

    /// Every write request received over HTTP so far (the last 10 000), with the identity it
    /// was made as.
    pub fn audit(&self) -> Vec<audit::AuditRecord> {
        self.shared.audit.writes()
    }

    /// Every API request received over HTTP so far (the last 10 000; discovery excluded),
    /// reads and writes, with its identity and whether RBAC allowed it, oldest first.
    pub fn requests(&self) -> Vec<audit::AccessRecord> {
        self.shared.audit.requests()
    }

    /// Holds every request made as `user` (by token or impersonation) to `rules`, as the
    /// cluster's RBAC would: anything else gets the API server's 403. Replaces the user's
    /// earlier rules; users without rules may do anything.
    pub fn restrict(&self, user: &str, rules: Vec<audit::AllowRule>) {
        self.shared.rbac.restrict(user, rules);
    }

    /// Like [`DevServer::restrict`], for writes only: `user` may still read anything.
    pub fn allow_impersonated(&self, user: &str, rules: Vec<audit::AllowRule>) {
        self.shared.rbac.restrict_writes(user, rules);
    }

    /// Stops listening, drops open connections and ends every watch.
    pub async fn shutdown(self) {
        self.shared.faults.close_watches();
        server::stop(&self.shared).await;
    }
}

impl Drop for DevServer {
    fn drop(&mut self) {
        // Without this the accept loop (which holds `shared`) would outlive a forgotten server.
        self.shared.listener.abort();
    }
}

/// Whether a built-in kind is namespaced, as this server serves it; `None` for kinds it does
/// not know (CRDs). Lets offline tools such as `informant check` judge a kind's scope.
pub fn builtin_scope(api_version: &str, kind: &str) -> Option<bool> {
    resources::Registry::builtin()
        .by_kind(api_version, kind)
        .ok()
        .map(|r| r.namespaced)
}
