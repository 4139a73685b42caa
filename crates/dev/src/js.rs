//! TypeScript/JavaScript plugins: the JS SDK's `build.mjs` bundles a plugin's `src/plugin.ts`
//! (or `.js`) with the SDK (esbuild) and builds a component for the `admitting-plugin` world with
//! componentize-js (the engine behind `jco componentize`), generating the bindings from the WIT
//! directory on every build.
//!
//! The toolchain is the SDK's locked npm packages. When the SDK has them installed (its own
//! `node_modules`, as in a checkout after `npm install`), they are used; otherwise
//! [`JsToolchain::ensure`] installs the SDK's `package-lock.json` versions into a cache
//! directory once, and reinstalls when the lock changes. Builds never touch the network.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::toolchain::{ToolchainError, install_once, io, run, run_build};

/// The marker written into the cache directory once the lock's packages are installed.
const MARKER: &str = "informant-package-lock.json";

/// The package whose presence says a `node_modules` holds the toolchain.
const ENGINE: &str = "node_modules/@bytecodealliance/componentize-js/package.json";

/// Where `build.mjs` finds componentize-js and esbuild.
#[derive(Debug, Clone)]
pub struct JsToolchain {
    /// A directory whose `node_modules` holds them, or `None` for the SDK's own.
    modules: Option<PathBuf>,
}

impl JsToolchain {
    /// The toolchain for the SDK in `sdk`, if it is installed: in the SDK itself, or in
    /// `cache` from the SDK's current lock.
    pub fn installed(sdk: &Path, cache: &Path) -> Option<Self> {
        if sdk.join(ENGINE).is_file() {
            return Some(JsToolchain { modules: None });
        }
        let lock = std::fs::read(sdk.join("package-lock.json")).ok()?;
        let pinned = std::fs::read(cache.join(MARKER)).is_ok_and(|m| m == lock);
        (pinned && cache.join(ENGINE).is_file()).then(|| JsToolchain {
            modules: Some(cache.to_path_buf()),
        })
    }

    /// The toolchain for the SDK in `sdk`: its own `node_modules` when installed, else the
    /// lock's versions installed from npm into `cache` (once per lock).
    pub fn ensure(sdk: &Path, cache: &Path) -> Result<Self, ToolchainError> {
        if let Some(me) = Self::installed(sdk, cache) {
            return Ok(me);
        }
        let lock_file = sdk.join("package-lock.json");
        let lock = std::fs::read(&lock_file).map_err(io(&lock_file))?;
        let _ = std::fs::remove_file(cache.join(MARKER));
        tracing::info!(dir = %cache.display(), "installing componentize-js and esbuild");
        install_once(cache, MARKER, &lock, || {
            for file in ["package.json", "package-lock.json"] {
                let (from, to) = (sdk.join(file), cache.join(file));
                std::fs::copy(&from, &to).map_err(io(&from))?;
            }
            // `--no-save` rather than `npm ci`: the lock lists componentize-js platform
            // packages the registry does not have, which `npm ci` refuses.
            run(
                Command::new("npm")
                    .args(["install", "--no-save", "--no-audit", "--no-fund"])
                    .current_dir(cache),
                "`npm install` (TypeScript/JS plugins need Node.js 20+ and npm on PATH)",
            )
            .map_err(|source| ToolchainError::Install {
                tool: "componentize-js",
                dir: cache.to_path_buf(),
                source: Box::new(source),
            })?;
            Ok(())
        })?;
        Ok(JsToolchain {
            modules: Some(cache.to_path_buf()),
        })
    }

    /// Builds the plugin in `src` (its `src/plugin.ts` or `src/plugin.js` default-exports one
    /// `Plugin` subclass) with the SDK in `sdk` against the WIT package in `wit`, writing the
    /// component to `out` only on success; a build running longer than `limit` is killed.
    pub fn build(
        &self,
        wit: &Path,
        sdk: &Path,
        src: &Path,
        out: &Path,
        limit: Duration,
    ) -> Result<(), ToolchainError> {
        if !entry_exists(src) {
            return Err(ToolchainError::NoEntry {
                dir: src.to_path_buf(),
                expected: "src/plugin.ts or src/plugin.js",
            });
        }
        let mut cmd = Command::new("node");
        cmd.arg(sdk.join("build.mjs"))
            .arg(src)
            .arg(out)
            .arg("--wit")
            .arg(wit);
        if let Some(dir) = &self.modules {
            cmd.env("INFORMANT_JS_TOOLCHAIN", dir);
        }
        let node = "`node` (TypeScript/JS plugins need Node.js 20+)";
        run_build("componentize-js", src, out, node, &mut cmd, limit)
    }
}

/// Whether `dir` holds a TypeScript or JavaScript plugin's entry module.
pub fn entry_exists(dir: &Path) -> bool {
    ["src/plugin.ts", "src/plugin.js"]
        .iter()
        .any(|p| dir.join(p).is_file())
}
