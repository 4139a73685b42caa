//! The AdmissionReview v1 a webhook is sent (kube-core's `AdmissionReview<DynamicObject>`),
//! and the checks its answer must pass before it counts, in kube-apiserver's words
//! (`VerifyAdmissionResponse`).
//!
//! The answer is read leniently where Go's decoder is: `status` may be absent, and `patch` may
//! be base64 text (what Go sends for `[]byte`) or an array of byte values (what kube-core's own
//! `AdmissionResponse` serializes to).

use base64::Engine as _;
use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::core::admission::{AdmissionRequest, AdmissionReview, META_API_VERSION_V1, META_KIND};
use kube::core::{DynamicObject, GroupVersionKind, GroupVersionResource, TypeMeta};
use serde::Deserialize;
use serde_json::Value;

use super::error::{CallError, InvalidResponse};
use super::{Attempt, Target};
use crate::identity::Identity;

/// The `userInfo` of a request made as `who`. The unauthenticated caller, unrestricted here,
/// is reported as a cluster admin (`system:admin` in `system:masters`); an impersonated user
/// gets `system:authenticated` added, as kube-apiserver adds it.
pub(crate) fn user_info(who: &Identity) -> UserInfo {
    let authenticated = "system:authenticated".to_string();
    match (&who.user, &who.token) {
        (None, _) => UserInfo {
            username: Some("system:admin".into()),
            groups: Some(vec!["system:masters".into(), authenticated]),
            ..UserInfo::default()
        },
        (Some(user), Some(token)) if token.user == *user => UserInfo {
            username: Some(user.clone()),
            uid: Some(token.uid.clone()),
            groups: Some(token.groups.clone()),
            ..UserInfo::default()
        },
        (Some(user), _) => {
            let mut groups = who.groups.clone();
            if !groups.contains(&authenticated) {
                groups.push(authenticated);
            }
            UserInfo {
                username: Some(user.clone()),
                groups: Some(groups),
                ..UserInfo::default()
            }
        }
    }
}

/// `value` as a webhook receives it: the JSON of the `DynamicObject` it decodes to (so that a
/// patch applies to exactly what was sent).
pub(crate) fn sent_form(value: &Value) -> Result<Value, serde_json::Error> {
    serde_json::to_value(serde_json::from_value::<DynamicObject>(value.clone())?)
}

fn dynamic(value: Option<&Value>) -> Result<Option<DynamicObject>, CallError> {
    value
        .map(|v| serde_json::from_value(v.clone()))
        .transpose()
        .map_err(|source| CallError::Encode { source })
}

/// The AdmissionReview for one call, and its fresh uid.
pub(crate) fn request(
    t: &Target<'_>,
    a: &Attempt,
    dry_run: bool,
    options: &Value,
) -> Result<(String, Vec<u8>), CallError> {
    let uid = crate::metadata::new_uid();
    let res = t.res;
    let kind = match t.subresource() {
        "scale" => GroupVersionKind::gvk("autoscaling", "v1", "Scale"),
        _ => GroupVersionKind::gvk(&res.group, t.version, &res.kind),
    };
    let resource = GroupVersionResource::gvr(&res.group, t.version, &res.plural);
    let sub = Some(t.subresource().to_string()).filter(|s| !s.is_empty());
    // kube-apiserver names a Namespace object's request after the namespace itself.
    let namespace = Some(a.namespace.clone()).filter(|ns| !ns.is_empty());
    let request = AdmissionRequest::<DynamicObject> {
        types: TypeMeta::default(),
        uid: uid.clone(),
        kind: kind.clone(),
        resource: resource.clone(),
        sub_resource: sub.clone(),
        request_kind: Some(kind),
        request_resource: Some(resource),
        request_sub_resource: sub,
        name: a.name.clone(),
        namespace,
        operation: a.operation.clone(),
        user_info: user_info(t.who),
        object: dynamic(a.object.as_ref())?,
        old_object: dynamic(a.old.as_ref())?,
        dry_run,
        options: Some(RawExtension(options.clone())),
    };
    let review = AdmissionReview {
        types: TypeMeta {
            api_version: META_API_VERSION_V1.into(),
            kind: META_KIND.into(),
        },
        request: Some(request),
        response: None,
    };
    let mut json = serde_json::to_value(&review).map_err(|source| CallError::Encode { source })?;
    // kube-core's GroupVersionResource also serializes its cached `api_version`, which is no
    // field of the Kubernetes type.
    for field in ["resource", "requestResource"] {
        if let Some(r) = json["request"][field].as_object_mut() {
            r.remove("api_version");
        }
    }
    let body = serde_json::to_vec(&json).map_err(|source| CallError::Encode { source })?;
    Ok((uid, body))
}

/// An AdmissionReview as answered.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Answered {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    response: Option<Response>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Response {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    allowed: bool,
    #[serde(default)]
    status: Option<Status>,
    #[serde(default)]
    patch: Option<PatchBytes>,
    #[serde(default)]
    patch_type: Option<String>,
    #[serde(default)]
    warnings: Option<Vec<String>>,
}

/// `response.patch` in either encoding a client produces.
#[derive(Deserialize)]
#[serde(untagged)]
enum PatchBytes {
    /// Base64, as Go encodes `[]byte`.
    Text(String),
    /// An array of byte values.
    Bytes(Vec<u8>),
}

/// `response.status`: the parts of a metav1.Status a denial carries.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Status {
    /// HTTP status code for the client.
    #[serde(default)]
    pub code: Option<i64>,
    /// Machine-readable reason.
    #[serde(default)]
    pub reason: Option<String>,
    /// Human-readable message.
    #[serde(default)]
    pub message: Option<String>,
    /// Passed through to the client's Status.
    #[serde(default)]
    pub details: Option<Value>,
}

/// A webhook's decision.
#[derive(Debug)]
pub(crate) struct Verdict {
    /// Whether the write may proceed.
    pub allowed: bool,
    /// Why not, when not.
    pub status: Status,
    /// A JSON patch (mutating webhooks only; its type already checked).
    pub patch: Option<Vec<u8>>,
    /// Warnings for the client.
    pub warnings: Vec<String>,
}

/// Reads a webhook's answer to the request `uid`.
pub(crate) fn verdict(uid: &str, mutating: bool, body: &[u8]) -> Result<Verdict, CallError> {
    let answered: Answered =
        serde_json::from_slice(body).map_err(|source| CallError::Decode { source })?;
    let response = answered.response.ok_or(InvalidResponse::Absent)?;
    if response.uid != uid {
        return Err(InvalidResponse::Uid {
            expected: uid.into(),
            got: response.uid,
        }
        .into());
    }
    if answered.api_version != META_API_VERSION_V1 || answered.kind != META_KIND {
        return Err(InvalidResponse::Type {
            got: format!("{}, Kind={}", answered.api_version, answered.kind),
        }
        .into());
    }
    let patch = match response.patch {
        None => Vec::new(),
        Some(PatchBytes::Bytes(b)) => b,
        Some(PatchBytes::Text(t)) => base64::engine::general_purpose::STANDARD
            .decode(t.trim())
            .map_err(|source| InvalidResponse::Base64 { source })?,
    };
    let patch_type = response.patch_type.unwrap_or_default();
    match (mutating, patch.is_empty(), patch_type.is_empty()) {
        (true, false, true) => return Err(InvalidResponse::PatchWithoutType.into()),
        (true, true, false) => return Err(InvalidResponse::TypeWithoutPatch.into()),
        (false, false, _) => return Err(InvalidResponse::ValidatingPatch.into()),
        (false, true, false) => return Err(InvalidResponse::ValidatingPatchType.into()),
        _ => {}
    }
    if !patch.is_empty() && patch_type != "JSONPatch" {
        return Err(CallError::PatchType(patch_type));
    }
    Ok(Verdict {
        allowed: response.allowed,
        status: response.status.unwrap_or_default(),
        patch: Some(patch).filter(|p| !p.is_empty()),
        warnings: response.warnings.unwrap_or_default(),
    })
}

/// A `Warning` header value for `text` as kube-apiserver writes it: `299 - "text"`, with
/// quotes and backslashes escaped and control characters dropped.
pub(crate) fn warning_header(text: &str) -> Option<http::HeaderValue> {
    let mut escaped = String::with_capacity(text.len() + 8);
    for c in text.chars().filter(|c| !c.is_control()) {
        if c == '"' || c == '\\' {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    http::HeaderValue::from_bytes(format!("299 - \"{escaped}\"").as_bytes()).ok()
}
