//! API semantics on top of the store: metadata stamping (uid, resourceVersion,
//! creationTimestamp; generation by the rules in `strategy`), optimistic concurrency, the status
//! and scale subresources, patches and cascades (namespace and CRD deletion). Both the HTTP
//! handlers and the direct Rust API go through here, so both emit the same watch events.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use parking_lot::{RwLock, RwLockReadGuard};
use serde_json::Value;

use super::metadata::{meta, meta_mut};
use super::resources::{Registry, ResourceType};
use super::ssa::{self, Schema, Writer};
use super::store::{Obj, Store};
use super::{Error, Result};

mod create;
mod delete;
mod patching;
mod scaling;
mod update;

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
    /// The body is an object admission approved (the dry run's result, as the webhooks left
    /// it): a create keeps its uid, which the dry run may already have written into it (a
    /// Job's selector).
    pub admitted: bool,
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

    pub fn get(&self, res: &ResourceType, ns: &str, name: &str) -> Result<Arc<Obj>> {
        self.store
            .get(&res.key, ns, name)
            .ok_or_else(|| Error::NotFound {
                resource: res.qualified(),
                name: name.into(),
            })
    }
}
