//! `informant replay`: one plugin, offline, against a recording (see [`informant_runtime::replay`]).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use informant_runtime::plugin::{EngineOptions, HostConfig, Level, PluginEngine};
use informant_runtime::replay::{ReplayConfig, read_records, read_yaml_objects, replay};

/// Arguments of `informant replay`.
#[derive(clap::Args)]
pub struct Args {
    /// The plugin component.
    #[arg(long, value_name = "X.wasm")]
    plugin: PathBuf,
    /// Its manifest (default: the `.toml` beside the `.wasm`).
    #[arg(long, value_name = "F")]
    manifest: Option<PathBuf>,
    /// The recording (`informant record`'s JSON Lines).
    #[arg(long, value_name = "FILE.jsonl")]
    events: PathBuf,
    /// Objects in the cache before the first event (multi-document YAML).
    #[arg(long, value_name = "FILE.yaml")]
    objects: Option<PathBuf>,
    #[command(flatten)]
    cache: super::CompileCacheArgs,
}

/// Prints the plugin's log lines on stdout as they come, and a summary on stderr.
pub async fn run(args: Args) -> Result<()> {
    let records = read_records(&args.events)?;
    let objects = match &args.objects {
        Some(f) => read_yaml_objects(f)?,
        None => Vec::new(),
    };
    let engine = Arc::new(PluginEngine::new(EngineOptions {
        compile_cache: args.cache.compile_cache(),
        ..Default::default()
    })?);
    let config = ReplayConfig {
        wasm: args.plugin.clone(),
        manifest: args.manifest,
        host: HostConfig::default(),
    };
    let outcome = replay(engine, &config, objects, records, |line| {
        let level = match line.level {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        };
        println!("{level:5} {}", line.message);
    })
    .await
    .with_context(|| format!("replaying {}", args.events.display()))?;
    eprintln!(
        "replayed {} events into {}: {} handled, {} failed; {} lines not watched by the plugin",
        outcome.delivered,
        args.plugin.display(),
        outcome.handled,
        outcome.failed,
        outcome.skipped
    );
    Ok(())
}
