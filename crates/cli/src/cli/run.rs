//! `informant run`: informers and plugins against a real cluster.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use informant_runtime::admin::{AdminAuth, AuthOptions};
use informant_runtime::informer::WatchScope;
use informant_runtime::leader::LeaseConfig;
use informant_runtime::runtime::{Replica, RuntimeOptions, StateOptions};
use informant_runtime::shard::{ShardBy, ShardConfig};
use informant_runtime::tls::ServerTls;

/// Arguments of `informant run`.
#[derive(clap::Args)]
pub struct Args {
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Plugins directory (`NAME.wasm` + `NAME.toml`, tenants in subdirectories); hot-reloaded.
    #[arg(long)]
    plugins: Option<PathBuf>,
    /// Only this namespace (for --watch).
    #[arg(long)]
    namespace: Option<String>,
    /// Only objects matching this label selector (for --watch).
    #[arg(long)]
    selector: Option<String>,
    /// Serve /metrics, /readyz, /plugins, /logs and /dead-letters on this address (e.g.
    /// 0.0.0.0:9090), to callers --admin-auth lets in.
    #[arg(long, value_name = "ADDR")]
    admin: Option<SocketAddr>,
    #[command(flatten)]
    admin_security: AdminSecurity,
    /// Serve the probes (/healthz, and a /readyz that names nothing) on this address, plain
    /// HTTP without credentials, for kubelet (e.g. 0.0.0.0:8081).
    #[arg(long, value_name = "ADDR")]
    health_addr: Option<SocketAddr>,
    #[command(flatten)]
    election: Election,
    #[command(flatten)]
    host: super::HostArgs,
}

/// Who may use the admin server, and over what.
#[derive(clap::Args)]
struct AdminSecurity {
    /// `kubernetes`: every request but /healthz needs `Authorization: Bearer TOKEN`, checked
    /// with a TokenReview and authorized per tenant with SubjectAccessReviews (the host's
    /// identity needs the system:auth-delegator ClusterRole). `none`: no authentication, only
    /// for a loopback --admin address.
    #[arg(long, value_enum, default_value_t = AuthMode::Kubernetes, value_name = "MODE")]
    admin_auth: AuthMode,
    /// `self-signed`: serve HTTPS with a certificate generated at start (when none is mounted).
    #[arg(long, value_enum, value_name = "MODE", conflicts_with_all = ["admin_tls_cert", "admin_tls_key"])]
    admin_tls: Option<TlsMode>,
    /// Serve HTTPS with this PEM certificate chain (re-read when it changes, as a rotated
    /// Secret is).
    #[arg(long, value_name = "FILE", requires = "admin_tls_key")]
    admin_tls_cert: Option<PathBuf>,
    /// The PEM private key of --admin-tls-cert.
    #[arg(long, value_name = "FILE", requires = "admin_tls_cert")]
    admin_tls_key: Option<PathBuf>,
}

/// `--admin-auth`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum AuthMode {
    /// TokenReview and SubjectAccessReviews.
    Kubernetes,
    /// Nobody is asked: loopback only.
    None,
}

/// `--admin-tls`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum TlsMode {
    /// A certificate generated at start.
    SelfSigned,
}

impl AdminSecurity {
    /// The runtime's settings, or why they cannot serve `admin`.
    fn options(&self, admin: Option<SocketAddr>) -> Result<(AdminAuth, ServerTls)> {
        let auth = match self.admin_auth {
            AuthMode::Kubernetes => AdminAuth::Kubernetes(AuthOptions::default()),
            AuthMode::None => AdminAuth::None,
        };
        let tls = match (&self.admin_tls, &self.admin_tls_cert, &self.admin_tls_key) {
            (Some(TlsMode::SelfSigned), _, _) => ServerTls::SelfSigned,
            (None, Some(cert), Some(key)) => ServerTls::files(cert, key),
            _ => ServerTls::Plain,
        };
        // Refused here too, so the process exits before it starts anything.
        if let Some(addr) = admin {
            informant_runtime::admin::check_exposure(addr, &auth, &tls)?;
        }
        Ok((auth, tls))
    }
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
    // Before anything starts: a refused admin setting is a mistake in the command line.
    let (admin_auth, admin_tls) = args.admin_security.options(args.admin)?;
    anyhow::ensure!(
        !(args.host.admission_only()
            && (args.election.leader_elect
                || args.election.shard_group.is_some()
                || args.host.state_dir().is_some())),
        "--admission-only runs no events: every replica answers admission, so it takes no \
         --leader-elect, --shard-group or --state-dir"
    );
    // Held to the end: dropping it sends the spans still queued.
    let _traces = args.host.start_traces()?;
    let (client, cluster) = super::client_for(args.kubeconfig.as_deref()).await?;
    let (host, state_dir) = args.host.runtime_options()?;
    let state = state_dir.map(|dir| StateOptions {
        dir,
        cluster,
        identity: args.election.identity.clone(),
        ..Default::default()
    });
    let opts = RuntimeOptions {
        plugins: args.plugins,
        scope: WatchScope {
            namespace: args.namespace,
            label_selector: args.selector,
        },
        admin: args.admin,
        admin_auth,
        admin_tls,
        health: args.health_addr,
        state,
        ..host
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Run {
        #[command(flatten)]
        args: Args,
    }

    fn parse(flags: &[&str]) -> Result<Args, clap::Error> {
        Run::try_parse_from(std::iter::once("run").chain(flags.iter().copied())).map(|r| r.args)
    }

    fn options(flags: &[&str]) -> Result<(AdminAuth, ServerTls)> {
        let args = parse(flags).expect("flags parse");
        args.admin_security.options(args.admin)
    }

    #[test]
    fn the_admin_server_asks_for_tokens_unless_told_otherwise_on_loopback() {
        let (auth, tls) =
            options(&["--admin", "0.0.0.0:9090", "--admin-tls", "self-signed"]).unwrap();
        assert_eq!(auth, AdminAuth::Kubernetes(AuthOptions::default()));
        assert_eq!(tls, ServerTls::SelfSigned);
        // Tokens over plain HTTP only on loopback.
        let e = options(&["--admin", "0.0.0.0:9090"]).unwrap_err();
        assert!(e.to_string().contains("plain HTTP"), "{e}");
        let (_, tls) = options(&["--admin", "127.0.0.1:9090"]).unwrap();
        assert_eq!(tls, ServerTls::Plain);
        for open in ["0.0.0.0:9090", "[::]:9090", "10.0.0.7:9090"] {
            let e = options(&["--admin", open, "--admin-auth", "none"]).unwrap_err();
            assert!(e.to_string().contains("loopback"), "{e}");
        }
        for local in ["127.0.0.1:9090", "[::1]:9090"] {
            let (auth, _) = options(&["--admin", local, "--admin-auth", "none"]).unwrap();
            assert_eq!(auth, AdminAuth::None);
        }
    }

    #[test]
    fn tls_takes_both_files_or_a_self_signed_certificate_never_a_mix() {
        let (_, tls) = options(&["--admin-tls-cert", "c.pem", "--admin-tls-key", "k.pem"]).unwrap();
        assert_eq!(tls, ServerTls::files("c.pem", "k.pem"));
        let (_, tls) = options(&["--admin-tls", "self-signed"]).unwrap();
        assert_eq!(tls, ServerTls::SelfSigned);
        for bad in [
            &["--admin-tls-cert", "c.pem"][..],
            &["--admin-tls-key", "k.pem"],
            &[
                "--admin-tls",
                "self-signed",
                "--admin-tls-cert",
                "c",
                "--admin-tls-key",
                "k",
            ],
            &["--admin-tls", "plain"],
            &["--admin-auth", "open"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
