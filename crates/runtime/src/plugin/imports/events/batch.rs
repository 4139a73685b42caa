//! One `handle-queued` call: the events the plugin takes through `events.next`, how each ended,
//! and the deadline that restarts with every event taken.
//!
//! One entry into the plugin serves a whole batch, so the costs of a call (entering the guest,
//! arming a timer, taking the plugin's lock) are paid per wake-up instead of per event, while
//! every event keeps its own deadline and failures stay attributed to the event in hand.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::watch;

use crate::informer::Event;
use crate::plugin::bindings::{Failure, WitResource};
use crate::plugin::outcome::{CallError, Handled};
use crate::plugin::text::{escape_controls, truncated};
use crate::telemetry::EventSpan;

/// What became of one event the plugin took.
#[derive(Debug)]
pub struct Taken {
    /// The event.
    pub event: Event,
    /// How it ended.
    pub result: Result<Handled, CallError>,
    /// From the plugin taking it to the plugin reporting its outcome (or failing).
    pub took: Duration,
    /// From the informer receiving it to the plugin taking it (none for initial events).
    pub waited: Option<Duration>,
    /// Already counted in the [`Tally`], as the plugin reported it.
    pub tallied: bool,
    /// Its trace span, ended once its outcome is settled (inert while traces are off).
    pub span: EventSpan,
}

/// One plugin version's event counts, updated as the plugin reports each event, so `/plugins`
/// and the log agree with what the plugin has done so far, mid-batch included.
#[derive(Default)]
pub struct Tally {
    handled: AtomicU64,
    failed: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl Tally {
    /// Events handled successfully.
    pub fn handled(&self) -> u64 {
        self.handled.load(Ordering::Relaxed)
    }

    /// Events that failed. A reader that sees a failure counted also sees the state its
    /// supervisor entered because of it (set before the count).
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Acquire)
    }

    /// The most recent failure, as logged.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().clone()
    }

    /// Counts one event handled.
    pub fn done(&self) {
        self.handled.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one failed event; `call` of the object `key` failed with `error`.
    pub fn fail(&self, key: &str, call: &str, error: &dyn std::fmt::Display) {
        self.note(key, call, error);
        self.failed.fetch_add(1, Ordering::Release);
    }

    /// Records a failure that is not an event's (a schedule's tick) as the last error, without
    /// counting it.
    pub fn note(&self, key: &str, call: &str, error: &dyn std::fmt::Display) {
        *self.last_error.lock() = Some(format!("{call} of {key}: {error}"));
    }

    /// Counts an event the plugin answered with an error (its instance stays), and logs it.
    fn returned_error(&self, key: &str, error: &CallError) {
        self.fail(key, "handle", error);
        tracing::warn!(key, call = "handle", error = %error, "plugin failed an event");
    }
}

/// The event in the plugin's hand when its call ended: the event, when it was taken, its span.
pub(crate) type InHand = (Event, Instant, EventSpan);

/// The events of the call in progress, held in the instance's state for `events.next`.
pub(crate) struct Batch {
    kind: Arc<WitResource>,
    queue: VecDeque<Event>,
    /// The event the plugin holds, when it took it, its id and its span.
    current: Option<(Event, Instant, u64, EventSpan)>,
    /// The span of host calls made with no event in hand.
    no_span: EventSpan,
    /// The id the next event handed out gets: ids are never reused in an instance, so a plugin
    /// reading an event it no longer holds is caught, however long it kept the id.
    next_id: u64,
    done: Vec<Taken>,
    per_event: Duration,
    deadline: Arc<MovingDeadline>,
    /// Set when the plugin is being removed: no further event is handed out.
    stop: Option<watch::Receiver<bool>>,
    tally: Option<Arc<Tally>>,
    error_bytes: usize,
}

impl Batch {
    /// An empty batch for an instance whose events each get `per_event`, with guest-made
    /// error text cut to `error_bytes`.
    pub(crate) fn new(per_event: Duration, error_bytes: usize) -> Self {
        Batch {
            kind: Arc::new(WitResource {
                group: String::new(),
                version: String::new(),
                kind: String::new(),
            }),
            queue: VecDeque::new(),
            current: None,
            no_span: EventSpan::default(),
            next_id: 1,
            done: Vec::new(),
            per_event,
            deadline: Arc::new(MovingDeadline::new(per_event)),
            stop: None,
            tally: None,
            error_bytes,
        }
    }

    /// Starts a call serving `events` of `kind`, counting outcomes in `tally`; the first
    /// event's deadline runs from now.
    pub(crate) fn begin(
        &mut self,
        kind: &Arc<WitResource>,
        events: Vec<Event>,
        stop: &watch::Receiver<bool>,
        tally: &Arc<Tally>,
    ) -> Arc<MovingDeadline> {
        self.kind = kind.clone();
        self.tally = Some(tally.clone());
        self.queue = events.into();
        self.current = None;
        self.done.clear();
        self.stop = Some(stop.clone());
        self.deadline.set(Instant::now() + self.per_event);
        self.deadline.clone()
    }

    /// Ends the call: what was taken and how it ended, the event in hand (taken, no outcome),
    /// and what was never taken.
    pub(crate) fn end(&mut self) -> (Vec<Taken>, Option<InHand>, VecDeque<Event>) {
        self.stop = None;
        (
            std::mem::take(&mut self.done),
            self.current
                .take()
                .map(|(event, at, _, span)| (event, at, span)),
            std::mem::take(&mut self.queue),
        )
    }

    /// The event in hand, if `id` names it; a trap for any other id (an event already done, or
    /// one never handed out).
    pub(crate) fn in_hand(&self, id: u64) -> wasmtime::Result<&Event> {
        Ok(self.in_hand_with_kind(id)?.1)
    }

    /// [`Batch::in_hand`], with the kind the event is watched as.
    pub(crate) fn in_hand_with_kind(&self, id: u64) -> wasmtime::Result<(&WitResource, &Event)> {
        match &self.current {
            Some((event, _, current, _)) if *current == id => Ok((&self.kind, event)),
            _ => Err(wasmtime::format_err!(
                "an event's object was read after its event was done (the plugin had asked for the next one, or returned)"
            )),
        }
    }

    /// Records the outcome of the event in hand (`previous` as the plugin reported it).
    pub(crate) fn finish(&mut self, previous: Option<Result<(), Failure>>, now: Instant) {
        let Some((event, taken_at, _, span)) = self.current.take() else {
            // An outcome with no event in hand (a guest's first call reporting one) is ignored.
            return;
        };
        let result = match previous {
            None => Err(CallError::Guest(
                "asked for the next event without reporting how this one ended".into(),
            )),
            Some(Ok(())) => Ok(Handled::Done),
            Some(Err(Failure::Error(e))) => Err(CallError::Guest(e).bounded(self.error_bytes)),
            Some(Err(Failure::Retry(later))) => Ok(Handled::Retry {
                reason: escape_controls(&truncated(later.reason, self.error_bytes)).into_owned(),
                after: later.after_ms.map(|ms| Duration::from_millis(ms.into())),
            }),
        };
        let tallied = match (&result, &self.tally) {
            (Ok(Handled::Done), Some(tally)) => {
                tally.done();
                true
            }
            (Err(error), Some(tally)) => {
                tally.returned_error(event.key().as_str(), error);
                true
            }
            _ => false,
        };
        let mut taken = taken(event, result, taken_at, now, span);
        taken.tallied = tallied;
        self.done.push(taken);
    }

    /// Puts the next event in the plugin's hand at `now`, its deadline starting, its span
    /// made by `span`: its id, the kind it is watched as, and the event. None once the batch is
    /// done or the plugin is being removed.
    pub(crate) fn take(
        &mut self,
        now: Instant,
        span: impl FnOnce(&WitResource, &Event) -> EventSpan,
    ) -> Option<(u64, &WitResource, &Event)> {
        if self.stop.as_ref().is_some_and(|s| *s.borrow()) {
            return None;
        }
        let event = self.queue.pop_front()?;
        let id = self.next_id;
        self.next_id += 1;
        self.deadline.set(now + self.per_event);
        let span = span(&self.kind, &event);
        let (event, _, id, _) = self.current.insert((event, now, id, span));
        Some((*id, &self.kind, event))
    }

    /// The span of the event in hand, the parent of the host calls the plugin makes for it.
    pub(crate) fn span(&self) -> &EventSpan {
        self.current
            .as_ref()
            .map_or(&self.no_span, |(_, _, _, span)| span)
    }
}

/// A finished [`Taken`].
pub fn taken(
    event: Event,
    result: Result<Handled, CallError>,
    taken_at: Instant,
    now: Instant,
    span: EventSpan,
) -> Taken {
    let waited = event
        .received
        .map(|r| taken_at.saturating_duration_since(r));
    Taken {
        event,
        result,
        took: now.saturating_duration_since(taken_at),
        waited,
        tallied: false,
        span,
    }
}

/// A deadline the guest's host calls move forward (each event taken restarts it) while the
/// caller's timer waits on it.
pub(crate) struct MovingDeadline {
    base: Instant,
    /// Nanoseconds after `base`.
    at: AtomicU64,
    per_event: Duration,
}

impl MovingDeadline {
    fn new(per_event: Duration) -> Self {
        MovingDeadline {
            base: Instant::now(),
            at: AtomicU64::new(0),
            per_event,
        }
    }

    fn set(&self, at: Instant) {
        let nanos = at.saturating_duration_since(self.base).as_nanos();
        self.at
            .store(u64::try_from(nanos).unwrap_or(u64::MAX), Ordering::Release);
    }

    fn get(&self) -> Instant {
        self.base + Duration::from_nanos(self.at.load(Ordering::Acquire))
    }

    /// Runs `call`, or fails with [`CallError::Deadline`] once the deadline, as last moved,
    /// has passed. The timer is armed only once the call has had to wait (a guest blocked in a
    /// host call, or computing past an epoch tick: it yields at every one), so a call that
    /// finishes at once never touches the runtime's timers; it is re-armed only when it fires
    /// early, so an event taken costs a store to an atomic, not a timer.
    pub(crate) async fn bound<T>(
        &self,
        call: impl Future<Output = Result<T, CallError>>,
    ) -> Result<T, CallError> {
        let mut call = std::pin::pin!(call);
        let mut sleep = std::pin::pin!(None::<tokio::time::Sleep>);
        std::future::poll_fn(|cx| {
            if let std::task::Poll::Ready(r) = call.as_mut().poll(cx) {
                return std::task::Poll::Ready(r);
            }
            if sleep.is_none() {
                sleep.set(Some(tokio::time::sleep_until(self.get().into())));
            }
            let mut timer = sleep.as_mut().as_pin_mut().expect("armed above");
            while timer.as_mut().poll(cx).is_ready() {
                let at = self.get();
                if Instant::now() >= at {
                    return std::task::Poll::Ready(Err(CallError::Deadline(self.per_event)));
                }
                timer.as_mut().reset(at.into());
            }
            std::task::Poll::Pending
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str) -> Event {
        let pods =
            kube::core::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk("", "v1", "Pod"));
        let json = format!(r#"{{"metadata":{{"name":"{name}","namespace":"a"}}}}"#);
        let object = crate::informer::CachedObject::from_json(&json, &pods, true).unwrap();
        Event::added(Arc::new(object), false)
    }

    fn off(_: &WitResource, _: &Event) -> EventSpan {
        EventSpan::default()
    }

    #[test]
    fn only_the_event_in_hand_answers_to_its_id_and_no_forged_id_reads_another() {
        let mut batch = Batch::new(Duration::from_secs(1), 1024);
        let kind = Arc::new(WitResource {
            group: String::new(),
            version: "v1".into(),
            kind: "Pod".into(),
        });
        let stop = watch::channel(false).1;
        let tally = Arc::new(Tally::default());
        batch.begin(&kind, vec![event("one"), event("two")], &stop, &tally);
        let now = Instant::now();
        let first = batch.take(now, off).map(|(id, _, _)| id).unwrap();
        assert_eq!(batch.in_hand(first).unwrap().key().as_str(), "a/one");
        // Not yet handed out, never handed out, and ids a guest might make up.
        for forged in [first + 1, 0, u64::MAX, first.wrapping_sub(1)] {
            let refused = batch.in_hand(forged).unwrap_err().to_string();
            assert!(refused.contains("after its event was done"), "{refused}");
        }
        batch.finish(Some(Ok(())), now);
        let second = batch.take(now, off).map(|(id, _, _)| id).unwrap();
        assert_ne!(second, first);
        assert!(
            batch.in_hand(first).is_err(),
            "a done event is never read again"
        );
        assert_eq!(batch.in_hand(second).unwrap().key().as_str(), "a/two");
        batch.end();
        assert!(batch.in_hand(second).is_err(), "nor once the call returned");
        // A later call's events get new ids: an id kept from an earlier call reads nothing.
        batch.begin(&kind, vec![event("three")], &stop, &tally);
        let third = batch.take(now, off).map(|(id, _, _)| id).unwrap();
        assert!(third > second && batch.in_hand(second).is_err());
    }

    #[tokio::test]
    async fn the_deadline_restarts_with_each_event_and_still_cuts_a_stuck_one_off() {
        let per_event = Duration::from_millis(100);
        let deadline = MovingDeadline::new(per_event);
        // Five events of 40 ms each: 200 ms in all, twice one deadline, and never late.
        deadline.set(Instant::now() + per_event);
        let moved = deadline
            .bound(async {
                for _ in 0..5 {
                    tokio::time::sleep(Duration::from_millis(40)).await;
                    deadline.set(Instant::now() + per_event);
                }
                Ok(())
            })
            .await;
        assert_eq!(moved, Ok(()));
        // An event that never reports is cut off one deadline after it was taken.
        let taken = Instant::now();
        deadline.set(taken + per_event);
        let stuck = deadline
            .bound(async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(())
            })
            .await;
        assert_eq!(stuck, Err(CallError::Deadline(per_event)));
        assert!(taken.elapsed() >= per_event);
    }
}
