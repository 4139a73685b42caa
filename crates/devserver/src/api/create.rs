//! Creates (direct, over HTTP, in bulk): naming, validation, namespace admission, the
//! registration of a new CRD and the metadata a new object gets.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Api, CRD_KEY, NS_KEY, Sub, WriteOpts, record};
use crate::metadata::{
    check_depth, check_type, generate_suffix, meta, meta_mut, new_uid, normalize, now,
};
use crate::resources::{self, ResourceType};
use crate::store::{EventType, Tx};
use crate::{Cause, Error, Result};
use crate::{defaults, strategy, validation};

impl Api {
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

    pub(super) fn insert(
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
        let uid = Some(meta(&obj, "uid"))
            .filter(|uid| opts.admitted && !uid.is_empty())
            .unwrap_or_else(new_uid);
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
        // A dry run answers with everything but the resourceVersion, as kube-apiserver's
        // does: what admission webhooks are shown of a create.
        let m = meta_mut(&mut obj);
        m.insert("name".into(), name.clone().into());
        if res.namespaced {
            m.insert("namespace".into(), ns.into());
        } else {
            m.remove("namespace");
        }
        m.insert("uid".into(), uid.into());
        m.remove("resourceVersion");
        m.insert("creationTimestamp".into(), now().into());
        m.remove("deletionTimestamp");
        strategy::init_generation(res, &mut obj);
        if !own_status {
            strategy::no_controllers(res, &mut obj);
        }
        if opts.dry_run {
            return Ok(obj);
        }
        let rv = tx.next_rv();
        meta_mut(&mut obj).insert("resourceVersion".into(), rv.to_string().into());
        tx.put(&res.key, ns, &name, EventType::Added, &obj, rv);
        if is_crd {
            let mut reg = self.registry.write();
            let key = reg.register_crd(&obj);
            tx.drop_table(&key);
        }
        Ok(obj)
    }
}
