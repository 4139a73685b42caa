//! The object store: one table per resource, one global resourceVersion, and the bounded watch
//! history. Objects are immutable serialized JSON shared (by `Arc`) between the table, the history
//! and responses; a write replaces the `Arc`, never mutates it.
//!
//! Every mutation happens under the write lock and appends to the history before the lock is
//! released, so a reader that snapshots a table and the counter together, then follows the history
//! from that counter, sees every later change exactly once.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{RwLock, RwLockWriteGuard};
use serde_json::Value;
use tokio::sync::watch;

use super::{Error, Result};

/// A stored object version.
#[derive(Debug)]
pub(crate) struct Obj {
    /// The full object as JSON.
    pub json: Bytes,
    /// `metadata.labels`, pre-extracted so selectors never parse `json`.
    pub labels: Vec<(Box<str>, Box<str>)>,
    pub rv: u64,
}

impl Obj {
    /// Serializes `value` (whose metadata.resourceVersion is already `rv`).
    pub fn new(value: &Value, rv: u64) -> Obj {
        let labels = value["metadata"]["labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.as_str().into(), v.as_str().unwrap_or_default().into()))
                    .collect()
            })
            .unwrap_or_default();
        // Serializing a Value cannot fail: keys are strings and numbers are finite.
        let json = serde_json::to_vec(value).unwrap_or_default();
        // to_vec grows by doubling, and shrinking in place may keep the block at its old size
        // (mimalloc does, down to half): a copy at the exact length is what lives on.
        Obj {
            json: Bytes::copy_from_slice(&json),
            labels,
            rv,
        }
    }

    /// Parses the stored JSON back into a value. Every write bounds how deep an object nests
    /// (`metadata::check_depth`) so that this succeeds; should it fail all the same, the error
    /// stops a write from building on a null where the object was, which would drop its
    /// identity (namespace, uid, creationTimestamp) with it.
    pub fn value(&self) -> Result<Value> {
        serde_json::from_slice(&self.json).map_err(|source| Error::Unreadable { source })
    }
}

/// Watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One history entry.
#[derive(Debug)]
pub(crate) struct Event {
    pub rv: u64,
    pub kind: EventType,
    pub res: Arc<str>,
    pub namespace: Box<str>,
    pub name: Box<str>,
    pub obj: Arc<Obj>,
    /// The version this event replaced (MODIFIED, DELETED), so selector watches can turn a
    /// change that leaves or enters the selection into DELETED/ADDED like the apiserver's watch
    /// cache, and an exact list can undo the event.
    pub prev: Option<Arc<Obj>>,
}

/// Table key: (namespace or "" for cluster-scoped, name); BTreeMap order is the list order.
pub(crate) type Key = (Box<str>, Box<str>);

pub(crate) struct Inner {
    rv: u64,
    tables: HashMap<Arc<str>, BTreeMap<Key, Arc<Obj>>>,
    history: VecDeque<Arc<Event>>,
    /// Every event with rv > floor is still in `history`.
    floor: u64,
    capacity: usize,
}

/// The store; see the module docs for the consistency contract.
pub(crate) struct Store {
    inner: RwLock<Inner>,
    /// Latest committed resourceVersion, for waking watches.
    latest: watch::Sender<u64>,
}

/// A write transaction: the store's write lock. Dropping it publishes the new resourceVersion.
pub(crate) struct Tx<'a> {
    guard: RwLockWriteGuard<'a, Inner>,
    latest: &'a watch::Sender<u64>,
}

impl Store {
    pub fn new(capacity: usize) -> Store {
        Store {
            inner: RwLock::new(Inner {
                rv: 0,
                tables: HashMap::new(),
                history: VecDeque::new(),
                floor: 0,
                capacity: capacity.max(1),
            }),
            latest: watch::channel(0).0,
        }
    }

    pub fn write(&self) -> Tx<'_> {
        Tx {
            guard: self.inner.write(),
            latest: &self.latest,
        }
    }

    /// Subscribes to resourceVersion advances.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.latest.subscribe()
    }

    pub fn current_rv(&self) -> u64 {
        self.inner.read().rv
    }

    pub fn get(&self, res: &str, namespace: &str, name: &str) -> Option<Arc<Obj>> {
        let inner = self.inner.read();
        inner
            .tables
            .get(res)?
            .get(&(namespace.into(), name.into()))
            .cloned()
    }

    /// Objects of `res` (optionally in one namespace) strictly after `after`, with the current
    /// resourceVersion, stopping once `take` returns false.
    pub fn scan(
        &self,
        res: &str,
        namespace: Option<&str>,
        after: Option<&Key>,
        mut take: impl FnMut(&Key, &Arc<Obj>) -> bool,
    ) -> u64 {
        use std::ops::Bound;
        let inner = self.inner.read();
        let Some(table) = inner.tables.get(res) else {
            return inner.rv;
        };
        let start = match (after, namespace) {
            (Some(k), _) => Bound::Excluded(k.clone()),
            (None, Some(ns)) => Bound::Included((ns.into(), "".into())),
            (None, None) => Bound::Unbounded,
        };
        for (k, obj) in table.range((start, Bound::Unbounded)) {
            if namespace.is_some_and(|ns| &*k.0 != ns) {
                break;
            }
            if !take(k, obj) {
                break;
            }
        }
        inner.rv
    }

    /// Like [`scan`](Self::scan), but the objects as they were at resourceVersion `at`: the
    /// current table with every later event of `res` undone (an add removed, a modification or
    /// a delete put back to the version it replaced). 410 when `at` is older than the history
    /// keeps, 504 when it is newer than anything written.
    pub fn scan_at(
        &self,
        res: &str,
        namespace: Option<&str>,
        after: Option<&Key>,
        at: u64,
        mut take: impl FnMut(&Key, &Arc<Obj>) -> bool,
    ) -> Result<()> {
        use std::ops::Bound;
        let inner = self.inner.read();
        if at > inner.rv {
            return Err(Error::TooLargeResourceVersion {
                requested: at,
                current: inner.rv,
            });
        }
        if at < inner.floor {
            return Err(Error::Expired {
                requested: at,
                oldest: inner.floor,
            });
        }
        let in_scope =
            |k: &Key| namespace.is_none_or(|ns| &*k.0 == ns) && after.is_none_or(|a| k > a);
        // Per key, what its oldest event after `at` replaced is what it was at `at`.
        let mut undone: BTreeMap<Key, Option<Arc<Obj>>> = BTreeMap::new();
        let start = inner.history.partition_point(|e| e.rv <= at);
        for e in inner.history.range(start..).filter(|e| &*e.res == res) {
            let key: Key = (e.namespace.clone(), e.name.clone());
            if !in_scope(&key) {
                continue;
            }
            undone.entry(key).or_insert_with(|| match e.kind {
                EventType::Added => None,
                EventType::Modified | EventType::Deleted => {
                    Some(e.prev.clone().unwrap_or_else(|| e.obj.clone()))
                }
            });
        }
        let empty = BTreeMap::new();
        let table = inner.tables.get(res).unwrap_or(&empty);
        let from = match (after, namespace) {
            (Some(k), _) => Bound::Excluded(k.clone()),
            (None, Some(ns)) => Bound::Included((ns.into(), "".into())),
            (None, None) => Bound::Unbounded,
        };
        let mut current = table
            .range((from, Bound::Unbounded))
            .take_while(|(k, _)| namespace.is_none_or(|ns| &*k.0 == ns))
            .peekable();
        let mut past = undone.iter().peekable();
        // Both in key order: merged, the undone version wins over the current one.
        loop {
            use std::cmp::Ordering::{Equal, Greater, Less};
            let order = match (current.peek(), past.peek()) {
                (None, None) => return Ok(()),
                (Some(_), None) => Less,
                (None, Some(_)) => Greater,
                (Some((ck, _)), Some((pk, _))) => (*ck).cmp(*pk),
            };
            if order == Equal {
                current.next();
            }
            let next = match order {
                Less => current.next().map(|(k, o)| (k, Some(o))),
                Equal | Greater => past.next().map(|(k, o)| (k, o.as_ref())),
            };
            // Absent at `at`: created after it.
            let Some((key, Some(obj))) = next else {
                continue;
            };
            if !take(key, obj) {
                return Ok(());
            }
        }
    }

    /// Events after `rv` (at most `max`), or 410 when `rv` is older than the history, or 504
    /// when it is newer than anything written. Also returns the current resourceVersion.
    pub fn events_after(&self, rv: u64, max: usize) -> Result<(Vec<Arc<Event>>, u64)> {
        let inner = self.inner.read();
        if rv > inner.rv {
            return Err(Error::TooLargeResourceVersion {
                requested: rv,
                current: inner.rv,
            });
        }
        if rv < inner.floor {
            return Err(Error::Expired {
                requested: rv,
                oldest: inner.floor,
            });
        }
        let start = inner.history.partition_point(|e| e.rv <= rv);
        let events = inner.history.range(start..).take(max).cloned().collect();
        Ok((events, inner.rv))
    }

    /// The oldest resourceVersion still consistent to read from (etcd's compaction revision).
    pub fn floor(&self) -> u64 {
        self.inner.read().floor
    }

    /// Drops the whole history: any resume from before now gets 410.
    pub fn compact(&self) {
        let mut inner = self.inner.write();
        inner.history.clear();
        inner.floor = inner.rv;
    }
}

impl Tx<'_> {
    pub fn get(&self, res: &str, namespace: &str, name: &str) -> Option<Arc<Obj>> {
        self.guard
            .tables
            .get(res)?
            .get(&(namespace.into(), name.into()))
            .cloned()
    }

    /// Allocates the next resourceVersion; the caller must commit an event with it.
    pub fn next_rv(&mut self) -> u64 {
        self.guard.rv += 1;
        self.guard.rv
    }

    /// Stores `value` (metadata.resourceVersion already set to `rv`) and records the event.
    pub fn put(
        &mut self,
        res: &Arc<str>,
        namespace: &str,
        name: &str,
        kind: EventType,
        value: &Value,
        rv: u64,
    ) {
        let obj = Arc::new(Obj::new(value, rv));
        let key: Key = (namespace.into(), name.into());
        let table = self.guard.tables.entry(res.clone()).or_default();
        let prev = if kind == EventType::Deleted {
            table.remove(&key)
        } else {
            table.insert(key.clone(), obj.clone())
        };
        self.record(Event {
            rv,
            kind,
            res: res.clone(),
            namespace: key.0,
            name: key.1,
            obj,
            prev,
        });
    }

    fn record(&mut self, event: Event) {
        let inner = &mut *self.guard;
        inner.history.push_back(Arc::new(event));
        while inner.history.len() > inner.capacity {
            if let Some(old) = inner.history.pop_front() {
                inner.floor = old.rv;
            }
        }
    }

    /// Keys in `res` within `namespace` (all when None).
    pub fn keys(&self, res: &str, namespace: Option<&str>) -> Vec<Key> {
        self.guard
            .tables
            .get(res)
            .map(|t| {
                t.keys()
                    .filter(|k| namespace.is_none_or(|ns| &*k.0 == ns))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Forgets a whole table without events (a re-created CRD starts empty).
    pub fn drop_table(&mut self, res: &str) {
        self.guard.tables.remove(res);
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        let rv = self.guard.rv;
        self.latest.send_if_modified(|latest| {
            let changed = *latest != rv;
            *latest = rv;
            changed
        });
    }
}
