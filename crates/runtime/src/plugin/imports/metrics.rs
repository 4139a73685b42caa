//! The `metrics` import: a plugin's counters, gauges and histograms, written into its version's
//! [`PluginMetrics`] (the rules, budgets and tenant names are [`crate::plugin::metrics`]'s).
//! Answered from memory under the plugin's own lock: plain calls, like `events`.

use std::sync::Arc;

use wasmtime::component::{HasSelf, Linker};

use crate::plugin::bindings::informant;
use crate::plugin::bindings::informant::plugin::metrics::{Host, Metric, MetricError};
use crate::plugin::metrics::registry::Op;
use crate::plugin::metrics::{MetricError as Refused, PluginMetrics};

/// What the `metrics` import of one instance holds: its plugin version's series.
#[derive(Default)]
pub(crate) struct MetricsState {
    pub(super) metrics: Arc<PluginMetrics>,
}

/// Adds the `metrics` import to `linker`, each store's state of it reached by `get`.
pub(crate) fn add_to_linker<T: 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> &mut MetricsState,
) -> wasmtime::Result<()> {
    informant::plugin::metrics::add_to_linker::<T, HasSelf<MetricsState>>(linker, get)
}

impl MetricsState {
    fn write_metric(&self, m: Metric, op: Op<'_>) -> Result<(), MetricError> {
        self.metrics
            .write(&m.name, &m.help, m.labels, m.group, op)
            .map_err(wit_error)
    }
}

/// The refusal as the plugin sees it: the variant for its rule, the message naming it.
fn wit_error(e: Refused) -> MetricError {
    let message = e.to_string();
    match e {
        Refused::InvalidName { .. } => MetricError::InvalidName(message),
        Refused::InvalidLabel { .. } => MetricError::InvalidLabel(message),
        Refused::InvalidValue { .. } | Refused::Overflow { .. } => {
            MetricError::InvalidValue(message)
        }
        Refused::TypeConflict { .. } => MetricError::TypeConflict(message),
        Refused::OverBudget { .. } => MetricError::TooManySeries(message),
    }
}

impl Host for MetricsState {
    fn counter_add(&mut self, m: Metric, value: f64) -> wasmtime::Result<Result<(), MetricError>> {
        Ok(self.write_metric(m, Op::Add(value)))
    }

    fn gauge_set(&mut self, m: Metric, value: f64) -> wasmtime::Result<Result<(), MetricError>> {
        Ok(self.write_metric(m, Op::Set(value)))
    }

    fn histogram_observe(
        &mut self,
        m: Metric,
        buckets: Vec<f64>,
        value: f64,
    ) -> wasmtime::Result<Result<(), MetricError>> {
        Ok(self.write_metric(m, Op::Observe(&buckets, value)))
    }

    fn delete(&mut self, name: String, labels: Vec<(String, String)>) -> wasmtime::Result<bool> {
        Ok(self.metrics.delete(&name, labels))
    }

    fn delete_group(&mut self, group: String) -> wasmtime::Result<u32> {
        Ok(self.metrics.delete_group(&group))
    }
}
