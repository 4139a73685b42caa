//! Who counts in the group: which of the Leases labelled with it are genuine members' Leases.
//!
//! Anyone allowed to write Leases in the namespace can write one labelled with the group, so a
//! label alone proves nothing. With `--pod-uid` (fed by the downward API's `metadata.uid`), a
//! Lease counts only as the Lease of a Pod of the group:
//!
//! - it carries exactly one ownerReference to a `v1` Pod, naming it and its uid (each member
//!   writes it on its own Lease, which also lets Kubernetes collect the Lease with its Pod);
//! - it is named `GROUP-POD` after that Pod, so one Pod backs one Lease;
//! - a Pod of that name and uid exists in the Lease namespace, carries the group's label and
//!   has not finished (phase `Succeeded` or `Failed`).
//!
//! Forging a member then takes Pod create rights in the namespace, not Lease writes. A Pod
//! being deleted (terminating) still counts while its member renews: it leaves by itself on
//! SIGTERM, handing its plugins over with its final cursors; dropping it at once would start
//! its plugins elsewhere while it still runs them.
//!
//! Without `--pod-uid` (out of a cluster), every Lease with a holder is a member, as anyone
//! with Lease write access can make one; the host says so at startup.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;

use super::cursors::{self, Entry};

/// What this member keeps of one Lease of the group.
#[derive(Debug, Clone)]
pub(super) struct LeaseRecord {
    /// Its resourceVersion.
    pub(super) rv: String,
    /// The same as a number, if it is one.
    pub(super) version: Option<u64>,
    /// `spec.holderIdentity`, when not empty.
    pub(super) holder: Option<String>,
    /// `spec.leaseDurationSeconds`.
    pub(super) duration: Option<i32>,
    /// Its one Pod ownerReference (name, uid); `None` with none, several, or other owners.
    pub(super) owner: Option<(String, String)>,
    /// Its cursors annotation, parsed once per change.
    pub(super) cursors: BTreeMap<String, Entry>,
}

impl LeaseRecord {
    /// Reads what counts of `lease`.
    pub(super) fn of(lease: &Lease) -> Self {
        let rv = lease.metadata.resource_version.clone().unwrap_or_default();
        let spec = lease.spec.as_ref();
        let refs = lease
            .metadata
            .owner_references
            .as_deref()
            .unwrap_or_default();
        let owner = match refs {
            [r] if r.api_version == "v1" && r.kind == "Pod" => {
                Some((r.name.clone(), r.uid.clone()))
            }
            _ => None,
        };
        LeaseRecord {
            version: rv.parse().ok(),
            rv,
            holder: spec
                .and_then(|s| s.holder_identity.clone())
                .filter(|h| !h.is_empty()),
            duration: spec.and_then(|s| s.lease_duration_seconds),
            owner,
            cursors: lease
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(cursors::ANNOTATION))
                .and_then(|t| cursors::parse(t))
                .unwrap_or_default(),
        }
    }
}

/// What this member keeps of one Pod of the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PodRecord {
    /// `metadata.uid`.
    pub(super) uid: String,
    /// Whether it carries the group's label (the watch selects by it; checked again).
    pub(super) labelled: bool,
    /// Its phase, when `Succeeded` or `Failed`: its containers will not run again.
    pub(super) finished: Option<String>,
}

impl PodRecord {
    /// Reads what counts of `pod`, a Pod in `group`'s label selection.
    pub(super) fn of(pod: &Pod, group: &str) -> Self {
        let phase = pod.status.as_ref().and_then(|s| s.phase.clone());
        PodRecord {
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            labelled: pod
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(super::GROUP_LABEL))
                .is_some_and(|g| g == group),
            finished: phase.filter(|p| p == "Succeeded" || p == "Failed"),
        }
    }
}

/// The rules of one group.
pub(super) struct Roster<'a> {
    /// The group's name.
    pub(super) group: &'a str,
    /// The group's Pods by name, when membership is tied to Pods (`--pod-uid`).
    pub(super) pods: Option<&'a HashMap<String, PodRecord>>,
}

impl Roster<'_> {
    /// The identity of the member whose Lease `name` is, or `None` for a Lease that takes no
    /// share and steers nothing.
    pub(super) fn member(&self, name: &str, lease: &LeaseRecord) -> Option<String> {
        let Some(pods) = self.pods else {
            // Untied: its holder, or once released, the identity its name carries.
            return lease.holder.clone().or_else(|| {
                Some(
                    name.strip_prefix(self.group)
                        .and_then(|s| s.strip_prefix('-'))
                        .unwrap_or(name)
                        .to_string(),
                )
            });
        };
        let (pod, uid) = lease.owner.as_ref()?;
        if name.strip_prefix(self.group)?.strip_prefix('-')? != pod {
            return None;
        }
        let p = pods.get(pod)?;
        (p.uid == *uid && !uid.is_empty() && p.labelled && p.finished.is_none())
            .then(|| pod.clone())
    }

    /// Whether `lease`, judged a member's, is held by that member (not released, not taken
    /// by another holder).
    pub(super) fn held_by(&self, member: &str, lease: &LeaseRecord) -> bool {
        lease.holder.as_deref() == Some(member)
    }

    /// Why this member itself would not count, with `--pod-uid`: `None` when its Pod is found
    /// as the others will look for it.
    pub(super) fn own_pod(&self, identity: &str, uid: &str, namespace: &str) -> Option<String> {
        let pods = self.pods?;
        let label = format!("{}={}", super::GROUP_LABEL, self.group);
        match pods.get(identity) {
            None => Some(format!(
                "no Pod `{identity}` labelled {label} in namespace `{namespace}`: the other members would not count this one (--identity must be the Pod's name, and the Pod must carry the label)"
            )),
            Some(p) if p.uid != uid => Some(format!(
                "Pod `{identity}` has uid {}, not --pod-uid {uid}: it is another Pod of the same name",
                p.uid
            )),
            Some(p) if !p.labelled => Some(format!("Pod `{identity}` lacks the label {label}")),
            Some(PodRecord {
                finished: Some(phase),
                ..
            }) => Some(format!("Pod `{identity}` has finished (phase {phase})")),
            Some(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(value: serde_json::Value) -> LeaseRecord {
        LeaseRecord::of(&serde_json::from_value(value).unwrap())
    }

    fn pod_lease(name: &str, holder: &str, owners: serde_json::Value) -> LeaseRecord {
        lease(serde_json::json!({
            "metadata": {"name": name, "resourceVersion": "42", "ownerReferences": owners},
            "spec": {"holderIdentity": holder},
        }))
    }

    fn owner(name: &str, uid: &str) -> serde_json::Value {
        serde_json::json!({"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid})
    }

    fn pods() -> HashMap<String, PodRecord> {
        let pod = |uid: &str, labelled, finished: Option<&str>| PodRecord {
            uid: uid.into(),
            labelled,
            finished: finished.map(String::from),
        };
        HashMap::from([
            ("a".to_string(), pod("uid-a", true, None)),
            ("b".to_string(), pod("uid-b", true, None)),
            ("done".to_string(), pod("uid-done", true, Some("Failed"))),
            ("bare".to_string(), pod("uid-bare", false, None)),
        ])
    }

    #[test]
    fn with_pods_only_the_lease_of_a_running_pod_of_the_group_is_a_members() {
        let pods = pods();
        let roster = Roster {
            group: "hooks",
            pods: Some(&pods),
        };
        let member = |name: &str, l: &LeaseRecord| roster.member(name, l);
        let a = pod_lease("hooks-a", "a", serde_json::json!([owner("a", "uid-a")]));
        assert_eq!(member("hooks-a", &a).as_deref(), Some("a"));
        assert!(roster.held_by("a", &a));
        // Released: still a's, with its cursors, not held.
        let released = pod_lease("hooks-a", "", serde_json::json!([owner("a", "uid-a")]));
        assert_eq!(member("hooks-a", &released).as_deref(), Some("a"));
        assert!(!roster.held_by("a", &released));
        // A holder that is not the Pod: a's Lease, but not held by a.
        let taken = pod_lease(
            "hooks-a",
            "mallory",
            serde_json::json!([owner("a", "uid-a")]),
        );
        assert!(!roster.held_by("a", &taken));
        for (why, name, l) in [
            (
                "no owner",
                "hooks-m",
                lease(
                    serde_json::json!({"metadata": {"name": "hooks-m"}, "spec": {"holderIdentity": "m"}}),
                ),
            ),
            (
                "no such pod",
                "hooks-ghost",
                pod_lease(
                    "hooks-ghost",
                    "ghost",
                    serde_json::json!([owner("ghost", "uid-ghost")]),
                ),
            ),
            (
                "another's uid",
                "hooks-a",
                pod_lease("hooks-a", "a", serde_json::json!([owner("a", "uid-b")])),
            ),
            (
                "empty uid",
                "hooks-a",
                pod_lease("hooks-a", "a", serde_json::json!([owner("a", "")])),
            ),
            (
                "a name not after its pod",
                "hooks-mallory",
                pod_lease(
                    "hooks-mallory",
                    "a",
                    serde_json::json!([owner("a", "uid-a")]),
                ),
            ),
            (
                "a second lease for b",
                "hooks-b2",
                pod_lease("hooks-b2", "b", serde_json::json!([owner("b", "uid-b")])),
            ),
            (
                "another group's prefix",
                "other-a",
                pod_lease("other-a", "a", serde_json::json!([owner("a", "uid-a")])),
            ),
            (
                "a finished pod",
                "hooks-done",
                pod_lease(
                    "hooks-done",
                    "done",
                    serde_json::json!([owner("done", "uid-done")]),
                ),
            ),
            (
                "a pod without the label",
                "hooks-bare",
                pod_lease(
                    "hooks-bare",
                    "bare",
                    serde_json::json!([owner("bare", "uid-bare")]),
                ),
            ),
            (
                "two owners",
                "hooks-a",
                pod_lease(
                    "hooks-a",
                    "a",
                    serde_json::json!([owner("a", "uid-a"), owner("b", "uid-b")]),
                ),
            ),
            (
                "not a pod",
                "hooks-a",
                pod_lease(
                    "hooks-a",
                    "a",
                    serde_json::json!([{"apiVersion": "apps/v1", "kind": "Pod", "name": "a", "uid": "uid-a"}]),
                ),
            ),
        ] {
            assert_eq!(member(name, &l), None, "{why}");
        }
    }

    #[test]
    fn without_pods_every_lease_is_a_member_as_its_holder_says() {
        let roster = Roster {
            group: "hooks",
            pods: None,
        };
        let held = lease(
            serde_json::json!({"metadata": {"name": "hooks-x"}, "spec": {"holderIdentity": "y"}}),
        );
        assert_eq!(roster.member("hooks-x", &held).as_deref(), Some("y"));
        let released = lease(serde_json::json!({"metadata": {"name": "hooks-x"}, "spec": {}}));
        assert_eq!(roster.member("hooks-x", &released).as_deref(), Some("x"));
    }

    #[test]
    fn this_member_says_why_its_own_pod_would_not_count() {
        let pods = pods();
        let roster = Roster {
            group: "hooks",
            pods: Some(&pods),
        };
        assert_eq!(roster.own_pod("a", "uid-a", "ns"), None);
        for (id, uid, want) in [
            ("nope", "u", "no Pod `nope`"),
            ("a", "uid-x", "another Pod of the same name"),
            ("bare", "uid-bare", "lacks the label"),
            ("done", "uid-done", "phase Failed"),
        ] {
            let why = roster.own_pod(id, uid, "ns").unwrap();
            assert!(why.contains(want), "{why}");
        }
        let untied = Roster {
            group: "hooks",
            pods: None,
        };
        assert_eq!(untied.own_pod("nope", "u", "ns"), None);
    }
}
