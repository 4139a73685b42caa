//! Admission webhooks: every HTTP write is shown to the `MutatingWebhookConfiguration` and
//! `ValidatingWebhookConfiguration` webhooks whose rules match it before it is stored, as
//! kube-apiserver shows it.
//!
//! Contract:
//! - Admitted: HTTP create, update (PUT), patch (every patch type; an apply that creates is a
//!   CREATE), delete (also each object of a delete-collection), and the `status` and `scale`
//!   subresources when a rule names them. Not admitted: writes through [`DevServer`]'s Rust API
//!   (they go straight to storage, as a test's seeding should), `pods/eviction`,
//!   `serviceaccounts/token`, the objects a namespace or CRD deletion cascades to, and the
//!   webhook configurations themselves (as kube-apiserver exempts them).
//! - The object shown is the one the write would store: a write is first run as a dry run, the
//!   webhooks see its result (`object`) and the stored version (`oldObject`; for a delete only
//!   `oldObject`), then the (possibly mutated) result is written, on condition that the stored
//!   version has not changed meanwhile. When it has, the write is prepared and admitted again
//!   (at most [`ATTEMPTS`] times), as kube-apiserver's update loop retries.
//! - Mutating webhooks first (configurations by name, webhooks in their order), each seeing
//!   the previous one's JSON patch applied; `reinvocationPolicy` is taken as `Never`. Then the
//!   validating webhooks, one after the other, on the final object.
//! - A mutating patch may not change `metadata.name`, `metadata.namespace`, `kind` or
//!   `apiVersion`: the write fails with a 500 naming the webhook.
//! - Answers as kube-apiserver's (1.15 to 1.33): a denial is the webhook's status code (400
//!   when it gives none or one below 400) and reason (none when it gives none), and its
//!   message prefixed `admission webhook "NAME" denied the request`; a failed call under
//!   `failurePolicy: Fail` (the default) is a 500 InternalError `failed calling webhook`; under
//!   `Ignore` the webhook is skipped and the failure logged. A dry run matching a webhook whose
//!   `sideEffects` is neither `None` nor `NoneOnDryRun` is refused (400) without a call.
//! - Webhooks' `warnings` reach the client as `Warning: 299 - "..."` headers, on success and
//!   on refusal alike.
//!
//! Where: `matching` reads configurations and decides who is called, `review` builds the
//! AdmissionReview and checks the answer, `call` makes the HTTPS call.
//!
//! [`DevServer`]: crate::DevServer

mod call;
mod error;
mod matching;
mod review;
mod writes;

use std::sync::Arc;

use kube::core::admission::Operation;
use serde_json::{Value, json};

pub use error::{CallError, InvalidResponse, PostError};
pub(crate) use matching::config_causes;

use crate::Shared;
use crate::api::{Sub, WriteOpts};
use crate::identity::Identity;
use crate::metadata::{meta, meta_mut};
use crate::resources::ResourceType;
use matching::RuleTarget;

/// How many times a write is prepared and admitted before a concurrent change wins.
pub const ATTEMPTS: usize = 5;

/// Result alias for this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why admission refused a write; [`crate::Error::Admission`] carries it to the client.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A webhook answered `allowed: false`.
    #[error("{message}")]
    Denied {
        /// The webhook's name.
        webhook: String,
        /// The webhook's `status.code` when 400 or more, else 400 (kube-apiserver's floor
        /// for a rejection).
        code: u16,
        /// The webhook's `status.reason`; empty when it gave none (the Status then has none,
        /// as kube-apiserver passes it on).
        reason: String,
        /// `admission webhook "NAME" denied the request: ...`.
        message: String,
        /// The webhook's `status.details`, passed on.
        details: Option<Value>,
    },
    /// A webhook with `failurePolicy: Fail` could not be called or answered nonsense.
    #[error("Internal error occurred: failed calling webhook \"{webhook}\": {source}")]
    CallFailed {
        /// The webhook's name.
        webhook: String,
        /// What failed.
        #[source]
        source: CallError,
    },
    /// A dry run matched a webhook that may have side effects.
    #[error("admission webhook \"{webhook}\" does not support dry run")]
    DryRunUnsupported {
        /// The webhook's name.
        webhook: String,
    },
    /// A mutating webhook's patch cannot be used.
    #[error("Internal error occurred: admission webhook \"{webhook}\" {problem}")]
    BadPatch {
        /// The webhook's name.
        webhook: String,
        /// What is wrong with the patch.
        #[source]
        problem: PatchProblem,
    },
}

/// What is wrong with a mutating webhook's patch.
#[derive(Debug, thiserror::Error)]
pub enum PatchProblem {
    /// The bytes are no JSON patch.
    #[error("returned a patch that is not a JSON patch: {0}")]
    Decode(#[source] serde_json::Error),
    /// The patch does not apply to the object sent.
    #[error("returned a JSON patch that does not apply: {0}")]
    Apply(#[source] json_patch::PatchError),
    /// The patch changes what identifies the object.
    #[error("may not change {field} (from {from} to {to})")]
    Identity {
        /// `metadata.name`, `metadata.namespace`, `kind` or `apiVersion`.
        field: &'static str,
        /// The value before, as JSON.
        from: Value,
        /// The value after, as JSON.
        to: Value,
    },
    /// A patch on a delete, which has no object to change.
    #[error("attempted to modify the object, which is not supported for this operation")]
    NoObject,
}

impl Error {
    /// HTTP status code and metav1.Status reason (possibly empty, for a denial without one).
    pub fn code_and_reason(&self) -> (u16, &str) {
        match self {
            Error::Denied { code, reason, .. } => (*code, reason),
            Error::CallFailed { .. } | Error::BadPatch { .. } => (500, "InternalError"),
            Error::DryRunUnsupported { .. } => (400, "BadRequest"),
        }
    }

    /// `details` of the client's Status: the webhook's for a denial, the single cause an
    /// internal error carries (as `NewInternalError` sets it).
    pub fn details(&self) -> Option<Value> {
        let cause = |text: String| Some(json!({"causes": [{"message": text}]}));
        match self {
            Error::Denied { details, .. } => details.clone(),
            Error::CallFailed { webhook, source } => {
                cause(format!("failed calling webhook \"{webhook}\": {source}"))
            }
            Error::BadPatch { webhook, problem } => {
                cause(format!("admission webhook \"{webhook}\" {problem}"))
            }
            Error::DryRunUnsupported { .. } => None,
        }
    }
}

/// The write being admitted, as the rules and the review name it.
pub(crate) struct Target<'a> {
    /// Who makes it.
    pub who: &'a Identity,
    /// The resource written.
    pub res: &'a Arc<ResourceType>,
    /// The version the URL named.
    pub version: &'a str,
    /// Main resource, `status` or `scale`.
    pub sub: Sub,
}

impl Target<'_> {
    fn subresource(&self) -> &'static str {
        match self.sub {
            Sub::Main => "",
            Sub::Status => "status",
            Sub::Scale => "scale",
        }
    }

    fn rule_target(&self, namespace: &str) -> RuleTarget<'_> {
        RuleTarget {
            res: self.res,
            version: self.version,
            subresource: self.subresource(),
            namespaced: !namespace.is_empty(),
        }
    }
}

/// One attempt at a write: what the webhooks are shown, and what is then committed.
pub(crate) struct Attempt {
    operation: Operation,
    /// The request's namespace (a Namespace object's own name, as kube-apiserver sets it).
    namespace: String,
    name: String,
    /// The stored object (or its Scale) the write replaces or deletes.
    old: Option<Value>,
    /// The object as the write would store it; `None` for a delete.
    object: Option<Value>,
    /// The resourceVersion the attempt was prepared from; the commit requires it unchanged.
    based_on: String,
}

impl Attempt {
    fn new(
        res: &ResourceType,
        operation: Operation,
        ns: &str,
        old: Option<Value>,
        object: Option<Value>,
    ) -> Attempt {
        let shown = object.as_ref().or(old.as_ref());
        let name = shown.map(|o| meta(o, "name")).unwrap_or_default();
        // An update's dry run keeps the stored resourceVersion; a create's has none.
        let based_on = shown
            .map(|o| meta(o, "resourceVersion"))
            .unwrap_or_default();
        let is_namespace = res.group.is_empty() && res.plural == "namespaces";
        let namespace = if is_namespace {
            name.clone()
        } else {
            ns.to_string()
        };
        // What the webhooks patch is what they were sent.
        let sent = |v: Option<Value>| v.map(|v| review::sent_form(&v).unwrap_or(v));
        Attempt {
            operation,
            namespace,
            name,
            old: sent(old),
            object: sent(object),
            based_on,
        }
    }

    /// The object to commit, pinned to the version it was prepared from.
    fn pinned(&self) -> Value {
        let mut obj = self.object.clone().unwrap_or_default();
        if !self.based_on.is_empty() {
            meta_mut(&mut obj).insert("resourceVersion".into(), self.based_on.clone().into());
        }
        obj
    }
}

/// The options of a commit: those of the request, and the managedFields the dry run worked
/// out (a webhook's changes belong to no manager, as on a real cluster).
fn commit_opts(opts: &WriteOpts, obj: &Value) -> WriteOpts {
    WriteOpts {
        admitted: true,
        managed_fields: Some(
            obj["metadata"]
                .get("managedFields")
                .cloned()
                .unwrap_or_else(|| json!([])),
        ),
        ..opts.clone()
    }
}

/// The options object a webhook is shown (`CreateOptions`, `UpdateOptions` or `DeleteOptions`,
/// as kube-apiserver converts a patch's).
fn options(op: &Operation, opts: &WriteOpts) -> Value {
    let kind = match op {
        Operation::Create => "CreateOptions",
        Operation::Delete => "DeleteOptions",
        _ => "UpdateOptions",
    };
    let mut o = json!({"kind": kind, "apiVersion": "meta.k8s.io/v1"});
    if opts.dry_run {
        o["dryRun"] = json!(["All"]);
    }
    if let Some(m) = opts
        .field_manager
        .as_deref()
        .filter(|_| kind != "DeleteOptions")
    {
        o["fieldManager"] = m.into();
    }
    if let Some(uid) = &opts.precondition_uid {
        o["preconditions"]["uid"] = uid.clone().into();
    }
    if let Some(rv) = &opts.precondition_rv {
        o["preconditions"]["resourceVersion"] = rv.clone().into();
    }
    o
}

/// One HTTP write's admission, and the warnings its webhooks gave.
pub(crate) struct Admit<'a> {
    shared: &'a Shared,
    target: Target<'a>,
    warnings: Vec<String>,
}
