//! Updates: PUT with optimistic concurrency and the status rules, the direct update, and the
//! verbatim replace.

use std::sync::Arc;

use serde_json::Value;

use super::{Api, CRD_KEY, Sub, WriteOpts, record};
use crate::metadata::{check_depth, check_type, meta, meta_mut, normalize};
use crate::resources::{self, ResourceType};
use crate::store::{EventType, Tx};
use crate::{Error, OPTIMISTIC_LOCK, Result};
use crate::{defaults, strategy, validation};

impl Api {
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
    pub(super) fn replace(
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
}
