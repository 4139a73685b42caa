//! One plugin version's metrics ([`PluginMetrics`]): its families and their series, written by
//! its instances' `metrics` calls and copied out by the scrape; and each tenant's share
//! ([`TenantMetrics`]): the type of each of its names, and what its plugins hold together
//! against its budget.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::{Kind, MetricError, MetricLimits, Over, Refusal, Result, name};

/// Every tenant's [`TenantMetrics`], made when a tenant's first plugin version is: held by the
/// plugin host, one per process.
#[derive(Debug, Default)]
pub(crate) struct MetricTenants {
    tenants: Mutex<BTreeMap<String, Arc<TenantMetrics>>>,
}

impl MetricTenants {
    /// `tenant`'s share, its budget set to `limits` (a reloaded config's budget applies to the
    /// series made from then on; none held is removed).
    pub(crate) fn tenant(&self, tenant: &str, limits: MetricLimits) -> Arc<TenantMetrics> {
        let t = lock(&self.tenants)
            .entry(tenant.to_string())
            .or_insert_with(|| Arc::new(TenantMetrics::new(tenant, limits)))
            .clone();
        lock(&t.state).limits = limits;
        t
    }
}

/// One tenant's share of plugin metrics: the type each of its names has and how many of its
/// plugin versions use it, and the series and bytes they hold together. Taken only when one of
/// its plugins makes or removes a series or a family, never to update one.
#[derive(Debug)]
pub struct TenantMetrics {
    tenant: Arc<str>,
    state: Mutex<TenantState>,
}

#[derive(Debug)]
struct TenantState {
    limits: MetricLimits,
    types: HashMap<Box<str>, (Kind, usize)>,
    series: usize,
    bytes: usize,
}

/// What a new series takes from its tenant: one series, its bytes, and maybe a new family.
struct Take<'a> {
    family: Option<(&'a str, Kind)>,
    bytes: usize,
}

impl TenantMetrics {
    /// An empty share under `limits`.
    pub fn new(tenant: &str, limits: MetricLimits) -> Self {
        TenantMetrics {
            tenant: tenant.into(),
            state: Mutex::new(TenantState {
                limits,
                types: HashMap::new(),
                series: 0,
                bytes: 0,
            }),
        }
    }

    /// A tenant of no budget (tests, replays).
    fn unlimited() -> Arc<Self> {
        Arc::new(TenantMetrics::new("", MetricLimits::UNLIMITED))
    }

    /// The tenant.
    pub fn tenant(&self) -> &Arc<str> {
        &self.tenant
    }

    /// Series and bytes its plugins hold now.
    pub fn held(&self) -> (usize, usize) {
        let s = lock(&self.state);
        (s.series, s.bytes)
    }

    /// Takes what a new series needs if the budget has room and the family (when new to the
    /// plugin) is not of another type in this tenant; else changes nothing.
    fn take(&self, metric: &str, take: Take<'_>) -> Result<()> {
        let mut s = lock(&self.state);
        let over = |over| MetricError::OverBudget {
            metric: metric.into(),
            over,
        };
        if s.series >= s.limits.max_series {
            return Err(over(Over::TenantSeries {
                tenant: self.tenant.to_string(),
                limit: s.limits.max_series,
            }));
        }
        if s.bytes.saturating_add(take.bytes) > s.limits.max_bytes {
            return Err(over(Over::TenantBytes {
                tenant: self.tenant.to_string(),
                limit: s.limits.max_bytes,
            }));
        }
        if let Some((family, kind)) = take.family {
            match s.types.get_mut(family) {
                Some((k, users)) if *k == kind => *users += 1,
                Some((k, _)) => {
                    return Err(MetricError::TypeConflict {
                        metric: metric.into(),
                        why: format!(
                            "is a {} of another plugin of this tenant, and a name has one type in a tenant; this call uses it as a {}",
                            k.as_str(),
                            kind.as_str()
                        ),
                    });
                }
                None => {
                    s.types.insert(family.into(), (kind, 1));
                }
            }
        }
        s.series += 1;
        s.bytes += take.bytes;
        Ok(())
    }

    /// Gives back `series` series, `bytes` bytes, and one use of each of `families`.
    fn give_back<'a>(&self, series: usize, bytes: usize, families: impl Iterator<Item = &'a str>) {
        let mut s = lock(&self.state);
        s.series = s.series.saturating_sub(series);
        s.bytes = s.bytes.saturating_sub(bytes);
        for family in families {
            if let Some((_, users)) = s.types.get_mut(family) {
                *users -= 1;
                if *users == 0 {
                    s.types.remove(family);
                }
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
    /// The name the plugin gave it (without a counter's `_total`); exposed as
    /// [`name::exposed`] makes it for the plugin's tenant.
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
    /// What it costs ([`MetricLimits`]).
    bytes: usize,
}

struct FamilyState {
    kind: Kind,
    help: Box<str>,
    bounds: Box<[f64]>,
    series: HashMap<Vec<(String, String)>, Series>,
}

impl FamilyState {
    /// What the family costs besides its series: its name and help text.
    fn own_bytes(name: &str, help: &str) -> usize {
        name.len() + help.len()
    }

    /// What a series of `labels` in family `name` costs: its name and labels on each line.
    fn series_bytes(name: &str, kind: Kind, bounds: usize, labels: &[(String, String)]) -> usize {
        let line = name.len() + labels.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>();
        let lines = match kind {
            // Each bucket, `+Inf`, `_count` and `_sum`.
            Kind::Histogram => bounds + 3,
            _ => 1,
        };
        line * lines
    }
}

#[derive(Default)]
struct Families {
    by_name: HashMap<Box<str>, FamilyState>,
    series: usize,
    bytes: usize,
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

    /// Writes the op to `value`, unless a sum would stop being finite (then `value` is as it
    /// was and the error names what would have overflowed).
    fn apply(&self, value: &mut SeriesValue, bounds: &[f64]) -> Result<(), &'static str> {
        match (self, value) {
            (Op::Add(v), SeriesValue::Counter(total)) => {
                let next = *total + v;
                if !next.is_finite() {
                    return Err("counter");
                }
                *total = next;
            }
            (Op::Set(v), SeriesValue::Gauge(g)) => *g = *v,
            (Op::Observe(_, v), SeriesValue::Histogram { counts, sum }) => {
                let next = *sum + v;
                if !next.is_finite() {
                    return Err("histogram sum");
                }
                *sum = next;
                let at = &mut counts[bounds.partition_point(|b| b < v)];
                *at = at.saturating_add(1);
            }
            // The family's kind was checked against the op's.
            _ => {}
        }
        Ok(())
    }
}

/// One plugin version's metrics: shared by its instances, read by the scrape, dropped with the
/// version (what it held goes back to its tenant then).
pub struct PluginMetrics {
    plugin: Arc<str>,
    tenant: Arc<TenantMetrics>,
    limits: MetricLimits,
    families: Mutex<Families>,
    refused: [AtomicU64; Refusal::ALL.len()],
}

impl std::fmt::Debug for PluginMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginMetrics")
            .field("plugin", &self.plugin)
            .field("tenant", self.tenant.tenant())
            .field("series", &self.series())
            .finish()
    }
}

impl Default for PluginMetrics {
    /// No plugin, default limits, a tenant of its own without a budget (tests, replays).
    fn default() -> Self {
        PluginMetrics::new(
            "".into(),
            MetricLimits::default(),
            TenantMetrics::unlimited(),
        )
    }
}

impl PluginMetrics {
    /// Empty metrics for one plugin version of `tenant`'s, under `limits`.
    pub fn new(plugin: Arc<str>, limits: MetricLimits, tenant: Arc<TenantMetrics>) -> Self {
        PluginMetrics {
            plugin,
            tenant,
            limits,
            families: Mutex::default(),
            refused: Default::default(),
        }
    }

    /// Writes `op` to the series `labels` of metric `metric`, creating it (and its family) if
    /// the rules and the budgets allow; a refusal changes nothing and is counted.
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
        let overflow = |what| MetricError::Overflow {
            metric: metric.into(),
            what,
        };
        let mut families = lock(&self.families);
        // The common case: an existing series, already checked when it was made.
        if let Some(f) = families.by_name.get_mut(family) {
            check_same(metric, f, op)?;
            if let Some(s) = f.series.get_mut(&labels) {
                op.apply(&mut s.value, &f.bounds).map_err(overflow)?;
                s.group = group.map(Into::into);
                return Ok(());
            }
        }
        name::labels(metric, kind, &labels)?;
        let over = |over| MetricError::OverBudget {
            metric: metric.into(),
            over,
        };
        if families.series >= self.limits.max_series {
            return Err(over(Over::PluginSeries {
                limit: self.limits.max_series,
            }));
        }
        let existing = families.by_name.get(family);
        let bounds = match (existing, op) {
            (Some(f), _) => f.bounds.clone(),
            (None, Op::Observe(given, _)) => name::buckets(metric, given)?,
            (None, _) => Box::default(),
        };
        if existing.is_none() {
            name::text(metric, help, None)?;
        }
        let bytes = FamilyState::series_bytes(family, kind, bounds.len(), &labels)
            + match existing {
                Some(_) => 0,
                None => FamilyState::own_bytes(family, help),
            };
        if families.bytes.saturating_add(bytes) > self.limits.max_bytes {
            return Err(over(Over::PluginBytes {
                limit: self.limits.max_bytes,
            }));
        }
        let new_family = existing.is_none();
        self.tenant.take(
            metric,
            Take {
                family: new_family.then_some((family, kind)),
                bytes,
            },
        )?;
        let f = families
            .by_name
            .entry(family.into())
            .or_insert_with(|| FamilyState {
                kind,
                help: help.into(),
                bounds,
                series: HashMap::new(),
            });
        let mut value = op.fresh(&f.bounds);
        // A first write to a zeroed series of a finite value cannot overflow.
        let _ = op.apply(&mut value, &f.bounds);
        let series_bytes = bytes
            - match new_family {
                true => FamilyState::own_bytes(family, help),
                false => 0,
            };
        f.series.insert(
            labels,
            Series {
                value,
                group: group.map(Into::into),
                bytes: series_bytes,
            },
        );
        families.series += 1;
        families.bytes += bytes;
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
        let Some(gone) = f.series.remove(&labels) else {
            return false;
        };
        let mut bytes = gone.bytes;
        let emptied = f.series.is_empty().then(|| {
            bytes += FamilyState::own_bytes(family, &f.help);
            family.to_string()
        });
        if let Some(name) = &emptied {
            families.by_name.remove(name.as_str());
        }
        families.series -= 1;
        families.bytes -= bytes;
        self.tenant
            .give_back(1, bytes, emptied.as_deref().into_iter());
        true
    }

    /// Removes every series of `group`; how many.
    pub fn delete_group(&self, group: &str) -> u32 {
        let mut families = lock(&self.families);
        let (mut removed, mut bytes) = (0usize, 0usize);
        let mut emptied = Vec::new();
        for (name, f) in families.by_name.iter_mut() {
            f.series.retain(|_, s| {
                let gone = s.group.as_deref() == Some(group);
                if gone {
                    removed += 1;
                    bytes += s.bytes;
                }
                !gone
            });
            if f.series.is_empty() {
                bytes += FamilyState::own_bytes(name, &f.help);
                emptied.push(name.clone());
            }
        }
        for name in &emptied {
            families.by_name.remove(name);
        }
        families.series -= removed;
        families.bytes -= bytes;
        self.tenant
            .give_back(removed, bytes, emptied.iter().map(|n| &**n));
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

    /// Bytes held now ([`MetricLimits`] says what counts).
    pub fn bytes(&self) -> usize {
        lock(&self.families).bytes
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
        self.tenant.tenant()
    }

    /// The plugin's tenant's share, which its other plugins' metrics share too.
    pub fn tenant_metrics(&self) -> &Arc<TenantMetrics> {
        &self.tenant
    }
}

impl Drop for PluginMetrics {
    fn drop(&mut self) {
        let families = lock(&self.families);
        self.tenant.give_back(
            families.series,
            families.bytes,
            families.by_name.keys().map(|n| &**n),
        );
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
mod tests;
