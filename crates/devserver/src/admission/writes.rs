//! The admitted writes. Each finds the webhooks whose rules match it (none: the write runs as
//! it always did), prepares an [`Attempt`] with a dry run of itself, shows it to the webhooks
//! and commits the object they approved, pinned to the version it was prepared from.

use std::sync::Arc;

use http::HeaderValue;
use kube::core::admission::Operation;
use serde_json::Value;

use super::call;
use super::error::CallError;
use super::matching::{self, Hook};
use super::review::{self, Verdict};
use super::{ATTEMPTS, Admit, Attempt, Error, PatchProblem, Target, commit_opts, options};
use crate::api::{Sub, WriteOpts};
use crate::identity::Identity;
use crate::patch::PatchType;
use crate::resources::ResourceType;
use crate::selector::{FieldSelector, LabelSelector};
use crate::{Error as ApiError, Result as ApiResult, Shared};

impl<'a> Admit<'a> {
    /// Admission of a write by `who` to `res` (at the URL's `version`), to its `sub`resource.
    pub fn new(
        shared: &'a Shared,
        who: &'a Identity,
        res: &'a Arc<ResourceType>,
        version: &'a str,
        sub: Sub,
    ) -> Admit<'a> {
        Admit {
            shared,
            target: Target {
                who,
                res,
                version,
                sub,
            },
            warnings: Vec::new(),
        }
    }

    /// The webhooks' warnings as `Warning` header values, each once, in the order given.
    pub fn warning_headers(&self) -> impl Iterator<Item = HeaderValue> + '_ {
        self.warnings
            .iter()
            .filter_map(|w| review::warning_header(w))
    }

    /// HTTP create into `ns` ("" for cluster-scoped).
    pub async fn create(&mut self, ns: &str, obj: Value, opts: &WriteOpts) -> ApiResult<Value> {
        let (shared, res) = (self.shared, self.target.res.clone());
        let hooks = self.matching(ns, &[Operation::Create]);
        if hooks.is_empty() {
            return shared.api.create_in(&res, ns, obj, opts);
        }
        let prepare = |dry: &WriteOpts| {
            let created = shared.api.create_in(&res, ns, obj.clone(), dry)?;
            Ok(Attempt::new(
                &res,
                Operation::Create,
                ns,
                None,
                Some(created),
            ))
        };
        let commit = |a: &Attempt| {
            let obj = a.pinned();
            shared
                .api
                .create_in(&res, ns, obj.clone(), &commit_opts(opts, &obj))
        };
        self.run(&hooks, opts, prepare, commit).await
    }

    /// HTTP update (PUT) of the object or its status.
    pub async fn update(
        &mut self,
        ns: &str,
        name: &str,
        obj: Value,
        opts: &WriteOpts,
    ) -> ApiResult<Value> {
        let (shared, res, sub) = (self.shared, self.target.res.clone(), self.target.sub);
        let hooks = self.matching(ns, &[Operation::Update]);
        if hooks.is_empty() {
            return shared.api.update(&res, ns, name, obj, sub, opts);
        }
        let prepare = |dry: &WriteOpts| {
            let updated = shared.api.update(&res, ns, name, obj.clone(), sub, dry)?;
            updating(shared, &res, ns, name, updated)
        };
        let commit = |a: &Attempt| {
            let obj = a.pinned();
            let opts = commit_opts(opts, &obj);
            shared.api.update(&res, ns, name, obj, sub, &opts)
        };
        self.run(&hooks, opts, prepare, commit).await
    }

    /// HTTP patch of the object or its status; the result and whether it created the object
    /// (an apply to a missing object, admitted as a CREATE).
    pub async fn patch(
        &mut self,
        ns: &str,
        name: &str,
        ptype: PatchType,
        body: &[u8],
        opts: &WriteOpts,
    ) -> ApiResult<(Value, bool)> {
        let (shared, res, sub) = (self.shared, self.target.res.clone(), self.target.sub);
        let hooks = self.matching(ns, &[Operation::Update, Operation::Create]);
        if hooks.is_empty() {
            return shared.api.patch(&res, ns, name, ptype, body, sub, opts);
        }
        let prepare = |dry: &WriteOpts| {
            let (patched, created) = shared.api.patch(&res, ns, name, ptype, body, sub, dry)?;
            if created {
                return Ok(Attempt::new(
                    &res,
                    Operation::Create,
                    ns,
                    None,
                    Some(patched),
                ));
            }
            updating(shared, &res, ns, name, patched)
        };
        let commit = |a: &Attempt| {
            let obj = a.pinned();
            let opts = commit_opts(opts, &obj);
            if a.operation == Operation::Create {
                shared
                    .api
                    .create_in(&res, ns, obj, &opts)
                    .map(|v| (v, true))
            } else {
                let updated = shared.api.update(&res, ns, name, obj, sub, &opts)?;
                Ok((updated, false))
            }
        };
        self.run(&hooks, opts, prepare, commit).await
    }

    /// HTTP delete; the object's final state.
    pub async fn delete(&mut self, ns: &str, name: &str, opts: &WriteOpts) -> ApiResult<Value> {
        let (shared, res) = (self.shared, self.target.res.clone());
        let hooks = self.matching(ns, &[Operation::Delete]);
        if hooks.is_empty() {
            return shared.api.delete(&res, Some(ns), name, opts);
        }
        let prepare = |dry: &WriteOpts| {
            let old = shared.api.delete(&res, Some(ns), name, dry)?;
            Ok(Attempt::new(&res, Operation::Delete, ns, Some(old), None))
        };
        let commit = |a: &Attempt| {
            // The caller's own precondition was checked by the dry run; otherwise the delete
            // is of the version the webhooks saw.
            let opts = WriteOpts {
                precondition_rv: opts
                    .precondition_rv
                    .clone()
                    .or_else(|| Some(a.based_on.clone())),
                ..opts.clone()
            };
            shared.api.delete(&res, Some(ns), name, &opts)
        };
        self.run(&hooks, opts, prepare, commit).await
    }

    /// HTTP delete-collection: each selected object is deleted (and admitted) on its own, as
    /// kube-apiserver does; how many were deleted.
    pub async fn delete_collection(
        &mut self,
        ns: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
        opts: &WriteOpts,
    ) -> ApiResult<usize> {
        let (shared, res) = (self.shared, self.target.res.clone());
        if self
            .matching(ns.unwrap_or_default(), &[Operation::Delete])
            .is_empty()
        {
            return shared.api.delete_collection(&res, ns, labels, fields, opts);
        }
        let mut n = 0;
        for (kns, kname) in shared.api.collection_names(&res, ns, labels, fields) {
            match self.delete(&kns, &kname, opts).await {
                Ok(_) => n += 1,
                Err(ApiError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }

    /// `.../scale` PUT; the new Scale.
    pub async fn update_scale(
        &mut self,
        ns: &str,
        name: &str,
        body: Value,
        opts: &WriteOpts,
    ) -> ApiResult<Value> {
        let (shared, res) = (self.shared, self.target.res.clone());
        let hooks = self.matching(ns, &[Operation::Update]);
        if hooks.is_empty() {
            return shared.api.update_scale(&res, ns, name, body, opts);
        }
        let prepare = |dry: &WriteOpts| {
            let scaled = shared.api.update_scale(&res, ns, name, body.clone(), dry)?;
            let old = shared.api.get_scale(&res, ns, name)?;
            Ok(Attempt::new(
                &res,
                Operation::Update,
                ns,
                Some(old),
                Some(scaled),
            ))
        };
        let commit = |a: &Attempt| shared.api.update_scale(&res, ns, name, a.pinned(), opts);
        self.run(&hooks, opts, prepare, commit).await
    }

    /// `.../scale` PATCH; the new Scale.
    pub async fn patch_scale(
        &mut self,
        ns: &str,
        name: &str,
        ptype: PatchType,
        body: &[u8],
        opts: &WriteOpts,
    ) -> ApiResult<Value> {
        let (shared, res) = (self.shared, self.target.res.clone());
        let hooks = self.matching(ns, &[Operation::Update]);
        if hooks.is_empty() {
            return shared.api.patch_scale(&res, ns, name, ptype, body, opts);
        }
        let prepare = |dry: &WriteOpts| {
            let scaled = shared.api.patch_scale(&res, ns, name, ptype, body, dry)?;
            let old = shared.api.get_scale(&res, ns, name)?;
            Ok(Attempt::new(
                &res,
                Operation::Update,
                ns,
                Some(old),
                Some(scaled),
            ))
        };
        // The webhooks approved a whole Scale: it is written as a PUT of it would be.
        let commit = |a: &Attempt| shared.api.update_scale(&res, ns, name, a.pinned(), opts);
        self.run(&hooks, opts, prepare, commit).await
    }

    /// The webhooks whose rules match this write for one of `ops` in `ns`.
    fn matching(&self, ns: &str, ops: &[Operation]) -> Vec<Hook> {
        if matching::exempt(self.target.res) {
            return Vec::new();
        }
        let rules = self.target.rule_target(ns);
        matching::hooks(self.shared)
            .into_iter()
            .filter(|h| ops.iter().any(|op| h.rules_match(&rules, op)))
            .collect()
    }

    /// Prepares, admits and commits, again while the object changes under the webhooks.
    async fn run<T>(
        &mut self,
        hooks: &[Hook],
        opts: &WriteOpts,
        prepare: impl Fn(&WriteOpts) -> ApiResult<Attempt>,
        commit: impl Fn(&Attempt) -> ApiResult<T>,
    ) -> ApiResult<T> {
        let dry = WriteOpts {
            dry_run: true,
            ..opts.clone()
        };
        let mut attempt = 1;
        loop {
            let mut a = prepare(&dry)?;
            self.review(hooks, &mut a, opts).await?;
            match commit(&a) {
                // Stored since the attempt was prepared (or, for an apply, created): the
                // webhooks saw a version that is gone.
                Err(ApiError::Conflict { .. } | ApiError::AlreadyExists { .. })
                    if attempt < ATTEMPTS =>
                {
                    attempt += 1;
                }
                done => return done,
            }
        }
    }

    /// Shows the attempt to each matching webhook, mutating ones first (the hooks come in
    /// that order), applying their patches.
    async fn review(&mut self, hooks: &[Hook], a: &mut Attempt, opts: &WriteOpts) -> ApiResult<()> {
        let rules = self.target.rule_target(&a.namespace);
        for hook in hooks {
            if !hook.rules_match(&rules, &a.operation) || !self.selected(hook, a) {
                continue;
            }
            if opts.dry_run && !hook.dry_run_safe() {
                return Err(Error::DryRunUnsupported {
                    webhook: hook.name.clone(),
                }
                .into());
            }
            let verdict = match self.call(hook, a, opts).await {
                Ok(v) => v,
                Err(source) if hook.ignore_failures => {
                    tracing::warn!(webhook = %hook.name, error = %source,
                        "admission: webhook call failed; skipped (failurePolicy: Ignore)");
                    continue;
                }
                Err(source) => {
                    return Err(Error::CallFailed {
                        webhook: hook.name.clone(),
                        source,
                    }
                    .into());
                }
            };
            for w in &verdict.warnings {
                if !self.warnings.contains(w) {
                    self.warnings.push(w.clone());
                }
            }
            if !verdict.allowed {
                return Err(denied(hook, verdict.status).into());
            }
            if let Some(patch) = &verdict.patch {
                apply_patch(hook, a, patch)?;
            }
        }
        Ok(())
    }

    /// Whether `namespaceSelector` and `objectSelector` select the attempt.
    fn selected(&self, hook: &Hook, a: &Attempt) -> bool {
        let res = self.target.res;
        let is_namespace = res.group.is_empty() && res.plural == "namespaces";
        let namespace = if hook.namespace_selector.is_empty()
            || (a.namespace.is_empty() && !is_namespace)
        {
            true
        } else if is_namespace && self.target.sub == Sub::Main && a.operation != Operation::Delete {
            // A Namespace being created or updated is judged by its new labels.
            let labels = &a.object.as_ref().unwrap_or(&Value::Null)["metadata"]["labels"];
            matching::labels_match(&hook.namespace_selector, labels)
        } else {
            let labels = matching::stored_labels(self.shared, "namespaces", &a.namespace);
            matching::labels_match(&hook.namespace_selector, &labels)
        };
        let object = hook.object_selector.is_empty()
            || [&a.object, &a.old]
                .into_iter()
                .flatten()
                .any(|o| matching::labels_match(&hook.object_selector, &o["metadata"]["labels"]));
        namespace && object
    }

    /// One call of `hook`, and its checked answer.
    async fn call(&self, hook: &Hook, a: &Attempt, opts: &WriteOpts) -> Result<Verdict, CallError> {
        if !hook.review_versions.iter().any(|v| v == "v1") {
            return Err(CallError::Versions);
        }
        let to = call::endpoint(&hook.client, hook.timeout)?;
        let options = options(&a.operation, opts);
        let (uid, body) = review::request(&self.target, a, opts.dry_run, &options)?;
        let answer = call::post(&to, hook.timeout, body).await?;
        review::verdict(&uid, hook.mutating, &answer)
    }
}

/// An UPDATE of `ns/name` to `new` (as a dry run made it), with the object as stored now as
/// its old object.
fn updating(
    shared: &Shared,
    res: &ResourceType,
    ns: &str,
    name: &str,
    new: Value,
) -> ApiResult<Attempt> {
    let old = shared.api.get(res, ns, name)?.value()?;
    Ok(Attempt::new(
        res,
        Operation::Update,
        ns,
        Some(old),
        Some(new),
    ))
}

/// A denial as kube-apiserver's `ToStatusErr` words it (as it has since 1.15: a code below
/// 400 becomes 400, the reason is the webhook's own).
fn denied(hook: &Hook, status: review::Status) -> Error {
    let code = status
        .code
        .filter(|c| (400..=599).contains(c))
        .map_or(400, |c| c as u16);
    let reason = status.reason.unwrap_or_default();
    let by = format!("admission webhook \"{}\" denied the request", hook.name);
    let message = match status.message.filter(|m| !m.is_empty()) {
        Some(m) => format!("{by}: {m}"),
        None if !reason.is_empty() => format!("{by}: {reason}"),
        None => format!("{by} without explanation"),
    };
    Error::Denied {
        webhook: hook.name.clone(),
        code,
        reason,
        message,
        details: status.details,
    }
}

/// Applies a mutating webhook's JSON patch to the attempt's object.
fn apply_patch(hook: &Hook, a: &mut Attempt, patch: &[u8]) -> ApiResult<()> {
    let bad = |problem| {
        ApiError::from(Error::BadPatch {
            webhook: hook.name.clone(),
            problem,
        })
    };
    let ops: json_patch::Patch =
        serde_json::from_slice(patch).map_err(|e| bad(PatchProblem::Decode(e)))?;
    if ops.0.is_empty() {
        return Ok(());
    }
    let Some(object) = a.object.as_mut() else {
        return Err(bad(PatchProblem::NoObject));
    };
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &ops).map_err(|e| bad(PatchProblem::Apply(e)))?;
    for (field, pointer) in [
        ("metadata.name", "/metadata/name"),
        ("metadata.namespace", "/metadata/namespace"),
        ("kind", "/kind"),
        ("apiVersion", "/apiVersion"),
    ] {
        let (from, to) = (object.pointer(pointer), patched.pointer(pointer));
        if from != to {
            return Err(bad(PatchProblem::Identity {
                field,
                from: from.cloned().unwrap_or(Value::Null),
                to: to.cloned().unwrap_or(Value::Null),
            }));
        }
    }
    *object = patched;
    Ok(())
}
