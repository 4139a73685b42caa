//! The thread-safe cache of one informer: objects by key plus their indexes (client-go's
//! `Indexer` over a `ThreadSafeStore`).
//!
//! Writes come only from the informer's reflector loop, and each write hands its resulting
//! [`Event`]s to a sink *while the write lock is still held*. Readers that must see a consistent
//! cut together with the event stream (registering a late handler, resyncing one) run under
//! [`Store::read_consistent`], which excludes writers; so a handler that snapshots there and then
//! receives sink events sees every change exactly once.
//!
//! Every object is frozen in one place, `Store::freeze`, and an object on the wrong side of
//! its resource's scope is refused there (see [`crate::scope`]): never cached, indexed or
//! dispatched.

use std::sync::Arc;

use kube::core::ApiResource;
use parking_lot::RwLock;

use super::event::Event;
use super::index::{Buckets, IndexValues, Indices};
use super::object::{CachedObject, KeyMap, KeySet, ObjectKey, RawObject};
use super::scope::ScopeCheck;
use informant_apimachinery::{FieldPath, LabelSelector};

/// Positions of the built-in indexes.
const NAMESPACE_AT: usize = 0;
const LABEL_AT: usize = 1;

/// Objects a relist stores under one write lock (see `Store::finish_relist`).
const REPLACE_CHUNK: usize = 1024;

/// Which namespaces a query may touch.
#[derive(Clone, Copy)]
pub enum Visibility<'a> {
    /// Every namespace, and cluster-scoped objects.
    All,
    /// Only the namespaces the predicate admits (`None`: cluster-scoped objects). Objects
    /// elsewhere are not only left out of the answer but never touched while computing it, so
    /// how many there are does not show in how long the query takes.
    Only(&'a (dyn Fn(Option<&str>) -> bool + 'a)),
}

impl Visibility<'_> {
    /// Whether a namespace group (`""`: cluster-scoped) may be touched.
    fn allows(&self, group: &str) -> bool {
        match self {
            Visibility::All => true,
            Visibility::Only(f) => f((!group.is_empty()).then_some(group)),
        }
    }
}

/// An index of a store, as returned by [`Store::builtin_index`] or held by a [`FieldIndex`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexId(usize);

/// A hold on a field index of one store: the index is computed while someone holds it, and
/// identical paths share one index. Dropping the last hold removes it.
pub struct FieldIndex {
    store: Arc<Store>,
    at: usize,
}

impl FieldIndex {
    /// The index, for [`Store::lookup`].
    pub fn id(&self) -> IndexId {
        IndexId(self.at)
    }
}

impl std::fmt::Debug for FieldIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FieldIndex({})", self.at)
    }
}

impl Drop for FieldIndex {
    fn drop(&mut self) {
        self.store.release_field(self.at);
    }
}

/// A query against the store named something it does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// No index of that name is declared on this informer.
    #[error("unknown index `{index}` (declared: {declared})")]
    UnknownIndex {
        /// The index asked for.
        index: String,
        /// Comma-separated names that do exist.
        declared: String,
    },
}

/// Options fixed when a store is created.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Drop `metadata.managedFields` from cached objects (default: true; they are large and
    /// hardly any handler reads them).
    pub strip_managed_fields: bool,
    /// Whether the resource's objects live in namespaces, as discovery reports it (the factory
    /// sets it for each informer). An object on the wrong side is refused: see
    /// [`crate::scope`]. `None` (the default) checks nothing, for stores fed without discovery.
    pub namespaced: Option<bool>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            strip_managed_fields: true,
            namespaced: None,
        }
    }
}

struct Entry {
    object: Arc<CachedObject>,
    index_values: IndexValues,
}

/// A list arriving object by object, each frozen as it comes (see [`Store::begin_relist`]).
#[derive(Default)]
pub struct Relist {
    objects: Vec<Listed>,
}

impl Relist {
    /// Objects listed so far.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether nothing was listed so far.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }
}

/// One object of a [`Relist`].
enum Listed {
    /// The store held this very version when it was listed: shared, not copied.
    Stored(Arc<CachedObject>),
    /// A version the store did not hold, with its index values as of index layout `layout`.
    New {
        object: Arc<CachedObject>,
        index_values: IndexValues,
        layout: u64,
    },
}

impl Listed {
    fn object(&self) -> &Arc<CachedObject> {
        match self {
            Listed::Stored(object) | Listed::New { object, .. } => object,
        }
    }
}

#[derive(Default)]
struct Inner {
    objects: KeyMap<Entry>,
    indices: Indices,
    synced: bool,
}

impl Inner {
    fn insert(&mut self, key: ObjectKey, entry: Entry) -> Option<Entry> {
        let old = self.objects.insert(key.clone(), entry);
        let new_values = &self.objects[&key].index_values;
        match &old {
            // Most updates touch neither labels, owners nor indexed fields.
            Some(old) if old.index_values == *new_values => {}
            Some(old) => self.indices.update(&key, &old.index_values, new_values),
            None => self.indices.insert(&key, new_values),
        }
        old
    }

    fn remove(&mut self, key: &ObjectKey) -> Option<Entry> {
        let old = self.objects.remove(key)?;
        self.indices.remove(key, &old.index_values);
        Some(old)
    }
}

/// The cache of one informer: objects by key, indexes, and the synced flag.
pub struct Store {
    api_resource: ApiResource,
    options: StoreOptions,
    scope: ScopeCheck,
    inner: RwLock<Inner>,
}

impl Store {
    /// An empty, unsynced store for objects of `api_resource`.
    pub fn new(api_resource: ApiResource, options: StoreOptions) -> Self {
        Store {
            scope: ScopeCheck::new(&api_resource, options.namespaced),
            api_resource,
            options,
            inner: RwLock::new(Inner::default()),
        }
    }

    /// The options the store was created with.
    pub fn options(&self) -> &StoreOptions {
        &self.options
    }

    /// The resource this store caches.
    pub fn api_resource(&self) -> &ApiResource {
        &self.api_resource
    }

    /// Objects refused so far for being on the wrong side of the resource's scope.
    pub fn refused_objects(&self) -> u64 {
        self.scope.refused()
    }

    /// The cached form of `raw`, or `None` when it is refused: the one place every object
    /// passes before the store holds it.
    fn freeze(&self, raw: &mut RawObject) -> Option<CachedObject> {
        self.scope.admits(raw).then(|| {
            CachedObject::from_raw(raw, &self.api_resource, self.options.strip_managed_fields)
        })
    }

    /// Applies an added or modified object; emits `Added` or `Updated`, or nothing when the
    /// store already holds this exact resourceVersion (a watch resumed over known ground) or
    /// the object is refused.
    pub fn apply(&self, mut raw: RawObject, sink: &mut impl FnMut(Event)) {
        let Some(object) = self.freeze(&mut raw).map(Arc::new) else {
            return;
        };
        let mut inner = self.inner.write();
        if let Some(cur) = inner.objects.get(object.key())
            && cur.object.resource_version() == object.resource_version()
        {
            return;
        }
        let index_values = inner.indices.compute(&raw, &object);
        let key = object.key().clone();
        let entry = Entry {
            object: object.clone(),
            index_values,
        };
        match inner.insert(key, entry) {
            Some(old) => sink(Event::updated(old.object, object)),
            None => sink(Event::added(object, false)),
        }
    }

    /// Applies a delete carrying the object's final state; unknown keys are ignored, as
    /// client-go's DeltaFIFO does, since no handler ever saw them.
    pub fn delete(&self, mut raw: RawObject, sink: &mut impl FnMut(Event)) {
        let Some(object) = self.freeze(&mut raw).map(Arc::new) else {
            return;
        };
        let mut inner = self.inner.write();
        if inner.remove(object.key()).is_some() {
            sink(Event::deleted(object, false));
        }
    }

    /// Replaces the whole content with a fresh list, emitting the difference: `Added` for new
    /// keys, `Updated` for changed resourceVersions, `Deleted` with final-state-unknown for keys
    /// that vanished. The first replace marks the store synced and its events `initial`.
    pub fn replace(&self, raws: Vec<RawObject>, sink: &mut impl FnMut(Event)) {
        self.finish_relist(self.relist_of(raws), sink);
    }

    /// A whole list as a [`Relist`], ready for [`Store::finish_relist`].
    pub fn relist_of(&self, raws: Vec<RawObject>) -> Relist {
        let mut relist = self.begin_relist();
        for raw in raws {
            self.relist_push(&mut relist, raw);
        }
        relist
    }

    /// Starts a list that arrives object by object ([`Store::relist_push`]) and replaces the
    /// content once complete ([`Store::finish_relist`]), as [`Store::replace`] does at once.
    pub fn begin_relist(&self) -> Relist {
        Relist::default()
    }

    /// Adds one listed object to `relist`, frozen now: a list is held until it completes, and
    /// holding it decoded made the process's peak (and RSS at sync) the list in its decoded
    /// form on top of the frozen store. An object the store already holds at this
    /// resourceVersion is not copied at all; the relist shares the stored one.
    pub fn relist_push(&self, relist: &mut Relist, mut raw: RawObject) {
        // Serialization is the expensive part: done before taking any lock.
        let Some(object) = self.freeze(&mut raw) else {
            return;
        };
        let inner = self.inner.read();
        let listed = match inner.objects.get(object.key()) {
            Some(cur) if cur.object.resource_version() == object.resource_version() => {
                Listed::Stored(cur.object.clone())
            }
            _ => {
                let index_values = inner.indices.compute(&raw, &object);
                Listed::New {
                    object: Arc::new(object),
                    index_values,
                    layout: inner.indices.layout(),
                }
            }
        };
        relist.objects.push(listed);
    }

    /// Applies a complete `relist` (see [`Store::replace`] for the events it emits).
    pub fn finish_relist(&self, relist: Relist, sink: &mut impl FnMut(Event)) {
        let initial = !self.inner.read().synced;
        let mut listed = KeySet::with_capacity_and_hasher(relist.len(), Default::default());
        // A chunk per write lock: one lock hold and one burst of events per chunk, so listeners
        // wake per chunk, and readers are never held up for a whole list. Readers may see a
        // relist half applied, as client-go's indexer does while its DeltaFIFO drains a Replace.
        let mut objects = relist.objects.into_iter().peekable();
        while objects.peek().is_some() {
            let mut inner = self.inner.write();
            for item in objects.by_ref().take(REPLACE_CHUNK) {
                let key = item.object().key().clone();
                listed.insert(key.clone());
                let (object, index_values) = match item {
                    Listed::Stored(object) => {
                        if let Some(cur) = inner.objects.get(&key)
                            && Arc::ptr_eq(&cur.object, &object)
                        {
                            continue;
                        }
                        // Replaced since it was listed (not by the reflector, whose list this
                        // is): the listed version wins, as it would have from a fresh copy.
                        let values = inner.indices.compute_frozen(&object);
                        (object, values)
                    }
                    Listed::New {
                        object,
                        index_values,
                        layout,
                    } => {
                        if let Some(cur) = inner.objects.get(&key)
                            && cur.object.resource_version() == object.resource_version()
                        {
                            continue;
                        }
                        // Indexes declared or removed while the list arrived: recompute.
                        let values = if layout == inner.indices.layout() {
                            index_values
                        } else {
                            inner.indices.compute_frozen(&object)
                        };
                        (object, values)
                    }
                };
                let entry = Entry {
                    object: object.clone(),
                    index_values,
                };
                match inner.insert(key, entry) {
                    Some(old) => sink(Event::updated(old.object, object)),
                    None => sink(Event::added(object, initial)),
                }
            }
        }
        let mut inner = self.inner.write();
        let vanished: Vec<ObjectKey> = inner
            .objects
            .keys()
            .filter(|k| !listed.contains(*k))
            .cloned()
            .collect();
        for key in vanished {
            if let Some(old) = inner.remove(&key) {
                sink(Event::deleted(old.object, true));
            }
        }
        inner.synced = true;
    }

    /// Whether the first full list has been applied.
    pub fn has_synced(&self) -> bool {
        self.inner.read().synced
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.inner.read().objects.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The object under `namespace/name` (or `name` when cluster-scoped). A name or namespace
    /// no object can have (with a `/`, or an empty namespace) finds nothing, so no spelling of
    /// one key reaches another.
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<CachedObject>> {
        if name.contains('/') || namespace.is_some_and(|ns| ns.is_empty() || ns.contains('/')) {
            return None;
        }
        self.get_key(&ObjectKey::new(namespace, name))
    }

    /// The object under a key.
    pub fn get_key(&self, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        self.inner.read().objects.get(key).map(|e| e.object.clone())
    }

    /// Objects in `namespace` (all when `None`) matching `selector`.
    pub fn list(
        &self,
        namespace: Option<&str>,
        selector: &LabelSelector,
    ) -> Vec<Arc<CachedObject>> {
        self.list_in(namespace, selector, Visibility::All)
    }

    /// Objects in `namespace` (all visible ones when `None`) matching `selector`.
    ///
    /// Narrows through the namespace and label indexes, namespace by namespace, so the cost
    /// follows the smaller candidate set inside the visible namespaces, never the cache size.
    pub fn list_in(
        &self,
        namespace: Option<&str>,
        selector: &LabelSelector,
        visibility: Visibility<'_>,
    ) -> Vec<Arc<CachedObject>> {
        let inner = self.inner.read();
        let mut required: Vec<&Buckets> = Vec::new();
        for (k, v) in selector.required_pairs() {
            match inner.indices.lookup(LABEL_AT, &format!("{k}={v}")) {
                Some(b) => required.push(b),
                // A required value no object has: nothing can match.
                None => return Vec::new(),
            }
        }
        let keep = |o: &CachedObject| {
            namespace.is_none_or(|ns| o.namespace() == Some(ns)) && selector.matches(|k| o.label(k))
        };
        let mut out = Vec::new();
        // The smallest candidate set of one namespace group, filtered.
        let mut visit = |group: &str, base: Option<&KeySet>| {
            if !visibility.allows(group) {
                return;
            }
            let mut best = base;
            for b in &required {
                match b.get(group) {
                    None => return,
                    Some(set) if best.is_none_or(|c| set.len() < c.len()) => best = Some(set),
                    Some(_) => {}
                }
            }
            for key in best.into_iter().flatten() {
                if let Some(e) = inner.objects.get(key)
                    && keep(&e.object)
                {
                    out.push(e.object.clone());
                }
            }
        };
        match (namespace, required.first()) {
            (Some(ns), _) => {
                if let Some(keys) = inner
                    .indices
                    .lookup(NAMESPACE_AT, ns)
                    .and_then(|b| b.get(ns))
                    .filter(|_| !ns.is_empty())
                {
                    visit(ns, Some(keys));
                }
            }
            (None, Some(first)) => {
                for (group, _) in first.groups() {
                    visit(group, None);
                }
            }
            (None, None) if matches!(visibility, Visibility::All) => {
                return inner
                    .objects
                    .values()
                    .filter(|e| keep(&e.object))
                    .map(|e| e.object.clone())
                    .collect();
            }
            (None, None) => {
                for (group, b) in inner.indices.values(NAMESPACE_AT) {
                    visit(group, b.get(group));
                }
            }
        }
        out
    }

    /// A built-in index (`namespace`, `label`, `owner`) by name.
    pub fn builtin_index(name: &str) -> Option<IndexId> {
        Indices::builtin(name).map(IndexId)
    }

    /// Objects under value `value` of a built-in index; costs O(matches).
    pub fn by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<CachedObject>>, QueryError> {
        let id = Store::builtin_index(index).ok_or_else(|| QueryError::UnknownIndex {
            index: index.to_string(),
            declared: Indices::builtin_names().join(", "),
        })?;
        Ok(self.lookup(id, value, Visibility::All))
    }

    /// Objects under value `value` of an index, in the visible namespaces only; costs
    /// O(matches there).
    pub fn lookup(
        &self,
        index: IndexId,
        value: &str,
        visibility: Visibility<'_>,
    ) -> Vec<Arc<CachedObject>> {
        // The namespace index keeps cluster-scoped objects under "", which is no namespace.
        if index.0 == NAMESPACE_AT && value.is_empty() {
            return Vec::new();
        }
        let inner = self.inner.read();
        let Some(buckets) = inner.indices.lookup(index.0, value) else {
            return Vec::new();
        };
        buckets
            .groups()
            .filter(|(group, _)| visibility.allows(group))
            .flat_map(|(_, keys)| keys.iter())
            .filter_map(|k| inner.objects.get(k).map(|e| e.object.clone()))
            .collect()
    }

    /// Holds the field index computing `path`, declaring it (one JSON parse per cached
    /// object) unless someone holds it already.
    pub fn add_field_index(self: &Arc<Self>, path: FieldPath) -> FieldIndex {
        let mut inner = self.inner.write();
        let inner = &mut *inner;
        let (at, values) = inner
            .indices
            .hold_field(path, inner.objects.values().map(|e| &*e.object));
        if let Some(values) = values {
            let width = inner.indices.width();
            // Same map, unchanged since: the same iteration order as `hold_field` saw.
            for (entry, vals) in inner.objects.values_mut().zip(values) {
                let mut all = std::mem::take(&mut entry.index_values).into_vec();
                all.resize(width, Box::default());
                all[at] = vals;
                entry.index_values = all.into_boxed_slice();
            }
        }
        FieldIndex {
            store: self.clone(),
            at,
        }
    }

    fn release_field(&self, at: usize) {
        let mut inner = self.inner.write();
        if inner.indices.release_field(at) {
            for entry in inner.objects.values_mut() {
                if let Some(vals) = entry.index_values.get_mut(at) {
                    *vals = Box::default();
                }
            }
        }
    }

    /// How many field indexes are declared (each costs work on every change).
    pub fn field_index_count(&self) -> usize {
        self.inner.read().indices.field_count()
    }

    /// Runs `f` over every cached object while writers are excluded, so that whatever `f`
    /// enqueues is ordered exactly between the writes before and after it.
    /// `f` also learns whether the store has synced, consistently with the objects it sees.
    pub fn read_consistent<R>(
        &self,
        f: impl FnOnce(bool, &mut dyn Iterator<Item = &Arc<CachedObject>>) -> R,
    ) -> R {
        let inner = self.inner.read();
        let mut iter = inner.objects.values().map(|e| &e.object);
        f(inner.synced, &mut iter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventType;
    use kube::core::GroupVersionKind;

    fn store() -> Store {
        Store::new(
            ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Pod")),
            StoreOptions::default(),
        )
    }

    fn pod(ns: &str, name: &str, rv: u32, labels: &str, owner: Option<&str>) -> RawObject {
        let owners = owner
            .map(|o| format!(r#","ownerReferences":[{{"apiVersion":"v1","kind":"X","name":"o","uid":"{o}"}}]"#))
            .unwrap_or_default();
        let json = format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"{ns}","uid":"uid-{name}","resourceVersion":"{rv}","labels":{{{labels}}}{owners}}},"spec":{{"nodeName":"node-{rv}"}}}}"#
        );
        serde_json::from_str(&json).unwrap()
    }

    fn collect(f: impl FnOnce(&mut dyn FnMut(Event))) -> Vec<(EventType, String, bool)> {
        let mut out = Vec::new();
        f(&mut |e: Event| out.push((e.event_type, e.key().to_string(), e.final_state_unknown)));
        out.sort_by(|a, b| a.1.cmp(&b.1));
        out
    }

    fn names(v: Vec<Arc<CachedObject>>) -> Vec<String> {
        let mut n: Vec<String> = v.iter().map(|o| o.key().to_string()).collect();
        n.sort();
        n
    }

    fn sel(s: &str) -> LabelSelector {
        s.parse().unwrap()
    }

    #[test]
    fn indexes_follow_add_update_delete_and_label_changes() {
        let s = store();
        let mut sink = |_e: Event| {};
        s.apply(pod("a", "p1", 1, r#""app":"web""#, Some("rs1")), &mut sink);
        s.apply(pod("a", "p2", 2, r#""app":"db""#, Some("rs1")), &mut sink);
        s.apply(pod("b", "p3", 3, r#""app":"web""#, None), &mut sink);
        assert_eq!(
            names(s.by_index("label", "app=web").unwrap()),
            ["a/p1", "b/p3"]
        );
        assert_eq!(names(s.by_index("owner", "rs1").unwrap()), ["a/p1", "a/p2"]);
        assert_eq!(
            names(s.by_index("namespace", "a").unwrap()),
            ["a/p1", "a/p2"]
        );

        // Label change moves the key between index values; owner removed.
        s.apply(pod("a", "p1", 4, r#""app":"db""#, None), &mut sink);
        assert_eq!(names(s.by_index("label", "app=web").unwrap()), ["b/p3"]);
        assert_eq!(
            names(s.by_index("label", "app=db").unwrap()),
            ["a/p1", "a/p2"]
        );
        assert_eq!(names(s.by_index("owner", "rs1").unwrap()), ["a/p2"]);

        // Update that keeps a value must keep it indexed.
        s.apply(pod("a", "p2", 5, r#""app":"db""#, Some("rs1")), &mut sink);
        assert_eq!(names(s.by_index("owner", "rs1").unwrap()), ["a/p2"]);

        s.delete(pod("a", "p2", 6, r#""app":"db""#, Some("rs1")), &mut sink);
        assert!(s.by_index("owner", "rs1").unwrap().is_empty());
        assert_eq!(names(s.by_index("label", "app=db").unwrap()), ["a/p1"]);
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn field_indexes_are_held_shared_and_released() {
        let s = Arc::new(store());
        let mut sink = |_e: Event| {};
        s.apply(pod("a", "p1", 1, "", None), &mut sink);
        let node: FieldPath = "spec.nodeName".parse().unwrap();
        let held = s.add_field_index(node.clone());
        let look = |id, v: &str| names(s.lookup(id, v, Visibility::All));
        assert_eq!(look(held.id(), "node-1"), ["a/p1"]);
        s.apply(pod("a", "p1", 2, "", None), &mut sink);
        s.apply(pod("a", "p9", 2, "", None), &mut sink);
        assert!(look(held.id(), "node-1").is_empty());
        assert_eq!(look(held.id(), "node-2"), ["a/p1", "a/p9"]);
        // The same path again shares the index; another path gets its own.
        let again = s.add_field_index(node);
        assert_eq!(again.id(), held.id());
        let other = s.add_field_index("metadata.uid".parse().unwrap());
        assert_ne!(other.id(), held.id());
        assert_eq!(s.field_index_count(), 2);
        drop(held);
        assert_eq!(look(again.id(), "node-2"), ["a/p1", "a/p9"], "still held");
        drop(again);
        assert_eq!(s.field_index_count(), 1);
        // A freed position is reused, and filled from the objects already cached.
        let reused = s.add_field_index("spec.nodeName".parse().unwrap());
        assert_eq!(look(reused.id(), "node-2"), ["a/p1", "a/p9"]);
        assert_eq!(look(other.id(), "uid-p1"), ["a/p1"]);
        let err = s.by_index("nodes", "x").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown index `nodes` (declared: namespace, label, owner)"
        );
    }

    #[test]
    fn odd_spellings_of_a_key_find_nothing() {
        let s = store();
        let mut sink = |_e: Event| {};
        s.apply(pod("team-b", "b-secret", 1, "", None), &mut sink);
        assert!(s.get(Some("team-b"), "b-secret").is_some());
        assert!(s.get(None, "team-b/b-secret").is_none());
        assert!(s.get(Some("team-b/b-secret"), "").is_none());
        assert!(s.get(Some(""), "team-b/b-secret").is_none());
        assert!(s.get(Some("team"), "b/b-secret").is_none());
        assert!(s.list(Some(""), &sel("")).is_empty());
        assert!(s.by_index("namespace", "").unwrap().is_empty());
    }

    #[test]
    fn a_limited_query_never_touches_other_namespaces() {
        let s = store();
        let mut sink = |_e: Event| {};
        s.apply(pod("a", "p1", 1, r#""app":"web""#, None), &mut sink);
        for i in 0..50 {
            s.apply(
                pod("b", &format!("q{i}"), 2, r#""app":"web""#, None),
                &mut sink,
            );
        }
        let asked = std::cell::RefCell::new(Vec::new());
        let only_a = |ns: Option<&str>| {
            asked.borrow_mut().push(ns.map(str::to_string));
            ns == Some("a")
        };
        let vis = Visibility::Only(&only_a);
        assert_eq!(names(s.list_in(None, &sel("app=web"), vis)), ["a/p1"]);
        assert_eq!(names(s.list_in(None, &sel(""), vis)), ["a/p1"]);
        assert_eq!(names(s.list_in(None, &sel("!tier"), vis)), ["a/p1"]);
        let label = Store::builtin_index("label").unwrap();
        assert_eq!(names(s.lookup(label, "app=web", vis)), ["a/p1"]);
        // Each query asked about each namespace group once, not about each of b's objects.
        assert_eq!(asked.borrow().len(), 8, "{:?}", asked.borrow());
    }

    #[test]
    fn list_by_namespace_and_selector() {
        let s = store();
        let mut sink = |_e: Event| {};
        s.apply(
            pod("a", "p1", 1, r#""app":"web","tier":"fe""#, None),
            &mut sink,
        );
        s.apply(pod("a", "p2", 2, r#""app":"web""#, None), &mut sink);
        s.apply(
            pod("b", "p3", 3, r#""app":"web","tier":"fe""#, None),
            &mut sink,
        );
        assert_eq!(names(s.list(None, &sel(""))), ["a/p1", "a/p2", "b/p3"]);
        assert_eq!(names(s.list(Some("a"), &sel("app=web"))), ["a/p1", "a/p2"]);
        assert_eq!(names(s.list(Some("a"), &sel("tier"))), ["a/p1"]);
        assert_eq!(names(s.list(None, &sel("app=web,!tier"))), ["a/p2"]);
        assert_eq!(
            names(s.list(None, &sel("tier in (fe),app"))),
            ["a/p1", "b/p3"]
        );
        assert!(s.list(Some("zzz"), &sel("")).is_empty());
        assert!(s.list(None, &sel("app=nope")).is_empty());
    }

    #[test]
    fn replace_diffs_against_the_store() {
        let s = store();
        let first = collect(|sink| {
            s.replace(
                vec![
                    pod("a", "keep", 1, "", None),
                    pod("a", "change", 1, "", None),
                    pod("a", "gone", 1, "", None),
                ],
                &mut |e| sink(e),
            )
        });
        assert!(s.has_synced());
        assert_eq!(first.len(), 3);
        assert!(first.iter().all(|(t, _, _)| *t == EventType::Added));

        let mut initial_flags = Vec::new();
        let events = collect(|sink| {
            s.replace(
                vec![
                    pod("a", "keep", 1, "", None),
                    pod("a", "change", 2, "", None),
                    pod("a", "new", 3, "", None),
                ],
                &mut |e| {
                    initial_flags.push(e.initial);
                    sink(e)
                },
            )
        });
        assert_eq!(
            events,
            vec![
                (EventType::Updated, "a/change".to_string(), false),
                (EventType::Deleted, "a/gone".to_string(), true),
                (EventType::Added, "a/new".to_string(), false),
            ]
        );
        assert!(
            initial_flags.iter().all(|i| !i),
            "only the first list is initial"
        );
        assert!(s.get(Some("a"), "gone").is_none());
        assert_eq!(s.get(Some("a"), "change").unwrap().resource_version(), "2");
    }

    #[test]
    fn a_relist_shares_unchanged_objects_and_follows_indexes_declared_while_it_arrives() {
        let s = Arc::new(store());
        let mut sink = |_e: Event| {};
        s.replace(
            vec![
                pod("a", "keep", 1, "", None),
                pod("a", "change", 1, "", None),
            ],
            &mut sink,
        );
        let kept = s.get(Some("a"), "keep").unwrap();
        let mut relist = s.begin_relist();
        s.relist_push(&mut relist, pod("a", "keep", 1, "", None));
        s.relist_push(&mut relist, pod("a", "change", 2, "", None));
        // Declared after `change` was frozen with the old set of indexes, before `new`.
        let node = s.add_field_index("spec.nodeName".parse().unwrap());
        s.relist_push(&mut relist, pod("a", "new", 3, "", None));
        assert_eq!(relist.len(), 3);
        let events = collect(|sink| s.finish_relist(relist, &mut |e| sink(e)));
        assert_eq!(
            events,
            vec![
                (EventType::Updated, "a/change".to_string(), false),
                (EventType::Added, "a/new".to_string(), false),
            ]
        );
        assert!(
            Arc::ptr_eq(&kept, &s.get(Some("a"), "keep").unwrap()),
            "an unchanged object is the stored copy, not a second one"
        );
        let look = |v: &str| names(s.lookup(node.id(), v, Visibility::All));
        assert_eq!(look("node-1"), ["a/keep"]);
        assert_eq!(look("node-2"), ["a/change"], "recomputed for the new index");
        assert_eq!(look("node-3"), ["a/new"]);
    }

    #[test]
    fn same_resource_version_is_not_an_event_and_unknown_deletes_are_ignored() {
        let s = store();
        let events = collect(|sink| {
            s.apply(pod("a", "p", 1, "", None), &mut |e| sink(e));
            s.apply(pod("a", "p", 1, "", None), &mut |e| sink(e));
            s.delete(pod("a", "ghost", 1, "", None), &mut |e| sink(e));
        });
        assert_eq!(events, vec![(EventType::Added, "a/p".to_string(), false)]);
    }
}
