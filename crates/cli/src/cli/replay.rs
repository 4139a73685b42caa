//! `informant replay`: one plugin, offline, against a recording (see [`informant_runtime::replay`]).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use informant_runtime::plugin::bindings::Level;
use informant_runtime::plugin::exec::engine::{EngineOptions, PluginEngine};
use informant_runtime::plugin::load::host_config::HostConfig;
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
    #[arg(long, value_name = "FILE.jsonl", required_unless_present = "reviews")]
    events: Option<PathBuf>,
    /// AdmissionReview requests, one JSON object a line (`--admission-record`'s file), that the
    /// plugin's `[[admit]]` hooks answer after the events; each answer is printed as a JSON line
    /// `admit {uid, hook, decision, response}`.
    #[arg(long, value_name = "FILE.jsonl")]
    reviews: Option<PathBuf>,
    /// Objects in the cache before the first event (multi-document YAML).
    #[arg(long, value_name = "FILE.yaml")]
    objects: Option<PathBuf>,
    #[command(flatten)]
    cache: super::CompileCacheArgs,
}

/// Prints the plugin's log lines on stdout as they come, and a summary on stderr.
pub async fn run(args: Args) -> Result<()> {
    let records = match &args.events {
        Some(f) => read_records(f)?,
        None => Vec::new(),
    };
    let reviews = match &args.reviews {
        Some(f) => read_reviews(f)?,
        None => Vec::new(),
    };
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
        reviews,
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
    .with_context(|| format!("replaying into {}", args.plugin.display()))?;
    for answer in &outcome.admissions {
        println!("admit {answer}");
    }
    eprintln!(
        "replayed {} events into {}: {} handled, {} failed; {} lines not watched by the plugin",
        outcome.delivered,
        args.plugin.display(),
        outcome.handled,
        outcome.failed,
        outcome.skipped
    );
    if args.reviews.is_some() {
        eprintln!("answered {} admission reviews", outcome.admissions.len());
    }
    Ok(())
}

/// The JSON objects of `path`, one a line (blank lines skipped); an error names the line.
fn read_reviews(path: &std::path::Path) -> Result<Vec<serde_json::Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .with_context(|| format!("{}:{}: not a JSON object", path.display(), i + 1))
        })
        .collect()
}
