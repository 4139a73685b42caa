//! One Lease holder for leader election ([`crate::leader`]) and shard membership
//! ([`crate::shard`]): the record a holder writes, its conditional writes and its release, as
//! client-go's `resourcelock` keeps them. Each caller keeps only its policy: when to write,
//! whether another holder's record is to be respected, what else its Lease carries.
//!
//! - A holder's record: `holderIdentity`, `leaseDurationSeconds`, `renewTime` now;
//!   `acquireTime` and `leaseTransitions` kept while renewing, and on a change of holder (a
//!   release in between included) `acquireTime` now and one more transition. A new Lease
//!   starts at 0 transitions.
//! - Every write carries the resourceVersion just read: of two writers racing, one gets 409.
//! - A release writes client-go's release record: no holder, a duration of 1 s, `renewTime` now.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

/// One identity's hold on one Lease.
#[derive(Clone)]
pub(crate) struct Holder {
    /// The Leases of the Lease's namespace.
    pub(crate) api: Api<Lease>,
    /// The Lease's namespace (`api`'s).
    pub(crate) namespace: String,
    /// The Lease's name.
    pub(crate) name: String,
    /// Who holds it: `holderIdentity`.
    pub(crate) identity: String,
    /// How long a record holds without renewal: `leaseDurationSeconds`.
    pub(crate) lease_duration: Duration,
}

impl Holder {
    /// The record this holder writes over `old` (none: a new Lease) at `now`.
    pub(crate) fn spec(&self, old: Option<&LeaseSpec>, now: Timestamp) -> LeaseSpec {
        record(&self.identity, self.lease_duration, old, now)
    }

    /// Writes this holder's record: creates the Lease when `found` is none, else replaces what
    /// was read, conditional on its resourceVersion (a write since makes this fail with 409).
    /// `dress` adds what the caller's Lease carries besides the record.
    pub(crate) async fn write(
        &self,
        found: Option<Lease>,
        dress: impl FnOnce(&mut ObjectMeta),
    ) -> Result<Lease, kube::Error> {
        let now = Timestamp::now();
        match found {
            None => {
                let mut metadata = ObjectMeta {
                    name: Some(self.name.clone()),
                    namespace: Some(self.namespace.clone()),
                    ..Default::default()
                };
                dress(&mut metadata);
                let lease = Lease {
                    metadata,
                    spec: Some(self.spec(None, now)),
                };
                self.api.create(&PostParams::default(), &lease).await
            }
            Some(mut lease) => {
                let old = lease.spec.take();
                lease.spec = Some(self.spec(old.as_ref(), now));
                dress(&mut lease.metadata);
                self.api
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await
            }
        }
    }

    /// Writes the release record over the Lease as it is now, conditional on its
    /// resourceVersion; with `only_own`, only if this holder holds it. Whether it wrote.
    pub(crate) async fn release(
        &self,
        only_own: bool,
        dress: impl FnOnce(&mut ObjectMeta),
    ) -> Result<bool, kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            return Ok(false);
        };
        let held = lease
            .spec
            .as_ref()
            .is_some_and(|s| s.holder_identity.as_deref() == Some(self.identity.as_str()));
        if only_own && !held {
            return Ok(false);
        }
        let spec = lease.spec.get_or_insert_default();
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        dress(&mut lease.metadata);
        self.api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
            .map(|_| true)
    }
}

/// The record `identity` writes over `old` (none: a new Lease) at `now`.
fn record(
    identity: &str,
    lease_duration: Duration,
    old: Option<&LeaseSpec>,
    now: Timestamp,
) -> LeaseSpec {
    let renewing = old.is_some_and(|o| o.holder_identity.as_deref() == Some(identity));
    let transitions = match old {
        None => 0,
        Some(o) if renewing => o.lease_transitions.unwrap_or(0),
        Some(o) => o.lease_transitions.unwrap_or(0) + 1,
    };
    let old = old.cloned().unwrap_or_default();
    LeaseSpec {
        holder_identity: Some(identity.to_string()),
        lease_duration_seconds: Some(lease_duration.as_secs() as i32),
        acquire_time: if renewing {
            old.acquire_time.clone()
        } else {
            Some(MicroTime(now))
        },
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(transitions),
        ..old
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DURATION: Duration = Duration::from_secs(15);

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    #[test]
    fn a_new_lease_starts_at_zero_transitions_and_each_change_of_holder_counts() {
        let created = record("a", DURATION, None, at(10));
        assert_eq!(created.lease_transitions, Some(0));
        assert_eq!(created.acquire_time, Some(MicroTime(at(10))));
        assert_eq!(created.lease_duration_seconds, Some(15));

        // Renewing keeps acquireTime and the count.
        let renewed = record("a", DURATION, Some(&created), at(20));
        assert_eq!(renewed.lease_transitions, Some(0));
        assert_eq!(renewed.acquire_time, Some(MicroTime(at(10))));
        assert_eq!(renewed.renew_time, Some(MicroTime(at(20))));

        // Another holder takes it: acquired now, one transition.
        let taken = record("b", DURATION, Some(&renewed), at(30));
        assert_eq!(taken.holder_identity.as_deref(), Some("b"));
        assert_eq!(taken.lease_transitions, Some(1));
        assert_eq!(taken.acquire_time, Some(MicroTime(at(30))));

        // A release in between counts too: the next holder, even the same one, is a change.
        let released = LeaseSpec {
            holder_identity: None,
            ..taken
        };
        let again = record("b", DURATION, Some(&released), at(40));
        assert_eq!(again.lease_transitions, Some(2));
        assert_eq!(again.acquire_time, Some(MicroTime(at(40))));
    }
}
