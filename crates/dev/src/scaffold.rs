//! `informant new NAME`: a plugin crate on `informant-sdk` with its manifest `NAME.toml` and a
//! passing unit test, from the templates in `crates/dev/templates/plugin/`; with `--admit`, an
//! admission hook ([`Template::Admit`]) from `crates/dev/templates/plugin-admit/`.
//!
//! The SDK dependency: `informant-sdk` is not published to a registry, so by default the crate
//! depends on the SDK source this binary was built from, by path (relative when the crate sits
//! in the same tree, e.g. `plugins/` of this repository; absolute otherwise), and copies that
//! workspace's `Cargo.lock`, pinning the dependency versions the SDK is tested with. A binary
//! installed without its source falls back to a version requirement on `informant-sdk`. The
//! crate is a workspace of its own (an empty `[workspace]` table), so it builds standalone and
//! also when created inside another workspace's directory.

use std::path::{Component, Path, PathBuf};

use super::DevLoopError;

const CARGO_TOML: &str = include_str!("../templates/plugin/Cargo.toml.tmpl");
const LIB_RS: &str = include_str!("../templates/plugin/lib.rs.tmpl");
const MANIFEST: &str = include_str!("../templates/plugin/manifest.toml.tmpl");
const GITIGNORE: &str = include_str!("../templates/plugin/gitignore.tmpl");
const ADMIT_LIB_RS: &str = include_str!("../templates/plugin-admit/lib.rs.tmpl");
const ADMIT_MANIFEST: &str = include_str!("../templates/plugin-admit/manifest.toml.tmpl");

/// What a scaffolded Rust plugin does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Template {
    /// An event hook: logs each ConfigMap event (`informant new NAME`).
    #[default]
    Events,
    /// A validating admission hook: refuses ConfigMaps without a required label (`informant
    /// new NAME --admit`).
    Admit,
}

/// How the new crate depends on the SDK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SdkDependency {
    /// `informant-sdk = { path = ... }`: the SDK source directory.
    Path(PathBuf),
    /// `informant-sdk = "..."`: a version requirement.
    Version(String),
}

impl SdkDependency {
    /// The SDK source this binary was built from, if it is still there; else this version.
    pub fn detect() -> SdkDependency {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guest-sdk");
        match std::fs::canonicalize(&source) {
            Ok(p) if p.join("Cargo.toml").is_file() => SdkDependency::Path(p),
            _ => SdkDependency::Version(env!("CARGO_PKG_VERSION").to_string()),
        }
    }
}

/// A crate written by [`scaffold`].
#[derive(Debug, Clone)]
pub struct Scaffold {
    /// The crate's directory.
    pub dir: PathBuf,
    /// The SDK dependency it was given.
    pub sdk: SdkDependency,
    /// Whether a `Cargo.lock` was copied from the SDK's workspace.
    pub pinned: bool,
}

/// Checks a new plugin's name and creates `parent/NAME/src/`, refusing an existing non-empty
/// directory; returns the directory as given and canonical.
fn new_plugin_dir(name: &str, parent: &Path) -> Result<(PathBuf, PathBuf), DevLoopError> {
    check_name(name).map_err(|r| DevLoopError::Scaffold(format!("plugin name `{name}`: {r}")))?;
    let dir = parent.join(name);
    if std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(DevLoopError::Scaffold(format!(
            "`{}` already exists and is not empty",
            dir.display()
        )));
    }
    let io = |source| DevLoopError::Io {
        path: dir.clone(),
        source,
    };
    std::fs::create_dir_all(dir.join("src")).map_err(io)?;
    let abs_dir = std::fs::canonicalize(&dir).map_err(io)?;
    Ok((dir, abs_dir))
}

/// Writes a new plugin crate `NAME` under `parent` (`parent/NAME/`): `Cargo.toml`,
/// `NAME.toml`, `src/lib.rs` with unit tests, `.gitignore`. Refuses an existing non-empty
/// directory and names that are not valid crate names.
pub fn scaffold(name: &str, parent: &Path, sdk: SdkDependency) -> Result<Scaffold, DevLoopError> {
    scaffold_template(Template::Events, name, parent, sdk)
}

/// [`scaffold`] from the templates of `template`.
pub fn scaffold_template(
    template: Template,
    name: &str,
    parent: &Path,
    sdk: SdkDependency,
) -> Result<Scaffold, DevLoopError> {
    let (lib_rs, manifest) = match template {
        Template::Events => (LIB_RS, MANIFEST),
        Template::Admit => (ADMIT_LIB_RS, ADMIT_MANIFEST),
    };
    let (dir, abs_dir) = new_plugin_dir(name, parent)?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DevLoopError::Io { path, source }
    };
    let dependency = match &sdk {
        SdkDependency::Path(p) => {
            let shown = relative(&abs_dir, p).unwrap_or_else(|| p.clone());
            format!(
                "informant-sdk = {{ path = {} }}",
                toml_string(&shown.to_string_lossy())
            )
        }
        SdkDependency::Version(v) => format!("informant-sdk = {}", toml_string(v)),
    };
    let struct_name = struct_name(name);
    let fill = |t: &str| {
        t.replace("{{name}}", name)
            .replace("{{struct_name}}", &struct_name)
            .replace("{{sdk_dependency}}", &dependency)
    };
    let files = [
        (dir.join("Cargo.toml"), fill(CARGO_TOML)),
        (dir.join(format!("{name}.toml")), fill(manifest)),
        (dir.join("src/lib.rs"), fill(lib_rs)),
        (dir.join(".gitignore"), GITIGNORE.to_string()),
    ];
    for (path, text) in files {
        std::fs::write(&path, text).map_err(io(&path))?;
    }
    let mut pinned = false;
    if let SdkDependency::Path(p) = &sdk
        && let Some(lock) = p.parent().map(|w| w.join("Cargo.lock"))
        && lock.is_file()
    {
        let to = dir.join("Cargo.lock");
        std::fs::copy(&lock, &to).map_err(io(&to))?;
        pinned = true;
    }
    Ok(Scaffold { dir, sdk, pinned })
}

/// `hello-hook` -> `HelloHook`.
fn struct_name(name: &str) -> String {
    name.split(['-', '_'])
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// A plugin's source language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// A crate on `informant-sdk` ([`scaffold`]).
    Rust,
    /// `plugin.py` on the Python SDK (`guest-sdk-py`).
    Python,
    /// `src/plugin.ts` on the TypeScript/JS SDK (`guest-sdk-js`).
    Js,
}

impl Lang {
    /// Its name in messages: "Rust", "Python", "TypeScript/JS".
    pub fn name(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Js => "TypeScript/JS",
        }
    }

    /// The SDK's directory in this repository.
    pub fn sdk_dir(self) -> &'static str {
        match self {
            Lang::Rust => "guest-sdk",
            Lang::Python => "guest-sdk-py",
            Lang::Js => "guest-sdk-js",
        }
    }
}

/// The Python or JS SDK source this binary was built from, if it is still there.
pub fn polyglot_sdk(lang: Lang) -> Option<PathBuf> {
    if lang == Lang::Rust {
        return None;
    }
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(lang.sdk_dir());
    std::fs::canonicalize(source).ok().filter(|p| p.is_dir())
}

/// Writes a Python or TypeScript plugin `NAME` under `parent` (`parent/NAME/`) on the SDK
/// source at `sdk`: the manifest `NAME.toml`, the plugin and its passing unit tests (Python:
/// `plugin.py`, `test_plugin.py`, `conftest.py`; TypeScript: `src/plugin.ts`,
/// `src/plugin.test.ts`, `tsconfig.json`). The SDK is referenced by a relative path when both
/// sit in one tree. Refuses an existing non-empty directory and bad names, like [`scaffold`].
pub fn scaffold_polyglot(
    lang: Lang,
    name: &str,
    parent: &Path,
    sdk: &Path,
) -> Result<PathBuf, DevLoopError> {
    const PY: [(&str, &str); 4] = [
        (
            "{{name}}.toml",
            include_str!("../templates/plugin-py/manifest.toml.tmpl"),
        ),
        (
            "plugin.py",
            include_str!("../templates/plugin-py/plugin.py.tmpl"),
        ),
        (
            "test_plugin.py",
            include_str!("../templates/plugin-py/test_plugin.py.tmpl"),
        ),
        (
            "conftest.py",
            include_str!("../templates/plugin-py/conftest.py.tmpl"),
        ),
    ];
    const TS: [(&str, &str); 4] = [
        (
            "{{name}}.toml",
            include_str!("../templates/plugin-ts/manifest.toml.tmpl"),
        ),
        (
            "src/plugin.ts",
            include_str!("../templates/plugin-ts/plugin.ts.tmpl"),
        ),
        (
            "src/plugin.test.ts",
            include_str!("../templates/plugin-ts/plugin.test.ts.tmpl"),
        ),
        (
            "tsconfig.json",
            include_str!("../templates/plugin-ts/tsconfig.json.tmpl"),
        ),
    ];
    let files = match lang {
        Lang::Rust => {
            return Err(DevLoopError::Scaffold(
                "a Rust plugin is scaffolded by `scaffold`".into(),
            ));
        }
        Lang::Python => PY,
        Lang::Js => TS,
    };
    let (dir, abs_dir) = new_plugin_dir(name, parent)?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DevLoopError::Io { path, source }
    };
    let shown = relative(&abs_dir, sdk).unwrap_or_else(|| sdk.to_path_buf());
    let shown = shown.to_string_lossy();
    // From `src/`, one level deeper than the plugin directory.
    let from_src = |f: &str| {
        let p = if shown.starts_with('/') {
            format!("{shown}/src/{f}")
        } else {
            format!("../{shown}/src/{f}")
        };
        serde_json::Value::String(p).to_string()
    };
    let fill = |t: &str| {
        t.replace("{{name}}", name)
            .replace("{{struct_name}}", &struct_name(name))
            .replace("{{sdk}}", &shown)
            .replace(
                "{{sdk_py}}",
                &serde_json::Value::String(shown.to_string()).to_string(),
            )
            .replace("{{sdk_src_index}}", &from_src("index.ts"))
            .replace("{{sdk_src_testing}}", &from_src("testing.ts"))
    };
    if lang == Lang::Python {
        std::fs::remove_dir(dir.join("src")).map_err(io(&dir))?;
    }
    for (path, text) in files {
        let path = dir.join(fill(path));
        std::fs::write(&path, fill(text)).map_err(io(&path))?;
    }
    Ok(dir)
}

/// Cargo's rules, narrowed to what also makes a good file and plugin name.
fn check_name(name: &str) -> Result<(), &'static str> {
    let mut chars = name.chars();
    if !chars.next().is_some_and(|c| c.is_ascii_lowercase()) {
        return Err("must start with a lowercase ASCII letter");
    }
    if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_') {
        return Err("may only hold lowercase ASCII letters, digits, `-` and `_`");
    }
    if name.len() > 64 {
        return Err("must be at most 64 characters");
    }
    if [
        "test",
        "core",
        "std",
        "alloc",
        "proc_macro",
        "self",
        "crate",
        "super",
    ]
    .contains(&name)
    {
        return Err("is reserved by Rust");
    }
    Ok(())
}

/// `to` relative to `from` when they share more than the filesystem root.
fn relative(from: &Path, to: &Path) -> Option<PathBuf> {
    let (f, t): (Vec<Component>, Vec<Component>) =
        (from.components().collect(), to.components().collect());
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    if common <= 1 {
        return None;
    }
    let mut out = PathBuf::new();
    for _ in common..f.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c);
    }
    Some(out)
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_crate_with_a_relative_sdk_path_inside_one_tree() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir_all(root.join("sdk")).unwrap();
        std::fs::write(root.join("Cargo.lock"), "# lock\n").unwrap();
        let s = scaffold(
            "my-hook",
            &root.join("plugins"),
            SdkDependency::Path(root.join("sdk")),
        )
        .unwrap();
        let cargo = std::fs::read_to_string(s.dir.join("Cargo.toml")).unwrap();
        assert!(
            cargo.contains(r#"informant-sdk = { path = "../../sdk" }"#),
            "{cargo}"
        );
        assert!(cargo.contains(r#"name = "my-hook""#));
        let lib = std::fs::read_to_string(s.dir.join("src/lib.rs")).unwrap();
        assert!(lib.contains("pub struct MyHook") && lib.contains("../my-hook.toml"));
        assert!(s.dir.join("my-hook.toml").is_file() && s.pinned);
        let manifest = std::fs::read_to_string(s.dir.join("my-hook.toml")).unwrap();
        informant_runtime::manifest::Manifest::parse(&manifest, Path::new("my-hook.toml")).unwrap();
        // Not over an existing crate.
        let again = scaffold("my-hook", &root.join("plugins"), s.sdk.clone());
        assert!(again.unwrap_err().to_string().contains("not empty"));
    }

    #[test]
    fn writes_an_admission_hook_with_admit_and_a_manifest_the_host_loads() {
        let d = tempfile::tempdir().unwrap();
        let s = scaffold_template(
            Template::Admit,
            "no-bare-cms",
            d.path(),
            SdkDependency::Version("0.1.0".into()),
        )
        .unwrap();
        let cargo = std::fs::read_to_string(s.dir.join("Cargo.toml")).unwrap();
        assert!(cargo.contains(r#"informant-sdk = "0.1.0""#), "{cargo}");
        let lib = std::fs::read_to_string(s.dir.join("src/lib.rs")).unwrap();
        assert!(lib.contains("pub struct NoBareCms") && lib.contains("fn admit("));
        assert!(lib.contains("../no-bare-cms.toml") && !lib.contains("{{"));
        let manifest = std::fs::read_to_string(s.dir.join("no-bare-cms.toml")).unwrap();
        let m =
            informant_runtime::manifest::Manifest::parse(&manifest, Path::new("no-bare-cms.toml"))
                .unwrap();
        assert_eq!((m.admit.len(), m.watch.len()), (1, 0));
        assert!(s.dir.join(".gitignore").is_file() && !s.pinned);
    }

    #[test]
    fn refuses_bad_names() {
        let d = tempfile::tempdir().unwrap();
        for bad in ["", "My", "1st", "a b", "test"] {
            let err = scaffold(bad, d.path(), SdkDependency::Version("0.1.0".into()));
            assert!(
                err.unwrap_err().to_string().contains("plugin name"),
                "{bad}"
            );
        }
    }
}
