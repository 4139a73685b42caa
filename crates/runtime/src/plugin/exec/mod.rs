//! Execution: a plugin version as an actor that owns its instance.
//!
//! - [`admit`]: admission requests into a version's `admission-hook` export, in pooled instances of their own.
//! - [`compile_cache`]: the on-disk compile cache, and the checks that make its native code trustworthy.
//! - [`dead_letter`]: the events a plugin failed for good, handed on to be kept.
//! - [`gate`]: a plugin's events wait until its caches are complete.
//! - [`engine`]: one wasmtime engine (pooling allocator, epoch deadlines), loading components.
//! - [`histogram`]: the dispatch-delay and call-duration histograms a supervisor keeps.
//! - [`instance`]: one live instance, `init` and `handle-queued` under deadlines and a memory cap.
//! - [`scheduler`]: a version's `[[schedule]]` timers, ticking `handle-schedule` through its supervisor.
//! - [`supervisor`]: failure containment (recreate, backoff, quarantine) as an informer handler.

pub(crate) mod admit;
pub mod compile_cache;
pub(crate) mod dead_letter;
pub mod engine;
pub(crate) mod gate;
pub mod histogram;
pub mod instance;
mod retries;
pub(crate) mod scheduler;
pub mod supervisor;
