//! Informant: a Kubernetes event-hook runtime.
//!
//! Where things live:
//! - [`informer`]: shared informers, indexers and the SharedProcessor for any resource
//!   (reflector -> store -> processor -> per-handler listener).
//! - [`tenancy`]: tenant grants and quotas, applied to plugin loads, events and cache queries.
//! - [`plugin`]: the WebAssembly plugin runtime (manifests, engine, WIT host, supervision).
//! - [`config`]: the host config file `informant.toml` (limits, tenants).
//! - [`selector`]: Kubernetes label selectors, shared by the informer and the devserver.
//! - [`devserver`]: the embedded Kubernetes-compatible API server, for `informant dev` and for
//!   tests (with fault injection).
//! - [`admin`]: the admin HTTP server (`/metrics`, `/healthz`, `/readyz`, `/plugins`), reading
//!   the informers and plugins from above.
//! - [`leader`]: leader election through a coordination.k8s.io Lease (active/standby replicas).
//! - [`devloop`]: `informant dev` with plugin sources (build, watch, rebuild) and `informant new`.
//! - [`replay`]: recording live event streams and replaying them offline into one plugin.
//!
//! The binary (`src/main.rs`) is a thin CLI over these.
#![warn(missing_docs)]

pub mod admin;
pub mod config;
pub mod devloop;
pub mod devserver;
pub mod informer;
pub mod leader;
pub mod plugin;
pub mod replay;
pub mod tenancy;
mod toml_error;
pub use informant_selector as selector;
