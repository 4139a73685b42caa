//! The metrics plugins keep (the `metrics` import) on `/metrics`: each tenant's families under
//! its own names ([`name::exposed`]: `informant_plugin_NAME` for the operator's plugins,
//! `informant_tenant_FORM__NAME` for a tenant's), the host's `plugin` and `tenant` labels added
//! to every series; and the host's own figures about them (series and bytes held, per plugin
//! and per tenant; calls refused).
//!
//! Merging is safe by construction: a tenant's names are its own, a name has one type in a
//! tenant ([`TenantMetrics`](crate::plugin::metrics::TenantMetrics)), a plugin's names never
//! take a host family ([`name::HOST_FAMILIES`]), and `plugin` sets apart the series of a
//! tenant's plugins sharing a name. Help texts are escaped here; when a tenant's plugins give
//! one name different texts, the first plugin's (by name) is shown. Only plugins the caller's
//! [`Scope`] sees are read.

use std::collections::BTreeMap;
use std::fmt;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::{MetricType, TypedMetric};

use super::metrics::escape;
use crate::plugin::load::status::RunningPlugin;
use crate::plugin::metrics::{Family, Kind, Refusal, SeriesValue, name};

/// The series of one family across a tenant's plugins, each with its own full label set.
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
    bytes: u64,
    refused: [u64; Refusal::ALL.len()],
}

/// Every plugin's metrics, read at once for one scrape.
#[derive(Debug, Default)]
pub(super) struct PluginMetricsSample {
    held: Vec<Held>,
    /// Series and bytes held per tenant (escaped), over all its plugins.
    tenants: BTreeMap<String, (u64, u64)>,
    /// By exposed name.
    families: BTreeMap<String, Merged>,
}

impl PluginMetricsSample {
    /// Copies out the metrics of `plugins` (those the caller's scope sees).
    pub(super) fn gather(plugins: &[RunningPlugin]) -> Self {
        let mut sample = PluginMetricsSample::default();
        for r in plugins {
            let m = r.supervisor.metrics();
            let (plugin, tenant) = (escape(&r.id.name), escape(&r.id.tenant));
            sample.held.push(Held {
                plugin: plugin.clone(),
                tenant: tenant.clone(),
                series: m.series() as u64,
                bytes: m.bytes() as u64,
                refused: Refusal::ALL.map(|reason| m.refused(reason)),
            });
            if !r.id.tenant.is_empty() {
                let (series, bytes) = m.tenant_metrics().held();
                sample
                    .tenants
                    .insert(tenant.clone(), (series as u64, bytes as u64));
            }
            for f in m.snapshot() {
                sample.add(&r.id.tenant, &plugin, &tenant, f);
            }
        }
        sample
    }

    /// Adds one plugin's family `f`, the plugin of `tenant` (raw) labelled `plugin` and
    /// `tenant_label` (escaped).
    fn add(&mut self, tenant: &str, plugin: &str, tenant_label: &str, f: Family) {
        let merged = self
            .families
            .entry(name::exposed(tenant, &f.name))
            .or_insert_with(|| Merged {
                kind: f.kind,
                help: name::escape_help(&f.help),
                rows: Vec::new(),
            });
        // One type per name in a tenant; should two ever differ, the first keeps the family.
        if merged.kind != f.kind {
            return;
        }
        for s in f.samples {
            let mut labels = Vec::with_capacity(s.labels.len() + 2);
            labels.push(("plugin".to_string(), plugin.to_string()));
            labels.push(("tenant".to_string(), tenant_label.to_string()));
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
            "informant_plugin_metric_bytes",
            "Bytes of names and labels the plugin's metric series take, as `limits.max-metric-kib` counts them.",
            self.held
                .iter()
                .map(|h| (labels(h), ConstGauge::new(h.bytes))),
        )?;
        super::metrics::family(
            enc,
            "informant_plugin_metric_series_refused",
            "Metric calls refused, by reason: series-limit, bytes-limit (the plugin's ceilings), tenant-series-limit, tenant-bytes-limit (its tenant's budget), invalid-name, invalid-label, invalid-value, type-conflict, overflow.",
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
        super::metrics::family(
            enc,
            "informant_tenant_metric_series",
            "Series a tenant's plugins keep together through the `metrics` import, against its `max-metric-series`.",
            self.tenants
                .iter()
                .map(|(t, (series, _))| ([("tenant", t.clone())], ConstGauge::new(*series))),
        )?;
        super::metrics::family(
            enc,
            "informant_tenant_metric_bytes",
            "Bytes of names and labels a tenant's plugins' metric series take together, against its `max-metric-kib`.",
            self.tenants
                .iter()
                .map(|(t, (_, bytes))| ([("tenant", t.clone())], ConstGauge::new(*bytes))),
        )?;
        for (full, m) in &self.families {
            let kind = match m.kind {
                Kind::Counter => MetricType::Counter,
                Kind::Gauge => MetricType::Gauge,
                Kind::Histogram => MetricType::Histogram,
            };
            let mut metric = enc.encode_descriptor(full, &m.help, None, kind)?;
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

/// A label value as the exposition writes it ([`name::label_value`]).
#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::plugin::metrics::registry::Sample;

    /// A sample with one family of each type, help that needs escaping, and a label value too,
    /// of plugin `p` of tenant `t`, and one family of an operator's plugin `o`.
    pub(in crate::admin) fn sample() -> PluginMetricsSample {
        let mut s = PluginMetricsSample {
            held: vec![Held {
                plugin: "p".into(),
                tenant: "t".into(),
                series: 3,
                bytes: 30,
                refused: [1; Refusal::ALL.len()],
            }],
            tenants: BTreeMap::from([("t".to_string(), (3, 30))]),
            families: BTreeMap::new(),
        };
        let one = |labels: &[(&str, &str)], value| Sample {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            value,
        };
        s.add(
            "t",
            "p",
            "t",
            Family {
                name: "hits".into(),
                kind: Kind::Counter,
                help: "Hits, \"quoted\"\nand on two lines \\ back\r\u{2028}".into(),
                bounds: Box::default(),
                samples: vec![one(
                    &[("code", "a\"b\nc\rd\u{2028}e\\f")],
                    SeriesValue::Counter(2.5),
                )],
            },
        );
        s.add(
            "t",
            "p",
            "t",
            Family {
                name: "depth".into(),
                kind: Kind::Gauge,
                help: String::new(),
                bounds: Box::default(),
                samples: vec![one(&[], SeriesValue::Gauge(-1.0))],
            },
        );
        s.add(
            "t",
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
        );
        s.add(
            "",
            "o",
            "",
            Family {
                name: "hits".into(),
                kind: Kind::Gauge,
                help: "The operator's.".into(),
                bounds: Box::default(),
                samples: vec![one(&[], SeriesValue::Gauge(1.0))],
            },
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
            r#"# HELP informant_tenant_t__hits Hits, \"quoted\"\nand on two lines \\ back  "#,
            "# TYPE informant_tenant_t__hits counter",
            r#"informant_tenant_t__hits_total{plugin="p",tenant="t",code="a\"b\\nc\\rd\\u{2028}e\\\\f"} 2.5"#,
            r#"informant_tenant_t__depth{plugin="p",tenant="t"} -1.0"#,
            r#"informant_tenant_t__size_bucket{le="2.0",plugin="p",tenant="t"} 1"#,
            r#"informant_tenant_t__size_bucket{le="+Inf",plugin="p",tenant="t"} 3"#,
            "# TYPE informant_plugin_hits gauge",
            r#"informant_plugin_hits{plugin="o",tenant=""} 1.0"#,
            r#"informant_plugin_metric_series_refused_total{plugin="p",tenant="t",reason="series-limit"} 1"#,
            r#"informant_plugin_metric_series_refused_total{plugin="p",tenant="t",reason="tenant-bytes-limit"} 1"#,
            r#"informant_plugin_metric_bytes{plugin="p",tenant="t"} 30"#,
            r#"informant_tenant_metric_series{tenant="t"} 3"#,
            r#"informant_tenant_metric_bytes{tenant="t"} 30"#,
        ] {
            assert!(out.lines().any(|l| l == line), "no line {line} in\n{out}");
        }
        // Nothing but `\n` ends a line: no CR, NEL, U+2028 or U+2029 anywhere.
        assert!(
            !out.contains(['\r', '\u{85}', '\u{2028}', '\u{2029}', '\u{b}', '\u{c}']),
            "{out:?}"
        );
    }
}
