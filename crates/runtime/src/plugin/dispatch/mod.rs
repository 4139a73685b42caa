//! Dispatch: which events reach a plugin.
//!
//! - [`change_filter`]: `jq-filter` / `ignore`: which updates wake a plugin, decided on the host.

pub mod change_filter;
