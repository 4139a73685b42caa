//! The per-event duration histograms (`/metrics`): every event of every plugin records two, so
//! an observation is a binary search over the bounds and two relaxed atomic adds, with no lock
//! and no float arithmetic.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::histogram::exponential_buckets;
use prometheus_client::metrics::{MetricType, TypedMetric};

/// Durations counted into buckets with fixed upper bounds; clones share the counts.
#[derive(Clone, Debug)]
pub struct DurationHistogram(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    /// Upper bounds in seconds, as exposed.
    bounds: Box<[f64]>,
    /// The same bounds in nanoseconds, as compared.
    bound_nanos: Box<[u64]>,
    /// One count per bound, then the count above the last (`+Inf`).
    counts: Box<[AtomicU64]>,
    sum_nanos: AtomicU64,
}

impl DurationHistogram {
    /// `n` buckets from `start` seconds, each `factor` times the one before.
    pub fn exponential(start: f64, factor: f64, n: u16) -> Self {
        Self::with_bounds(exponential_buckets(start, factor, n))
    }

    /// Buckets with these upper bounds in seconds, ascending.
    pub fn with_bounds(bounds: impl IntoIterator<Item = f64>) -> Self {
        let bounds: Box<[f64]> = bounds.into_iter().collect();
        debug_assert!(bounds.is_sorted(), "bounds ascend");
        let bound_nanos = bounds.iter().map(|b| (b * 1e9).round() as u64).collect();
        let counts = (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect();
        DurationHistogram(Arc::new(Inner {
            bounds,
            bound_nanos,
            counts,
            sum_nanos: AtomicU64::new(0),
        }))
    }

    /// Counts one duration.
    pub fn observe(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let bucket = self.0.bound_nanos.partition_point(|b| *b < nanos);
        self.0.counts[bucket].fetch_add(1, Ordering::Relaxed);
        self.0.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Each bucket's upper bound in seconds (`f64::MAX` for `+Inf`) with its own count (not
    /// cumulative), read now.
    pub fn buckets(&self) -> Vec<(f64, u64)> {
        let bounds = self.0.bounds.iter().copied().chain([f64::MAX]);
        bounds
            .zip(self.0.counts.iter().map(|c| c.load(Ordering::Relaxed)))
            .collect()
    }

    /// The upper bound of the bucket the `q` quantile of all of `histograms` together falls in
    /// (they share their bounds): what an operator reads from `/metrics`. `None` when nothing
    /// was counted or the quantile is above the last bound.
    pub fn quantile_bound<'a>(
        histograms: impl IntoIterator<Item = &'a DurationHistogram>,
        q: f64,
    ) -> Option<Duration> {
        let mut summed: Vec<(f64, u64)> = Vec::new();
        for h in histograms {
            for (i, (bound, n)) in h.buckets().into_iter().enumerate() {
                match summed.get_mut(i) {
                    Some((_, sum)) => *sum += n,
                    None => summed.push((bound, n)),
                }
            }
        }
        let total: u64 = summed.iter().map(|(_, n)| n).sum();
        let wanted = ((total as f64 * q).ceil() as u64).max(1);
        let mut seen = 0;
        let (bound, _) = summed.into_iter().find(|(_, n)| {
            seen += n;
            seen >= wanted
        })?;
        (bound < f64::MAX).then(|| Duration::from_secs_f64(bound))
    }

    /// Durations counted.
    pub fn count(&self) -> u64 {
        self.0
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }
}

impl TypedMetric for DurationHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for DurationHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let buckets = self.buckets();
        let count = buckets.iter().map(|(_, n)| n).sum();
        let sum = self.0.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_land_in_the_first_bucket_at_or_above_them() {
        let h = DurationHistogram::exponential(1e-3, 10.0, 3);
        for ms in [0, 1, 2, 10, 99, 100, 101, 5_000] {
            h.observe(Duration::from_millis(ms));
        }
        assert_eq!(
            h.buckets(),
            [(1e-3, 2), (1e-2, 2), (1e-1, 2), (f64::MAX, 2)],
            "le 1 ms: 0 and 1; le 10 ms: 2 and 10; le 100 ms: 99 and 100; above: 101 and 5 s"
        );
        assert_eq!(h.count(), 8);
        let mut text = String::new();
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register("d", "", h.clone());
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("d_bucket{le=\"0.001\"} 2\n"), "{text}");
        assert!(text.contains("d_bucket{le=\"+Inf\"} 8\n"), "{text}");
        assert!(text.contains("d_count 8\n"), "{text}");
        assert!(text.contains("d_sum 5.313\n"), "{text}");
    }

    #[test]
    fn a_quantile_is_the_bound_of_its_bucket_over_all_the_histograms() {
        let (a, b) = (
            DurationHistogram::exponential(1e-3, 10.0, 3),
            DurationHistogram::exponential(1e-3, 10.0, 3),
        );
        let bound = |q| DurationHistogram::quantile_bound([&a, &b], q);
        assert_eq!(bound(0.5), None, "nothing counted");
        for _ in 0..98 {
            a.observe(Duration::from_micros(500));
        }
        b.observe(Duration::from_millis(5));
        b.observe(Duration::from_secs(5));
        assert_eq!(bound(0.5), Some(Duration::from_millis(1)));
        assert_eq!(bound(0.98), Some(Duration::from_millis(1)));
        assert_eq!(bound(0.99), Some(Duration::from_millis(10)));
        assert_eq!(bound(1.0), None, "above the last bound");
    }
}
