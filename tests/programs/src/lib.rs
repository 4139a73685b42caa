//! The Rust test and example plugins, compiled to `wasm32-wasip2` components once by this
//! crate's build script (as wasmtime's `test-programs` artifacts are), so tests only read paths.
//!
//! The build runs `cargo build --release --target wasm32-wasip2` on the plugin packages in its
//! own target directory (`target/wasm-plugins`: cargo holds the workspace's target directory
//! while build scripts run), adding the target with rustup when it is missing. It reruns only
//! when a plugin, the guest SDK, `wit/` or the workspace's manifest or lock changes.

include!(concat!(env!("OUT_DIR"), "/programs.rs"));

/// The component built from the plugin package `package` (`kubediff`, `hostile`, …).
pub fn component(package: &str) -> Option<&'static str> {
    COMPONENTS
        .iter()
        .find(|(name, _)| *name == package)
        .map(|(_, path)| *path)
}
