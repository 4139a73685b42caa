//! `informant run`: informers and plugins against a real cluster.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use informant_runtime::informer::WatchScope;
use informant_runtime::leader::LeaseConfig;
use informant_runtime::runtime::{Replica, RuntimeOptions, StateOptions};
use informant_runtime::shard::{ShardBy, ShardConfig};

/// Arguments of `informant run`.
#[derive(clap::Args)]
pub struct Args {
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Plugins directory (`NAME.wasm` + `NAME.toml`, tenants in subdirectories); hot-reloaded.
    #[arg(long)]
    plugins: Option<PathBuf>,
    /// Host config: plugin limits and tenants with their grants (default: single-user, top-level
    /// plugins only).
    #[arg(long, value_name = "informant.toml")]
    config: Option<PathBuf>,
    /// Also log events of these resources, as `APIVERSION/KIND` (default without --plugins:
    /// v1/Pod, v1/ConfigMap, apps/v1/Deployment).
    #[arg(long = "watch")]
    watches: Vec<String>,
    /// Only this namespace (for --watch).
    #[arg(long)]
    namespace: Option<String>,
    /// Only objects matching this label selector (for --watch).
    #[arg(long)]
    selector: Option<String>,
    /// Serve /metrics, /healthz, /readyz and /plugins on this address (e.g. 0.0.0.0:9090).
    #[arg(long, value_name = "ADDR")]
    admin: Option<SocketAddr>,
    /// Send every plugin write with `dryRun=All`: the API server validates and admits it and
    /// persists nothing (try a writing plugin against a real cluster safely).
    #[arg(long)]
    dry_run_writes: bool,
    /// Keep the informers' caches and each plugin's delivery cursor in this directory, so a
    /// restart delivers exactly what changed while the host was down (and failed events are
    /// kept as dead letters). Mount a volume and give a subdirectory of it. DIR is created
    /// 0700; one that is a symbolic link, another user's, writable by group or others, or in
    /// use by another process stops the host with an error saying so (state of another
    /// cluster or a corrupt file is set aside, and the host starts afresh).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    #[command(flatten)]
    election: Election,
    #[command(flatten)]
    cache: super::CompileCacheArgs,
    #[command(flatten)]
    traces: super::TraceArgs,
}

/// Coordination flags: with `--leader-elect`, replicas run active/standby; with
/// `--shard-group`, they share the plugins out.
#[derive(clap::Args)]
struct Election {
    /// Run only while holding a coordination.k8s.io Lease: a standby starts no informers and no
    /// plugins until it acquires the Lease; a leader that loses it stops and exits non-zero.
    #[arg(long, group = "coordination")]
    leader_elect: bool,
    /// Share the plugins out among the replicas started with this group name: each holds a
    /// membership Lease `NAME-IDENTITY`, runs only the plugins assigned to it, and takes over
    /// (from their published cursors) those of members that leave or stop renewing.
    #[arg(long, value_name = "NAME", group = "coordination")]
    shard_group: Option<String>,
    /// Lease name (with --leader-elect).
    #[arg(long, default_value = "informant", requires = "leader_elect")]
    lease_name: String,
    /// Lease namespace (default: the kubeconfig context's, or the pod's in-cluster).
    #[arg(long, requires = "coordination")]
    lease_namespace: Option<String>,
    /// Seconds a lease stays valid after its last renewal; the renew deadline is 2/3 of it.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(2..=86400), requires = "coordination")]
    lease_duration: u64,
    /// This replica's identity in the Lease (default: hostname plus a random suffix). With
    /// --pod-uid, the Pod's name.
    #[arg(long, requires = "coordination")]
    identity: Option<String>,
    /// With --shard-group in a pod: the Pod's metadata.uid (from the downward API), its name
    /// being --identity. A Lease then counts as a member only when backed by a running Pod of
    /// the group (labelled informant.dev/shard-group=GROUP), so writing Leases is not enough to
    /// join; each member's Lease is owned by its Pod. Needs list and watch on Pods in the
    /// lease namespace.
    #[arg(long, value_name = "UID", requires_all = ["shard_group", "identity"])]
    pod_uid: Option<String>,
}

impl Election {
    fn lease(&self, client: &kube::Client, name: &str) -> LeaseConfig {
        let namespace = self
            .lease_namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string());
        let identity = self.identity.clone().unwrap_or_else(default_identity);
        LeaseConfig::new(name, namespace, identity)
            .with_lease_duration(Duration::from_secs(self.lease_duration))
    }

    /// The Lease configuration, when `--leader-elect` is on.
    fn config(&self, client: &kube::Client) -> Option<LeaseConfig> {
        self.leader_elect
            .then(|| self.lease(client, &self.lease_name))
    }

    /// The shard group, when `--shard-group` is on.
    fn shard(&self, client: &kube::Client, by: ShardBy) -> Option<ShardConfig> {
        let group = self.shard_group.clone()?;
        Some(ShardConfig {
            lease: self.lease(client, &group),
            group,
            by,
            pod_uid: self.pod_uid.clone(),
        })
    }
}

/// `HOSTNAME-RANDOM`: the pod name in a pod, and unique even for two processes on one host.
fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "informant".into());
    // Lowercase: it names a membership Lease in sharded mode.
    format!("{}-{:08x}", host.to_lowercase(), rand::random::<u32>())
}

/// Runs until SIGINT or SIGTERM; with `--leader-elect`, only while holding the Lease; with
/// `--shard-group`, only the plugins the group assigns to this replica.
///
/// Losing the Lease stops the informers and plugins (within the lease's safety margin) and
/// returns an error, so the process exits non-zero and its pod restarts as a standby: a fresh
/// process is simpler to trust than one that half-stopped, and the restarted replica replays
/// its plugins' caches like any first start.
pub async fn run(args: Args) -> Result<()> {
    // Held to the end: dropping it sends the spans still queued.
    let _traces = args.traces.start()?;
    let (client, cluster) = super::client_for(args.kubeconfig.as_deref()).await?;
    let state = args.state_dir.map(|dir| StateOptions {
        dir,
        cluster,
        identity: args.election.identity.clone(),
        ..Default::default()
    });
    let opts = RuntimeOptions {
        plugins: args.plugins,
        watches: args.watches,
        scope: WatchScope {
            namespace: args.namespace,
            label_selector: args.selector,
        },
        admin: args.admin,
        config: super::host_config(args.config.as_deref())?,
        config_path: args.config.clone(),
        compile_cache: args.cache.compile_cache(),
        dry_run_writes: args.dry_run_writes,
        state,
        ..Default::default()
    };
    let mut replica = match args.election.shard(&client, opts.config.shard_by) {
        Some(shard) => Replica::start_sharded(client, opts, shard)?,
        None => {
            let lease = args.election.config(&client);
            Replica::start(client, opts, lease)?
        }
    };
    tokio::select! {
        r = replica.finished() => Ok(r.context("running")?),
        r = super::shutdown_signal() => {
            r?;
            Ok(replica.shutdown().await?)
        }
    }
}
