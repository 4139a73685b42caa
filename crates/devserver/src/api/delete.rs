//! Deletes: preconditions, the namespace and CRD cascades, and delete-collection.

use std::sync::Arc;

use serde_json::Value;

use super::{Api, CRD_KEY, NS_KEY, WriteOpts};
use crate::metadata::{meta, meta_mut, now};
use crate::resources::ResourceType;
use crate::selector::{FieldSelector, LabelSelector, labels_match};
use crate::store::{EventType, Tx};
use crate::{Error, Result};

impl Api {
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

    /// The (namespace, name) of every object a delete-collection selects.
    pub fn collection_names(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
    ) -> Vec<(String, String)> {
        let mut names = Vec::new();
        self.store.scan(&res.key, ns, None, |k, obj| {
            if labels_match(labels, &obj.labels) && fields.matches(&k.0, &k.1, obj) {
                names.push((k.0.to_string(), k.1.to_string()));
            }
            true
        });
        names
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
        let names = self.collection_names(res, ns, labels, fields);
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
