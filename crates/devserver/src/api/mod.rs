//! API semantics on top of the store: metadata stamping (uid, resourceVersion,
//! creationTimestamp; generation by the rules in `strategy`), optimistic concurrency, the status
//! and scale subresources, patches and cascades (namespace and CRD deletion). Both the HTTP
//! handlers and the direct Rust API go through here, so both emit the same watch events.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use parking_lot::{RwLock, RwLockReadGuard};
use serde_json::{Value, json};

use super::metadata::{
    check_depth, check_type, generate_suffix, meta, meta_mut, new_uid, normalize, now,
};
use super::patch::{self, PatchType};
use super::resources::{self, Registry, ResourceType};
use super::selector::{FieldSelector, LabelSelector, labels_match};
use super::ssa::{self, Schema, Writer};
use super::store::{EventType, Obj, Store, Tx};
use super::{Cause, Error, OPTIMISTIC_LOCK, Result};
use super::{defaults, scale, strategy, validation};

/// Manager of writes through the Rust API, which have no User-Agent.
const DIRECT_MANAGER: &str = "informant-devserver";

impl WriteOpts {
    /// The manager an Update is recorded under.
    fn manager(&self) -> &str {
        self.field_manager
            .as_deref()
            .or(self.default_manager.as_deref())
            .unwrap_or(if self.http { "" } else { DIRECT_MANAGER })
    }

    /// The subresource name of a write to `sub`.
    fn subresource(&self, sub: Sub) -> &'static str {
        match (self.subresource, sub) {
            (Some(s), _) => s,
            (None, Sub::Status) => "status",
            (None, Sub::Scale) => "scale",
            (None, Sub::Main) => "",
        }
    }
}

fn schema(res: &ResourceType) -> Schema<'_> {
    Schema {
        builtin: res.builtin,
        kind: &res.kind,
        crd: res.schema.as_deref(),
    }
}

/// Records the Update `old` -> `new` in `new`'s managedFields, or stores what an apply worked
/// out.
fn record(res: &ResourceType, old: &Value, new: &mut Value, sub: Sub, opts: &WriteOpts) {
    if let Some(mf) = &opts.managed_fields {
        meta_mut(new).insert("managedFields".into(), mf.clone());
        if mf.as_array().is_some_and(Vec::is_empty) {
            meta_mut(new).remove("managedFields");
        }
        return;
    }
    let api_version = new["apiVersion"].as_str().unwrap_or_default().to_string();
    let w = Writer {
        manager: opts.manager(),
        api_version: &api_version,
        subresource: opts.subresource(sub),
    };
    ssa::record_update(schema(res), res.status_subresource, old, new, &w);
}

/// Per-request write options (query parameters and DeleteOptions).
#[derive(Debug, Default, Clone)]
pub(crate) struct WriteOpts {
    /// `dryRun=All`: validate and answer, but store nothing.
    pub dry_run: bool,
    /// Request came over HTTP: status-subresource rules apply (main writes keep status).
    pub http: bool,
    /// Apiversion version segment of the URL, which the body's apiVersion must match.
    pub version: Option<String>,
    /// `fieldManager` query parameter (required for apply patches).
    pub field_manager: Option<String>,
    /// Manager of non-apply writes without `fieldManager`: the User-Agent up to its first `/`.
    pub default_manager: Option<String>,
    /// `force=true`: an apply takes the fields it conflicts on.
    pub force: bool,
    /// The subresource a write to the object stands for (`scale`), for its managedFields entry.
    pub subresource: Option<&'static str>,
    /// managedFields an apply already worked out; the write stores them as they are.
    pub managed_fields: Option<Value>,
    /// DeleteOptions.preconditions.
    pub precondition_uid: Option<String>,
    /// DeleteOptions.preconditions.
    pub precondition_rv: Option<String>,
}

/// Which part of the object a write targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sub {
    Main,
    Status,
    Scale,
}

/// The API layer.
pub(crate) struct Api {
    registry: RwLock<Registry>,
    pub store: Store,
    /// Next host number in the service CIDR 10.96.0.0/12 (10.96.0.1 is the `kubernetes`
    /// service's on a real cluster, so allocation starts after it).
    next_ip: AtomicU32,
}

const CRD_KEY: &str = "customresourcedefinitions.apiextensions.k8s.io";
const NS_KEY: &str = "namespaces";

impl Api {
    pub fn new(history: usize) -> Api {
        Api {
            registry: RwLock::new(Registry::builtin()),
            store: Store::new(history),
            next_ip: AtomicU32::new(10),
        }
    }

    /// The next cluster IP; wraps within the /12 (a dev server never holds a million services).
    fn next_cluster_ip(&self) -> String {
        let n = self.next_ip.fetch_add(1, Ordering::Relaxed) % (1 << 20);
        let ip = (10u32 << 24) | (96 << 16) | n.max(2);
        std::net::Ipv4Addr::from(ip).to_string()
    }

    pub fn registry(&self) -> RwLockReadGuard<'_, Registry> {
        self.registry.read()
    }

    pub fn resolve_kind(&self, api_version: &str, kind: &str) -> Result<Arc<ResourceType>> {
        self.registry.read().by_kind(api_version, kind)
    }

    fn resolve_obj(&self, obj: &Value) -> Result<(Arc<ResourceType>, String)> {
        let av = obj["apiVersion"].as_str().unwrap_or_default();
        let kind = obj["kind"].as_str().unwrap_or_default();
        let res = self.resolve_kind(av, kind)?;
        let ns = match meta(obj, "namespace") {
            ns if ns.is_empty() && res.namespaced => "default".to_string(),
            _ if !res.namespaced => String::new(),
            ns => ns,
        };
        Ok((res, ns))
    }

    /// Direct create: resource and namespace come from the object.
    pub fn create(&self, obj: Value, opts: &WriteOpts) -> Result<Value> {
        let (res, ns) = self.resolve_obj(&obj)?;
        let mut tx = self.store.write();
        self.insert(&mut tx, &res, &ns, obj, opts)
    }

    /// HTTP create into `namespace` ("" for cluster-scoped).
    pub fn create_in(
        &self,
        res: &Arc<ResourceType>,
        namespace: &str,
        obj: Value,
        opts: &WriteOpts,
    ) -> Result<Value> {
        let mut tx = self.store.write();
        self.insert(&mut tx, res, namespace, obj, opts)
    }

    /// Bulk create under one lock.
    pub fn seed(&self, objs: impl IntoIterator<Item = Value>) -> Result<usize> {
        let mut tx = self.store.write();
        let mut last: Option<(String, String, Arc<ResourceType>)> = None;
        let mut n = 0;
        for obj in objs {
            let av = obj["apiVersion"].as_str().unwrap_or_default();
            let kind = obj["kind"].as_str().unwrap_or_default();
            let res = match &last {
                Some((a, k, r)) if a == av && k == kind => r.clone(),
                _ => {
                    let r = self.resolve_kind(av, kind)?;
                    last = Some((av.to_string(), kind.to_string(), r.clone()));
                    r
                }
            };
            let ns = if res.namespaced {
                Some(meta(&obj, "namespace"))
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| "default".into())
            } else {
                String::new()
            };
            self.insert(&mut tx, &res, &ns, obj, &WriteOpts::default())?;
            n += 1;
        }
        Ok(n)
    }

    fn insert(
        &self,
        tx: &mut Tx<'_>,
        res: &Arc<ResourceType>,
        ns: &str,
        mut obj: Value,
        opts: &WriteOpts,
    ) -> Result<Value> {
        check_type(res, opts.version.as_deref(), &mut obj)?;
        normalize(&mut obj);
        // The object as given or patched: what the server adds (managedFields mirroring the
        // fields) nests no more than a few levels deeper, well within what reads back.
        check_depth(res, &meta(&obj, "name"), &obj)?;
        let body_ns = meta(&obj, "namespace");
        if res.namespaced && !body_ns.is_empty() && body_ns != ns {
            return Err(Error::BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request".into(),
            ));
        }
        let own_status = strategy::brings_status(&obj, opts.http);
        strategy::prepare_create(res, &mut obj, opts.http);
        defaults::apply(res, &mut obj);
        // The field manager sees the object as decoded and defaulted, before the registry
        // prepares it (generated selectors, allocated IPs): those fields are nobody's.
        let mut owned = obj.clone();
        if opts.http {
            defaults::admit_create(res, &mut obj);
        }
        let mut name = meta(&obj, "name");
        let generate = meta(&obj, "generateName");
        if name.is_empty() && !generate.is_empty() {
            name = loop {
                let candidate = format!("{generate}{}", generate_suffix());
                if tx.get(&res.key, ns, &candidate).is_none() {
                    break candidate;
                }
            };
        }
        if name.is_empty() {
            validation::check(
                res,
                "",
                vec![Cause::required(
                    "metadata.name",
                    "name or generateName is required",
                )],
            )?;
        }
        // The uid exists before the strategy prepares the object: a Job's selector carries it.
        let uid = new_uid();
        strategy::prepare_named(res, &mut obj, &name, &uid, opts.http);
        let mut causes = validation::name_causes(res, &name);
        causes.extend(validation::label_causes(
            &obj["metadata"]["labels"],
            "metadata.labels",
        ));
        causes.extend(validation::spec_causes(res, &obj));
        validation::check(res, &name, causes)?;
        // NamespaceLifecycle admission, which runs after the object validated.
        if res.namespaced && tx.get(NS_KEY, "", ns).is_none() {
            return Err(Error::NotFound {
                resource: NS_KEY.into(),
                name: ns.into(),
            });
        }
        if tx.get(&res.key, ns, &name).is_some() {
            return Err(Error::AlreadyExists {
                resource: res.qualified(),
                name,
            });
        }
        let is_crd = &*res.key == CRD_KEY;
        if is_crd {
            meta_mut(&mut obj).insert("name".into(), name.clone().into());
            resources::validate_crd(&obj)?;
            let names = obj["spec"]["names"].clone();
            obj["status"] = json!({
                "acceptedNames": names,
                "storedVersions": [obj["spec"]["versions"].as_array().into_iter().flatten()
                    .find(|v| v["storage"].as_bool() == Some(true)).map(|v| v["name"].clone()).unwrap_or_default()],
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now()},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now()},
                ],
            });
        }
        if &*res.key == NS_KEY {
            obj["spec"] = json!({"finalizers": ["kubernetes"]});
            obj["status"] = json!({"phase": "Active"});
            meta_mut(&mut obj)
                .entry("labels")
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .map(|l| l.insert("kubernetes.io/metadata.name".into(), name.clone().into()));
        }
        if res.group.is_empty() && res.kind == "Service" {
            defaults::allocate_service(&mut obj, || self.next_cluster_ip());
        }
        record(res, &json!({}), &mut owned, Sub::Main, opts);
        match owned["metadata"].get("managedFields") {
            Some(mf) => meta_mut(&mut obj).insert("managedFields".into(), mf.clone()),
            None => meta_mut(&mut obj).remove("managedFields"),
        };
        if opts.dry_run {
            return Ok(obj);
        }
        let rv = tx.next_rv();
        let m = meta_mut(&mut obj);
        m.insert("name".into(), name.clone().into());
        if res.namespaced {
            m.insert("namespace".into(), ns.into());
        } else {
            m.remove("namespace");
        }
        m.insert("uid".into(), uid.into());
        m.insert("resourceVersion".into(), rv.to_string().into());
        m.insert("creationTimestamp".into(), now().into());
        m.remove("deletionTimestamp");
        strategy::init_generation(res, &mut obj);
        if !own_status {
            strategy::no_controllers(res, &mut obj);
        }
        tx.put(&res.key, ns, &name, EventType::Added, &obj, rv);
        if is_crd {
            let mut reg = self.registry.write();
            let key = reg.register_crd(&obj);
            tx.drop_table(&key);
        }
        Ok(obj)
    }

    pub fn get(&self, res: &ResourceType, ns: &str, name: &str) -> Result<Arc<Obj>> {
        self.store
            .get(&res.key, ns, name)
            .ok_or_else(|| Error::NotFound {
                resource: res.qualified(),
                name: name.into(),
            })
    }

    /// Direct update (status included; conditional only when resourceVersion is set).
    pub fn update_direct(&self, obj: Value) -> Result<Value> {
        let (res, ns) = self.resolve_obj(&obj)?;
        let name = meta(&obj, "name");
        let mut tx = self.store.write();
        self.replace(
            &mut tx,
            &res,
            &ns,
            &name,
            obj,
            Sub::Main,
            &WriteOpts::default(),
        )
    }

    /// Stores `obj` as the next version of an existing object exactly as given, keeping only
    /// the identity it was created with (uid, creationTimestamp) and giving it a fresh
    /// resourceVersion: no defaulting, validation, field management or status rules. The one
    /// write that may store a namespaced object without its namespace (see
    /// `DevServer::replace_verbatim`).
    pub fn replace_verbatim(&self, mut obj: Value) -> Result<Value> {
        /// The stored version's identity, read without decoding the rest of it.
        #[derive(serde::Deserialize)]
        struct Stored {
            metadata: Identity,
        }
        #[derive(serde::Deserialize, Default)]
        #[serde(rename_all = "camelCase")]
        struct Identity {
            uid: Option<String>,
            creation_timestamp: Option<String>,
        }
        let (res, ns) = self.resolve_obj(&obj)?;
        if &*res.key == CRD_KEY {
            return Err(Error::BadRequest(
                "a CustomResourceDefinition is never replaced verbatim: its registration follows its writes".into(),
            ));
        }
        let name = meta(&obj, "name");
        // Verbatim, but never deeper than the server can read back.
        check_depth(&res, &name, &obj)?;
        let mut tx = self.store.write();
        let old = tx
            .get(&res.key, &ns, &name)
            .ok_or_else(|| Error::NotFound {
                resource: res.qualified(),
                name: name.clone(),
            })?;
        // The store wrote this JSON itself, so it parses.
        let metadata = serde_json::from_slice::<Stored>(&old.json)
            .map(|s| s.metadata)
            .unwrap_or_default();
        let rv = tx.next_rv();
        let m = meta_mut(&mut obj);
        for (field, value) in [
            ("uid", metadata.uid),
            ("creationTimestamp", metadata.creation_timestamp),
        ] {
            match value {
                Some(v) => m.insert(field.into(), v.into()),
                None => m.remove(field),
            };
        }
        m.insert("resourceVersion".into(), rv.to_string().into());
        tx.put(&res.key, &ns, &name, EventType::Modified, &obj, rv);
        Ok(obj)
    }

    /// HTTP update (PUT).
    pub fn update(
        &self,
        res: &Arc<ResourceType>,
        ns: &str,
        name: &str,
        obj: Value,
        sub: Sub,
        opts: &WriteOpts,
    ) -> Result<Value> {
        let mut tx = self.store.write();
        self.replace(&mut tx, res, ns, name, obj, sub, opts)
    }

    #[allow(clippy::too_many_arguments)]
    fn replace(
        &self,
        tx: &mut Tx<'_>,
        res: &Arc<ResourceType>,
        ns: &str,
        name: &str,
        mut obj: Value,
        sub: Sub,
        opts: &WriteOpts,
    ) -> Result<Value> {
        check_type(res, opts.version.as_deref(), &mut obj)?;
        normalize(&mut obj);
        // As on create (see `insert`); a patch has been applied by now, and it is what can nest
        // an object deeper than any one body does.
        check_depth(res, name, &obj)?;
        let body_name = meta(&obj, "name");
        if body_name != name {
            return Err(Error::BadRequest(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let body_ns = meta(&obj, "namespace");
        if res.namespaced && !body_ns.is_empty() && body_ns != ns {
            return Err(Error::BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request".into(),
            ));
        }
        if sub == Sub::Main {
            defaults::apply(res, &mut obj);
            let mut causes =
                validation::label_causes(&obj["metadata"]["labels"], "metadata.labels");
            causes.extend(validation::spec_causes(res, &obj));
            validation::check(res, name, causes)?;
        }
        let old = tx.get(&res.key, ns, name).ok_or_else(|| Error::NotFound {
            resource: res.qualified(),
            name: name.into(),
        })?;
        let want_rv = meta(&obj, "resourceVersion");
        if !want_rv.is_empty() && want_rv != old.rv.to_string() {
            return Err(Error::Conflict {
                resource: res.qualified(),
                name: name.into(),
                reason: OPTIMISTIC_LOCK.into(),
            });
        }
        let old = old.value()?;
        if sub == Sub::Main && res.group.is_empty() && res.kind == "Service" {
            defaults::keep_allocated_service(&old, &mut obj);
        }
        let own_status = sub == Sub::Main && strategy::brings_status(&obj, opts.http);
        let mut new = strategy::merge_update(res, &old, obj, sub, opts.http);
        for field in ["uid", "creationTimestamp", "generation", "resourceVersion"] {
            match old["metadata"].get(field) {
                Some(v) => meta_mut(&mut new).insert(field.into(), v.clone()),
                None => meta_mut(&mut new).remove(field),
            };
        }
        // The namespace is the one the object is stored under, whatever a verbatim replace
        // left in the stored version.
        if res.namespaced {
            meta_mut(&mut new).insert("namespace".into(), ns.into());
        } else {
            meta_mut(&mut new).remove("namespace");
        }
        // An update that omits managedFields keeps the stored ones, as the API server does.
        if new["metadata"].get("managedFields").is_none()
            && let Some(kept) = old["metadata"].get("managedFields")
        {
            meta_mut(&mut new).insert("managedFields".into(), kept.clone());
        }
        record(res, &old, &mut new, sub, opts);
        if new == old {
            return Ok(old);
        }
        let is_crd = &*res.key == CRD_KEY;
        if is_crd {
            resources::validate_crd(&new)?;
        }
        if strategy::bump_generation(res, &old, &mut new, sub) && !own_status {
            strategy::no_controllers(res, &mut new);
        }
        if opts.dry_run {
            return Ok(new);
        }
        let rv = tx.next_rv();
        meta_mut(&mut new).insert("resourceVersion".into(), rv.to_string().into());
        tx.put(&res.key, ns, name, EventType::Modified, &new, rv);
        if is_crd {
            self.registry.write().register_crd(&new);
        }
        Ok(new)
    }

    /// HTTP patch; returns the result and whether it created the object (apply only).
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &self,
        res: &Arc<ResourceType>,
        ns: &str,
        name: &str,
        ptype: PatchType,
        body: &[u8],
        sub: Sub,
        opts: &WriteOpts,
    ) -> Result<(Value, bool)> {
        if ptype == PatchType::Strategic && !res.builtin {
            return Err(Error::UnsupportedMediaType(
                "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml".into(),
            ));
        }
        if ptype == PatchType::Apply && opts.field_manager.as_deref().is_none_or(str::is_empty) {
            // Worded as the patch handler's ValidatePatchOptions.
            return Err(Error::Invalid {
                kind: "PatchOptions".into(),
                group: "meta.k8s.io".into(),
                name: String::new(),
                causes: vec![Cause::required(
                    "fieldManager",
                    "is required for apply patch",
                )],
            });
        }
        let mut tx = self.store.write();
        let Some(old) = tx.get(&res.key, ns, name) else {
            if ptype == PatchType::Apply && sub == Sub::Main {
                let config = patch::parse_apply(body)?;
                let mut opts = opts.clone();
                let mut obj = self.server_side_apply(res, &json!({}), &config, sub, &mut opts)?;
                meta_mut(&mut obj)
                    .entry("name")
                    .or_insert_with(|| name.into());
                if meta(&obj, "name") != name {
                    return Err(Error::BadRequest(format!(
                        "the name of the object ({}) does not match the name on the URL ({name})",
                        meta(&obj, "name")
                    )));
                }
                return self.insert(&mut tx, res, ns, obj, &opts).map(|v| (v, true));
            }
            return Err(Error::NotFound {
                resource: res.qualified(),
                name: name.into(),
            });
        };
        let old_value = old.value()?;
        let mut opts = opts.clone();
        let mut patched = if ptype == PatchType::Apply {
            let config = patch::parse_apply(body)?;
            self.server_side_apply(res, &old_value, &config, sub, &mut opts)?
        } else {
            patch::apply(ptype, &old_value, body)?
        };
        if patched["kind"] != old_value["kind"] || patched["apiVersion"] != old_value["apiVersion"]
        {
            // Apply patches carry their own kind/apiVersion; let check_type judge them.
            if ptype != PatchType::Apply {
                return Err(Error::BadRequest(format!(
                    "{} \"{name}\": a patch may not change kind or apiVersion",
                    res.kind
                )));
            }
        }
        let patched_rv = meta(&patched, "resourceVersion");
        if !patched_rv.is_empty() && patched_rv != old.rv.to_string() {
            return Err(Error::Conflict {
                resource: res.qualified(),
                name: name.into(),
                reason: OPTIMISTIC_LOCK.into(),
            });
        }
        meta_mut(&mut patched).insert("name".into(), name.into());
        self.replace(&mut tx, res, ns, name, patched, sub, &opts)
            .map(|v| (v, false))
    }

    /// Merges an apply configuration into `live` with field ownership; the managedFields it
    /// works out go into `opts` for the write to store.
    fn server_side_apply(
        &self,
        res: &ResourceType,
        live: &Value,
        config: &Value,
        sub: Sub,
        opts: &mut WriteOpts,
    ) -> Result<Value> {
        let version = opts
            .version
            .clone()
            .unwrap_or_else(|| res.versions.first().cloned().unwrap_or_default());
        let api_version = res.api_version(&version);
        let w = Writer {
            manager: opts.field_manager.as_deref().unwrap_or_default(),
            api_version: &api_version,
            subresource: opts.subresource(sub),
        };
        let merged = ssa::apply(
            schema(res),
            res.status_subresource,
            live,
            config,
            &w,
            opts.force,
        )?;
        opts.managed_fields = Some(
            merged["metadata"]
                .get("managedFields")
                .cloned()
                .unwrap_or_else(|| json!([])),
        );
        Ok(merged)
    }

    /// The object's Scale (`.../scale` GET).
    pub fn get_scale(&self, res: &ResourceType, ns: &str, name: &str) -> Result<Value> {
        Ok(scale::scale_of(res, &self.get(res, ns, name)?.value()?))
    }

    /// `.../scale` PUT: sets the object's replicas from a Scale; returns the new Scale.
    pub fn update_scale(
        &self,
        res: &Arc<ResourceType>,
        ns: &str,
        name: &str,
        body: Value,
        opts: &WriteOpts,
    ) -> Result<Value> {
        let mut tx = self.store.write();
        self.write_scale(&mut tx, res, ns, name, body, opts)
    }

    /// `.../scale` PATCH: the patch applies to the current Scale, which is then written.
    pub fn patch_scale(
        &self,
        res: &Arc<ResourceType>,
        ns: &str,
        name: &str,
        ptype: PatchType,
        body: &[u8],
        opts: &WriteOpts,
    ) -> Result<Value> {
        let mut tx = self.store.write();
        let old = tx.get(&res.key, ns, name).ok_or_else(|| Error::NotFound {
            resource: res.qualified(),
            name: name.into(),
        })?;
        let current = scale::scale_of(res, &old.value()?);
        let patched = patch::apply(ptype, &current, body)?;
        self.write_scale(&mut tx, res, ns, name, patched, opts)
    }

    fn write_scale(
        &self,
        tx: &mut Tx<'_>,
        res: &Arc<ResourceType>,
        ns: &str,
        name: &str,
        body: Value,
        opts: &WriteOpts,
    ) -> Result<Value> {
        let replicas = scale::replicas(&body, name)?;
        let old = tx.get(&res.key, ns, name).ok_or_else(|| Error::NotFound {
            resource: res.qualified(),
            name: name.into(),
        })?;
        // The Scale's resourceVersion is the object's: a stale one is a conflict.
        let want_rv = meta(&body, "resourceVersion");
        if !want_rv.is_empty() && want_rv != old.rv.to_string() {
            return Err(Error::Conflict {
                resource: res.qualified(),
                name: name.into(),
                reason: OPTIMISTIC_LOCK.into(),
            });
        }
        let mut obj = old.value()?;
        scale::set_replicas(res, &mut obj, replicas);
        let opts = WriteOpts {
            subresource: Some("scale"),
            ..opts.clone()
        };
        let new = self.replace(tx, res, ns, name, obj, Sub::Main, &opts)?;
        Ok(scale::scale_of(res, &new))
    }

    /// Deletes one object (cascading for namespaces and CRDs); returns its final state.
    pub fn delete(
        &self,
        res: &Arc<ResourceType>,
        ns: Option<&str>,
        name: &str,
        opts: &WriteOpts,
    ) -> Result<Value> {
        let ns = if res.namespaced {
            ns.filter(|s| !s.is_empty()).unwrap_or("default")
        } else {
            ""
        };
        let mut tx = self.store.write();
        let old = tx.get(&res.key, ns, name).ok_or_else(|| Error::NotFound {
            resource: res.qualified(),
            name: name.into(),
        })?;
        let mut value = old.value()?;
        // The etcd3 store's precondition check, surfaced through storeerr as a Conflict that
        // carries the storage error's text.
        let failed = if let Some(uid) = &opts.precondition_uid
            && *uid != meta(&value, "uid")
        {
            Some(format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta(&value, "uid")
            ))
        } else if let Some(rv) = &opts.precondition_rv
            && *rv != old.rv.to_string()
        {
            Some(format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                old.rv
            ))
        } else {
            None
        };
        if let Some(failed) = failed {
            return Err(Error::Conflict {
                resource: res.qualified(),
                name: name.into(),
                reason: format!(
                    "StorageError: invalid object, Code: 4, Key: {}, ResourceVersion: 0, AdditionalErrorMsg: {failed}",
                    res.storage_key(ns, name)
                ),
            });
        }
        if opts.dry_run {
            return Ok(value);
        }
        if &*res.key == NS_KEY {
            // As the API server and its namespace controller do, one after the other: the
            // namespace turns Terminating (watchers see it), its contents go, then it goes.
            meta_mut(&mut value).insert("deletionTimestamp".into(), now().into());
            value["status"]["phase"] = "Terminating".into();
            let rv = tx.next_rv();
            meta_mut(&mut value).insert("resourceVersion".into(), rv.to_string().into());
            tx.put(&res.key, ns, name, EventType::Modified, &value, rv);
            let keys = self.registry.read().namespaced_keys();
            for key in keys {
                for (kns, kname) in tx.keys(&key, Some(name)) {
                    Self::remove(&mut tx, &key, &kns, &kname)?;
                }
            }
        }
        if &*res.key == CRD_KEY {
            let group = value["spec"]["group"].as_str().unwrap_or_default();
            let plural = value["spec"]["names"]["plural"]
                .as_str()
                .unwrap_or_default();
            let key: Arc<str> = Arc::from(format!("{plural}.{group}"));
            self.registry.write().unregister(&key);
            for (kns, kname) in tx.keys(&key, None) {
                Self::remove(&mut tx, &key, &kns, &kname)?;
            }
            tx.drop_table(&key);
        }
        let rv = tx.next_rv();
        meta_mut(&mut value).insert("resourceVersion".into(), rv.to_string().into());
        tx.put(&res.key, ns, name, EventType::Deleted, &value, rv);
        Ok(value)
    }

    fn remove(tx: &mut Tx<'_>, key: &Arc<str>, ns: &str, name: &str) -> Result<()> {
        if let Some(old) = tx.get(key, ns, name) {
            let mut v = old.value()?;
            let rv = tx.next_rv();
            meta_mut(&mut v).insert("resourceVersion".into(), rv.to_string().into());
            tx.put(key, ns, name, EventType::Deleted, &v, rv);
        }
        Ok(())
    }

    /// Deletes every matching object; returns how many.
    pub fn delete_collection(
        &self,
        res: &Arc<ResourceType>,
        ns: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
        opts: &WriteOpts,
    ) -> Result<usize> {
        let mut names = Vec::new();
        self.store.scan(&res.key, ns, None, |k, obj| {
            if labels_match(labels, &obj.labels) && fields.matches(&k.0, &k.1, obj) {
                names.push(k.clone());
            }
            true
        });
        let mut n = 0;
        for (kns, kname) in names {
            match self.delete(res, Some(&kns), &kname, opts) {
                Ok(_) => n += 1,
                Err(Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }
}
