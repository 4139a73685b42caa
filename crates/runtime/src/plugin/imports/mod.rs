//! Host imports: what a plugin's call can reach, each behind its checks.
//!
//! - [`cluster`]: the clients writes go through: dry-run and impersonation as layers.
//! - [`host`]: the WIT bindings and the `events`, `cache` and `log` imports, reading only the plugin's stores.
//! - [`outbound`]: outbound HTTP (`wasi:http`), allowed per origin.
//! - [`write`]: the `kube` import: writes behind the manifest, the tenant's grant and the cluster's RBAC.

pub mod cluster;
pub mod host;
pub mod outbound;
pub mod write;
