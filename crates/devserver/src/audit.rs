//! Who asked for what: every API request the server receives, with the identity it was made
//! as and whether RBAC let it through ([`DevServer::requests`]), and the write requests among
//! them in the shape tests have always read ([`DevServer::audit`]).
//!
//! Identities and rules live in `identity` and `rbac`: a request is made as the user its bearer
//! token was issued to, or the user its `Impersonate-User` header names (`Impersonate-Group`
//! adds groups), or else as the unauthenticated admin. Discovery is not recorded.
//!
//! [`DevServer::audit`]: crate::DevServer::audit
//! [`DevServer::requests`]: crate::DevServer::requests

use std::collections::VecDeque;
use std::time::Instant;

use parking_lot::Mutex;

pub use super::rbac::AllowRule;
use super::rbac::Attributes;

/// Records kept of each kind; the oldest go first.
const KEPT: usize = 10_000;

/// One write request as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// The user the write was made as (its bearer token's or `Impersonate-User`); `None`: the
    /// unauthenticated admin.
    pub user: Option<String>,
    /// `Impersonate-Group` values.
    pub groups: Vec<String>,
    /// The verb of the method: `create`, `update`, `patch` or `delete` (a delete of a whole
    /// collection too; [`AccessRecord::verb`] tells `deletecollection` apart).
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
    /// Whether RBAC let it through (always, for users without rules).
    pub allowed: bool,
}

/// One API request as authorized (discovery excluded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRecord {
    /// The user it was made as; `None`: the unauthenticated admin.
    pub user: Option<String>,
    /// Impersonated groups.
    pub groups: Vec<String>,
    /// The Kubernetes verb: `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, or `impersonate` for a refused impersonation.
    pub verb: String,
    /// The resource, `plural` or `plural.group`.
    pub resource: String,
    /// `status`, `scale`, `log`, ..., or empty.
    pub subresource: String,
    /// The namespace the request is in; `None`: the cluster scope or all namespaces.
    pub namespace: Option<String>,
    /// The object's name, when the request names one (a list by `metadata.name` field selector
    /// names it too, as the apiserver's request info does).
    pub name: Option<String>,
    /// Whether RBAC let it through.
    pub allowed: bool,
    /// When it was received.
    pub at: Instant,
}

impl AccessRecord {
    pub(crate) fn new(
        user: Option<String>,
        groups: Vec<String>,
        a: &Attributes,
        allowed: bool,
        at: Instant,
    ) -> AccessRecord {
        AccessRecord {
            user,
            groups,
            verb: a.verb.clone(),
            resource: a.qualified(),
            subresource: a.subresource.clone(),
            namespace: a.namespace.clone(),
            name: a.name.clone(),
            allowed,
            at,
        }
    }
}

/// The two bounded logs.
#[derive(Default)]
pub(crate) struct Audit {
    writes: Mutex<VecDeque<AuditRecord>>,
    requests: Mutex<VecDeque<AccessRecord>>,
}

fn push<T>(log: &Mutex<VecDeque<T>>, record: T) {
    let mut log = log.lock();
    if log.len() == KEPT {
        log.pop_front();
    }
    log.push_back(record);
}

impl Audit {
    /// Records a write request, already judged.
    pub(crate) fn record_write(&self, r: AuditRecord) {
        push(&self.writes, r);
    }

    /// Records an API request, already judged.
    pub(crate) fn record_request(&self, r: AccessRecord) {
        push(&self.requests, r);
    }

    pub(crate) fn writes(&self) -> Vec<AuditRecord> {
        self.writes.lock().iter().cloned().collect()
    }

    pub(crate) fn requests(&self) -> Vec<AccessRecord> {
        self.requests.lock().iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_log_keeps_the_newest_records() {
        let audit = Audit::default();
        let a = Attributes {
            verb: "list".into(),
            resource: "configmaps".into(),
            ..Attributes::default()
        };
        let start = Instant::now();
        for _ in 0..KEPT + 2 {
            audit.record_request(AccessRecord::new(None, vec![], &a, true, Instant::now()));
        }
        let kept = audit.requests();
        assert_eq!(kept.len(), KEPT);
        assert!(
            kept.iter()
                .all(|r| r.at >= start && r.resource == "configmaps")
        );
        assert!(audit.writes().is_empty(), "reads are no writes");
    }
}
