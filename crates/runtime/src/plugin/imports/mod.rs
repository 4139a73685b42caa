//! Host imports: what a plugin's call can reach, one module per WIT interface, each behind its
//! checks. As wasmtime's WASI crates and Spin's factors do, each interface's module owns its
//! state, implements its `Host` trait on a view of the store and exports its own
//! `add_to_linker`; [`state`] composes them into one instance's store data and links them. The
//! traits they implement are the WIT contract's, [`crate::plugin::bindings`].
//!
//! - [`events`]: `events`, the events of the call in hand and their headers; [`events::batch`] is
//!   one `handle-queued` call: the events taken, their outcomes, a deadline per event.
//! - [`cache`]: `cache`, queries answered from the plugin's stores through its tenant's grant.
//! - [`kube`]: `kube`, writes behind the manifest, the tenant's grant and the cluster's RBAC
//!   ([`write`](mod@write) checks and builds them, [`cluster`] is the client they go through: dry-run and
//!   impersonation as layers).
//! - [`log`]: `log`, and the bounds on a plugin's own text.
//! - [`metrics`](mod@metrics): `metrics`, a plugin's own series ([`crate::plugin::metrics`] keeps them).
//! - [`outbound`]: outbound HTTP (`wasi:http`), allowed per origin.

pub mod cache;
pub(crate) mod cluster;
pub mod events;
pub(crate) mod kube;
pub mod log;
pub(crate) mod metrics;
pub(crate) mod outbound;
pub(crate) mod state;
pub mod write;
