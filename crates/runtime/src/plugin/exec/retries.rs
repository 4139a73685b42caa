//! Redelivery of the events a plugin asks to see again (`retry`), per object: attempts
//! counted, the latest state redelivered after the policy's backoff, a newer event replacing
//! a pending retry, and the events failed for good handed to the dead-letter sink.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tracing::Instrument;

use crate::informer::{Event, EventType, Holds, ObjectKey, Store};
use crate::manifest::DeadLetters;
use crate::plugin::bindings::WitResource;
use crate::plugin::exec::dead_letter::DeadLetterSink;
use crate::plugin::exec::supervisor::{Delivered, Supervisor};
use crate::tenancy::Budget;

/// One handler's objects waiting to be redelivered, by key.
pub(super) struct Retries {
    store: Arc<Store>,
    /// The tenant's event budget, if it has one.
    budget: Option<Arc<Budget>>,
    pending: Mutex<std::collections::HashMap<ObjectKey, Pending>>,
    next_token: AtomicU64,
    /// A scheduled redelivery holds the handler's delivery cursor below its change.
    holds: Holds,
    /// Where events failed for good go, if anywhere.
    dead_letters: std::sync::OnceLock<DeadLetterSink>,
}

/// Retries of one object since it was last handled or failed for good.
#[derive(Default)]
struct Pending {
    attempts: u32,
    /// The scheduled redelivery; `None` once a newer event replaced it.
    token: Option<u64>,
}

impl Retries {
    /// No retries yet, for a handler reading `store`, drawing from `budget` (if its tenant has
    /// one) and holding its cursor with `holds`.
    pub(super) fn new(store: Arc<Store>, budget: Option<Arc<Budget>>, holds: Holds) -> Self {
        Retries {
            store,
            budget,
            pending: Mutex::default(),
            next_token: AtomicU64::new(0),
            holds,
            dead_letters: std::sync::OnceLock::new(),
        }
    }

    /// Hands the events failed for good to `sink`; only the first sink set is used.
    pub(super) fn set_dead_letters(&self, sink: DeadLetterSink) {
        let _ = self.dead_letters.set(sink);
    }

    /// One lock per batch, and no lookups at all while nothing is pending (most plugins never
    /// answer `retry`).
    pub(super) fn supersede<'a>(&self, keys: impl Iterator<Item = &'a ObjectKey>) {
        let mut pending = self.pending.lock();
        if pending.is_empty() {
            return;
        }
        for key in keys {
            if let Some(p) = pending.get_mut(key) {
                p.token = None;
            }
        }
    }

    /// Forgets the retries of `keys`, handled for good (see [`Retries::supersede`]).
    fn forget<'a>(&self, keys: impl Iterator<Item = &'a ObjectKey>) {
        let mut pending = self.pending.lock();
        if pending.is_empty() {
            return;
        }
        for key in keys {
            pending.remove(key);
        }
    }

    /// Counts an attempt: its number and token, or the attempts made if they ran out.
    fn attempt(&self, key: &ObjectKey, max: u32) -> Result<(u32, u64), u32> {
        let mut pending = self.pending.lock();
        let p = pending.entry(key.clone()).or_default();
        p.attempts += 1;
        if p.attempts > max {
            let made = p.attempts - 1;
            pending.remove(key);
            return Err(made);
        }
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        p.token = Some(token);
        Ok((p.attempts, token))
    }

    /// Redeliveries made of `key` since it was last handled or failed for good.
    fn attempts(&self, key: &ObjectKey) -> u32 {
        self.pending.lock().get(key).map_or(0, |p| p.attempts)
    }

    /// Whether the redelivery `token` is still the one wanted for `key`.
    fn is_due(&self, key: &ObjectKey, token: u64) -> bool {
        self.pending.lock().get(key).and_then(|p| p.token) == Some(token)
    }

    /// The failed event again, carrying the object's latest state; `None` when its deletion
    /// (or re-creation) is already on its way as an event of its own.
    fn latest(&self, failed: &Event) -> Option<Event> {
        let key = failed.key();
        let now = self.store.get(key.namespace(), key.name());
        match (failed.event_type, now) {
            (EventType::Deleted, None) => Some(failed.clone()),
            (EventType::Deleted, Some(_)) | (_, None) => None,
            (_, Some(object)) => Some(Event {
                object,
                ..failed.clone()
            }),
        }
    }
}

/// Delivers `events` and schedules the redelivery of those the plugin asks to see again.
pub(super) async fn deliver(
    supervisor: &Arc<Supervisor>,
    resource: &Arc<WitResource>,
    retries: &Arc<Retries>,
    events: Vec<Event>,
) {
    let delivered = supervisor
        .deliver(resource, events)
        .instrument(supervisor.span.clone())
        .await;
    fn settled((event, d): &(Event, Delivered)) -> Option<&ObjectKey> {
        matches!(d, Delivered::Done | Delivered::Failed(_)).then(|| event.key())
    }
    let keep_failed = supervisor.spec.retry.dead_letters == DeadLetters::Failed;
    if let Some(sink) = retries.dead_letters.get().filter(|_| keep_failed) {
        for (event, d) in &delivered {
            if let Delivered::Failed(error) = d {
                let attempts = retries.attempts(event.key()) + 1;
                sink.send(event, error.clone(), attempts);
            }
        }
    }
    if !delivered
        .iter()
        .any(|(_, d)| matches!(d, Delivered::Retry { .. }))
    {
        // The usual batch: every outcome final.
        retries.forget(delivered.iter().filter_map(settled));
        return;
    }
    // In order: a retry scheduled for an object, then a later event of it handled, forgets it.
    for (event, delivered) in delivered {
        match delivered {
            Delivered::Done | Delivered::Failed(_) => retries.forget(std::iter::once(event.key())),
            Delivered::Dropped => {}
            Delivered::Retry { reason, after } => {
                schedule_retry(supervisor, resource, retries, event, &reason, after)
            }
        }
    }
}

fn schedule_retry(
    supervisor: &Arc<Supervisor>,
    resource: &Arc<WitResource>,
    retries: &Arc<Retries>,
    event: Event,
    reason: &str,
    after: Option<Duration>,
) {
    let policy = &supervisor.spec.retry;
    let key = event.key().clone();
    let (attempt, token) = match retries.attempt(&key, policy.max_attempts) {
        Ok(next) => next,
        Err(made) => {
            let sink = retries.dead_letters.get();
            return supervisor.give_up(&event, made, reason, sink);
        }
    };
    supervisor.retried.fetch_add(1, Ordering::Relaxed);
    let wait = policy.backoff(attempt, after);
    tracing::debug!(
        parent: &supervisor.span,
        key = key.as_str(),
        attempt,
        ?wait,
        reason,
        "plugin asked to retry an event"
    );
    let (supervisor, resource, retries) = (supervisor.clone(), resource.clone(), retries.clone());
    let hold = retries.holds.hold(event.seq, event.version);
    let retry: std::pin::Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
        // Released once redelivered (a further retry takes its own hold first) or dropped.
        let _hold = hold;
        let mut closed = supervisor.closed.subscribe();
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = closed.wait_for(|c| *c) => return,
        }
        if let Some(budget) = &retries.budget {
            budget.acquire().await;
        }
        if !retries.is_due(&key, token) {
            return;
        }
        match retries.latest(&event) {
            Some(again) => deliver(&supervisor, &resource, &retries, vec![again]).await,
            None => retries.forget(std::iter::once(&key)),
        }
    });
    tokio::spawn(retry);
}

#[cfg(test)]
mod tests {
    use kube::core::{ApiResource, GroupVersionKind};

    use super::*;
    use crate::informer::{RawObject, StoreOptions};

    fn raw(name: &str, rv: u64) -> RawObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "a", "resourceVersion": rv.to_string()},
        }))
        .unwrap()
    }

    fn retries() -> Retries {
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        Retries::new(
            Arc::new(Store::new(ar, StoreOptions::default())),
            None,
            Holds::new(),
        )
    }

    /// The events the store emits for one change.
    fn change(r: &Retries, f: impl FnOnce(&Store, &mut dyn FnMut(Event))) -> Event {
        let mut out = Vec::new();
        f(&r.store, &mut |e| out.push(e));
        out.pop().expect("one event")
    }

    #[test]
    fn a_retry_redelivers_the_latest_state_or_nothing_once_the_object_moved_on() {
        let r = retries();
        let added = change(&r, |s, sink| s.apply(raw("x", 1), &mut |e| sink(e)));
        let updated = change(&r, |s, sink| s.apply(raw("x", 2), &mut |e| sink(e)));
        // An add that failed at version 1 is redelivered at version 2, still as an add.
        let again = r.latest(&added).expect("the object is still there");
        assert_eq!(again.event_type, EventType::Added);
        assert_eq!(again.object.resource_version(), "2");
        assert_eq!(r.latest(&updated).unwrap().object.resource_version(), "2");
        // Deleted since: the deletion is an event of its own, the retry goes.
        let deleted = change(&r, |s, sink| s.delete(raw("x", 3), &mut |e| sink(e)));
        assert!(r.latest(&added).is_none());
        // A failed deletion is redelivered as it was, unless the object came back.
        assert_eq!(r.latest(&deleted).unwrap().event_type, EventType::Deleted);
        change(&r, |s, sink| s.apply(raw("x", 4), &mut |e| sink(e)));
        assert!(r.latest(&deleted).is_none());
    }

    #[test]
    fn attempts_count_per_object_and_a_newer_event_replaces_the_pending_one() {
        let r = retries();
        let (x, y) = (
            ObjectKey::new(Some("a"), "x"),
            ObjectKey::new(Some("a"), "y"),
        );
        let (n, first) = r.attempt(&x, 2).unwrap();
        assert_eq!(n, 1);
        assert!(r.is_due(&x, first));
        r.supersede(std::iter::once(&x));
        assert!(!r.is_due(&x, first), "a newer event replaced it");
        assert_eq!(r.attempt(&y, 2).unwrap().0, 1, "counted per object");
        let (n, second) = r.attempt(&x, 2).unwrap();
        assert_eq!(
            n, 2,
            "attempts survive a newer event until the object is done"
        );
        assert!(r.is_due(&x, second) && !r.is_due(&x, first));
        assert_eq!(r.attempt(&x, 2), Err(2), "out of attempts");
        assert_eq!(r.attempt(&x, 2).unwrap().0, 1, "and counted afresh after");
        r.forget(std::iter::once(&y));
        assert_eq!(r.attempt(&y, 2).unwrap().0, 1);
    }
}
