//! What the Python and JavaScript toolchains share: their errors, which name the tool, the
//! directory and what the tool printed, and running one of their commands.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Why a toolchain could not be installed or a plugin could not be built with it.
#[derive(Debug, thiserror::Error)]
pub enum ToolchainError {
    /// Installing the toolchain (a virtualenv, `pip install`, `npm install`) failed.
    #[error("installing {tool} into `{}`: {source}", dir.display())]
    Install {
        /// The toolchain: "componentize-py" or "componentize-js".
        tool: &'static str,
        /// Where it was being installed.
        dir: PathBuf,
        /// What failed, with the tool's output.
        #[source]
        source: Box<CommandError>,
    },
    /// The plugin directory has no entry module.
    #[error("`{}` has no {expected}", dir.display())]
    NoEntry {
        /// The plugin's source directory.
        dir: PathBuf,
        /// What it should hold, e.g. `plugin.py`.
        expected: &'static str,
    },
    /// The build failed; `output` is what the toolchain printed (a Python traceback, an esbuild
    /// or TypeScript error, a WIT error).
    #[error("{tool} failed for `{}`:\n{output}", dir.display())]
    Build {
        /// The toolchain.
        tool: &'static str,
        /// The plugin's source directory.
        dir: PathBuf,
        /// Its stderr and stdout.
        output: String,
    },
    /// The SDK or WIT directory the build needs is not there (the source tree this binary was
    /// built from moved).
    #[error("`{what}` is missing: the source tree this binary was built from is gone")]
    Missing {
        /// `guest-sdk-py`, `guest-sdk-js` or `wit`.
        what: String,
    },
    /// A file could not be read or written.
    #[error("`{}`: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Maps an I/O error on `path`.
pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ToolchainError + '_ {
    move |source| ToolchainError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Why a toolchain command gave no output to use; `what` names the command as a user would.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// It could not be started (not installed, not on PATH).
    #[error("{what}: cannot start: {source}")]
    Start {
        /// The command.
        what: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It exited unsuccessfully.
    #[error("{what} failed ({status}):\n{printed}")]
    Failed {
        /// The command.
        what: String,
        /// How it exited.
        status: std::process::ExitStatus,
        /// Its stderr, then stdout.
        printed: String,
    },
}

/// Why a bounded build did not run to its end.
#[derive(Debug, thiserror::Error)]
enum Unfinished {
    /// It could not be started.
    #[error("cannot start: {0}")]
    Start(#[source] std::io::Error),
    /// Its process group was killed at the time limit.
    #[error(
        "killed after {}s: the build did not finish (a plugin module that loops or blocks at import time never does)",
        .0.as_secs()
    )]
    Killed(std::time::Duration),
    /// Waiting for it failed.
    #[error("waiting for it: {0}")]
    Wait(#[source] std::io::Error),
}

/// Runs `cmd` (stdin closed) and returns its output if it exits successfully; otherwise what
/// failed, with the exit status and everything it printed.
pub(crate) fn run(cmd: &mut Command, what: &str) -> Result<Output, CommandError> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|source| CommandError::Start {
            what: what.to_string(),
            source,
        })?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(CommandError::Failed {
            what: what.to_string(),
            status: out.status,
            printed: printed(&out),
        })
    }
}

/// What a command printed: stderr, then stdout.
pub(crate) fn printed(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    )
    .trim_end()
    .to_string()
}

/// Installs a toolchain into `dir` unless the marker file `pins` there already holds `want`:
/// `install` runs, then the marker is written last, so an interrupted install is redone rather
/// than trusted.
pub(crate) fn install_once(
    dir: &Path,
    marker: &str,
    want: &[u8],
    install: impl FnOnce() -> Result<(), ToolchainError>,
) -> Result<(), ToolchainError> {
    let pins = dir.join(marker);
    if std::fs::read(&pins).is_ok_and(|p| p == want) {
        return Ok(());
    }
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    install()?;
    std::fs::write(&pins, want).map_err(io(&pins))
}

/// How long a Python or JS build may take before it is killed: componentize-py runs the
/// plugin's module-level code while building, so a plugin that loops there would otherwise
/// hold the dev loop (and every other plugin's rebuild) forever.
pub const BUILD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// Runs a plugin build: `cmd` (the SDK's build script, given `out`) under [`run_bounded`],
/// creating `out`'s directory first; a failure carries what `tool` printed, or why it could
/// not run (`program` names what was started, for a missing interpreter).
pub(crate) fn run_build(
    tool: &'static str,
    src: &Path,
    out: &Path,
    program: &str,
    cmd: &mut Command,
    limit: std::time::Duration,
) -> Result<(), ToolchainError> {
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    let failed = |output| ToolchainError::Build {
        tool,
        dir: src.to_path_buf(),
        output,
    };
    let result = run_bounded(cmd, limit).map_err(|why| failed(format!("{program}: {why}")))?;
    if result.status.success() {
        Ok(())
    } else {
        Err(failed(printed(&result)))
    }
}

/// Runs `cmd` in its own process group, killing the whole group (the build script and the
/// toolchain it started) if it has not finished within `limit`. `Err` only when it cannot be
/// started or was killed, with the reason.
fn run_bounded(cmd: &mut Command, limit: std::time::Duration) -> Result<Output, Unfinished> {
    use std::io::Read;
    use std::os::unix::process::CommandExt;

    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(Unfinished::Start)?;
    // Read both pipes while waiting, so a chatty build cannot block on a full pipe.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let started = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < limit => {
                std::thread::sleep(std::time::Duration::from_millis(50))
            }
            Ok(None) => {
                // SAFETY: signalling the process group this function created.
                unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                let _ = child.wait();
                return Err(Unfinished::Killed(limit));
            }
            Err(e) => return Err(Unfinished::Wait(e)),
        }
    };
    Ok(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}
