//! Writes to the cluster for plugins: the `kube` import, behind three locks.
//!
//! 1. The plugin's manifest declares each kind, verb and namespace it writes (`[[write]]`).
//! 2. Its tenant's grant is a ceiling over that: checked at load by
//!    [`admission`](super::admission), and again here on every call, with the namespace the
//!    call names held to the tenant's namespaces.
//! 3. On a real cluster a tenant's writes are sent impersonating the identity its grant names,
//!    so the cluster's RBAC has the last word.
//!
//! Whatever a lock refuses is `denied` before any request leaves the host. Names and namespaces
//! are checked as the API server would before they go into a URL, and an object's own
//! apiVersion, kind, namespace and name must agree with the call, so a body cannot smuggle a
//! write somewhere the call was not allowed to go.
//!
//! A call waits for its tenant's write budget and for the API server inside the event's
//! deadline: both are async host calls under the call's timeout.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kube::core::{DynamicObject, Resource as _};
use serde_json::{Map, Value, json};

use crate::informer::ResolvedResource;
use crate::manifest::{Verb, Write};
use crate::selector::names;
use crate::tenancy::{Budget, Grant, Impersonate};

use super::host::WitResource;
use super::host::bindings::informant::plugin::kube::{ApiError, WriteError};

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

/// Where writes go: the API server and how to speak to it.
#[derive(Clone)]
pub struct Cluster {
    /// The host's client.
    pub client: kube::Client,
    /// Every write with `dryRun=All`: validated and admitted by the server, never persisted.
    pub dry_run: bool,
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
pub struct Writer {
    cluster: Option<Cluster>,
    declared: Vec<Declared>,
    grant: Arc<Grant>,
    /// The tenant's `write` tables; `None` for the operator (the manifest alone decides).
    ceiling: Option<Vec<Write>>,
    impersonate: Option<Impersonate>,
    budget: Option<Arc<Budget>>,
    field_manager: String,
    /// What it did.
    pub stats: WriteStats,
}

impl Default for Writer {
    /// Writes nothing: no cluster, nothing declared.
    fn default() -> Self {
        Writer {
            cluster: None,
            declared: Vec::new(),
            grant: Arc::new(Grant::full()),
            ceiling: None,
            impersonate: None,
            budget: None,
            field_manager: String::new(),
            stats: WriteStats::default(),
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

impl Writer {
    /// A writer for plugin `plugin` of `tenant`; `cluster` is `None` where there is no API
    /// server to write to (`replay`), and every call is then denied.
    pub fn new(
        cluster: Option<Cluster>,
        declared: Vec<Declared>,
        (plugin, tenant): (&str, &str),
        tenant_writes: TenantWrites,
    ) -> Self {
        Writer {
            cluster,
            declared,
            grant: tenant_writes.grant,
            ceiling: tenant_writes.ceiling,
            impersonate: tenant_writes.impersonate,
            budget: tenant_writes.budget,
            field_manager: field_manager(tenant, plugin),
            stats: WriteStats::default(),
        }
    }

    /// The field manager its writes are made as: `informant/TENANT/PLUGIN` (`informant/PLUGIN`
    /// for the operator's), at most 128 characters as the API server requires.
    pub fn field_manager(&self) -> &str {
        &self.field_manager
    }

    /// Runs one call: checks it, waits for the budget, sends it, counts the outcome.
    pub async fn run(
        &self,
        call: Call,
        target: Target<'_>,
        build: impl FnOnce(&Sending<'_>) -> Result<http::Request<Vec<u8>>, WriteError>,
    ) -> Result<String, WriteError> {
        let result = self.run_inner(call, target, build).await;
        self.stats.count(call, Outcome::of(&result));
        result
    }

    async fn run_inner(
        &self,
        call: Call,
        target: Target<'_>,
        build: impl FnOnce(&Sending<'_>) -> Result<http::Request<Vec<u8>>, WriteError>,
    ) -> Result<String, WriteError> {
        let Some(cluster) = &self.cluster else {
            return Err(WriteError::Denied(
                "there is no cluster to write to here (`replay` runs without one)".into(),
            ));
        };
        let resource = self.check(call, &target)?;
        let sending = Sending {
            url: DynamicObject::url_path(&resource.api_resource, target.namespace),
            resource,
            query: self.query(cluster.dry_run),
        };
        let mut request = build(&sending)?;
        if let Some(who) = &self.impersonate {
            let headers = request.headers_mut();
            let value = |s: &str| {
                http::HeaderValue::from_str(s).map_err(|_| {
                    WriteError::Denied(format!(
                        "impersonated identity `{}` is not a header value",
                        names::shown(s)
                    ))
                })
            };
            headers.insert("Impersonate-User", value(&who.user)?);
            for g in &who.groups {
                headers.append("Impersonate-Group", value(g)?);
            }
        }
        if let Some(budget) = &self.budget {
            budget.acquire().await;
        }
        cluster
            .client
            .request_text(request)
            .await
            .map_err(api_error)
    }

    /// The query every write carries: the field manager, and `dryRun=All` when asked.
    fn query(&self, dry_run: bool) -> String {
        let mut q = form_urlencoded::Serializer::new(String::new());
        q.append_pair("fieldManager", &self.field_manager);
        if dry_run {
            q.append_pair("dryRun", "All");
        }
        q.finish()
    }

    /// Why the call may not be made, as `denied`; else the declared kind it writes.
    fn check(&self, call: Call, t: &Target<'_>) -> Result<&ResolvedResource, WriteError> {
        let denied = |why: String| Err(WriteError::Denied(why));
        if let Some(ns) = t.namespace
            && let Err(why) = names::check_namespace(ns)
        {
            return denied(why);
        }
        if let Some(name) = t.name
            && let Err(why) = names::check_name(name)
        {
            return denied(why);
        }
        let r = t.kind;
        let gvk = (r.group.as_str(), r.version.as_str(), r.kind.as_str());
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
            let ns = t
                .namespace
                .map_or(String::new(), |ns| format!(" in namespace `{ns}`"));
            format!("`{verb}` of `{}`{ns}", kind())
        };
        let Some(d) = self
            .declared
            .iter()
            .find(|d| d.write.allows(verb, gvk, t.namespace))
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
        if let Err(why) = self.grant.check_namespace(t.namespace) {
            return denied(format!("{}: {why}", what()));
        }
        if let Some(ceiling) = &self.ceiling
            && !ceiling.iter().any(|c| c.allows(verb, gvk, t.namespace))
        {
            return denied(format!(
                "{} is outside tenant `{}`'s write grant",
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
    /// The object's name, for calls on an existing object.
    pub name: Option<&'a str>,
}

impl<'a> Target<'a> {
    /// `kind`'s object `name` (none for a create) in `namespace`.
    pub fn new(kind: &'a WitResource, namespace: Option<&'a str>, name: Option<&'a str>) -> Self {
        Target {
            kind,
            namespace,
            name,
        }
    }
}

/// A checked call about to be built into a request.
pub struct Sending<'a> {
    /// The collection's path, e.g. `/apis/apps/v1/namespaces/a/deployments`.
    pub url: String,
    /// The kind, resolved.
    pub resource: &'a ResolvedResource,
    /// `fieldManager=...[&dryRun=All]`.
    pub query: String,
}

impl Sending<'_> {
    /// A request to the collection (`name` `None`) or to an object or its subresource.
    pub fn request(
        &self,
        method: http::Method,
        name: Option<&str>,
        subresource: Option<&str>,
        extra_query: &[(&str, &str)],
        (content_type, body): (&str, Vec<u8>),
    ) -> Result<http::Request<Vec<u8>>, WriteError> {
        let mut path = self.url.clone();
        for part in [name, subresource].into_iter().flatten() {
            path.push('/');
            path.push_str(part);
        }
        let mut query = self.query.clone();
        let mut extra = form_urlencoded::Serializer::new(String::new());
        extra.extend_pairs(extra_query);
        let extra = extra.finish();
        if !extra.is_empty() {
            query.push('&');
            query.push_str(&extra);
        }
        http::Request::builder()
            .method(method)
            .uri(format!("{path}?{query}"))
            .header(http::header::ACCEPT, "application/json")
            .header(http::header::CONTENT_TYPE, content_type)
            .body(body)
            .map_err(|e| WriteError::Denied(format!("could not build the request: {e}")))
    }
}

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
pub fn object_body(
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
                    return denied(why);
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
pub fn event_body(
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
