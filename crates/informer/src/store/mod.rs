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

mod relist;
mod restore;
#[cfg(test)]
mod tests;

pub use relist::Relist;
pub use restore::{RestoreReport, Restored};

/// Positions of the built-in indexes.
const NAMESPACE_AT: usize = 0;
const LABEL_AT: usize = 1;

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
    /// The change that stored this version.
    seq: u64,
}

#[derive(Default)]
struct Inner {
    objects: KeyMap<Entry>,
    indices: Indices,
    synced: bool,
    /// The number of the last change: every insert, update and delete takes the next one, so
    /// a consumer that handled every event up to `n` has seen every change up to `n`.
    seq: u64,
}

impl Inner {
    /// The number of the change being made now.
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

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
        let meta = &raw.metadata;
        let name = meta.name.as_deref().unwrap_or_default();
        self.scope.admits(meta.namespace.as_deref(), name).then(|| {
            CachedObject::from_raw(raw, &self.api_resource, self.options.strip_managed_fields)
        })
    }

    /// `raw` in the form this store would cache it (scope checked, managed fields stripped as
    /// configured), or `None` when the store would refuse it: for objects read from the server
    /// outside the informer's own list and watch.
    pub fn prepare(&self, mut raw: RawObject) -> Option<Arc<CachedObject>> {
        self.freeze(&mut raw).map(Arc::new)
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
        let seq = inner.next_seq();
        let entry = Entry {
            object: object.clone(),
            index_values,
            seq,
        };
        match inner.insert(key, entry) {
            Some(old) => sink(Event::updated(old.object, object).at(seq)),
            None => sink(Event::added(object, false).at(seq)),
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
            let seq = inner.next_seq();
            sink(Event::deleted(object, false).at(seq));
        }
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

    /// Runs `f` on the object under `key` (or `None`) while writers are excluded, so that
    /// whatever `f` enqueues is ordered exactly between the writes before and after it.
    pub fn read_key_consistent<R>(
        &self,
        key: &ObjectKey,
        f: impl FnOnce(Option<&Arc<CachedObject>>) -> R,
    ) -> R {
        let inner = self.inner.read();
        f(inner.objects.get(key).map(|e| &e.object))
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
