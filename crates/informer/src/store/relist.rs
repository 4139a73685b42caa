//! Replacing the whole content with a fresh list (client-go's `Replace`): the list frozen object
//! by object as it arrives, then applied in chunks, emitting the difference.

use std::sync::Arc;

use super::{Entry, Store};
use crate::cursor::{Opaque, version_of};
use crate::event::Event;
use crate::index::IndexValues;
use crate::object::{CachedObject, KeySet, ObjectKey, RawObject};

/// Objects a relist stores under one write lock (see `Store::finish_relist`).
const REPLACE_CHUNK: usize = 1024;

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

    /// The newest resourceVersion among the objects listed (0: none), or [`Opaque`] when one
    /// is not a number.
    pub(crate) fn newest_version(&self) -> Result<u64, Opaque> {
        self.objects.iter().try_fold(0, |newest, o| {
            match version_of(o.object().resource_version()) {
                Some(v) => Ok(newest.max(v)),
                None => Err(Opaque),
            }
        })
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

impl Store {
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
                let seq = inner.next_seq();
                let entry = Entry {
                    object: object.clone(),
                    index_values,
                    seq,
                };
                match inner.insert(key, entry) {
                    Some(old) => sink(Event::updated(old.object, object).at(seq)),
                    None => sink(Event::added(object, initial).at(seq)),
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
                let seq = inner.next_seq();
                sink(Event::deleted(old.object, true).at(seq));
            }
        }
        inner.synced = true;
    }
}
