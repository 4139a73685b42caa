//! Who wrote what: every write request the server receives, with the identity it impersonates,
//! and an optional allow list per impersonated user standing in for the cluster's RBAC.
//!
//! The server has no authentication: a request is made as the kubeconfig's user, or as the user
//! its `Impersonate-User` header names (`Impersonate-Group` adds groups), as the API server
//! would after checking the caller may impersonate. Tests read [`DevServer::audit`] to see
//! which identity a write carried, and [`DevServer::allow_impersonated`] makes writes by an
//! impersonated user outside its rules fail with the API server's 403.
//!
//! [`DevServer::audit`]: crate::DevServer::audit
//! [`DevServer::allow_impersonated`]: crate::DevServer::allow_impersonated

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;

/// Records kept; the oldest go first.
const KEPT: usize = 10_000;

/// One write request as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// `Impersonate-User`, if the request carried one.
    pub user: Option<String>,
    /// `Impersonate-Group` values.
    pub groups: Vec<String>,
    /// The Kubernetes verb: `create`, `update`, `patch` or `delete`.
    pub verb: String,
    /// The resource, `plural` or `plural.group`.
    pub resource: String,
    /// `status`, `scale`, or empty.
    pub subresource: String,
    /// The namespace in the path.
    pub namespace: Option<String>,
    /// The object's name in the path (none for a create).
    pub name: Option<String>,
    /// `fieldManager` from the query.
    pub field_manager: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// Whether the allow list let it through (always, for users without one).
    pub allowed: bool,
}

/// What an impersonated user may write (one rule of its allow list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowRule {
    /// Kubernetes verbs (`create`, `update`, `patch`, `delete`), or `*`.
    pub verbs: Vec<String>,
    /// `plural` or `plural.group` (subresources as `plural/status`), or `*`.
    pub resource: String,
    /// Only this namespace; `None`: any.
    pub namespace: Option<String>,
}

impl AllowRule {
    fn allows(&self, r: &AuditRecord) -> bool {
        let resource = if r.subresource.is_empty() {
            r.resource.clone()
        } else {
            let (plural, group) = r.resource.split_once('.').unwrap_or((&r.resource, ""));
            let sub = format!("{plural}/{}", r.subresource);
            if group.is_empty() {
                sub
            } else {
                format!("{sub}.{group}")
            }
        };
        (self.verbs.iter().any(|v| v == "*" || *v == r.verb))
            && (self.resource == "*" || self.resource == resource)
            && self
                .namespace
                .as_ref()
                .is_none_or(|ns| r.namespace.as_ref() == Some(ns))
    }
}

/// The records and the allow lists.
#[derive(Default)]
pub(crate) struct Audit {
    records: Mutex<VecDeque<AuditRecord>>,
    rules: Mutex<HashMap<String, Vec<AllowRule>>>,
}

impl Audit {
    /// Records `r`, judging it by its user's allow list; returns the API server's refusal if
    /// the list does not allow it.
    pub(crate) fn record(&self, mut r: AuditRecord) -> Option<String> {
        r.allowed = match &r.user {
            Some(user) => self
                .rules
                .lock()
                .get(user)
                .is_none_or(|rules| rules.iter().any(|rule| rule.allows(&r))),
            None => true,
        };
        let refusal = (!r.allowed).then(|| forbidden_message(&r));
        let mut records = self.records.lock();
        if records.len() == KEPT {
            records.pop_front();
        }
        records.push_back(r);
        refusal
    }

    pub(crate) fn records(&self) -> Vec<AuditRecord> {
        self.records.lock().iter().cloned().collect()
    }

    pub(crate) fn allow(&self, user: &str, rules: Vec<AllowRule>) {
        self.rules.lock().insert(user.to_string(), rules);
    }
}

/// The API server's words for a write RBAC refused.
fn forbidden_message(r: &AuditRecord) -> String {
    let (plural, group) = r.resource.split_once('.').unwrap_or((&r.resource, ""));
    let resource = if r.subresource.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}/{}", r.subresource)
    };
    let what = match &r.name {
        Some(name) => format!("{} \"{name}\" is forbidden", r.resource),
        None => format!("{} is forbidden", r.resource),
    };
    let mut m = format!(
        "{what}: User \"{}\" cannot {} resource \"{resource}\" in API group \"{group}\"",
        r.user.as_deref().unwrap_or_default(),
        r.verb
    );
    match &r.namespace {
        Some(ns) => m.push_str(&format!(" in the namespace \"{ns}\"")),
        None => m.push_str(" at the cluster scope"),
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(user: Option<&str>, verb: &str, ns: Option<&str>) -> AuditRecord {
        AuditRecord {
            user: user.map(String::from),
            groups: vec![],
            verb: verb.into(),
            resource: "deployments.apps".into(),
            subresource: String::new(),
            namespace: ns.map(String::from),
            name: Some("web".into()),
            field_manager: None,
            dry_run: false,
            allowed: false,
        }
    }

    #[test]
    fn an_allow_list_holds_its_user_to_its_rules_and_nobody_else() {
        let audit = Audit::default();
        audit.allow(
            "alice",
            vec![AllowRule {
                verbs: vec!["patch".into()],
                resource: "deployments.apps".into(),
                namespace: Some("a".into()),
            }],
        );
        assert_eq!(
            audit.record(record(Some("alice"), "patch", Some("a"))),
            None
        );
        let refused = audit.record(record(Some("alice"), "patch", Some("b")));
        assert!(
            refused.is_some_and(|m| m.contains("cannot patch resource \"deployments\"")),
            "refused in RBAC's words"
        );
        assert!(
            audit
                .record(record(Some("alice"), "delete", Some("a")))
                .is_some()
        );
        assert_eq!(
            audit.record(record(Some("bob"), "delete", Some("b"))),
            None,
            "no list: no limits"
        );
        assert_eq!(audit.record(record(None, "delete", Some("b"))), None);
        let kept: Vec<bool> = audit.records().iter().map(|r| r.allowed).collect();
        assert_eq!(kept, [true, false, false, true, true]);
    }

    #[test]
    fn the_refusal_is_worded_as_the_api_server_words_it() {
        let r = record(Some("system:serviceaccount:a:hooks"), "patch", Some("a"));
        assert_eq!(
            forbidden_message(&r),
            "deployments.apps \"web\" is forbidden: User \"system:serviceaccount:a:hooks\" cannot \
             patch resource \"deployments\" in API group \"apps\" in the namespace \"a\""
        );
    }
}
