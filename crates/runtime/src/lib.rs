//! Informant: a Kubernetes event-hook runtime.
//!
//! Where things live:
//! - [`informer`]: shared informers, indexers and the SharedProcessor for any resource
//!   (reflector -> store -> processor -> per-handler listener).
//! - [`tenancy`]: tenant grants and quotas, applied to plugin loads, events and cache queries.
//! - [`plugin`]: the WebAssembly plugin runtime (manifests, engine, WIT host, supervision).
//! - [`config`]: the host config file `informant.toml` (limits, tenants).
//! - [`fswatch`]: debounced file watching, for the plugins directory, the config file and
//!   plugin sources.
//! - [`admin`]: the admin HTTP server (`/metrics`, `/healthz`, `/readyz`, `/plugins`), reading
//!   the informers and plugins from above.
//! - [`admission`]: the admission webhook server, answered by plugins' `[[admit]]` hooks.
//! - [`sources`]: plugins pulled from OCI registries into the host's pulled directory, polled.
//! - [`leader`]: leader election through a coordination.k8s.io Lease (active/standby replicas).
//! - [`replay`]: recording live event streams and replaying them offline into one plugin.
//! - [`telemetry`]: OpenTelemetry traces of plugin work over OTLP/HTTP, off unless installed.
//! - [`redact`]: credentials out of URLs before they are logged or shown.
//! - [`tls`]: HTTPS for the host's servers, from mounted files or a self-signed certificate.
//! - [`runtime`]: the startup wiring `informant run` and `dev` use ([`runtime::Runtime`],
//!   [`runtime::Replica`] with leader election), so tests start exactly what the binary starts.
//!
//! The informers are the `informant-informer` crate (re-exported as [`informer`]), plugin
//! manifests `informant-manifest` ([`manifest`]), label selectors, field paths and name rules
//! `informant-apimachinery` ([`apimachinery`]); the embedded API server is `informant-devserver`; the
//! developer tooling (`informant dev` with plugin sources, `informant new`) is `informant-dev`. The
//! `informant` binary (crate `informant`) is a thin CLI over these.

// The crate's API is what the CLI, the dev loop and the tests name; anything else says
// `pub(crate)`, so a new item is private until a caller outside needs it.
#![warn(unreachable_pub)]

pub mod admin;
pub mod admission;
pub(crate) mod backoff;
pub mod config;
pub(crate) mod durable;
pub(crate) mod files;
pub mod fswatch;
pub mod leader;
pub(crate) mod lease;
pub mod plugin;
pub(crate) mod redact;
pub mod replay;
pub mod runtime;
pub(crate) mod serve;
pub mod shard;
pub mod sources;
pub mod telemetry;
pub mod tenancy;
#[cfg(test)]
mod testing;
pub mod tls;
pub mod workers;

pub use informant_apimachinery as apimachinery;
pub use informant_informer as informer;
pub use informant_manifest as manifest;
