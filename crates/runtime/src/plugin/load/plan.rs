//! What a reconcile does, decided from data alone: the plugins the directory holds (and this
//! shard member owns) against the plugins running, under the config in force. No file is read
//! and nothing is started here; [`super::loader`] carries the plan out.
//!
//! - A running plugin no longer in the directory is removed; one another shard member owns now
//!   is handed over (its cursors published for the new owner, not forgotten).
//! - A plugin whose files could not be read, or whose tenant the config refuses, is refused; a
//!   running version of it that the config in force no longer admits is dropped first.
//! - A running version with the same files, admitted under the config in force, is left alone.
//! - Anything else is loaded: new plugins within their tenant's `max-plugins` (counted in name
//!   order with the tenant's running plugins), changed ones whatever the count (they replace a
//!   version already counted).
//! - A reconcile of waiting plugins only (`only`) decides for them alone; removals are decided
//!   all the same.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::plugin::id::PluginId;

/// A plugin the directory holds, as the plan needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Candidate {
    /// Its files' fingerprint; none when they could not be read.
    pub fingerprint: Option<String>,
    /// Its tenant's `max-plugins`; none when the config refuses the tenant.
    pub max_plugins: Option<usize>,
}

/// A running plugin, as the plan needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Running {
    /// The fingerprint of the files it was loaded from.
    pub fingerprint: String,
    /// Whether it was admitted under the tenant policy and limits in force.
    pub admitted_now: bool,
}

/// One thing a reconcile does, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Unload a running plugin: gone from the directory, or (`handed_over`) another shard
    /// member's now.
    Remove {
        /// The plugin.
        id: PluginId,
        /// Owned elsewhere: its cursors are handed on.
        handed_over: bool,
    },
    /// Unload a running version the config in force no longer admits (its new files or tenant
    /// are refused next).
    DropStale(PluginId),
    /// Load nothing, for this reason.
    Refuse(PluginId, Refusal),
    /// Prepare and register the directory's version.
    Load(PluginId),
}

/// Why the plan refuses a plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Its files could not be read (the scan says why).
    Files,
    /// The config refuses its tenant (the policy says why).
    Denied,
    /// Its tenant already runs `max` plugins.
    Quota {
        /// The tenant's `max-plugins`.
        max: usize,
    },
}

/// The steps that bring `running` to what `found` says, for the plugins this member owns
/// (`owns`); with `only`, a reconcile of those plugins alone (the waiting ones).
pub(crate) fn plan(
    found: &BTreeMap<PluginId, Candidate>,
    running: &BTreeMap<PluginId, Running>,
    owns: impl Fn(&PluginId) -> bool,
    only: Option<&BTreeSet<PluginId>>,
) -> Vec<Step> {
    let mut steps = Vec::new();
    let here = |id: &PluginId| found.contains_key(id) && owns(id);
    for id in running.keys().filter(|id| !here(id)) {
        steps.push(Step::Remove {
            id: id.clone(),
            handed_over: found.contains_key(id),
        });
    }
    // Dropped so far: a tenant's count of running plugins no longer has them.
    let mut dropped = BTreeSet::new();
    let mut starting: HashMap<&str, usize> = HashMap::new();
    for (id, candidate) in found {
        if !owns(id) || only.is_some_and(|o| !o.contains(id)) {
            continue;
        }
        let now = running.get(id);
        let stale = now.is_some_and(|r| !r.admitted_now);
        let refusal = match (&candidate.fingerprint, candidate.max_plugins) {
            (None, _) => Some(Refusal::Files),
            (Some(_), None) => Some(Refusal::Denied),
            (Some(_), Some(_)) => None,
        };
        if let Some(refusal) = refusal {
            if stale {
                dropped.insert(id);
                steps.push(Step::DropStale(id.clone()));
            }
            steps.push(Step::Refuse(id.clone(), refusal));
            continue;
        }
        let (Some(fingerprint), Some(max)) = (&candidate.fingerprint, candidate.max_plugins) else {
            unreachable!("refused above");
        };
        if now.is_some_and(|r| &r.fingerprint == fingerprint && r.admitted_now) {
            continue;
        }
        let new = starting.entry(id.tenant.as_str()).or_default();
        if now.is_none() {
            let tenants = running
                .keys()
                .filter(|k| k.tenant == id.tenant && here(k) && !dropped.contains(k))
                .count();
            if tenants + *new >= max {
                steps.push(Step::Refuse(id.clone(), Refusal::Quota { max }));
                continue;
            }
            *new += 1;
        }
        steps.push(Step::Load(id.clone()));
    }
    steps
}

#[cfg(test)]
mod tests;
