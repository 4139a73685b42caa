//! What one tenant may see: namespaces (exact names and globs), resources, and whether
//! cluster-scoped objects are visible.
//!
//! A grant is checked in three places, always by the host and never on the plugin's word:
//! at load (a manifest's `[[watch]]` must lie inside it), at dispatch (an [`EventFilter`] keeps
//! other objects out of the plugin's queue) and at query time (the plugin's cache view).
//! Membership depends only on an object's namespace, which never changes, so an object is
//! either always or never visible to a tenant: no event sequence can half-reveal it.

use std::sync::Arc;

use crate::apimachinery::names;
use crate::informer::{CachedObject, EventFilter};

/// A namespace name or glob (`*` any run of characters, `?` one character), validated.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "String")]
pub struct NamespacePattern(String);

impl NamespacePattern {
    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `namespace` matches.
    pub fn matches(&self, namespace: &str) -> bool {
        glob_match(self.0.as_bytes(), namespace.as_bytes())
    }

    /// Whether some namespace matches both patterns (so two tenants would share it).
    pub fn overlaps(&self, other: &NamespacePattern) -> bool {
        let (a, b) = (self.0.as_bytes(), other.0.as_bytes());
        let mut memo = vec![None; (a.len() + 1) * (b.len() + 1)];
        intersects(a, b, 0, 0, &mut memo)
    }
}

/// A namespace glob or resource rule of `informant.toml` that cannot be one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadPattern {
    /// A namespace glob that no namespace name could match, or that is ambiguous.
    #[error("bad namespace glob `{text}`: {why}")]
    Namespace {
        /// The glob as written.
        text: String,
        /// What is wrong with it.
        why: String,
    },
    /// A resource rule not of the form `APIVERSION/KIND`, `APIVERSION/*` or `*`.
    #[error(
        "bad resource `{0}`: expected APIVERSION/KIND (e.g. `v1/ConfigMap`, `apps/v1/Deployment`), APIVERSION/* or *"
    )]
    Resource(String),
}

/// Why something is outside a tenant's grant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Outside {
    /// A resource the grant does not name.
    #[error("`{resource}` is not among the resources tenant `{tenant}` was granted")]
    Resource {
        /// The tenant.
        tenant: String,
        /// `APIVERSION/KIND`.
        resource: String,
    },
    /// A cluster-scoped resource, and the grant has no cluster-scoped objects.
    #[error(
        "`{resource}` is cluster-scoped and tenant `{tenant}` was not granted cluster-scoped objects"
    )]
    ClusterScopedResource {
        /// The tenant.
        tenant: String,
        /// `APIVERSION/KIND`.
        resource: String,
    },
    /// A namespace outside the grant's globs.
    #[error("namespace `{namespace}` is outside the namespaces tenant `{tenant}` was granted")]
    Namespace {
        /// The tenant.
        tenant: String,
        /// The namespace asked for.
        namespace: String,
    },
    /// Cluster-scoped objects, and the grant has none.
    #[error("tenant `{tenant}` was not granted cluster-scoped objects")]
    ClusterScoped {
        /// The tenant.
        tenant: String,
    },
}

impl TryFrom<String> for NamespacePattern {
    type Error = BadPattern;
    fn try_from(s: String) -> Result<Self, BadPattern> {
        let bad = |why: &str| {
            Err(BadPattern::Namespace {
                text: s.clone(),
                why: why.to_string(),
            })
        };
        if s.is_empty() {
            return bad("empty");
        }
        if s.len() > 63 {
            return bad("longer than a namespace name can be (63)");
        }
        if let Some(c) = s.chars().find(|c| {
            !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '*' | '?'))
        }) {
            return bad(&format!(
                "`{c}` is not allowed (lowercase letters, digits, `-`, and the wildcards `*` and `?`)"
            ));
        }
        if s.contains("**") {
            return bad("`**` means nothing more than `*` here; write `*`");
        }
        Ok(NamespacePattern(s))
    }
}

/// `*` matches any run (including none), `?` exactly one character.
fn glob_match(p: &[u8], s: &[u8]) -> bool {
    // Iterative with one backtrack point: linear enough for 63-character names.
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// Whether a string matched by both `a[i..]` and `b[j..]` exists (the wildcard alphabet is
/// never empty, so `*` and `?` can always produce a character the other side accepts).
fn intersects(a: &[u8], b: &[u8], i: usize, j: usize, memo: &mut [Option<bool>]) -> bool {
    let slot = i * (b.len() + 1) + j;
    if let Some(r) = memo[slot] {
        return r;
    }
    let skip_a = i < a.len() && a[i] == b'*';
    let skip_b = j < b.len() && b[j] == b'*';
    let r = (i == a.len() && j == b.len())
        || (skip_a && intersects(a, b, i + 1, j, memo))
        || (skip_b && intersects(a, b, i, j + 1, memo))
        || (i < a.len() && j < b.len() && {
            let (x, y) = (a[i], b[j]);
            let wild = |c: u8| c == b'*' || c == b'?';
            // One character consumed from both; a `*` may go on consuming.
            let ni = if x == b'*' { i } else { i + 1 };
            let nj = if y == b'*' { j } else { j + 1 };
            (wild(x) || wild(y) || x == y) && (ni, nj) != (i, j) && intersects(a, b, ni, nj, memo)
        });
    memo[slot] = Some(r);
    r
}

/// A resource a tenant may watch: `APIVERSION/KIND`, `APIVERSION/*`, or `*` for any.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "String")]
pub struct ResourceRule {
    text: String,
    /// (group, version), or `None` for any.
    group_version: Option<(String, String)>,
    /// The kind, or `None` for any.
    kind: Option<String>,
}

impl ResourceRule {
    /// The rule as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the rule covers the resolved resource `group/version` `kind`.
    pub fn covers(&self, group: &str, version: &str, kind: &str) -> bool {
        self.group_version
            .as_ref()
            .is_none_or(|(g, v)| g == group && v == version)
            && self.kind.as_ref().is_none_or(|k| k == kind)
    }
}

impl TryFrom<String> for ResourceRule {
    type Error = BadPattern;
    fn try_from(s: String) -> Result<Self, BadPattern> {
        if s == "*" {
            return Ok(ResourceRule {
                text: s,
                group_version: None,
                kind: None,
            });
        }
        let bad = || BadPattern::Resource(s.clone());
        let (api_version, kind) = s.rsplit_once('/').ok_or_else(bad)?;
        let part = |p: &str| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
        };
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let kind_ok = kind == "*" || (part(kind) && !kind.contains('.'));
        if !(part(version) && (group.is_empty() || part(group)) && kind_ok) || version.contains('/')
        {
            return Err(bad());
        }
        Ok(ResourceRule {
            group_version: Some((group.to_string(), version.to_string())),
            kind: (kind != "*").then(|| kind.to_string()),
            text: s,
        })
    }
}

/// What one tenant may see; the operator's grant sees everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    tenant: String,
    /// `None`: every namespace.
    namespaces: Option<Vec<NamespacePattern>>,
    /// `None`: every resource.
    resources: Option<Vec<ResourceRule>>,
    cluster_scoped: bool,
}

impl Grant {
    /// Everything: the operator's top-level plugins.
    pub fn full() -> Self {
        Grant {
            tenant: String::new(),
            namespaces: None,
            resources: None,
            cluster_scoped: true,
        }
    }

    /// A tenant's grant.
    pub fn new(
        tenant: &str,
        namespaces: Vec<NamespacePattern>,
        resources: Vec<ResourceRule>,
        cluster_scoped: bool,
    ) -> Self {
        Grant {
            tenant: tenant.to_string(),
            namespaces: Some(namespaces),
            resources: Some(resources),
            cluster_scoped,
        }
    }

    /// The tenant (empty for the operator).
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// Whether this is the operator's unrestricted grant.
    pub fn is_full(&self) -> bool {
        self.namespaces.is_none() && self.resources.is_none() && self.cluster_scoped
    }

    /// The namespace patterns (`None`: all).
    pub fn namespaces(&self) -> Option<&[NamespacePattern]> {
        self.namespaces.as_deref()
    }

    /// The exact namespaces this grant is limited to, when it is limited to exact names only
    /// (no globs, no cluster-scoped objects): a broad query can then ask just those namespaces
    /// instead of filtering everything.
    pub fn exact_namespaces(&self) -> Option<Vec<&str>> {
        if self.cluster_scoped {
            return None;
        }
        self.namespaces
            .as_ref()?
            .iter()
            .map(|p| (!p.0.contains(['*', '?'])).then_some(p.as_str()))
            .collect()
    }

    /// Whether the resource may be watched at all.
    pub fn allows_resource(&self, group: &str, version: &str, kind: &str) -> bool {
        self.resources
            .as_ref()
            .is_none_or(|rs| rs.iter().any(|r| r.covers(group, version, kind)))
    }

    /// Whether objects in `namespace` (`None`: cluster-scoped objects) are visible.
    pub fn allows_namespace(&self, namespace: Option<&str>) -> bool {
        match (namespace, &self.namespaces) {
            (None, _) => self.cluster_scoped,
            (Some(_), None) => true,
            // A glob's `*` would match `/` or `..`: only namespace names can be inside.
            (Some(ns), Some(patterns)) => {
                names::check_namespace(ns).is_ok() && patterns.iter().any(|p| p.matches(ns))
            }
        }
    }

    /// Whether `object` is visible (its resource having been checked at load).
    pub fn allows(&self, object: &CachedObject) -> bool {
        self.allows_namespace(object.namespace())
    }

    /// The dispatch filter for this grant; `None` when it sees everything.
    pub fn event_filter(self: &Arc<Self>) -> Option<EventFilter> {
        if self.is_full() {
            return None;
        }
        let grant = self.clone();
        Some(EventFilter::new(move |o| grant.allows(o)))
    }

    /// Why a watch of `group/version` `kind` (in `namespace`, if the manifest names one) is
    /// outside this grant, or `Ok` when it is inside. `namespaced` is the resource's scope as
    /// discovery reports it (`None`: unknown, not checked).
    pub fn check_watch(
        &self,
        (group, version, kind): (&str, &str, &str),
        namespaced: Option<bool>,
        namespace: Option<&str>,
    ) -> Result<(), Outside> {
        let api_version = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        let (tenant, resource) = (self.tenant.clone(), format!("{api_version}/{kind}"));
        if !self.allows_resource(group, version, kind) {
            return Err(Outside::Resource { tenant, resource });
        }
        if namespaced == Some(false) && !self.cluster_scoped {
            return Err(Outside::ClusterScopedResource { tenant, resource });
        }
        match namespace {
            Some(ns) => self.check_namespace(Some(ns)),
            None => Ok(()),
        }
    }

    /// Why a query naming `namespace` is refused, if it is.
    pub fn check_namespace(&self, namespace: Option<&str>) -> Result<(), Outside> {
        if self.allows_namespace(namespace) {
            return Ok(());
        }
        let tenant = self.tenant.clone();
        Err(match namespace {
            Some(ns) => Outside::Namespace {
                tenant,
                namespace: ns.to_string(),
            },
            None => Outside::ClusterScoped { tenant },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pat(s: &str) -> NamespacePattern {
        NamespacePattern::try_from(s.to_string()).unwrap()
    }

    #[test]
    fn globs_match_like_shell_patterns() {
        for (p, s, want) in [
            ("team-a", "team-a", true),
            ("team-a", "team-ab", false),
            ("team-*", "team-", true),
            ("team-*", "team-a-prod", true),
            ("*-prod", "a-prod", true),
            ("*-prod", "a-prod-x", false),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("*a*b*", "xxaxxbxx", true),
            ("*a*b*", "xxbxxaxx", false),
            ("*", "anything", true),
        ] {
            assert_eq!(pat(p).matches(s), want, "{p} ~ {s}");
        }
    }

    #[test]
    fn overlap_is_exactly_a_common_match() {
        for (a, b, want) in [
            ("team-a", "team-a", true),
            ("team-a", "team-b", false),
            ("team-*", "team-a", true),
            ("team-*", "tenant-*", false),
            ("*-prod", "team-*", true), // team-prod
            ("a-*", "*-b", true),       // a-b
            ("a?", "ab*", true),
            ("a?", "abc*", false),
            ("a*z", "b*", false),
            ("*", "x", true),
        ] {
            assert_eq!(pat(a).overlaps(&pat(b)), want, "{a} / {b}");
            assert_eq!(pat(b).overlaps(&pat(a)), want, "{b} / {a}");
        }
    }

    #[test]
    fn bad_patterns_and_rules_say_why() {
        for (s, needle) in [
            ("", "empty"),
            ("Team", "`T` is not allowed"),
            ("team_[a]", "`_` is not allowed"),
            ("a**", "`**`"),
        ] {
            let e = NamespacePattern::try_from(s.to_string())
                .unwrap_err()
                .to_string();
            assert!(e.contains(needle), "{s}: {e}");
        }
        for s in ["ConfigMap", "v1/", "/Pod", "a/b/c/Pod", "v1/Config.Map"] {
            assert!(ResourceRule::try_from(s.to_string()).is_err(), "{s}");
        }
        let r = ResourceRule::try_from("apps/v1/*".to_string()).unwrap();
        assert!(r.covers("apps", "v1", "Deployment"));
        assert!(!r.covers("", "v1", "Pod"));
        let r = ResourceRule::try_from("v1/ConfigMap".to_string()).unwrap();
        assert!(r.covers("", "v1", "ConfigMap") && !r.covers("", "v1", "Secret"));
    }

    #[test]
    fn a_grant_bounds_watches_and_queries() {
        let g = Grant::new(
            "a",
            vec![pat("team-a"), pat("team-a-*")],
            vec![ResourceRule::try_from("v1/ConfigMap".to_string()).unwrap()],
            false,
        );
        assert!(
            g.check_watch(("", "v1", "ConfigMap"), Some(true), None)
                .is_ok()
        );
        assert!(
            g.check_watch(("", "v1", "ConfigMap"), Some(true), Some("team-a-x"))
                .is_ok()
        );
        let e = g
            .check_watch(("", "v1", "ConfigMap"), Some(true), Some("team-b"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("namespace `team-b`") && e.contains("tenant `a`"),
            "{e}"
        );
        let e = g
            .check_watch(("", "v1", "Secret"), Some(true), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`v1/Secret` is not among"), "{e}");
        assert!(g.check_namespace(None).is_err());
        assert_eq!(g.exact_namespaces(), None, "a glob needs the filter");
        let exact = Grant::new("b", vec![pat("x"), pat("y")], vec![], false);
        assert_eq!(exact.exact_namespaces(), Some(vec!["x", "y"]));
        assert!(g.check_namespace(Some("team-a")).is_ok());
        assert!(g.check_namespace(Some("team-a-x/../team-b")).is_err());
        let full = Grant::full();
        assert!(full.is_full() && full.check_namespace(None).is_ok());
    }
}
