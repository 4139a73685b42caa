//! Scope admission: before the store trusts an object, the object must sit on its resource's
//! side of the namespace line.
//!
//! An object of a namespaced kind without `metadata.namespace` would be keyed, indexed and
//! filtered as a cluster-scoped object: visible to every tenant granted cluster-scoped objects,
//! whatever namespace it came from. An object of a cluster-scoped kind with a namespace would
//! pass for an object of that namespace. No API server sends either; one that does (a bug, a
//! corrupted store, something in between) is not believed. The object is refused where the store
//! freezes it, before it is cached, indexed or dispatched: a watch event carrying it is dropped
//! as if it never came, and a list carrying it simply lacks it (so a version cached before under
//! its right key is deleted, final state unknown, as any object missing from a relist).
//!
//! Every refusal is counted ([`crate::Store::refused_objects`]) and logged at warn once per
//! (key, reason) per store, so a server repeating one bad object does not flood the log. The set
//! of logged pairs is bounded: past it, refusals are only counted.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};

use kube::core::ApiResource;
use parking_lot::Mutex;

use super::object::ObjectKey;

/// Distinct (key, reason) pairs logged one by one per store; past this, refusals are counted.
const MAX_LOGGED: usize = 1024;

/// Why an object was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Misplaced {
    /// A namespaced kind's object without a namespace.
    NoNamespace,
    /// A cluster-scoped kind's object with a namespace.
    Namespace,
}

impl Misplaced {
    fn as_str(self) -> &'static str {
        match self {
            Misplaced::NoNamespace => "an object of a namespaced kind has no namespace",
            Misplaced::Namespace => "an object of a cluster-scoped kind has a namespace",
        }
    }
}

/// Checks each object against its resource's scope; one per store.
pub(crate) struct ScopeCheck {
    /// `None`: the scope is unknown and nothing is checked.
    namespaced: Option<bool>,
    /// The resource, for the log.
    api_version: String,
    kind: String,
    refused: AtomicU64,
    logged: Mutex<Logged>,
}

#[derive(Default)]
struct Logged {
    pairs: HashSet<(ObjectKey, Misplaced)>,
    /// Whether the bound on `pairs` was reached (and said so once).
    full: bool,
}

impl ScopeCheck {
    /// A check for objects of `api_resource`, namespaced or not (`None`: unknown, not checked).
    pub(crate) fn new(api_resource: &ApiResource, namespaced: Option<bool>) -> Self {
        ScopeCheck {
            namespaced,
            api_version: api_resource.api_version.clone(),
            kind: api_resource.kind.clone(),
            refused: AtomicU64::new(0),
            logged: Mutex::default(),
        }
    }

    /// Whether an object named `name` in `namespace` (`None` or empty: none) may be frozen
    /// into the cache; a refusal is counted and, the first time for its key and reason, logged.
    pub(crate) fn admits(&self, namespace: Option<&str>, name: &str) -> bool {
        let Some(namespaced) = self.namespaced else {
            return true;
        };
        let namespace = namespace.filter(|ns| !ns.is_empty());
        let why = match (namespaced, namespace) {
            (true, Some(_)) | (false, None) => return true,
            (true, None) => Misplaced::NoNamespace,
            (false, Some(_)) => Misplaced::Namespace,
        };
        self.refused.fetch_add(1, Ordering::Relaxed);
        let mut logged = self.logged.lock();
        if logged.pairs.len() < MAX_LOGGED {
            if logged.pairs.insert((ObjectKey::new(namespace, name), why)) {
                tracing::warn!(
                    api_version = %self.api_version,
                    kind = %self.kind,
                    name,
                    namespace = namespace.unwrap_or_default(),
                    reason = why.as_str(),
                    "object refused: it is not cached and no handler sees it"
                );
            }
        } else if !logged.full {
            logged.full = true;
            tracing::warn!(
                api_version = %self.api_version,
                kind = %self.kind,
                logged = MAX_LOGGED,
                "more objects refused for their scope: from now on they are only counted"
            );
        }
        false
    }

    /// Objects refused so far.
    pub(crate) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::Arc;

    use kube::core::GroupVersionKind;

    use crate::event::{Event, EventType};
    use crate::store::{Store, StoreOptions, Visibility};
    use crate::{LabelSelector, RawObject};

    fn store(kind: &str, namespaced: Option<bool>) -> Store {
        Store::new(
            kube::core::ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", kind)),
            StoreOptions {
                namespaced,
                ..StoreOptions::default()
            },
        )
    }

    /// An object named `name` at `rv`, in `namespace` (none when `None`).
    fn object(namespace: Option<&str>, name: &str, rv: u32) -> RawObject {
        let ns = namespace
            .map(|ns| format!(r#""namespace":"{ns}","#))
            .unwrap_or_default();
        serde_json::from_str(&format!(
            r#"{{"metadata":{{{ns}"name":"{name}","uid":"uid-{name}","resourceVersion":"{rv}"}},"data":{{"v":"{rv}"}}}}"#
        ))
        .unwrap()
    }

    fn collect(f: impl FnOnce(&mut dyn FnMut(Event))) -> Vec<(EventType, String, bool)> {
        let mut out = Vec::new();
        f(&mut |e: Event| out.push((e.event_type, e.key().to_string(), e.final_state_unknown)));
        out
    }

    /// Everything logged while `f` runs, one line per event, without colours.
    fn logged(f: impl FnOnce()) -> Vec<String> {
        #[derive(Clone, Default)]
        struct Buf(Arc<parking_lot::Mutex<Vec<u8>>>);
        impl Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let writer = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        let text = String::from_utf8(buf.0.lock().clone()).unwrap();
        text.lines().map(String::from).collect()
    }

    #[test]
    fn a_namespaced_kinds_object_without_a_namespace_is_neither_cached_nor_dispatched() {
        let s = store("ConfigMap", Some(true));
        let mut events = Vec::new();
        let lines = logged(|| {
            events = collect(|sink| {
                s.apply(object(Some("a"), "leak", 1), &mut |e| sink(e));
                // The server sends it again without its namespace, three times over.
                for rv in 2..5 {
                    s.apply(object(None, "leak", rv), &mut |e| sink(e));
                }
                s.delete(object(None, "leak", 5), &mut |e| sink(e));
                s.apply(object(Some("a"), "other", 6), &mut |e| sink(e));
            });
        });
        assert_eq!(
            events,
            [
                (EventType::Added, "a/leak".to_string(), false),
                (EventType::Added, "a/other".to_string(), false),
            ],
            "as if the refused events never came"
        );
        assert!(s.get_key(&crate::ObjectKey::new(None, "leak")).is_none());
        assert_eq!(s.get(Some("a"), "leak").unwrap().resource_version(), "1");
        let cluster_scoped_only = |ns: Option<&str>| ns.is_none();
        assert!(
            s.list_in(
                None,
                &LabelSelector::default(),
                Visibility::Only(&cluster_scoped_only)
            )
            .is_empty(),
            "nothing shows as cluster-scoped"
        );
        assert!(s.by_index("namespace", "").unwrap().is_empty());
        assert_eq!(s.refused_objects(), 4);
        let warnings: Vec<_> = lines.iter().filter(|l| l.contains("WARN")).collect();
        assert_eq!(
            warnings.len(),
            1,
            "logged once per key and reason: {lines:?}"
        );
        for field in [
            "kind=ConfigMap",
            "name=\"leak\"",
            "has no namespace",
            "object refused",
        ] {
            assert!(warnings[0].contains(field), "{field}: {}", warnings[0]);
        }
    }

    #[test]
    fn a_cluster_scoped_kinds_object_with_a_namespace_is_refused() {
        let s = store("Namespace", Some(false));
        let mut events = Vec::new();
        let lines = logged(|| {
            events = collect(|sink| {
                s.apply(object(None, "team-a", 1), &mut |e| sink(e));
                s.apply(object(Some("team-b"), "team-a", 2), &mut |e| sink(e));
                s.apply(object(Some("team-b"), "team-a", 3), &mut |e| sink(e));
                s.apply(object(Some("team-c"), "team-a", 4), &mut |e| sink(e));
            });
        });
        assert_eq!(events, [(EventType::Added, "team-a".to_string(), false)]);
        assert_eq!(s.len(), 1);
        assert_eq!(s.get(None, "team-a").unwrap().resource_version(), "1");
        assert_eq!(s.refused_objects(), 3);
        let warnings: Vec<_> = lines.iter().filter(|l| l.contains("WARN")).collect();
        assert_eq!(warnings.len(), 2, "one per key: {lines:?}");
        assert!(
            warnings.iter().all(|w| w.contains("has a namespace")),
            "{warnings:?}"
        );
    }

    #[test]
    fn a_relist_simply_lacks_a_refused_object() {
        let s = store("ConfigMap", Some(true));
        s.replace(
            vec![object(Some("a"), "leak", 1), object(Some("a"), "kept", 2)],
            &mut |_| {},
        );
        let mut relist = s.begin_relist();
        s.relist_push(&mut relist, object(None, "leak", 3));
        s.relist_push(&mut relist, object(Some("a"), "kept", 2));
        s.relist_push(&mut relist, object(Some("a"), "new", 4));
        assert_eq!(relist.len(), 2, "the refused object is not held");
        let events = collect(|sink| s.finish_relist(relist, &mut |e| sink(e)));
        let mut events = events;
        events.sort();
        assert_eq!(
            events,
            [
                (EventType::Added, "a/new".to_string(), false),
                (EventType::Deleted, "a/leak".to_string(), true),
            ]
        );
        assert_eq!(s.len(), 2);
        assert_eq!(s.refused_objects(), 1);
    }

    #[test]
    fn an_unknown_scope_checks_nothing() {
        let s = store("ConfigMap", None);
        s.apply(object(None, "x", 1), &mut |_| {});
        s.apply(object(Some("a"), "y", 2), &mut |_| {});
        assert_eq!(s.len(), 2);
        assert_eq!(s.refused_objects(), 0);
    }

    #[test]
    fn past_the_bound_refusals_are_counted_not_logged() {
        let s = store("ConfigMap", Some(true));
        let n = super::MAX_LOGGED + 10;
        let lines = logged(|| {
            for i in 0..n {
                s.apply(object(None, &format!("x{i}"), 1), &mut |_| {});
            }
        });
        assert_eq!(s.refused_objects(), n as u64);
        let warnings = lines.iter().filter(|l| l.contains("WARN")).count();
        assert_eq!(
            warnings,
            super::MAX_LOGGED + 1,
            "each key once, then one notice"
        );
        assert!(lines.last().unwrap().contains("only counted"));
    }
}
