//! Informant: a Kubernetes event-hook runtime.
//!
//! Where things live:
//! - [`informer`]: shared informers, indexers and the SharedProcessor for any resource
//!   (reflector -> store -> processor -> per-handler listener).
//! - [`plugin`]: the WebAssembly plugin runtime (manifests, engine, WIT host, supervision).
//! - [`selector`]: Kubernetes label selectors, shared by the informer and the devserver.
//! - [`devserver`]: the embedded Kubernetes-compatible API server, for `informant dev` and for
//!   tests (with fault injection).
//! - [`leader`]: leader election through a coordination.k8s.io Lease (active/standby replicas).
//!
//! The binary (`src/main.rs`) is a thin CLI over these.
#![warn(missing_docs)]

pub mod devserver;
pub mod informer;
pub mod leader;
pub mod plugin;
pub use informant_selector as selector;
