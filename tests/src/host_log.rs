//! The host's own log (its `tracing` events, not plugins' lines), captured for tests that check
//! what the host says and how often.
//!
//! The capture is the calling thread's default subscriber, so it sees everything only under a
//! current-thread runtime (`#[tokio::test]`), where every task runs on the test's thread.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::watch;
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};

use crate::wait_for_change;

/// One captured event: its level, its `message`, and its other fields as text, with the fields
/// of the spans it happened in (a plugin's `plugin` and `tenant`) as if they were its own.
#[derive(Debug, Clone)]
pub struct Line {
    /// `INFO`, `WARN`, ...
    pub level: tracing::Level,
    /// The event's message.
    pub message: String,
    /// Every other field, formatted as the fmt subscriber would (`%` fields plain).
    pub fields: BTreeMap<String, String>,
}

impl Line {
    /// The field `name`, or "".
    pub fn field(&self, name: &str) -> &str {
        self.fields.get(name).map(String::as_str).unwrap_or("")
    }
}

/// Every INFO-or-above event of this thread since [`HostLog::capture`], with condition waits.
#[derive(Clone)]
pub struct HostLog {
    lines: Arc<Mutex<Vec<Line>>>,
    count: Arc<watch::Sender<usize>>,
}

impl HostLog {
    /// Captures this thread's events, instead of printing them, until the guard is dropped.
    pub fn capture() -> (HostLog, tracing::subscriber::DefaultGuard) {
        let log = HostLog {
            lines: Arc::default(),
            count: Arc::new(watch::channel(0).0),
        };
        // Filtered as the binary filters its log, so counts of lines are what a user reads.
        let mut targets =
            tracing_subscriber::filter::Targets::new().with_default(tracing::Level::INFO);
        for target in informant_runtime::informer::reflector::QUIETED_TARGETS {
            targets = targets.with_target(*target, tracing::Level::ERROR);
        }
        let layer = Capture(log.clone()).with_filter(targets);
        let guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
        (log, guard)
    }

    /// The lines captured so far whose message starts with `message`.
    pub fn lines(&self, message: &str) -> Vec<Line> {
        self.lines
            .lock()
            .iter()
            .filter(|l| l.message.starts_with(message))
            .cloned()
            .collect()
    }

    /// Waits until some line matches `pred`, failing the test after [`crate::GUARD`].
    pub async fn wait_for(&self, what: &str, pred: impl Fn(&Line) -> bool) -> Line {
        let found = || self.lines.lock().iter().find(|l| pred(l)).cloned();
        let ok = wait_for_change(&self.count, || found().is_some()).await;
        assert!(ok, "timed out waiting for {what} in the host's log");
        found().expect("found above")
    }
}

struct Capture(HostLog);

impl<S> Layer<S> for Capture
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: Context<'_, S>,
    ) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        // Outermost span first, so inner spans and the event itself override.
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope.from_root() {
                if let Some(f) = span.extensions().get::<Fields>() {
                    fields.0.extend(f.0.clone());
                }
            }
        }
        event.record(&mut fields);
        let line = Line {
            level: *event.metadata().level(),
            message: fields.0.remove("message").unwrap_or_default(),
            fields: fields.0,
        };
        self.0.lines.lock().push(line);
        self.0.count.send_modify(|c| *c += 1);
    }
}

#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
}
