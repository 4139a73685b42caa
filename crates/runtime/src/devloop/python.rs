//! Python plugins: componentize-py turns a plugin's `plugin.py` (and whatever it imports from
//! its directory) plus the Python SDK into a component for the `plugin` world, generating the
//! bindings from the WIT directory on every build, so a new contract version needs no SDK edit.
//!
//! The toolchain is a virtualenv holding the pinned componentize-py (the SDK's
//! `requirements-build.txt`); [`PyToolchain::ensure`] creates it under a cache directory on
//! first use and reinstalls when the pin changes. Builds never touch the network.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The pinned Python toolchain requirements (componentize-py, pytest).
pub const REQUIREMENTS: &str = include_str!("../../../../guest-sdk-py/requirements-build.txt");

/// Why the Python toolchain could not be installed or a plugin could not be built.
#[derive(Debug, thiserror::Error)]
pub enum PythonError {
    /// Creating the virtualenv or installing componentize-py failed.
    #[error("installing the Python toolchain into `{}`: {detail}", venv.display())]
    Install {
        /// The virtualenv.
        venv: PathBuf,
        /// What failed, with the tool's output.
        detail: String,
    },
    /// The plugin directory has no `plugin.py`.
    #[error("`{}` has no plugin.py", dir.display())]
    NoPluginModule {
        /// The plugin's source directory.
        dir: PathBuf,
    },
    /// The build failed; `output` is what componentize-py printed (a Python traceback or WIT
    /// error).
    #[error("componentize-py failed for `{}`:\n{output}", dir.display())]
    Build {
        /// The plugin's source directory.
        dir: PathBuf,
        /// componentize-py's stderr and stdout.
        output: String,
    },
    /// A file could not be written.
    #[error("`{}`: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// A virtualenv with the pinned componentize-py.
#[derive(Debug, Clone)]
pub struct PyToolchain {
    venv: PathBuf,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PythonError + '_ {
    move |source| PythonError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn run(cmd: &mut Command, what: &str, venv: &Path) -> Result<(), PythonError> {
    let out = cmd.output().map_err(|e| PythonError::Install {
        venv: venv.to_path_buf(),
        detail: format!("{what}: cannot start: {e}"),
    })?;
    if out.status.success() {
        return Ok(());
    }
    Err(PythonError::Install {
        venv: venv.to_path_buf(),
        detail: format!(
            "{what} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        ),
    })
}

impl PyToolchain {
    /// The toolchain in `venv`, created with `python3 -m venv` and filled from PyPI if it is
    /// missing or was installed from other pins.
    pub fn ensure(venv: &Path) -> Result<Self, PythonError> {
        let pins = venv.join("informant-requirements.txt");
        let me = PyToolchain {
            venv: venv.to_path_buf(),
        };
        if std::fs::read_to_string(&pins).is_ok_and(|p| p == REQUIREMENTS)
            && me.componentize_py().is_file()
        {
            return Ok(me);
        }
        tracing::info!(venv = %venv.display(), "installing componentize-py");
        let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
        run(
            Command::new(&python).args(["-m", "venv"]).arg(venv),
            &format!("`{python} -m venv`"),
            venv,
        )?;
        let staged = venv.join("informant-requirements.staged");
        std::fs::write(&staged, REQUIREMENTS).map_err(io(&staged))?;
        run(
            Command::new(venv.join("bin/pip"))
                .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
                .arg(&staged),
            "`pip install` of componentize-py",
            venv,
        )?;
        // Written last, so an interrupted install is redone rather than trusted.
        std::fs::rename(&staged, &pins).map_err(io(&pins))?;
        Ok(me)
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
    /// `wit`, writing the component to `out` only on success.
    pub fn build(&self, wit: &Path, sdk: &Path, src: &Path, out: &Path) -> Result<(), PythonError> {
        if !src.join("plugin.py").is_file() {
            return Err(PythonError::NoPluginModule {
                dir: src.to_path_buf(),
            });
        }
        if let Some(parent) = out.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let result = Command::new(self.python())
            .arg(sdk.join("build.py"))
            .arg(src)
            .arg(out)
            .arg("--wit")
            .arg(wit)
            .output()
            .map_err(|e| PythonError::Build {
                dir: src.to_path_buf(),
                output: format!("cannot start {}: {e}", self.python().display()),
            })?;
        if result.status.success() {
            return Ok(());
        }
        Err(PythonError::Build {
            dir: src.to_path_buf(),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&result.stderr),
                String::from_utf8_lossy(&result.stdout)
            ),
        })
    }
}
