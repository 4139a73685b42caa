//! Python plugins: componentize-py turns a plugin's `plugin.py` (and whatever it imports from
//! its directory) plus the Python SDK into a component for the `plugin` world, generating the
//! bindings from the WIT directory on every build, so a new contract version needs no SDK edit.
//!
//! The toolchain is a virtualenv holding the pinned componentize-py (the SDK's
//! `requirements-build.txt`); [`PyToolchain::ensure`] creates it under a cache directory on
//! first use and reinstalls when the pin changes. Builds never touch the network.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::toolchain::{ToolchainError, install_once, io, run, run_build};

/// The pinned Python toolchain requirements (componentize-py, pytest).
pub const REQUIREMENTS: &str = include_str!("../../../guest-sdk-py/requirements-build.txt");

/// The marker written into a virtualenv once the pins are installed.
const MARKER: &str = "informant-requirements.txt";

/// A virtualenv with the pinned componentize-py.
#[derive(Debug, Clone)]
pub struct PyToolchain {
    venv: PathBuf,
}

impl PyToolchain {
    /// The toolchain in `venv`, if it is installed from the current pins.
    pub fn installed(venv: &Path) -> Option<Self> {
        let me = PyToolchain {
            venv: venv.to_path_buf(),
        };
        let pinned = std::fs::read_to_string(venv.join(MARKER)).is_ok_and(|p| p == REQUIREMENTS);
        (pinned && me.componentize_py().is_file()).then_some(me)
    }

    /// The toolchain in `venv`, created with `python3` (`$PYTHON` to choose another) and filled
    /// from PyPI if it is missing or was installed from other pins.
    pub fn ensure(venv: &Path) -> Result<Self, ToolchainError> {
        if let Some(me) = Self::installed(venv) {
            return Ok(me);
        }
        // An executable gone missing under a current marker: install again.
        let _ = std::fs::remove_file(venv.join(MARKER));
        tracing::info!(venv = %venv.display(), "installing componentize-py");
        let failed = |source| ToolchainError::Install {
            tool: "componentize-py",
            dir: venv.to_path_buf(),
            source: Box::new(source),
        };
        install_once(venv, MARKER, REQUIREMENTS.as_bytes(), || {
            let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
            run(
                Command::new(&python).args(["-m", "venv"]).arg(venv),
                &format!("`{python} -m venv` (Python plugins need Python 3.11+)"),
            )
            .map_err(failed)?;
            let requirements = venv.join("requirements-build.txt");
            std::fs::write(&requirements, REQUIREMENTS).map_err(io(&requirements))?;
            run(
                Command::new(venv.join("bin/pip"))
                    .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
                    .arg(&requirements),
                "`pip install` of componentize-py",
            )
            .map_err(failed)?;
            Ok(())
        })?;
        Ok(PyToolchain {
            venv: venv.to_path_buf(),
        })
    }

    /// The componentize-py executable.
    pub fn componentize_py(&self) -> PathBuf {
        self.venv.join("bin/componentize-py")
    }

    /// The virtualenv's Python (for running a plugin's tests with pytest).
    pub fn python(&self) -> PathBuf {
        self.venv.join("bin/python")
    }

    /// Builds the plugin in `src` (its `plugin.py` defines one `informant.Plugin` subclass)
    /// with the SDK in `sdk` (its `build.py` drives componentize-py) against the WIT package in
    /// `wit`, writing the component to `out` only on success; a build running longer than
    /// `limit` is killed.
    pub fn build(
        &self,
        wit: &Path,
        sdk: &Path,
        src: &Path,
        out: &Path,
        limit: Duration,
    ) -> Result<(), ToolchainError> {
        if !src.join("plugin.py").is_file() {
            return Err(ToolchainError::NoEntry {
                dir: src.to_path_buf(),
                expected: "plugin.py",
            });
        }
        let python = self.python();
        run_build(
            "componentize-py",
            src,
            out,
            &python.display().to_string(),
            Command::new(&python)
                .arg(sdk.join("build.py"))
                .arg(src)
                .arg(out)
                .arg("--wit")
                .arg(wit)
                // No `__pycache__` written into the sources, which the dev loop watches.
                .env("PYTHONDONTWRITEBYTECODE", "1"),
            limit,
        )
    }
}
