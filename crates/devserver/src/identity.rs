//! Who a request is made as, determined in kube-apiserver's order: authentication, then
//! impersonation.
//!
//! - `Authorization: Bearer <token>` names the user this server issued the token to
//!   ([`DevServer::token_for`], or [`DevServer::issue_token`] with groups and a lifetime); any
//!   other `Authorization`, and a token expired or revoked ([`DevServer::revoke_token`]), is
//!   401 Unauthorized, as the apiserver answers a credential it cannot verify. Without the
//!   header the caller is the unauthenticated admin every test used to be (unrestricted).
//! - A TokenReview (`review`) asks the same question of the same tokens for another server.
//! - `Impersonate-User` (`Impersonate-Group` adds groups) then replaces the caller, if the
//!   caller may `impersonate` that user (a service account is impersonated through
//!   `serviceaccounts` in its namespace, as the apiserver does) and each group; an unrestricted
//!   caller may be anyone.
//!
//! [`DevServer::token_for`]: crate::DevServer::token_for
//! [`DevServer::issue_token`]: crate::DevServer::issue_token
//! [`DevServer::revoke_token`]: crate::DevServer::revoke_token

use std::collections::HashMap;
use std::time::{Duration, Instant};

use http::HeaderMap;
use parking_lot::Mutex;

use super::audit::AccessRecord;
use super::rbac::{self, Attributes};
use super::{Error, Result, Shared};

/// The identity a request is made as.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Identity {
    /// The user; `None`: the unauthenticated admin.
    pub user: Option<String>,
    /// Impersonated groups.
    pub groups: Vec<String>,
    /// The token the caller authenticated with, when it is the one the request is made as
    /// (not impersonating): its uid and groups, which an admission webhook's `userInfo` shows.
    pub token: Option<TokenUser>,
}

/// Who a token was issued to, as a TokenReview reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TokenUser {
    /// The user name.
    pub user: String,
    /// A uid, stable for the token.
    pub uid: String,
    /// The groups: those given at issue, then `system:serviceaccounts` and
    /// `system:serviceaccounts:NS` for a service account, then `system:authenticated`, as the
    /// apiserver's authenticators add them.
    pub groups: Vec<String>,
}

struct Issued {
    who: TokenUser,
    /// `None`: never expires.
    expires: Option<Instant>,
}

/// Bearer tokens this server issued: one stable token per user ([`Tokens::issue`]), and any
/// number of others with groups and a lifetime ([`Tokens::issue_with`]).
#[derive(Default)]
pub(crate) struct Tokens {
    inner: Mutex<TokenTable>,
}

#[derive(Default)]
struct TokenTable {
    /// The stable token of each user.
    by_user: HashMap<String, String>,
    /// Every live token.
    by_token: HashMap<String, Issued>,
}

/// A fresh random token (so no test can guess another's).
fn fresh() -> String {
    format!("informant-{:032x}", rand::random::<u128>())
}

/// `system:serviceaccounts` and `system:serviceaccounts:NS` for a service account's name.
fn service_account_groups(user: &str) -> Vec<String> {
    let ns = user
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
        .map(|(ns, _)| ns)
        .filter(|ns| !ns.is_empty());
    match ns {
        Some(ns) => vec![
            "system:serviceaccounts".to_string(),
            format!("system:serviceaccounts:{ns}"),
        ],
        None => Vec::new(),
    }
}

impl Tokens {
    /// The stable token for `user`, issued on first use; it never expires.
    pub(crate) fn issue(&self, user: &str) -> String {
        let mut t = self.inner.lock();
        if let Some(token) = t.by_user.get(user) {
            return token.clone();
        }
        let token = fresh();
        t.by_user.insert(user.to_string(), token.clone());
        t.by_token
            .insert(token.clone(), Issued::new(user, &[], None));
        token
    }

    /// A new token for `user` in `groups`, valid for `lifetime` (`None`: until revoked).
    pub(crate) fn issue_with(
        &self,
        user: &str,
        groups: &[&str],
        lifetime: Option<Duration>,
    ) -> String {
        let token = fresh();
        let expires = lifetime.map(|l| Instant::now() + l);
        self.inner
            .lock()
            .by_token
            .insert(token.clone(), Issued::new(user, groups, expires));
        token
    }

    /// Makes `token` unknown from now on; whether it was known.
    pub(crate) fn revoke(&self, token: &str) -> bool {
        let mut t = self.inner.lock();
        t.by_user.retain(|_, v| v != token);
        t.by_token.remove(token).is_some()
    }

    /// Who `token` was issued to, unless it is unknown, revoked or expired.
    pub(crate) fn lookup(&self, token: &str) -> Option<TokenUser> {
        let t = self.inner.lock();
        let issued = t.by_token.get(token)?;
        if issued.expires.is_some_and(|e| Instant::now() >= e) {
            return None;
        }
        Some(issued.who.clone())
    }
}

impl Issued {
    fn new(user: &str, groups: &[&str], expires: Option<Instant>) -> Issued {
        let mut all: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        all.extend(service_account_groups(user));
        all.push("system:authenticated".into());
        // A uid per token, so that two tokens of a user are told apart.
        let uid = format!("{:032x}", rand::random::<u128>());
        Issued {
            who: TokenUser {
                user: user.to_string(),
                uid,
                groups: all,
            },
            expires,
        }
    }
}

fn header_values<'a>(headers: &'a HeaderMap, name: &str) -> impl Iterator<Item = &'a str> {
    headers.get_all(name).iter().filter_map(|v| v.to_str().ok())
}

/// The caller by its credentials: 401 for a token this server did not issue.
fn authenticate(shared: &Shared, headers: &HeaderMap) -> Result<Option<TokenUser>> {
    let Some(value) = headers.get(http::header::AUTHORIZATION) else {
        return Ok(None);
    };
    let token = value
        .to_str()
        .ok()
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|token| !token.is_empty())
        .ok_or(Error::Unauthorized)?;
    shared
        .tokens
        .lookup(token)
        .map(Some)
        .ok_or(Error::Unauthorized)
}

/// What impersonating `user` asks of the authorizer (`users`, or `serviceaccounts` in the
/// service account's namespace).
fn impersonate_user(user: &str) -> Attributes {
    let service_account = user
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains(':'));
    match service_account {
        Some((ns, name)) => Attributes {
            verb: "impersonate".into(),
            resource: "serviceaccounts".into(),
            namespace: Some(ns.into()),
            name: Some(name.into()),
            ..Attributes::default()
        },
        None => Attributes {
            verb: "impersonate".into(),
            resource: "users".into(),
            name: Some(user.into()),
            ..Attributes::default()
        },
    }
}

/// The identity `headers` make a request as; a refused impersonation is logged and answered
/// with the apiserver's 403.
pub(crate) fn identify(shared: &Shared, headers: &HeaderMap) -> Result<Identity> {
    let token = authenticate(shared, headers)?;
    let caller = token.as_ref().map(|t| t.user.clone());
    // An empty header asks for nothing, as the apiserver reads it.
    let user = header_values(headers, "impersonate-user").find(|u| !u.is_empty());
    let groups: Vec<String> = header_values(headers, "impersonate-group")
        .map(String::from)
        .collect();
    let Some(user) = user else {
        if !groups.is_empty() {
            return Err(Error::BadRequest(format!(
                "requested impersonation of groups {groups:?} without impersonating a user"
            )));
        }
        return Ok(Identity {
            user: caller,
            groups,
            token,
        });
    };
    let asks = std::iter::once(impersonate_user(user)).chain(groups.iter().map(|g| Attributes {
        verb: "impersonate".into(),
        resource: "groups".into(),
        name: Some(g.clone()),
        ..Attributes::default()
    }));
    for ask in asks {
        if !shared.rbac.allows(caller.as_deref(), &ask) {
            shared.audit.record_request(AccessRecord::new(
                caller.clone(),
                vec![],
                &ask,
                false,
                Instant::now(),
            ));
            return Err(rbac::forbidden(caller.as_deref().unwrap_or_default(), &ask));
        }
    }
    Ok(Identity {
        user: Some(user.to_string()),
        groups,
        token: None,
    })
}
