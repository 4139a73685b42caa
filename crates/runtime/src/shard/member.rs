//! The membership task: follows the group's Leases (and, with `--pod-uid`, its Pods), hears
//! this member's renewals, and decides who is live, what this member owns, and whether it may
//! run anything at all.
//!
//! It fails closed. This member runs plugins only while all of these hold, and otherwise runs
//! none and says why ([`Shard::why`](super::Shard::why), `/readyz`, one log line per change):
//!
//! - the Lease view is current ([`super::follow`]: listed, a watch open, no error since), and so
//!   is the Pod view with `--pod-uid`;
//! - with `--pod-uid`, its own Pod is in that view as the others will look for it;
//! - its last successful renewal started less than the renew deadline ago;
//! - the Lease view shows a renewal this member started less than the renew deadline ago (a
//!   watch that stalled without an error shows none);
//! - it has been in the group a retry period (replicas of a rollout see each other first).
//!
//! Expiry follows the leader election's rule (see [`crate::leader`]): a Lease is dead once its
//! record has not changed for its `leaseDurationSeconds` (never more than this member's own),
//! measured on this member's monotonic clock from when it first saw that record, so clock skew
//! between nodes never matters. This member stops its plugins at the renew deadline, measured
//! from before its last successful renewal; the others may count it expired only a lease
//! duration after they saw that renewal's write.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::cursors::{CursorBook, Seen};
use super::follow::Update;
use super::renew::Renewal;
use super::roster::{LeaseRecord, PodRecord, Roster};
use super::{Assignment, ShardConfig};

/// Updates taken from one follower before deciding again: a flood of Lease events is decided
/// on in batches, not one by one.
const BATCH: usize = 1024;

/// How many of this member's recent renewals are remembered, to recognise them in the view.
const RENEWALS_KEPT: usize = 16;

/// Whether a view can be acted on.
#[derive(Debug, Clone)]
enum ViewState {
    /// Never listed yet.
    Waiting,
    /// Listed; the watch not open yet.
    Listed,
    /// Listed and watching: every change arrives.
    Current,
    /// It may miss changes: why.
    Unsure(String),
}

/// One followed kind: its objects by name and whether the view is current.
struct View<T> {
    items: HashMap<String, T>,
    state: ViewState,
}

impl<T> View<T> {
    fn new() -> Self {
        View {
            items: HashMap::new(),
            state: ViewState::Waiting,
        }
    }

    /// Applies `update`, keeping `convert` of each object.
    fn apply<K: kube::Resource>(&mut self, update: Update<K>, convert: impl Fn(&K) -> T) {
        match update {
            Update::Listed(items) => {
                self.items = items.iter().map(|o| (o.name_any(), convert(o))).collect();
                // A new list follows an error: current again only once its watch opens.
                self.state = ViewState::Listed;
            }
            Update::Applied(o) => {
                self.items.insert(o.name_any(), convert(&o));
            }
            Update::Deleted(o) => {
                self.items.remove(&o.name_any());
            }
            Update::Current => self.state = ViewState::Current,
            Update::Unsure(e) => self.state = ViewState::Unsure(e.to_string()),
        }
    }

    /// Why it cannot be acted on, if it cannot.
    fn doubt(&self) -> Option<Option<String>> {
        match &self.state {
            ViewState::Current => None,
            ViewState::Waiting | ViewState::Listed => Some(None),
            ViewState::Unsure(e) => Some(Some(e.clone())),
        }
    }
}

/// Why this member runs no plugin. Logged when the kind changes, shown with its detail.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Cause {
    /// Reading the group, renewing for the first time, or letting the others' Leases appear.
    Joining,
    /// The Lease view may be missing changes.
    Leases(String),
    /// The Pod view may be missing changes.
    Pods(String),
    /// This member's Pod is not what the others look for.
    OwnPod(String),
    /// No renewal succeeded within the renew deadline.
    NotRenewed(Option<String>),
    /// The Lease view has not shown a recent renewal of this member's.
    Behind,
    /// Leaving the group.
    Leaving,
}

impl Cause {
    fn describe(&self, config: &ShardConfig) -> String {
        let deadline = config.lease.renew_deadline;
        match self {
            Cause::Joining => {
                "joining the group: reading its Leases and renewing this member's".into()
            }
            Cause::Leases(e) => format!("cannot follow the group's Leases: {e}"),
            Cause::Pods(e) => format!("cannot follow the group's Pods: {e}"),
            Cause::OwnPod(e) => e.clone(),
            Cause::NotRenewed(e) => format!(
                "could not renew its Lease within the renew deadline ({deadline:?}){}",
                e.as_ref().map(|e| format!(": {e}")).unwrap_or_default()
            ),
            Cause::Behind => format!(
                "its view of the group's Leases has not shown its own renewal for the renew deadline ({deadline:?}): the watch may have stalled"
            ),
            Cause::Leaving => "leaving the group".into(),
        }
    }

    fn same_kind(&self, other: &Cause) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }
}

/// The membership task's state.
pub(super) struct Member {
    pub(super) config: ShardConfig,
    pub(super) book: Arc<CursorBook>,
    pub(super) assignment: watch::Sender<Assignment>,
    pub(super) why: watch::Sender<Option<String>>,
    /// Dead Leases to delete (without `--pod-uid` only).
    pub(super) collect: Option<watch::Sender<Vec<(String, String)>>>,
    leases: View<LeaseRecord>,
    pods: Option<View<PodRecord>>,
    /// Per Lease name: its last record (resourceVersion) and when this member first saw it.
    observed: HashMap<String, (String, Instant)>,
    /// This member's recent renewals: the resourceVersion written and when each started.
    renewals: VecDeque<(String, Instant)>,
    renewal: Renewal,
    /// When the renewal the view last showed of this member's started.
    shown_at: Option<Instant>,
    /// When the Lease view last became current: a watch just opened has not stalled, and the
    /// renewals it catches up on may still be on their way.
    current_since: Option<Instant>,
    settle_until: Instant,
    /// Why this member runs nothing (`None`: it runs its share).
    cause: Option<Cause>,
}

/// The channels the membership task reads.
pub(super) struct Inputs {
    pub(super) leases: Option<mpsc::Receiver<Update<Lease>>>,
    pub(super) pods: Option<mpsc::Receiver<Update<Pod>>>,
    pub(super) renewal: watch::Receiver<Renewal>,
    pub(super) stop: oneshot::Receiver<()>,
}

impl Member {
    pub(super) fn new(
        config: ShardConfig,
        book: Arc<CursorBook>,
        assignment: watch::Sender<Assignment>,
        why: watch::Sender<Option<String>>,
        collect: Option<watch::Sender<Vec<(String, String)>>>,
    ) -> Member {
        // Replicas of a rollout start together: one that took its first view for the whole
        // group would start every plugin only to hand most of them over a moment later. Until
        // a retry period has passed, the others' Leases have had time to appear.
        let settle_until = Instant::now() + config.lease.retry_period;
        let pods = config.pod_uid.is_some().then(View::new);
        Member {
            config,
            book,
            assignment,
            why,
            collect,
            leases: View::new(),
            pods,
            observed: HashMap::new(),
            renewals: VecDeque::new(),
            renewal: Renewal::default(),
            shown_at: None,
            current_since: None,
            settle_until,
            cause: Some(Cause::Joining),
        }
    }

    pub(super) async fn run(mut self, mut inputs: Inputs) {
        loop {
            let wake = self.decide();
            tokio::select! {
                _ = &mut inputs.stop => {
                    self.stand(Some(Cause::Leaving), Vec::new());
                    return;
                }
                _ = tokio::time::sleep_until(wake) => {}
                u = recv(&mut inputs.leases) => {
                    self.lease_update(u);
                    for u in drain(&mut inputs.leases) {
                        self.lease_update(u);
                    }
                }
                u = recv(&mut inputs.pods) => {
                    self.pod_update(u);
                    for u in drain(&mut inputs.pods) {
                        self.pod_update(u);
                    }
                }
                Ok(()) = inputs.renewal.changed() => {
                    let r = inputs.renewal.borrow_and_update().clone();
                    if let (Some(rv), Some(at)) = (&r.rv, r.at)
                        && self.renewals.back().is_none_or(|(last, _)| last != rv)
                    {
                        self.renewals.push_back((rv.clone(), at));
                        if self.renewals.len() > RENEWALS_KEPT {
                            self.renewals.pop_front();
                        }
                    }
                    self.renewal = r;
                    self.recognise_own();
                }
            }
        }
    }

    fn lease_update(&mut self, u: Update<Lease>) {
        if matches!(u, Update::Current) && !matches!(self.leases.state, ViewState::Current) {
            self.current_since = Some(Instant::now());
        }
        self.leases.apply(u, LeaseRecord::of);
        // Whatever the update was (its own Lease, or a fresh list carrying it).
        self.recognise_own();
    }

    fn pod_update(&mut self, u: Update<Pod>) {
        let group = self.config.group.clone();
        if let Some(pods) = self.pods.as_mut() {
            pods.apply(u, |p| PodRecord::of(p, &group));
        }
    }

    /// Notes when the renewal the view shows of this member's Lease started, if it is one of
    /// this member's own (a write by anyone else is not a renewal).
    fn recognise_own(&mut self) {
        let Some(rec) = self.leases.items.get(&self.config.lease_name()) else {
            return;
        };
        if let Some((_, at)) = self.renewals.iter().find(|(rv, _)| *rv == rec.rv) {
            self.shown_at = Some(self.shown_at.map_or(*at, |s| s.max(*at)));
        }
    }

    /// Decides who is live, what this member owns and whether it may run anything; returns
    /// when to decide again if nothing arrives before.
    fn decide(&mut self) -> Instant {
        let now = Instant::now();
        let cfg = self.config.lease.clone();
        let own = self.config.lease_name();
        let roster = Roster {
            group: &self.config.group,
            pods: self.pods.as_ref().map(|p| &p.items),
        };
        let mut wake = now + cfg.retry_period;
        let mut members = Vec::new();
        let mut seen = Vec::new();
        let mut dead = Vec::new();
        for (name, rec) in &self.leases.items {
            let first = match self.observed.get(name) {
                Some((rv, at)) if *rv == rec.rv => *at,
                _ => {
                    self.observed.insert(name.clone(), (rec.rv.clone(), now));
                    now
                }
            };
            if *name == own {
                continue;
            }
            // A Lease that is no member's takes no share and steers nothing.
            let Some(member) = roster.member(name, rec) else {
                continue;
            };
            let expiry = first + valid_for(rec, cfg.lease_duration);
            let live = roster.held_by(&member, rec) && now < expiry;
            if live {
                members.push(member.clone());
                wake = wake.min(expiry);
            } else {
                dead.push((name.clone(), rec.rv.clone(), rec.cursors.clone()));
            }
            seen.push(Seen {
                member,
                live,
                version: rec.version,
                plugins: rec.cursors.clone(),
            });
        }
        let leases = &self.leases.items;
        self.observed.retain(|n, _| leases.contains_key(n));
        self.book.observe(seen);
        let renewed = self.renewal.at.filter(|at| now < *at + cfg.renew_deadline);
        let shown = self
            .shown_at
            .max(self.current_since.filter(|_| self.shown_at.is_some()))
            .filter(|at| now < *at + cfg.renew_deadline);
        for deadline in [renewed, shown].into_iter().flatten() {
            wake = wake.min(deadline + cfg.renew_deadline);
        }
        let cause = if let Some(why) = self.leases.doubt() {
            Some(why.map_or(Cause::Joining, Cause::Leases))
        } else if let Some(why) = self.pods.as_ref().and_then(View::doubt) {
            Some(why.map_or(Cause::Joining, Cause::Pods))
        } else if let Some(why) = roster.own_pod(
            &cfg.identity,
            self.config.pod_uid.as_deref().unwrap_or_default(),
            &cfg.namespace,
        ) {
            Some(Cause::OwnPod(why))
        } else if renewed.is_none() {
            match (&self.renewal.at, &self.renewal.error) {
                (None, None) => Some(Cause::Joining),
                (_, e) => Some(Cause::NotRenewed(e.clone())),
            }
        } else if shown.is_none() {
            // Never shown yet: its first renewal is on its way into the view.
            Some(match self.shown_at {
                None => Cause::Joining,
                Some(_) => Cause::Behind,
            })
        } else if now < self.settle_until {
            wake = wake.min(self.settle_until);
            Some(Cause::Joining)
        } else {
            None
        };
        let active = cause.is_none();
        if active {
            members.push(cfg.identity.clone());
        }
        members.sort();
        members.dedup();
        if let (true, Some(collect)) = (active, &self.collect) {
            let superseded: Vec<(String, String)> = dead
                .into_iter()
                .filter(|(_, _, cursors)| self.book.supersedes(cursors))
                .map(|(name, rv, _)| (name, rv))
                .collect();
            collect.send_if_modified(|v| {
                let changed = *v != superseded;
                *v = superseded;
                changed
            });
        }
        self.stand(cause, members);
        wake
    }

    /// Publishes the assignment and why this member runs nothing; logs once per change of
    /// standing.
    fn stand(&mut self, cause: Option<Cause>, members: Vec<String>) {
        let group = &self.config.group;
        match (&self.cause, &cause) {
            (Some(old), Some(new)) if old.same_kind(new) => {}
            (_, Some(Cause::Joining)) => {}
            (_, Some(Cause::Leaving)) => {
                tracing::info!(group = %group, "leaving the shard group: running no plugin")
            }
            (_, Some(new)) => {
                tracing::error!(group = %group, reason = %new.describe(&self.config), "this shard member runs no plugin until this is resolved")
            }
            (Some(Cause::Joining), None) => {
                tracing::info!(group = %group, "joined the shard group: running this member's share of the plugins")
            }
            (Some(_), None) => {
                tracing::info!(group = %group, "this shard member follows its group again: running its share of the plugins")
            }
            (None, None) => {}
        }
        let why = cause.as_ref().map(|c| c.describe(&self.config));
        self.why.send_if_modified(|w| {
            let changed = *w != why;
            *w = why;
            changed
        });
        self.cause = cause;
        let next = Assignment {
            members,
            me: self.config.lease.identity.clone(),
            active: self.cause.is_none(),
            by: self.config.by,
        };
        self.assignment.send_if_modified(|a| {
            let changed = *a != next;
            if changed {
                tracing::info!(group = %group, members = ?next.members, active = next.active, "shard membership changed");
                *a = next;
            }
            changed
        });
    }
}

/// However the deciding task ends (a panic included), its last decision does not outlive it:
/// this member runs nothing once nothing follows the group for it.
impl Drop for Member {
    fn drop(&mut self) {
        self.assignment
            .send_if_modified(|a| std::mem::replace(&mut a.active, false));
        self.why.send_if_modified(|w| {
            let unset = w.is_none();
            if unset {
                *w = Some(format!(
                    "shard group `{}`: the membership task has stopped",
                    self.config.group
                ));
            }
            unset
        });
    }
}

/// How long `lease` stays valid after a change: as it says, but never longer than this
/// member's own lease duration (the group shares one), so a Lease claiming years cannot
/// hold its share of the plugins unrun.
fn valid_for(lease: &LeaseRecord, own: Duration) -> Duration {
    lease
        .duration
        .filter(|s| *s > 0)
        .map_or(own, |s| Duration::from_secs(s as u64).min(own))
}

/// What a follower's closed channel means: it stopped, so its view is no longer followed.
fn stopped() -> super::follow::FollowError {
    super::follow::FollowError::Ended {
        what: "the group".into(),
        code: 0,
        message: "the follower stopped".into(),
    }
}

/// The next update of an optional follower; never, without one. A follower that stopped
/// leaves its view unsure for good (and is not polled again).
async fn recv<K>(rx: &mut Option<mpsc::Receiver<Update<K>>>) -> Update<K> {
    let Some(r) = rx else {
        return std::future::pending().await;
    };
    match r.recv().await {
        Some(u) => u,
        None => {
            *rx = None;
            Update::Unsure(stopped())
        }
    }
}

/// The updates already waiting, up to [`BATCH`].
fn drain<K>(rx: &mut Option<mpsc::Receiver<Update<K>>>) -> Vec<Update<K>> {
    let mut out = Vec::new();
    if let Some(r) = rx {
        while out.len() < BATCH {
            match r.try_recv() {
                Ok(u) => out.push(u),
                Err(_) => break,
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leader::LeaseConfig;
    use crate::shard::ShardBy;
    use crate::shard::follow::FollowError;

    fn lease(name: &str, rv: &str, holder: &str) -> Lease {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "resourceVersion": rv},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 6},
        }))
        .unwrap()
    }

    fn pod(name: &str, uid: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "uid": uid, "labels": {(super::super::GROUP_LABEL): "hooks"}},
        }))
        .unwrap()
    }

    /// A member `a` deciding from channels the test feeds.
    struct Harness {
        leases: mpsc::Sender<Update<Lease>>,
        pods: mpsc::Sender<Update<Pod>>,
        renewal: watch::Sender<Renewal>,
        assignment: watch::Receiver<Assignment>,
        why: watch::Receiver<Option<String>>,
        config: ShardConfig,
        _stop: oneshot::Sender<()>,
    }

    impl Harness {
        fn start(pod_uid: Option<&str>) -> Harness {
            let config = ShardConfig {
                group: "hooks".into(),
                lease: LeaseConfig::new("hooks", "default", "a")
                    .with_lease_duration(Duration::from_secs(6)),
                by: ShardBy::Plugin,
                pod_uid: pod_uid.map(String::from),
            };
            let (a_tx, assignment) = watch::channel(Assignment {
                members: Vec::new(),
                me: "a".into(),
                active: false,
                by: ShardBy::Plugin,
            });
            let (why_tx, why) = watch::channel(None);
            let member = Member::new(config.clone(), CursorBook::new(), a_tx, why_tx, None);
            let (leases, lrx) = mpsc::channel(16);
            let (pods, prx) = mpsc::channel(16);
            let (renewal, rrx) = watch::channel(Renewal::default());
            let (stop_tx, stop) = oneshot::channel();
            tokio::spawn(member.run(Inputs {
                leases: Some(lrx),
                pods: pod_uid.map(|_| prx),
                renewal: rrx,
                stop,
            }));
            Harness {
                leases,
                pods,
                renewal,
                assignment,
                why,
                config,
                _stop: stop_tx,
            }
        }

        /// This member's renewal writing `rv`, started now, and the view showing it if `shown`.
        async fn renew(&self, rv: &str, shown: bool) -> Instant {
            let at = Instant::now();
            self.renewal.send_replace(Renewal {
                at: Some(at),
                rv: Some(rv.into()),
                error: None,
            });
            if shown {
                self.leases
                    .send(Update::Applied(lease("hooks-a", rv, "a")))
                    .await
                    .unwrap();
            }
            at
        }

        /// Waits (in paused time) until `why` holds `want` (`None`: active); when it did.
        async fn until(&mut self, want: Option<&str>) -> Instant {
            let mut why = self.why.clone();
            let wait = why.wait_for(|w| match (w, want) {
                (None, None) => true,
                (Some(w), Some(want)) => w.contains(want),
                _ => false,
            });
            let w = match tokio::time::timeout(Duration::from_secs(600), wait).await {
                Ok(w) => w.unwrap().clone(),
                Err(_) => panic!("never {want:?}; last: {:?}", *self.why.borrow()),
            };
            let active = self.assignment.borrow().active;
            assert_eq!(active, w.is_none(), "assignment and why disagree: {w:?}");
            Instant::now()
        }
    }

    #[test]
    fn a_member_that_ends_leaves_nothing_running() {
        let (a_tx, assignment) = watch::channel(Assignment {
            members: vec!["a".into()],
            me: "a".into(),
            active: true,
            by: ShardBy::Plugin,
        });
        let (why_tx, why) = watch::channel(None);
        let config = ShardConfig {
            group: "hooks".into(),
            lease: LeaseConfig::new("hooks", "default", "a"),
            by: ShardBy::Plugin,
            pod_uid: None,
        };
        drop(Member::new(config, CursorBook::new(), a_tx, why_tx, None));
        assert!(!assignment.borrow().active);
        assert!(
            why.borrow()
                .as_deref()
                .is_some_and(|w| w.contains("stopped")),
            "{:?}",
            *why.borrow()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn runs_nothing_until_it_follows_and_renews_and_steps_down_at_the_renew_deadline() {
        let mut h = Harness::start(None);
        let deadline = h.config.lease.renew_deadline;
        h.leases.send(Update::Listed(vec![])).await.unwrap();
        h.leases
            .send(Update::Unsure(FollowError::Ended {
                what: "leases".into(),
                code: 403,
                message: "cannot watch resource \"leases\"".into(),
            }))
            .await
            .unwrap();
        h.renew("10", true).await;
        h.until(Some("cannot follow the group's Leases")).await;
        // However long it waits, a refused watch never becomes a view to act on.
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!h.assignment.borrow().active);
        let t = h.renew("11", true).await;
        h.leases.send(Update::Current).await.unwrap();
        assert!(h.until(None).await - t < Duration::from_millis(1));
        h.leases
            .send(Update::Applied(lease("hooks-b", "12", "b")))
            .await
            .unwrap();
        h.assignment
            .wait_for(|a| a.members == ["a", "b"])
            .await
            .unwrap();
        // Renewals stop: it steps down exactly at the renew deadline from the last one's start.
        let last = h.renew("13", true).await;
        let down = h.until(Some("could not renew its Lease")).await;
        assert_eq!(down - last, deadline);
        // A renewal the view does not show is not enough: the watch may have stalled.
        h.renew("14", false).await;
        h.until(Some("has not shown its own renewal")).await;
        h.leases
            .send(Update::Applied(lease("hooks-a", "14", "a")))
            .await
            .unwrap();
        h.until(None).await;
        // A write to its Lease by anyone else is no renewal of its own: renewing on, with the
        // view showing only that write, it steps down when the last one shown expires.
        let shown = Instant::now();
        h.leases
            .send(Update::Applied(lease("hooks-a", "15", "a")))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        h.renew("16", false).await;
        let down = h.until(Some("has not shown its own renewal")).await;
        assert!(down - shown <= deadline, "{:?}", down - shown);
    }

    #[tokio::test(start_paused = true)]
    async fn with_pods_it_runs_nothing_until_its_own_pod_is_in_the_group() {
        let mut h = Harness::start(Some("uid-a"));
        h.leases.send(Update::Listed(vec![])).await.unwrap();
        h.leases.send(Update::Current).await.unwrap();
        h.renew("10", true).await;
        h.pods.send(Update::Listed(vec![])).await.unwrap();
        h.pods.send(Update::Current).await.unwrap();
        h.until(Some("no Pod `a`")).await;
        // Another Pod of that name (a StatefulSet's replacement) is not this one.
        h.pods
            .send(Update::Applied(pod("a", "uid-old")))
            .await
            .unwrap();
        h.until(Some("another Pod of the same name")).await;
        h.pods
            .send(Update::Applied(pod("a", "uid-a")))
            .await
            .unwrap();
        h.until(None).await;
        // A Lease of b, whose Pod the view lacks, takes no share.
        let mut b = lease("hooks-b", "20", "b");
        b.metadata.owner_references = Some(vec![
            serde_json::from_value(
                serde_json::json!({"apiVersion": "v1", "kind": "Pod", "name": "b", "uid": "uid-b"}),
            )
            .unwrap(),
        ]);
        h.leases.send(Update::Applied(b)).await.unwrap();
        h.renew("21", true).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(h.assignment.borrow().members, ["a"]);
        h.pods
            .send(Update::Applied(pod("b", "uid-b")))
            .await
            .unwrap();
        h.assignment
            .wait_for(|a| a.members == ["a", "b"])
            .await
            .unwrap();
        // The Pod watch breaking: nothing runs until it is current again.
        h.pods
            .send(Update::Unsure(FollowError::Ended {
                what: "pods".into(),
                code: 500,
                message: "boom".into(),
            }))
            .await
            .unwrap();
        h.until(Some("cannot follow the group's Pods")).await;
        h.pods.send(Update::Current).await.unwrap();
        h.until(None).await;
    }
}
