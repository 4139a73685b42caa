//! Authorization as kube-apiserver's RBAC decides it, for identities the test restricts.
//!
//! A user without rules is unrestricted, as a cluster admin is; so is the unauthenticated
//! caller every existing test is. [`DevServer::restrict`] holds a user to its rules for every
//! request; [`DevServer::allow_impersonated`] only for writes (reads stay open). A rule with a
//! namespace is a RoleBinding: it allows requests in that namespace only, never a cluster-scoped
//! request or a list across all namespaces; a rule without one is a ClusterRoleBinding.
//!
//! Everyone may do what every authenticated user may on a real cluster (the `system:discovery`,
//! `system:public-info-viewer` and `system:basic-user` roles): read discovery and create the
//! self access reviews. Refusals carry the apiserver's exact words (its `forbiddenMessage`).
//!
//! Rules are RBAC's PolicyRules: a rule names resources (optionally only some objects of them,
//! its `resourceNames`) or non-resource URLs (`/metrics`, or a prefix ending in `*`), never
//! both. A rule with resource names allows only requests naming one of them: never a list, a
//! watch, a create or a request for all objects, as the apiserver's RBAC authorizer decides.
//!
//! [`DevServer::restrict`]: crate::DevServer::restrict
//! [`DevServer::allow_impersonated`]: crate::DevServer::allow_impersonated

use std::collections::HashMap;

use parking_lot::RwLock;
use serde_json::{Value, json};

use super::Error;

/// What a restricted user may do (one rule of its list, RBAC's PolicyRule and its binding).
///
/// Build one with a struct literal ending in `..AllowRule::default()`, or with
/// [`AllowRule::new`] and [`AllowRule::paths`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowRule {
    /// Kubernetes verbs (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, `impersonate`), or `*`.
    pub verbs: Vec<String>,
    /// `plural` or `plural.group` (subresources as `plural/status`, `plural/scale.apps`), or `*`;
    /// empty in a rule of [`non_resource_urls`](Self::non_resource_urls), which then allows no
    /// resource request.
    pub resource: String,
    /// Only requests in this namespace (a RoleBinding); `None`: any namespace and the cluster
    /// scope (a ClusterRoleBinding).
    pub namespace: Option<String>,
    /// Only requests naming one of these objects (RBAC's `resourceNames`); empty: any object.
    pub resource_names: Vec<String>,
    /// Non-resource URLs this rule allows its verbs on (RBAC's `nonResourceURLs`): exact paths,
    /// or a prefix ending in `*`; only in a rule without [`resource`](Self::resource).
    pub non_resource_urls: Vec<String>,
}

impl AllowRule {
    /// `verbs` on `resource` (`plural` or `plural.group`) everywhere: a ClusterRoleBinding.
    pub fn new(verbs: &[&str], resource: &str) -> AllowRule {
        AllowRule {
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            resource: resource.into(),
            ..AllowRule::default()
        }
    }

    /// `verbs` on the non-resource URLs `paths` (a trailing `*` matches any rest).
    pub fn paths(verbs: &[&str], paths: &[&str]) -> AllowRule {
        AllowRule {
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            non_resource_urls: paths.iter().map(|p| p.to_string()).collect(),
            ..AllowRule::default()
        }
    }

    /// This rule, only in `namespace` (a RoleBinding).
    pub fn in_namespace(mut self, namespace: &str) -> AllowRule {
        self.namespace = Some(namespace.into());
        self
    }

    /// This rule, only for the objects named `names`.
    pub fn named(mut self, names: &[&str]) -> AllowRule {
        self.resource_names = names.iter().map(|n| n.to_string()).collect();
        self
    }

    /// The `system:auth-delegator` ClusterRole: creating TokenReviews and SubjectAccessReviews,
    /// what a server that authenticates its own callers through the API server needs (the
    /// chart binds it to the host's ServiceAccount).
    pub fn auth_delegator() -> Vec<AllowRule> {
        vec![
            AllowRule::new(&["create"], "tokenreviews.authentication.k8s.io"),
            AllowRule::new(&["create"], "subjectaccessreviews.authorization.k8s.io"),
        ]
    }

    fn allows(&self, a: &Attributes) -> bool {
        !self.resource.is_empty()
            && self.verbs.iter().any(|v| v == "*" || *v == a.verb)
            && (self.resource == "*" || self.resource == a.rule_resource())
            && self
                .namespace
                .as_ref()
                .is_none_or(|ns| a.namespace.as_ref() == Some(ns))
            && (self.resource_names.is_empty()
                || a.name
                    .as_ref()
                    .is_some_and(|n| self.resource_names.contains(n)))
    }

    /// Whether this rule allows `verb` on the non-resource `path`.
    fn allows_path(&self, verb: &str, path: &str) -> bool {
        self.resource.is_empty()
            && self.verbs.iter().any(|v| v == "*" || v == verb)
            && self
                .non_resource_urls
                .iter()
                .any(|url| url_matches(url, path))
    }

    /// The rule as an SSRR `ResourceRule`: the group is what follows the first dot.
    fn to_resource_rule(&self) -> Value {
        let (resource, group) = match self.resource.as_str() {
            "*" => ("*", "*"),
            r => r.split_once('.').unwrap_or((r, "")),
        };
        let mut rule = json!({"verbs": self.verbs, "apiGroups": [group], "resources": [resource]});
        if !self.resource_names.is_empty() {
            rule["resourceNames"] = json!(self.resource_names);
        }
        rule
    }
}

/// RBAC's non-resource URL match: exact, or a prefix when the rule ends in `*`.
fn url_matches(url: &str, path: &str) -> bool {
    match url.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => path == url,
    }
}

/// What one request asks to do: the apiserver's `authorizer.Attributes` of a resource request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Attributes {
    /// `get`, `list`, `watch`, `create`, ..., `impersonate`.
    pub verb: String,
    /// API group, empty for the core group.
    pub group: String,
    /// The resource's plural.
    pub resource: String,
    /// `status`, `scale`, ..., or empty.
    pub subresource: String,
    /// The namespace; `None`: the cluster scope (or all namespaces).
    pub namespace: Option<String>,
    /// The object's name, when the request names one.
    pub name: Option<String>,
}

impl Attributes {
    /// The resource as [`AllowRule::resource`] spells it.
    fn rule_resource(&self) -> String {
        let mut r = self.resource.clone();
        if !self.subresource.is_empty() {
            r = format!("{r}/{}", self.subresource);
        }
        if !self.group.is_empty() {
            r = format!("{r}.{}", self.group);
        }
        r
    }

    /// `plural` or `plural.group`, as errors and records name a resource.
    pub(crate) fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    fn is_read(&self) -> bool {
        matches!(self.verb.as_str(), "get" | "list" | "watch")
    }
}

/// Paths every authenticated user may GET (`system:discovery`, `system:public-info-viewer`).
const DISCOVERY_URLS: &[&str] = &[
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/openapi",
    "/openapi/*",
    "/readyz",
    "/version",
    "/version/",
];

/// The access reviews every authenticated user may create (`system:basic-user`).
const REVIEWS: &[&str] = &["selfsubjectaccessreviews", "selfsubjectrulesreviews"];

/// Whether `path` is one of [`DISCOVERY_URLS`] (a trailing `*` matches any rest).
pub(crate) fn is_discovery(path: &str) -> bool {
    DISCOVERY_URLS.iter().any(|url| url_matches(url, path))
}

/// Which requests a user's rules judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Every request ([`DevServer::restrict`](crate::DevServer::restrict)).
    All,
    /// Writes only; reads are open
    /// ([`DevServer::allow_impersonated`](crate::DevServer::allow_impersonated)).
    Writes,
}

struct Grant {
    rules: Vec<AllowRule>,
    scope: Scope,
}

/// The rules of every restricted user.
#[derive(Default)]
pub(crate) struct Rbac {
    grants: RwLock<HashMap<String, Grant>>,
}

impl Rbac {
    /// Holds `user` to `rules` for every request, replacing what it had.
    pub(crate) fn restrict(&self, user: &str, rules: Vec<AllowRule>) {
        self.set(user, rules, Scope::All);
    }

    /// Holds `user` to `rules` for writes only, replacing what it had.
    pub(crate) fn restrict_writes(&self, user: &str, rules: Vec<AllowRule>) {
        self.set(user, rules, Scope::Writes);
    }

    fn set(&self, user: &str, rules: Vec<AllowRule>, scope: Scope) {
        self.grants
            .write()
            .insert(user.to_string(), Grant { rules, scope });
    }

    /// Whether `user` (`None`: the unauthenticated admin) is held to rules for every request,
    /// so that anything outside the API (non-resource paths) is refused to it.
    pub(crate) fn restricted(&self, user: Option<&str>) -> bool {
        user.is_some_and(|u| {
            self.grants
                .read()
                .get(u)
                .is_some_and(|g| g.scope == Scope::All)
        })
    }

    /// Whether `user` may do `a`.
    pub(crate) fn allows(&self, user: Option<&str>, a: &Attributes) -> bool {
        let Some(user) = user else { return true };
        if self.allows_everyone(a) {
            return true;
        }
        let grants = self.grants.read();
        let Some(grant) = grants.get(user) else {
            return true;
        };
        (grant.scope == Scope::Writes && a.is_read()) || grant.rules.iter().any(|r| r.allows(a))
    }

    /// Whether every authenticated user may do `a` (create the self access reviews).
    pub(crate) fn allows_everyone(&self, a: &Attributes) -> bool {
        a.verb == "create" && a.group == "authorization.k8s.io" && REVIEWS.contains(&&*a.resource)
    }

    /// Whether `user` may `verb` the non-resource `path`: discovery is everyone's, the rest
    /// what the user's non-resource rules allow.
    pub(crate) fn allows_path(&self, user: Option<&str>, verb: &str, path: &str) -> bool {
        if !self.restricted(user) || (verb == "get" && is_discovery(path)) {
            return true;
        }
        let grants = self.grants.read();
        user.and_then(|u| grants.get(u))
            .is_some_and(|g| g.rules.iter().any(|r| r.allows_path(verb, path)))
    }

    /// What `user` may do in `namespace`, as a SelfSubjectRulesReview's status lists it:
    /// (`resourceRules`, `nonResourceRules`).
    pub(crate) fn rules_in(&self, user: Option<&str>, namespace: &str) -> (Vec<Value>, Vec<Value>) {
        let everything = json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]});
        let any_path = json!({"verbs": ["*"], "nonResourceURLs": ["*"]});
        let grants = self.grants.read();
        let Some(grant) = user.and_then(|u| grants.get(u)) else {
            return (vec![everything], vec![any_path]);
        };
        let mut resource_rules = vec![json!({"verbs": ["create"],
            "apiGroups": ["authorization.k8s.io"], "resources": REVIEWS})];
        let mut non_resource = match grant.scope {
            Scope::All => vec![json!({"verbs": ["get"], "nonResourceURLs": DISCOVERY_URLS})],
            Scope::Writes => {
                resource_rules.push(json!({"verbs": ["get", "list", "watch"],
                    "apiGroups": ["*"], "resources": ["*"]}));
                vec![any_path]
            }
        };
        let (paths, resources): (Vec<&AllowRule>, Vec<&AllowRule>) =
            grant.rules.iter().partition(|r| r.resource.is_empty());
        resource_rules.extend(
            resources
                .into_iter()
                .filter(|r| r.namespace.as_deref().is_none_or(|ns| ns == namespace))
                .map(AllowRule::to_resource_rule),
        );
        non_resource.extend(
            paths
                .into_iter()
                .map(|r| json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls})),
        );
        (resource_rules, non_resource)
    }
}

/// The apiserver's 403 for a resource request `user` may not make (`responsewriters.Forbidden`
/// over `forbiddenMessage`, then `NewForbidden`).
pub(crate) fn forbidden(user: &str, a: &Attributes) -> Error {
    let mut resource = a.resource.clone();
    if !a.subresource.is_empty() {
        resource = format!("{resource}/{}", a.subresource);
    }
    let scope = match &a.namespace {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".to_string(),
    };
    let reason = format!(
        "User \"{user}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
        a.verb, a.group
    );
    let message = match &a.name {
        Some(name) => format!("{} \"{name}\" is forbidden: {reason}", a.qualified()),
        None => format!("{} is forbidden: {reason}", a.qualified()),
    };
    Error::Forbidden {
        message,
        group: a.group.clone(),
        resource: a.resource.clone(),
        name: a.name.clone(),
    }
}

/// The apiserver's 403 for a non-resource path `user` may not use.
pub(crate) fn forbidden_path(user: &str, verb: &str, path: &str) -> Error {
    Error::Forbidden {
        message: format!("forbidden: User \"{user}\" cannot {verb} path \"{path}\""),
        group: String::new(),
        resource: String::new(),
        name: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(verb: &str, ns: Option<&str>) -> Attributes {
        Attributes {
            verb: verb.into(),
            group: "apps".into(),
            resource: "deployments".into(),
            subresource: String::new(),
            namespace: ns.map(String::from),
            name: Some("web".into()),
        }
    }

    #[test]
    fn rules_hold_their_user_and_nobody_else() {
        let rbac = Rbac::default();
        rbac.restrict(
            "alice",
            vec![AllowRule::new(&["patch"], "deployments.apps").in_namespace("a")],
        );
        let alice = Some("alice");
        assert!(rbac.allows(alice, &attrs("patch", Some("a"))));
        assert!(!rbac.allows(alice, &attrs("patch", Some("b"))));
        assert!(!rbac.allows(alice, &attrs("patch", None)), "a RoleBinding");
        assert!(!rbac.allows(alice, &attrs("get", Some("a"))));
        assert!(
            rbac.allows(Some("bob"), &attrs("delete", None)),
            "no rules: no limits"
        );
        assert!(rbac.allows(None, &attrs("delete", None)));
        rbac.restrict_writes("alice", vec![]);
        assert!(
            rbac.allows(alice, &attrs("get", Some("b"))),
            "reads stay open"
        );
        assert!(!rbac.allows(alice, &attrs("patch", Some("a"))));
    }

    #[test]
    fn subresources_are_their_own_resources() {
        let rbac = Rbac::default();
        let rule = |resource: &str| AllowRule::new(&["*"], resource);
        rbac.restrict("u", vec![rule("deployments/status.apps")]);
        let mut a = attrs("update", Some("a"));
        assert!(!rbac.allows(Some("u"), &a));
        a.subresource = "status".into();
        assert!(rbac.allows(Some("u"), &a));
        rbac.restrict("u", vec![rule("*")]);
        assert!(rbac.allows(Some("u"), &a));
    }

    #[test]
    fn the_refusal_is_worded_as_the_api_server_words_it() {
        let a = attrs("patch", Some("a"));
        assert_eq!(
            forbidden("system:serviceaccount:a:hooks", &a).to_string(),
            "deployments.apps \"web\" is forbidden: User \"system:serviceaccount:a:hooks\" cannot \
             patch resource \"deployments\" in API group \"apps\" in the namespace \"a\""
        );
        let list = Attributes {
            verb: "list".into(),
            resource: "secrets".into(),
            ..Attributes::default()
        };
        assert_eq!(
            forbidden("u", &list).to_string(),
            "secrets is forbidden: User \"u\" cannot list resource \"secrets\" in API group \"\" \
             at the cluster scope"
        );
    }

    #[test]
    fn discovery_paths_are_everyones() {
        for path in [
            "/api",
            "/api/v1",
            "/apis/apps/v1",
            "/openapi/v2",
            "/version",
            "/healthz",
        ] {
            assert!(is_discovery(path), "{path}");
        }
        for path in [
            "/",
            "/metrics",
            "/_informant/faults/pause",
            "/apiss",
            "/healthz/x",
        ] {
            assert!(!is_discovery(path), "{path}");
        }
    }
}
