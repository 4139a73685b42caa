//! One plugin version's metrics ([`PluginMetrics`]): its families and their series, written by
//! its instances' `metrics` calls and copied out by the scrape; and the host-wide type of each
//! name ([`MetricNames`]), which keeps one family one type on `/metrics`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::{Kind, MetricError, MetricLimits, Refusal, Result, name};

/// The type each family name has on this host, and how many plugin versions use it. Taken only
/// when a plugin version starts or stops using a name, never per call.
#[derive(Debug, Default)]
pub struct MetricNames {
    types: Mutex<HashMap<Box<str>, (Kind, usize)>>,
}

impl MetricNames {
    /// Records one more user of `family` as `kind`; the type it already has if another.
    fn claim(&self, family: &str, kind: Kind) -> Result<(), Kind> {
        let mut types = lock(&self.types);
        match types.get_mut(family) {
            Some((k, users)) if *k == kind => *users += 1,
            Some((k, _)) => return Err(*k),
            None => {
                types.insert(family.into(), (kind, 1));
            }
        }
        Ok(())
    }

    /// Records one user fewer of `family`; the name is free once nobody uses it.
    fn release(&self, family: &str) {
        let mut types = lock(&self.types);
        if let Some((_, users)) = types.get_mut(family) {
            *users -= 1;
            if *users == 0 {
                types.remove(family);
            }
        }
    }
}

/// A series' value as kept, and as the scrape copies it.
#[derive(Debug, Clone, PartialEq)]
pub enum SeriesValue {
    /// A counter's total.
    Counter(f64),
    /// A gauge's value.
    Gauge(f64),
    /// A histogram: each bound's own count (not cumulative) and then the count above the last,
    /// and the sum of the observations.
    Histogram {
        /// One count per bound of the family, then the `+Inf` one.
        counts: Box<[u64]>,
        /// The sum observed.
        sum: f64,
    },
}

/// One series copied out at scrape time.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Its labels, sorted by name (the host's `plugin` and `tenant` not among them).
    pub labels: Vec<(String, String)>,
    /// Its value.
    pub value: SeriesValue,
}

/// One family copied out at scrape time.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// The name after `informant_plugin_`.
    pub name: String,
    /// Its type.
    pub kind: Kind,
    /// The help text of the plugin's first call naming it (unescaped).
    pub help: String,
    /// A histogram's bucket upper bounds; empty for the others.
    pub bounds: Box<[f64]>,
    /// Its series, by labels.
    pub samples: Vec<Sample>,
}

struct Series {
    value: SeriesValue,
    group: Option<Box<str>>,
}

struct FamilyState {
    kind: Kind,
    help: Box<str>,
    bounds: Box<[f64]>,
    series: HashMap<Vec<(String, String)>, Series>,
}

#[derive(Default)]
struct Families {
    by_name: HashMap<Box<str>, FamilyState>,
    series: usize,
}

/// The write a call makes to one series.
#[derive(Debug, Clone, Copy)]
pub enum Op<'a> {
    /// `counter-add`.
    Add(f64),
    /// `gauge-set`.
    Set(f64),
    /// `histogram-observe`, with the bucket bounds the call gave (empty for the defaults).
    Observe(&'a [f64], f64),
}

impl Op<'_> {
    fn kind(&self) -> Kind {
        match self {
            Op::Add(_) => Kind::Counter,
            Op::Set(_) => Kind::Gauge,
            Op::Observe(..) => Kind::Histogram,
        }
    }

    /// Why the value is refused, if it is.
    fn invalid(&self) -> Option<&'static str> {
        match *self {
            Op::Add(v) if !v.is_finite() || v < 0.0 => {
                Some("a counter takes finite, non-negative additions")
            }
            Op::Set(v) | Op::Observe(_, v) if !v.is_finite() => Some("values must be finite"),
            _ => None,
        }
    }

    fn fresh(&self, bounds: &[f64]) -> SeriesValue {
        match self {
            Op::Add(_) => SeriesValue::Counter(0.0),
            Op::Set(_) => SeriesValue::Gauge(0.0),
            Op::Observe(..) => SeriesValue::Histogram {
                counts: vec![0; bounds.len() + 1].into(),
                sum: 0.0,
            },
        }
    }

    fn apply(&self, value: &mut SeriesValue, bounds: &[f64]) {
        match (self, value) {
            (Op::Add(v), SeriesValue::Counter(total)) => *total += v,
            (Op::Set(v), SeriesValue::Gauge(g)) => *g = *v,
            (Op::Observe(_, v), SeriesValue::Histogram { counts, sum }) => {
                counts[bounds.partition_point(|b| b < v)] += 1;
                *sum += v;
            }
            // The family's kind was checked against the op's.
            _ => {}
        }
    }
}

/// One plugin version's metrics: shared by its instances, read by the scrape, dropped with the
/// version (its names go back to the host then).
pub struct PluginMetrics {
    plugin: Arc<str>,
    tenant: Arc<str>,
    names: Arc<MetricNames>,
    limits: MetricLimits,
    families: Mutex<Families>,
    refused: [AtomicU64; Refusal::ALL.len()],
}

impl std::fmt::Debug for PluginMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginMetrics")
            .field("plugin", &self.plugin)
            .field("tenant", &self.tenant)
            .field("series", &self.series())
            .finish()
    }
}

impl Default for PluginMetrics {
    /// No plugin, default limits, names of its own (tests, replays).
    fn default() -> Self {
        PluginMetrics::new(
            "".into(),
            "".into(),
            MetricLimits::default(),
            Arc::default(),
        )
    }
}

impl PluginMetrics {
    /// Empty metrics for one plugin version, its names typed in `names` (the host's).
    pub fn new(
        plugin: Arc<str>,
        tenant: Arc<str>,
        limits: MetricLimits,
        names: Arc<MetricNames>,
    ) -> Self {
        PluginMetrics {
            plugin,
            tenant,
            names,
            limits,
            families: Mutex::default(),
            refused: Default::default(),
        }
    }

    /// Writes `op` to the series `labels` of metric `metric`, creating it (and its family) if
    /// the rules and the ceiling allow; a refusal changes nothing and is counted.
    pub fn write(
        &self,
        metric: &str,
        help: &str,
        labels: Vec<(String, String)>,
        group: Option<String>,
        op: Op<'_>,
    ) -> Result<()> {
        let written = self.write_inner(metric, help, labels, group, op);
        if let Err(e) = &written {
            self.refused[e.refusal() as usize].fetch_add(1, Relaxed);
        }
        written
    }

    fn write_inner(
        &self,
        metric: &str,
        help: &str,
        mut labels: Vec<(String, String)>,
        group: Option<String>,
        op: Op<'_>,
    ) -> Result<()> {
        let kind = op.kind();
        let family = name::family(metric, kind)?;
        if let Some(why) = op.invalid() {
            return Err(MetricError::InvalidValue {
                metric: metric.into(),
                why: why.into(),
            });
        }
        if let Some(g) = group.as_deref() {
            name::text(metric, "", Some(g))?;
        }
        labels.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut families = lock(&self.families);
        let at_ceiling = families.series >= self.limits.max_series;
        // The common case: an existing series, already checked when it was made.
        if let Some(f) = families.by_name.get_mut(family) {
            check_same(metric, f, op)?;
            if let Some(s) = f.series.get_mut(&labels) {
                op.apply(&mut s.value, &f.bounds);
                s.group = group.map(Into::into);
                return Ok(());
            }
        }
        name::labels(metric, kind, &labels)?;
        if at_ceiling {
            return Err(MetricError::TooManySeries {
                metric: metric.into(),
                limit: self.limits.max_series,
            });
        }
        if !families.by_name.contains_key(family) {
            name::text(metric, help, None)?;
            let bounds = match op {
                Op::Observe(given, _) => name::buckets(metric, given)?,
                _ => Box::default(),
            };
            self.names.claim(family, kind).map_err(|had| {
                MetricError::TypeConflict {
                    metric: metric.into(),
                    why: format!(
                        "is a {} of another plugin on this host, and a name has one type on /metrics; this call uses it as a {}",
                        had.as_str(),
                        kind.as_str()
                    ),
                }
            })?;
            families.by_name.insert(
                family.into(),
                FamilyState {
                    kind,
                    help: help.into(),
                    bounds,
                    series: HashMap::new(),
                },
            );
        }
        let f = families.by_name.get_mut(family).expect("inserted above");
        let mut value = op.fresh(&f.bounds);
        op.apply(&mut value, &f.bounds);
        f.series.insert(
            labels,
            Series {
                value,
                group: group.map(Into::into),
            },
        );
        families.series += 1;
        Ok(())
    }

    /// Removes the series `labels` of metric `metric`; whether it existed.
    pub fn delete(&self, metric: &str, mut labels: Vec<(String, String)>) -> bool {
        labels.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut families = lock(&self.families);
        // A counter named with its `_total` is kept without it.
        let family = match families.by_name.contains_key(metric) {
            true => metric,
            false => match metric.strip_suffix("_total") {
                Some(base) if families.by_name.get(base).map(|f| f.kind) == Some(Kind::Counter) => {
                    base
                }
                _ => return false,
            },
        };
        let f = families.by_name.get_mut(family).expect("looked up above");
        if f.series.remove(&labels).is_none() {
            return false;
        }
        let empty = f.series.is_empty();
        families.series -= 1;
        if empty {
            families.by_name.remove(family);
            self.names.release(family);
        }
        true
    }

    /// Removes every series of `group`; how many.
    pub fn delete_group(&self, group: &str) -> u32 {
        let mut families = lock(&self.families);
        let mut removed = 0usize;
        let mut emptied = Vec::new();
        for (name, f) in families.by_name.iter_mut() {
            let before = f.series.len();
            f.series.retain(|_, s| s.group.as_deref() != Some(group));
            removed += before - f.series.len();
            if f.series.is_empty() {
                emptied.push(name.clone());
            }
        }
        for name in emptied {
            families.by_name.remove(&name);
            self.names.release(&name);
        }
        families.series -= removed;
        removed as u32
    }

    /// A copy of every family and series, for one scrape, families sorted by name.
    pub fn snapshot(&self) -> Vec<Family> {
        let families = lock(&self.families);
        let mut out: Vec<Family> = families
            .by_name
            .iter()
            .map(|(name, f)| {
                let mut samples: Vec<Sample> = f
                    .series
                    .iter()
                    .map(|(labels, s)| Sample {
                        labels: labels.clone(),
                        value: s.value.clone(),
                    })
                    .collect();
                samples.sort_by(|a, b| a.labels.cmp(&b.labels));
                Family {
                    name: name.to_string(),
                    kind: f.kind,
                    help: f.help.to_string(),
                    bounds: f.bounds.clone(),
                    samples,
                }
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Series held now.
    pub fn series(&self) -> usize {
        lock(&self.families).series
    }

    /// Calls refused for `reason` so far.
    pub fn refused(&self, reason: Refusal) -> u64 {
        self.refused[reason as usize].load(Relaxed)
    }

    /// The plugin's name.
    pub fn plugin(&self) -> &Arc<str> {
        &self.plugin
    }

    /// The plugin's tenant.
    pub fn tenant(&self) -> &Arc<str> {
        &self.tenant
    }
}

impl Drop for PluginMetrics {
    fn drop(&mut self) {
        let families = lock(&self.families);
        for name in families.by_name.keys() {
            self.names.release(name);
        }
    }
}

/// The family `f` as the op would use it: same type, and for a histogram, the same buckets.
fn check_same(metric: &str, f: &FamilyState, op: Op<'_>) -> Result<()> {
    let kind = op.kind();
    if f.kind != kind {
        return Err(MetricError::TypeConflict {
            metric: metric.into(),
            why: format!(
                "is a {} of this plugin; this call uses it as a {}",
                f.kind.as_str(),
                kind.as_str()
            ),
        });
    }
    if let Op::Observe(given, _) = op {
        let same = match given.is_empty() {
            true => name::buckets(metric, &[]).is_ok_and(|d| d == f.bounds),
            false => *given == *f.bounds,
        };
        if !same {
            return Err(MetricError::TypeConflict {
                metric: metric.into(),
                why: format!(
                    "is a histogram with buckets {:?}; its buckets are fixed by its first use",
                    f.bounds
                ),
            });
        }
    }
    Ok(())
}

/// The lock, even if a panic poisoned it: every write leaves the maps consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn metrics(names: &Arc<MetricNames>, plugin: &str, max_series: usize) -> PluginMetrics {
        PluginMetrics::new(
            plugin.into(),
            "t".into(),
            MetricLimits { max_series },
            names.clone(),
        )
    }

    #[test]
    fn series_are_written_in_any_label_order_and_deleted() {
        let m = PluginMetrics::default();
        let ab = l(&[("a", "1"), ("b", "2")]);
        let ba = l(&[("b", "2"), ("a", "1")]);
        m.write("hits_total", "Hits.", ab.clone(), None, Op::Add(1.0))
            .unwrap();
        m.write("hits", "ignored", ba.clone(), None, Op::Add(2.0))
            .unwrap();
        m.write(
            "lat",
            "Latency.",
            vec![],
            None,
            Op::Observe(&[1.0, 2.0], 1.5),
        )
        .unwrap();
        let snap = m.snapshot();
        assert_eq!(snap[0].name, "hits");
        assert_eq!(snap[0].help, "Hits.");
        assert_eq!(snap[0].samples[0].value, SeriesValue::Counter(3.0));
        assert_eq!(
            snap[1].samples[0].value,
            SeriesValue::Histogram {
                counts: [0, 1, 0].into(),
                sum: 1.5
            }
        );
        assert_eq!(m.series(), 2);
        assert!(m.delete("hits_total", ba));
        assert!(!m.delete("hits", ab));
        assert_eq!(m.series(), 1);
        assert_eq!(m.snapshot().len(), 1, "an empty family goes");
    }

    #[test]
    fn the_ceiling_refuses_new_series_only_and_counts() {
        let m = metrics(&Arc::default(), "p", 3);
        for i in 0..3 {
            let labels = l(&[("i", &i.to_string())]);
            m.write("g", "", labels, None, Op::Set(1.0)).unwrap();
        }
        let e = m
            .write("g", "", l(&[("i", "3")]), None, Op::Set(1.0))
            .unwrap_err();
        assert!(
            matches!(e, MetricError::TooManySeries { limit: 3, .. }),
            "{e}"
        );
        // Existing series still take writes at the ceiling.
        m.write("g", "", l(&[("i", "0")]), None, Op::Set(5.0))
            .unwrap();
        assert_eq!(m.refused(Refusal::Limit), 1);
        assert_eq!(m.series(), 3);
    }

    #[test]
    fn a_name_has_one_type_here_and_across_plugins() {
        let names = Arc::new(MetricNames::default());
        let a = metrics(&names, "a", 10);
        let b = metrics(&names, "b", 10);
        a.write("x", "", vec![], None, Op::Add(1.0)).unwrap();
        let e = a.write("x", "", vec![], None, Op::Set(1.0)).unwrap_err();
        assert!(matches!(e, MetricError::TypeConflict { .. }), "{e}");
        let e = b.write("x", "", vec![], None, Op::Set(1.0)).unwrap_err();
        assert!(e.to_string().contains("another plugin"), "{e}");
        // The same type: b's own series, apart from a's.
        b.write("x", "", vec![], None, Op::Add(5.0)).unwrap();
        assert_eq!(a.snapshot()[0].samples[0].value, SeriesValue::Counter(1.0));
        assert!(b.delete("x", vec![]));
        assert_eq!(a.series(), 1, "b's delete leaves a's series alone");
        // Once nobody uses it, the name is free for another type.
        drop(a);
        b.write("x", "", vec![], None, Op::Set(1.0)).unwrap();
        let e = b
            .write("h", "", vec![], None, Op::Observe(&[1.0], 1.0))
            .and_then(|_| b.write("h", "", vec![], None, Op::Observe(&[2.0], 1.0)))
            .unwrap_err();
        assert!(e.to_string().contains("buckets"), "{e}");
        assert_eq!(b.refused(Refusal::Type), 2);
    }

    #[test]
    fn groups_expire_together() {
        let m = PluginMetrics::default();
        let g = || Some("deploy/web".to_string());
        m.write("a", "", l(&[("k", "1")]), g(), Op::Set(1.0))
            .unwrap();
        m.write("a", "", l(&[("k", "2")]), None, Op::Set(1.0))
            .unwrap();
        m.write("b", "", vec![], g(), Op::Add(1.0)).unwrap();
        assert_eq!(m.delete_group("deploy/web"), 2);
        assert_eq!(m.series(), 1);
        assert_eq!(m.snapshot().len(), 1);
        assert_eq!(m.delete_group("deploy/web"), 0);
    }

    #[test]
    fn bad_values_change_nothing() {
        let m = PluginMetrics::default();
        for op in [
            Op::Add(-1.0),
            Op::Add(f64::NAN),
            Op::Set(f64::INFINITY),
            Op::Observe(&[], f64::NAN),
        ] {
            let e = m.write("v", "", vec![], None, op).unwrap_err();
            assert!(matches!(e, MetricError::InvalidValue { .. }), "{e}");
        }
        assert_eq!(m.series(), 0);
        assert_eq!(m.refused(Refusal::Value), 4);
    }
}
