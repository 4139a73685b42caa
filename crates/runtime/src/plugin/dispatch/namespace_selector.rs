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
//! - A namespace that starts being selected brings its objects in as `Added` events (flagged
//!   initial when the namespace itself is part of the Namespace informer's first list); one
//!   that stops being selected (labels changed, or deleted) sends `Deleted` for each of its
//!   objects, with their current state. Afterwards, as before, the plugin sees exactly the
//!   events of the selected namespaces' objects.
//! - The change and its adds or deletes happen while the kind's store excludes writers, so
//!   each object's events stay in order: never an update before its add, nor one after its
//!   delete.
//! - The plugin's cache still answers for every namespace its grant allows: the selector
//!   chooses what is delivered, not what may be read.
//! - Nothing is selected until the Namespace informer has listed the namespaces; a host that
//!   may not list namespaces delivers nothing for the watch (its informer says it is
//!   forbidden).

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::informer::{
    CachedObject, Event, EventFilter, EventType, Handler, HandlerOptions, InformerClaim, Injector,
    LabelSelector, ListenerHandle, SelectorError, SharedInformer,
};
use crate::tenancy::Grant;

/// Which namespaces one watch's objects are delivered from, now.
pub struct NamespaceSelection {
    selector: LabelSelector,
    text: String,
    grant: Arc<Grant>,
    /// The names of the namespaces selected now.
    selected: RwLock<HashSet<String>>,
    /// The watched kind's informer: its store orders a change against the kind's own events.
    kind: Arc<SharedInformer>,
}

impl NamespaceSelection {
    /// A selection by `selector` (the manifest's text), bounded by `grant`, of `kind`'s
    /// objects; nothing is selected until [`follow`](Self::follow) sees the namespaces.
    pub fn new(
        selector: &str,
        grant: Arc<Grant>,
        kind: Arc<SharedInformer>,
    ) -> Result<Arc<Self>, SelectorError> {
        Ok(Arc::new(NamespaceSelection {
            selector: LabelSelector::parse(selector)?,
            text: selector.to_string(),
            grant,
            selected: RwLock::default(),
            kind,
        }))
    }

    /// The selector as the manifest gives it.
    pub fn selector(&self) -> &str {
        &self.text
    }

    /// Whether `namespace` is selected now.
    pub fn is_selected(&self, namespace: &str) -> bool {
        self.selected.read().contains(namespace)
    }

    /// The filter for the plugin's handler on the kind's informer: the grant's, and a
    /// selected namespace.
    pub fn filter(self: &Arc<Self>) -> EventFilter {
        let me = self.clone();
        EventFilter::new(move |o| {
            me.grant.allows(o) && o.namespace().is_some_and(|ns| me.is_selected(ns))
        })
    }

    /// Starts following the namespaces of `namespaces` (the Namespace informer), queueing the
    /// adds and deletes a change of selection stands for to `target` (the plugin's handler on
    /// the kind's informer). Registered only after that handler, so no change is missed: the
    /// namespaces already cached come first, as initial events. Stops when the returned watch
    /// is dropped.
    pub fn follow(
        self: &Arc<Self>,
        name: &str,
        target: Injector,
        namespaces: &Arc<SharedInformer>,
    ) -> NamespaceWatch {
        let handler = Follower {
            selection: self.clone(),
            target,
        };
        let handle = namespaces.add_handler(
            &format!("{name} (namespace-selector)"),
            handler,
            HandlerOptions::default(),
        );
        NamespaceWatch {
            handle: Some(handle),
            claim: None,
        }
    }

    /// Whether `ns` (a Namespace object, or its last state when deleted) is to be selected.
    fn wanted(&self, ns: &CachedObject, event_type: EventType) -> bool {
        event_type != EventType::Deleted
            && self.grant.allows_namespace(Some(ns.name()))
            && self.selector.matches(|k| ns.label(k))
    }

    /// Applies the namespaces' new selection: the changes, and for each changed namespace its
    /// objects' adds or deletes, queued while the kind's store excludes writers.
    fn apply(&self, changes: Vec<(String, bool, bool)>, target: &Injector) {
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
    target: Injector,
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
        self.selection.apply(changes, &self.target);
    }
}

/// A selection being followed: holds the Namespace informer and the handler on it, both
/// released when dropped.
pub struct NamespaceWatch {
    handle: Option<ListenerHandle>,
    claim: Option<InformerClaim>,
}

impl NamespaceWatch {
    /// Keeps `claim` (on the Namespace informer followed) until this watch is dropped.
    pub fn holding(mut self, claim: InformerClaim) -> Self {
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
    use crate::informer::{Delta, FnHandler, RawObject, ReflectorConfig, StoreOptions};
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
        let handler = FnHandler(move |e: Event| {
            let _ = tx.send(format!("{:?} {} {}", e.event_type, e.key(), e.initial));
        });
        let options = HandlerOptions {
            filter: Some(selection.filter()),
            ..Default::default()
        };
        let plugin = kind.add_handler("plugin", handler, options);
        let _watch = selection.follow("plugin", plugin.injector(), &namespaces);

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
}
