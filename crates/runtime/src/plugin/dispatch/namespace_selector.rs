//! `namespace-selector`: a watch that chooses its namespaces by their labels, and follows them
//! as the labels change.
//!
//! The kind is watched in every namespace (one shared informer, as for a watch without
//! namespaces); a [`NamespaceSelection`] decides which of its objects reach the plugin, and a
//! handler on the shared Namespace informer keeps that decision current.
//!
//! Contract:
//! - A namespace is selected while it exists, its labels match the selector and the tenant's
//!   grant allows it: the grant bounds the selection, whatever the selector matches.
//! - The plugin's handler is registered with the selection already known, so its first events
//!   are exactly those of the selected namespaces' objects, as for a watch naming them. A new
//!   plugin's selection is read from the Namespace informer's cache (the loader waits for that
//!   informer to list, or to be refused, first), and its replay is the selection's objects. A
//!   plugin resuming (from a stored cursor, or a shard member's) resumes with the selection it
//!   had: made of the namespaces as they were then (restored from disk, or listed at the
//!   cursor's resourceVersion), so the difference it gets is what changed in the namespaces it
//!   had selected; then the namespaces whose selection changed meanwhile bring their objects
//!   in as `Added` or send them as `Deleted`, as if the follower had been running.
//! - From then on a namespace that starts being selected brings its objects in as `Added`
//!   events (flagged initial when the namespace itself is part of the Namespace informer's
//!   first list); one that stops being selected (labels changed, or deleted) sends `Deleted`
//!   for each of its objects, with their current state. Otherwise the plugin sees exactly the
//!   events of the selected namespaces' objects.
//! - The change and its adds or deletes happen while the kind's store excludes writers, so
//!   each object's events stay in order: never an update before its add, nor one after its
//!   delete; and never while the handler is being registered.
//! - The plugin's cache still answers for every namespace its grant allows: the selector
//!   chooses what is delivered, not what may be read.
//! - Nothing is selected that the Namespace informer has not cached: a host that may not list
//!   namespaces delivers nothing for the watch until it may (the plugin shows as waiting,
//!   forbidden), and then the selection comes in as `Added`.

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::informer::{
    CachedObject, Event, EventFilter, EventType, Handler, HandlerOptions, InformerClaim, Injector,
    LabelSelector, ListenerHandle, Restored, SelectorError, SharedInformer,
};
use crate::tenancy::Grant;

/// Which namespaces one watch's objects are delivered from, now.
pub(crate) struct NamespaceSelection {
    selector: LabelSelector,
    grant: Arc<Grant>,
    /// The names of the namespaces selected now.
    selected: RwLock<HashSet<String>>,
    /// The watched kind's informer: its store orders a change against the kind's own events.
    kind: Arc<SharedInformer>,
    /// The plugin's handler on the kind's informer, once registered: where a change of
    /// selection sends its adds and deletes. Held across each change and across the
    /// handler's registration, so the two never interleave.
    target: Mutex<Option<Injector>>,
}

impl NamespaceSelection {
    /// A selection by `selector` (the manifest's text), bounded by `grant`, of `kind`'s
    /// objects; nothing is selected until [`register`](Self::register) reads the namespaces.
    pub(crate) fn new(
        selector: &str,
        grant: Arc<Grant>,
        kind: Arc<SharedInformer>,
    ) -> Result<Arc<Self>, SelectorError> {
        Ok(Arc::new(NamespaceSelection {
            selector: LabelSelector::parse(selector)?,
            grant,
            selected: RwLock::default(),
            kind,
            target: Mutex::new(None),
        }))
    }

    /// Whether `namespace` is selected now.
    pub(crate) fn is_selected(&self, namespace: &str) -> bool {
        self.selected.read().contains(namespace)
    }

    /// The filter for the plugin's handler on the kind's informer: the grant's, and a
    /// selected namespace.
    fn filter(self: &Arc<Self>) -> EventFilter {
        let me = self.clone();
        EventFilter::new(move |o| {
            me.grant.allows(o) && o.namespace().is_some_and(|ns| me.is_selected(ns))
        })
    }

    /// Registers the plugin's handler on the kind's informer through `register` (given the
    /// filter to register it with), then follows `namespaces` (the Namespace informer): the
    /// adds and deletes a change of selection stands for go to that handler. Stops following
    /// when the returned watch is dropped.
    ///
    /// The handler registers with the selection made of `prior` (the namespaces as they were
    /// when the handler's resumed state was seen) or, for a handler starting afresh, of the
    /// namespaces cached now: what it is first given (its replay, or the difference it resumes
    /// with) is filtered by the selection it had, not by an empty one that the follower would
    /// then fill with adds of everything. With a `prior`, the namespaces cached now are then
    /// applied as a change of selection.
    pub(crate) fn register(
        self: &Arc<Self>,
        name: &str,
        namespaces: &Arc<SharedInformer>,
        prior: Option<Arc<Restored>>,
        register: impl FnOnce(EventFilter) -> ListenerHandle,
    ) -> (ListenerHandle, NamespaceWatch) {
        let handle = {
            let mut target = self.target.lock();
            let selected = match &prior {
                Some(prior) => self.selected_of(&mut prior.objects()),
                None => namespaces
                    .store()
                    .read_consistent(|_, all| self.selected_of(all)),
            };
            *self.selected.write() = selected;
            let handle = register(self.filter());
            *target = Some(handle.injector());
            handle
        };
        if prior.is_some() {
            let now = namespaces
                .store()
                .read_consistent(|_, all| self.selected_of(all));
            let was = self.selected.read().clone();
            let changes = was
                .union(&now)
                .map(|ns| (ns.clone(), now.contains(ns), false))
                .collect();
            self.apply(changes);
        }
        // Its replay changes nothing already applied above; a namespace changed since is a
        // change of selection like any later one.
        let follower = namespaces.add_handler(
            &format!("{name} (namespace-selector)"),
            Follower {
                selection: self.clone(),
            },
            HandlerOptions::default(),
        );
        let watch = NamespaceWatch {
            handle: Some(follower),
            namespaces: namespaces.clone(),
            claim: None,
        };
        (handle, watch)
    }

    /// The names of the namespaces of `all` that are to be selected.
    fn selected_of(&self, all: &mut dyn Iterator<Item = &Arc<CachedObject>>) -> HashSet<String> {
        all.filter(|ns| self.wanted(ns, EventType::Added))
            .map(|ns| ns.name().to_string())
            .collect()
    }

    /// Whether `ns` (a Namespace object, or its last state when deleted) is to be selected.
    fn wanted(&self, ns: &CachedObject, event_type: EventType) -> bool {
        event_type != EventType::Deleted
            && self.grant.allows_namespace(Some(ns.name()))
            && self.selector.matches(|k| ns.label(k))
    }

    /// Applies the namespaces' new selection: the changes, and for each changed namespace its
    /// objects' adds or deletes, queued to the plugin's handler while the kind's store
    /// excludes writers.
    fn apply(&self, changes: Vec<(String, bool, bool)>) {
        let target = self.target.lock();
        let Some(target) = target.as_ref() else {
            // Not registered yet: the registration reads the selection afresh.
            return;
        };
        self.kind.store().read_consistent(|_, objects| {
            // (selected now, initial) of each namespace whose selection changed.
            let mut changed = std::collections::HashMap::new();
            {
                let mut selected = self.selected.write();
                for (ns, wanted, initial) in changes {
                    let now = if wanted {
                        selected.insert(ns.clone())
                    } else {
                        selected.remove(&ns)
                    };
                    if now {
                        changed.insert(ns, (wanted, initial));
                    } else {
                        // Changed back within the batch: nothing to deliver for it.
                        changed.remove(&ns);
                    }
                }
            }
            if changed.is_empty() {
                return;
            }
            for o in objects {
                let Some(&(wanted, initial)) = o.namespace().and_then(|ns| changed.get(ns)) else {
                    continue;
                };
                if !self.grant.allows(o) {
                    continue;
                }
                target.push(match wanted {
                    true => Event::added(o.clone(), initial),
                    false => Event::deleted(o.clone(), false),
                });
            }
        });
    }
}

/// The handler on the Namespace informer that keeps one selection current.
struct Follower {
    selection: Arc<NamespaceSelection>,
}

impl Handler for Follower {
    async fn handle(&mut self, event: Event) {
        self.handle_batch(vec![event]).await;
    }

    /// One pass over the kind's objects per batch of namespace changes (the first list comes
    /// in batches), not one per namespace.
    async fn handle_batch(&mut self, events: Vec<Event>) {
        let changes = events
            .iter()
            .map(|e| {
                let wanted = self.selection.wanted(&e.object, e.event_type);
                (e.object.name().to_string(), wanted, e.initial)
            })
            .collect();
        self.selection.apply(changes);
    }
}

/// A selection being followed: holds the Namespace informer and the handler on it, both
/// released when dropped.
pub(crate) struct NamespaceWatch {
    handle: Option<ListenerHandle>,
    namespaces: Arc<SharedInformer>,
    claim: Option<InformerClaim>,
}

impl NamespaceWatch {
    /// The Namespace informer followed: the selection knows only what it may list.
    pub(crate) fn namespaces(&self) -> &Arc<SharedInformer> {
        &self.namespaces
    }

    /// Keeps `claim` (on the Namespace informer followed) until this watch is dropped.
    pub(crate) fn holding(mut self, claim: InformerClaim) -> Self {
        self.claim = Some(claim);
        self
    }
}

impl Drop for NamespaceWatch {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.remove();
        }
        // The handler goes first: the claim may be the informer's last.
        self.claim.take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::informer::{
        CursorOptions, Delta, FnHandler, RawObject, ReflectorConfig, Restored, StoreOptions,
    };
    use crate::tenancy::NamespacePattern;
    use kube::Api;
    use kube::core::{ApiResource, GroupVersionKind};
    use tokio::sync::mpsc;

    /// An informer never started: the test applies deltas as the reflector would.
    fn informer(kind: &str) -> Arc<SharedInformer> {
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", kind));
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        SharedInformer::new(
            Api::all_with(client, &ar),
            ar,
            kind.into(),
            ReflectorConfig::default(),
            StoreOptions::default(),
        )
    }

    fn raw(json: serde_json::Value) -> RawObject {
        serde_json::from_value(json).unwrap()
    }

    fn ns(name: &str, rv: u64, team: &str) -> RawObject {
        raw(
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": name, "resourceVersion": rv.to_string(), "labels": {"team": team}}}),
        )
    }

    fn cm(ns: &str, name: &str, rv: u64) -> RawObject {
        raw(
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": name, "namespace": ns, "resourceVersion": rv.to_string()}}),
        )
    }

    /// Registers a handler sending `Type key initial` for each event through `selection`,
    /// resuming from `prior` (the objects, and the namespaces, it had seen) if given.
    fn register(
        selection: &Arc<NamespaceSelection>,
        kind: &Arc<SharedInformer>,
        namespaces: &Arc<SharedInformer>,
        tx: mpsc::UnboundedSender<String>,
        prior: Option<(Restored, Restored)>,
    ) -> (ListenerHandle, NamespaceWatch) {
        let handler = FnHandler(move |e: Event| {
            let _ = tx.send(format!("{:?} {} {}", e.event_type, e.key(), e.initial));
        });
        let (prior, prior_namespaces) = match prior {
            Some((objects, namespaces)) => (Some(objects), Some(Arc::new(namespaces))),
            None => (None, None),
        };
        selection.register("plugin", namespaces, prior_namespaces, |filter| {
            let options = HandlerOptions {
                filter: Some(filter),
                cursor: prior.map(|p| CursorOptions {
                    prior: Some(Arc::new(p)),
                    ..Default::default()
                }),
                ..Default::default()
            };
            kind.add_handler("plugin", handler, options)
        })
    }

    /// `objects` as `informer`'s handler saw them elsewhere.
    fn seen_as(informer: &SharedInformer, objects: &[RawObject]) -> Restored {
        Restored::from_objects(
            objects
                .iter()
                .map(|o| informer.store().prepare(o.clone()).unwrap())
                .collect(),
        )
    }

    async fn next(rx: &mut mpsc::UnboundedReceiver<String>) -> String {
        tokio::time::timeout(std::time::Duration::from_secs(10), rx.recv())
            .await
            .expect("an event")
            .expect("the handler lives")
    }

    #[tokio::test]
    async fn selection_follows_labels_within_the_grant_as_adds_and_deletes() {
        let (kind, namespaces) = (informer("ConfigMap"), informer("Namespace"));
        kind.apply(Delta::Replace(vec![
            cm("a", "x", 1),
            cm("b", "y", 2),
            cm("c", "z", 3),
        ]));
        namespaces.apply(Delta::Replace(vec![
            ns("a", 1, "x"),
            ns("b", 2, "y"),
            ns("c", 3, "x"),
        ]));
        // The grant covers `a` and `b`; the selector matches `a` and `c`.
        let pat = |p: &str| NamespacePattern::try_from(p.to_string()).unwrap();
        let grant = Arc::new(Grant::new("t", vec![pat("a"), pat("b")], vec![], false));
        let selection = NamespaceSelection::new("team=x", grant, kind.clone()).unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let _plugin = register(&selection, &kind, &namespaces, tx, None);

        // `a` is selected; `c` matches but is outside the grant.
        assert_eq!(next(&mut rx).await, "Added a/x true");
        // `b` gains the label: its objects come in.
        namespaces.apply(Delta::Apply(ns("b", 4, "x")));
        assert_eq!(next(&mut rx).await, "Added b/y false");
        // `a` loses it: its objects go.
        namespaces.apply(Delta::Apply(ns("a", 5, "q")));
        assert_eq!(next(&mut rx).await, "Deleted a/x false");
        // Live events: only the selected namespaces' objects.
        kind.apply(Delta::Apply(cm("a", "x", 6)));
        kind.apply(Delta::Apply(cm("c", "z", 7)));
        kind.apply(Delta::Apply(cm("b", "y", 8)));
        assert_eq!(next(&mut rx).await, "Updated b/y false");
        // A selected namespace deleted: its objects go.
        namespaces.apply(Delta::Delete(ns("b", 9, "x")));
        assert_eq!(next(&mut rx).await, "Deleted b/y false");
        assert!(!selection.is_selected("b") && !selection.is_selected("c"));
        assert!(rx.try_recv().is_err(), "nothing else was delivered");
    }

    /// A handler resuming from a state it saw before (a stored cursor, a shard member's) gets
    /// the difference within the selection: what changed, once, and nothing for the objects
    /// it has seen as they are, nor for unselected namespaces.
    #[tokio::test]
    async fn a_resumed_handler_gets_exactly_what_changed_in_the_selection() {
        let (kind, namespaces) = (informer("ConfigMap"), informer("Namespace"));
        namespaces.apply(Delta::Replace(vec![ns("a", 1, "x"), ns("b", 2, "y")]));
        // What the handler had seen: in `a`, two untouched, one to update, one to delete.
        let seen = [
            cm("a", "same-1", 3),
            cm("a", "same-2", 4),
            cm("a", "changed", 5),
            cm("a", "gone", 6),
            cm("b", "other", 7),
        ];
        let prior = seen_as(&kind, &seen);
        // While it was away: `changed` updated, `gone` deleted, `new` created, and `b` (not
        // selected) changed too.
        kind.apply(Delta::Replace(vec![
            cm("a", "same-1", 3),
            cm("a", "same-2", 4),
            cm("a", "changed", 8),
            cm("a", "new", 9),
            cm("b", "other", 10),
            cm("b", "more", 11),
        ]));
        let pat = |p: &str| NamespacePattern::try_from(p.to_string()).unwrap();
        let grant = Arc::new(Grant::new("t", vec![pat("*")], vec![], false));
        let selection = NamespaceSelection::new("team=x", grant, kind.clone()).unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let had = seen_as(&namespaces, &[ns("a", 1, "x"), ns("b", 2, "y")]);
        let (_plugin, watch) = register(&selection, &kind, &namespaces, tx, Some((prior, had)));

        let mut got = Vec::new();
        for _ in 0..3 {
            got.push(next(&mut rx).await);
        }
        got.sort();
        assert_eq!(
            got,
            [
                "Added a/new false",
                "Deleted a/gone false",
                "Updated a/changed false"
            ]
        );
        // Nothing more of the resume: the follower's replay of the namespaces read already
        // changes nothing (what it queued would come before the live events). Then live events
        // as usual, the last one a barrier: one handler's events arrive in order.
        watch.handle.as_ref().unwrap().wait_synced().await;
        kind.apply(Delta::Apply(cm("b", "other", 12)));
        kind.apply(Delta::Apply(cm("a", "same-1", 13)));
        assert_eq!(next(&mut rx).await, "Updated a/same-1 false");
        assert!(rx.try_recv().is_err(), "nothing else was delivered");
    }

    /// Namespaces relabelled while the handler was away: it resumes with the selection it had
    /// (what changed in `a`, selected then), then `a`, no longer selected, sends its objects
    /// as deleted and `b`, selected now, brings its own in, as if it had followed all along.
    #[tokio::test]
    async fn a_resumed_handler_catches_up_with_namespaces_relabelled_meanwhile() {
        let (kind, namespaces) = (informer("ConfigMap"), informer("Namespace"));
        let had = seen_as(&namespaces, &[ns("a", 1, "x"), ns("b", 2, "y")]);
        let prior = seen_as(
            &kind,
            &[cm("a", "kept", 3), cm("a", "changed", 4), cm("b", "old", 5)],
        );
        namespaces.apply(Delta::Replace(vec![ns("a", 6, "q"), ns("b", 7, "x")]));
        kind.apply(Delta::Replace(vec![
            cm("a", "kept", 3),
            cm("a", "changed", 8),
            cm("b", "old", 5),
            cm("b", "new", 9),
        ]));
        let pat = |p: &str| NamespacePattern::try_from(p.to_string()).unwrap();
        let grant = Arc::new(Grant::new("t", vec![pat("*")], vec![], false));
        let selection = NamespaceSelection::new("team=x", grant, kind.clone()).unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let (_plugin, watch) = register(&selection, &kind, &namespaces, tx, Some((prior, had)));
        watch.handle.as_ref().unwrap().wait_synced().await;
        // A barrier: one handler's events arrive in order.
        kind.apply(Delta::Apply(cm("b", "barrier", 10)));

        let mut got = Vec::new();
        while got.last().map(String::as_str) != Some("Added b/barrier false") {
            got.push(next(&mut rx).await);
        }
        // The update of `a/changed` may be folded into its delete while both are queued.
        got.retain(|e| e != "Updated a/changed false");
        got.sort();
        assert_eq!(
            got,
            [
                "Added b/barrier false",
                "Added b/new false",
                "Added b/old false",
                "Deleted a/changed false",
                "Deleted a/kept false"
            ]
        );
        assert!(selection.is_selected("b") && !selection.is_selected("a"));
    }
}
