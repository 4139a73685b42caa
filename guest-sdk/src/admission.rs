//! Admission hooks: answer the API server's AdmissionReview requests from a plugin.
//!
//! A plugin whose manifest has `[[admit]]` tables gets [`Plugin::admit`](crate::Plugin::admit)
//! calls from the host's webhook server: one [`AdmissionRequest`] per AdmissionReview, answered
//! with an [`Admission`]. A table of `mode = "validate"` allows or denies; one of
//! `mode = "mutate"` may also change the object with a JSON Patch ([`Admission::patch`]). An
//! `Err` from `admit`, a trap or a missed `timeout-ms` applies the table's `failure-policy`
//! (`fail` refuses the request, `ignore` lets it through).
//!
//! ## Contract
//!
//! - During `admit` the plugin reads the [`cache`](crate::cache) under its tenant's grant (the
//!   kinds its manifest watches); [`kube`](crate::kube) writes and outbound [`http`](crate::http)
//!   are refused: admission has no side effects. A request with [`AdmissionRequest::dry_run`]
//!   set must be answered the same as without it.
//! - Each call runs on an instance of its own, never shared with a concurrent request, and the
//!   host keeps a pool of instances (each made by `init`) and reuses them: keep no per-request
//!   state on the plugin between calls, and expect two requests to land on two instances.
//! - Kubernetes runs mutating hooks before validating ones, so a validating hook sees the
//!   object as the mutating ones left it. A patch may not change the object's apiVersion, kind,
//!   name or namespace, and a validating table's patch is an error.
//!
//! ```no_run
//! use informant_sdk::admission::{Admission, AdmissionRequest};
//! use informant_sdk::{HandlerError, Plugin};
//!
//! struct NoLatest;
//!
//! impl Plugin for NoLatest {
//!     fn init(_config: serde_json::Value) -> Result<Self, HandlerError> {
//!         Ok(NoLatest)
//!     }
//!
//!     fn admit(&mut self, req: &AdmissionRequest) -> Result<Admission, HandlerError> {
//!         let Some(pod) = req.object::<k8s_openapi::api::core::v1::Pod>()? else {
//!             return Ok(Admission::allow());
//!         };
//!         let containers = pod.spec.map(|s| s.containers).unwrap_or_default();
//!         match containers.iter().find(|c| c.image.as_deref().is_some_and(|i| i.ends_with(":latest"))) {
//!             Some(c) => Ok(Admission::deny(format!("container `{}` uses a :latest image", c.name))),
//!             None => Ok(Admission::allow()),
//!         }
//!     }
//! }
//!
//! informant_sdk::export_plugin!(NoLatest);
//! ```

use std::fmt;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::event::{Head, decode};
use crate::wit::informant::plugin::admission as wit;
use crate::{DecodeError, Meta, Resource};

/// The API operation being admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// The object is being created.
    Create,
    /// The object is being changed.
    Update,
    /// The object is being deleted.
    Delete,
    /// A connection to the object (`pods/exec`, `pods/portforward`, ...).
    Connect,
}

impl Operation {
    /// The name the API server uses: `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }

    fn from_wit(op: wit::Operation) -> Self {
        match op {
            wit::Operation::Create => Operation::Create,
            wit::Operation::Update => Operation::Update,
            wit::Operation::Delete => Operation::Delete,
            wit::Operation::Connect => Operation::Connect,
        }
    }

    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    pub(crate) fn to_wit(self) -> wit::Operation {
        match self {
            Operation::Create => wit::Operation::Create,
            Operation::Update => wit::Operation::Update,
            Operation::Delete => wit::Operation::Delete,
            Operation::Connect => wit::Operation::Connect,
        }
    }
}

/// Shows the API server's name (`CREATE`, ...).
impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A group, version and plural resource name, as the request addressed it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupVersionResource {
    /// API group, empty for the core group.
    pub group: String,
    /// API version within the group.
    pub version: String,
    /// The plural resource name, e.g. `deployments`.
    pub resource: String,
}

/// The user the API server authenticated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// The user's name, e.g. `system:serviceaccount:ns:sa` or `alice@example.com`.
    pub username: String,
    /// The user's uid (often empty).
    pub uid: String,
    /// The groups the user is in.
    pub groups: Vec<String>,
    /// Extra attributes the authenticator added: a key and its values.
    pub extra: Vec<(String, Vec<String>)>,
}

/// One admission request: the object, its kind and metadata (parsed by the host, as an event's),
/// the operation and who asked for it.
#[derive(Debug)]
pub struct AdmissionRequest {
    uid: String,
    pub(crate) hook: String,
    kind: Resource,
    resource: GroupVersionResource,
    sub_resource: String,
    operation: Operation,
    namespace: Option<String>,
    name: String,
    user_info: UserInfo,
    object: Option<String>,
    old_object: Option<String>,
    head: Head,
    dry_run: bool,
    options: Option<String>,
}

impl AdmissionRequest {
    /// Wraps the record the host passes to the `admit` export.
    #[doc(hidden)]
    pub fn from_wit(r: wit::Request) -> Self {
        let wit::Request {
            uid,
            hook,
            kind,
            resource,
            sub_resource,
            operation,
            namespace,
            name,
            user_info,
            object,
            old_object,
            header,
            dry_run,
            options,
        } = r;
        AdmissionRequest {
            uid,
            hook,
            kind: Resource::new(kind.group, kind.version, kind.kind),
            resource: GroupVersionResource {
                group: resource.group,
                version: resource.version,
                resource: resource.resource,
            },
            sub_resource,
            operation: Operation::from_wit(operation),
            namespace,
            name,
            user_info: UserInfo {
                username: user_info.username,
                uid: user_info.uid,
                groups: user_info.groups,
                extra: user_info.extra,
            },
            object,
            old_object,
            head: Head::decode(header),
            dry_run,
            options,
        }
    }

    /// Identifies the request (the host copies it into the response).
    pub fn uid(&self) -> &str {
        &self.uid
    }

    /// The name of the manifest's `[[admit]]` table the request came through: a plugin with a
    /// validating and a mutating table for one kind tells their calls apart by it.
    pub fn hook(&self) -> &str {
        &self.hook
    }

    /// The operation being admitted.
    pub fn operation(&self) -> Operation {
        self.operation
    }

    /// The object's kind.
    pub fn kind(&self) -> &Resource {
        &self.kind
    }

    /// The resource the request addressed (group, version, plural name).
    pub fn resource(&self) -> &GroupVersionResource {
        &self.resource
    }

    /// The subresource addressed (`status`, `scale`, ...); empty for the main resource.
    pub fn sub_resource(&self) -> &str {
        &self.sub_resource
    }

    /// The request's namespace; `None` for cluster-scoped objects.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The object's name; empty on a create whose name the server generates.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The user the API server authenticated.
    pub fn user_info(&self) -> &UserInfo {
        &self.user_info
    }

    /// Nothing will be stored: answer as usual, and cause no effect.
    pub fn dry_run(&self) -> bool {
        self.dry_run
    }

    /// The object's metadata (for a delete: the stored object's), parsed by the host.
    pub fn meta(&self) -> Meta<'_> {
        Meta(&self.head)
    }

    /// The object as it would be stored, as JSON (managedFields removed); `None` for a delete.
    pub fn object_json(&self) -> Option<&str> {
        self.object.as_deref()
    }

    /// For an update or a delete: the stored object as JSON (managedFields removed).
    pub fn old_object_json(&self) -> Option<&str> {
        self.old_object.as_deref()
    }

    /// Decodes the object, e.g. into a `k8s-openapi` type or `serde_json::Value`; `None` for a
    /// delete.
    pub fn object<T: DeserializeOwned>(&self) -> Result<Option<T>, DecodeError> {
        self.object_json()
            .map(|json| decode(json, false, &self.head))
            .transpose()
    }

    /// Decodes the stored object; `None` for a create or a connect.
    pub fn old_object<T: DeserializeOwned>(&self) -> Result<Option<T>, DecodeError> {
        self.old_object_json()
            .map(|json| decode(json, true, &self.head))
            .transpose()
    }

    /// The operation's options (CreateOptions, UpdateOptions or DeleteOptions) as JSON.
    pub fn options_json(&self) -> Option<&str> {
        self.options.as_deref()
    }
}

/// The answer to an [`AdmissionRequest`]: allowed (possibly with a patch) or denied, with
/// warnings either way.
#[derive(Debug, Clone, PartialEq)]
pub struct Admission {
    allowed: bool,
    code: u16,
    message: String,
    warnings: Vec<String>,
    patch: Option<Patch>,
}

/// A patch as the plugin gave it.
#[derive(Debug, Clone, PartialEq)]
enum Patch {
    Ops(Value),
    Text(String),
}

impl Admission {
    /// Lets the request through unchanged.
    pub fn allow() -> Self {
        Admission {
            allowed: true,
            code: 0,
            message: String::new(),
            warnings: Vec::new(),
            patch: None,
        }
    }

    /// Refuses the request: the client sees `admission webhook "..." denied the request:
    /// MESSAGE` with HTTP status 403 (see [`Admission::with_code`]).
    pub fn deny(message: impl Into<String>) -> Self {
        Admission {
            allowed: false,
            message: message.into(),
            ..Admission::allow()
        }
    }

    /// Lets the request through with a JSON Patch (RFC 6902) applied to the object: a mutating
    /// hook's answer. `ops` is the array of operations, as a `serde_json::Value` or a
    /// `Vec<PatchOp>`; an empty array is no patch.
    ///
    /// ```
    /// use informant_sdk::admission::{Admission, PatchOp, json_pointer};
    ///
    /// let path = json_pointer(&["metadata", "labels", "example.com/team"]);
    /// assert_eq!(path, "/metadata/labels/example.com~1team");
    /// let answer = Admission::patch(vec![PatchOp::add(path, "payments")]);
    /// assert_eq!(
    ///     answer.patch_json().as_deref(),
    ///     Some(r#"[{"op":"add","path":"/metadata/labels/example.com~1team","value":"payments"}]"#)
    /// );
    /// ```
    pub fn patch(ops: impl Into<Value>) -> Self {
        let ops = ops.into();
        let empty = ops.as_array().is_some_and(Vec::is_empty);
        Admission {
            patch: (!empty).then_some(Patch::Ops(ops)),
            ..Admission::allow()
        }
    }

    /// Lets the request through with a JSON Patch already serialized, passed on as it is (the
    /// host refuses text that is not a JSON Patch array).
    pub fn patch_text(text: impl Into<String>) -> Self {
        Admission {
            patch: Some(Patch::Text(text.into())),
            ..Admission::allow()
        }
    }

    /// Sets a denial's HTTP status code (default 403).
    pub fn with_code(mut self, code: u16) -> Self {
        self.code = code;
        self
    }

    /// Adds a warning shown to the client, allowed or not (the host keeps at most 16, each at
    /// most 256 bytes).
    pub fn warn(mut self, text: impl Into<String>) -> Self {
        self.warnings.push(text.into());
        self
    }

    /// Whether the request is let through.
    pub fn is_allowed(&self) -> bool {
        self.allowed
    }

    /// A denial's HTTP status code (0 means 403).
    pub fn code(&self) -> u16 {
        self.code
    }

    /// A denial's message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The warnings, in the order they were added.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The patch as the host receives it (JSON text); `None` without one.
    pub fn patch_json(&self) -> Option<String> {
        match self.patch.as_ref()? {
            Patch::Ops(ops) => Some(ops.to_string()),
            Patch::Text(text) => Some(text.clone()),
        }
    }

    /// The record the `admit` export returns.
    #[doc(hidden)]
    pub fn into_wit(self) -> wit::Response {
        wit::Response {
            patch: self.patch_json(),
            allowed: self.allowed,
            code: self.code,
            message: self.message,
            warnings: self.warnings,
        }
    }
}

/// One JSON Patch (RFC 6902) operation, for [`Admission::patch`]; paths are JSON pointers
/// ([`json_pointer`] builds one from keys).
#[derive(Debug, Clone, PartialEq)]
pub struct PatchOp(Value);

impl PatchOp {
    /// Sets `path` to `value`: adds an object member (replacing one there), or inserts into an
    /// array (`-` appends). The parent must exist.
    pub fn add(path: impl Into<String>, value: impl Into<Value>) -> Self {
        PatchOp(serde_json::json!({"op": "add", "path": path.into(), "value": value.into()}))
    }

    /// Replaces the value at `path`, which must exist.
    pub fn replace(path: impl Into<String>, value: impl Into<Value>) -> Self {
        PatchOp(serde_json::json!({"op": "replace", "path": path.into(), "value": value.into()}))
    }

    /// Removes the value at `path`, which must exist.
    pub fn remove(path: impl Into<String>) -> Self {
        PatchOp(serde_json::json!({"op": "remove", "path": path.into()}))
    }
}

/// The operation as JSON (`{"op": ..., "path": ..., ...}`).
impl From<PatchOp> for Value {
    fn from(op: PatchOp) -> Value {
        op.0
    }
}

/// A JSON pointer (RFC 6901) to the member reached by `keys`: each key escaped (`~` as `~0`,
/// `/` as `~1`) and prefixed with `/`, e.g. `["metadata", "labels", "a/b"]` is
/// `/metadata/labels/a~1b`.
pub fn json_pointer(keys: &[&str]) -> String {
    keys.iter().fold(String::new(), |mut out, key| {
        out.push('/');
        out.push_str(&key.replace('~', "~0").replace('/', "~1"));
        out
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pointers_escape_tilde_before_slash() {
        assert_eq!(json_pointer(&[]), "");
        assert_eq!(
            json_pointer(&["metadata", "labels", "team"]),
            "/metadata/labels/team"
        );
        assert_eq!(json_pointer(&["a~/b", "", "~1"]), "/a~0~1b//~01");
    }

    #[test]
    fn answers_become_the_wit_response() {
        let r = Admission::deny("no").with_code(422).warn("w1").warn("w2");
        assert!(!r.is_allowed() && r.code() == 422 && r.message() == "no");
        let w = r.into_wit();
        assert_eq!(
            (w.allowed, w.code, w.message.as_str(), w.warnings, w.patch),
            (
                false,
                422,
                "no",
                vec!["w1".to_string(), "w2".to_string()],
                None
            )
        );
        let w = Admission::allow().into_wit();
        assert!(w.allowed && w.code == 0 && w.message.is_empty() && w.patch.is_none());

        let ops = vec![
            PatchOp::add("/metadata/labels", json!({"a": "1"})),
            PatchOp::replace("/spec/replicas", 3),
            PatchOp::remove("/metadata/annotations/x"),
        ];
        let w = Admission::patch(ops).warn("patched").into_wit();
        assert!(w.allowed);
        let patch: Value = serde_json::from_str(w.patch.as_deref().unwrap()).unwrap();
        assert_eq!(
            patch,
            json!([
                {"op": "add", "path": "/metadata/labels", "value": {"a": "1"}},
                {"op": "replace", "path": "/spec/replicas", "value": 3},
                {"op": "remove", "path": "/metadata/annotations/x"},
            ])
        );
        assert_eq!(w.warnings, ["patched"]);
        // An empty patch is none; a raw one passes as it is.
        assert_eq!(Admission::patch(json!([])), Admission::allow());
        assert_eq!(Admission::patch(Vec::<PatchOp>::new()), Admission::allow());
        assert_eq!(
            Admission::patch_text("not json")
                .into_wit()
                .patch
                .as_deref(),
            Some("not json")
        );
    }

    #[test]
    fn operations_name_themselves_as_the_api_server_does() {
        for op in [
            Operation::Create,
            Operation::Update,
            Operation::Delete,
            Operation::Connect,
        ] {
            assert_eq!(Operation::from_wit(op.to_wit()), op);
        }
        assert_eq!(Operation::Connect.to_string(), "CONNECT");
    }
}
