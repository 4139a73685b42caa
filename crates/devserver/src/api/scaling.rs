//! The scale subresource: reading, replacing and patching an object's Scale, written through
//! to its replicas.

use std::sync::Arc;

use serde_json::Value;

use super::{Api, Sub, WriteOpts};
use crate::metadata::meta;
use crate::patch::{self, PatchType};
use crate::resources::ResourceType;
use crate::store::Tx;
use crate::{Error, OPTIMISTIC_LOCK, Result, scale};

impl Api {
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
}
