//! Metrics on the host's `/metrics`: counters, gauges and histograms, exported as
//! `informant_plugin_NAME` (a tenant's plugin: `informant_tenant_TENANT__NAME`) with the host's
//! `plugin` and `tenant` labels added.
//!
//! ```no_run
//! use informant_sdk::metrics;
//! # fn f() -> Result<(), metrics::MetricError> {
//! metrics::counter("violations", "Objects breaking the policy.")
//!     .labels(&[("kind", "Deployment")])
//!     .add(1.0)?;
//! metrics::gauge("queue_depth", "Items waiting.").set(4.0)?;
//! metrics::histogram("payload_bytes", "Payload sizes.")
//!     .buckets(&[1e3, 1e4, 1e5])
//!     .observe(2048.0)?;
//! # Ok(()) }
//! ```
//!
//! The host checks every call that would create a series (names by Prometheus's rules; labels
//! other than `plugin`, `tenant` and `__*`; one type per name; the plugin's series ceiling) and
//! refuses with a [`MetricError`] naming the rule; a refused call changes nothing. Series are the
//! plugin's own, and last until the plugin is reloaded or unloaded.
//!
//! On native targets calls are recorded by the running
//! [`testing::Harness`](crate::testing::Harness) (`Harness::metrics()`), and accepted.

use std::fmt;

/// Why the host refused a metric call; the message names the metric and the rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetricError {
    /// The metric name breaks the naming rules.
    InvalidName(String),
    /// A label name or value breaks the label rules.
    InvalidLabel(String),
    /// Not a finite number, a counter going down, or help, group or buckets out of bounds.
    InvalidValue(String),
    /// The name already has another type (here or in another plugin), or other buckets.
    TypeConflict(String),
    /// The plugin holds as many series as it may.
    TooManySeries(String),
}

/// Carries the host's message, which names the rule.
impl fmt::Display for MetricError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetricError::InvalidName(m)
            | MetricError::InvalidLabel(m)
            | MetricError::InvalidValue(m)
            | MetricError::TypeConflict(m)
            | MetricError::TooManySeries(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for MetricError {}

/// Which call a [`Metric`] makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `counter-add`.
    Counter,
    /// `gauge-set`.
    Gauge,
    /// `histogram-observe`.
    Histogram,
}

/// One series to write: a name, its help, labels and group; build it with [`counter`],
/// [`gauge`] or [`histogram`].
#[derive(Debug, Clone)]
#[must_use = "a metric is written by `add`, `set` or `observe`"]
pub struct Metric<'a> {
    kind: Kind,
    name: &'a str,
    help: &'a str,
    labels: Vec<(String, String)>,
    group: Option<&'a str>,
    buckets: &'a [f64],
}

/// A counter: only goes up.
pub fn counter<'a>(name: &'a str, help: &'a str) -> Metric<'a> {
    Metric::new(Kind::Counter, name, help)
}

/// A gauge: set to any finite value.
pub fn gauge<'a>(name: &'a str, help: &'a str) -> Metric<'a> {
    Metric::new(Kind::Gauge, name, help)
}

/// A histogram: observations counted into buckets (Prometheus's defaults unless
/// [`Metric::buckets`] names others).
pub fn histogram<'a>(name: &'a str, help: &'a str) -> Metric<'a> {
    Metric::new(Kind::Histogram, name, help)
}

impl<'a> Metric<'a> {
    fn new(kind: Kind, name: &'a str, help: &'a str) -> Self {
        Metric {
            kind,
            name,
            help,
            labels: Vec::new(),
            group: None,
            buckets: &[],
        }
    }

    /// Label pairs of the series (added to any given before).
    pub fn labels(mut self, labels: &[(&str, &str)]) -> Self {
        self.labels
            .extend(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        self
    }

    /// The group the series belongs to: [`delete_group`] removes a group's series at once.
    pub fn group(mut self, group: &'a str) -> Self {
        self.group = Some(group);
        self
    }

    /// A histogram's bucket upper bounds (ascending); fixed by the metric's first use.
    pub fn buckets(mut self, buckets: &'a [f64]) -> Self {
        self.buckets = buckets;
        self
    }

    /// Adds `value` to a counter.
    pub fn add(&self, value: f64) -> Result<(), MetricError> {
        self.write(Kind::Counter, value)
    }

    /// Adds one to a counter.
    pub fn inc(&self) -> Result<(), MetricError> {
        self.add(1.0)
    }

    /// Sets a gauge.
    pub fn set(&self, value: f64) -> Result<(), MetricError> {
        self.write(Kind::Gauge, value)
    }

    /// Counts one observation into a histogram.
    pub fn observe(&self, value: f64) -> Result<(), MetricError> {
        self.write(Kind::Histogram, value)
    }

    /// The call for `kind`: the one the metric was made as, or a type conflict named here (the
    /// host would refuse it the same way).
    fn write(&self, kind: Kind, value: f64) -> Result<(), MetricError> {
        if kind != self.kind {
            return Err(MetricError::TypeConflict(format!(
                "metric `{}`: made as a {:?}, written as a {kind:?}",
                self.name, self.kind
            )));
        }
        backend::write(self, value)
    }
}

/// Removes one series; whether it existed.
pub fn delete(name: &str, labels: &[(&str, &str)]) -> bool {
    let labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    backend::delete(name, labels)
}

/// Removes every series of `group`; how many there were.
pub fn delete_group(group: &str) -> u32 {
    backend::delete_group(group)
}

#[cfg(target_arch = "wasm32")]
mod backend {
    use super::{Kind, Metric, MetricError};
    use crate::wit::informant::plugin::metrics as imports;

    pub(super) fn write(m: &Metric<'_>, value: f64) -> Result<(), MetricError> {
        let metric = imports::Metric {
            name: m.name.to_string(),
            help: m.help.to_string(),
            labels: m.labels.clone(),
            group: m.group.map(str::to_string),
        };
        let written = match m.kind {
            Kind::Counter => imports::counter_add(&metric, value),
            Kind::Gauge => imports::gauge_set(&metric, value),
            Kind::Histogram => imports::histogram_observe(&metric, m.buckets, value),
        };
        written.map_err(|e| match e {
            imports::MetricError::InvalidName(m) => MetricError::InvalidName(m),
            imports::MetricError::InvalidLabel(m) => MetricError::InvalidLabel(m),
            imports::MetricError::InvalidValue(m) => MetricError::InvalidValue(m),
            imports::MetricError::TypeConflict(m) => MetricError::TypeConflict(m),
            imports::MetricError::TooManySeries(m) => MetricError::TooManySeries(m),
        })
    }

    pub(super) fn delete(name: &str, labels: Vec<(String, String)>) -> bool {
        imports::delete(name, &labels)
    }

    pub(super) fn delete_group(group: &str) -> u32 {
        imports::delete_group(group)
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod backend {
    use super::{Kind, Metric, MetricError};
    use crate::testing::{MetricCall, record_metric};

    pub(super) fn write(m: &Metric<'_>, value: f64) -> Result<(), MetricError> {
        let call = match m.kind {
            Kind::Counter => "counter-add",
            Kind::Gauge => "gauge-set",
            Kind::Histogram => "histogram-observe",
        };
        let mut labels = m.labels.clone();
        labels.sort();
        record_metric(MetricCall {
            call,
            name: m.name.to_string(),
            help: m.help.to_string(),
            labels,
            group: m.group.map(str::to_string),
            value,
        });
        Ok(())
    }

    pub(super) fn delete(name: &str, mut labels: Vec<(String, String)>) -> bool {
        labels.sort();
        crate::testing::delete_metric(name, labels)
    }

    pub(super) fn delete_group(group: &str) -> u32 {
        crate::testing::delete_metric_group(group)
    }
}
