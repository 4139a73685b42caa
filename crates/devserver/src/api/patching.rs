//! Patches: JSON, merge and strategic merge patches, and server-side apply with field
//! ownership (which may create the object).

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Api, Sub, WriteOpts, schema};
use crate::metadata::{meta, meta_mut};
use crate::patch::{self, PatchType};
use crate::resources::ResourceType;
use crate::ssa::{self, Writer};
use crate::{Cause, Error, OPTIMISTIC_LOCK, Result};

impl Api {
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
}
