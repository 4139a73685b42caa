//! What `/readyz` checks: ready means the runtime finished starting, every informer has applied
//! its first complete list, and every plugin found on disk has a version loaded.
//!
//! A plugin whose replacement was refused keeps its old version running, so it counts as loaded
//! (the refusal is logged); a plugin that never loaded keeps the process unready until the next
//! reconcile loads it or it is removed. A quarantined plugin is loaded: it shows in `/plugins` and
//! the `informant_plugin_state` metric instead, since restarting the process would not fix it.

use parking_lot::Mutex;

use super::AdminState;
use crate::plugin::{PluginId, ReconcileReport};

/// Readiness facts only the runtime knows: that startup is over, and what the last reconcile
/// could not load.
#[derive(Debug, Default)]
pub struct Readiness {
    inner: Mutex<Facts>,
}

#[derive(Debug, Default)]
struct Facts {
    started: bool,
    reconciled: bool,
    /// The plugins the latest reconcile could not load, with why. Each reconcile retries every
    /// plugin that is not loaded, so the latest report alone is complete.
    refused: Vec<(PluginId, String)>,
}

impl Readiness {
    pub(crate) fn startup_complete(&self) {
        self.inner.lock().started = true;
    }

    pub(crate) fn record_reconcile(&self, report: &ReconcileReport) {
        let mut f = self.inner.lock();
        f.reconciled = true;
        f.refused = report
            .errors
            .iter()
            .map(|(id, e)| (id.clone(), e.to_string()))
            .collect();
    }
}

/// Why the process is not ready, one line per reason; empty when it is ready.
pub fn check(state: &AdminState) -> Vec<String> {
    let mut reasons = Vec::new();
    let (started, reconciled, refused) = {
        let f = state.readiness().inner.lock();
        (f.started, f.reconciled, f.refused.clone())
    };
    if !started {
        reasons.push("starting: informers and plugins are still being set up".to_string());
    }
    let mut informers = state.factory().informers();
    informers.sort_by(|a, b| a.description().cmp(b.description()));
    for i in informers.iter().filter(|i| !i.has_synced()) {
        reasons.push(format!(
            "informer `{}` has not synced (initial list not complete)",
            i.description()
        ));
    }
    if state.host().is_some() {
        if !reconciled {
            reasons.push("plugins: no reconcile has completed yet".to_string());
        }
        let loaded = state.plugins();
        for (id, error) in refused {
            if id == PluginId::directory("") {
                reasons.push(format!("plugins directory: {error}"));
            } else if !loaded.iter().any(|r| r.id == id) {
                reasons.push(format!("plugin `{id}` is on disk but not loaded: {error}"));
            }
        }
    }
    reasons
}
