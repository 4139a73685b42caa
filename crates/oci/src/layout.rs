//! The CNCF wasm artifact layout, as Informant writes and reads it.
//!
//! Written: the config below (`application/vnd.wasm.config.v0+json`), one `application/wasm`
//! layer holding the component, and the image manifest's annotations
//! `org.opencontainers.image.title` (the plugin's name) and [`MANIFEST_ANNOTATION`] (the text
//! of `NAME.toml`). Read: any config, and exactly one layer of either wasm media type.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The CNCF layout's layer: a component or a core module.
pub const WASM_LAYER: &str = "application/wasm";

/// The CNCF layout's config.
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";

/// The layer media type of the older layout that Kubewarden, Spin and `wasm-to-oci` push.
pub const LEGACY_WASM_LAYER: &str = "application/vnd.wasm.content.layer.v1+wasm";

/// The annotation holding the plugin's manifest (`NAME.toml`), as text.
pub const MANIFEST_ANNOTATION: &str = "dev.informant.plugin.manifest";

/// The standard annotation naming the artifact: the plugin's name.
pub const TITLE_ANNOTATION: &str = "org.opencontainers.image.title";

/// The config the CNCF layout defines; `component` (its WIT world) is optional and left out.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct WasmConfig {
    /// `wasm`, always.
    pub architecture: String,
    /// The target the layer was built for: `wasip2` for a component.
    pub os: String,
    /// The digest of each layer, in order.
    pub layer_digests: Vec<String>,
}

impl WasmConfig {
    /// The config of a component whose one layer has `digest`.
    pub fn component(digest: String) -> Self {
        WasmConfig {
            architecture: "wasm".into(),
            os: "wasip2".into(),
            layer_digests: vec![digest],
        }
    }
}

/// The image manifest's annotations for a plugin named `name` with manifest text `manifest`.
pub fn annotations(name: &str, manifest: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (TITLE_ANNOTATION.to_string(), name.to_string()),
        (MANIFEST_ANNOTATION.to_string(), manifest.to_string()),
    ])
}

/// The name a plugin pulled from `reference` goes by when nothing names it: the repository's
/// last segment (`image-policy` for `registry.example/platform/image-policy:1.2`).
pub fn repository_name(reference: &oci_client::Reference) -> &str {
    let repository = reference.repository();
    repository.rsplit('/').next().unwrap_or(repository)
}

/// Why a name cannot be a plugin's file name here: it becomes `NAME.wasm` and `NAME.toml` in a
/// plugins directory, so only a short lowercase name of letters, digits, `-` and `_` that
/// starts with a letter or digit will do (no `/`, `..`, `%`, spaces or look-alike letters).
pub fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("is empty");
    }
    if name.len() > 63 {
        return Err("is longer than 63 characters");
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit()) {
        return Err("does not start with a lowercase ASCII letter or a digit");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
    {
        return Err("holds a character other than lowercase ASCII letters, digits, `-` and `_`");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_leave_the_plugins_directory_are_refused() {
        for bad in [
            "",
            "..",
            "../evil",
            "a/b",
            "a%2Fb",
            "a b",
            "trailing ",
            "Upper",
            "-lead",
            "ѕecret", // Cyrillic `ѕ`
            "a?b",
            "a#b",
            &"x".repeat(64),
        ] {
            assert!(check_name(bad).is_err(), "{bad:?} was accepted");
        }
        for good in ["image-policy", "kubediff", "a1_b", "0day"] {
            assert_eq!(check_name(good), Ok(()), "{good:?}");
        }
    }

    #[test]
    fn the_config_is_the_cncf_layouts() {
        let config = WasmConfig::component("sha256:ab".into());
        assert_eq!(
            serde_json::to_value(&config).unwrap(),
            serde_json::json!({"architecture": "wasm", "os": "wasip2", "layerDigests": ["sha256:ab"]})
        );
    }
}
