//! The external tools a test needs (kubectl, Python, Node.js, npm), and what a test does when
//! one is missing.
//!
//! A tool is looked up in its environment variable first, then on `PATH`. When it is missing,
//! [`skip`] prints `skipped: <test>: <why>; <how to run it>` and the test returns early, so
//! `cargo test` passes on a machine with only the stated prerequisites and says what it did not
//! run. A run that must run everything sets `INFORMANT_REQUIRE_ALL=1` (CI does): there the same
//! reason fails the test instead.
//!
//! ```no_run
//! # fn test() {
//! let Some(node) = informant_test_tools::need("node", None) else {
//!     return;
//! };
//! # }
//! ```

use std::fmt::Display;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The variable that turns every skip into a failure (`1`).
pub const REQUIRE_ALL: &str = "INFORMANT_REQUIRE_ALL";

/// The variable listing versioned kubectls (`:`-separated binaries, or directories holding
/// `kubectl.1.NN`); when set, it replaces the search of `PATH`.
pub const KUBECTLS: &str = "INFORMANT_KUBECTLS";

/// Whether this run requires every tool: `INFORMANT_REQUIRE_ALL=1`.
pub fn required() -> bool {
    std::env::var(REQUIRE_ALL).is_ok_and(|v| v == "1")
}

/// Skips the running test: prints `skipped: <test>: <why>; <how>` to stderr and returns `None`
/// for the test to return on, or panics with the reason when [`required`].
pub fn skip<T>(why: impl Display, how: impl Display) -> Option<T> {
    // libtest names each test's thread after the test.
    // A tool's own output may end the reason with a newline.
    let why = why.to_string();
    let why = why.trim_end();
    let thread = std::thread::current();
    let test = thread.name().filter(|n| *n != "main").unwrap_or("a test");
    if required() {
        panic!("{test}: {why} ({REQUIRE_ALL}=1 requires every tool); {how}");
    }
    // Straight to the stderr handle, in one write: `eprintln!` is captured by the test harness
    // and shown only for failing tests, which would hide every skip.
    let line = format!("skipped: {test}: {why}; {how}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    None
}

/// The executable `name`: the path in `$var` when that is set, else `name` on `PATH`.
pub fn find(name: &str, var: Option<&str>) -> Option<PathBuf> {
    if let Some(path) = var.and_then(std::env::var_os).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return if path.components().count() > 1 {
            executable(&path).then_some(path)
        } else {
            on_path(&path.to_string_lossy())
        };
    }
    on_path(name)
}

/// [`find`], or a [`skip`] naming what to install or set.
pub fn need(name: &str, var: Option<&str>) -> Option<PathBuf> {
    find(name, var).or_else(|| {
        let how = match var {
            Some(var) => format!("put `{name}` on PATH or set {var} to its path to run it"),
            None => format!("put `{name}` on PATH to run it"),
        };
        skip(format!("`{name}` is not on PATH"), how)
    })
}

/// The first `name` in a `PATH` directory.
pub fn on_path(name: &str) -> Option<PathBuf> {
    path_dirs().map(|d| d.join(name)).find(|p| executable(p))
}

fn path_dirs() -> impl Iterator<Item = PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).collect::<Vec<_>>().into_iter()
}

fn executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// kubectl `version` (`1.NN`), or a [`skip`] saying where it was looked for.
///
/// With [`KUBECTLS`] set, only its entries count: a directory holding `kubectl.1.NN`, or a
/// binary named so or reporting that version (`kubectl version --client`). Otherwise
/// `kubectl.1.NN` on `PATH`, or beside the `kubectl` on `PATH` (after symlinks: the Google Cloud
/// SDK installs its versioned kubectls next to its own).
pub fn kubectl(version: &str) -> Option<PathBuf> {
    find_kubectl(version).or_else(|| {
        let name = format!("kubectl.{version}");
        let searched = match std::env::var_os(KUBECTLS) {
            Some(list) => format!("not in {KUBECTLS}={}", list.to_string_lossy()),
            None => "not on PATH nor beside the `kubectl` on PATH".into(),
        };
        skip(
            format!("`{name}` is {searched}"),
            format!("put it on PATH or list its path in {KUBECTLS} to run it"),
        )
    })
}

fn find_kubectl(version: &str) -> Option<PathBuf> {
    let name = format!("kubectl.{version}");
    if let Some(list) = std::env::var_os(KUBECTLS) {
        return std::env::split_paths(&list)
            .filter(|p| !p.as_os_str().is_empty())
            .find_map(|entry| {
                if entry.is_dir() {
                    let bin = entry.join(&name);
                    return executable(&bin).then_some(bin);
                }
                let named = entry.file_name().is_some_and(|n| *n == *name);
                (executable(&entry)
                    && (named || client_version(&entry).as_deref() == Some(version)))
                .then_some(entry)
            });
    }
    on_path(&name).or_else(|| {
        let kubectl = std::fs::canonicalize(on_path("kubectl")?).ok()?;
        let bin = kubectl.parent()?.join(&name);
        executable(&bin).then_some(bin)
    })
}

/// `1.NN` from `kubectl version --client -o json` (`"major": "1", "minor": "NN"`).
fn client_version(bin: &Path) -> Option<String> {
    let out = Command::new(bin)
        .args(["version", "--client", "-o", "json"])
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let field = |key: &str| {
        let rest = &text[text.find(&format!("\"{key}\""))?..];
        let value = rest.split('"').nth(3)?;
        Some(value.trim_end_matches('+').to_string())
    };
    Some(format!("{}.{}", field("major")?, field("minor")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kubectl_reports_its_client_version() {
        let dir = std::env::temp_dir().join(format!("informant-test-tools-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fake = dir.join("kubectl");
        std::fs::write(
            &fake,
            "#!/bin/sh\necho '{\"clientVersion\": {\"major\": \"1\", \"minor\": \"29+\"}}'\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(client_version(&fake).as_deref(), Some("1.29"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
