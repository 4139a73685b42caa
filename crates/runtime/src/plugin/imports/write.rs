//! Writes to the cluster for plugins: the `kube` import, behind three locks.
//!
//! 1. The plugin's manifest declares each kind, verb and namespace it writes (`[[write]]`).
//! 2. Its tenant's grant is a ceiling over that: checked at load by
//!    [`acceptance`](crate::plugin::load::acceptance), and again here on every call, with the namespace the
//!    call names held to the tenant's namespaces.
//! 3. On a real cluster a tenant's writes are sent impersonating the identity its grant names,
//!    so the cluster's RBAC has the last word.
//!
//! Whatever a lock refuses is `denied` before any request leaves the host. Names are checked by
//! the rules of the kind they name and namespaces as DNS labels, then percent-encoded where the
//! path is built, and requests are built by kube's own builders, so no name can reach the query
//! or the fragment. An object's own apiVersion, kind, namespace and name must agree with the
//! call, so a body cannot smuggle a write somewhere the call was not allowed to go.
//!
//! Cluster-scoped kinds are written by a tenant only where its write grant names the kind with
//! `cluster-scoped = true`. A `Namespace` object is its namespace: a tenant writes one only when
//! its name lies inside the tenant's namespaces (grants never overlap, so never inside
//! another's). Dry-run and impersonation are properties of the client a write is sent with
//! (see [`crate::plugin::imports::cluster`]), not parameters a call could leave out.
//!
//! What a write returns passes through the tenant's read grant: the object as stored for kinds
//! and namespaces the tenant may read; otherwise only its identity (apiVersion, kind, name,
//! namespace, uid, resourceVersion, generation), so a write grant is never a way to read.
//!
//! A call waits for its tenant's write budget and for the API server inside the event's
//! deadline: both are async host calls under the call's timeout.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::core::{DynamicObject, Request, Resource as _};
use serde_json::{Map, Value, json};

use crate::apimachinery::names;
use crate::informer::ResolvedResource;
use crate::manifest::{Verb, Write};
use crate::tenancy::{Budget, Grant, Impersonate};

use crate::plugin::bindings::WitResource;
use crate::plugin::bindings::informant::plugin::kube::{ApiError, WriteError};
use crate::plugin::imports::cluster::{Cluster, ClusterError};
use crate::telemetry::EventSpan;
use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;

/// What a write call is, for checks, metrics and messages: a manifest verb, or an Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// A manifest verb on the named kind.
    Verb(Verb),
    /// `record-event`: a `create` of `events.k8s.io/v1` `Event`.
    Event,
}

impl Call {
    /// Every call, in metrics order.
    pub const ALL: [Call; 6] = [
        Call::Verb(Verb::Create),
        Call::Verb(Verb::Apply),
        Call::Verb(Verb::Patch),
        Call::Verb(Verb::Delete),
        Call::Verb(Verb::UpdateStatus),
        Call::Event,
    ];

    /// The metrics label.
    pub fn as_str(self) -> &'static str {
        match self {
            Call::Verb(v) => v.as_str(),
            Call::Event => "record-event",
        }
    }

    fn slot(self) -> usize {
        Call::ALL.iter().position(|c| *c == self).expect("listed")
    }

    /// The verb the manifest must declare.
    fn verb(self) -> Verb {
        match self {
            Call::Verb(v) => v,
            Call::Event => Verb::Create,
        }
    }
}

/// How a write ended, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Done (or, with dry-run, accepted and not persisted).
    Ok,
    /// Refused by the host before any request.
    Denied,
    /// 409.
    Conflict,
    /// 404.
    NotFound,
    /// 403.
    Forbidden,
    /// 422.
    Invalid,
    /// Anything else, including no answer.
    Error,
}

impl Outcome {
    /// Every outcome, in metrics order.
    pub const ALL: [Outcome; 7] = [
        Outcome::Ok,
        Outcome::Denied,
        Outcome::Conflict,
        Outcome::NotFound,
        Outcome::Forbidden,
        Outcome::Invalid,
        Outcome::Error,
    ];

    /// The metrics label.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Denied => "denied",
            Outcome::Conflict => "conflict",
            Outcome::NotFound => "not_found",
            Outcome::Forbidden => "forbidden",
            Outcome::Invalid => "invalid",
            Outcome::Error => "error",
        }
    }

    fn slot(self) -> usize {
        Outcome::ALL
            .iter()
            .position(|o| *o == self)
            .expect("listed")
    }

    fn of(result: &Result<impl Sized, WriteError>) -> Outcome {
        match result {
            Ok(_) => Outcome::Ok,
            Err(WriteError::Denied(_)) => Outcome::Denied,
            Err(WriteError::Conflict(_)) => Outcome::Conflict,
            Err(WriteError::NotFound(_)) => Outcome::NotFound,
            Err(WriteError::Forbidden(_)) => Outcome::Forbidden,
            Err(WriteError::Invalid(_)) => Outcome::Invalid,
            Err(WriteError::Other(_)) => Outcome::Error,
        }
    }
}

/// Counters of one plugin version's writes by call and outcome, read by `/metrics`.
#[derive(Debug, Default)]
pub struct WriteStats {
    counts: [[AtomicU64; Outcome::ALL.len()]; Call::ALL.len()],
}

impl WriteStats {
    /// How many `call`s ended in `outcome`.
    pub fn get(&self, call: Call, outcome: Outcome) -> u64 {
        self.counts[call.slot()][outcome.slot()].load(Ordering::Relaxed)
    }

    fn count(&self, call: Call, outcome: Outcome) {
        self.counts[call.slot()][outcome.slot()].fetch_add(1, Ordering::Relaxed);
    }
}

/// A kind a plugin declared in `[[write]]`, resolved by discovery.
#[derive(Debug, Clone)]
pub struct Declared {
    /// The table as written.
    pub write: Write,
    /// What discovery says of its kind.
    pub resource: ResolvedResource,
}

/// What one plugin version may write, and where to.
pub struct PluginWrites {
    /// The client its writes are sent with (impersonating its tenant's identity, dry-run when
    /// the host is), or why there is none.
    client: Result<kube::Client, ClusterError>,
    declared: Vec<Declared>,
    grant: Arc<Grant>,
    /// The tenant's `write` tables; `None` for the operator (the manifest alone decides).
    ceiling: Option<Vec<Write>>,
    budget: Option<Arc<Budget>>,
    field_manager: String,
    /// Set where no write may be made at all (during admission): every call is denied with it.
    refusal: Option<&'static str>,
    /// What it did.
    pub stats: WriteStats,
}

impl Default for PluginWrites {
    /// Writes nothing: no cluster, nothing declared.
    fn default() -> Self {
        PluginWrites {
            client: Err(ClusterError::NoCluster),
            declared: Vec::new(),
            grant: Arc::new(Grant::full()),
            ceiling: None,
            budget: None,
            field_manager: String::new(),
            refusal: None,
            stats: WriteStats::default(),
        }
    }
}

impl PluginWrites {
    /// Denies every write with `why`, before any other check.
    pub fn refusing(why: &'static str) -> Self {
        PluginWrites {
            refusal: Some(why),
            ..PluginWrites::default()
        }
    }
}

/// The tenant side of a writer: its grant, ceiling, identity and budget.
pub struct TenantWrites {
    /// What the tenant may see (writes are held to its namespaces).
    pub grant: Arc<Grant>,
    /// Its `write` tables; `None`: no ceiling.
    pub ceiling: Option<Vec<Write>>,
    /// Who its writes are sent as.
    pub impersonate: Option<Impersonate>,
    /// Its writes per second.
    pub budget: Option<Arc<Budget>>,
}

impl PluginWrites {
    /// A writer for plugin `plugin` of `tenant`; `cluster` is `None` where there is no API
    /// server to write to (`replay`), and every call is then denied.
    pub fn new(
        cluster: Option<Cluster>,
        declared: Vec<Declared>,
        (plugin, tenant): (&str, &str),
        tenant_writes: TenantWrites,
    ) -> Self {
        let client = match cluster {
            None => Err(ClusterError::NoCluster),
            Some(c) => c.client_as(tenant_writes.impersonate.as_ref()),
        };
        PluginWrites {
            client,
            declared,
            grant: tenant_writes.grant,
            ceiling: tenant_writes.ceiling,
            budget: tenant_writes.budget,
            field_manager: field_manager(tenant, plugin),
            refusal: None,
            stats: WriteStats::default(),
        }
    }

    /// The field manager its writes are made as: `informant/TENANT/PLUGIN` (`informant/PLUGIN`
    /// for the operator's), at most 128 characters as the API server requires.
    pub fn field_manager(&self) -> &str {
        &self.field_manager
    }

    /// Runs one call made for the event of `event_span`: checks it, waits for the budget, sends
    /// it, counts the outcome (and traces it as a child span `kube.CALL`, with traces on).
    pub async fn run(
        &self,
        event_span: &EventSpan,
        call: Call,
        target: Target<'_>,
        build: impl FnOnce(&Sending<'_>) -> Result<http::Request<Vec<u8>>, WriteError>,
    ) -> Result<String, WriteError> {
        let span = event_span.child(format!("kube.{}", call.as_str()), SpanKind::Client, || {
            let k = target.kind;
            vec![
                KeyValue::new("kind", format!("{}/{}/{}", k.group, k.version, k.kind)),
                KeyValue::new(
                    "namespace",
                    target.namespace.unwrap_or_default().to_string(),
                ),
                KeyValue::new("name", target.name.unwrap_or_default().to_string()),
            ]
        });
        let result = self.run_inner(call, target, build).await;
        let outcome = Outcome::of(&result);
        self.stats.count(call, outcome);
        span.end(Some(outcome.as_str()));
        result
    }

    async fn run_inner(
        &self,
        call: Call,
        target: Target<'_>,
        build: impl FnOnce(&Sending<'_>) -> Result<http::Request<Vec<u8>>, WriteError>,
    ) -> Result<String, WriteError> {
        if let Some(why) = self.refusal {
            return Err(WriteError::Denied(why.to_string()));
        }
        let client = self
            .client
            .as_ref()
            .map_err(|why| WriteError::Denied(why.to_string()))?;
        let resource = self.check(call, &target)?;
        let sending = Sending {
            request: Request::new(DynamicObject::url_path(
                &resource.api_resource,
                target.namespace,
            )),
            name: target.name.map(|n| names::path_segment(n).into_owned()),
            resource,
            field_manager: &self.field_manager,
        };
        let request = build(&sending)?;
        if let Some(budget) = &self.budget {
            budget.acquire().await;
        }
        let stored = client.request_text(request).await.map_err(api_error)?;
        Ok(self.readable(resource, target.namespace, stored))
    }

    /// What the plugin gets back of a stored object: all of it where its tenant may read the
    /// kind in that namespace, else only the object's identity.
    fn readable(&self, r: &ResolvedResource, namespace: Option<&str>, stored: String) -> String {
        let ar = &r.api_resource;
        if self.grant.allows_resource(&ar.group, &ar.version, &ar.kind)
            && self.grant.allows_namespace(namespace)
        {
            return stored;
        }
        let Ok(Value::Object(mut obj)) = serde_json::from_str::<Value>(&stored) else {
            return String::new();
        };
        let mut meta = Map::new();
        if let Some(Value::Object(mut m)) = obj.remove("metadata") {
            for field in IDENTITY {
                if let Some(v) = m.remove(field) {
                    meta.insert(field.into(), v);
                }
            }
        }
        let mut out = Map::new();
        for field in ["apiVersion", "kind"] {
            if let Some(v) = obj.remove(field) {
                out.insert(field.into(), v);
            }
        }
        out.insert("metadata".into(), Value::Object(meta));
        Value::Object(out).to_string()
    }

    /// Why the call may not be made, as `denied`; else the declared kind it writes.
    fn check(&self, call: Call, t: &Target<'_>) -> Result<&ResolvedResource, WriteError> {
        let denied = |why: String| Err(WriteError::Denied(why));
        if let Some(ns) = t.namespace
            && let Err(why) = names::check_namespace(ns)
        {
            return denied(why.to_string());
        }
        let r = t.kind;
        if let Some(name) = t.name
            && let Err(why) = names::check_object_name(&r.group, &r.kind, name)
        {
            return denied(why.to_string());
        }
        let gvk = (r.group.as_str(), r.version.as_str(), r.kind.as_str());
        // A Namespace object is its namespace: the grants that hold a namespace hold it.
        let is_namespace = gvk == ("", "v1", "Namespace");
        let scope = if is_namespace { t.name } else { t.namespace };
        // Messages are only built for a refusal: an allowed write formats nothing.
        let kind = || {
            let api_version = if r.group.is_empty() {
                r.version.clone()
            } else {
                format!("{}/{}", r.group, r.version)
            };
            format!("{api_version}/{}", names::shown(&r.kind))
        };
        let verb = call.verb();
        let what = || {
            let ns = match (is_namespace, t.namespace, t.name) {
                (true, _, Some(name)) => format!(" `{name}`"),
                (false, Some(ns), _) => format!(" in namespace `{ns}`"),
                _ => String::new(),
            };
            format!("`{verb}` of `{}`{ns}", kind())
        };
        let Some(d) = self
            .declared
            .iter()
            .find(|d| d.write.allows(verb, gvk, scope))
        else {
            let declared: Vec<String> = self.declared.iter().map(|d| d.write.describe()).collect();
            return denied(format!(
                "{} is not declared in the manifest's [[write]] tables ({})",
                what(),
                if declared.is_empty() {
                    "none".to_string()
                } else {
                    declared.join("; ")
                }
            ));
        };
        match (d.resource.namespaced, t.namespace) {
            (true, None) => {
                return denied(format!("`{}` is namespaced: name the namespace", kind()));
            }
            (false, Some(_)) => {
                return denied(format!(
                    "`{}` is cluster-scoped: its objects have no namespace",
                    kind()
                ));
            }
            _ => {}
        }
        let Some(ceiling) = &self.ceiling else {
            // The operator's plugins: the manifest alone decides.
            return Ok(&d.resource);
        };
        if is_namespace && t.name.is_none() {
            return denied(format!(
                "{}: a tenant creates a Namespace by name (`metadata.name`), so that the name can \
                 be held to its namespaces; `generateName` cannot be",
                what()
            ));
        }
        if let Err(why) = self.grant.check_namespace(scope) {
            return denied(format!("{}: {why}", what()));
        }
        let cluster_scoped = !d.resource.namespaced;
        if !ceiling.iter().any(|c| {
            c.allows(verb, gvk, scope) && (!cluster_scoped || c.covers_cluster_scoped(gvk))
        }) {
            let why = if cluster_scoped {
                " (a cluster-scoped kind is writable only where the grant names it with \
                 `cluster-scoped = true`)"
            } else {
                ""
            };
            return denied(format!(
                "{} is outside tenant `{}`'s write grant{why}",
                what(),
                self.grant.tenant()
            ));
        }
        Ok(&d.resource)
    }
}

/// What a call writes to.
pub struct Target<'a> {
    /// The kind as the plugin named it.
    pub kind: &'a WitResource,
    /// Its namespace, `None` for cluster-scoped objects.
    pub namespace: Option<&'a str>,
    /// The object's name: the one the call names, or for a create the body's `metadata.name`.
    pub name: Option<&'a str>,
}

impl<'a> Target<'a> {
    /// `kind`'s object `name` (for a create, the name in its body, if any) in `namespace`.
    pub fn new(kind: &'a WitResource, namespace: Option<&'a str>, name: Option<&'a str>) -> Self {
        Target {
            kind,
            namespace,
            name,
        }
    }
}

/// A checked call about to be built into a request by kube's request builder.
pub struct Sending<'a> {
    /// The builder for the kind's collection in the call's namespace.
    pub request: Request,
    /// The object's name, checked and percent-encoded as one path segment.
    pub name: Option<String>,
    /// The kind, resolved.
    pub resource: &'a ResolvedResource,
    field_manager: &'a str,
}

impl Sending<'_> {
    /// The name the call was checked with (empty for a create, which posts to the collection).
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }

    /// Parameters of a create or replace: the plugin's field manager.
    pub fn post(&self) -> PostParams {
        PostParams {
            dry_run: false,
            field_manager: Some(self.field_manager.to_string()),
        }
    }

    /// Parameters of a patch: the plugin's field manager, and `force` for an apply.
    pub fn patch(&self, force: bool) -> PatchParams {
        PatchParams {
            field_manager: Some(self.field_manager.to_string()),
            force,
            ..PatchParams::default()
        }
    }

    /// Parameters of a delete, with its preconditions.
    pub fn delete(&self, preconditions: Preconditions) -> DeleteParams {
        DeleteParams {
            preconditions: Some(preconditions),
            ..DeleteParams::default()
        }
    }
}

/// A request kube's builder refused to make.
pub(crate) fn unbuildable(e: kube::core::request::Error) -> WriteError {
    WriteError::Denied(format!("could not build the request: {e}"))
}

/// A patch as kube sends it, from the plugin's text in the given format.
pub(crate) fn patch_of(kind: PatchKind, text: &str) -> Result<Patch<Value>, WriteError> {
    let not = |e: serde_json::Error| WriteError::Denied(format!("the patch is not JSON: {e}"));
    Ok(match kind {
        PatchKind::Merge => Patch::Merge(serde_json::from_str(text).map_err(not)?),
        PatchKind::Strategic => Patch::Strategic(serde_json::from_str(text).map_err(not)?),
        PatchKind::Json => Patch::Json(serde_json::from_str(text).map_err(|e| {
            WriteError::Denied(format!("the patch is not a JSON patch (RFC 6902): {e}"))
        })?),
    })
}

/// The patch formats the `kube` import takes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum PatchKind {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/json-patch+json`.
    Json,
    /// `application/strategic-merge-patch+json`.
    Strategic,
}

/// The metadata a write returns of an object its tenant may not read.
const IDENTITY: [&str; 5] = ["name", "namespace", "uid", "resourceVersion", "generation"];

/// `informant/TENANT/PLUGIN`, cut to the API server's 128 characters.
fn field_manager(tenant: &str, plugin: &str) -> String {
    let mut m = if tenant.is_empty() {
        format!("informant/{plugin}")
    } else {
        format!("informant/{tenant}/{plugin}")
    };
    if m.len() > 128 {
        let mut end = 128;
        while !m.is_char_boundary(end) {
            end -= 1;
        }
        m.truncate(end);
    }
    m
}

/// A kube client error as the plugin sees it.
fn api_error(e: kube::Error) -> WriteError {
    match e {
        kube::Error::Api(s) => {
            let err = ApiError {
                code: s.code,
                reason: s.reason.clone(),
                message: s.message.clone(),
            };
            match s.code {
                409 => WriteError::Conflict(err),
                404 => WriteError::NotFound(err),
                403 => WriteError::Forbidden(err),
                422 => WriteError::Invalid(err),
                _ => WriteError::Other(err),
            }
        }
        other => WriteError::Other(ApiError {
            code: 0,
            reason: String::new(),
            message: other.to_string(),
        }),
    }
}

/// Parses an object a plugin sends and makes its identity agree with the call: apiVersion and
/// kind are filled in or must match, and so must metadata.namespace and (when the call names
/// one) metadata.name. Returns the JSON to send.
pub(crate) fn object_body(
    object: &str,
    resource: &ResolvedResource,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Result<Vec<u8>, WriteError> {
    let denied = |why: String| Err(WriteError::Denied(why));
    let mut value: Value = match serde_json::from_str(object) {
        Ok(v) => v,
        Err(e) => return denied(format!("the object is not JSON: {e}")),
    };
    let Some(obj) = value.as_object_mut() else {
        return denied("the object is not a JSON object".into());
    };
    let ar = &resource.api_resource;
    for (field, want) in [("apiVersion", &ar.api_version), ("kind", &ar.kind)] {
        match obj.get(field) {
            None => {
                obj.insert(field.into(), Value::String(want.clone()));
            }
            Some(Value::String(s)) if s == want => {}
            Some(other) => {
                return denied(format!(
                    "the object's {field} is {other}, but the call writes `{want}`"
                ));
            }
        }
    }
    let meta = obj
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(meta) = meta.as_object_mut() else {
        return denied("the object's metadata is not a JSON object".into());
    };
    for (field, want) in [("namespace", namespace), ("name", name)] {
        match (meta.get(field), want) {
            (None, Some(w)) => {
                meta.insert(field.into(), Value::String(w.into()));
            }
            (None, None) => {}
            (Some(Value::String(s)), Some(w)) if s == w => {}
            (Some(other), Some(w)) => {
                return denied(format!(
                    "the object's metadata.{field} is {other}, but the call names `{w}`"
                ));
            }
            (Some(other), None) if field == "namespace" => {
                return denied(format!(
                    "the object's metadata.namespace is {other}, but the call names no namespace"
                ));
            }
            // A create names the object in its body.
            (Some(Value::String(s)), None) => {
                if let Err(why) = names::check_name(s) {
                    return denied(why.to_string());
                }
            }
            (Some(other), None) => {
                return denied(format!(
                    "the object's metadata.{field} is {other}, not a string"
                ));
            }
        }
    }
    Ok(serde_json::to_vec(&value).expect("a Value serializes"))
}

/// An `events.k8s.io/v1` Event about `regarding`, reported by this plugin.
pub(crate) fn event_body(
    regarding: Value,
    namespace: &str,
    (severity, reason, action, note): (&str, &str, &str, &str),
    (field_manager, regarding_name): (&str, &str),
) -> Vec<u8> {
    let now = jiff::Timestamp::now();
    let event = json!({
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {
            "generateName": format!("{}.", regarding_name.chars().take(200).collect::<String>()),
            "namespace": namespace,
        },
        "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
        "reportingController": field_manager,
        "reportingInstance": field_manager,
        "type": severity,
        "reason": reason,
        "action": action,
        "note": note,
        "regarding": regarding,
    });
    serde_json::to_vec(&event).expect("a Value serializes")
}
