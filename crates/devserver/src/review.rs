//! The self access reviews of `authorization.k8s.io/v1`, answered for the request's identity
//! with the same rules every request is held to: `SelfSubjectAccessReview` ("may I do this?",
//! what `kubectl auth can-i` asks) and `SelfSubjectRulesReview` ("what may I do in this
//! namespace?", `kubectl auth can-i --list`). They are only ever created: nothing is stored,
//! and discovery lists them with the single verb `create`, as the apiserver does.

use serde_json::{Value, json};

use super::identity::Identity;
use super::rbac::{Attributes, Rbac};
use super::{Cause, Error, Result};

const GROUP: &str = "authorization.k8s.io";

/// Plural of the access review resource.
pub(crate) const ACCESS: &str = "selfsubjectaccessreviews";
/// Plural of the rules review resource.
pub(crate) const RULES: &str = "selfsubjectrulesreviews";

fn invalid(kind: &str, cause: Cause) -> Error {
    Error::Invalid {
        kind: kind.into(),
        group: GROUP.into(),
        name: String::new(),
        causes: vec![cause],
    }
}

/// The review `obj` (posted to `plural`) with its status filled in for `who`.
pub(crate) fn answer(rbac: &Rbac, who: &Identity, plural: &str, obj: Value) -> Result<Value> {
    let kind = match plural {
        ACCESS => "SelfSubjectAccessReview",
        RULES => "SelfSubjectRulesReview",
        other => {
            return Err(Error::UnknownResource {
                what: format!("{other}.{GROUP}"),
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
    let user = who.user.as_deref();
    let status = if plural == ACCESS {
        access(rbac, user, &spec).map_err(|cause| invalid(kind, cause))?
    } else {
        let namespace = spec["namespace"].as_str().unwrap_or_default();
        if namespace.is_empty() {
            return Err(Error::BadRequest("no namespace on request".into()));
        }
        let (resource_rules, non_resource_rules) = rbac.rules_in(user, namespace);
        json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules,
            "incomplete": false})
    };
    let mut metadata = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    metadata["creationTimestamp"] = Value::Null;
    Ok(
        json!({"kind": kind, "apiVersion": format!("{GROUP}/v1"), "metadata": metadata,
        "spec": spec, "status": status}),
    )
}

/// An access review's status: RBAC never denies outright, it only does not allow, so a refusal
/// is `allowed: false` with no reason (what `kubectl auth can-i` prints as a bare `no`).
fn access(rbac: &Rbac, user: Option<&str>, spec: &Value) -> Result<Value, Cause> {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let allowed = match (
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
            rbac.allows(user, &a)
        }
        (None, Some(n)) => rbac.allows_path(user, &s(&n["verb"]), &s(&n["path"])),
        _ => {
            return Err(Cause::invalid(
                "spec.resourceAttributes",
                "null",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ));
        }
    };
    Ok(match (allowed, user) {
        (false, _) => json!({"allowed": false}),
        (true, None) => json!({"allowed": true,
            "reason": "the unauthenticated caller is the devserver's admin"}),
        (true, Some(user)) => json!({"allowed": true,
            "reason": format!("allowed by the devserver's rules for User \"{user}\"")}),
    })
}
