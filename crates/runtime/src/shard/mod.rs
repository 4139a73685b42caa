//! Sharded mode: the plugins spread across the replicas of a group, each plugin run by exactly
//! one live member and moved without losing an event when members come and go.
//!
//! - Membership ([`member`]): each replica holds a Lease `GROUP-IDENTITY` labelled with the
//!   group; the live members are the Leases renewed within their duration.
//! - Assignment ([`rendezvous`]): a plugin (or a whole tenant, with `shard-by = "tenant"`) is
//!   owned by the live member whose hash with it weighs most, so a membership change moves only
//!   what must move.
//! - Handover ([`cursors`]): each member publishes in its Lease, every retry period, how far
//!   each of its plugins has got as a resourceVersion watermark; a new owner lists the resource
//!   as it was there and delivers the difference to its cache, then live events. A member that
//!   stops publishes its plugins' last watermarks and clears its holder, so the others take over
//!   at once; a crashed one's last published watermarks serve once its Lease expires.

pub mod cursors;
mod member;
pub mod rendezvous;

use std::collections::HashMap;
use std::sync::Arc;

use kube::Client;
use kube::api::Api;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::leader::LeaseConfig;
pub use cursors::CursorBook;

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
}

impl Shard {
    /// Whether this member runs the plugin `tenant`/`name` now.
    pub fn owns(&self, tenant: &str, name: &str) -> bool {
        self.assignment.borrow().owns(tenant, name)
    }
}

/// This replica's membership: a task renewing its Lease and following the group's.
pub struct Membership {
    shard: Shard,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), Error>>>,
}

impl Membership {
    /// Validates `config` and joins the group (on the current tokio runtime). Until the first
    /// round has renewed this member's Lease it owns nothing.
    pub fn start(client: Client, config: ShardConfig) -> Result<Membership, Error> {
        config.validate()?;
        let (tx, rx) = watch::channel(Assignment {
            members: Vec::new(),
            me: config.lease.identity.clone(),
            active: false,
            by: config.by,
        });
        let book = CursorBook::new();
        let member = member::Member {
            api: Api::namespaced(client, &config.lease.namespace),
            config: config.clone(),
            book: book.clone(),
            assignment: tx,
            observed: HashMap::new(),
        };
        let (stop, stop_rx) = oneshot::channel();
        tracing::info!(group = %config.group, lease = %config.lease_name(), namespace = %config.lease.namespace, "joining the shard group");
        let task = tokio::spawn(member.run(stop_rx));
        Ok(Membership {
            shard: Shard {
                config: Arc::new(config),
                assignment: rx,
                book,
                stats: Arc::default(),
            },
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// What the plugin host follows.
    pub fn shard(&self) -> Shard {
        self.shard.clone()
    }

    /// Leaves the group: call after this member's plugins stopped (and released their
    /// cursors), so their last watermarks are what the Lease keeps.
    pub async fn leave(mut self) -> Result<(), Error> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => match task.await {
                Ok(r) => r,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => Ok(()),
            },
            None => Ok(()),
        }
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        // Without `leave`, as a crash: the Lease stays held until it expires.
        if let Some(task) = self.task.take() {
            task.abort();
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
