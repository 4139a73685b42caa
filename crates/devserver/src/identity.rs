//! Who a request is made as, determined in kube-apiserver's order: authentication, then
//! impersonation.
//!
//! - `Authorization: Bearer <token>` names the user this server issued the token to
//!   ([`DevServer::token_for`]); any other `Authorization` is 401 Unauthorized, as the
//!   apiserver answers a credential it cannot verify. Without the header the caller is the
//!   unauthenticated admin every test used to be (unrestricted).
//! - `Impersonate-User` (`Impersonate-Group` adds groups) then replaces the caller, if the
//!   caller may `impersonate` that user (a service account is impersonated through
//!   `serviceaccounts` in its namespace, as the apiserver does) and each group; an unrestricted
//!   caller may be anyone.
//!
//! [`DevServer::token_for`]: crate::DevServer::token_for

use std::collections::HashMap;
use std::time::Instant;

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
}

/// Bearer tokens this server issued, one per user.
#[derive(Default)]
pub(crate) struct Tokens {
    by_user: Mutex<HashMap<String, String>>,
}

impl Tokens {
    /// The token for `user`, issued on first use (random, so no test can guess another's).
    pub(crate) fn issue(&self, user: &str) -> String {
        self.by_user
            .lock()
            .entry(user.to_string())
            .or_insert_with(|| format!("informant-{:032x}", rand::random::<u128>()))
            .clone()
    }

    fn user_of(&self, token: &str) -> Option<String> {
        self.by_user
            .lock()
            .iter()
            .find(|(_, t)| t.as_str() == token)
            .map(|(u, _)| u.clone())
    }
}

fn header_values<'a>(headers: &'a HeaderMap, name: &str) -> impl Iterator<Item = &'a str> {
    headers.get_all(name).iter().filter_map(|v| v.to_str().ok())
}

/// The caller by its credentials: 401 for a token this server did not issue.
fn authenticate(shared: &Shared, headers: &HeaderMap) -> Result<Option<String>> {
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
        .user_of(token)
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
    let caller = authenticate(shared, headers)?;
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
    })
}
