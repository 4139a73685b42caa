//! The reviews: objects that are only ever created, answered from the request and never stored
//! (discovery lists them with the single verb `create`, as the apiserver does).
//!
//! - `SelfSubjectAccessReview` ("may I do this?", what `kubectl auth can-i` asks) and
//!   `SelfSubjectRulesReview` ("what may I do in this namespace?", `kubectl auth can-i --list`),
//!   answered for the request's identity; every authenticated user may create them.
//! - `SubjectAccessReview` ("may this user do this?"), answered for the user the spec names
//!   with the same rules every request is held to.
//! - `TokenReview` ("whose token is this?"): the user, uid and groups of a token this server
//!   issued; `authenticated: false` for a token unknown, revoked or expired.
//!
//! The last two are what a server that delegates authentication and authorization asks; they
//! need `create` on `subjectaccessreviews` / `tokenreviews` (the `system:auth-delegator`
//! ClusterRole, [`AllowRule::auth_delegator`](crate::audit::AllowRule::auth_delegator)).

use serde_json::{Value, json};

use super::identity::Identity;
use super::rbac::{Attributes, Rbac};
use super::{Cause, Error, Result, Shared};

const AUTHORIZATION: &str = "authorization.k8s.io";
const AUTHENTICATION: &str = "authentication.k8s.io";

/// Plural of the self access review resource.
pub(crate) const ACCESS: &str = "selfsubjectaccessreviews";
/// Plural of the self rules review resource.
pub(crate) const RULES: &str = "selfsubjectrulesreviews";
/// Plural of the subject access review resource.
pub(crate) const SUBJECT_ACCESS: &str = "subjectaccessreviews";
/// Plural of the token review resource.
pub(crate) const TOKEN: &str = "tokenreviews";

fn invalid(kind: &str, group: &str, cause: Cause) -> Error {
    Error::Invalid {
        kind: kind.into(),
        group: group.into(),
        name: String::new(),
        causes: vec![cause],
    }
}

/// The review `obj` (posted to `plural`) with its status filled in for `who` (the caller).
pub(crate) fn answer(shared: &Shared, who: &Identity, plural: &str, obj: Value) -> Result<Value> {
    let (kind, group) = match plural {
        ACCESS => ("SelfSubjectAccessReview", AUTHORIZATION),
        RULES => ("SelfSubjectRulesReview", AUTHORIZATION),
        SUBJECT_ACCESS => ("SubjectAccessReview", AUTHORIZATION),
        TOKEN => ("TokenReview", AUTHENTICATION),
        other => {
            return Err(Error::UnknownResource {
                what: other.to_string(),
            });
        }
    };
    if obj["kind"].as_str().is_some_and(|k| k != kind) {
        return Err(Error::BadRequest(format!(
            "the body is a {}, not a {kind}",
            obj["kind"]
        )));
    }
    let spec = obj.get("spec").cloned().unwrap_or_else(|| json!({}));
    let rbac = &shared.rbac;
    let status = match plural {
        ACCESS => {
            let user = who.user.as_deref();
            let allowed = access(rbac, Subject::Caller(user), &spec)
                .map_err(|cause| invalid(kind, group, cause))?;
            access_status(allowed, user)
        }
        SUBJECT_ACCESS => {
            let user = spec["user"].as_str().unwrap_or_default();
            let has_groups = spec["groups"].as_array().is_some_and(|g| !g.is_empty());
            if user.is_empty() && !has_groups {
                return Err(invalid(
                    kind,
                    group,
                    Cause::invalid(
                        "spec.user",
                        "\"\"",
                        "at least one of user or group must be specified",
                    ),
                ));
            }
            let allowed = access(rbac, Subject::Named(user), &spec)
                .map_err(|cause| invalid(kind, group, cause))?;
            access_status(allowed, Some(user))
        }
        TOKEN => {
            let token = spec["token"].as_str().unwrap_or_default();
            if token.is_empty() {
                return Err(invalid(kind, group, Cause::required("spec.token", "")));
            }
            token_status(shared, token, &spec["audiences"])
        }
        _ => {
            let namespace = spec["namespace"].as_str().unwrap_or_default();
            if namespace.is_empty() {
                return Err(Error::BadRequest("no namespace on request".into()));
            }
            let (resource_rules, non_resource_rules) =
                rbac.rules_in(who.user.as_deref(), namespace);
            json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules,
                "incomplete": false})
        }
    };
    let mut metadata = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    metadata["creationTimestamp"] = Value::Null;
    Ok(
        json!({"kind": kind, "apiVersion": format!("{group}/v1"), "metadata": metadata,
        "spec": spec, "status": status}),
    )
}

/// Whom an access review asks about.
#[derive(Clone, Copy)]
enum Subject<'a> {
    /// The caller itself (`None`: the unauthenticated admin).
    Caller(Option<&'a str>),
    /// The user a SubjectAccessReview names; empty when it names groups only, which no rule
    /// here binds, so such a subject may do only what every user may.
    Named(&'a str),
}

/// Whether the subject may do what `spec` asks (its resource or non-resource attributes).
fn access(rbac: &Rbac, subject: Subject<'_>, spec: &Value) -> Result<bool, Cause> {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let user = match subject {
        Subject::Caller(user) => user,
        // The empty user is nobody in particular, never the unauthenticated admin.
        Subject::Named("") => Some(""),
        Subject::Named(user) => Some(user),
    };
    Ok(
        match (
            spec.get("resourceAttributes"),
            spec.get("nonResourceAttributes"),
        ) {
            (Some(r), None) => {
                let namespace = s(&r["namespace"]);
                let name = s(&r["name"]);
                let a = Attributes {
                    verb: s(&r["verb"]),
                    group: s(&r["group"]),
                    resource: s(&r["resource"]),
                    subresource: s(&r["subresource"]),
                    namespace: (!namespace.is_empty()).then_some(namespace),
                    name: (!name.is_empty()).then_some(name),
                };
                if user == Some("") {
                    rbac.allows_everyone(&a)
                } else {
                    rbac.allows(user, &a)
                }
            }
            (None, Some(n)) => {
                let (verb, path) = (s(&n["verb"]), s(&n["path"]));
                if user == Some("") {
                    verb == "get" && super::rbac::is_discovery(&path)
                } else {
                    rbac.allows_path(user, &verb, &path)
                }
            }
            _ => {
                return Err(Cause::invalid(
                    "spec.resourceAttributes",
                    "null",
                    "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                ));
            }
        },
    )
}

/// An access review's status: RBAC never denies outright, it only does not allow, so a refusal
/// is `allowed: false` with no reason (what `kubectl auth can-i` prints as a bare `no`).
fn access_status(allowed: bool, user: Option<&str>) -> Value {
    match (allowed, user) {
        (false, _) => json!({"allowed": false}),
        (true, None) => json!({"allowed": true,
            "reason": "the unauthenticated caller is the devserver's admin"}),
        (true, Some(user)) => json!({"allowed": true,
            "reason": format!("allowed by the devserver's rules for User \"{user}\"")}),
    }
}

/// A token review's status: the token's user, or `authenticated: false` with the apiserver's
/// error for a token it does not accept.
fn token_status(shared: &Shared, token: &str, audiences: &Value) -> Value {
    match shared.tokens.lookup(token) {
        Some(who) => {
            let mut status = json!({"authenticated": true, "user": {
                "username": who.user, "uid": who.uid, "groups": who.groups}});
            // This server's tokens are good for any audience: the ones asked for are the ones
            // granted, as the apiserver answers for an audience-agnostic authenticator.
            if audiences.as_array().is_some_and(|a| !a.is_empty()) {
                status["audiences"] = audiences.clone();
            }
            status
        }
        None => json!({"authenticated": false, "user": {},
            "error": "[invalid bearer token, token lookup failed]"}),
    }
}
