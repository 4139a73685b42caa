//! Plugin sources: finding the plugins in a directory, building each into a component (Rust
//! with cargo for `wasm32-wasip2`, Python with componentize-py, TypeScript/JS with
//! componentize-js), and installing the result as `NAME.wasm` + `NAME.toml` in a compiled
//! plugins directory (which the [`informant_runtime::plugin::load::loader::PluginHost`] loads and the reloader watches).
//!
//! Layout, mirroring the compiled plugins directory: a plugin source is a directory holding its
//! manifest `NAME.toml`, where NAME is the directory's name, and a `Cargo.toml` (Rust), a
//! `plugin.py` (Python) or a `src/plugin.ts` / `src/plugin.js` (TypeScript/JS). Plugins sit at
//! the top level (the operator's) or one level down in `TENANT/` directories; the directory
//! given may also be a single plugin. Hidden directories, `target`, `node_modules` and
//! `__pycache__` are never scanned.
//!
//! Rust builds run `cargo build --release --target wasm32-wasip2 --manifest-path
//! CRATE/Cargo.toml` with one target directory shared by all plugins, so their dependencies
//! build once; a crate may be a member of an enclosing workspace or standalone. The component's
//! path is read from cargo's `--message-format json` artifact messages, and a failed build
//! carries cargo's rendered diagnostics. Python and JS builds run the SDK's build script with
//! the toolchain installed in the target directory (see [`super::python`], [`super::js`]), and
//! a failed build carries what the toolchain printed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::js::{self, JsToolchain};
use super::python::PyToolchain;
use super::toolchain::{BUILD_TIMEOUT, ToolchainError};
use super::{DevLoopError, Lang, polyglot_sdk};
use informant_runtime::manifest::Manifest;
use informant_runtime::manifest::ManifestError;
use informant_runtime::plugin::id::PluginId;

/// The target plugins are built for.
pub const WASM_TARGET: &str = "wasm32-wasip2";

/// One plugin's sources found in the sources directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginSource {
    /// Tenant (the enclosing directory, or empty) and name (the plugin directory's name).
    pub id: PluginId,
    /// The plugin's directory.
    pub dir: PathBuf,
    /// What it is written in.
    pub lang: Lang,
}

impl PluginSource {
    /// Its `Cargo.toml` (Rust).
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
    /// Plugin sources, sorted by tenant and name.
    pub plugins: Vec<PluginSource>,
    /// Source directories that are not plugins, and why (e.g. no `NAME.toml`).
    pub skipped: Vec<(PathBuf, String)>,
}

/// The language of the plugin source in `dir`, if it is one: a `Cargo.toml`, a `plugin.py` or
/// a `src/plugin.ts` / `src/plugin.js`.
fn lang_of(dir: &Path) -> Option<Lang> {
    if dir.join("Cargo.toml").is_file() {
        Some(Lang::Rust)
    } else if dir.join("plugin.py").is_file() {
        Some(Lang::Python)
    } else if js::entry_exists(dir) {
        Some(Lang::Js)
    } else {
        None
    }
}

/// Finds the plugin sources under `dir` (see the module docs for the layout).
pub fn scan(dir: &Path) -> Result<Sources, DevLoopError> {
    let mut sources = Sources::default();
    if let Some(lang) = lang_of(dir) {
        consider(&mut sources, "", dir, lang);
        return Ok(sources);
    }
    for entry in subdirs(dir)? {
        if let Some(lang) = lang_of(&entry) {
            consider(&mut sources, "", &entry, lang);
        } else {
            let tenant = file_name(&entry);
            // A tenant directory that cannot be read holds no plugins we could build.
            for inner in subdirs(&entry).unwrap_or_default() {
                if let Some(lang) = lang_of(&inner) {
                    consider(&mut sources, &tenant, &inner, lang);
                }
            }
        }
    }
    sources.plugins.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(sources)
}

fn consider(sources: &mut Sources, tenant: &str, dir: &Path, lang: Lang) {
    let plugin = PluginSource {
        id: PluginId {
            tenant: tenant.to_string(),
            name: file_name(dir),
        },
        dir: dir.to_path_buf(),
        lang,
    };
    if plugin.manifest().is_file() {
        sources.plugins.push(plugin);
    } else {
        let reason = format!(
            "a {} source without a plugin manifest `{}.toml`",
            lang.name(),
            plugin.id.name
        );
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
            !n.starts_with('.') && !matches!(n.as_str(), "target" | "node_modules" | "__pycache__")
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
    /// The Python or JS toolchain could not be installed, or the SDK is missing.
    #[error("plugin `{plugin}`: {source}")]
    Toolchain {
        /// The plugin.
        plugin: PluginId,
        /// What failed.
        #[source]
        source: ToolchainError,
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

/// Builds plugin sources and installs them into a compiled plugins directory.
#[derive(Debug, Clone)]
pub struct Builder {
    /// cargo's `--target-dir`, shared by every plugin; Python and JS components are built
    /// into its `polyglot/`.
    pub target_dir: PathBuf,
    /// The compiled plugins directory (`NAME.wasm` + `NAME.toml`, tenants in subdirectories).
    pub out_dir: PathBuf,
    /// Render diagnostics with ANSI colours.
    pub color: bool,
    /// The Python and JS SDKs, the WIT package and where their toolchains go.
    pub polyglot: Polyglot,
}

/// What Python and JS plugin builds need besides the plugin: the SDK sources, the WIT package
/// they generate bindings from, and a directory for the toolchains.
#[derive(Debug, Clone, Default)]
pub struct Polyglot {
    /// The Python SDK (`guest-sdk-py`).
    pub python_sdk: Option<PathBuf>,
    /// The TypeScript/JS SDK (`guest-sdk-js`).
    pub js_sdk: Option<PathBuf>,
    /// The WIT package (`wit/`).
    pub wit: Option<PathBuf>,
    /// Where the toolchains are installed (`py-toolchain/`, `js-toolchain/`); `None`: the
    /// builder's target directory.
    pub toolchains: Option<PathBuf>,
    /// How long one build may take; `None`: [`BUILD_TIMEOUT`].
    pub build_timeout: Option<Duration>,
}

impl Polyglot {
    /// The SDKs and WIT package of the source tree this binary was built from, if still there.
    pub fn detect() -> Self {
        Polyglot {
            python_sdk: polyglot_sdk(Lang::Python),
            js_sdk: polyglot_sdk(Lang::Js),
            wit: polyglot_sdk(Lang::Python)
                .and_then(|sdk| std::fs::canonicalize(sdk.join("../wit")).ok()),
            toolchains: None,
            build_timeout: None,
        }
    }
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

    /// Builds one plugin (blocking: run it off the async workers).
    pub fn build(&self, source: &PluginSource) -> Result<Built, BuildError> {
        Manifest::load(&source.manifest()).map_err(|e| BuildError::Manifest {
            plugin: source.id.clone(),
            source: e,
        })?;
        match source.lang {
            Lang::Rust => self.build_crate(source),
            Lang::Python | Lang::Js => self.build_polyglot(source),
        }
    }

    /// Where `lang`'s toolchain is installed (`py-toolchain/`, `js-toolchain/` in the
    /// toolchains directory).
    pub fn toolchain_dir(&self, lang: Lang) -> PathBuf {
        let base = self
            .polyglot
            .toolchains
            .as_deref()
            .unwrap_or(&self.target_dir);
        match lang {
            Lang::Python => base.join("py-toolchain"),
            _ => base.join("js-toolchain"),
        }
    }

    /// Whether building a `lang` plugin would first install its toolchain (a long step, worth
    /// a progress line).
    pub fn needs_toolchain(&self, lang: Lang) -> bool {
        match lang {
            Lang::Rust => false,
            Lang::Python => PyToolchain::installed(&self.toolchain_dir(lang)).is_none(),
            Lang::Js => self.polyglot.js_sdk.as_deref().is_some_and(|sdk| {
                JsToolchain::installed(sdk, &self.toolchain_dir(lang)).is_none()
            }),
        }
    }

    /// Builds a Python or JS plugin with its SDK's build script, installing the toolchain
    /// first if needed.
    fn build_polyglot(&self, source: &PluginSource) -> Result<Built, BuildError> {
        let plugin = source.id.clone();
        let toolchain = |e| BuildError::Toolchain {
            plugin: plugin.clone(),
            source: e,
        };
        let (sdk, script_inputs) = match source.lang {
            Lang::Python => (&self.polyglot.python_sdk, ["build.py", "informant"]),
            _ => (&self.polyglot.js_sdk, ["build.mjs", "src"]),
        };
        let missing = |what: &str| {
            toolchain(ToolchainError::Missing {
                what: what.to_string(),
            })
        };
        let sdk = sdk
            .as_deref()
            .ok_or_else(|| missing(source.lang.sdk_dir()))?;
        let wit = self.polyglot.wit.as_deref().ok_or_else(|| missing("wit"))?;
        let dir = match plugin.tenant.as_str() {
            "" => self.target_dir.join("polyglot"),
            t => self.target_dir.join("polyglot").join(t),
        };
        let wasm = dir.join(format!("{}.wasm", plugin.name));
        let started = Instant::now();
        let limit = self.polyglot.build_timeout.unwrap_or(BUILD_TIMEOUT);
        let built = match source.lang {
            Lang::Python => PyToolchain::ensure(&self.toolchain_dir(Lang::Python))
                .and_then(|tc| tc.build(wit, sdk, &source.dir, &wasm, limit)),
            _ => JsToolchain::ensure(sdk, &self.toolchain_dir(Lang::Js))
                .and_then(|tc| tc.build(wit, sdk, &source.dir, &wasm, limit)),
        };
        match built {
            Ok(()) => {}
            Err(ToolchainError::Build { output, .. }) => {
                return Err(BuildError::Compile {
                    plugin,
                    diagnostics: output,
                });
            }
            Err(e) => return Err(toolchain(e)),
        }
        // What the build read besides the plugin's own directory: the SDK and the contract.
        let mut inputs = Vec::new();
        for p in script_inputs {
            files_under(&sdk.join(p), &mut inputs);
        }
        files_under(wit, &mut inputs);
        Ok(Built {
            wasm,
            warnings: Vec::new(),
            elapsed: started.elapsed(),
            inputs,
        })
    }

    /// Builds a Rust plugin crate with cargo.
    fn build_crate(&self, krate: &PluginSource) -> Result<Built, BuildError> {
        let plugin = krate.id.clone();
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
    pub fn install(&self, krate: &PluginSource, built: &Built) -> Result<bool, BuildError> {
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

/// Appends `path` if it is a file, or the files under it (recursively, without hidden
/// directories, tests and build products) if it is a directory.
fn files_under(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_file() {
        out.push(path.to_path_buf());
        return;
    }
    for dir in subdirs(path).unwrap_or_default() {
        if file_name(&dir) != "tests" {
            files_under(&dir, out);
        }
    }
    for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
        if entry.path().is_file() {
            out.push(entry.path());
        }
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
    fn scan_finds_plugins_of_every_language_tenants_and_skips_non_plugins() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        write(&root.join("a/Cargo.toml"), "");
        write(&root.join("a/a.toml"), "");
        write(&root.join("team/b/Cargo.toml"), "");
        write(&root.join("team/b/b.toml"), "");
        write(&root.join("py/plugin.py"), "");
        write(&root.join("py/py.toml"), "");
        write(&root.join("team/ts/src/plugin.ts"), "");
        write(&root.join("team/ts/ts.toml"), "");
        write(&root.join("js/src/plugin.js"), "");
        write(&root.join("js/js.toml"), "");
        write(&root.join("lib/Cargo.toml"), "");
        write(&root.join("nomanifest/plugin.py"), "");
        write(&root.join("target/x/Cargo.toml"), "");
        write(&root.join(".hidden/Cargo.toml"), "");
        write(&root.join("node_modules/m/src/plugin.js"), "");
        write(&root.join("node_modules/m/m.toml"), "");
        write(&root.join("__pycache__/c/plugin.py"), "");
        write(&root.join("__pycache__/c/c.toml"), "");
        let s = scan(root).unwrap();
        let found: Vec<(String, Lang)> = s
            .plugins
            .iter()
            .map(|c| (c.id.to_string(), c.lang))
            .collect();
        assert_eq!(
            found,
            [
                ("a".to_string(), Lang::Rust),
                ("js".to_string(), Lang::Js),
                ("py".to_string(), Lang::Python),
                ("team/b".to_string(), Lang::Rust),
                ("team/ts".to_string(), Lang::Js),
            ]
        );
        let skipped: Vec<&str> = s.skipped.iter().map(|(_, why)| why.as_str()).collect();
        assert_eq!(
            skipped,
            [
                "a Rust source without a plugin manifest `lib.toml`",
                "a Python source without a plugin manifest `nomanifest.toml`"
            ]
        );
        // The directory itself may be the plugin.
        for (dir, lang) in [
            ("a", Lang::Rust),
            ("py", Lang::Python),
            ("team/ts", Lang::Js),
        ] {
            let one = scan(&root.join(dir)).unwrap();
            assert_eq!(one.plugins.len(), 1, "{dir}");
            assert_eq!(one.plugins[0].lang, lang, "{dir}");
            assert_eq!(one.plugins[0].id.tenant, "", "{dir}");
        }
    }

    #[test]
    fn sdk_and_wit_files_are_inputs_but_not_tests_or_caches() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        for f in [
            "sdk/build.py",
            "sdk/informant/event.py",
            "sdk/informant/sub/x.py",
            "sdk/informant/__pycache__/event.pyc",
            "sdk/informant/tests/test_x.py",
            "sdk/tests/test_y.py",
        ] {
            write(&root.join(f), "");
        }
        let mut files = Vec::new();
        files_under(&root.join("sdk/build.py"), &mut files);
        files_under(&root.join("sdk/informant"), &mut files);
        files.sort();
        let rel: Vec<_> = files
            .iter()
            .map(|f| f.strip_prefix(root).unwrap())
            .collect();
        assert_eq!(
            rel,
            [
                "sdk/build.py",
                "sdk/informant/event.py",
                "sdk/informant/sub/x.py"
            ]
            .map(Path::new)
            .to_vec()
        );
    }

    #[test]
    fn install_is_atomic_and_reports_changes() {
        let d = tempfile::tempdir().unwrap();
        let krate = PluginSource {
            id: PluginId {
                tenant: "t".into(),
                name: "p".into(),
            },
            dir: d.path().join("src/p"),
            lang: Lang::Rust,
        };
        write(&krate.manifest(), "[[watch]]\n");
        write(&d.path().join("p.wasm"), "wasm");
        let b = Builder {
            target_dir: d.path().join("target"),
            out_dir: d.path().join("out"),
            color: false,
            polyglot: Polyglot::default(),
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
