//! `informant new NAME [--lang rust|python|js] [--admit]`: scaffolds a plugin (see
//! [`informant_dev::scaffold`]).

use std::path::PathBuf;

use anyhow::Result;
use informant_dev::{
    Lang, SdkDependency, Template, polyglot_sdk, scaffold_polyglot, scaffold_template,
};

/// The plugin's language.
#[derive(Clone, Copy, clap::ValueEnum)]
enum LangArg {
    /// A crate on informant-sdk.
    Rust,
    /// `plugin.py` on the Python SDK (componentize-py).
    Python,
    /// `src/plugin.ts` on the TypeScript/JS SDK (componentize-js).
    Js,
}

/// Arguments of `informant new`.
#[derive(clap::Args)]
pub struct Args {
    /// The plugin's name: the crate, its directory and its manifest `NAME.toml`.
    name: String,
    /// The plugin's language.
    #[arg(long, value_enum, default_value = "rust")]
    lang: LangArg,
    /// Where to create the plugin's directory.
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Depend on the SDK at this path (default: the SDK source this binary was built from; for
    /// Python and JS, its `guest-sdk-py` or `guest-sdk-js`).
    #[arg(long, value_name = "PATH")]
    sdk_path: Option<PathBuf>,
    /// Depend on this version of informant-sdk from the registry instead of a path.
    #[arg(long, value_name = "VERSION", conflicts_with = "sdk_path")]
    sdk_version: Option<String>,
    /// Scaffold a validating admission hook (an `[[admit]]` table) instead; Rust only.
    #[arg(long)]
    admit: bool,
}

/// Writes the plugin and says what to do next.
pub fn run(args: Args) -> Result<()> {
    let lang = match args.lang {
        LangArg::Rust => Lang::Rust,
        LangArg::Python => Lang::Python,
        LangArg::Js => Lang::Js,
    };
    if lang != Lang::Rust {
        anyhow::ensure!(!args.admit, "--admit scaffolds a Rust plugin (--lang rust)");
        anyhow::ensure!(
            args.sdk_version.is_none(),
            "--sdk-version is for Rust plugins: the Python and JS SDKs are used from source (--sdk-path)"
        );
        let sdk = match args.sdk_path {
            Some(p) => std::fs::canonicalize(&p)
                .map_err(|e| anyhow::anyhow!("--sdk-path {}: {e}", p.display()))?,
            None => polyglot_sdk(lang).ok_or_else(|| {
                anyhow::anyhow!(
                    "the SDK source this binary was built from is gone: pass --sdk-path"
                )
            })?,
        };
        let dir = scaffold_polyglot(lang, &args.name, &args.dir, &sdk)?;
        let dir = dir.display();
        eprintln!("created {dir} (SDK from {})", sdk.display());
        let (test, build) = match lang {
            Lang::Python => (
                format!("pytest {dir}"),
                format!(
                    "python {}/build.py {dir} {dir}/{}.wasm",
                    sdk.display(),
                    args.name
                ),
            ),
            _ => (
                format!("node {}/test.mjs {dir}", sdk.display()),
                format!(
                    "node {}/build.mjs {dir} {dir}/{}.wasm",
                    sdk.display(),
                    args.name
                ),
            ),
        };
        eprintln!("next:\n  {test}\n  informant dev --plugins {dir}    (or build it: {build})");
        return Ok(());
    }
    let sdk = match (args.sdk_path, args.sdk_version) {
        (Some(p), _) => SdkDependency::Path(
            std::fs::canonicalize(&p)
                .map_err(|e| anyhow::anyhow!("--sdk-path {}: {e}", p.display()))?,
        ),
        (None, Some(v)) => SdkDependency::Version(v),
        (None, None) => SdkDependency::detect(),
    };
    let template = if args.admit {
        Template::Admit
    } else {
        Template::Events
    };
    let s = scaffold_template(template, &args.name, &args.dir, sdk)?;
    let dir = s.dir.display();
    match &s.sdk {
        SdkDependency::Path(p) => eprintln!("created {dir} (informant-sdk from {})", p.display()),
        SdkDependency::Version(v) => eprintln!("created {dir} (informant-sdk {v})"),
    }
    eprintln!(
        "next:\n  cargo test --manifest-path {dir}/Cargo.toml\n  informant dev --plugins {dir}"
    );
    Ok(())
}
