//! What a plugin may write (`[[write]]`), and the same shape as a tenant's ceiling in
//! `informant.toml`.
//!
//! ```toml
//! [[write]]
//! api-version = "apps/v1"
//! kind = "Deployment"
//! verbs = ["apply", "patch"]      # create, apply, patch, delete, update-status
//! namespace = "team-a"            # optional; or namespaces = [..]; absent: every namespace
//!                                 # the tenant was granted
//! ```
//!
//! In a tenant's ceiling, a cluster-scoped kind is covered only by a table that names it and
//! says `cluster-scoped = true`; `kind = "*"` never covers one. For a `Namespace`, `namespaces`
//! (in either table) lists the Namespace objects that may be written, by name.
//!
//! Recording an Event is a `create` of `events.k8s.io/v1` `Event`, declared like any other
//! write, so what a plugin can do is what the cluster's RBAC would have to allow.

use serde::Deserialize;

use crate::ApiVersion;

/// A write operation, as the manifest and the tenant grant name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verb {
    /// POST a new object.
    Create,
    /// Server-side apply.
    Apply,
    /// Merge, JSON or strategic merge patch.
    Patch,
    /// DELETE.
    Delete,
    /// PUT of the `status` subresource.
    UpdateStatus,
}

impl Verb {
    /// Every verb, in declaration order.
    pub const ALL: [Verb; 5] = [
        Verb::Create,
        Verb::Apply,
        Verb::Patch,
        Verb::Delete,
        Verb::UpdateStatus,
    ];

    /// The name used in manifests, metrics and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Create => "create",
            Verb::Apply => "apply",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::UpdateStatus => "update-status",
        }
    }
}

impl std::fmt::Display for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One `[[write]]` table: a kind, the verbs allowed on it, and where.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Write {
    /// `GROUP/VERSION`, or `VERSION` for core.
    pub api_version: ApiVersion,
    /// The kind; `*` (any kind of the api-version) only in a tenant's ceiling.
    pub kind: String,
    /// What may be done; at least one, none twice.
    #[serde(deserialize_with = "verbs")]
    pub verbs: Vec<Verb>,
    /// Only this namespace.
    #[serde(default, deserialize_with = "crate::namespace")]
    pub namespace: Option<String>,
    /// Only these namespaces; not with `namespace`.
    #[serde(default, deserialize_with = "crate::namespace_list")]
    pub namespaces: Vec<String>,
    /// In a tenant's ceiling: the kind named is cluster-scoped and its objects may be written.
    #[serde(default)]
    pub cluster_scoped: bool,
}

fn verbs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Verb>, D::Error> {
    let list = Vec::<Verb>::deserialize(d)?;
    if list.is_empty() {
        return Err(serde::de::Error::custom(
            "must name at least one verb (create, apply, patch, delete, update-status)",
        ));
    }
    for (i, v) in list.iter().enumerate() {
        if list[..i].contains(v) {
            return Err(serde::de::Error::custom(format!(
                "verb `{v}` is listed twice"
            )));
        }
    }
    Ok(list)
}

/// What [`Write::check`] refuses in a `[[write]]` table; [`WriteTableError::field`] names the
/// field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteTableError {
    /// `kind = "*"` in a plugin's table.
    #[error("a plugin names the kinds it writes; `*` is only for a tenant's ceiling")]
    WildcardKind,
    /// Not a kind.
    #[error("invalid kind `{0}` (expected a Kubernetes kind such as `Deployment`)")]
    InvalidKind(String),
    /// Both `namespace` and `namespaces`.
    #[error("give either `namespace` or `namespaces`, not both")]
    BothNamespaces,
    /// `cluster-scoped` in a plugin's table.
    #[error(
        "only a tenant's write grant says this; a plugin's table covers a cluster-scoped kind when it names no namespaces"
    )]
    ClusterScopedInPlugin,
    /// `cluster-scoped` with `kind = "*"`.
    #[error("name the kind: `kind = \"*\"` never covers cluster-scoped kinds")]
    ClusterScopedWildcard,
    /// Namespaces on a cluster-scoped kind other than `Namespace`.
    #[error(
        "a cluster-scoped kind's objects have no namespace (only for `Namespace` do namespaces list the objects, by name)"
    )]
    ClusterScopedNamespaces,
}

impl WriteTableError {
    /// The field at fault, as the table spells it.
    pub fn field(&self) -> &'static str {
        match self {
            WriteTableError::WildcardKind | WriteTableError::InvalidKind(_) => "kind",
            WriteTableError::BothNamespaces | WriteTableError::ClusterScopedNamespaces => {
                "namespaces"
            }
            WriteTableError::ClusterScopedInPlugin | WriteTableError::ClusterScopedWildcard => {
                "cluster-scoped"
            }
        }
    }
}

impl Write {
    /// The namespaces named, `None` when the table names none (every namespace granted).
    pub fn namespace_list(&self) -> Option<Vec<&str>> {
        match (&self.namespace, self.namespaces.as_slice()) {
            (Some(ns), _) => Some(vec![ns.as_str()]),
            (None, []) => None,
            (None, list) => Some(list.iter().map(String::as_str).collect()),
        }
    }

    /// Whether this table allows `verb` on `group/version` `kind` in `namespace` (`None`: a
    /// cluster-scoped object, which only a table without namespaces covers).
    pub fn allows(
        &self,
        verb: Verb,
        (group, version, kind): (&str, &str, &str),
        namespace: Option<&str>,
    ) -> bool {
        self.allows_kind(verb, (group, version, kind))
            && match (self.namespace_list(), namespace) {
                (None, _) => true,
                (Some(list), Some(ns)) => list.contains(&ns),
                (Some(_), None) => false,
            }
    }

    /// Whether this table allows `verb` on `group/version` `kind` somewhere.
    pub fn allows_kind(&self, verb: Verb, (group, version, kind): (&str, &str, &str)) -> bool {
        self.api_version.split() == (group, version)
            && (self.kind == "*" || self.kind == kind)
            && self.verbs.contains(&verb)
    }

    /// Checks what serde cannot: a kind, and not both `namespace` and `namespaces`.
    /// `wildcard_kind`: whether `kind = "*"` is allowed (a tenant's ceiling). The error names
    /// its field ([`WriteTableError::field`]).
    pub fn check(&self, wildcard_kind: bool) -> Result<(), WriteTableError> {
        let kind_ok = |k: &str| {
            k.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && k.chars().all(|c| c.is_ascii_alphanumeric())
        };
        if self.kind == "*" {
            if !wildcard_kind {
                return Err(WriteTableError::WildcardKind);
            }
        } else if !kind_ok(&self.kind) {
            return Err(WriteTableError::InvalidKind(self.kind.clone()));
        }
        if self.namespace.is_some() && !self.namespaces.is_empty() {
            return Err(WriteTableError::BothNamespaces);
        }
        if self.cluster_scoped {
            if !wildcard_kind {
                return Err(WriteTableError::ClusterScopedInPlugin);
            }
            if self.kind == "*" {
                return Err(WriteTableError::ClusterScopedWildcard);
            }
            let namespace = self.api_version.split() == ("", "v1") && self.kind == "Namespace";
            if !namespace && self.namespace_list().is_some() {
                return Err(WriteTableError::ClusterScopedNamespaces);
            }
        }
        Ok(())
    }

    /// Whether this ceiling table lets a tenant write objects of cluster-scoped `kind`: it names
    /// the kind (not `*`) and says `cluster-scoped = true`.
    pub fn covers_cluster_scoped(&self, (group, version, kind): (&str, &str, &str)) -> bool {
        self.cluster_scoped && self.kind == kind && self.api_version.split() == (group, version)
    }

    /// `APIVERSION/KIND verbs [in namespaces]`, for messages.
    pub fn describe(&self) -> String {
        let verbs: Vec<&str> = self.verbs.iter().map(|v| v.as_str()).collect();
        let mut s = format!(
            "{}/{} ({})",
            self.api_version.as_str(),
            self.kind,
            verbs.join(", ")
        );
        if let Some(list) = self.namespace_list() {
            s.push_str(&format!(" in {}", list.join(", ")));
        }
        if self.cluster_scoped {
            s.push_str(" cluster-scoped");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> Result<Write, String> {
        toml::from_str::<Write>(text).map_err(|e| e.to_string())
    }

    #[test]
    fn verbs_are_the_five_known_ones_each_once() {
        let w = write(
            "api-version = \"v1\"\nkind = \"ConfigMap\"\nverbs = [\"apply\", \"update-status\"]",
        )
        .unwrap();
        assert_eq!(w.verbs, [Verb::Apply, Verb::UpdateStatus]);
        let unknown = write("api-version = \"v1\"\nkind = \"ConfigMap\"\nverbs = [\"escalate\"]")
            .unwrap_err();
        assert!(unknown.contains("unknown variant `escalate`"), "{unknown}");
        assert!(
            unknown.contains("create"),
            "lists the known verbs: {unknown}"
        );
        let twice =
            write("api-version = \"v1\"\nkind = \"ConfigMap\"\nverbs = [\"patch\", \"patch\"]")
                .unwrap_err();
        assert!(twice.contains("`patch` is listed twice"), "{twice}");
        let none = write("api-version = \"v1\"\nkind = \"ConfigMap\"\nverbs = []").unwrap_err();
        assert!(none.contains("at least one verb"), "{none}");
        // Case matters, as in RBAC.
        assert!(write("api-version = \"v1\"\nkind = \"ConfigMap\"\nverbs = [\"Patch\"]").is_err());
    }

    #[test]
    fn kinds_are_checked_and_star_is_for_ceilings_only() {
        let w = |kind: &str| {
            write(&format!(
                "api-version = \"v1\"\nkind = \"{kind}\"\nverbs = [\"patch\"]"
            ))
            .unwrap()
        };
        assert!(w("ConfigMap").check(false).is_ok());
        assert_eq!(w("*").check(false).unwrap_err().field(), "kind");
        assert!(w("*").check(true).is_ok());
        let cluster = |kind: &str, extra: &str| {
            write(&format!(
                "api-version = \"v1\"\nkind = \"{kind}\"\nverbs = [\"create\"]\ncluster-scoped = true\n{extra}"
            ))
            .unwrap()
        };
        assert!(
            cluster("Namespace", "namespaces = [\"a\"]")
                .check(true)
                .is_ok()
        );
        assert!(cluster("Node", "").check(true).is_ok());
        for (table, wildcard, field) in [
            (cluster("Namespace", ""), false, "cluster-scoped"),
            (cluster("*", ""), true, "cluster-scoped"),
            (cluster("Node", "namespace = \"a\""), true, "namespaces"),
        ] {
            assert_eq!(
                table.check(wildcard).unwrap_err().field(),
                field,
                "{table:?}"
            );
        }
        assert!(cluster("Namespace", "").covers_cluster_scoped(("", "v1", "Namespace")));
        assert!(!cluster("Namespace", "").covers_cluster_scoped(("", "v1", "Node")));
        assert!(!w("*").covers_cluster_scoped(("", "v1", "Namespace")));
        for bad in ["", "config maps", "v1/ConfigMap", "../Secret", "9Lives"] {
            assert_eq!(w(bad).check(true).unwrap_err().field(), "kind", "{bad:?}");
        }
    }

    #[test]
    fn allows_matches_kind_verb_and_namespace() {
        let w = write(
            "api-version = \"apps/v1\"\nkind = \"Deployment\"\nverbs = [\"apply\"]\nnamespaces = [\"a\", \"b\"]",
        )
        .unwrap();
        let d = ("apps", "v1", "Deployment");
        assert!(w.allows(Verb::Apply, d, Some("a")));
        assert!(w.allows(Verb::Apply, d, Some("b")));
        assert!(!w.allows(Verb::Apply, d, Some("c")));
        assert!(
            !w.allows(Verb::Apply, d, None),
            "cluster-scoped needs no namespaces"
        );
        assert!(!w.allows(Verb::Delete, d, Some("a")));
        assert!(!w.allows(Verb::Apply, ("apps", "v1beta1", "Deployment"), Some("a")));
        assert!(!w.allows(Verb::Apply, ("", "v1", "Deployment"), Some("a")));
        assert!(!w.allows(Verb::Apply, ("apps", "v1", "deployment"), Some("a")));
        let any = write("api-version = \"v1\"\nkind = \"*\"\nverbs = [\"create\"]").unwrap();
        assert!(any.allows(Verb::Create, ("", "v1", "Namespace"), None));
        assert!(!any.allows(Verb::Create, ("apps", "v1", "Deployment"), Some("a")));
    }
}
