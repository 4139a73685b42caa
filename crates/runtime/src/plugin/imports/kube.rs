//! The `kube` import: writes to the cluster, each through [`super::write::PluginWrites`]'s checks and
//! [`super::cluster`]'s client.

use std::sync::Arc;

use kube::api::Patch;
use wasmtime::component::{HasData, Linker};

use crate::plugin::imports::write::{
    Call, PatchKind, PluginWrites, Target, event_body, object_body, patch_of, unbuildable,
};

use crate::manifest::Verb;

use crate::plugin::bindings::informant::plugin::kube::{
    EventSeverity, ObjectRef as WitObjectRef, PatchType, Preconditions, WriteError,
};
use crate::plugin::bindings::{WitResource, informant};
use crate::telemetry::EventSpan;

/// What the `kube` import of one instance holds: what its plugin version may write.
#[derive(Default)]
pub(crate) struct KubeState {
    pub(super) writes: Arc<PluginWrites>,
}

/// The `kube` import's view of an instance's store.
pub(crate) struct KubeCtx<'a> {
    pub(super) state: &'a KubeState,
    /// The event in hand's span, which each write's span is a child of.
    pub(super) span: &'a EventSpan,
}

struct KubeData;

impl HasData for KubeData {
    type Data<'a> = KubeCtx<'a>;
}

/// Adds the `kube` import to `linker`, each store's view of it made by `view`.
pub(crate) fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> KubeCtx<'_>,
) -> wasmtime::Result<()> {
    informant::plugin::kube::add_to_linker::<T, KubeData>(linker, view)
}

impl informant::plugin::kube::Host for KubeCtx<'_> {
    async fn create(
        &mut self,
        r: WitResource,
        namespace: Option<String>,
        object: String,
    ) -> Result<String, WriteError> {
        let ns = namespace.as_deref();
        // A create names its object in the body: the name is checked like any other.
        let named = body_name(&object);
        let target = Target::new(&r, ns, named.as_deref());
        self.state
            .writes
            .run(self.span, Call::Verb(Verb::Create), target, |s| {
                let body = object_body(&object, s.resource, ns, None)?;
                s.request.create(&s.post(), body).map_err(unbuildable)
            })
            .await
    }

    async fn apply(
        &mut self,
        r: WitResource,
        namespace: Option<String>,
        name: String,
        object: String,
        force: bool,
    ) -> Result<String, WriteError> {
        let ns = namespace.as_deref();
        let target = Target::new(&r, ns, Some(&name));
        self.state
            .writes
            .run(self.span, Call::Verb(Verb::Apply), target, |s| {
                let body = object_body(&object, s.resource, ns, Some(&name))?;
                let body: serde_json::Value =
                    serde_json::from_slice(&body).expect("object_body returns JSON");
                s.request
                    .patch(s.name(), &s.patch(force), &Patch::Apply(body))
                    .map_err(unbuildable)
            })
            .await
    }

    async fn patch(
        &mut self,
        r: WitResource,
        namespace: Option<String>,
        name: String,
        kind: PatchType,
        patch: String,
    ) -> Result<String, WriteError> {
        let ns = namespace.as_deref();
        let target = Target::new(&r, ns, Some(&name));
        let kind = match kind {
            PatchType::Merge => PatchKind::Merge,
            PatchType::Json => PatchKind::Json,
            PatchType::Strategic => PatchKind::Strategic,
        };
        self.state
            .writes
            .run(self.span, Call::Verb(Verb::Patch), target, |s| {
                let patch = patch_of(kind, &patch)?;
                s.request
                    .patch(s.name(), &s.patch(false), &patch)
                    .map_err(unbuildable)
            })
            .await
    }

    async fn delete(
        &mut self,
        r: WitResource,
        namespace: Option<String>,
        name: String,
        preconditions: Preconditions,
    ) -> Result<(), WriteError> {
        let ns = namespace.as_deref();
        let target = Target::new(&r, ns, Some(&name));
        let preconditions = kube::api::Preconditions {
            uid: preconditions.uid,
            resource_version: preconditions.resource_version,
        };
        self.state
            .writes
            .run(self.span, Call::Verb(Verb::Delete), target, |s| {
                s.request
                    .delete(s.name(), &s.delete(preconditions))
                    .map_err(unbuildable)
            })
            .await
            .map(drop)
    }

    async fn update_status(
        &mut self,
        r: WitResource,
        namespace: Option<String>,
        name: String,
        object: String,
    ) -> Result<String, WriteError> {
        let ns = namespace.as_deref();
        let target = Target::new(&r, ns, Some(&name));
        self.state
            .writes
            .run(self.span, Call::Verb(Verb::UpdateStatus), target, |s| {
                let body = object_body(&object, s.resource, ns, Some(&name))?;
                s.request
                    .replace_subresource("status", s.name(), &s.post(), body)
                    .map_err(unbuildable)
            })
            .await
    }

    /// Not through `kube::runtime::events::Recorder`: it folds repeats into a series by
    /// patching the earlier Event (RBAC `patch` the manifest's `create` does not declare), names
    /// each Event after the object uncut (over 253 characters for long names), and sends no field
    /// manager. The body is built here; the request still by kube's builder.
    async fn record_event(
        &mut self,
        regarding: WitObjectRef,
        severity: EventSeverity,
        reason: String,
        action: String,
        note: String,
    ) -> Result<(), WriteError> {
        let event_kind = WitResource {
            group: "events.k8s.io".into(),
            version: "v1".into(),
            kind: "Event".into(),
        };
        // Events about cluster-scoped objects live in `default`, as client-go records them.
        let ns = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let target = Target::new(&event_kind, Some(&ns), None);
        let r = &regarding.kind;
        let api_version = if r.group.is_empty() {
            r.version.clone()
        } else {
            format!("{}/{}", r.group, r.version)
        };
        let reference = serde_json::json!({
            "apiVersion": api_version,
            "kind": r.kind,
            "namespace": regarding.namespace,
            "name": regarding.name,
            "uid": regarding.uid,
        });
        let severity = match severity {
            EventSeverity::Normal => "Normal",
            EventSeverity::Warning => "Warning",
        };
        let manager = self.state.writes.field_manager().to_string();
        self.state
            .writes
            .run(self.span, Call::Event, target, |s| {
                let body = event_body(
                    reference,
                    &ns,
                    (severity, &reason, &action, &note),
                    (&manager, &regarding.name),
                );
                s.request.create(&s.post(), body).map_err(unbuildable)
            })
            .await
            .map(drop)
    }
}

/// The `metadata.name` a created object's JSON gives, if it is a string.
fn body_name(object: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Named {
        metadata: Option<Meta>,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        name: Option<String>,
    }
    serde_json::from_str::<Named>(object).ok()?.metadata?.name
}
