//! Dispatch: which events reach a plugin.
//!
//! - [`change_filter`]: `jq-filter` / `ignore`: which updates wake a plugin, decided on the host.
//! - [`namespace_selector`]: `namespace-selector`: which namespaces' objects reach a plugin,
//!   followed as namespaces' labels change.

pub(crate) mod change_filter;
pub(crate) mod namespace_selector;
