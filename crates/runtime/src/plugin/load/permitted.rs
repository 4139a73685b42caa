//! Which of a wildcard watch's kinds may be watched: the host lists and watches them with its
//! own identity, so it must be allowed to; a tenant with an identity to impersonate must be
//! allowed to as well (its grant was checked by the expansion already).
//!
//! Asked with `SelfSubjectAccessReview`s at every expansion (load and each re-discovery), so a
//! kind RBAC grants later is picked up by the next re-discovery and one it revokes is retired.
//! A kind left out is reported (the plugin's `not-permitted` in `/plugins`, one log line when
//! the set changes) and never listed, so it costs the API server nothing while refused. When
//! the server cannot answer a review, the kind is watched and its informer's first list
//! answers instead: a 403 there is a state the informer retries slowly, not a storm.

use std::collections::BTreeMap;

use crate::informer::ResolvedResource;
use crate::informer::review::{Verdict, WatchQuestion, may_watch};
use crate::manifest::Watch;
use crate::plugin::id::PluginId;
use crate::plugin::imports::cluster::Cluster;
use crate::tenancy::{Impersonate, TenantPolicy};

/// A kind a wildcard watch covers but may not watch, as `/plugins` shows it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct NotPermitted {
    /// `apps/v1/Deployment`.
    pub resource: String,
    /// Who may not, and what: `the host may not list secrets at the cluster scope`.
    pub reason: String,
}

/// [`permitted`] for wildcard watch `w` of a plugin admitted under `policy`: asked as the host
/// (`host`) and, if the tenant has one, as its identity, in each of the watch's namespaces.
pub(super) async fn for_watch(
    host: &kube::Client,
    cluster: &Cluster,
    w: &Watch,
    policy: &TenantPolicy,
    kinds: BTreeMap<String, ResolvedResource>,
) -> (BTreeMap<String, ResolvedResource>, Vec<NotPermitted>) {
    let namespaces: Vec<Option<String>> = crate::plugin::watch_scopes(w)
        .into_iter()
        .map(|s| s.namespace)
        .collect();
    let impersonate = policy.impersonate.as_ref();
    permitted(host, cluster, impersonate, &namespaces, kinds).await
}

/// Splits `kinds` (one wildcard watch's expansion, by resource name) into those every identity
/// concerned may list and watch in each of `namespaces` (`None`: cluster-wide) and those it
/// may not.
pub(super) async fn permitted(
    host: &kube::Client,
    cluster: &Cluster,
    impersonate: Option<&Impersonate>,
    namespaces: &[Option<String>],
    kinds: BTreeMap<String, ResolvedResource>,
) -> (BTreeMap<String, ResolvedResource>, Vec<NotPermitted>) {
    let mut who = vec![("the host".to_string(), host.clone())];
    if let Some(imp) = impersonate {
        match cluster.client_as(Some(imp)) {
            Ok(client) => who.push((format!("user `{}`", imp.user), client)),
            // Refused at admission already; nothing to ask as.
            Err(e) => tracing::debug!(error = %e, "no client for the tenant's identity"),
        }
    }
    let questions: Vec<(String, WatchQuestion)> = kinds
        .iter()
        .flat_map(|(name, r)| {
            let scopes: Vec<Option<String>> = if r.namespaced {
                namespaces.to_vec()
            } else {
                vec![None]
            };
            scopes.into_iter().map(move |namespace| {
                let question = WatchQuestion {
                    resource: r.api_resource.clone(),
                    namespace,
                };
                (name.clone(), question)
            })
        })
        .collect();
    let asked: Vec<WatchQuestion> = questions.iter().map(|(_, q)| q.clone()).collect();
    let mut refused: BTreeMap<String, String> = BTreeMap::new();
    for (identity, client) in &who {
        let verdicts = may_watch(client, &asked).await;
        for ((name, q), verdict) in questions.iter().zip(verdicts) {
            match verdict {
                Verdict::Allowed => {}
                Verdict::Denied { verb, reason } => {
                    let scope = match &q.namespace {
                        Some(ns) => format!("in namespace `{ns}`"),
                        None => "at the cluster scope".to_string(),
                    };
                    let why = if reason.is_empty() {
                        String::new()
                    } else {
                        format!(" ({reason})")
                    };
                    refused.entry(name.clone()).or_insert_with(|| {
                        format!(
                            "{identity} may not {verb} {} {scope}{why}",
                            q.resource.plural
                        )
                    });
                }
                Verdict::Unknown(e) => {
                    tracing::debug!(resource = %name, error = %e, "access review failed; the list will tell")
                }
            }
        }
    }
    let mut kept = kinds;
    let not_permitted = refused
        .into_iter()
        .map(|(resource, reason)| {
            kept.remove(&resource);
            NotPermitted { resource, reason }
        })
        .collect();
    (kept, not_permitted)
}

/// Logs what a plugin's wildcard watches leave out, when that changed since `before`.
pub(super) fn report(id: &PluginId, before: &[NotPermitted], now: &[NotPermitted]) {
    if before == now {
        return;
    }
    let names: Vec<&str> = now.iter().map(|n| n.resource.as_str()).collect();
    id.span().in_scope(|| {
        if now.is_empty() {
            tracing::info!("wildcard watch: every kind it covers is permitted now");
        } else {
            tracing::warn!(
                count = now.len(),
                not_permitted = ?names,
                "wildcard watch leaves out kinds RBAC does not let it list and watch; re-checked on every re-discovery"
            );
        }
    });
}
