//! The metrics plugins keep (the `metrics` import) on `/metrics`: each plugin's families merged
//! by name as `informant_plugin_NAME`, with the host's `plugin` and `tenant` labels added to
//! every series, and the host's own figures about them (series held, calls refused).
//!
//! Merging is safe by construction: a name has one type on the host
//! ([`MetricNames`](crate::plugin::metrics::MetricNames)), a plugin's names never take a host
//! family's ([`name::HOST_FAMILIES`]), and `plugin`/`tenant` set apart the series of plugins
//! sharing a name. Help texts are escaped here; when plugins give one name different help
//! texts, the first plugin's (by tenant, then name) is shown.

use std::collections::BTreeMap;
use std::fmt;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::{MetricType, TypedMetric};

use crate::plugin::RunningPlugin;
use crate::plugin::metrics::{Family, Kind, Refusal, SeriesValue, name};

/// The series of one family across plugins, each with its own full label set.
#[derive(Debug)]
struct Merged {
    kind: Kind,
    help: String,
    rows: Vec<(Vec<(String, String)>, Row)>,
}

/// One series' value, ready to encode.
#[derive(Debug)]
enum Row {
    Counter(f64),
    Gauge(f64),
    Histogram(ConstHistogram),
}

/// A histogram read at scrape time.
#[derive(Debug)]
struct ConstHistogram {
    /// Each bound with its own count, `f64::MAX` standing for `+Inf`.
    buckets: Vec<(f64, u64)>,
    sum: f64,
}

impl TypedMetric for ConstHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for ConstHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), fmt::Error> {
        let count = self.buckets.iter().map(|(_, n)| n).sum();
        encoder.encode_histogram::<NoLabelSet>(self.sum, count, &self.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// One plugin's own figures about its metrics.
#[derive(Debug)]
struct Held {
    plugin: String,
    tenant: String,
    series: u64,
    refused: [u64; Refusal::ALL.len()],
}

/// Every plugin's metrics, read at once for one scrape.
#[derive(Debug, Default)]
pub(super) struct PluginMetricsSample {
    held: Vec<Held>,
    families: BTreeMap<String, Merged>,
}

impl PluginMetricsSample {
    /// Copies out the metrics of `plugins`, with label values escaped by `escape`.
    pub(super) fn gather(plugins: &[RunningPlugin], escape: fn(&str) -> String) -> Self {
        let mut sample = PluginMetricsSample::default();
        for r in plugins {
            let m = r.supervisor.metrics();
            let (plugin, tenant) = (escape(&r.id.name), escape(&r.id.tenant));
            sample.held.push(Held {
                plugin: plugin.clone(),
                tenant: tenant.clone(),
                series: m.series() as u64,
                refused: Refusal::ALL.map(|reason| m.refused(reason)),
            });
            for f in m.snapshot() {
                sample.add(&plugin, &tenant, f, escape);
            }
        }
        sample
    }

    fn add(&mut self, plugin: &str, tenant: &str, f: Family, escape: fn(&str) -> String) {
        let merged = self.families.entry(f.name).or_insert_with(|| Merged {
            kind: f.kind,
            help: name::escape_help(&f.help),
            rows: Vec::new(),
        });
        // One type per name on the host; should two ever differ, the first keeps the family.
        if merged.kind != f.kind {
            return;
        }
        for s in f.samples {
            let mut labels = Vec::with_capacity(s.labels.len() + 2);
            labels.push(("plugin".to_string(), plugin.to_string()));
            labels.push(("tenant".to_string(), tenant.to_string()));
            labels.extend(s.labels.into_iter().map(|(k, v)| (k, escape(&v))));
            let row = match s.value {
                SeriesValue::Counter(v) => Row::Counter(v),
                SeriesValue::Gauge(v) => Row::Gauge(v),
                SeriesValue::Histogram { counts, sum } => Row::Histogram(ConstHistogram {
                    buckets: f
                        .bounds
                        .iter()
                        .copied()
                        .chain([f64::MAX])
                        .zip(counts.iter().copied())
                        .collect(),
                    sum,
                }),
            };
            merged.rows.push((labels, row));
        }
    }

    /// Encodes the host's figures about plugin metrics, then the plugins' families.
    pub(super) fn encode(&self, enc: &mut DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        let labels = |h: &Held| [("plugin", h.plugin.clone()), ("tenant", h.tenant.clone())];
        super::metrics::family(
            enc,
            "informant_plugin_metric_series",
            "Series the plugin keeps through the `metrics` import (a histogram is one).",
            self.held
                .iter()
                .map(|h| (labels(h), ConstGauge::new(h.series))),
        )?;
        super::metrics::family(
            enc,
            "informant_plugin_metric_series_refused",
            "Metric calls refused, by reason: series-limit (over `limits.max-metric-series`), invalid-name, invalid-label, invalid-value, type-conflict.",
            self.held.iter().flat_map(|h| {
                Refusal::ALL.iter().map(move |reason| {
                    let [plugin, tenant] = labels(h);
                    (
                        [plugin, tenant, ("reason", reason.as_str().to_string())],
                        ConstCounter::new(h.refused[*reason as usize]),
                    )
                })
            }),
        )?;
        for (family, m) in &self.families {
            let full = format!("{}{family}", name::PREFIX);
            let kind = match m.kind {
                Kind::Counter => MetricType::Counter,
                Kind::Gauge => MetricType::Gauge,
                Kind::Histogram => MetricType::Histogram,
            };
            let mut metric = enc.encode_descriptor(&full, &m.help, None, kind)?;
            for (labels, row) in &m.rows {
                let encoder = metric.encode_family(labels)?;
                match row {
                    Row::Counter(v) => ConstCounter::new(*v).encode(encoder)?,
                    Row::Gauge(v) => ConstGauge::new(*v).encode(encoder)?,
                    Row::Histogram(h) => h.encode(encoder)?,
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::plugin::metrics::Sample;

    /// A sample with one family of each type, help that needs escaping, and a label value too.
    pub(in crate::admin) fn sample() -> PluginMetricsSample {
        let mut s = PluginMetricsSample {
            held: vec![Held {
                plugin: "p".into(),
                tenant: "t".into(),
                series: 3,
                refused: [1; Refusal::ALL.len()],
            }],
            families: BTreeMap::new(),
        };
        let one = |labels: &[(&str, &str)], value| Sample {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            value,
        };
        let escape = super::super::metrics::escape;
        s.add(
            "p",
            "t",
            Family {
                name: "hits".into(),
                kind: Kind::Counter,
                help: "Hits, \"quoted\"\nand on two lines \\ back".into(),
                bounds: Box::default(),
                samples: vec![one(&[("code", "a\"b\nc")], SeriesValue::Counter(2.5))],
            },
            escape,
        );
        s.add(
            "p",
            "t",
            Family {
                name: "depth".into(),
                kind: Kind::Gauge,
                help: String::new(),
                bounds: Box::default(),
                samples: vec![one(&[], SeriesValue::Gauge(-1.0))],
            },
            escape,
        );
        s.add(
            "p",
            "t",
            Family {
                name: "size".into(),
                kind: Kind::Histogram,
                help: "Sizes.".into(),
                bounds: [1.0, 2.0].into(),
                samples: vec![one(
                    &[],
                    SeriesValue::Histogram {
                        counts: [1, 0, 2].into(),
                        sum: 9.0,
                    },
                )],
            },
            escape,
        );
        s
    }

    #[test]
    fn plugin_families_carry_the_hosts_labels_and_escaped_text() {
        struct C(PluginMetricsSample);
        impl fmt::Debug for C {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("C")
            }
        }
        impl prometheus_client::collector::Collector for C {
            fn encode(&self, mut enc: DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
                self.0.encode(&mut enc)
            }
        }
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(C(sample())));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        for line in [
            r#"# HELP informant_plugin_hits Hits, \"quoted\"\nand on two lines \\ back"#,
            "# TYPE informant_plugin_hits counter",
            r#"informant_plugin_hits_total{plugin="p",tenant="t",code="a\"b\nc"} 2.5"#,
            r#"informant_plugin_depth{plugin="p",tenant="t"} -1.0"#,
            r#"informant_plugin_size_bucket{le="2.0",plugin="p",tenant="t"} 1"#,
            r#"informant_plugin_size_bucket{le="+Inf",plugin="p",tenant="t"} 3"#,
            r#"informant_plugin_metric_series_refused_total{plugin="p",tenant="t",reason="series-limit"} 1"#,
        ] {
            assert!(out.lines().any(|l| l == line), "no line {line} in\n{out}");
        }
    }
}
