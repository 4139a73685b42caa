//! The host side of the WIT contract: bindings, per-instance state, and the `cache` and `log`
//! imports.
//!
//! `cache` answers from the informer stores the plugin's manifest names, through its tenant's
//! grant, and nothing else; the [`CacheView`] is the whole of what a plugin can see.
//!
//! An event goes to the plugin with its object's header (kind and metadata) and an id; the
//! object's JSON is copied into the plugin only when the plugin asks for it by that id, which
//! answers only while that event is in hand.

use kube::api::Patch;
use parking_lot::RwLock;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use tokio::sync::broadcast;
use wasmtime::component::ResourceTable;
use wasmtime::{StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::plugin::exec::batch::Batch;
use crate::plugin::imports::outbound::{Hooks, Outbound};
use crate::plugin::imports::write::{
    Call, PatchKind, Target, Writer, event_body, object_body, patch_of, unbuildable,
};

use crate::apimachinery::{FieldPath, LabelSelector, names};
use crate::informer::{CachedObject, Event, EventType, FieldIndex, IndexId, Store, Visibility};
use crate::manifest::{BUILTIN_INDEXES, Verb};
use crate::tenancy::Grant;

/// Generated from `wit/`: the contract's types and traits, hidden behind the re-exports below.
#[doc(hidden)]
#[allow(missing_docs)]
pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "plugin",
        // Async on both sides: a call is a future the caller can cut off at its deadline,
        // whatever the guest is doing — spinning (epoch yields) or blocked in a host call.
        imports: {
            // Once per event, and answered from memory: plain calls, without the cost of a
            // future each (a guest cannot block in them). Reading an event that is no longer
            // in hand is a guest bug: a trap rather than an answer.
            "informant:plugin/events.next": trappable,
            "informant:plugin/events.json": trappable,
            "informant:plugin/events.old-json": trappable,
            "informant:plugin/events.old-header": trappable,
            default: async,
        },
        exports: { default: async },
        with: {
            // wasi:http is wasmtime-wasi-http's, linked by `crate::plugin::imports::outbound`.
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
            "wasi:io": wasmtime_wasi::p2::bindings::io,
            "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
        },
    });
}

/// The WIT package this host implements; plugins built for another version are refused at load
/// with this named.
pub const WIT_PACKAGE: &str = "informant:plugin@0.7.0";

use bindings::informant;
pub use bindings::{Plugin, PluginPre};
use informant::plugin::kube::{
    EventSeverity, ObjectRef as WitObjectRef, PatchType, Preconditions, WriteError,
};
pub use informant::plugin::log::Level;
pub use informant::plugin::types::{
    Event as WitEvent, EventType as WitEventType, Failure, QueryError, Resource as WitResource,
};

impl From<&kube::core::ApiResource> for WitResource {
    /// How a plugin names a resolved resource.
    fn from(ar: &kube::core::ApiResource) -> Self {
        WitResource {
            group: ar.group.clone(),
            version: ar.version.clone(),
            kind: ar.kind.clone(),
        }
    }
}

/// `(group, version, kind)`: how a plugin names a resource in queries.
pub type Gvk = (String, String, String);

/// The informer stores one plugin may query, by resource, seen through its tenant's grant.
///
/// A query naming a namespace (or, with none, a cluster-scoped object) outside the grant is
/// `forbidden` whether or not anything is there; broad lists and index lookups return only
/// objects inside the grant and never touch the others, so nothing about the rest — not even
/// how many, not even through how long the answer takes — shows.
///
/// The field indexes a plugin's manifest declares are its own: their names mean something only
/// in this view (a plugin cannot see, squat or collide with another plugin's), while identical
/// paths share one index in the store behind the scenes.
///
/// Stores come and go while the plugin runs (a wildcard watch's kinds follow the cluster's
/// CRDs), so the map sits behind a lock held only to clone one kind's scope list out.
pub struct CacheView {
    stores: RwLock<HashMap<Gvk, Arc<Vec<Scope>>>>,
    grant: Arc<Grant>,
}

impl Clone for CacheView {
    fn clone(&self) -> Self {
        CacheView {
            stores: RwLock::new(self.stores.read().clone()),
            grant: self.grant.clone(),
        }
    }
}

/// One store of a view and the field indexes the plugin declared on it, by the plugin's names.
#[derive(Clone)]
struct Scope {
    store: Arc<Store>,
    indexes: BTreeMap<String, Arc<FieldIndex>>,
}

impl Default for CacheView {
    /// An empty view with the operator's (full) grant.
    fn default() -> Self {
        CacheView::new(Arc::new(Grant::full()))
    }
}

impl CacheView {
    /// An empty view limited to `grant`.
    pub fn new(grant: Arc<Grant>) -> Self {
        CacheView {
            stores: RwLock::new(HashMap::new()),
            grant,
        }
    }

    /// Adds a store (a plugin may watch one resource in several scopes).
    pub fn add(&self, store: Arc<Store>) {
        self.add_with_indexes(store, std::iter::empty());
    }

    /// Adds a store with the field indexes (name, path) the plugin declared on it.
    pub fn add_with_indexes<'a>(
        &self,
        store: Arc<Store>,
        indexes: impl IntoIterator<Item = (&'a str, &'a FieldPath)>,
    ) {
        let ar = store.api_resource();
        let gvk = (ar.group.clone(), ar.version.clone(), ar.kind.clone());
        let mut stores = self.stores.write();
        let scopes = Arc::make_mut(stores.entry(gvk).or_default());
        let at = match scopes.iter().position(|s| Arc::ptr_eq(&s.store, &store)) {
            Some(at) => at,
            None => {
                scopes.push(Scope {
                    store: store.clone(),
                    indexes: BTreeMap::new(),
                });
                scopes.len() - 1
            }
        };
        for (name, path) in indexes {
            scopes[at]
                .indexes
                .entry(name.to_string())
                .or_insert_with(|| Arc::new(store.add_field_index(path.clone())));
        }
    }

    /// Removes a store: its resource is no longer watched in that scope.
    pub fn remove(&self, store: &Arc<Store>) {
        let ar = store.api_resource();
        let gvk = (ar.group.clone(), ar.version.clone(), ar.kind.clone());
        let mut stores = self.stores.write();
        if let Some(scopes) = stores.get_mut(&gvk) {
            Arc::make_mut(scopes).retain(|s| !Arc::ptr_eq(&s.store, store));
            if scopes.is_empty() {
                stores.remove(&gvk);
            }
        }
    }

    /// How many distinct field indexes this view holds.
    pub fn field_indexes(&self) -> usize {
        self.stores
            .read()
            .values()
            .flat_map(|v| v.iter())
            .map(|s| s.indexes.len())
            .sum()
    }

    fn scopes(&self, r: &WitResource) -> Result<Arc<Vec<Scope>>, QueryError> {
        let gvk = (r.group.clone(), r.version.clone(), r.kind.clone());
        self.stores.read().get(&gvk).cloned().ok_or_else(|| {
            let api_version = if r.group.is_empty() {
                r.version.clone()
            } else {
                format!("{}/{}", r.group, r.version)
            };
            QueryError::NotWatched(format!(
                "`{api_version}` `{}` is not watched by this plugin: add it to the manifest's [[watch]]",
                r.kind
            ))
        })
    }

    /// Refuses a namespace that is not a namespace name or lies outside the grant.
    fn check_namespace(&self, namespace: Option<&str>) -> Result<(), QueryError> {
        if let Some(ns) = namespace {
            names::check_namespace(ns).map_err(|e| QueryError::Forbidden(e.to_string()))?;
        }
        self.grant
            .check_namespace(namespace)
            .map_err(QueryError::Forbidden)
    }

    /// What a broad query may touch: the grant's namespaces only.
    fn visibility<'g>(&self, allows: &'g (dyn Fn(Option<&str>) -> bool + 'g)) -> Visibility<'g> {
        if self.grant.is_full() {
            Visibility::All
        } else {
            Visibility::Only(allows)
        }
    }

    /// One object, from whichever scope holds it.
    pub fn get(
        &self,
        r: &WitResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<CachedObject>>, QueryError> {
        let scopes = self.scopes(r)?;
        self.check_namespace(namespace)?;
        names::check_name(name).map_err(|e| QueryError::Forbidden(e.to_string()))?;
        Ok(scopes.iter().find_map(|s| s.store.get(namespace, name)))
    }

    /// Objects matching namespace and selector, once each across scopes.
    pub fn list(
        &self,
        r: &WitResource,
        namespace: Option<&str>,
        selector: Option<&str>,
    ) -> Result<Vec<Arc<CachedObject>>, QueryError> {
        let scopes = self.scopes(r)?;
        if namespace.is_some() {
            self.check_namespace(namespace)?;
        }
        let selector = match selector {
            Some(s) => {
                LabelSelector::parse(s).map_err(|e| QueryError::BadSelector(e.to_string()))?
            }
            None => LabelSelector::default(),
        };
        if let (None, Some(namespaces)) = (namespace, self.grant.exact_namespaces()) {
            // Ask the namespace index for each granted namespace rather than filter them all.
            let selector = &selector;
            return Ok(self.visible(namespaces.into_iter().flat_map(|ns| {
                scopes
                    .iter()
                    .flat_map(move |s| s.store.list(Some(ns), selector))
            })));
        }
        let allows = |ns: Option<&str>| self.grant.allows_namespace(ns);
        let visibility = self.visibility(&allows);
        Ok(self.visible(
            scopes
                .iter()
                .flat_map(|s| s.store.list_in(namespace, &selector, visibility)),
        ))
    }

    /// Objects under an index value, once each across scopes: a built-in index, or one this
    /// plugin declared.
    pub fn by_index(
        &self,
        r: &WitResource,
        index: &str,
        value: &str,
    ) -> Result<Vec<Arc<CachedObject>>, QueryError> {
        let scopes = self.scopes(r)?;
        // A declared index lives in the scopes whose [[watch]] declared it; built-ins in all.
        let ids: Vec<(&Scope, IndexId)> = scopes
            .iter()
            .filter_map(|s| {
                let id =
                    Store::builtin_index(index).or_else(|| s.indexes.get(index).map(|h| h.id()));
                id.map(|id| (s, id))
            })
            .collect();
        if ids.is_empty() {
            let mut declared: Vec<&str> = scopes
                .iter()
                .flat_map(|s| s.indexes.keys())
                .map(String::as_str)
                .collect();
            declared.sort_unstable();
            declared.dedup();
            let declared: Vec<&str> = BUILTIN_INDEXES.iter().copied().chain(declared).collect();
            return Err(QueryError::UnknownIndex(format!(
                "unknown index `{}` (this plugin's indexes on `{}`: {})",
                names::shown(index),
                names::shown(&r.kind),
                declared.join(", ")
            )));
        }
        let allows = |ns: Option<&str>| self.grant.allows_namespace(ns);
        let visibility = self.visibility(&allows);
        let mut all = Vec::new();
        for (s, id) in ids {
            all.extend(s.store.lookup(id, value, visibility));
        }
        Ok(self.visible(all.into_iter()))
    }

    /// The objects inside the grant, once each (a plugin may watch a resource in two scopes).
    fn visible(&self, objs: impl Iterator<Item = Arc<CachedObject>>) -> Vec<Arc<CachedObject>> {
        let mut seen = std::collections::HashSet::new();
        objs.filter(|o| self.grant.allows(o) && seen.insert(o.key().clone()))
            .collect()
    }
}

/// One line a plugin logged, as broadcast to subscribers (tests, `replay`).
#[derive(Debug, Clone)]
pub struct PluginLog {
    /// The plugin's name.
    pub plugin: Arc<str>,
    /// Its tenant (empty for the operator's top-level plugins).
    pub tenant: Arc<str>,
    /// Severity.
    pub level: Level,
    /// The message.
    pub message: String,
}

/// Per-instance state inside the wasmtime `Store`.
pub struct State {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limits: StoreLimits,
    plugin: Arc<str>,
    tenant: Arc<str>,
    cache: Arc<CacheView>,
    logs: broadcast::Sender<PluginLog>,
    text: TextLimits,
    log_rate: Arc<LogRate>,
    http: WasiHttpCtx,
    hooks: Hooks,
    writer: Arc<Writer>,
    /// The events of the `handle-queued` call in progress.
    pub(crate) batch: Batch,
}

impl State {
    /// Fresh state: a WASI context granting nothing, a memory cap, the plugin's cache view.
    pub fn new(
        plugin: Arc<str>,
        tenant: Arc<str>,
        memory_bytes: usize,
        cache: Arc<CacheView>,
        logs: broadcast::Sender<PluginLog>,
        (text, log_rate): (TextLimits, Arc<LogRate>),
    ) -> Self {
        let (plugin_name, tenant_name) = (plugin.clone(), tenant.clone());
        State {
            // No preopened dirs, env, args or sockets; stdio discarded: `log` is the only voice.
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
            limits: StoreLimitsBuilder::new()
                .memory_size(memory_bytes)
                .instances(32)
                .tables(64)
                .memories(32)
                .trap_on_grow_failure(true)
                .build(),
            plugin,
            tenant,
            cache,
            logs,
            http: WasiHttpCtx::new(),
            hooks: Hooks {
                outbound: Arc::new(Outbound::default()),
                plugin: plugin_name,
                tenant: tenant_name,
            },
            batch: Batch::new(std::time::Duration::from_secs(1), text.error_bytes),
            text,
            log_rate,
            writer: Arc::new(Writer::default()),
        }
    }

    /// Each event's deadline within a `handle-queued` call (1 s until given).
    pub fn with_deadline(mut self, per_event: std::time::Duration) -> Self {
        self.batch = Batch::new(per_event, self.text.error_bytes);
        self
    }

    /// What the plugin may write (nothing until given).
    pub fn with_writer(mut self, writer: Arc<Writer>) -> Self {
        self.writer = writer;
        self
    }

    /// The plugin's outbound HTTP policy (none until given).
    pub fn with_outbound(mut self, outbound: Arc<Outbound>) -> Self {
        self.hooks.outbound = outbound;
        self
    }
}

/// Lowers an informer event for `events.next` as event `id`, with the object's header (kind and
/// metadata, which nearly every plugin reads); the JSON and the old version are read only by a
/// plugin that asks (`events.json`, `old-json`, `old-header`).
pub(crate) fn wit_event(id: u64, kind: &WitResource, e: &Event) -> WitEvent {
    WitEvent {
        id,
        event_type: match e.event_type {
            EventType::Added => WitEventType::Added,
            EventType::Updated => WitEventType::Updated,
            EventType::Deleted => WitEventType::Deleted,
            EventType::Resync => WitEventType::Resync,
        },
        header: header(kind, &e.object),
        has_old: e.old_object.is_some(),
        initial: e.initial,
        final_state_unknown: e.final_state_unknown,
    }
}

/// An event's `header`: the kind and metadata as length-prefixed fields (see `wit/plugin.wit`);
/// after the kind, the cached object's metadata fields exactly as it keeps them.
pub fn header(kind: &WitResource, o: &CachedObject) -> Vec<u8> {
    let kind_fields = [kind.group.as_str(), &kind.version, &kind.kind];
    let metadata = o.metadata_fields();
    let len = kind_fields.iter().map(|f| 4 + f.len()).sum::<usize>() + metadata.len();
    let mut out = Vec::with_capacity(len);
    for f in kind_fields {
        informant_header::put_field(&mut out, f);
    }
    out.extend_from_slice(metadata);
    out
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for State {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}

impl informant::plugin::types::Host for State {}

impl informant::plugin::events::Host for State {
    fn next(
        &mut self,
        previous: Option<Result<(), Failure>>,
    ) -> wasmtime::Result<Option<WitEvent>> {
        let now = std::time::Instant::now();
        self.batch.finish(previous, now);
        Ok(self
            .batch
            .take(now)
            .map(|(id, kind, event)| wit_event(id, kind, event)))
    }

    fn json(&mut self, event: u64) -> wasmtime::Result<String> {
        Ok(self.batch.in_hand(event)?.object.json().to_string())
    }

    fn old_json(&mut self, event: u64) -> wasmtime::Result<Option<String>> {
        let event = self.batch.in_hand(event)?;
        Ok(event.old_object.as_ref().map(|o| o.json().to_string()))
    }

    fn old_header(&mut self, event: u64) -> wasmtime::Result<Option<Vec<u8>>> {
        let (kind, event) = self.batch.in_hand_with_kind(event)?;
        Ok(event.old_object.as_ref().map(|o| header(kind, o)))
    }
}

impl informant::plugin::cache::Host for State {
    async fn get(
        &mut self,
        r: WitResource,
        namespace: Option<String>,
        name: String,
    ) -> Result<Option<String>, QueryError> {
        Ok(self
            .cache
            .get(&r, namespace.as_deref(), &name)?
            .map(|o| o.json().to_string()))
    }

    async fn list(
        &mut self,
        r: WitResource,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<Vec<String>, QueryError> {
        let objs = self
            .cache
            .list(&r, namespace.as_deref(), label_selector.as_deref())?;
        Ok(objs.iter().map(|o| o.json().to_string()).collect())
    }

    async fn by_index(
        &mut self,
        r: WitResource,
        index: String,
        value: String,
    ) -> Result<Vec<String>, QueryError> {
        let objs = self.cache.by_index(&r, &index, &value)?;
        Ok(objs.iter().map(|o| o.json().to_string()).collect())
    }
}

impl informant::plugin::kube::Host for State {
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
        self.writer
            .run(Call::Verb(Verb::Create), target, |s| {
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
        self.writer
            .run(Call::Verb(Verb::Apply), target, |s| {
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
        self.writer
            .run(Call::Verb(Verb::Patch), target, |s| {
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
        self.writer
            .run(Call::Verb(Verb::Delete), target, |s| {
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
        self.writer
            .run(Call::Verb(Verb::UpdateStatus), target, |s| {
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
        let manager = self.writer.field_manager().to_string();
        self.writer
            .run(Call::Event, target, |s| {
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

impl informant::plugin::log::Host for State {
    async fn log(&mut self, level: Level, message: String) {
        let (plugin, tenant) = (&*self.plugin, &*self.tenant);
        let message = truncated(message, self.text.log_bytes);
        // The host's log is shared by every tenant: a flood is cut to the plugin's rate, and
        // what was cut is said once it may speak again. Subscribers still get every line.
        let dropped = self.log_rate.admit();
        if let Some(dropped) = dropped.filter(|n| *n > 0) {
            let rate = self.text.log_lines_per_second;
            tracing::warn!(
                plugin,
                tenant,
                dropped,
                "log lines dropped from the host's log: over {rate} per second (`limits.log-lines-per-second`)"
            );
        }
        if dropped.is_some() {
            // Escaped: a newline must not start a line that looks like the host's.
            let line = escape_controls(&message);
            match level {
                Level::Trace => tracing::trace!(plugin, tenant, "{line}"),
                Level::Debug => tracing::debug!(plugin, tenant, "{line}"),
                Level::Info => tracing::info!(plugin, tenant, "{line}"),
                Level::Warn => tracing::warn!(plugin, tenant, "{line}"),
                Level::Error => tracing::error!(plugin, tenant, "{line}"),
            }
        }
        // Nobody listening is the normal case outside tests and replay.
        let _ = self.logs.send(PluginLog {
            plugin: self.plugin.clone(),
            tenant: self.tenant.clone(),
            level,
            message,
        });
    }
}

/// Default longest log message a plugin may write; the rest is cut.
pub const MAX_LOG_BYTES: usize = 64 << 10;

/// Default longest error text kept from a plugin: it is logged and shown by `/plugins`.
pub const MAX_ERROR_BYTES: usize = 4 << 10;

/// What a plugin's own text may cost the host (`[limits]` in informant.toml).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextLimits {
    /// Longest log message; the rest is cut and marked.
    pub log_bytes: usize,
    /// Longest error text (returned errors, traps); the rest is cut and marked.
    pub error_bytes: usize,
    /// Log lines per second one plugin may write into the host's log.
    pub log_lines_per_second: u32,
}

impl Default for TextLimits {
    fn default() -> Self {
        TextLimits {
            log_bytes: MAX_LOG_BYTES,
            error_bytes: MAX_ERROR_BYTES,
            log_lines_per_second: 1000,
        }
    }
}

/// One plugin version's log rate (shared by its instances, so a restart does not refill it)
/// and the lines it had dropped since it last spoke.
#[derive(Debug)]
pub struct LogRate {
    limiter: governor::DefaultDirectRateLimiter,
    dropped: std::sync::atomic::AtomicU64,
}

impl LogRate {
    /// `per_second` lines, with a burst of one second's worth.
    pub fn new(per_second: u32) -> Arc<Self> {
        let rate = std::num::NonZeroU32::new(per_second).unwrap_or(std::num::NonZeroU32::MIN);
        Arc::new(LogRate {
            limiter: governor::RateLimiter::direct(governor::Quota::per_second(rate)),
            dropped: Default::default(),
        })
    }

    /// `None` when this line is over the rate (and counted); else how many were dropped before it.
    fn admit(&self) -> Option<u64> {
        use std::sync::atomic::Ordering::Relaxed;
        if self.limiter.check().is_err() {
            self.dropped.fetch_add(1, Relaxed);
            return None;
        }
        Some(self.dropped.swap(0, Relaxed))
    }
}

/// `text` cut to at most `max` bytes (on a character boundary), saying how long it was.
pub fn truncated(mut text: String, max: usize) -> String {
    if text.len() > max {
        let total = text.len();
        let cut = (0..=max)
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push_str(&format!("… ({total} bytes in all)"));
    }
    text
}

/// `text` with control characters (newlines included) written as escapes, so it stays on one
/// line of the host's log whatever a plugin put in it.
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains(char::is_control) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::informer::{RawObject, StoreOptions};
    use crate::tenancy::{NamespacePattern, ResourceRule};
    use kube::core::{ApiResource, GroupVersionKind};

    fn store() -> Arc<Store> {
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        let store = Arc::new(Store::new(ar, StoreOptions::default()));
        for (ns, name, team) in [("a", "1", "x"), ("a-dev", "2", "x"), ("b", "3", "x")] {
            let raw: RawObject = serde_json::from_str(&format!(
                r#"{{"metadata":{{"name":"{name}","namespace":"{ns}","resourceVersion":"1","labels":{{"team":"{team}"}}}}}}"#
            ))
            .unwrap();
            store.apply(raw, &mut |_| {});
        }
        store
    }

    fn view(patterns: &[&str]) -> CacheView {
        let namespaces = patterns
            .iter()
            .map(|p| NamespacePattern::try_from(p.to_string()).unwrap())
            .collect();
        let all = vec![ResourceRule::try_from("*".to_string()).unwrap()];
        let v = CacheView::new(Arc::new(Grant::new("t", namespaces, all, false)));
        v.add(store());
        v
    }

    fn names(objs: Vec<Arc<CachedObject>>) -> Vec<String> {
        let mut n: Vec<String> = objs.iter().map(|o| o.key().to_string()).collect();
        n.sort();
        n
    }

    #[test]
    fn plugin_text_stays_on_one_line_and_within_bounds() {
        let forged =
            "ok\n2026-11-23T00:00:00Z  INFO plugin=\"b\" tenant=\"team-b\" forged\r\u{1b}[2J";
        let line = escape_controls(forged);
        assert!(!line.contains(char::is_control), "{line}");
        assert!(line.starts_with("ok\\n2026"), "{line}");
        assert_eq!(escape_controls("plain, ünïcode"), "plain, ünïcode");
        let long = truncated("é".repeat(10), 5);
        assert_eq!(long, "éé… (20 bytes in all)");
        assert_eq!(truncated("short".into(), 5), "short");
    }

    #[tokio::test]
    async fn a_plugin_cannot_write_a_host_log_line() {
        let captured = crate::testing::CapturedLogs::default();
        let _default = tracing::subscriber::set_default(captured.subscriber());
        let logs = broadcast::channel(8).0;
        let mut rx = logs.subscribe();
        let cache = Arc::new(CacheView::default());
        let text = TextLimits::default();
        let rate = (text, LogRate::new(2));
        let mut state = State::new("a".into(), "team-a".into(), 1 << 20, cache, logs, rate);
        let forged =
            "done\n2026-11-23T00:00:00Z  ERROR informant: plugin=\"b\" tenant=\"team-b\" forged";
        let huge = format!("{forged}{}", "x".repeat(MAX_LOG_BYTES));
        informant::plugin::log::Host::log(&mut state, Level::Info, huge).await;
        let text = captured.text();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(text.contains("done\\n2026"), "{text}");
        assert!(text.len() < MAX_LOG_BYTES + 512, "{} bytes", text.len());
        // Subscribers (tests, replay) get the text as written, bounded.
        let sent = rx.recv().await.unwrap().message;
        assert!(sent.starts_with(forged) && sent.len() < MAX_LOG_BYTES + 64);
        // A flood: the host's log takes the burst (2 lines), subscribers take every line.
        for i in 0..5 {
            informant::plugin::log::Host::log(&mut state, Level::Info, format!("flood {i}")).await;
        }
        let text = captured.text();
        assert_eq!(text.lines().count(), 2, "{text}");
        for i in 0..5 {
            assert_eq!(rx.recv().await.unwrap().message, format!("flood {i}"));
        }
        assert_eq!(
            state
                .log_rate
                .dropped
                .load(std::sync::atomic::Ordering::Relaxed),
            4,
            "counted, to be reported when the plugin may log again"
        );
    }

    #[test]
    fn the_declared_package_is_the_one_in_wit() {
        let wit = include_str!("../../../../../wit/plugin.wit");
        assert!(wit.contains(&format!("package {WIT_PACKAGE};")));
    }

    #[test]
    fn an_index_declared_on_one_scope_answers_from_that_scope() {
        let r = WitResource {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        let team: FieldPath = "metadata.labels.team".parse().unwrap();
        let v = CacheView::default();
        v.add_with_indexes(store(), [("by-team", &team)]);
        v.add(store());
        assert_eq!(
            names(v.by_index(&r, "by-team", "x").unwrap()),
            ["a-dev/2", "a/1", "b/3"]
        );
        let Err(QueryError::UnknownIndex(e)) = v.by_index(&r, "nope", "x") else {
            panic!("an undeclared index is unknown")
        };
        assert!(e.ends_with("namespace, label, owner, by-team)"), "{e}");
    }

    #[test]
    fn broad_lists_answer_the_same_through_exact_names_and_globs() {
        let r = WitResource {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        let want = vec!["a-dev/2".to_string(), "a/1".to_string()];
        for v in [view(&["a", "a-dev"]), view(&["a", "a-*"])] {
            assert_eq!(names(v.list(&r, None, None).unwrap()), want);
            assert_eq!(names(v.list(&r, None, Some("team=x")).unwrap()), want);
            assert_eq!(names(v.by_index(&r, "label", "team=x").unwrap()), want);
            assert!(matches!(
                v.list(&r, Some("b"), None),
                Err(QueryError::Forbidden(_))
            ));
        }
    }

    mod queries {
        //! Whatever a plugin passes to `cache`: no panic, nothing outside the grant, and every
        //! refusal names what it refused.
        use super::*;
        use proptest::prelude::*;

        /// Strings near the edges: other tenants' names, separators, traversal, odd characters.
        fn text() -> impl Strategy<Value = String> {
            prop_oneof![
                Just(String::new()),
                prop::sample::select(vec![
                    "a",
                    "a-dev",
                    "b",
                    "b/3",
                    "a/1",
                    "3",
                    "1",
                    "..",
                    ".",
                    "a/../b",
                    "a-x/../b",
                    "team=x",
                    "team",
                    "label",
                    "namespace",
                    "owner",
                    "color",
                    "%2F",
                    "a\n",
                    "*",
                ])
                .prop_map(str::to_string),
                "[a-z0-9./%=!,()*-]{0,12}",
                any::<String>(),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            #[test]
            fn any_query_stays_inside_the_grant(
                glob in any::<bool>(),
                ns in prop::option::of(text()),
                name in text(),
                selector in prop::option::of(text()),
                index in text(),
                value in text(),
            ) {
                let v = if glob { view(&["a", "a-*"]) } else { view(&["a", "a-dev"]) };
                let r = WitResource { group: String::new(), version: "v1".into(), kind: "ConfigMap".into() };
                let inside = |objs: &[Arc<CachedObject>]| {
                    objs.iter().all(|o| matches!(o.namespace(), Some("a" | "a-dev")))
                };
                let named = |e: &QueryError, what: &str| {
                    let m = match e {
                        QueryError::Forbidden(m) | QueryError::NotWatched(m)
                        | QueryError::BadSelector(m) | QueryError::UnknownIndex(m) => m,
                    };
                    // The refused input is shown, escaped and cut if it is long.
                    let raw: String = what.chars().take(20).collect();
                    m.contains(&raw) || m.contains(&names::shown(&raw)) || what.is_empty() || matches!(e, QueryError::Forbidden(_) if m.contains("tenant `t`"))
                };
                match v.get(&r, ns.as_deref(), &name) {
                    Ok(found) => prop_assert!(inside(&found.into_iter().collect::<Vec<_>>())),
                    Err(e) => prop_assert!(named(&e, ns.as_deref().unwrap_or(&name)) || named(&e, &name), "{e:?}"),
                }
                match v.list(&r, ns.as_deref(), selector.as_deref()) {
                    Ok(found) => prop_assert!(inside(&found)),
                    Err(e) => prop_assert!(
                        named(&e, ns.as_deref().unwrap_or_default()) || named(&e, selector.as_deref().unwrap_or_default()),
                        "{e:?}"
                    ),
                }
                match v.by_index(&r, &index, &value) {
                    Ok(found) => prop_assert!(inside(&found)),
                    Err(e) => prop_assert!(named(&e, &index), "{e:?}"),
                }
            }
        }
    }
}
