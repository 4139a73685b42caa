//! AdmissionReview v1 in and out: kube-core's `admission` types on the wire, the contract's
//! `request` and `response` records toward the plugin.

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};

use crate::plugin::bindings::WitResource;
use crate::plugin::bindings::admitting::informant::plugin::admission::{
    GroupVersionResource, Operation as WitOperation, Request, UserInfo,
};

/// Why a body is not an AdmissionReview request this server can answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReviewError {
    /// Not JSON, not an AdmissionReview, or nested deeper than the parser allows.
    #[error("not an AdmissionReview: {0}")]
    Decode(#[source] serde_json::Error),
    /// A review without a request, or of another API version.
    #[error("not an admission.k8s.io/v1 AdmissionReview request")]
    NoRequest,
}

/// The request of an AdmissionReview body.
pub(crate) fn decode(body: &[u8]) -> Result<AdmissionRequest<DynamicObject>, ReviewError> {
    let review: AdmissionReview<DynamicObject> =
        serde_json::from_slice(body).map_err(ReviewError::Decode)?;
    if review.types.api_version != "admission.k8s.io/v1" {
        return Err(ReviewError::NoRequest);
    }
    review.try_into().map_err(|_| ReviewError::NoRequest)
}

/// The operation as the manifest names it.
pub(crate) fn operation(op: &Operation) -> crate::manifest::admit::Operation {
    use crate::manifest::admit::Operation as M;
    match op {
        Operation::Create => M::Create,
        Operation::Update => M::Update,
        Operation::Delete => M::Delete,
        Operation::Connect => M::Connect,
    }
}

/// The contract's request for `req` through the hook named `hook`: objects as JSON without
/// managedFields, and the header of the object (the old object's for a delete) as events carry
/// it.
pub(crate) fn to_wit(
    req: &AdmissionRequest<DynamicObject>,
    hook: &str,
) -> Result<Request, serde_json::Error> {
    let json = |o: &Option<DynamicObject>| -> Result<Option<String>, serde_json::Error> {
        o.as_ref()
            .map(|o| {
                let mut o = o.clone();
                o.metadata.managed_fields = None;
                serde_json::to_string(&o)
            })
            .transpose()
    };
    let subject = req.object.as_ref().or(req.old_object.as_ref());
    let header = subject.map(|o| header(req, o)).unwrap_or_default();
    Ok(Request {
        uid: req.uid.clone(),
        hook: hook.to_string(),
        kind: WitResource {
            group: req.kind.group.clone(),
            version: req.kind.version.clone(),
            kind: req.kind.kind.clone(),
        },
        resource: GroupVersionResource {
            group: req.resource.group.clone(),
            version: req.resource.version.clone(),
            resource: req.resource.resource.clone(),
        },
        sub_resource: req.sub_resource.clone().unwrap_or_default(),
        operation: match req.operation {
            Operation::Create => WitOperation::Create,
            Operation::Update => WitOperation::Update,
            Operation::Delete => WitOperation::Delete,
            Operation::Connect => WitOperation::Connect,
        },
        namespace: req.namespace.clone().filter(|ns| !ns.is_empty()),
        name: req.name.clone(),
        user_info: UserInfo {
            username: req.user_info.username.clone().unwrap_or_default(),
            uid: req.user_info.uid.clone().unwrap_or_default(),
            groups: req.user_info.groups.clone().unwrap_or_default(),
            extra: req
                .user_info
                .extra
                .clone()
                .unwrap_or_default()
                .into_iter()
                .collect(),
        },
        object: json(&req.object)?,
        old_object: json(&req.old_object)?,
        header,
        dry_run: req.dry_run,
        options: req
            .options
            .as_ref()
            .map(serde_json::to_string)
            .transpose()?,
    })
}

/// The event header layout of `object`, of the request's kind.
fn header(req: &AdmissionRequest<DynamicObject>, object: &DynamicObject) -> Vec<u8> {
    let m = &object.metadata;
    let name = m.name.as_deref().unwrap_or(&req.name);
    let namespace = m
        .namespace
        .as_deref()
        .or(req.namespace.as_deref())
        .unwrap_or_default();
    let metadata = informant_header::Metadata {
        namespace,
        name,
        uid: m.uid.as_deref().unwrap_or_default(),
        resource_version: m.resource_version.as_deref().unwrap_or_default(),
    }
    // A BTreeMap: the labels come sorted by key, as the layout wants.
    .encode(
        m.labels
            .iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.as_str())),
    );
    informant_header::encode(
        [
            req.kind.group.as_str(),
            req.kind.version.as_str(),
            req.kind.kind.as_str(),
        ],
        &metadata,
    )
}

/// A response review for `req` that denies with `code` and `message`.
pub(crate) fn denied(
    req: &AdmissionRequest<DynamicObject>,
    code: u16,
    message: String,
) -> AdmissionResponse {
    let mut response = AdmissionResponse::from(req).deny(message);
    response.result.code = code;
    response.result.reason = match code {
        403 => "Forbidden",
        500 => "InternalError",
        _ => "",
    }
    .to_string();
    response
}
