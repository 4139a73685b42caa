//! The spans: one root span per event a plugin takes, and child spans for its host calls.

use std::borrow::Cow;
use std::time::{Duration, Instant, SystemTime};

use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue};

use crate::informer::{Event, EventType};
use crate::plugin::bindings::WitResource;
use crate::plugin::outcome::{CallError, Handled};

/// Cache queries that take longer than this get a span of their own; quicker ones (nearly all:
/// they are map lookups) would only bury the writes and requests that matter.
pub const SLOW_QUERY: Duration = Duration::from_millis(1);

/// The span of one event a plugin took: from the informer receiving it to the plugin's
/// outcome. Inert (and free) while traces are off. Ends with its outcome at
/// [`EventSpan::end`]; dropped without it, it ends with none.
#[derive(Default, Debug)]
pub struct EventSpan(Option<Context>);

impl EventSpan {
    /// Starts the span of `event` (of `kind`), taken by `plugin` of `tenant` at `taken`; it
    /// starts when the informer received the event, or at `taken` for an initial one.
    pub fn start(
        plugin: &str,
        tenant: &str,
        kind: &WitResource,
        event: &Event,
        taken: Instant,
    ) -> EventSpan {
        let Some(tracer) = super::tracer() else {
            return EventSpan(None);
        };
        let start = event.received.unwrap_or(taken);
        let attributes = vec![
            KeyValue::new("plugin", plugin.to_string()),
            KeyValue::new("tenant", tenant.to_string()),
            KeyValue::new("kind", kind_name(kind)),
            KeyValue::new("key", event.key().as_str().to_string()),
            KeyValue::new("event.type", event_type(event.event_type)),
        ];
        let span = tracer
            .span_builder("event")
            .with_kind(SpanKind::Consumer)
            .with_start_time(wall(start))
            .with_attributes(attributes)
            .start_with_context(&tracer, &Context::new());
        EventSpan(Some(Context::new().with_span(span)))
    }

    /// Whether the span is recorded (traces are on).
    #[inline]
    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// Ends the span with the event's outcome: `done`, `retry`, `error`, `trap` or `deadline`.
    pub fn end(self, result: &Result<Handled, CallError>) {
        let Some(cx) = self.0 else { return };
        let span = cx.span();
        let (outcome, error) = match result {
            Ok(Handled::Done) => ("done", None),
            Ok(Handled::Retry { reason, .. }) => ("retry", Some(reason.clone())),
            Err(e @ CallError::Guest(_)) => ("error", Some(e.to_string())),
            Err(e @ CallError::Trap(_)) => ("trap", Some(e.to_string())),
            Err(e @ CallError::Deadline(_)) => ("deadline", Some(e.to_string())),
        };
        span.set_attribute(KeyValue::new("outcome", outcome));
        match (result, error) {
            (Err(_), Some(e)) => span.set_status(Status::error(e)),
            (Ok(_), Some(reason)) => span.set_attribute(KeyValue::new("retry.reason", reason)),
            _ => span.set_status(Status::Ok),
        }
        span.end();
    }

    /// A child span for a host call starting now, named `name` with `attributes` (built only
    /// when traces are on).
    pub fn child(
        &self,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> HostSpan {
        self.child_at(name, kind, SystemTime::now(), attributes)
    }

    /// A child span that started at `started` and ends now, with `attributes`: for a call
    /// only worth a span once it proved slow.
    pub fn child_since(
        &self,
        name: impl Into<Cow<'static, str>>,
        started: Instant,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) {
        self.child_at(name, SpanKind::Internal, wall(started), attributes)
            .end(None);
    }

    fn child_at(
        &self,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        start: SystemTime,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> HostSpan {
        let Some(parent) = &self.0 else {
            return HostSpan(None);
        };
        let Some(tracer) = super::tracer() else {
            return HostSpan(None);
        };
        let span = tracer
            .span_builder(name)
            .with_kind(kind)
            .with_start_time(start)
            .with_attributes(attributes())
            .start_with_context(&tracer, parent);
        HostSpan(Some(Context::new().with_span(span)))
    }

    /// A handle on the span for another part of the same instance (the HTTP hooks).
    pub fn share(&self) -> EventSpan {
        EventSpan(self.0.clone())
    }
}

/// A host call's span, a child of its event's. Inert while traces are off.
#[derive(Default, Debug)]
pub struct HostSpan(Option<Context>);

impl HostSpan {
    /// Whether the span is recorded (traces are on).
    #[inline]
    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// The W3C `traceparent` naming this span, for a request it sends.
    pub fn traceparent(&self) -> Option<String> {
        let cx = self.0.as_ref()?;
        let span = cx.span();
        let sc = span.span_context();
        Some(format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        ))
    }

    /// Adds `attribute`.
    pub fn set(&self, attribute: impl FnOnce() -> KeyValue) {
        if let Some(cx) = &self.0 {
            cx.span().set_attribute(attribute());
        }
    }

    /// Ends the span with `outcome` (an `outcome` attribute; anything but `ok` marks it failed).
    pub fn end(self, outcome: Option<&str>) {
        let Some(cx) = self.0 else { return };
        let span = cx.span();
        if let Some(outcome) = outcome {
            span.set_attribute(KeyValue::new("outcome", outcome.to_string()));
            if outcome != "ok" {
                span.set_status(Status::error(outcome.to_string()));
            }
        }
        span.end();
    }
}

/// The span of one admission request a hook answered: a root span `admission` (each request a
/// trace of its own) from the request's arrival to its answer. Inert while traces are off.
#[derive(Default, Debug)]
pub struct AdmissionSpan(Option<Context>);

impl AdmissionSpan {
    /// Starts the span of request `uid` to `hook` of `plugin` (of `tenant`): `operation` on
    /// `kind`, begun at `arrived`.
    pub fn start(
        (plugin, tenant, hook): (&str, &str, &str),
        operation: &str,
        kind: &WitResource,
        uid: &str,
        arrived: Instant,
    ) -> AdmissionSpan {
        let Some(tracer) = super::tracer() else {
            return AdmissionSpan(None);
        };
        let attributes = vec![
            KeyValue::new("plugin", plugin.to_string()),
            KeyValue::new("tenant", tenant.to_string()),
            KeyValue::new("hook", hook.to_string()),
            KeyValue::new("operation", operation.to_string()),
            KeyValue::new("kind", kind_name(kind)),
            KeyValue::new("uid", uid.to_string()),
        ];
        let span = tracer
            .span_builder("admission")
            .with_kind(SpanKind::Server)
            .with_start_time(wall(arrived))
            .with_attributes(attributes)
            .start_with_context(&tracer, &Context::new());
        AdmissionSpan(Some(Context::new().with_span(span)))
    }

    /// Ends the span with its `decision` (`allow`, `deny`, `fail`, `ignore`, `skip`), and the
    /// reason when the plugin gave no usable answer (which marks it failed).
    pub fn end(self, decision: &str, failure: Option<&str>) {
        let Some(cx) = self.0 else { return };
        let span = cx.span();
        span.set_attribute(KeyValue::new("decision", decision.to_string()));
        if let Some(reason) = failure {
            span.set_attribute(KeyValue::new("failure", reason.to_string()));
            span.set_status(Status::error(reason.to_string()));
        }
        span.end();
    }
}

/// `group/version/Kind`, `version/Kind` for the core group.
fn kind_name(k: &WitResource) -> String {
    if k.group.is_empty() {
        format!("{}/{}", k.version, k.kind)
    } else {
        format!("{}/{}/{}", k.group, k.version, k.kind)
    }
}

fn event_type(t: EventType) -> &'static str {
    match t {
        EventType::Added => "added",
        EventType::Updated => "updated",
        EventType::Deleted => "deleted",
        EventType::Resync => "resync",
    }
}

/// The wall-clock time of `at`, a monotonic instant in the past (or now).
fn wall(at: Instant) -> SystemTime {
    SystemTime::now() - at.elapsed()
}
