//! An informer's changes, handed to the state's journal.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::informer::{CachedObject, ChangeLog, Event, EventType};

/// A cached object as the state stores it: its JSON and, beside it, its frozen metadata, so a
/// restart rebuilds it without parsing the JSON. Frozen on the journal's writer thread, when
/// it is written.
struct Persisted(Arc<CachedObject>);

impl informant_state::Stored for Persisted {
    fn json(&self) -> &str {
        self.0.json()
    }
    fn meta(&self) -> Vec<u8> {
        self.0.frozen()
    }
}

/// Journals one informer's changes under its name, and the resourceVersion to resume from.
pub(crate) struct InformerJournal {
    id: Arc<str>,
    journal: informant_state::StateWriter,
    /// The newest resourceVersion applied (numeric where the server's are, as etcd's are).
    newest: Mutex<Option<u64>>,
    /// A relist is being applied: its changes are no point to resume from.
    listing: AtomicBool,
    /// The last change recorded.
    last_seq: AtomicU64,
}

impl InformerJournal {
    /// The journal of the informer named `id`, whose cache is as of `resource_version` (a
    /// restored one's): the version to resume from never goes back, or a watch resumed from it
    /// would replay versions older than the ones cached.
    pub(crate) fn new(
        id: String,
        journal: informant_state::StateWriter,
        resource_version: Option<&str>,
    ) -> Self {
        InformerJournal {
            id: id.into(),
            journal,
            newest: Mutex::new(resource_version.and_then(|rv| rv.parse().ok())),
            listing: AtomicBool::new(false),
            last_seq: AtomicU64::new(0),
        }
    }
}

impl ChangeLog for InformerJournal {
    fn record(&self, event: &Event) {
        let object = &event.object;
        // A watch delivers in resourceVersion order, a list does not: resume from the newest
        // seen, and from a relist only once it is whole (see `relisted`).
        let rv = object.resource_version();
        self.last_seq.fetch_max(event.seq, Ordering::Relaxed);
        let listing = self.listing.load(Ordering::Relaxed);
        let reached = rv.parse::<u64>().ok().filter(|_| !listing).and_then(|n| {
            let mut newest = self.newest.lock();
            newest.is_none_or(|m| n > m).then(|| {
                *newest = Some(n);
                rv
            })
        });
        // Shared with the cache, not copied: the writer holds it only until it is written.
        let json = (event.event_type != EventType::Deleted)
            .then(|| Arc::new(Persisted(object.clone())) as informant_state::Text);
        self.journal
            .record_shared(&self.id, event.seq, object.key().as_str(), json, reached);
    }

    fn relisting(&self) {
        self.listing.store(true, Ordering::Relaxed);
    }

    fn relisted(&self, resource_version: Option<u64>) {
        self.listing.store(false, Ordering::Relaxed);
        let Some(listed) = resource_version else {
            return;
        };
        let rv = {
            let mut newest = self.newest.lock();
            let rv = newest.map_or(listed, |n| n.max(listed));
            *newest = Some(rv);
            rv
        };
        let seq = self.last_seq.load(Ordering::Relaxed);
        self.journal
            .resource_version(&self.id, &rv.to_string(), seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::{ApiResource, GroupVersionKind};

    #[tokio::test]
    async fn a_journaled_object_is_stored_with_its_frozen_metadata_and_deleted_as_a_tombstone() {
        let dir = tempfile::tempdir().unwrap();
        let (state, _) = informant_state::StateDir::open(dir.path(), "c").unwrap();
        let journal = InformerJournal::new("v1/pods".into(), state.journal(), None);
        // A plugin that has handled nothing yet: the compaction keeps the tombstone for it.
        state
            .journal()
            .cursor("plugin", "v1/pods", 0, None, "scope");
        let pods = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Pod"));
        let json = r#"{"metadata":{"name":"a","namespace":"ns","uid":"u","resourceVersion":"5",
            "labels":{"app":"web"},"ownerReferences":[{"apiVersion":"v1","kind":"X","name":"x","uid":"o1"}]}}"#;
        let object = Arc::new(CachedObject::from_json(json, &pods, true).unwrap());
        journal.record(&Event::added(object.clone(), false).at(1));
        let gone = Arc::new(
            CachedObject::from_json(r#"{"metadata":{"name":"b","namespace":"ns"}}"#, &pods, true)
                .unwrap(),
        );
        journal.record(&Event::deleted(gone, false).at(2));
        state.journal().flush().await;

        let versions = state.versions("v1/pods").unwrap();
        let [(1, Some(stored))] = &versions["ns/a"][..] else {
            panic!("{:?}", versions["ns/a"]);
        };
        assert_eq!(&*stored.json, object.json());
        assert_eq!(
            &*stored.meta,
            &object.frozen()[..],
            "frozen beside the JSON"
        );
        let thawed = CachedObject::from_frozen(&stored.meta, stored.json.clone()).unwrap();
        assert_eq!(thawed.metadata_fields(), object.metadata_fields());
        assert_eq!(thawed.owner_uids().collect::<Vec<_>>(), ["o1"]);
        assert_eq!(versions["ns/b"], [(2, None)]);
    }
}
