//! The admission hooks' families on `/metrics`: requests by operation and decision, failures by
//! reason, and the time to answer, per hook of each running plugin version the caller may see.

use std::fmt;

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::counter::ConstCounter;

use super::metrics::{escape, family};
use super::scope::Scope;
use crate::manifest::admit::Operation;
use crate::plugin::exec::admit::{Decision, FAILURE_REASONS};
use crate::plugin::exec::histogram::DurationHistogram;

const OPERATIONS: [Operation; 4] = [
    Operation::Create,
    Operation::Update,
    Operation::Delete,
    Operation::Connect,
];

/// One hook's figures, read at scrape time.
#[derive(Debug)]
pub(super) struct HookRow {
    /// `plugin`, `tenant` and `hook` labels, escaped.
    pub(super) labels: [(&'static str, String); 3],
    /// Requests by operation and decision, every pair listed.
    pub(super) requests: Vec<(Operation, Decision, u64)>,
    /// Failures by reason, every reason listed.
    pub(super) failures: Vec<(&'static str, u64)>,
    pub(super) duration: DurationHistogram,
}

/// The hooks one scrape shows.
#[derive(Debug, Default)]
pub(super) struct AdmissionSample(pub(super) Vec<HookRow>);

impl AdmissionSample {
    /// The hooks of every running version `scope` may see.
    pub(super) fn gather(state: &super::AdminState, scope: &Scope) -> Self {
        let admitters = state.host().map(|h| h.admitters()).unwrap_or_default();
        let rows = admitters
            .iter()
            .filter(|(id, _)| scope.sees_tenant(&id.tenant))
            .flat_map(|(id, a)| {
                a.hooks().iter().map(move |h| HookRow {
                    labels: [
                        ("plugin", escape(&id.name)),
                        ("tenant", escape(&id.tenant)),
                        ("hook", escape(h.table.name.as_str())),
                    ],
                    requests: OPERATIONS
                        .iter()
                        .flat_map(|op| {
                            Decision::ALL
                                .iter()
                                .map(move |d| (*op, *d, h.stats.requests(*op, *d)))
                        })
                        .collect(),
                    failures: FAILURE_REASONS
                        .iter()
                        .enumerate()
                        .map(|(i, r)| (*r, h.stats.failures(i)))
                        .collect(),
                    duration: h.stats.duration.clone(),
                })
            })
            .collect();
        AdmissionSample(rows)
    }

    pub(super) fn encode(&self, enc: &mut DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        family(
            enc,
            "informant_admission_requests",
            "Admission requests a plugin's hook answered, by operation and decision (allow, deny; fail and ignore: its failure policy applied; skip: not its kind, operation or tenant, allowed without asking it).",
            self.0.iter().flat_map(|h| {
                h.requests.iter().map(|(op, d, n)| {
                    let [plugin, tenant, hook] = h.labels.clone();
                    (
                        [
                            plugin,
                            tenant,
                            hook,
                            ("operation", op.as_str().to_string()),
                            ("decision", d.as_str().to_string()),
                        ],
                        ConstCounter::new(*n),
                    )
                })
            }),
        )?;
        family(
            enc,
            "informant_admission_failures",
            "Admission requests a plugin's hook gave no usable answer to, by reason (timeout, trap, error, busy: no instance free, not-ready: caches not synced, invalid: an answer that did not hold up).",
            self.0.iter().flat_map(|h| {
                h.failures.iter().map(|(reason, n)| {
                    let [plugin, tenant, hook] = h.labels.clone();
                    (
                        [plugin, tenant, hook, ("reason", reason.to_string())],
                        ConstCounter::new(*n),
                    )
                })
            }),
        )?;
        family(
            enc,
            "informant_admission_duration_seconds",
            "Time from an admission request's arrival to its answer, waiting for an instance included.",
            self.0
                .iter()
                .map(|h| (h.labels.clone(), h.duration.clone())),
        )
    }
}
