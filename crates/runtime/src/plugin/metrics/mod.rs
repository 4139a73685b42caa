//! Metrics plugins keep (the WIT `metrics` import), held per plugin version and read by
//! `/metrics` at scrape time.
//!
//! Contract:
//! - Series are per plugin version: [`PluginMetrics`] belongs to one version's instances, the
//!   imports write into it and nothing else does, so two plugins naming the same metric never
//!   touch each other's series. A reload or unload drops it, and its series leave `/metrics`.
//! - A call takes only its own plugin's lock (the scrape is the only other taker), so plugins do
//!   not contend with each other; the host-wide [`MetricNames`] is taken only when a plugin
//!   starts or stops using a name.
//! - A call that would break a rule ([`name`]) or a ceiling ([`MetricLimits`]) changes nothing
//!   and is counted by [`Refusal`].
//!
//! - [`name`]: the rules for metric names, label names and values.
//! - [`registry`]: one plugin's families and series, and the host-wide name types.

pub mod name;
pub mod registry;

pub use registry::{Family, MetricNames, PluginMetrics, Sample, SeriesValue};

/// Errors a metric call is refused with; the WIT boundary carries their messages.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetricError {
    /// The metric name breaks the naming rules.
    #[error("metric name `{name}`: {why}")]
    InvalidName {
        /// The name as given (cut to 128 bytes).
        name: String,
        /// The rule it breaks.
        why: &'static str,
    },
    /// A label name or value breaks the label rules.
    #[error("metric `{metric}`: label `{label}`: {why}")]
    InvalidLabel {
        /// The metric.
        metric: String,
        /// The label name as given (cut to 128 bytes).
        label: String,
        /// The rule it breaks.
        why: String,
    },
    /// A value, help text, group or bucket list is out of bounds.
    #[error("metric `{metric}`: {why}")]
    InvalidValue {
        /// The metric.
        metric: String,
        /// What is wrong.
        why: String,
    },
    /// The name already has another type, or a histogram other buckets.
    #[error("metric `{metric}`: {why}")]
    TypeConflict {
        /// The metric.
        metric: String,
        /// The type it has and where.
        why: String,
    },
    /// The plugin holds as many series as it may.
    #[error(
        "metric `{metric}`: refused: the plugin holds {limit} series, its ceiling (`limits.max-metric-series`); delete some first"
    )]
    TooManySeries {
        /// The metric.
        metric: String,
        /// The ceiling.
        limit: usize,
    },
}

impl MetricError {
    /// Which refusal counter this error counts on.
    pub fn refusal(&self) -> Refusal {
        match self {
            MetricError::InvalidName { .. } => Refusal::Name,
            MetricError::InvalidLabel { .. } => Refusal::Label,
            MetricError::InvalidValue { .. } => Refusal::Value,
            MetricError::TypeConflict { .. } => Refusal::Type,
            MetricError::TooManySeries { .. } => Refusal::Limit,
        }
    }
}

/// `Result` with [`MetricError`].
pub type Result<T, E = MetricError> = std::result::Result<T, E>;

/// Why a metric call was refused, as the `reason` label of the refusal counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Over the series ceiling.
    Limit,
    /// An invalid metric name.
    Name,
    /// An invalid label.
    Label,
    /// An invalid value, help, group or buckets.
    Value,
    /// A type conflict.
    Type,
}

impl Refusal {
    /// Every reason, in the order the counters are kept.
    pub const ALL: [Refusal; 5] = [
        Refusal::Limit,
        Refusal::Name,
        Refusal::Label,
        Refusal::Value,
        Refusal::Type,
    ];

    /// The `reason` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Limit => "series-limit",
            Refusal::Name => "invalid-name",
            Refusal::Label => "invalid-label",
            Refusal::Value => "invalid-value",
            Refusal::Type => "type-conflict",
        }
    }
}

/// Default ceiling on one plugin's series (`limits.max-metric-series`).
pub const DEFAULT_MAX_SERIES: usize = 1000;

/// What one plugin's metrics may hold (`[limits]` in informant.toml).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricLimits {
    /// Series one plugin version may hold at once, over all its metrics.
    pub max_series: usize,
}

impl Default for MetricLimits {
    fn default() -> Self {
        MetricLimits {
            max_series: DEFAULT_MAX_SERIES,
        }
    }
}

/// The three metric types a plugin can keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (`counter-add`).
    Counter,
    /// Set to any value (`gauge-set`).
    Gauge,
    /// Observations counted into buckets (`histogram-observe`).
    Histogram,
}

impl Kind {
    /// The lower-case name, as in the exposition's `# TYPE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}
