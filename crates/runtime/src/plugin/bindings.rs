//! The WIT contract's generated types and traits (`wit/`), and how the host names them.

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "plugin",
    // Async on both sides: a call is a future the caller can cut off at its deadline,
    // whatever the guest is doing — spinning (epoch yields) or blocked in a host call.
    imports: {
        // Once per event, and answered from memory: plain calls, without the cost of a
        // future each (a guest cannot block in them). Reading an event that is no longer
        // in hand is a guest bug: a trap rather than an answer.
        "informant:plugin/events.next": trappable,
        "informant:plugin/events.json": trappable,
        "informant:plugin/events.old-json": trappable,
        "informant:plugin/events.old-header": trappable,
        // Answered from memory under the plugin's own lock, so plain calls too.
        "informant:plugin/metrics.counter-add": trappable,
        "informant:plugin/metrics.gauge-set": trappable,
        "informant:plugin/metrics.histogram-observe": trappable,
        "informant:plugin/metrics.delete": trappable,
        "informant:plugin/metrics.delete-group": trappable,
        default: async,
    },
    exports: { default: async },
    with: {
        // wasi:http is wasmtime-wasi-http's, linked by `crate::plugin::imports::outbound`.
        "wasi:http": wasmtime_wasi_http::p2::bindings::http,
        "wasi:io": wasmtime_wasi::p2::bindings::io,
        "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
    },
});

/// The WIT package this host implements; plugins built for an incompatible version are refused
/// at load with this named. Components built for an earlier patch of the same minor (0.8.0) link
/// unchanged: wasmtime resolves their imports to these semver-compatible ones.
pub const WIT_PACKAGE: &str = "informant:plugin@0.8.1";

/// The `admitting-plugin` world: the `plugin` world plus the `admission-hook` export. Only its
/// admission types and the export's glue are its own; its imports are the `plugin` world's.
pub mod admitting {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "admitting-plugin",
        imports: { default: async },
        exports: { default: async },
        with: {
            "informant:plugin/types": super::informant::plugin::types,
            "informant:plugin/events": super::informant::plugin::events,
            "informant:plugin/cache": super::informant::plugin::cache,
            "informant:plugin/kube": super::informant::plugin::kube,
            "informant:plugin/log": super::informant::plugin::log,
            "informant:plugin/metrics": super::informant::plugin::metrics,
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
            "wasi:io": wasmtime_wasi::p2::bindings::io,
            "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
        },
    });
}

pub use informant::plugin::log::Level;
pub use informant::plugin::types::{
    Event as WitEvent, EventType as WitEventType, Failure, QueryError, Resource as WitResource,
};

impl From<&kube::core::ApiResource> for WitResource {
    /// How a plugin names a resolved resource.
    fn from(ar: &kube::core::ApiResource) -> Self {
        WitResource {
            group: ar.group.clone(),
            version: ar.version.clone(),
            kind: ar.kind.clone(),
        }
    }
}

/// `(group, version, kind)`: how a plugin names a resource in queries.
pub type Gvk = (String, String, String);

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn the_declared_package_is_the_one_in_wit() {
        let wit = include_str!("../../../../wit/plugin.wit");
        assert!(wit.contains(&format!("package {WIT_PACKAGE};")));
    }
}
