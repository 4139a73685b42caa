//! Sharded mode: the plugins spread across the replicas of a group, each plugin run by exactly
//! one live member and moved without losing an event when members come and go.
//!
//! - Membership ([`member`]): each replica holds a Lease `GROUP-IDENTITY` labelled with the
//!   group, renewed on its own timer ([`renew`]); the live members are the genuine members'
//!   Leases ([`roster`]: with `--pod-uid`, backed by a Pod of the group) renewed within their
//!   duration. Leases and Pods are followed by list and watch ([`follow`]); a member that cannot
//!   follow them, or cannot renew, runs no plugin and says why.
//! - Assignment ([`rendezvous`]): a plugin (or a whole tenant, with `shard-by = "tenant"`) is
//!   owned by the live member whose hash with it weighs most, so a membership change moves only
//!   what must move.
//! - Handover ([`cursors`]): each member publishes in its Lease, every retry period, how far
//!   each of its plugins has got as a resourceVersion watermark; a new owner lists the resource
//!   as it was there and delivers the difference to its cache, then live events. It resumes
//!   from the member that last ran the plugin, else from the lowest watermark a genuine member
//!   publishes. A member that stops publishes its plugins' last watermarks and clears its
//!   holder, so the others take over at once; a crashed one's last published watermarks serve
//!   once its Lease expires.

mod collect;
pub mod cursors;
mod follow;
mod member;
pub mod rendezvous;
mod renew;
mod roster;

use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::Api;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::leader::LeaseConfig;
pub use cursors::CursorBook;
pub use follow::FollowError;

/// The label naming a membership Lease's group.
pub const GROUP_LABEL: &str = "informant.dev/shard-group";

/// What a plugin's owner is chosen by (`shard-by` in informant.toml).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShardBy {
    /// Each plugin on its own.
    #[default]
    Plugin,
    /// A tenant's plugins together, so they share informers.
    Tenant,
}

/// Errors of sharded mode.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The group, identity or timings cannot work; the message names the flag.
    #[error("sharding: {0}")]
    Config(String),
    /// Leaving the group failed; the Lease expires after its duration instead.
    #[error("sharding: leaving the group (lease {lease}): {source}")]
    Release {
        /// `namespace/name` of this member's Lease.
        lease: String,
        /// What the API server answered.
        #[source]
        source: kube::Error,
    },
    /// Leaving the group did not finish within the renew deadline.
    #[error("sharding: leaving the group (lease {lease}): timed out")]
    ReleaseTimeout {
        /// This member's Lease.
        lease: String,
    },
}

/// A shard group and this member's place in it.
#[derive(Debug, Clone)]
pub struct ShardConfig {
    /// The group's name (`--shard-group`): a label value.
    pub group: String,
    /// Namespace, identity and timings of the membership Leases (its `name` is unused).
    pub lease: LeaseConfig,
    /// Whether plugins or whole tenants are assigned.
    pub by: ShardBy,
    /// The uid of this member's Pod (`--pod-uid`, from the downward API's `metadata.uid`),
    /// whose name is the identity: membership is then tied to the group's Pods (see
    /// [`roster`]). `None` (out of a cluster): any Lease writer can join the group.
    pub pod_uid: Option<String>,
}

impl ShardConfig {
    /// This member's Lease name.
    pub fn lease_name(&self) -> String {
        format!("{}-{}", self.group, self.lease.identity)
    }

    /// Checks the names the API server will be given and the timings.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |m: String| Err(Error::Config(m));
        let label_ok = |s: &str| {
            !s.is_empty()
                && s.len() <= 63
                && s.starts_with(|c: char| c.is_ascii_alphanumeric())
                && s.ends_with(|c: char| c.is_ascii_alphanumeric())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        if !label_ok(&self.group) {
            return bad(format!(
                "--shard-group `{}` must be 1-63 letters, digits, `-`, `_` or `.`, starting and ending with a letter or digit",
                self.group
            ));
        }
        self.lease
            .validate()
            .map_err(|e| Error::Config(e.to_string()))?;
        if let Some(uid) = &self.pod_uid {
            let uid_ok = !uid.is_empty()
                && uid.len() <= 128
                && uid.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
            if !uid_ok {
                return bad(format!(
                    "--pod-uid `{uid}` must be the Pod's metadata.uid: 1-128 letters, digits or `-`"
                ));
            }
        }
        let name = self.lease_name();
        let dns_ok = name.len() <= 253
            && name.split('.').all(|part| {
                !part.is_empty()
                    && part.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && part.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            });
        if !dns_ok {
            return bad(format!(
                "the membership lease name `{name}` (--shard-group, a dash, --identity) must be a lowercase DNS subdomain"
            ));
        }
        Ok(())
    }
}

/// Who is in the group and whether this member may run plugins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// Live members' identities, sorted (this one included while active).
    pub members: Vec<String>,
    /// This member's identity.
    pub me: String,
    /// Whether this member's Lease is renewed: when not, it owns nothing.
    pub active: bool,
    /// What is assigned.
    pub by: ShardBy,
}

impl Assignment {
    /// The member owning the plugin `tenant`/`name` (`None` while no member is live).
    pub fn owner(&self, tenant: &str, name: &str) -> Option<&str> {
        let key = match self.by {
            ShardBy::Plugin => format!("{tenant}/{name}"),
            ShardBy::Tenant => format!("{tenant}/"),
        };
        rendezvous::owner(&key, self.members.iter().map(String::as_str))
    }

    /// Whether this member runs the plugin `tenant`/`name`.
    pub fn owns(&self, tenant: &str, name: &str) -> bool {
        self.active && self.owner(tenant, name) == Some(self.me.as_str())
    }
}

/// Counts of sharded mode, for `/metrics`.
#[derive(Debug, Default)]
pub struct ShardStats {
    /// Plugins taken over with a cursor (their changes since it delivered).
    pub handovers_with_cursor: std::sync::atomic::AtomicU64,
    /// Plugins taken over without one (none published, or it was compacted): a full replay.
    pub handovers_replayed: std::sync::atomic::AtomicU64,
    /// Total seconds from taking a plugin over to its handlers registered, in microseconds.
    pub handover_micros: std::sync::atomic::AtomicU64,
}

/// What the plugin host needs of sharded mode: the assignment to follow and the cursor book.
#[derive(Clone)]
pub struct Shard {
    /// The group's config.
    pub config: Arc<ShardConfig>,
    /// The current assignment.
    pub assignment: watch::Receiver<Assignment>,
    /// Cursors to publish and to resume from.
    pub book: Arc<CursorBook>,
    /// Handover counts.
    pub stats: Arc<ShardStats>,
    /// Why this member runs no plugin (`None` while it runs its share): one line, for
    /// `/readyz`.
    pub why: watch::Receiver<Option<String>>,
}

impl Shard {
    /// Whether this member runs the plugin `tenant`/`name` now.
    pub fn owns(&self, tenant: &str, name: &str) -> bool {
        self.assignment.borrow().owns(tenant, name)
    }
}

/// This replica's membership: tasks following the group, deciding, renewing its Lease and
/// collecting dead Leases.
pub(crate) struct Membership {
    shard: Shard,
    /// Stops the deciding task, then the renewer (which releases the Lease).
    stops: Option<(oneshot::Sender<()>, oneshot::Sender<()>)>,
    member: Option<JoinHandle<()>>,
    renewer: Option<JoinHandle<Result<(), Error>>>,
    /// Followers and the collector: aborted when the membership ends.
    helpers: Vec<JoinHandle<()>>,
}

impl Membership {
    /// Validates `config` and joins the group (on the current tokio runtime). Until it follows
    /// the group and has renewed its Lease, this member owns nothing.
    pub(crate) fn start(client: Client, config: ShardConfig) -> Result<Membership, Error> {
        config.validate()?;
        let (tx, rx) = watch::channel(Assignment {
            members: Vec::new(),
            me: config.lease.identity.clone(),
            active: false,
            by: config.by,
        });
        let (why_tx, why) = watch::channel(Some("joining the group".to_string()));
        let book = CursorBook::new();
        let ns = config.lease.namespace.clone();
        let selector = format!("{GROUP_LABEL}={}", config.group);
        let leases_api: Api<Lease> = Api::namespaced(client.clone(), &ns);
        let mut helpers = Vec::new();
        let (leases_tx, leases) = mpsc::channel(FOLLOW_CAPACITY);
        helpers.push(tokio::spawn(follow::follow(
            leases_api.clone(),
            selector.clone(),
            format!("leases labelled {selector} in namespace `{ns}`"),
            leases_tx,
        )));
        let pods = match &config.pod_uid {
            Some(uid) => {
                tracing::info!(group = %config.group, pod = %config.lease.identity, uid = %uid, "shard membership tied to the group's Pods: a Lease counts only as a running Pod's of the group");
                let (pods_tx, pods) = mpsc::channel(FOLLOW_CAPACITY);
                helpers.push(tokio::spawn(follow::follow(
                    Api::<Pod>::namespaced(client, &ns),
                    selector.clone(),
                    format!("pods labelled {selector} in namespace `{ns}`"),
                    pods_tx,
                )));
                Some(pods)
            }
            None => {
                tracing::warn!(group = %config.group, namespace = %ns, "sharding without --pod-uid: membership is not tied to Pods, so any identity that can write Leases in the namespace can join the group (take a share of the plugins, which then run nowhere) and publish cursors; in a pod, pass --pod-uid from the downward API");
                None
            }
        };
        let collect = match &config.pod_uid {
            Some(_) => None,
            None => {
                let (collect_tx, collect_rx) = watch::channel(Vec::new());
                helpers.push(tokio::spawn(collect::run(
                    leases_api.clone(),
                    collect_rx,
                    config.lease.retry_period,
                )));
                Some(collect_tx)
            }
        };
        let (renewal_tx, renewal) = watch::channel(renew::Renewal::default());
        let renewer = renew::Renewer {
            api: leases_api,
            config: config.clone(),
            book: book.clone(),
            tx: renewal_tx,
            written: Default::default(),
        };
        let member = member::Member::new(config.clone(), book.clone(), tx, why_tx, collect);
        let (stop_member, stop) = oneshot::channel();
        let (stop_renewer, stop_renewal) = oneshot::channel();
        tracing::info!(group = %config.group, lease = %config.lease_name(), namespace = %ns, "joining the shard group");
        let renewer = tokio::spawn(renewer.run(stop_renewal));
        let member = tokio::spawn(member.run(member::Inputs {
            leases: Some(leases),
            pods,
            renewal,
            stop,
        }));
        Ok(Membership {
            shard: Shard {
                config: Arc::new(config),
                assignment: rx,
                book,
                stats: Arc::default(),
                why,
            },
            stops: Some((stop_member, stop_renewer)),
            member: Some(member),
            renewer: Some(renewer),
            helpers,
        })
    }

    /// What the plugin host follows.
    pub(crate) fn shard(&self) -> Shard {
        self.shard.clone()
    }

    /// Leaves the group: call after this member's plugins stopped (and released their
    /// cursors), so their last watermarks are what the Lease keeps.
    pub(crate) async fn leave(mut self) -> Result<(), Error> {
        let Some((stop_member, stop_renewer)) = self.stops.take() else {
            return Ok(());
        };
        // Owning nothing first, then the Lease released.
        let _ = stop_member.send(());
        if let Some(member) = self.member.take()
            && let Err(e) = member.await
            && e.is_panic()
        {
            std::panic::resume_unwind(e.into_panic());
        }
        let _ = stop_renewer.send(());
        let result = match self.renewer.take() {
            Some(task) => match task.await {
                Ok(r) => r,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => Ok(()),
            },
            None => Ok(()),
        };
        for h in self.helpers.drain(..) {
            h.abort();
        }
        result
    }
}

/// Room for a burst of updates from one follower before it waits for the deciding task.
const FOLLOW_CAPACITY: usize = 1024;

impl Drop for Membership {
    fn drop(&mut self) {
        // Without `leave`, as a crash: the Lease stays held until it expires.
        if let Some(task) = self.member.take() {
            task.abort();
        }
        if let Some(task) = self.renewer.take() {
            task.abort();
        }
        for h in self.helpers.drain(..) {
            h.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn config(group: &str, identity: &str) -> ShardConfig {
        ShardConfig {
            group: group.into(),
            lease: LeaseConfig::new(group, "default", identity)
                .with_lease_duration(Duration::from_secs(6)),
            by: ShardBy::Plugin,
            pod_uid: None,
        }
    }

    #[test]
    fn group_and_identity_must_make_a_lease_name_and_a_label() {
        assert!(config("hooks", "informant-7d9f-abcde").validate().is_ok());
        assert_eq!(config("hooks", "pod-0").lease_name(), "hooks-pod-0");
        for (group, identity, want) in [
            ("", "a", "--shard-group"),
            ("hooks?", "a", "--shard-group"),
            ("hooks#x", "a", "--shard-group"),
            ("ho%2Fks", "a", "--shard-group"),
            ("hooks ", "a", "--shard-group"),
            ("-hooks", "a", "--shard-group"),
            (&"g".repeat(64), "a", "--shard-group"),
            ("hooks", "Pod-A", "lowercase DNS subdomain"),
            ("hooks", "a/../b", "lowercase DNS subdomain"),
            ("hooks", "a..b", "lowercase DNS subdomain"),
            ("hooks", "pod-а", "lowercase DNS subdomain"),
            ("hooks", "pod ", "lowercase DNS subdomain"),
            ("hooks", &"a".repeat(250), "lowercase DNS subdomain"),
            ("hooks", "", "identity is empty"),
        ] {
            let err = config(group, identity).validate().unwrap_err().to_string();
            assert!(err.contains(want), "{group:?} {identity:?}: {err}");
        }
        let with_uid = |uid: &str| ShardConfig {
            pod_uid: Some(uid.into()),
            ..config("hooks", "informant-0")
        };
        assert!(
            with_uid("0f8c2a1e-7d4b-4e0a-9a57-3f1c2b3d4e5f")
                .validate()
                .is_ok()
        );
        for uid in ["", "a b", "x\n", "../x", &"a".repeat(129)] {
            let err = with_uid(uid).validate().unwrap_err().to_string();
            assert!(err.contains("--pod-uid"), "{uid:?}: {err}");
        }
    }

    #[test]
    fn by_tenant_keeps_a_tenants_plugins_on_one_member() {
        let members: Vec<String> = (0..5).map(|i| format!("replica-{i}")).collect();
        let by = |by| Assignment {
            members: members.clone(),
            me: "replica-0".into(),
            active: true,
            by,
        };
        let tenant = by(ShardBy::Tenant);
        for t in ["team-a", "team-b", "team-c"] {
            let owners: std::collections::BTreeSet<_> = (0..20)
                .map(|i| tenant.owner(t, &format!("p{i}")).unwrap().to_string())
                .collect();
            assert_eq!(owners.len(), 1, "{t}: {owners:?}");
        }
        let plugin = by(ShardBy::Plugin);
        let owners: std::collections::BTreeSet<_> = (0..20)
            .map(|i| {
                plugin
                    .owner("team-a", &format!("p{i}"))
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert!(owners.len() > 1, "{owners:?}");
        // Inactive, a member owns nothing, even what hashes to it.
        let mut off = by(ShardBy::Plugin);
        off.active = false;
        assert!((0..20).all(|i| !off.owns("team-a", &format!("p{i}"))));
    }
}
