//! The two questions the admin server asks the API server, with kube's own client and
//! k8s-openapi's types: whose token is this (a TokenReview), and may this user do that (a
//! SubjectAccessReview). Both need the host's identity to hold `create` on them (the
//! `system:auth-delegator` ClusterRole).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;

/// The API group of the virtual resource tenants are authorized on.
pub(crate) const GROUP: &str = "informant.dev";
/// The virtual, cluster-scoped resource: `get` on `tenants` named T reads tenant T's data,
/// `update` retries and drops its dead letters; without a name, every tenant's (the operator).
pub(crate) const RESOURCE: &str = "tenants";

/// Why a review could not be answered; the admin server then refuses the request (503).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReviewError {
    /// The API server did not answer in time (or too many reviews were in flight).
    #[error("the API server did not answer a {what} within {after:?}")]
    Timeout {
        /// `TokenReview` or `SubjectAccessReview`.
        what: &'static str,
        /// How long was waited.
        after: Duration,
    },
    /// The API server refused or failed the review.
    #[error("creating a {what} failed{hint}: {source}")]
    Api {
        /// `TokenReview` or `SubjectAccessReview`.
        what: &'static str,
        /// What to do about it, when the API server refused the host (a missing grant).
        hint: &'static str,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The answer had no status.
    #[error("the API server answered a {what} without a status")]
    NoStatus {
        /// `TokenReview` or `SubjectAccessReview`.
        what: &'static str,
    },
}

/// An authenticated caller, as its TokenReview named it; every SubjectAccessReview about it
/// carries all of this, as the API server's own delegated authorizers do.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct User {
    /// The user name (`system:serviceaccount:NS:NAME` for a service account).
    pub name: String,
    /// Its uid, if the authenticator gave one.
    pub uid: Option<String>,
    /// Its groups.
    pub groups: Vec<String>,
    /// The authenticator's extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// What one SubjectAccessReview asks.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Question {
    /// `verb` on [`RESOURCE`] in [`GROUP`], of tenant `name` (`None`: every tenant).
    Tenants {
        /// `get` or `update`.
        verb: &'static str,
        /// The tenant, or none for all.
        name: Option<String>,
    },
    /// `verb` on the non-resource `path` (`get /metrics`).
    Path {
        /// The verb.
        verb: &'static str,
        /// The path.
        path: &'static str,
    },
}

fn api_error(what: &'static str, source: kube::Error) -> ReviewError {
    let hint = match &source {
        kube::Error::Api(s) if s.code == 403 => {
            " (the host's identity needs `create` on it: bind the system:auth-delegator ClusterRole)"
        }
        _ => "",
    };
    ReviewError::Api { what, hint, source }
}

/// The user `token` belongs to; `None` when the API server does not accept it.
pub(crate) async fn token(client: &kube::Client, token: &str) -> Result<Option<User>, ReviewError> {
    const WHAT: &str = "TokenReview";
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_string()),
            ..TokenReviewSpec::default()
        },
        ..TokenReview::default()
    };
    let api: Api<TokenReview> = Api::all(client.clone());
    let answered = api
        .create(&PostParams::default(), &review)
        .await
        .map_err(|e| api_error(WHAT, e))?;
    let status = answered
        .status
        .ok_or(ReviewError::NoStatus { what: WHAT })?;
    if status.authenticated != Some(true) {
        return Ok(None);
    }
    let Some(info) = status.user else {
        return Ok(None);
    };
    // An authenticated answer without a name names nobody to authorize: refuse it.
    let Some(name) = info.username.filter(|n| !n.is_empty()) else {
        return Ok(None);
    };
    Ok(Some(User {
        name,
        uid: info.uid.filter(|u| !u.is_empty()),
        groups: info.groups.unwrap_or_default(),
        extra: info.extra.unwrap_or_default(),
    }))
}

/// Whether `user` may do what `question` asks.
pub(crate) async fn access(
    client: &kube::Client,
    user: &User,
    question: &Question,
) -> Result<bool, ReviewError> {
    const WHAT: &str = "SubjectAccessReview";
    let (resource_attributes, non_resource_attributes) = match question {
        Question::Tenants { verb, name } => (
            Some(ResourceAttributes {
                verb: Some(verb.to_string()),
                group: Some(GROUP.into()),
                resource: Some(RESOURCE.into()),
                name: name.clone(),
                ..ResourceAttributes::default()
            }),
            None,
        ),
        Question::Path { verb, path } => (
            None,
            Some(NonResourceAttributes {
                verb: Some(verb.to_string()),
                path: Some(path.to_string()),
            }),
        ),
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            uid: user.uid.clone(),
            groups: Some(user.groups.clone()),
            extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
            resource_attributes,
            non_resource_attributes,
        },
        ..SubjectAccessReview::default()
    };
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let answered = api
        .create(&PostParams::default(), &review)
        .await
        .map_err(|e| api_error(WHAT, e))?;
    let status = answered
        .status
        .ok_or(ReviewError::NoStatus { what: WHAT })?;
    Ok(status.allowed && status.denied != Some(true))
}
