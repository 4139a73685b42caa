//! `informant new NAME`: scaffolds a plugin crate (see [`informant_runtime::devloop::scaffold`]).

use std::path::PathBuf;

use anyhow::Result;
use informant_runtime::devloop::{SdkDependency, scaffold};

/// Arguments of `informant new`.
#[derive(clap::Args)]
pub struct Args {
    /// The plugin's name: the crate, its directory and its manifest `NAME.toml`.
    name: String,
    /// Where to create the crate directory.
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Depend on the SDK at this path (default: the SDK source this binary was built from).
    #[arg(long, value_name = "PATH")]
    sdk_path: Option<PathBuf>,
    /// Depend on this version of informant-sdk from the registry instead of a path.
    #[arg(long, value_name = "VERSION", conflicts_with = "sdk_path")]
    sdk_version: Option<String>,
}

/// Writes the crate and says what to do next.
pub fn run(args: Args) -> Result<()> {
    let sdk = match (args.sdk_path, args.sdk_version) {
        (Some(p), _) => SdkDependency::Path(
            std::fs::canonicalize(&p)
                .map_err(|e| anyhow::anyhow!("--sdk-path {}: {e}", p.display()))?,
        ),
        (None, Some(v)) => SdkDependency::Version(v),
        (None, None) => SdkDependency::detect(),
    };
    let s = scaffold(&args.name, &args.dir, sdk)?;
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
