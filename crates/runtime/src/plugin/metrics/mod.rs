//! Metrics plugins keep (the WIT `metrics` import), held per plugin version and read by
//! `/metrics` at scrape time.
//!
//! Contract:
//! - Series are per plugin version: [`PluginMetrics`] belongs to one version's instances, the
//!   imports write into it and nothing else does, so two plugins naming the same metric never
//!   touch each other's series. A reload or unload drops it, and its series leave `/metrics`.
//! - Names are per tenant: each tenant's families are exposed under a prefix of its own
//!   ([`name::exposed`]), and a name's type is kept per tenant ([`TenantMetrics`]), so no
//!   tenant can claim a name, a type or a help text for another, nor take a host family.
//! - What series cost is budgeted twice: per plugin version ([`MetricLimits`] from
//!   `[limits]`) and per tenant, over all its plugins (its `[tenants.NAME]` keys, else the
//!   host's `tenant-*` defaults). A new series past either is refused; existing series keep
//!   taking writes.
//! - A call takes only its own plugin's lock (the scrape is the only other taker), so plugins do
//!   not contend with each other; its tenant's lock is taken only when a series or family is
//!   made or removed, never to update one.
//! - A call that would break a rule ([`name`]), a budget or keep a sum finite changes nothing
//!   and is counted by [`Refusal`].
//!
//! - [`name`]: the rules for metric names, label names and values, and how they are exposed.
//! - [`registry`]: one plugin's families and series, and each tenant's names and budget.

pub(crate) mod name;
pub(crate) mod registry;

pub(crate) use registry::{Family, MetricTenants, PluginMetrics, SeriesValue};

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
    /// The write would take a sum past the largest finite number (it stays as it was).
    #[error(
        "metric `{metric}`: refused: the {what} would pass the largest finite number ({max:e}); it keeps its value",
        max = f64::MAX
    )]
    Overflow {
        /// The metric.
        metric: String,
        /// What would overflow: `counter` or `histogram sum`.
        what: &'static str,
    },
    /// A new series would take its plugin or its tenant past a budget.
    #[error("metric `{metric}`: refused: {over}; existing series still take writes")]
    OverBudget {
        /// The metric.
        metric: String,
        /// The budget it would pass.
        over: Over,
    },
}

/// The budget a new series would pass, and its size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Over {
    /// The plugin's series (`limits.max-metric-series`).
    #[error(
        "the plugin holds {limit} series, its ceiling (`limits.max-metric-series`); delete some first"
    )]
    PluginSeries {
        /// The ceiling.
        limit: usize,
    },
    /// The plugin's bytes (`limits.max-metric-kib`).
    #[error(
        "the plugin's series would take more than {} KiB of names and labels, its ceiling (`limits.max-metric-kib`)",
        .limit / 1024
    )]
    PluginBytes {
        /// The ceiling, in bytes.
        limit: usize,
    },
    /// The tenant's series (its `max-metric-series`).
    #[error(
        "tenant `{tenant}`'s plugins hold {limit} series together, its budget (`max-metric-series` in informant.toml)"
    )]
    TenantSeries {
        /// The tenant.
        tenant: String,
        /// The budget.
        limit: usize,
    },
    /// The tenant's bytes (its `max-metric-kib`).
    #[error(
        "tenant `{tenant}`'s plugins' series would take more than {} KiB of names and labels together, its budget (`max-metric-kib` in informant.toml)",
        .limit / 1024
    )]
    TenantBytes {
        /// The tenant.
        tenant: String,
        /// The budget, in bytes.
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
            MetricError::Overflow { .. } => Refusal::Overflow,
            MetricError::OverBudget { over, .. } => match over {
                Over::PluginSeries { .. } => Refusal::Limit,
                Over::PluginBytes { .. } => Refusal::Bytes,
                Over::TenantSeries { .. } => Refusal::TenantLimit,
                Over::TenantBytes { .. } => Refusal::TenantBytes,
            },
        }
    }
}

/// `Result` with [`MetricError`].
pub(crate) type Result<T, E = MetricError> = std::result::Result<T, E>;

/// Why a metric call was refused, as the `reason` label of the refusal counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Over the plugin's series ceiling.
    Limit,
    /// Over the plugin's bytes ceiling.
    Bytes,
    /// Over the tenant's series budget.
    TenantLimit,
    /// Over the tenant's bytes budget.
    TenantBytes,
    /// An invalid metric name.
    Name,
    /// An invalid label.
    Label,
    /// An invalid value, help, group or buckets.
    Value,
    /// A type conflict.
    Type,
    /// A sum that would stop being finite.
    Overflow,
}

impl Refusal {
    /// Every reason, in the order the counters are kept.
    pub const ALL: [Refusal; 9] = [
        Refusal::Limit,
        Refusal::Bytes,
        Refusal::TenantLimit,
        Refusal::TenantBytes,
        Refusal::Name,
        Refusal::Label,
        Refusal::Value,
        Refusal::Type,
        Refusal::Overflow,
    ];

    /// The `reason` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Limit => "series-limit",
            Refusal::Bytes => "bytes-limit",
            Refusal::TenantLimit => "tenant-series-limit",
            Refusal::TenantBytes => "tenant-bytes-limit",
            Refusal::Name => "invalid-name",
            Refusal::Label => "invalid-label",
            Refusal::Value => "invalid-value",
            Refusal::Type => "type-conflict",
            Refusal::Overflow => "overflow",
        }
    }
}

/// Default ceiling on one plugin's series (`limits.max-metric-series`).
pub(crate) const DEFAULT_MAX_SERIES: usize = 1000;
/// Default ceiling on one plugin's bytes (`limits.max-metric-kib`): 1 MiB.
pub(crate) const DEFAULT_MAX_BYTES: usize = 1 << 20;
/// Default budget of one tenant's series over all its plugins (`limits.tenant-max-metric-series`).
pub(crate) const DEFAULT_TENANT_MAX_SERIES: usize = 5000;
/// Default budget of one tenant's bytes over all its plugins (`limits.tenant-max-metric-kib`):
/// 4 MiB.
pub(crate) const DEFAULT_TENANT_MAX_BYTES: usize = 4 << 20;

/// What one plugin's, or one tenant's, metrics may hold (`[limits]` and `[tenants.NAME]` in
/// informant.toml).
///
/// A series costs the bytes of its family's name and its label names and values on each line
/// it takes in the exposition (one, or a histogram's buckets and three); a family costs its
/// name and help text once more. The host's `plugin` and `tenant` labels are not counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricLimits {
    /// Series held at once.
    pub max_series: usize,
    /// Bytes held at once.
    pub max_bytes: usize,
}

impl MetricLimits {
    /// No ceiling (the operator's plugins, as a tenant).
    pub const UNLIMITED: MetricLimits = MetricLimits {
        max_series: usize::MAX,
        max_bytes: usize::MAX,
    };

    /// The default budget of one tenant.
    pub const TENANT_DEFAULT: MetricLimits = MetricLimits {
        max_series: DEFAULT_TENANT_MAX_SERIES,
        max_bytes: DEFAULT_TENANT_MAX_BYTES,
    };
}

impl Default for MetricLimits {
    /// The default ceilings of one plugin version.
    fn default() -> Self {
        MetricLimits {
            max_series: DEFAULT_MAX_SERIES,
            max_bytes: DEFAULT_MAX_BYTES,
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
