//! Asking the server what an identity may list and watch, before watching it: one
//! `SelfSubjectAccessReview` per verb, resource and scope, as `kubectl auth can-i` asks.
//!
//! Reviews are answered for whoever the client is (its impersonation included), so the same
//! code asks for the host and for a tenant's impersonated identity. A server that cannot answer
//! (no authorization API, the review itself refused, a network error) gives no verdict: the
//! caller watches anyway and the informer's first list answers instead (see
//! [`Access`](crate::reflector::Access)).

use futures::StreamExt;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};
use kube::core::ApiResource;

/// Reviews in flight at once: enough to review a cluster's ~60 kinds in a few round trips
/// without a burst the API server's priority and fairness would queue.
const CONCURRENCY: usize = 8;

/// What the server said about one resource in one scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Both `list` and `watch` are allowed.
    Allowed,
    /// `verb` is not allowed; the authorizer's reason when it gave one.
    Denied {
        /// The first verb refused (`list` or `watch`).
        verb: &'static str,
        /// Why, as the authorizer put it (often empty for RBAC).
        reason: String,
    },
    /// The review could not be made; the error, for a debug log.
    Unknown(String),
}

/// One question: may the client list and watch `resource`, in `namespace` (all namespaces and
/// cluster scope when `None`)?
#[derive(Debug, Clone)]
pub struct WatchQuestion {
    /// The resource.
    pub resource: ApiResource,
    /// The namespace the watch is limited to.
    pub namespace: Option<String>,
}

/// Asks every question, [`CONCURRENCY`] at a time; the verdicts come in the questions' order.
pub async fn may_watch(client: &Client, questions: &[WatchQuestion]) -> Vec<Verdict> {
    // Owned futures: borrowing ones would make callers' futures `Send` only for some lifetimes.
    let asks: Vec<_> = questions
        .iter()
        .map(|q| may_watch_one(client.clone(), q.clone()))
        .collect();
    futures::stream::iter(asks)
        .buffered(CONCURRENCY)
        .collect()
        .await
}

async fn may_watch_one(client: Client, q: WatchQuestion) -> Verdict {
    for verb in ["list", "watch"] {
        match review(&client, &q, verb).await {
            Ok(None) => {}
            Ok(Some(reason)) => return Verdict::Denied { verb, reason },
            Err(e) => return Verdict::Unknown(e.to_string()),
        }
    }
    Verdict::Allowed
}

/// `None` when allowed, the reason when not.
async fn review(client: &Client, q: &WatchQuestion, verb: &str) -> kube::Result<Option<String>> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(q.resource.group.clone()),
                version: Some(q.resource.version.clone()),
                resource: Some(q.resource.plural.clone()),
                namespace: q.namespace.clone(),
                verb: Some(verb.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    let status = answer.status.unwrap_or_default();
    Ok((!status.allowed).then(|| status.reason.unwrap_or_default()))
}
