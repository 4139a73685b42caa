//! `informant check`: would this plugin load? Component, manifest and tenant grant, offline.

use std::path::PathBuf;

use anyhow::{Result, bail};
use informant_devserver::builtin_scope;
use informant_runtime::plugin::exec::compile_cache::CompileCache;
use informant_runtime::plugin::exec::engine::{EngineOptions, PluginEngine};
use informant_runtime::plugin::load::check::{CheckRequest, check, manifest_beside};

/// Arguments of `informant check`.
#[derive(clap::Args)]
pub struct Args {
    /// The plugin component (`NAME.wasm`).
    plugin: PathBuf,
    /// Its manifest (default: `NAME.toml` beside the component).
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// Host config whose tenant grant the manifest must fit (with --tenant).
    #[arg(long, value_name = "informant.toml", requires = "tenant")]
    config: Option<PathBuf>,
    /// The tenant: the plugins subdirectory the plugin would sit in (with --config).
    #[arg(long, requires = "config")]
    tenant: Option<String>,
}

/// Prints what was checked; fails with every problem found.
pub async fn run(args: Args) -> Result<()> {
    let host = super::host_config(args.config.as_deref())?;
    let request = CheckRequest {
        manifest: args
            .manifest
            .unwrap_or_else(|| manifest_beside(&args.plugin)),
        wasm: args.plugin,
        tenant: args.tenant.unwrap_or_default(),
    };
    let engine = PluginEngine::new(EngineOptions {
        compile_cache: CompileCache::Off,
        max_instances: 1,
        ..Default::default()
    })?;
    match check(&engine, &host, &request, builtin_scope) {
        Ok(report) => {
            let who = if request.tenant.is_empty() {
                "the operator (top level)".to_string()
            } else {
                format!("tenant `{}`", request.tenant)
            };
            println!(
                "ok: `{}` implements informant:plugin; manifest `{}` watches {}; admitted for {who} with {} MiB memory and a {} ms deadline",
                request.wasm.display(),
                request.manifest.display(),
                report.watches.join(", "),
                report.accepted.memory_mib,
                report.accepted.deadline_ms
            );
            for w in report.unchecked_scope {
                println!(
                    "note: `{w}` is not a built-in kind; whether it is cluster-scoped is checked at load"
                );
            }
            Ok(())
        }
        Err(problems) => {
            for p in &problems {
                eprintln!("error: {p}");
            }
            bail!(
                "`{}` would not load: {} problem(s)",
                request.wasm.display(),
                problems.len()
            )
        }
    }
}
