//! A cache restored from disk, and what a handler that had handled it up to some change needs
//! to see to be current again.

use std::sync::Arc;

use super::{Entry, IndexValues, Store};
use crate::event::Event;
use crate::object::{CachedObject, Frozen, KeyMap, ObjectKey, RawObject, StoredObject};

/// One key's versions, oldest first (`None`: deleted at that change).
type Thawed = Vec<(u64, Option<Arc<CachedObject>>)>;

/// What one of [`Store::restore`]'s workers thawed: each key's versions, with the index values
/// of its newest version when that is an object (computed for the indexes of `layout`).
#[derive(Default)]
struct ThawedPart {
    keys: Vec<(ObjectKey, Thawed, Option<IndexValues>)>,
    layout: u64,
    unreadable: usize,
}

/// One key's stored versions as given to [`Store::restore`]: `(change, object)`, `None` a delete.
type Stored<K, J> = (K, Vec<(u64, Option<J>)>);

/// The versions a persisted cache held per key; kept after [`Store::restore`] for handlers
/// resuming from a change among them. Also what a handler saw elsewhere
/// ([`Restored::from_objects`]), to register it from that state.
#[derive(Default)]
pub struct Restored {
    versions: KeyMap<Thawed>,
    /// Each key with its newest version's change, ascending: a handler resuming from a change
    /// looks only at the keys stored after it, not at every key.
    by_newest: Vec<(u64, ObjectKey)>,
    /// The store's last change once restored: an entry numbered up to it is as restored.
    seq: u64,
    /// Keys whose newest version is an object (what the restore cached).
    live: usize,
}

impl Restored {
    /// A state seen as a whole, e.g. a list at a resourceVersion (see
    /// [`SharedInformer::list_at`](crate::SharedInformer::list_at)): one version per key,
    /// numbered 0, so [`Store::changes_since`]`(.., 0, ..)` diffs it against the cache. Not
    /// what the store was restored from: every cached entry counts as changed after it.
    pub fn from_objects(objects: Vec<Arc<CachedObject>>) -> Restored {
        let mut versions = KeyMap::with_capacity_and_hasher(objects.len(), Default::default());
        for o in objects {
            versions.insert(o.key().clone(), vec![(0, Some(o))]);
        }
        Restored {
            live: versions.len(),
            versions,
            by_newest: Vec::new(),
            seq: 0,
        }
    }

    /// Each key's newest version that is an object: the state as restored (or as seen).
    pub fn objects(&self) -> impl Iterator<Item = &Arc<CachedObject>> {
        self.versions
            .values()
            .filter_map(|list| list.last().and_then(|(_, o)| o.as_ref()))
    }

    /// Keys it holds versions of.
    pub fn len(&self) -> usize {
        self.versions.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.versions.is_empty()
    }
}

impl std::fmt::Debug for Restored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Restored")
            .field("keys", &self.versions.len())
            .finish()
    }
}

/// What [`Store::restore`] found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RestoreReport {
    /// Objects now cached.
    pub objects: usize,
    /// Stored versions that could not be read, or belong to another key or scope: left out.
    pub unreadable: usize,
}

impl Store {
    /// Fills an empty store with a persisted cache: per key, its versions as `(change, object)`
    /// oldest first, `None` for a delete; an object is its JSON, with the frozen metadata stored
    /// beside it when there is some ([`StoredObject`]), which spares parsing the JSON. The last
    /// version of each key is cached, numbered as stored; later changes are numbered after
    /// `seq` and after every stored version. The store counts as synced, so a relist after this
    /// is diffed against it as any relist is, and its events are not initial.
    pub fn restore<K, J>(
        &self,
        versions: impl IntoIterator<Item = (K, Vec<(u64, Option<J>)>)>,
        seq: u64,
    ) -> (Restored, RestoreReport)
    where
        K: AsRef<str> + Send,
        J: Into<StoredObject> + Send,
    {
        // Thawing (parsing, where no frozen metadata was stored) and computing index values
        // are the work: spread over the cores, as a restart waits for it. Only the inserts
        // take the write lock.
        let all: Vec<Stored<K, J>> = versions.into_iter().collect();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let chunk = all.len().div_ceil(threads).max(1024);
        let mut chunks: Vec<Vec<Stored<K, J>>> = Vec::new();
        let mut rest = all.into_iter();
        loop {
            let part: Vec<_> = rest.by_ref().take(chunk).collect();
            if part.is_empty() {
                break;
            }
            chunks.push(part);
        }
        let thawed: Vec<ThawedPart> = std::thread::scope(|scope| {
            let workers: Vec<_> = chunks
                .into_iter()
                .map(|part| scope.spawn(move || self.thaw_all(part)))
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().unwrap_or_default())
                .collect()
        });
        let mut restored = Restored::default();
        let mut report = RestoreReport::default();
        let mut live = Vec::new();
        for part in thawed {
            report.unreadable += part.unreadable;
            restored.versions.reserve(part.keys.len());
            for (key, list, values) in part.keys {
                if let (Some(values), Some((at, Some(object)))) = (values, list.last()) {
                    live.push((key.clone(), *at, object.clone(), values, part.layout));
                }
                restored.versions.insert(key, list);
            }
        }
        restored.by_newest = restored
            .versions
            .iter()
            .filter_map(|(key, list)| Some((list.last()?.0, key.clone())))
            .collect();
        restored.by_newest.sort_unstable_by_key(|(at, _)| *at);
        restored.live = live.len();
        let mut inner = self.inner.write();
        inner.objects.reserve(live.len());
        for (key, at, object, values, layout) in live {
            // A field index declared since they were computed needs them again.
            let index_values = if layout == inner.indices.layout() {
                values
            } else {
                inner.indices.compute_frozen(&object)
            };
            let entry = Entry {
                object,
                index_values,
                seq: at,
            };
            inner.insert(key, entry);
        }
        report.objects = inner.objects.len();
        let last = restored
            .versions
            .values()
            .filter_map(|l| l.last())
            .map(|(at, _)| *at);
        inner.seq = last.fold(inner.seq.max(seq), u64::max);
        inner.synced = true;
        restored.seq = inner.seq;
        (restored, report)
    }

    /// Thaws the stored versions of some keys: each key's, oldest first, the index values of
    /// its newest when that is an object, and how many versions could not be read.
    fn thaw_all<K: AsRef<str>, J: Into<StoredObject>>(
        &self,
        part: Vec<Stored<K, J>>,
    ) -> ThawedPart {
        let mut out = Vec::with_capacity(part.len());
        let mut unreadable = 0;
        for (key, list) in part {
            let mut thawed = Vec::with_capacity(list.len());
            let mut this_key = None;
            for (at, json) in list {
                let object = match json {
                    None => None,
                    Some(json) => match self.thaw(json.into(), key.as_ref()) {
                        Some(o) => Some(Arc::new(o)),
                        None => {
                            unreadable += 1;
                            continue;
                        }
                    },
                };
                if let Some(o) = &object {
                    this_key = Some(o.key().clone());
                }
                thawed.push((at, object));
            }
            thawed.sort_by_key(|(at, _)| *at);
            if let Some(key) = this_key {
                out.push((key, thawed));
            }
        }
        let inner = self.inner.read();
        let keys = out
            .into_iter()
            .map(|(key, list)| {
                let values = match list.last() {
                    Some((_, Some(object))) => Some(inner.indices.compute_frozen(object)),
                    _ => None,
                };
                (key, list, values)
            })
            .collect();
        ThawedPart {
            keys,
            layout: inner.indices.layout(),
            unreadable,
        }
    }

    /// A stored object's cached form, when it reads as an object of this store under `key`:
    /// from its frozen metadata when that reads and its JSON is as this store caches it, else
    /// from its JSON, parsed.
    fn thaw(&self, stored: StoredObject, key: &str) -> Option<CachedObject> {
        let (json, frozen) = stored.into_parts();
        let strip = self.options.strip_managed_fields;
        if let Some(frozen) = Frozen::read(&frozen).filter(|f| f.cached_form(strip)) {
            if !self.scope.admits(frozen.namespace(), frozen.name()) {
                return None;
            }
            let object = frozen.object(json);
            return (object.key().as_str() == key).then_some(object);
        }
        let mut raw: RawObject = serde_json::from_str(&json).ok()?;
        let meta = &raw.metadata;
        let name = meta.name.as_deref().unwrap_or_default();
        if !self.scope.admits(meta.namespace.as_deref(), name) {
            return None;
        }
        let object = CachedObject::from_stored(
            &mut raw,
            json,
            &self.api_resource,
            self.options.strip_managed_fields,
        );
        (object.key().as_str() == key).then_some(object)
    }

    /// Calls `f` with the events that bring a handler current which had handled every change
    /// up to `since` of a cache restored as `restored`, and whether the store has synced, while
    /// writers are excluded (so `f` can register the handler with no gap and no duplicate):
    /// `Updated` from the version it saw to the one cached, `Deleted` (final state unknown) with
    /// the version it saw, `Added` for objects it never saw; nothing for objects it has seen
    /// as they are. Events come in change order.
    ///
    /// Each event's [`version`](Event::version) is the lowest resourceVersion it may stand
    /// for: an update's is just above the version seen, a delete's the version seen, and an
    /// add's `1` (when the object was created is not kept); see [`Store::changes_after`] to
    /// bound adds.
    ///
    /// Every plugin resuming at a restart calls this with the store's writers excluded, so it
    /// looks only at what can differ: keys stored after `since`, and entries changed since the
    /// restore; every restored key only when some restored object has been deleted since.
    pub fn changes_since<R>(
        &self,
        restored: &Restored,
        since: u64,
        f: impl FnOnce(bool, Vec<Event>) -> R,
    ) -> R {
        self.changes_after(restored, since, None, f)
    }

    /// [`Store::changes_since`] for a state `restored` known to be the whole state at
    /// resourceVersion `floor`: the objects it lacks were created after `floor`, so their adds
    /// stand for versions from `floor + 1` on.
    pub fn changes_after<R>(
        &self,
        restored: &Restored,
        since: u64,
        floor: Option<u64>,
        f: impl FnOnce(bool, Vec<Event>) -> R,
    ) -> R {
        let added_from = floor.map_or(1, |f| f + 1);
        let inner = self.inner.read();
        let mut events = Vec::new();
        // Keys with a stored version after `since`.
        let after = restored.by_newest.partition_point(|(at, _)| *at <= since);
        for (_, key) in &restored.by_newest[after..] {
            if let Some(list) = restored.versions.get(key) {
                events.extend(change(list, since, inner.objects.get(key), added_from));
            }
        }
        // Entries changed after `since`, and how many restored objects are still cached.
        let mut kept = 0;
        for (key, now) in &inner.objects {
            if now.seq <= restored.seq {
                // As restored (later changes are numbered after it): its key's newest version.
                kept += 1;
                if now.seq <= since {
                    continue;
                }
            }
            let list = restored.versions.get(key);
            if now.seq > restored.seq && matches!(list.and_then(|l| l.last()), Some((_, Some(_)))) {
                kept += 1;
            }
            match list {
                None if now.seq > since => {
                    events.push(
                        Event::added(now.object.clone(), false)
                            .at(now.seq)
                            .since_version(added_from),
                    );
                }
                None => {}
                // Seen above.
                Some(list) if list.last().is_some_and(|(at, _)| *at > since) => {}
                Some(list) => events.extend(change(list, since, Some(now), added_from)),
            }
        }
        // Restored objects deleted since the restore, stored up to `since` (those after it
        // were seen above).
        if kept < restored.live {
            for (key, list) in &restored.versions {
                let seen_newest = list.last().is_some_and(|(at, _)| *at <= since);
                if seen_newest && !inner.objects.contains_key(key) {
                    events.extend(change(list, since, None, added_from));
                }
            }
        }
        events.sort_by_key(|e| e.seq);
        f(inner.synced, events)
    }

    /// [`Store::changes_since`] as a scan of every restored key and every entry: what the fast
    /// path is checked against.
    #[cfg(test)]
    pub(crate) fn changes_since_scanning_all(&self, restored: &Restored, since: u64) -> Vec<Event> {
        let inner = self.inner.read();
        let mut events = Vec::new();
        for (key, list) in &restored.versions {
            events.extend(change(list, since, inner.objects.get(key), 1));
        }
        for (key, now) in &inner.objects {
            if now.seq > since && !restored.versions.contains_key(key) {
                events.push(
                    Event::added(now.object.clone(), false)
                        .at(now.seq)
                        .since_version(1),
                );
            }
        }
        events.sort_by_key(|e| e.seq);
        events
    }

    /// The number of the last change made.
    pub fn seq(&self) -> u64 {
        self.inner.read().seq
    }
}

/// The event that brings a handler which had handled every change up to `since` from a key's
/// restored versions `list` to its cached entry `now`, if any; an add stands for versions from
/// `added_from` on (see [`Event::version`]).
fn change(list: &Thawed, since: u64, now: Option<&Entry>, added_from: u64) -> Option<Event> {
    let seen = list
        .iter()
        .rev()
        .find(|(at, _)| *at <= since)
        .and_then(|(_, o)| o.as_ref());
    match (seen, now) {
        // Some change after `since` removed it; which one is not kept.
        (Some(seen), None) => Some(Event::deleted(seen.clone(), true).at(since + 1)),
        (None, Some(now)) => Some(
            Event::added(now.object.clone(), false)
                .at(now.seq)
                .since_version(added_from),
        ),
        (Some(seen), Some(now))
            if now.seq > since && seen.resource_version() != now.object.resource_version() =>
        {
            let from = crate::cursor::version_of(seen.resource_version()).map_or(0, |v| v + 1);
            Some(
                Event::updated(seen.clone(), now.object.clone())
                    .at(now.seq)
                    .since_version(from),
            )
        }
        _ => None,
    }
}
