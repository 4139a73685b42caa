//! One request to one hook: whether the plugin is asked at all, its answer checked, and its
//! failure policy applied when it gives none.

use std::time::Duration;

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use serde_json::Value;

use crate::admission::review::{self, denied};
use crate::manifest::admit::{FailurePolicy, Mode};
use crate::plugin::bindings::admitting::informant::plugin::admission::Response;
use crate::plugin::exec::admit::{Admitter, Decision, Hook};
use crate::plugin::text::{escape_controls, truncated};

/// At most this many warnings of a plugin reach the client.
pub(crate) const MAX_WARNINGS: usize = 16;

/// Each warning is cut to this many bytes.
pub(crate) const MAX_WARNING_BYTES: usize = 256;

/// A denial's message is cut to this many bytes.
pub(crate) const MAX_MESSAGE_BYTES: usize = 4096;

/// Plugin-made text cut to `max` bytes and kept on one line.
fn bounded(text: String, max: usize) -> String {
    escape_controls(&truncated(text, max)).into_owned()
}

/// The answer to one request.
pub(crate) struct Answered {
    /// What goes back to the API server.
    pub response: AdmissionResponse,
    /// How it ended.
    pub decision: Decision,
    /// Why the plugin gave no usable answer (`timeout`, `trap`, `busy`, `invalid`, ...).
    pub failure: Option<(&'static str, String)>,
}

/// Asks `admitter`'s plugin about `req` through `hook`, if the request is the hook's to judge.
pub(crate) async fn answer(
    admitter: &Admitter,
    hook: &Hook,
    req: &AdmissionRequest<DynamicObject>,
) -> Answered {
    let allowed = |decision| Answered {
        response: AdmissionResponse::from(req),
        decision,
        failure: None,
    };
    if !is_for(hook, req) || !admitter.grant().allows_namespace(scope_of(req)) {
        return allowed(Decision::Skip);
    }
    let failed = |reason: &'static str, message: String| failure(hook, req, reason, message);
    let request = match review::to_wit(req, hook.table.name.as_str()) {
        Ok(r) => r,
        Err(e) => return failed("invalid", format!("the request does not encode: {e}")),
    };
    let timeout = Duration::from_millis(hook.table.timeout_ms().into());
    let response = match admitter.admit(&request, timeout).await {
        Ok(r) => r,
        Err(e) => return failed(e.reason(), e.to_string()),
    };
    match checked(hook, req, response) {
        Ok((response, decision)) => Answered {
            response,
            decision,
            failure: None,
        },
        Err(why) => failed("invalid", why.to_string()),
    }
}

/// Whether `req` is of the hook's kind and one of its operations: the API server sends only
/// those, so anything else is misrouted or forged and never reaches the plugin.
pub(crate) fn is_for(hook: &Hook, req: &AdmissionRequest<DynamicObject>) -> bool {
    let ar = &hook.resource.api_resource;
    req.kind.group == ar.group
        && req.kind.version == ar.version
        && req.kind.kind == ar.kind
        && hook
            .table
            .operations
            .contains(&review::operation(&req.operation))
}

/// The namespace a request's object is in, as a grant sees it: a Namespace is its own.
fn scope_of(req: &AdmissionRequest<DynamicObject>) -> Option<&str> {
    if req.kind.group.is_empty() && req.kind.kind == "Namespace" {
        return Some(req.name.as_str());
    }
    req.namespace.as_deref().filter(|ns| !ns.is_empty())
}

/// Why a plugin's answer cannot be given to the API server: the hook's failure policy applies.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unusable {
    /// A denial whose status code is not an HTTP error (400–599).
    #[error("denied with {0}, which is not an HTTP error code")]
    Code(u16),
    /// A validating hook may not change the object.
    #[error("a validating hook answered with a patch")]
    PatchFromValidating,
    /// The patch is not RFC 6902 JSON.
    #[error("its patch is not a JSON Patch (RFC 6902): {0}")]
    NotJsonPatch(#[source] serde_json::Error),
    /// A patch for a request with nothing to patch (a DELETE, a CONNECT).
    #[error("it patched a {0} request, which has no object")]
    NoObject(&'static str),
    /// The request's object could not be read back as JSON to try the patch on.
    #[error("the request's object does not serialize: {0}")]
    Object(#[source] serde_json::Error),
    /// The patch fails on the object (a test that fails, a path that is not there).
    #[error("its patch does not apply: {0}")]
    DoesNotApply(#[source] json_patch::PatchError),
    /// The patch changes what names the object: the API server would refuse it or act on
    /// another object.
    #[error("its patch changes `{0}`")]
    Identity(String),
    /// The patch could not be encoded into the response.
    #[error("its patch does not serialize: {0}")]
    Encode(#[source] kube::core::admission::SerializePatchError),
}

/// The plugin's answer as a response, once it holds up: warnings bounded, a patch only from a
/// mutating hook, well-formed, applying to the object and leaving its identity alone.
fn checked(
    hook: &Hook,
    req: &AdmissionRequest<DynamicObject>,
    answer: Response,
) -> Result<(AdmissionResponse, Decision), Unusable> {
    let warnings: Vec<String> = answer
        .warnings
        .into_iter()
        .take(MAX_WARNINGS)
        .map(|w| bounded(w, MAX_WARNING_BYTES))
        .collect();
    if !answer.allowed {
        let code = match answer.code {
            0 => 403,
            c if (400..600).contains(&c) => c,
            other => return Err(Unusable::Code(other)),
        };
        let mut response = denied(req, code, bounded(answer.message, MAX_MESSAGE_BYTES));
        response.warnings = (!warnings.is_empty()).then_some(warnings);
        return Ok((response, Decision::Deny));
    }
    let mut response = AdmissionResponse::from(req);
    response.warnings = (!warnings.is_empty()).then_some(warnings);
    let Some(text) = answer.patch else {
        return Ok((response, Decision::Allow));
    };
    if hook.table.mode == Mode::Validate {
        return Err(Unusable::PatchFromValidating);
    }
    let patch: json_patch::Patch = serde_json::from_str(&text).map_err(Unusable::NotJsonPatch)?;
    let Some(object) = &req.object else {
        return Err(Unusable::NoObject(
            review::operation(&req.operation).as_kubernetes(),
        ));
    };
    let before = serde_json::to_value(object).map_err(Unusable::Object)?;
    let mut after = before.clone();
    json_patch::patch(&mut after, &patch).map_err(Unusable::DoesNotApply)?;
    for path in [
        &["apiVersion"][..],
        &["kind"],
        &["metadata", "name"],
        &["metadata", "namespace"],
        &["metadata", "generateName"],
    ] {
        let at = |v: &Value| path.iter().try_fold(v, |v, k| v.get(k)).cloned();
        if at(&before) != at(&after) {
            return Err(Unusable::Identity(path.join(".")));
        }
    }
    response = response.with_patch(patch).map_err(Unusable::Encode)?;
    Ok((response, Decision::Allow))
}

/// The hook's failure policy applied to a request its plugin gave no usable answer to.
fn failure(
    hook: &Hook,
    req: &AdmissionRequest<DynamicObject>,
    reason: &'static str,
    message: String,
) -> Answered {
    let what = format!("hook `{}` failed: {message}", hook.table.name);
    let (response, decision) = match hook.table.failure_policy {
        FailurePolicy::Fail => (denied(req, 500, what.clone()), Decision::Fail),
        FailurePolicy::Ignore => {
            let mut allowed = AdmissionResponse::from(req);
            allowed.warnings = Some(vec![bounded(
                format!("{what} (failure-policy ignore: allowed)"),
                MAX_WARNING_BYTES,
            )]);
            (allowed, Decision::Ignore)
        }
    };
    Answered {
        response,
        decision,
        failure: Some((reason, what)),
    }
}
