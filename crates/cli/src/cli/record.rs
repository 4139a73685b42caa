//! `informant record`: writes a live event stream to a recording for `informant replay`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use informant_runtime::informer::{FactoryOptions, InformerFactory, SharedInformer, WatchScope};
use informant_runtime::manifest::Manifest;
use informant_runtime::replay::Recorder;

/// Arguments of `informant record`.
#[derive(clap::Args)]
pub struct Args {
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Where to write the recording (JSON Lines).
    #[arg(long, value_name = "FILE.jsonl")]
    out: PathBuf,
    /// Record these resources, as `APIVERSION/KIND` (e.g. v1/ConfigMap, apps/v1/Deployment).
    #[arg(long = "watch", value_name = "APIVERSION/KIND")]
    watches: Vec<String>,
    /// Record what this plugin manifest watches (its namespaces and selectors too).
    #[arg(long = "manifest", value_name = "NAME.toml")]
    manifests: Vec<PathBuf>,
    /// Only this namespace (for --watch).
    #[arg(long)]
    namespace: Option<String>,
    /// Stop after this many events (default: at Ctrl-C or SIGTERM).
    #[arg(long)]
    count: Option<u64>,
}

/// Records until SIGINT (Ctrl-C) or SIGTERM, or `--count` events.
pub async fn run(args: Args) -> Result<()> {
    if args.watches.is_empty() && args.manifests.is_empty() {
        bail!("nothing to record: give --watch APIVERSION/KIND or --manifest NAME.toml");
    }
    let client = super::client(args.kubeconfig.as_deref()).await?;
    let factory = Arc::new(InformerFactory::new(client, FactoryOptions::default()));
    let mut informers: Vec<Arc<SharedInformer>> = Vec::new();
    let mut keep = |informer: Arc<SharedInformer>| {
        // Asked twice (or by --watch and a manifest alike), recorded once.
        if !informers.iter().any(|i| Arc::ptr_eq(i, &informer)) {
            informers.push(informer);
        }
    };
    for w in &args.watches {
        let scope = WatchScope {
            namespace: args.namespace.clone(),
            label_selector: None,
        };
        keep(super::watch_informer(&factory, w, scope).await?);
    }
    for path in &args.manifests {
        let manifest = Manifest::load(path)?;
        for (i, w) in manifest.watch.iter().enumerate() {
            for scope in informant_runtime::plugin::watch_scopes(w) {
                let informer = factory
                    .informer(w.api_version.as_str(), &w.kind, scope)
                    .await
                    .with_context(|| format!("{}: watch {i}", path.display()))?;
                keep(informer.keep());
            }
        }
    }
    let file = std::fs::File::create(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    // Registered before the informers start, so their first lists are recorded as `initial`.
    let recorder = Recorder::start(&informers, Box::new(file));
    factory.start();
    factory.wait_for_sync(Duration::from_secs(60)).await?;
    eprintln!(
        "recording {} resources to {} ({} events so far); Ctrl-C to stop",
        informers.len(),
        args.out.display(),
        recorder.recorded()
    );
    match args.count {
        Some(n) => tokio::select! {
            _ = recorder.wait_for(n) => {}
            r = super::shutdown_signal() => r?,
        },
        None => super::shutdown_signal().await?,
    }
    let n = recorder.finish().await?;
    factory.stop();
    eprintln!("wrote {n} events to {}", args.out.display());
    Ok(())
}
