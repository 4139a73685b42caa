//! Plugin sources: finding the plugin crates in a directory, building one for `wasm32-wasip2`
//! with cargo, and installing the result as `NAME.wasm` + `NAME.toml` in a compiled plugins
//! directory (which the [`crate::plugin::PluginHost`] loads and the reloader watches).
//!
//! Layout, mirroring the compiled plugins directory: a plugin crate is a directory holding a
//! `Cargo.toml` and its manifest `NAME.toml`, where NAME is the directory's name; crates sit at
//! the top level (the operator's) or one level down in `TENANT/` directories. The directory
//! given may also be a single plugin crate. Hidden directories and `target` are never scanned.
//!
//! Builds run `cargo build --release --target wasm32-wasip2 --manifest-path CRATE/Cargo.toml`
//! with one target directory shared by all plugins, so their dependencies build once; a crate
//! may be a member of an enclosing workspace or standalone. The component's path is read from
//! cargo's `--message-format json` artifact messages, and a failed build carries cargo's
//! rendered diagnostics.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::DevLoopError;
use crate::plugin::{Manifest, ManifestError, PluginId};

/// The target plugins are built for.
pub const WASM_TARGET: &str = "wasm32-wasip2";

/// One plugin crate found in the sources directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginCrate {
    /// Tenant (the enclosing directory, or empty) and name (the crate directory's name).
    pub id: PluginId,
    /// The crate's directory.
    pub dir: PathBuf,
}

impl PluginCrate {
    /// Its `Cargo.toml`.
    pub fn cargo_toml(&self) -> PathBuf {
        self.dir.join("Cargo.toml")
    }

    /// Its manifest, `NAME.toml`.
    pub fn manifest(&self) -> PathBuf {
        self.dir.join(format!("{}.toml", self.id.name))
    }
}

/// What a scan found.
#[derive(Debug, Default)]
pub struct Sources {
    /// Plugin crates, sorted by tenant and name.
    pub crates: Vec<PluginCrate>,
    /// Crate directories that are not plugins, and why (e.g. no `NAME.toml`).
    pub skipped: Vec<(PathBuf, String)>,
}

/// Finds the plugin crates under `dir` (see the module docs for the layout).
pub fn scan(dir: &Path) -> Result<Sources, DevLoopError> {
    let mut sources = Sources::default();
    if dir.join("Cargo.toml").is_file() {
        consider(&mut sources, "", dir);
        return Ok(sources);
    }
    for entry in subdirs(dir)? {
        if entry.join("Cargo.toml").is_file() {
            consider(&mut sources, "", &entry);
        } else {
            let tenant = file_name(&entry);
            // A tenant directory that cannot be read holds no crates we could build.
            for inner in subdirs(&entry).unwrap_or_default() {
                if inner.join("Cargo.toml").is_file() {
                    consider(&mut sources, &tenant, &inner);
                }
            }
        }
    }
    sources.crates.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(sources)
}

fn consider(sources: &mut Sources, tenant: &str, dir: &Path) {
    let krate = PluginCrate {
        id: PluginId {
            tenant: tenant.to_string(),
            name: file_name(dir),
        },
        dir: dir.to_path_buf(),
    };
    if krate.manifest().is_file() {
        sources.crates.push(krate);
    } else {
        let reason = format!("a crate without a plugin manifest `{}.toml`", krate.id.name);
        sources.skipped.push((dir.to_path_buf(), reason));
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Subdirectories, sorted, without hidden ones and `target`.
fn subdirs(dir: &Path) -> Result<Vec<PathBuf>, DevLoopError> {
    let entries = std::fs::read_dir(dir).map_err(|source| DevLoopError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .filter(|p| {
            let n = file_name(p);
            !n.starts_with('.') && n != "target"
        })
        .collect();
    out.sort();
    Ok(out)
}

/// Why a plugin could not be built or installed; its old version (if any) keeps running.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// cargo could not be started.
    #[error("plugin `{plugin}`: cannot run cargo: {reason}")]
    Spawn {
        /// The plugin.
        plugin: PluginId,
        /// The OS error.
        reason: String,
    },
    /// The build failed; `diagnostics` is what the compiler (or cargo) said.
    #[error("plugin `{plugin}`: build failed:\n{diagnostics}")]
    Compile {
        /// The plugin.
        plugin: PluginId,
        /// cargo's rendered diagnostics (errors), or its stderr when there are none.
        diagnostics: String,
    },
    /// The build succeeded without producing a component.
    #[error(
        "plugin `{plugin}`: `{}` built no .wasm: its [lib] needs crate-type = [\"cdylib\", \"rlib\"]",
        cargo_toml.display()
    )]
    NoArtifact {
        /// The plugin.
        plugin: PluginId,
        /// The crate's Cargo.toml.
        cargo_toml: PathBuf,
    },
    /// The manifest is invalid (names the file, field, line and column).
    #[error("plugin `{plugin}`: {source}")]
    Manifest {
        /// The plugin.
        plugin: PluginId,
        /// The manifest error.
        #[source]
        source: ManifestError,
    },
    /// The component or manifest could not be copied into the plugins directory.
    #[error("plugin `{plugin}`: installing `{}`: {source}", path.display())]
    Install {
        /// The plugin.
        plugin: PluginId,
        /// The file being written.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// A successful build.
#[derive(Debug, Clone)]
pub struct Built {
    /// The component cargo produced.
    pub wasm: PathBuf,
    /// The crate's own warnings, rendered.
    pub warnings: Vec<String>,
    /// How long cargo took.
    pub elapsed: Duration,
    /// The local source files the build read (cargo's dep-info beside the component): the
    /// crate's own and its path dependencies', e.g. the SDK and the WIT file.
    pub inputs: Vec<PathBuf>,
}

/// Builds plugin crates and installs them into a compiled plugins directory.
#[derive(Debug, Clone)]
pub struct Builder {
    /// cargo's `--target-dir`, shared by every plugin.
    pub target_dir: PathBuf,
    /// The compiled plugins directory (`NAME.wasm` + `NAME.toml`, tenants in subdirectories).
    pub out_dir: PathBuf,
    /// Render diagnostics with ANSI colours.
    pub color: bool,
}

/// The subset of cargo's JSON messages the builder reads.
#[derive(Deserialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
enum CargoMessage {
    CompilerArtifact {
        manifest_path: PathBuf,
        target: CargoTarget,
        filenames: Vec<PathBuf>,
    },
    CompilerMessage {
        manifest_path: PathBuf,
        message: Diagnostic,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct CargoTarget {
    crate_types: Vec<String>,
}

#[derive(Deserialize)]
struct Diagnostic {
    level: String,
    rendered: Option<String>,
}

impl Builder {
    /// Where a plugin's files go: `OUT/[TENANT/]NAME.wasm` and `.toml`.
    pub fn installed_paths(&self, id: &PluginId) -> (PathBuf, PathBuf) {
        let dir = if id.tenant.is_empty() {
            self.out_dir.clone()
        } else {
            self.out_dir.join(&id.tenant)
        };
        (
            dir.join(format!("{}.wasm", id.name)),
            dir.join(format!("{}.toml", id.name)),
        )
    }

    /// Builds one crate (blocking: run it off the async workers).
    pub fn build(&self, krate: &PluginCrate) -> Result<Built, BuildError> {
        let plugin = krate.id.clone();
        let manifest = krate.manifest();
        Manifest::load(&manifest).map_err(|source| BuildError::Manifest {
            plugin: plugin.clone(),
            source,
        })?;
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let format = if self.color {
            "json-diagnostic-rendered-ansi"
        } else {
            "json"
        };
        let started = Instant::now();
        let output = Command::new(cargo)
            .args(["build", "--release", "--target", WASM_TARGET])
            .arg("--manifest-path")
            .arg(krate.cargo_toml())
            .arg("--target-dir")
            .arg(&self.target_dir)
            .args(["--message-format", format])
            .current_dir(&krate.dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| BuildError::Spawn {
                plugin: plugin.clone(),
                reason: e.to_string(),
            })?;
        let ours = std::fs::canonicalize(krate.cargo_toml()).unwrap_or(krate.cargo_toml());
        let (mut wasm, mut errors, mut warnings) = (None, Vec::new(), Vec::new());
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            match serde_json::from_str::<CargoMessage>(line) {
                Ok(CargoMessage::CompilerArtifact {
                    manifest_path,
                    target,
                    filenames,
                }) if manifest_path == ours && target.crate_types.iter().any(|t| t == "cdylib") => {
                    wasm = filenames
                        .into_iter()
                        .find(|f| f.extension().is_some_and(|e| e == "wasm"));
                }
                Ok(CargoMessage::CompilerMessage {
                    manifest_path,
                    message,
                }) => {
                    let text = message.rendered.unwrap_or_default();
                    match message.level.as_str() {
                        "error" | "error: internal compiler error" => errors.push(text),
                        "warning" if manifest_path == ours => warnings.push(text),
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        if !output.status.success() {
            let diagnostics = if errors.is_empty() {
                // Not a compiler error (bad Cargo.toml, missing target, resolution): cargo's
                // own words are on stderr.
                String::from_utf8_lossy(&output.stderr).trim().to_string()
            } else {
                errors.concat().trim_end().to_string()
            };
            return Err(BuildError::Compile {
                plugin,
                diagnostics,
            });
        }
        let wasm = wasm.ok_or_else(|| BuildError::NoArtifact {
            plugin,
            cargo_toml: krate.cargo_toml(),
        })?;
        Ok(Built {
            // Files generated under the target directory are build products, not sources.
            inputs: dep_info(&wasm.with_extension("d"))
                .into_iter()
                .filter(|f| !f.starts_with(&self.target_dir))
                .collect(),
            wasm,
            warnings,
            elapsed: started.elapsed(),
        })
    }

    /// Copies the component and the manifest into the plugins directory, each through a
    /// temporary file and a rename so the reloader never reads a half-written file. Returns
    /// whether anything changed (an unchanged plugin is not reloaded).
    pub fn install(&self, krate: &PluginCrate, built: &Built) -> Result<bool, BuildError> {
        let (wasm, manifest) = self.installed_paths(&krate.id);
        let mut changed = false;
        for (from, to) in [(&built.wasm, &wasm), (&krate.manifest(), &manifest)] {
            let err = |source| BuildError::Install {
                plugin: krate.id.clone(),
                path: to.clone(),
                source,
            };
            let bytes = std::fs::read(from).map_err(|source| BuildError::Install {
                plugin: krate.id.clone(),
                path: from.clone(),
                source,
            })?;
            if std::fs::read(to).is_ok_and(|old| old == bytes) {
                continue;
            }
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).map_err(err)?;
            }
            // A dot-name with a `.tmp` extension: the loader ignores it.
            let tmp = to.with_file_name(format!(".{}.tmp", file_name(to)));
            std::fs::write(&tmp, &bytes).map_err(err)?;
            std::fs::rename(&tmp, to).map_err(err)?;
            changed = true;
        }
        Ok(changed)
    }

    /// Removes an installed plugin's files (its crate is gone); the reloader unloads it.
    pub fn uninstall(&self, id: &PluginId) -> bool {
        let (wasm, manifest) = self.installed_paths(id);
        let a = std::fs::remove_file(wasm).is_ok();
        let b = std::fs::remove_file(manifest).is_ok();
        a || b
    }

    /// Plugins installed in the output directory (`NAME.toml` present), whatever their source.
    pub fn installed(&self) -> Vec<PluginId> {
        let mut out = Vec::new();
        let mut collect = |tenant: &str, dir: &Path| {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "toml") && p.is_file() {
                    out.push(PluginId {
                        tenant: tenant.to_string(),
                        name: p
                            .file_stem()
                            .map(|s| s.to_string_lossy().into_owned())
                            .unwrap_or_default(),
                    });
                }
            }
        };
        collect("", &self.out_dir);
        for t in subdirs(&self.out_dir).unwrap_or_default() {
            collect(&file_name(&t), &t);
        }
        out
    }
}

/// Installs the wasm target through rustup when it is missing (a no-op when present, or when
/// rustup is not there: cargo's error then says what is missing).
pub fn ensure_target() {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output();
    if let Ok(out) = installed
        && out.status.success()
        && !String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.trim() == WASM_TARGET)
    {
        tracing::info!(
            target = WASM_TARGET,
            "installing the wasm target with rustup"
        );
        let _ = Command::new("rustup")
            .args(["target", "add", WASM_TARGET])
            .stdout(Stdio::null())
            .status();
    }
}

/// The files listed in a Makefile-style dep-info file (`TARGET: DEP DEP ...`, a space in a
/// path escaped as `\ `); none when it cannot be read, which only costs rebuild triggers.
fn dep_info(path: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut files = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((_, deps)) = line.split_once(": ") else {
            continue;
        };
        let mut current = String::new();
        let mut chars = deps.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&' ') => {
                    current.push(' ');
                    chars.next();
                }
                ' ' if !current.is_empty() => {
                    files.push(PathBuf::from(std::mem::take(&mut current)))
                }
                ' ' => {}
                c => current.push(c),
            }
        }
        if !current.is_empty() {
            files.push(PathBuf::from(current));
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn scan_finds_crates_tenants_and_skips_non_plugins() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        write(&root.join("a/Cargo.toml"), "");
        write(&root.join("a/a.toml"), "");
        write(&root.join("team/b/Cargo.toml"), "");
        write(&root.join("team/b/b.toml"), "");
        write(&root.join("lib/Cargo.toml"), "");
        write(&root.join("target/x/Cargo.toml"), "");
        write(&root.join(".hidden/Cargo.toml"), "");
        let s = scan(root).unwrap();
        let ids: Vec<String> = s.crates.iter().map(|c| c.id.to_string()).collect();
        assert_eq!(ids, ["a", "team/b"]);
        assert_eq!(s.skipped.len(), 1);
        assert!(s.skipped[0].1.contains("`lib.toml`"), "{:?}", s.skipped);
        // The directory itself may be the crate.
        let one = scan(&root.join("a")).unwrap();
        assert_eq!(one.crates.len(), 1);
        assert_eq!(one.crates[0].id.name, "a");
    }

    #[test]
    fn install_is_atomic_and_reports_changes() {
        let d = tempfile::tempdir().unwrap();
        let krate = PluginCrate {
            id: PluginId {
                tenant: "t".into(),
                name: "p".into(),
            },
            dir: d.path().join("src/p"),
        };
        write(&krate.manifest(), "[[watch]]\n");
        write(&d.path().join("p.wasm"), "wasm");
        let b = Builder {
            target_dir: d.path().join("target"),
            out_dir: d.path().join("out"),
            color: false,
        };
        let built = Built {
            wasm: d.path().join("p.wasm"),
            warnings: vec![],
            elapsed: Duration::ZERO,
            inputs: vec![],
        };
        assert!(b.install(&krate, &built).unwrap());
        assert!(!b.install(&krate, &built).unwrap());
        assert_eq!(
            std::fs::read(d.path().join("out/t/p.wasm")).unwrap(),
            b"wasm"
        );
        assert_eq!(b.installed(), std::slice::from_ref(&krate.id));
        assert!(b.uninstall(&krate.id));
        assert!(b.installed().is_empty());
    }

    #[test]
    fn dep_info_lists_every_file_with_escaped_spaces() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("p.d");
        write(
            &path,
            "/t/p.wasm: /src/p/src/lib.rs /my\\ sdk/src/lib.rs  /wit/plugin.wit\n\n# env-dep:X=1\n",
        );
        assert_eq!(
            dep_info(&path),
            ["/src/p/src/lib.rs", "/my sdk/src/lib.rs", "/wit/plugin.wit"]
                .map(PathBuf::from)
                .to_vec()
        );
        assert!(dep_info(&d.path().join("missing.d")).is_empty());
    }
}
