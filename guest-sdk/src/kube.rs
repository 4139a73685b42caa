//! Writes to the cluster through the host's `kube` import.
//!
//! Each write must be declared in the manifest (`[[write]]`: api-version, kind, verbs, and
//! optionally namespaces) and fall inside the tenant's write grant; anything else fails with
//! [`WriteError::Denied`] before any request. Server-side apply runs as the field manager
//! `informant/TENANT/PLUGIN`. A write's effect comes back as ordinary watch events; an apply
//! that changes nothing produces none, so applying what a plugin wants on every event settles
//! instead of looping.
//!
//! ```no_run
//! use informant_sdk::kube;
//! use k8s_openapi::api::apps::v1::Deployment;
//!
//! # fn f(d: &Deployment) -> Result<(), informant_sdk::HandlerError> {
//! // Only the fields this plugin manages: server-side apply merges them with the rest.
//! let mut labels = std::collections::BTreeMap::new();
//! labels.insert("team".to_string(), "unknown".to_string());
//! let patch = Deployment {
//!     metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
//!         name: d.metadata.name.clone(),
//!         namespace: d.metadata.namespace.clone(),
//!         labels: Some(labels),
//!         ..Default::default()
//!     },
//!     ..Default::default()
//! };
//! kube::apply(&patch)?;
//! # Ok(()) }
//! ```
//!
//! On native targets the [`testing::Harness`](crate::testing::Harness) records each write
//! (checked against the manifest's `[[write]]` like the host does) instead of sending it.

use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Event, Resource};

/// The API server's answer to a refused write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status (0: no answer came).
    pub code: u16,
    /// `Status.reason`, e.g. `Conflict`.
    pub reason: String,
    /// `Status.message`.
    pub message: String,
}

/// Why a write did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteError {
    /// Refused by the host before any request (not declared, outside the grant, malformed).
    Denied(String),
    /// 409: a conflict, or it already exists.
    Conflict(ApiError),
    /// 404.
    NotFound(ApiError),
    /// 403: the cluster's RBAC refused the identity the write was sent as.
    Forbidden(ApiError),
    /// 422: invalid.
    Invalid(ApiError),
    /// Any other answer, or none.
    Other(ApiError),
    /// Not from the host: the stored object did not decode into the requested type.
    Decode(String),
}

/// Names the reason and carries the message.
impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let api = |f: &mut fmt::Formatter<'_>, what: &str, e: &ApiError| {
            write!(f, "{what} ({}): {}", e.code, e.message)
        };
        match self {
            WriteError::Denied(m) => write!(f, "write denied: {m}"),
            WriteError::Conflict(e) => api(f, "conflict", e),
            WriteError::NotFound(e) => api(f, "not found", e),
            WriteError::Forbidden(e) => api(f, "forbidden", e),
            WriteError::Invalid(e) => api(f, "invalid", e),
            WriteError::Other(e) => api(f, "write failed", e),
            WriteError::Decode(m) => write!(f, "cannot decode the stored object: {m}"),
        }
    }
}

impl std::error::Error for WriteError {}

/// The patch formats the API server takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// RFC 7386 merge patch.
    Merge,
    /// RFC 6902 JSON patch.
    Json,
    /// Strategic merge patch (built-in kinds only).
    Strategic,
}

/// Conditions a delete must meet, or it fails with [`WriteError::Conflict`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// The object must still have this UID (not a new object of the same name).
    pub uid: Option<String>,
    /// The object must still be at this resourceVersion.
    pub resource_version: Option<String>,
}

/// `type` of an Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Something expected happened.
    Normal,
    /// Something a human should look at.
    Warning,
}

/// The object an Event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    /// Its kind.
    pub kind: Resource,
    /// Its namespace (`None`: cluster-scoped).
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// Its UID, if the Event should pin it.
    pub uid: Option<String>,
}

impl ObjectRef {
    /// The object of an event.
    pub fn of(ev: &Event) -> Self {
        let meta = ev.meta();
        ObjectRef {
            kind: ev.resource().clone(),
            namespace: meta.namespace().map(String::from),
            name: meta.name().to_string(),
            uid: Some(meta.uid().to_string()).filter(|u| !u.is_empty()),
        }
    }
}

/// Creates an object of a `k8s-openapi` type; returns it as stored.
pub fn create<K: k8s_openapi::Resource + Serialize + DeserializeOwned + Metadata>(
    object: &K,
) -> Result<K, WriteError> {
    let json = to_json(object)?;
    decode(&raw::create(
        &Resource::of::<K>(),
        object.namespace(),
        &json,
    )?)
}

/// Server-side applies the fields `object` sets (as this plugin's field manager); returns the
/// object as stored. Fails with [`WriteError::Conflict`] on fields another manager owns.
pub fn apply<K: k8s_openapi::Resource + Serialize + DeserializeOwned + Metadata>(
    object: &K,
) -> Result<K, WriteError> {
    apply_with(object, false)
}

/// [`apply`], taking fields other managers own.
pub fn apply_forced<K: k8s_openapi::Resource + Serialize + DeserializeOwned + Metadata>(
    object: &K,
) -> Result<K, WriteError> {
    apply_with(object, true)
}

fn apply_with<K: k8s_openapi::Resource + Serialize + DeserializeOwned + Metadata>(
    object: &K,
    force: bool,
) -> Result<K, WriteError> {
    let json = to_json(object)?;
    let name = object
        .name()
        .ok_or_else(|| WriteError::Denied("an applied object needs metadata.name".to_string()))?;
    decode(&raw::apply(
        &Resource::of::<K>(),
        object.namespace(),
        name,
        &json,
        force,
    )?)
}

/// Merge-patches the object (RFC 7386); returns it as stored.
pub fn patch_merge<K: k8s_openapi::Resource + DeserializeOwned>(
    namespace: Option<&str>,
    name: &str,
    patch: &serde_json::Value,
) -> Result<K, WriteError> {
    patch_as::<K>(namespace, name, PatchType::Merge, patch)
}

/// JSON-patches the object (RFC 6902; `patch` is the list of operations).
pub fn patch_json<K: k8s_openapi::Resource + DeserializeOwned>(
    namespace: Option<&str>,
    name: &str,
    patch: &serde_json::Value,
) -> Result<K, WriteError> {
    patch_as::<K>(namespace, name, PatchType::Json, patch)
}

/// Strategic-merge-patches the object.
pub fn patch_strategic<K: k8s_openapi::Resource + DeserializeOwned>(
    namespace: Option<&str>,
    name: &str,
    patch: &serde_json::Value,
) -> Result<K, WriteError> {
    patch_as::<K>(namespace, name, PatchType::Strategic, patch)
}

fn patch_as<K: k8s_openapi::Resource + DeserializeOwned>(
    namespace: Option<&str>,
    name: &str,
    kind: PatchType,
    patch: &serde_json::Value,
) -> Result<K, WriteError> {
    decode(&raw::patch(
        &Resource::of::<K>(),
        namespace,
        name,
        kind,
        &patch.to_string(),
    )?)
}

/// Deletes the object if it still meets `preconditions`.
pub fn delete<K: k8s_openapi::Resource>(
    namespace: Option<&str>,
    name: &str,
    preconditions: &Preconditions,
) -> Result<(), WriteError> {
    raw::delete(&Resource::of::<K>(), namespace, name, preconditions)
}

/// Replaces the object's `status` (send it with its resourceVersion for optimistic locking).
pub fn update_status<K: k8s_openapi::Resource + Serialize + DeserializeOwned + Metadata>(
    object: &K,
) -> Result<K, WriteError> {
    let json = to_json(object)?;
    let name = object
        .name()
        .ok_or_else(|| WriteError::Denied("the object needs metadata.name".to_string()))?;
    decode(&raw::update_status(
        &Resource::of::<K>(),
        object.namespace(),
        name,
        &json,
    )?)
}

/// Records an Event about `ev`'s object (declare `[[write]] api-version = "events.k8s.io/v1"`,
/// `kind = "Event"`, `verbs = ["create"]`).
pub fn event(
    ev: &Event,
    severity: Severity,
    reason: &str,
    action: &str,
    note: &str,
) -> Result<(), WriteError> {
    raw::record_event(&ObjectRef::of(ev), severity, reason, action, note)
}

/// Namespace and name of a typed object.
pub trait Metadata {
    /// `metadata.namespace`.
    fn namespace(&self) -> Option<&str>;
    /// `metadata.name`.
    fn name(&self) -> Option<&str>;
}

impl<K> Metadata for K
where
    K: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
{
    fn namespace(&self) -> Option<&str> {
        self.metadata().namespace.as_deref()
    }
    fn name(&self) -> Option<&str> {
        self.metadata().name.as_deref()
    }
}

fn to_json<T: Serialize>(object: &T) -> Result<String, WriteError> {
    serde_json::to_string(object).map_err(|e| WriteError::Denied(format!("cannot encode: {e}")))
}

fn decode<K: k8s_openapi::Resource + DeserializeOwned>(json: &str) -> Result<K, WriteError> {
    serde_json::from_str(json)
        .map_err(|e| WriteError::Decode(format!("{}: {e}", Resource::of::<K>())))
}

/// The calls as the contract has them: any kind by [`Resource`], objects as JSON text.
pub mod raw {
    use super::{ObjectRef, PatchType, Preconditions, Severity, WriteError};
    use crate::Resource;

    /// Creates the object; returns it as stored (JSON).
    pub fn create(
        r: &Resource,
        namespace: Option<&str>,
        object: &str,
    ) -> Result<String, WriteError> {
        backend::create(r, namespace, object)
    }

    /// Server-side apply; returns the object as stored.
    pub fn apply(
        r: &Resource,
        namespace: Option<&str>,
        name: &str,
        object: &str,
        force: bool,
    ) -> Result<String, WriteError> {
        backend::apply(r, namespace, name, object, force)
    }

    /// Patches the object; returns it as stored.
    pub fn patch(
        r: &Resource,
        namespace: Option<&str>,
        name: &str,
        kind: PatchType,
        patch: &str,
    ) -> Result<String, WriteError> {
        backend::patch(r, namespace, name, kind, patch)
    }

    /// Deletes the object if it meets `preconditions`.
    pub fn delete(
        r: &Resource,
        namespace: Option<&str>,
        name: &str,
        preconditions: &Preconditions,
    ) -> Result<(), WriteError> {
        backend::delete(r, namespace, name, preconditions)
    }

    /// Replaces the `status` subresource; returns the object as stored.
    pub fn update_status(
        r: &Resource,
        namespace: Option<&str>,
        name: &str,
        object: &str,
    ) -> Result<String, WriteError> {
        backend::update_status(r, namespace, name, object)
    }

    /// Records an `events.k8s.io/v1` Event about `regarding`.
    pub fn record_event(
        regarding: &ObjectRef,
        severity: Severity,
        reason: &str,
        action: &str,
        note: &str,
    ) -> Result<(), WriteError> {
        backend::record_event(regarding, severity, reason, action, note)
    }

    #[cfg(target_arch = "wasm32")]
    mod backend {
        use super::super::ApiError;
        use super::{ObjectRef, PatchType, Preconditions, Severity, WriteError};
        use crate::Resource;
        use crate::wit::informant::plugin::kube as imports;

        fn err(e: imports::WriteError) -> WriteError {
            let api = |e: imports::ApiError| ApiError {
                code: e.code,
                reason: e.reason,
                message: e.message,
            };
            match e {
                imports::WriteError::Denied(m) => WriteError::Denied(m),
                imports::WriteError::Conflict(e) => WriteError::Conflict(api(e)),
                imports::WriteError::NotFound(e) => WriteError::NotFound(api(e)),
                imports::WriteError::Forbidden(e) => WriteError::Forbidden(api(e)),
                imports::WriteError::Invalid(e) => WriteError::Invalid(api(e)),
                imports::WriteError::Other(e) => WriteError::Other(api(e)),
            }
        }

        pub(super) fn create(
            r: &Resource,
            ns: Option<&str>,
            object: &str,
        ) -> Result<String, WriteError> {
            imports::create(&r.to_wit(), ns, object).map_err(err)
        }

        pub(super) fn apply(
            r: &Resource,
            ns: Option<&str>,
            name: &str,
            object: &str,
            force: bool,
        ) -> Result<String, WriteError> {
            imports::apply(&r.to_wit(), ns, name, object, force).map_err(err)
        }

        pub(super) fn patch(
            r: &Resource,
            ns: Option<&str>,
            name: &str,
            kind: PatchType,
            patch: &str,
        ) -> Result<String, WriteError> {
            let kind = match kind {
                PatchType::Merge => imports::PatchType::Merge,
                PatchType::Json => imports::PatchType::Json,
                PatchType::Strategic => imports::PatchType::Strategic,
            };
            imports::patch(&r.to_wit(), ns, name, kind, patch).map_err(err)
        }

        pub(super) fn delete(
            r: &Resource,
            ns: Option<&str>,
            name: &str,
            p: &Preconditions,
        ) -> Result<(), WriteError> {
            let p = imports::Preconditions {
                uid: p.uid.clone(),
                resource_version: p.resource_version.clone(),
            };
            imports::delete(&r.to_wit(), ns, name, &p).map_err(err)
        }

        pub(super) fn update_status(
            r: &Resource,
            ns: Option<&str>,
            name: &str,
            object: &str,
        ) -> Result<String, WriteError> {
            imports::update_status(&r.to_wit(), ns, name, object).map_err(err)
        }

        pub(super) fn record_event(
            regarding: &ObjectRef,
            severity: Severity,
            reason: &str,
            action: &str,
            note: &str,
        ) -> Result<(), WriteError> {
            let regarding = imports::ObjectRef {
                kind: regarding.kind.to_wit(),
                namespace: regarding.namespace.clone(),
                name: regarding.name.clone(),
                uid: regarding.uid.clone(),
            };
            let severity = match severity {
                Severity::Normal => imports::EventSeverity::Normal,
                Severity::Warning => imports::EventSeverity::Warning,
            };
            imports::record_event(&regarding, severity, reason, action, note).map_err(err)
        }
    }

    #[cfg(not(target_arch = "wasm32"))]
    mod backend {
        use super::{ObjectRef, PatchType, Preconditions, Severity, WriteError};
        use crate::Resource;
        use crate::testing::{Written, record_write};

        fn written(
            verb: &'static str,
            r: &Resource,
            ns: Option<&str>,
            name: Option<&str>,
            body: String,
        ) -> Written {
            Written {
                verb,
                resource: r.clone(),
                namespace: ns.map(String::from),
                name: name.map(String::from),
                body,
            }
        }

        pub(super) fn create(
            r: &Resource,
            ns: Option<&str>,
            object: &str,
        ) -> Result<String, WriteError> {
            record_write(written("create", r, ns, None, object.into()))
        }

        pub(super) fn apply(
            r: &Resource,
            ns: Option<&str>,
            name: &str,
            object: &str,
            force: bool,
        ) -> Result<String, WriteError> {
            let verb = if force { "apply-forced" } else { "apply" };
            let mut w = written(verb, r, ns, Some(name), object.into());
            w.verb = verb;
            record_write(w)
        }

        pub(super) fn patch(
            r: &Resource,
            ns: Option<&str>,
            name: &str,
            kind: PatchType,
            patch: &str,
        ) -> Result<String, WriteError> {
            let verb = match kind {
                PatchType::Merge => "patch-merge",
                PatchType::Json => "patch-json",
                PatchType::Strategic => "patch-strategic",
            };
            record_write(written(verb, r, ns, Some(name), patch.into()))
        }

        pub(super) fn delete(
            r: &Resource,
            ns: Option<&str>,
            name: &str,
            p: &Preconditions,
        ) -> Result<(), WriteError> {
            let body = serde_json::json!({"uid": p.uid, "resourceVersion": p.resource_version});
            record_write(written("delete", r, ns, Some(name), body.to_string())).map(drop)
        }

        pub(super) fn update_status(
            r: &Resource,
            ns: Option<&str>,
            name: &str,
            object: &str,
        ) -> Result<String, WriteError> {
            record_write(written("update-status", r, ns, Some(name), object.into()))
        }

        pub(super) fn record_event(
            regarding: &ObjectRef,
            severity: Severity,
            reason: &str,
            action: &str,
            note: &str,
        ) -> Result<(), WriteError> {
            let body = serde_json::json!({
                "type": format!("{severity:?}"),
                "reason": reason,
                "action": action,
                "note": note,
                "regarding": {
                    "apiVersion": regarding.kind.api_version(),
                    "kind": regarding.kind.kind,
                    "namespace": regarding.namespace,
                    "name": regarding.name,
                    "uid": regarding.uid,
                },
            });
            let events = Resource::new("events.k8s.io", "v1", "Event");
            let ns = regarding.namespace.as_deref().or(Some("default"));
            record_write(written("record-event", &events, ns, None, body.to_string())).map(drop)
        }
    }
}
