//! `/metrics`: a prometheus-client [`Collector`] over a snapshot taken at scrape time from the
//! counters the pipeline keeps anyway (reflector stats, listener queues, supervisors), so nothing
//! is counted twice and nothing costs anything between scrapes.
//!
//! The families, their labels and what each counts: the book's operations page,
//! `docs/src/operations.md` (a test holds its table equal to what this module encodes).
//! Counters carry the `_total` suffix on their samples.
//! A family appears once it has a sample (the plugin families once a plugin is loaded).
//!
//! What one scrape shows depends on the caller's [`Scope`]: everything, or only the series of
//! the tenants it may see (their plugins' figures, dead letters and own metrics, and their
//! tenants' metric budgets), never the host's own (informers, listeners, change filters, state,
//! shard, traces) nor the operator's plugins'. Every label value is written by
//! [`name::label_value`], so none can end its line.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::Ordering;

use prometheus_client::collector::Collector;

use crate::plugin::imports::write::{Call, Outcome};
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::TypedMetric;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use super::AdminState;
use super::plugin_metrics::PluginMetricsSample;
use super::scope::Scope;
use crate::plugin::exec::histogram::DurationHistogram;
use crate::plugin::exec::scheduler::TickOutcome;
use crate::plugin::exec::supervisor::PluginState;
use crate::plugin::load::status::RunningPlugin;
use crate::plugin::load::waiting::WaitingFor;
use crate::plugin::metrics::name;

/// The `Content-Type` of [`render`]'s output.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// One scrape: every family `scope` may see, encoded as OpenMetrics text (ending with `# EOF`).
pub fn render(state: &AdminState, scope: &Scope) -> Result<String, fmt::Error> {
    let snapshot = Snapshot::gather(state, scope);
    let mut registry = Registry::default();
    registry.register_collector(Box::new(snapshot));
    let mut out = String::with_capacity(16 * 1024);
    prometheus_client::encoding::text::encode(&mut out, &registry)?;
    Ok(out)
}

#[derive(Debug)]
struct PluginSample {
    plugin: String,
    tenant: String,
    /// Resources its wildcard watches cover now.
    expanded: u64,
    received: u64,
    dispatched: u64,
    failed: u64,
    dropped: u64,
    retried: u64,
    /// Outbound HTTP: requests, failures, denied, bytes sent, bytes received.
    http: [u64; 5],
    /// Writes by call and outcome, the ones that happened.
    writes: Vec<(&'static str, &'static str, u64)>,
    /// Schedule ticks by schedule and outcome, every outcome of every schedule.
    ticks: Vec<(String, &'static str, u64)>,
    backlog: u64,
    state: PluginState,
    latency: DurationHistogram,
    dispatch: DurationHistogram,
}

/// A plugin version waiting to load (see [`crate::plugin::load::waiting`]).
#[derive(Debug)]
struct WaitingSample {
    plugin: String,
    tenant: String,
    /// `api-server`, or the `APIVERSION/KIND` it waits for.
    waiting_for: String,
    attempts: u64,
}

#[derive(Debug)]
struct InformerSample {
    informer: String,
    synced: bool,
    objects: u64,
    objects_received: u64,
    lists: u64,
    restarts: u64,
    gone: u64,
}

#[derive(Debug, Default, Clone)]
struct ListenerSample {
    backlog: u64,
    received: u64,
    delivered: u64,
}

/// The state directory's figures, with `--state-dir`.
#[derive(Debug, Default)]
struct StateSample {
    /// Dead letters kept per (plugin, tenant): every plugin holding any, and every running one,
    /// of the tenants the scope sees.
    dead_letters: Vec<(String, String, u64)>,
    /// Whether the host's own figures below are shown (the scope sees the host).
    host: bool,
    /// Dead letters dropped (past a bound, or with their plugin) since the host started.
    dead_letters_dropped: u64,
    degraded: bool,
    bytes_written: u64,
    ops: u64,
}

impl StateSample {
    fn gather(
        durable: &crate::durable::Durable,
        running: &[RunningPlugin],
        scope: &Scope,
    ) -> StateSample {
        let stats = durable.stats();
        let mut counts = durable.dead_letter_counts();
        for r in running {
            counts.entry(r.id.to_string()).or_insert(0);
        }
        StateSample {
            dead_letters: counts
                .into_iter()
                .filter_map(|(id, n)| {
                    let (tenant, name) = id.split_once('/').unwrap_or(("", &id));
                    scope
                        .sees_tenant(tenant)
                        .then(|| (escape(name), escape(tenant), n))
                })
                .collect(),
            host: scope.sees_host(),
            dead_letters_dropped: stats.dead_letters_dropped,
            degraded: stats.degraded.is_some(),
            bytes_written: stats.bytes_written,
            ops: stats.ops,
        }
    }
}

/// Every figure of one scrape, read at once.
#[derive(Debug)]
struct Snapshot {
    plugins: Vec<PluginSample>,
    waiting: Vec<WaitingSample>,
    /// (filter, evaluations, runtime errors) per distinct change filter.
    filters: Vec<(String, u64, u64)>,
    informers: Vec<InformerSample>,
    /// Keyed by (informer, handler); two handlers registered under one name on one informer are
    /// summed, since a label set may appear only once per family.
    listeners: BTreeMap<(String, String), ListenerSample>,
    /// What the plugins count themselves (the `metrics` import).
    plugin_metrics: PluginMetricsSample,
    /// With `--state-dir`.
    state: Option<StateSample>,
    /// With `--shard-group`.
    shard: Option<super::shard::ShardSample>,
    /// While traces are exported.
    traces: Option<TraceSample>,
    /// The plugins' admission hooks.
    admission: super::admission_metrics::AdmissionSample,
}

/// What the trace export pipeline did, while traces are on.
#[derive(Debug)]
struct TraceSample {
    exported: u64,
    failed: u64,
    dropped: u64,
}

impl Snapshot {
    fn gather(state: &AdminState, scope: &Scope) -> Snapshot {
        let host = scope.sees_host();
        let mut informers = Vec::new();
        let mut listeners: BTreeMap<(String, String), ListenerSample> = BTreeMap::new();
        let all = state.factory().informers();
        for i in all.iter().filter(|_| host) {
            let stats = i.stats();
            let informer = escape(i.description());
            informers.push(InformerSample {
                informer: informer.clone(),
                synced: i.has_synced(),
                objects: i.store().len() as u64,
                objects_received: stats.objects_received.load(Ordering::Relaxed),
                lists: stats.lists.load(Ordering::Relaxed),
                restarts: stats.errors.load(Ordering::Relaxed),
                gone: stats.gone.load(Ordering::Relaxed),
            });
            for h in i.handler_stats() {
                let sample = listeners
                    .entry((informer.clone(), escape(&h.name)))
                    .or_default();
                sample.backlog += h.backlog as u64;
                sample.received += h.received;
                sample.delivered += h.delivered;
            }
        }
        informers.sort_by(|a, b| a.informer.cmp(&b.informer));

        let mut running = state.plugins();
        running.retain(|r| scope.sees_tenant(&r.id.tenant));
        let plugin_metrics = PluginMetricsSample::gather(&running);
        let durable = state.host().and_then(|h| h.durable());
        let state_sample = durable.map(|d| StateSample::gather(d, &running, scope));
        let plugins = running
            .iter()
            .map(|r| {
                let s = &r.supervisor;
                PluginSample {
                    plugin: escape(&r.id.name),
                    tenant: escape(&r.id.tenant),
                    expanded: r.expanded as u64,
                    received: r.received,
                    dispatched: s.handled() + s.failed(),
                    failed: s.failed(),
                    dropped: s.dropped(),
                    retried: s.retried(),
                    http: {
                        let o = s.outbound();
                        [
                            &o.requests,
                            &o.failures,
                            &o.denied,
                            &o.bytes_sent,
                            &o.bytes_received,
                        ]
                        .map(|c| c.load(Ordering::Relaxed))
                    },
                    writes: {
                        let w = s.writes();
                        Call::ALL
                            .iter()
                            .flat_map(|c| Outcome::ALL.iter().map(move |o| (*c, *o)))
                            .map(|(c, o)| (c.as_str(), o.as_str(), w.get(c, o)))
                            .filter(|(_, _, n)| *n > 0)
                            .collect()
                    },
                    ticks: s
                        .schedules()
                        .iter()
                        .flat_map(|t| {
                            TickOutcome::ALL
                                .iter()
                                .map(|o| (escape(&t.name), o.as_str(), t.get(*o)))
                        })
                        .collect(),
                    backlog: r.backlog as u64,
                    state: s.state(),
                    latency: s.latency().clone(),
                    dispatch: s.dispatch().clone(),
                }
            })
            .collect();
        let waiting = state
            .host()
            .map(|h| h.waiting())
            .unwrap_or_default()
            .into_iter()
            .filter(|(id, _)| scope.sees_tenant(&id.tenant))
            .map(|(id, w)| WaitingSample {
                plugin: escape(&id.name),
                tenant: escape(&id.tenant),
                waiting_for: escape(&match w.waiting_for {
                    WaitingFor::Kind { api_version, kind } => format!("{api_version}/{kind}"),
                    WaitingFor::ApiServer => "api-server".into(),
                    WaitingFor::Forbidden { resource } => format!("forbidden: {resource}"),
                }),
                attempts: u64::from(w.attempts),
            })
            .collect();
        let filters = state
            .host()
            .filter(|_| host)
            .map(|h| h.change_filter_stats())
            .unwrap_or_default()
            .into_iter()
            .map(|(filter, evaluations, errors)| (escape(&filter), evaluations, errors))
            .collect();
        Snapshot {
            plugins,
            waiting,
            filters,
            informers,
            listeners,
            plugin_metrics,
            state: state_sample,
            shard: state
                .host()
                .filter(|_| host)
                .and_then(|h| h.shard())
                .map(super::shard::ShardSample::gather),
            admission: super::admission_metrics::AdmissionSample::gather(state, scope),
            traces: crate::telemetry::export_stats()
                .filter(|_| host)
                .map(|s| TraceSample {
                    exported: s.exported.load(Ordering::Relaxed),
                    failed: s.failed.load(Ordering::Relaxed),
                    dropped: s.dropped.load(Ordering::Relaxed),
                }),
        }
    }
}

impl Collector for Snapshot {
    fn encode(&self, mut enc: DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        let enc = &mut enc;
        let plugins = &self.plugins;
        numbers(enc, PLUGIN_EVENTS, plugins, plugin_labels)?;
        // The unit is in the name only: a `# UNIT` line on a histogram trips some parsers.
        for (name, help, histogram) in PLUGIN_HISTOGRAMS {
            family(
                enc,
                name,
                help,
                plugins
                    .iter()
                    .map(|p| (plugin_labels(p), histogram(p).clone())),
            )?;
        }
        numbers(enc, PLUGIN_TRAFFIC, plugins, plugin_labels)?;
        family(
            enc,
            "informant_plugin_state",
            "1 for the plugin's current state (running, backing-off, quarantined), else 0.",
            plugins.iter().flat_map(|p| {
                STATES.iter().map(move |(state, name)| {
                    let [plugin, tenant] = plugin_labels(p);
                    (
                        [plugin, tenant, ("state", name.to_string())],
                        ConstGauge::new(u64::from(p.state == *state)),
                    )
                })
            }),
        )?;
        family(
            enc,
            "informant_plugin_writes",
            "Writes the plugin made through the `kube` import, by verb and outcome (denied: refused by the host before any request).",
            plugins.iter().flat_map(|p| {
                p.writes.iter().map(move |(verb, outcome, n)| {
                    let [plugin, tenant] = plugin_labels(p);
                    let labels = [
                        plugin,
                        tenant,
                        ("verb", verb.to_string()),
                        ("outcome", outcome.to_string()),
                    ];
                    (labels, ConstCounter::new(*n))
                })
            }),
        )?;
        family(
            enc,
            "informant_plugin_schedule_ticks",
            "Ticks of the plugin's [[schedule]] tables by outcome (skipped: due while the previous tick still ran, or the plugin was quarantined).",
            plugins.iter().flat_map(|p| {
                p.ticks.iter().map(move |(schedule, outcome, n)| {
                    let [plugin, tenant] = plugin_labels(p);
                    let labels = [
                        plugin,
                        tenant,
                        ("schedule", schedule.clone()),
                        ("outcome", outcome.to_string()),
                    ];
                    (labels, ConstCounter::new(*n))
                })
            }),
        )?;
        numbers(enc, PLUGIN_WILDCARDS, plugins, plugin_labels)?;
        numbers(enc, WAITING, &self.waiting, |w| {
            [
                ("plugin", w.plugin.clone()),
                ("tenant", w.tenant.clone()),
                ("waiting_for", w.waiting_for.clone()),
            ]
        })?;
        numbers(enc, CHANGE_FILTERS, &self.filters, |f| {
            [("filter", f.0.clone())]
        })?;
        numbers(enc, INFORMERS, &self.informers, |i| {
            [("informer", i.informer.clone())]
        })?;
        let listeners: Vec<ListenerRow> = self
            .listeners
            .iter()
            .map(|(k, l)| (k.clone(), l.clone()))
            .collect();
        numbers(enc, LISTENERS, &listeners, |((informer, handler), _)| {
            [("informer", informer.clone()), ("handler", handler.clone())]
        })?;
        if let Some(s) = &self.state {
            s.encode(enc)?;
        }
        if let Some(s) = &self.shard {
            s.encode(enc)?;
        }
        if let Some(t) = &self.traces {
            t.encode(enc)?;
        }
        self.admission.encode(enc)?;
        self.plugin_metrics.encode(enc)
    }
}

/// A plugin's `plugin` and `tenant` labels.
fn plugin_labels(p: &PluginSample) -> Labels<2> {
    [("plugin", p.plugin.clone()), ("tenant", p.tenant.clone())]
}

/// Whether a family of numbers counts up or goes both ways.
#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
}

/// One family of numbers: its name, help, kind, and each sample's value.
type Number<S> = (&'static str, &'static str, Kind, fn(&S) -> u64);

/// Encodes each family of `table`, a sample of each of `samples` labelled by `labels`.
fn numbers<S, const N: usize>(
    enc: &mut DescriptorEncoder<'_>,
    table: &[Number<S>],
    samples: &[S],
    labels: impl Fn(&S) -> Labels<N>,
) -> Result<(), fmt::Error> {
    for (name, help, kind, value) in table {
        let rows = samples.iter().map(|s| (labels(s), value(s)));
        match kind {
            Kind::Counter => family(
                enc,
                name,
                help,
                rows.map(|(l, v)| (l, ConstCounter::new(v))),
            )?,
            Kind::Gauge => family(enc, name, help, rows.map(|(l, v)| (l, ConstGauge::new(v))))?,
        }
    }
    Ok(())
}

const PLUGIN_EVENTS: &[Number<PluginSample>] = &[
    (
        "informant_plugin_events_received",
        "Events offered to the plugin by its informers, before per-key coalescing.",
        Kind::Counter,
        |p| p.received,
    ),
    (
        "informant_plugin_events_dispatched",
        "Events handed to the plugin (handled or failed).",
        Kind::Counter,
        |p| p.dispatched,
    ),
    (
        "informant_plugin_events_failed",
        "Events the plugin failed: trap, missed deadline, memory cap, or an error it returned.",
        Kind::Counter,
        |p| p.failed,
    ),
    (
        "informant_plugin_events_retried",
        "Redeliveries scheduled because the plugin answered `retry` (each counted once).",
        Kind::Counter,
        |p| p.retried,
    ),
    (
        "informant_plugin_events_dropped",
        "Events dropped unseen because the plugin is quarantined.",
        Kind::Counter,
        |p| p.dropped,
    ),
];

type Histogram = (
    &'static str,
    &'static str,
    fn(&PluginSample) -> &DurationHistogram,
);

const PLUGIN_HISTOGRAMS: [Histogram; 2] = [
    (
        "informant_plugin_handler_duration_seconds",
        "Time the plugin took per event, from taking it to reporting its outcome.",
        |p| &p.latency,
    ),
    (
        "informant_plugin_dispatch_delay_seconds",
        "Time each event waited, from the informer receiving it to the plugin taking it.",
        |p| &p.dispatch,
    ),
];

const PLUGIN_TRAFFIC: &[Number<PluginSample>] = &[
    (
        "informant_plugin_http_requests",
        "Outbound HTTP requests the plugin sent (allowed by its allow-list).",
        Kind::Counter,
        |p| p.http[0],
    ),
    (
        "informant_plugin_http_failures",
        "Sent requests that got no response, or whose response body failed or ran over its bound.",
        Kind::Counter,
        |p| p.http[1],
    ),
    (
        "informant_plugin_http_denied",
        "Outbound HTTP requests refused by the allow-list, before any connection.",
        Kind::Counter,
        |p| p.http[2],
    ),
    (
        "informant_plugin_http_sent_bytes",
        "Request body bytes the plugin sent.",
        Kind::Counter,
        |p| p.http[3],
    ),
    (
        "informant_plugin_http_received_bytes",
        "Response body bytes the plugin read.",
        Kind::Counter,
        |p| p.http[4],
    ),
    (
        "informant_plugin_backlog",
        "Events queued for the plugin across its informers (after coalescing).",
        Kind::Gauge,
        |p| p.backlog,
    ),
];

const PLUGIN_WILDCARDS: &[Number<PluginSample>] = &[(
    "informant_plugin_wildcard_resources",
    "Resources the plugin's wildcard watches (kind = \"*\") cover now; /plugins lists them. 0 without any.",
    Kind::Gauge,
    |p| p.expanded,
)];

const WAITING: &[Number<WaitingSample>] = &[(
    "informant_plugin_waiting_attempts",
    "Load attempts of a plugin (or a running plugin's new version) waiting for a kind to be served or for the API server.",
    Kind::Gauge,
    |w| w.attempts,
)];

const CHANGE_FILTERS: &[Number<(String, u64, u64)>] = &[
    (
        "informant_change_filter_evaluations",
        "Objects a change filter (a watch's jq-filter and ignore) projected, once per version for all the watches sharing it.",
        Kind::Counter,
        |f| f.1,
    ),
    (
        "informant_change_filter_errors",
        "Projections that failed at run time; the update was passed on unfiltered.",
        Kind::Counter,
        |f| f.2,
    ),
];

const INFORMERS: &[Number<InformerSample>] = &[
    (
        "informant_informer_synced",
        "1 once the informer has applied its first complete list.",
        Kind::Gauge,
        |i| u64::from(i.synced),
    ),
    (
        "informant_informer_objects",
        "Objects in the informer's cache.",
        Kind::Gauge,
        |i| i.objects,
    ),
    (
        "informant_informer_objects_received",
        "Watch events and listed objects received from the API server.",
        Kind::Counter,
        |i| i.objects_received,
    ),
    (
        "informant_informer_lists",
        "Complete lists applied, the initial one included.",
        Kind::Counter,
        |i| i.lists,
    ),
    (
        "informant_informer_watch_restarts",
        "List/watch failures, each followed by a backoff and a new list or watch (a watch the server ends cleanly resumes without counting).",
        Kind::Counter,
        |i| i.restarts,
    ),
    (
        "informant_informer_relists_after_gone",
        "Times the server answered 410 Gone (resourceVersion too old), forcing a relist.",
        Kind::Counter,
        |i| i.gone,
    ),
];

/// A listener's (informer, handler) and its figures.
type ListenerRow = ((String, String), ListenerSample);

const LISTENERS: &[Number<ListenerRow>] = &[
    (
        "informant_listener_backlog",
        "Events queued for one handler of one informer (after coalescing).",
        Kind::Gauge,
        |(_, l)| l.backlog,
    ),
    (
        "informant_listener_events_received",
        "Events offered to one handler of one informer, before coalescing.",
        Kind::Counter,
        |(_, l)| l.received,
    ),
    (
        "informant_listener_events_delivered",
        "Events one handler of one informer has finished handling.",
        Kind::Counter,
        |(_, l)| l.delivered,
    ),
];

impl TraceSample {
    fn encode(&self, enc: &mut DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        single(
            enc,
            "informant_trace_spans_exported",
            "Spans the trace collector accepted.",
            ConstCounter::new(self.exported),
        )?;
        single(
            enc,
            "informant_trace_spans_failed",
            "Spans lost in export requests that failed (no answer, an error status, past the timeout).",
            ConstCounter::new(self.failed),
        )?;
        single(
            enc,
            "informant_trace_spans_dropped",
            "Spans dropped unsent because the export queue was full (a dead or slow collector).",
            ConstCounter::new(self.dropped),
        )
    }
}

impl StateSample {
    fn encode(&self, enc: &mut DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        family(
            enc,
            "informant_dead_letters",
            "Events the plugin failed for good, kept in the state directory now.",
            self.dead_letters.iter().map(|(plugin, tenant, n)| {
                (
                    [("plugin", plugin.clone()), ("tenant", tenant.clone())],
                    ConstGauge::new(*n),
                )
            }),
        )?;
        if !self.host {
            return Ok(());
        }
        single(
            enc,
            "informant_dead_letters_dropped",
            "Dead letters dropped: the oldest past a plugin's or a tenant's bound, and those of plugins removed from the plugins directory.",
            ConstCounter::new(self.dead_letters_dropped),
        )?;
        single(
            enc,
            "informant_state_degraded",
            "1 once the state directory's journal stopped writing (a disk error); deliveries go on without it.",
            ConstGauge::new(u64::from(self.degraded)),
        )?;
        single(
            enc,
            "informant_state_bytes_written",
            "Bytes written to the state file since the host started.",
            ConstCounter::new(self.bytes_written),
        )?;
        single(
            enc,
            "informant_state_ops",
            "Changes (object versions, cursors, dead letters) committed to the state file since the host started.",
            ConstCounter::new(self.ops),
        )
    }
}

/// Encodes a family of one sample without labels (written `name 3`, not `name{} 3`, which some
/// parsers refuse).
pub(super) fn single<M: EncodeMetric + TypedMetric>(
    enc: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    m: M,
) -> Result<(), fmt::Error> {
    m.encode(enc.encode_descriptor(name, help, None, M::TYPE)?)
}

const STATES: [(PluginState, &str); 3] = [
    (PluginState::Running, "running"),
    (PluginState::BackingOff, "backing-off"),
    (PluginState::Quarantined, "quarantined"),
];

type Labels<const N: usize> = [(&'static str, String); N];

/// Encodes one family: its descriptor, then one sample per label set. The declared type is the
/// metric type's own, so a family cannot declare one type and encode another.
///
/// A family without samples (no plugins yet) is left out, as client_golang does with empty
/// vectors: some parsers refuse a descriptor with nothing under it.
pub(super) fn family<const N: usize, M: EncodeMetric + TypedMetric>(
    enc: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    rows: impl Iterator<Item = (Labels<N>, M)>,
) -> Result<(), fmt::Error> {
    let mut rows = rows.peekable();
    if rows.peek().is_none() {
        return Ok(());
    }
    let mut metric = enc.encode_descriptor(name, help, None, M::TYPE)?;
    for (labels, m) in rows {
        m.encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

/// Escapes a label value for the text format ([`name::label_value`]); prometheus-client writes
/// label values verbatim, and plugin, tenant, informer and filter names come from files, which
/// may hold anything.
pub(super) fn escape(value: &str) -> String {
    name::label_value(value).into_owned()
}

#[cfg(test)]
mod tests;
