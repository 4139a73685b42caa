//! What readers see of the plugins, in one keyed list: per plugin, its running version as
//! published, the admission hooks answering for it, why its files wait or were refused, and
//! what its source last pulled.
//!
//! Contract:
//! - Readers (status, `/plugins`, admission, re-drives) never wait for a reconcile: the
//!   reconcile works on its own `Loaded` versions and republishes here after every change.
//! - A plugin's files that do not run are *waiting* or *refused*, never both ([`Pending`]); a
//!   running plugin may have either too, for the new version it could not swap to.
//! - Its admission hooks are its running version's, or during a swap the old version's until
//!   the new one's are published, so admission has no moment without an answer.
//! - An entry that holds nothing is dropped: the list's keys are the plugins something is known
//!   of.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::{RwLock, RwLockReadGuard};
use tokio::sync::watch;

use crate::plugin::exec::admit::Admitter;
use crate::plugin::id::PluginId;
use crate::plugin::load::status::{ReconcileReport, Running, SourceStatus};
use crate::plugin::load::waiting::Waiting;

/// Why a plugin's files were refused, kept for `/plugins` until a reconcile says otherwise.
#[derive(Debug, Clone)]
pub(super) struct Refusal {
    pub(super) reason: String,
    /// When it was first refused for this reason (RFC 3339).
    pub(super) since: String,
}

/// What became of a plugin's files that do not run: one or the other, never both.
#[derive(Debug, Clone)]
pub(super) enum Pending {
    /// Refused for a reason that goes away by itself; retried.
    Waiting(Waiting),
    /// Refused until its files, its tenant's policy or the cluster change.
    Refused(Refusal),
}

/// One plugin's row in the [`Registry`].
#[derive(Debug, Clone)]
pub(super) struct Entry<R = Running, A = Arc<Admitter>> {
    running: Option<R>,
    admitter: Option<A>,
    /// The old version's hooks, answering while its new version starts.
    swapping: Option<A>,
    pending: Option<Pending>,
    source: Option<SourceStatus>,
}

impl<R, A> Default for Entry<R, A> {
    fn default() -> Self {
        Entry {
            running: None,
            admitter: None,
            swapping: None,
            pending: None,
            source: None,
        }
    }
}

impl<R, A> Entry<R, A> {
    /// Its running version, as last published.
    pub(super) fn running(&self) -> Option<&R> {
        self.running.as_ref()
    }

    /// The admission hooks answering for it now.
    pub(super) fn admitter(&self) -> Option<&A> {
        self.admitter.as_ref()
    }

    /// Why its files (a new version, for a running plugin) wait to load.
    pub(super) fn waiting(&self) -> Option<&Waiting> {
        match &self.pending {
            Some(Pending::Waiting(w)) => Some(w),
            _ => None,
        }
    }

    /// Why its files (a new version, for a running plugin) were refused.
    pub(super) fn refusal(&self) -> Option<&Refusal> {
        match &self.pending {
            Some(Pending::Refused(r)) => Some(r),
            _ => None,
        }
    }

    /// What its source last pulled, if it has one.
    pub(super) fn source(&self) -> Option<&SourceStatus> {
        self.source.as_ref()
    }

    /// Running or waiting: a plugin whose lines and dead letters are still its own.
    pub(super) fn is_known(&self) -> bool {
        self.running.is_some() || self.waiting().is_some()
    }

    fn is_empty(&self) -> bool {
        self.running.is_none()
            && self.admitter.is_none()
            && self.swapping.is_none()
            && self.pending.is_none()
            && self.source.is_none()
    }
}

/// The plugins as readers see them, keyed by plugin; `R` is a published running version and
/// `A` its admission hooks (generic so the bookkeeping is tested without running anything).
pub(super) struct Registry<R = Running, A = Arc<Admitter>> {
    entries: RwLock<BTreeMap<PluginId, Entry<R, A>>>,
    /// Bumped whenever the running versions are republished.
    published: watch::Sender<u64>,
    /// How many plugins wait, for whoever schedules retries.
    waiting_count: watch::Sender<usize>,
}

impl<R, A> Default for Registry<R, A> {
    fn default() -> Self {
        Registry {
            entries: RwLock::new(BTreeMap::new()),
            published: watch::channel(0).0,
            waiting_count: watch::channel(0).0,
        }
    }
}

impl<R: Clone, A: Clone> Registry<R, A> {
    /// Every entry, read in one go; hold the guard briefly (writers wait for it).
    pub(super) fn read(&self) -> RwLockReadGuard<'_, BTreeMap<PluginId, Entry<R, A>>> {
        self.entries.read()
    }

    /// Makes `running` (each version with its hooks, if any) what runs: every other plugin's
    /// running version is gone, its hooks too unless a swap keeps them.
    pub(super) fn publish(&self, running: impl IntoIterator<Item = (PluginId, R, Option<A>)>) {
        let mut entries = self.entries.write();
        for e in entries.values_mut() {
            e.running = None;
            e.admitter = e.swapping.clone();
        }
        for (id, r, a) in running {
            let e = entries.entry(id).or_default();
            e.running = Some(r);
            if let Some(a) = a {
                e.admitter = Some(a);
            }
        }
        entries.retain(|_, e| !e.is_empty());
        drop(entries);
        self.published.send_modify(|n| *n += 1);
    }

    /// Keeps `old` (the hooks of `id`'s running version, if it has any) answering while its new
    /// version starts, until [`swapped`](Self::swapped). Call before publishing the old
    /// version's removal.
    pub(super) fn swapping(&self, id: &PluginId, old: Option<A>) {
        if let Some(a) = old {
            self.entries.write().entry(id.clone()).or_default().swapping = Some(a);
        }
    }

    /// The swap of `id` is over (its new version is published, or it failed): the old
    /// version's hooks go with the next publish.
    pub(super) fn swapped(&self, id: &PluginId) {
        if let Some(e) = self.entries.write().get_mut(id) {
            e.swapping = None;
        }
    }

    /// Ends every swap still open; whether there was one (then a publish removes its hooks).
    pub(super) fn end_swaps(&self) -> bool {
        let mut any = false;
        for e in self.entries.write().values_mut() {
            any |= e.swapping.take().is_some();
        }
        any
    }

    /// Keeps what `report` refused: a reconcile of every plugin says it all, a retry of some
    /// plugins (`report.only`) only what it tried. A refusal for the same reason as before
    /// keeps its `since`.
    pub(super) fn record_refusals(&self, report: &ReconcileReport) {
        let mut entries = self.entries.write();
        let mut before = BTreeMap::new();
        for (id, e) in entries.iter_mut() {
            if let Some(Pending::Refused(r)) = &e.pending {
                before.insert(id.clone(), r.clone());
                if report.only.as_ref().is_none_or(|o| o.contains(id)) {
                    e.pending = None;
                }
            }
        }
        for (id, err) in &report.errors {
            let reason = err.to_string();
            let since = before.get(id).filter(|r| r.reason == reason).map_or_else(
                || k8s_openapi::jiff::Timestamp::now().to_string(),
                |r| r.since.clone(),
            );
            let refusal = Refusal { reason, since };
            entries.entry(id.clone()).or_default().pending = Some(Pending::Refused(refusal));
        }
        entries.retain(|_, e| !e.is_empty());
    }

    /// Makes `waiting` exactly the plugins that wait (a refusal recorded since stands).
    pub(super) fn set_waiting(&self, waiting: BTreeMap<PluginId, Waiting>) {
        let count = waiting.len();
        let mut entries = self.entries.write();
        for e in entries.values_mut() {
            if matches!(e.pending, Some(Pending::Waiting(_))) {
                e.pending = None;
            }
        }
        for (id, w) in waiting {
            entries.entry(id).or_default().pending = Some(Pending::Waiting(w));
        }
        entries.retain(|_, e| !e.is_empty());
        drop(entries);
        self.waiting_count
            .send_if_modified(|c| std::mem::replace(c, count) != count);
    }

    /// The plugins waiting now, with why.
    pub(super) fn waiting(&self) -> BTreeMap<PluginId, Waiting> {
        self.entries
            .read()
            .iter()
            .filter_map(|(id, e)| Some((id.clone(), e.waiting()?.clone())))
            .collect()
    }

    /// Records what `id`'s source last pulled, or why it could not.
    pub(super) fn set_source(&self, id: &PluginId, status: SourceStatus) {
        self.entries.write().entry(id.clone()).or_default().source = Some(status);
    }

    /// What `id`'s source last pulled, if it has one.
    pub(super) fn source(&self, id: &PluginId) -> Option<SourceStatus> {
        self.entries.read().get(id)?.source.clone()
    }

    /// The admission hooks answering for `id` now.
    pub(super) fn admitter(&self, id: &PluginId) -> Option<A> {
        self.entries.read().get(id)?.admitter.clone()
    }

    /// Forgets what runs, waits and was refused (at shutdown); sources stay, they are the
    /// pullers' to say.
    pub(super) fn clear(&self) {
        let mut entries = self.entries.write();
        for e in entries.values_mut() {
            e.running = None;
            e.admitter = None;
            e.pending = None;
        }
        entries.retain(|_, e| !e.is_empty());
        drop(entries);
        self.waiting_count.send_replace(0);
    }

    /// Changes whenever what runs is republished.
    pub(super) fn subscribe_published(&self) -> watch::Receiver<u64> {
        self.published.subscribe()
    }

    /// Follows how many plugins wait.
    pub(super) fn subscribe_waiting(&self) -> watch::Receiver<usize> {
        self.waiting_count.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::PluginError;
    use crate::plugin::load::waiting::WaitingFor;

    type Test = Registry<&'static str, &'static str>;

    fn id(name: &str) -> PluginId {
        PluginId {
            tenant: String::new(),
            name: name.into(),
        }
    }

    fn refused(name: &str, reason: &str) -> (PluginId, PluginError) {
        let e = PluginError::Refused {
            plugin: name.into(),
            path: format!("{name}.toml").into(),
            reason: reason.into(),
        };
        (id(name), e)
    }

    fn waits() -> Waiting {
        Waiting {
            waiting_for: WaitingFor::ApiServer,
            reason: "discovery".into(),
            version: "v".into(),
            attempts: 1,
            since: "then".into(),
        }
    }

    fn report(
        errors: Vec<(PluginId, PluginError)>,
        only: Option<Vec<PluginId>>,
    ) -> ReconcileReport {
        ReconcileReport {
            errors,
            only,
            ..ReconcileReport::default()
        }
    }

    #[test]
    fn publishing_replaces_what_runs_and_its_hooks() {
        let r = Test::default();
        let mut published = r.subscribe_published();
        r.publish([(id("a"), "a1", Some("hooks-a1")), (id("b"), "b1", None)]);
        assert!(published.has_changed().unwrap());
        published.mark_unchanged();
        assert_eq!(r.admitter(&id("a")), Some("hooks-a1"));
        r.publish([(id("b"), "b2", None)]);
        assert!(published.has_changed().unwrap());
        assert!(r.admitter(&id("a")).is_none());
        let entries = r.read();
        assert_eq!(entries.keys().collect::<Vec<_>>(), [&id("b")]);
        assert_eq!(entries[&id("b")].running(), Some(&"b2"));
    }

    #[test]
    fn a_swap_keeps_the_old_hooks_until_it_ends() {
        let r = Test::default();
        r.publish([(id("a"), "a1", Some("old"))]);
        r.swapping(&id("a"), Some("old"));
        // The old version unpublished: its hooks still answer.
        r.publish([]);
        assert_eq!(r.admitter(&id("a")), Some("old"));
        assert!(r.read()[&id("a")].running().is_none());
        // The new version's hooks take over as soon as it is published.
        r.publish([(id("a"), "a2", Some("new"))]);
        assert_eq!(r.admitter(&id("a")), Some("new"));
        r.swapped(&id("a"));
        r.publish([(id("a"), "a2", None)]);
        assert!(r.admitter(&id("a")).is_none());
    }

    #[test]
    fn a_failed_swap_leaves_no_hooks_behind() {
        let r = Test::default();
        r.swapping(&id("a"), Some("old"));
        r.publish([]);
        assert_eq!(r.admitter(&id("a")), Some("old"));
        assert!(r.end_swaps());
        assert!(!r.end_swaps());
        r.publish([]);
        assert!(r.admitter(&id("a")).is_none());
        assert!(r.read().is_empty());
    }

    #[test]
    fn files_wait_or_are_refused_never_both() {
        let r = Test::default();
        r.set_waiting([(id("a"), waits())].into());
        r.record_refusals(&report(vec![refused("a", "bad")], None));
        let entries = r.read();
        assert!(entries[&id("a")].waiting().is_none());
        assert!(entries[&id("a")].refusal().unwrap().reason.contains("bad"));
        drop(entries);
        r.set_waiting([(id("a"), waits())].into());
        let entries = r.read();
        assert!(entries[&id("a")].refusal().is_none());
        assert!(entries[&id("a")].waiting().is_some());
    }

    #[test]
    fn a_refusal_for_the_same_reason_keeps_its_since() {
        let r = Test::default();
        r.record_refusals(&report(vec![refused("a", "bad")], None));
        let since = r.read()[&id("a")].refusal().unwrap().since.clone();
        std::thread::sleep(std::time::Duration::from_millis(2));
        r.record_refusals(&report(vec![refused("a", "bad")], None));
        assert_eq!(r.read()[&id("a")].refusal().unwrap().since, since);
        r.record_refusals(&report(vec![refused("a", "worse")], None));
        assert_ne!(r.read()[&id("a")].refusal().unwrap().since, since);
    }

    #[test]
    fn a_retry_of_some_plugins_keeps_the_others_refusals() {
        let r = Test::default();
        r.record_refusals(&report(
            vec![refused("a", "bad"), refused("b", "bad")],
            None,
        ));
        r.record_refusals(&report(Vec::new(), Some(vec![id("a")])));
        let entries = r.read();
        assert!(!entries.contains_key(&id("a")));
        assert!(entries[&id("b")].refusal().is_some());
        drop(entries);
        r.record_refusals(&report(Vec::new(), None));
        assert!(r.read().is_empty());
    }

    #[test]
    fn the_waiting_count_follows_the_waiting_plugins() {
        let r = Test::default();
        let mut count = r.subscribe_waiting();
        r.set_waiting([(id("a"), waits()), (id("b"), waits())].into());
        assert!(count.has_changed().unwrap());
        assert_eq!(*count.borrow_and_update(), 2);
        r.set_waiting([(id("b"), waits()), (id("a"), waits())].into());
        assert!(!count.has_changed().unwrap(), "the same count is no change");
        assert_eq!(r.waiting().keys().collect::<Vec<_>>(), [&id("a"), &id("b")]);
        r.set_waiting(BTreeMap::new());
        assert_eq!(*count.borrow_and_update(), 0);
        assert!(r.read().is_empty());
    }

    #[test]
    fn a_running_plugin_waiting_for_its_new_version_is_both() {
        let r = Test::default();
        r.publish([(id("a"), "a1", None)]);
        r.set_waiting([(id("a"), waits())].into());
        let entries = r.read();
        assert!(entries[&id("a")].running().is_some());
        assert!(entries[&id("a")].waiting().is_some());
        assert!(entries[&id("a")].is_known());
    }

    #[test]
    fn sources_outlive_shutdown() {
        let r = Test::default();
        let status = SourceStatus {
            reference: "r:1".into(),
            pinned: None,
            signer: None,
            error: Some("unreachable".into()),
            checked: "now".into(),
        };
        r.set_source(&id("a"), status.clone());
        r.publish([(id("a"), "a1", Some("hooks")), (id("b"), "b1", None)]);
        r.set_waiting([(id("c"), waits())].into());
        let mut count = r.subscribe_waiting();
        r.clear();
        assert_eq!(*count.borrow_and_update(), 0);
        assert_eq!(r.read().keys().collect::<Vec<_>>(), [&id("a")]);
        assert_eq!(r.source(&id("a")), Some(status));
        assert!(r.admitter(&id("a")).is_none());
    }
}
