//! What `/readyz` checks: ready means the runtime finished starting, the first reconcile is
//! done, every plugin found on disk has a version loaded whose events flow (its informers
//! synced and its replay queued), and every informer has applied its first complete list.
//!
//! What the server refuses to let us list (403) does not hold readiness: RBAC changes when an
//! operator changes it, and a pod unready until then would block rollouts while the plugins
//! that may read do their work. Refused informers are listed under the `ok` instead ([`notes`]),
//! and the plugins naming such a kind show `waiting` in `/plugins`.
//!
//! A plugin whose replacement was refused keeps its old version running, so it counts as loaded
//! (the refusal is logged); a plugin that never loaded keeps the process unready until the next
//! reconcile loads it or it is removed. A quarantined plugin is loaded: it shows in `/plugins` and
//! the `informant_plugin_state` metric instead, since restarting the process would not fix it.
//!
//! In sharded mode, a member that runs no plugin because it cannot follow its group (a Lease
//! or Pod watch refused or broken, its Lease not renewed, its own Pod not found) is not ready,
//! with the one-line reason the membership gives: it runs nothing, and a rollout must not count
//! it available.
//!
//! A waiting plugin (see [`crate::plugin::load::waiting`]) that waits for the API server to answer
//! keeps the process unready: it cannot do its work. One that waits for a kind to be served
//! does not: a CRD may be installed much later or never, and a host unready for that would
//! block rollouts for no fault of its own; it is listed under the `ok` instead ([`notes`]).
//!
//! What a caller is shown depends on its [`Scope`] ([`report`]): the operator every line; a
//! tenant the lines about its own plugins, and how many others there are; the probe listener,
//! which asks for no credentials, only the counts, so that no plugin, tenant, kind or error
//! reaches anyone who can reach the pod.

use parking_lot::Mutex;

use super::AdminState;
use super::scope::Scope;
use crate::informer::Access;
use crate::plugin::id::PluginId;
use crate::plugin::load::status::ReconcileReport;
use crate::plugin::load::waiting::{Waiting, WaitingFor};

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
        let refused = report
            .errors
            .iter()
            .map(|(id, e)| (id.clone(), e.to_string()));
        match &report.only {
            // A retry of some plugins says nothing new about the others.
            Some(tried) => {
                f.refused.retain(|(id, _)| !tried.contains(id));
                f.refused.extend(refused);
            }
            None => f.refused = refused.collect(),
        }
    }
}

/// One line of [`check`] or [`notes`], and the tenant it is about (`None`: the host's own, or
/// the plugins directory's).
struct Line {
    /// Whose line it is: `None` the host's, `Some` a tenant's.
    tenant: Option<String>,
    /// Shown to every caller, the unauthenticated probe included: the process's own state,
    /// naming no tenant, plugin or kind.
    public: bool,
    text: String,
}

impl Line {
    fn host(text: String) -> Line {
        Line {
            tenant: None,
            public: false,
            text,
        }
    }

    fn public(text: String) -> Line {
        Line {
            tenant: None,
            public: true,
            text,
        }
    }

    fn plugin(id: &PluginId, text: String) -> Line {
        Line {
            tenant: Some(id.tenant.clone()),
            public: false,
            text,
        }
    }

    fn visible(&self, scope: &Scope) -> bool {
        match &self.tenant {
            _ if self.public => true,
            None => scope.sees_host(),
            Some(t) => scope.sees_tenant(t),
        }
    }
}

/// `/readyz` for a caller that sees `scope`: whether the process is ready, and the body, `ok`
/// or `not ready:` followed by the lines the caller may see and a count of those it may not.
pub(crate) fn report(state: &AdminState, scope: &Scope) -> (bool, String) {
    let reasons = reasons(state);
    let ready = reasons.is_empty();
    let (lines, head) = if ready {
        (waiting_notes(state), "waiting (not blocking readiness):\n")
    } else {
        (reasons, "not ready:\n")
    };
    let mut body = String::from(if ready { "ok\n" } else { "" });
    if lines.is_empty() {
        return (ready, body);
    }
    body.push_str(head);
    let mut hidden = 0;
    for line in &lines {
        if line.visible(scope) {
            body.push_str("- ");
            body.push_str(&line.text);
            body.push('\n');
        } else {
            hidden += 1;
        }
    }
    if hidden > 0 {
        let lines = if hidden == 1 { "line" } else { "lines" };
        body.push_str(&format!(
            "- {hidden} {lines} not shown here (the authenticated admin server's /readyz has them)\n"
        ));
    }
    (ready, body)
}

fn reasons(state: &AdminState) -> Vec<Line> {
    let mut reasons = Vec::new();
    let (started, reconciled, refused) = {
        let f = state.readiness().inner.lock();
        (f.started, f.reconciled, f.refused.clone())
    };
    if !started {
        reasons.push(Line::host(
            "starting: informers and plugins are still being set up".to_string(),
        ));
    }
    let mut informers = state.factory().informers();
    informers.sort_by(|a, b| a.description().cmp(b.description()));
    for i in informers
        .iter()
        .filter(|i| !i.has_synced() && !i.access().is_forbidden())
    {
        reasons.push(Line::host(format!(
            "informer `{}` has not synced (initial list not complete)",
            i.description()
        )));
    }
    if let Some(host) = state.host() {
        if let Some(shard) = host.shard()
            && let Some(why) = shard.why.borrow().clone()
        {
            // The kubelet's probe reads why a member runs nothing: the group and the reason
            // name no tenant.
            reasons.push(Line::public(format!(
                "shard group `{}`: this member runs no plugin: {why}",
                shard.config.group
            )));
        }
        if !reconciled {
            reasons.push(Line::host(
                "plugins: no reconcile has completed yet".to_string(),
            ));
        }
        for (id, pending) in host.starting() {
            let text = format!(
                "plugin `{id}` is loaded; its events wait for its informers to sync: {}",
                pending.join(", ")
            );
            reasons.push(Line::plugin(&id, text));
        }
        let loaded = state.plugins();
        for (id, error) in refused {
            if id == PluginId::directory("") {
                reasons.push(Line::host(format!("plugins directory: {error}")));
            } else if !loaded.iter().any(|r| r.id == id) {
                let text = format!("plugin `{id}` is on disk but not loaded: {error}");
                reasons.push(Line::plugin(&id, text));
            }
        }
        for (id, w) in waiting(state) {
            if w.waiting_for == WaitingFor::ApiServer {
                let text = format!(
                    "plugin `{id}` waits for {} (attempt {}): {}",
                    w.waiting_for, w.attempts, w.reason
                );
                reasons.push(Line::plugin(&id, text));
            }
        }
    }
    reasons
}

fn waiting_notes(state: &AdminState) -> Vec<Line> {
    let mut notes: Vec<Line> = waiting(state)
        .into_iter()
        .filter(|(_, w)| w.waiting_for != WaitingFor::ApiServer)
        .map(|(id, w)| {
            let text = format!(
                "plugin `{id}` waits for {} (attempt {})",
                w.waiting_for, w.attempts
            );
            Line::plugin(&id, text)
        })
        .collect();
    let mut informers = state.factory().informers();
    informers.sort_by(|a, b| a.description().cmp(b.description()));
    for i in informers {
        if let Access::Forbidden { reason, .. } = i.access() {
            notes.push(Line::host(format!(
                "informer `{}` is forbidden, retried on a capped backoff: {reason}",
                i.description()
            )));
        }
    }
    notes
}

/// The waiting plugins that have no version running (a running one does its work meanwhile).
fn waiting(state: &AdminState) -> Vec<(PluginId, Waiting)> {
    let Some(host) = state.host() else {
        return Vec::new();
    };
    let loaded = state.plugins();
    host.waiting()
        .into_iter()
        .filter(|(id, _)| !loaded.iter().any(|r| &r.id == id))
        .collect()
}
