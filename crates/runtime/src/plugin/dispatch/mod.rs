//! Dispatch: which events reach a plugin.
//!
//! - [`change_filter`]: `jq-filter` / `ignore`: which updates wake a plugin, decided on the host.
//! - [`gate`]: a plugin's events wait until its caches are complete.
//! - [`namespace_selector`]: `namespace-selector`: which namespaces' objects reach a plugin,
//!   followed as namespaces' labels change.

pub mod change_filter;
pub mod gate;
pub mod namespace_selector;
