//! The Python and JavaScript plugin toolchains the tests share, installed from PyPI and npm into
//! the target directory on first use — or, when Python, Node.js or the registry is not there, a
//! skip of the asking test with the reason (a failure under `INFORMANT_REQUIRE_ALL=1`).
//!
//! Each returns `None` after printing the skip; the test returns on it. The outcome is settled
//! once per process and each asking test prints its own skip line.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use informant_dev::python::PyToolchain;
use informant_dev::toolchain::ToolchainError;
use informant_test_tools::{find, skip};

use crate::plugins::target_dir;

/// The shared Python toolchain (`target/py-toolchain`: componentize-py and pytest from PyPI).
pub fn python() -> Option<PyToolchain> {
    static TOOLCHAIN: OnceLock<Result<PyToolchain, String>> = OnceLock::new();
    let outcome = TOOLCHAIN.get_or_init(|| {
        let venv = target_dir().join("py-toolchain");
        if let Some(tc) = PyToolchain::installed(&venv) {
            return Ok(tc);
        }
        if find("python3", Some("PYTHON")).is_none() {
            return Err("`python3` is not on PATH (nor named by $PYTHON)".into());
        }
        installed(PyToolchain::ensure(&venv))
    });
    match outcome {
        Ok(tc) => Some(tc.clone()),
        Err(why) => skip(
            why,
            "install Python 3.11+ and let the first run reach PyPI to run it",
        ),
    }
}

/// The JS SDK with its locked toolchain (componentize-js, esbuild) in its own `node_modules`
/// (`npm install` there if missing), as its test runner `test.mjs` and the builds need; Node.js
/// on PATH.
pub fn js_sdk() -> Option<PathBuf> {
    static SDK: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let outcome = SDK.get_or_init(|| {
        let sdk = workspace_root().join("guest-sdk-js");
        if find("node", None).is_none() {
            return Err("`node` is not on PATH".into());
        }
        if sdk
            .join("node_modules/@bytecodealliance/componentize-js")
            .is_dir()
        {
            return Ok(sdk);
        }
        if find("npm", None).is_none() {
            return Err("`npm` is not on PATH".into());
        }
        let out = Command::new("npm")
            .args(["install", "--no-save", "--no-audit", "--no-fund"])
            .current_dir(&sdk)
            .output()
            .map_err(|e| format!("npm install in guest-sdk-js: cannot start: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "npm install in guest-sdk-js failed ({}):\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(sdk)
    });
    match outcome {
        Ok(sdk) => Some(sdk.clone()),
        Err(why) => skip(
            why,
            "install Node.js 20+ with npm and let the first run reach npm to run it",
        ),
    }
}

/// An install's outcome: the toolchain, the install's failure as a reason to skip (no network,
/// no registry), or a panic for anything else (a broken tree is a failure, not a skip).
fn installed<T>(result: Result<T, ToolchainError>) -> Result<T, String> {
    match result {
        Ok(tc) => Ok(tc),
        Err(e @ ToolchainError::Install { .. }) => Err(e.to_string()),
        Err(e) => panic!("{e}"),
    }
}

fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
}
