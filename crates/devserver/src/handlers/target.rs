//! A request's resource path resolved to its target, and whether its identity may act on it
//! (the embedded server's RBAC, per verb and subresource).

use std::sync::Arc;

use axum::extract::Request;
use http::Method;

use super::{Params, flag};
use crate::api::Sub;
use crate::audit::{AccessRecord, AuditRecord};
use crate::identity::Identity;
use crate::rbac::{self, Attributes};
use crate::resources::ResourceType;
use crate::{Error, Result, Shared};

/// A resolved resource path.
pub(super) struct Target {
    pub(super) res: Arc<ResourceType>,
    pub(super) version: String,
    pub(super) namespace: Option<String>,
    pub(super) name: Option<String>,
    pub(super) sub: Sub,
    /// A subresource that is an action rather than a view of the object.
    pub(super) action: Option<Action>,
}

/// Subresources that do something instead of reading or writing part of the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    /// `pods/eviction`: the Eviction API (no PodDisruptionBudgets here, so it deletes).
    Eviction,
    /// `pods/log`: there is no kubelet to read from.
    Log,
    /// `serviceaccounts/token`: a TokenRequest answered with an unsigned token.
    Token,
    /// `pods/portforward`: a websocket to the pod's `status.podIP` (see `portforward`).
    PortForward,
}

impl Action {
    pub(super) fn name(self) -> &'static str {
        match self {
            Action::Eviction => "eviction",
            Action::Log => "log",
            Action::Token => "token",
            Action::PortForward => "portforward",
        }
    }
}

pub(super) fn parse_target(
    shared: &Shared,
    group: &str,
    version: &str,
    rest: &[&str],
    path: &str,
) -> Result<Target> {
    let unknown = || Error::UnknownResource {
        what: path.to_string(),
    };
    let reg = shared.api.registry();
    let (namespace, rest): (Option<String>, Vec<&str>) = match rest {
        ["namespaces", ns, plural, ..]
            if reg
                .by_path(group, version, plural)
                .is_some_and(|r| r.namespaced) =>
        {
            (Some(ns.to_string()), rest[2..].to_vec())
        }
        _ => (None, rest.to_vec()),
    };
    let (plural, name, sub) = match rest.as_slice() {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(name.to_string()), None),
        [plural, name, sub] => (*plural, Some(name.to_string()), Some(*sub)),
        _ => return Err(unknown()),
    };
    let res = reg.by_path(group, version, plural).ok_or_else(unknown)?;
    let core = |kind: &str| res.group.is_empty() && res.kind == kind;
    let (sub, action) = match sub {
        None => (Sub::Main, None),
        Some("status") if res.status_subresource => (Sub::Status, None),
        Some("scale") if res.scale.is_some() => (Sub::Scale, None),
        Some("eviction") if core("Pod") => (Sub::Main, Some(Action::Eviction)),
        Some("log") if core("Pod") => (Sub::Main, Some(Action::Log)),
        Some("portforward") if core("Pod") => (Sub::Main, Some(Action::PortForward)),
        Some("token") if core("ServiceAccount") => (Sub::Main, Some(Action::Token)),
        Some(_) => return Err(unknown()),
    };
    if res.namespaced && namespace.is_none() && name.is_some() {
        return Err(unknown());
    }
    Ok(Target {
        res,
        version: version.to_string(),
        namespace,
        name,
        sub,
        action,
    })
}

/// The subresource's name, empty for the main resource.
fn subresource_name(t: &Target) -> &'static str {
    match (t.action, t.sub) {
        (Some(a), _) => a.name(),
        (None, Sub::Main) => "",
        (None, Sub::Status) => "status",
        (None, Sub::Scale) => "scale",
    }
}

/// What the request asks of the authorizer, as the apiserver's request info reads it from the
/// same path and query this server then serves (so the two can never disagree).
fn attributes(t: &Target, method: &Method, q: &Params) -> Attributes {
    let verb = match (method, &t.name) {
        // A port-forward's websocket upgrade is a GET, authorized as `create` (what
        // kube-apiserver asks of a websocket upgrade to a pod's connect subresource).
        _ if t.action == Some(Action::PortForward) => "create".to_string(),
        (&Method::GET | &Method::HEAD, Some(_)) => "get".to_string(),
        (&Method::GET | &Method::HEAD, None) if flag(q, "watch") => "watch".to_string(),
        (&Method::GET | &Method::HEAD, None) => "list".to_string(),
        (&Method::DELETE, None) => "deletecollection".to_string(),
        (m, _) => write_verb(m).map_or_else(|| m.as_str().to_ascii_lowercase(), String::from),
    };
    // A list or watch of one object by field selector is authorized by that name.
    let name = t.name.clone().or_else(|| {
        let selector = q
            .get("fieldSelector")
            .filter(|_| verb == "list" || verb == "watch")?;
        selector.split(',').find_map(|term| {
            let value = term
                .strip_prefix("metadata.name==")
                .or_else(|| term.strip_prefix("metadata.name="))?;
            (!value.is_empty()).then(|| value.to_string())
        })
    });
    // `namespaces/x` is in namespace x, so a rule for that namespace reaches the object itself.
    let is_namespace = t.res.group.is_empty() && t.res.plural == "namespaces";
    let namespace = match (&t.namespace, is_namespace) {
        (None, true) => t.name.clone(),
        (ns, _) => ns.clone(),
    };
    Attributes {
        verb,
        group: t.res.group.clone(),
        resource: t.res.plural.clone(),
        subresource: subresource_name(t).to_string(),
        namespace,
        name,
    }
}

/// Authorizes the request and records it (and a write in the audit too); the apiserver's 403
/// if the rules refuse it.
pub(super) fn authorize(
    shared: &Shared,
    who: &Identity,
    t: &Target,
    req: &Request,
    q: &Params,
) -> Result<()> {
    let attrs = attributes(t, req.method(), q);
    let user = who.user.as_deref();
    let allowed = shared.rbac.allows(user, &attrs);
    shared.audit.record_request(AccessRecord::new(
        who.user.clone(),
        who.groups.clone(),
        &attrs,
        allowed,
        std::time::Instant::now(),
    ));
    // An access review is answered, not written: the write audit never saw one and still
    // does not.
    if let Some(verb) = write_verb(req.method()).filter(|_| !t.res.review) {
        shared.audit.record_write(AuditRecord {
            user: who.user.clone(),
            groups: who.groups.clone(),
            verb: verb.into(),
            resource: t.res.qualified(),
            subresource: subresource_name(t).into(),
            namespace: t.namespace.clone(),
            name: t.name.clone(),
            field_manager: q.get("fieldManager").cloned(),
            dry_run: q.get("dryRun").is_some_and(|v| v == "All"),
            allowed,
        });
    }
    if allowed {
        Ok(())
    } else {
        Err(rbac::forbidden(user.unwrap_or_default(), &attrs))
    }
}

/// The Kubernetes verb of a write method.
fn write_verb(method: &Method) -> Option<&'static str> {
    match *method {
        Method::POST => Some("create"),
        Method::PUT => Some("update"),
        Method::PATCH => Some("patch"),
        Method::DELETE => Some("delete"),
        _ => None,
    }
}
