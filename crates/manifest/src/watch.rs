//! One `[[watch]]` table: [`Watch`], what it covers, and the checks of a wildcard watch.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::text::{namespace, namespace_list};
use crate::{
    ApiVersion, Exclude, FieldPath, FieldPathText, JqFilterText, KindPattern, SelectorText,
    wildcard,
};

/// One resource a plugin watches.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Watch {
    /// `GROUP/VERSION`, or `VERSION` for core.
    pub api_version: ApiVersion,
    /// The kind, e.g. `Deployment`.
    pub kind: String,
    /// Only this namespace; a DNS-1123 label, as the API server requires.
    #[serde(default, deserialize_with = "namespace")]
    pub namespace: Option<String>,
    /// Only these namespaces (one informer each, shared like any other); not with `namespace`.
    #[serde(default, deserialize_with = "namespace_list")]
    pub namespaces: Vec<String>,
    /// Only objects matching this label selector.
    pub label_selector: Option<SelectorText>,
    /// Only objects in namespaces whose labels match this selector, followed as namespaces'
    /// labels change; not with `namespace` or `namespaces`, nor on a wildcard watch.
    pub namespace_selector: Option<SelectorText>,
    /// Extra field indexes, name -> JSON field path.
    #[serde(default)]
    pub indexes: BTreeMap<String, FieldPathText>,
    /// Deliver an update only when this jq program's output changed (operator plugins only).
    pub jq_filter: Option<JqFilterText>,
    /// Deliver an update only when the object changed outside these field paths.
    #[serde(default)]
    pub ignore: Vec<FieldPathText>,
    /// Kinds a wildcard watch (`kind = "*"`) leaves out (see [`wildcard`]).
    #[serde(default)]
    pub exclude: Vec<Exclude>,
}

impl Watch {
    /// The label selector's text, if any.
    pub fn label_selector(&self) -> Option<&str> {
        self.label_selector.as_ref().map(|s| s.0.as_str())
    }

    /// The namespace selector's text, if any.
    pub fn namespace_selector(&self) -> Option<&str> {
        self.namespace_selector.as_ref().map(|s| s.0.as_str())
    }

    /// The namespaces this watch covers, one informer each: `[None]` for every namespace (a
    /// watch with a namespace selector, too: the selection is made on the host).
    pub fn scopes(&self) -> Vec<Option<&str>> {
        match (&self.namespace, self.namespaces.as_slice()) {
            (Some(ns), _) => vec![Some(ns.as_str())],
            (None, []) => vec![None],
            (None, list) => list.iter().map(|ns| Some(ns.as_str())).collect(),
        }
    }

    /// Whether updates are filtered on the host (`jq-filter` or `ignore`).
    pub fn filters_changes(&self) -> bool {
        self.jq_filter.is_some() || !self.ignore.is_empty()
    }

    /// Whether this watch covers every kind discovery finds (`kind = "*"`).
    pub fn is_wildcard(&self) -> bool {
        self.kind == "*"
    }

    /// For a wildcard watch, the group versions it covers; `None` for a watch of one kind.
    pub fn kind_pattern(&self) -> Option<KindPattern> {
        if !self.is_wildcard() {
            return None;
        }
        let s = self.api_version.as_str();
        Some(match s.split_once('/') {
            _ if s == "*" => KindPattern {
                group: None,
                version: None,
            },
            Some((g, "*")) => KindPattern {
                group: Some(g.into()),
                version: None,
            },
            Some((g, v)) => KindPattern {
                group: Some(g.into()),
                version: Some(v.into()),
            },
            None => KindPattern {
                group: Some(String::new()),
                version: Some(s.into()),
            },
        })
    }

    /// Whether a wildcard watch covers `group/version` `kind` (`preferred`: whether `version` is
    /// the group's preferred one) and does not exclude it; `false` for a watch of one kind.
    pub fn covers(&self, group: &str, version: &str, kind: &str, preferred: bool) -> bool {
        self.kind_pattern()
            .is_some_and(|p| p.covers(group, version, preferred))
            && !self.exclude.iter().any(|e| e.matches(group, version, kind))
    }

    /// The declared field indexes: name and parsed path.
    pub fn field_indexes(&self) -> impl Iterator<Item = (&str, &FieldPath)> {
        self.indexes.iter().map(|(n, p)| (n.as_str(), &p.0))
    }
}

/// A wildcard watch's `kind`, `api-version` and `exclude` must make sense together.
pub(crate) fn check_wildcard(i: usize, w: &Watch) -> Result<(), wildcard::WildcardError> {
    use wildcard::WildcardError as E;
    if w.kind != "*" && w.kind.contains('*') {
        return Err(E::PartialKind {
            watch: i,
            kind: w.kind.clone(),
        });
    }
    if w.api_version.is_wildcard() && !w.is_wildcard() {
        return Err(E::OneKindOfWildcardVersion {
            watch: i,
            api_version: w.api_version.as_str().to_string(),
            kind: w.kind.clone(),
        });
    }
    if !w.is_wildcard() {
        if !w.exclude.is_empty() {
            return Err(E::ExcludeWithoutWildcard { watch: i });
        }
        return Ok(());
    }
    let pattern = w.kind_pattern().expect("a wildcard watch");
    for (at, e) in w.exclude.iter().enumerate() {
        if w.exclude[..at].contains(e) {
            return Err(E::ExcludedTwice {
                watch: i,
                at,
                entry: e.as_str().to_string(),
            });
        }
        let (group, version) = (&e.group, e.version.as_deref());
        let outside = pattern.group.as_ref().is_some_and(|g| g != group)
            || matches!((&pattern.version, version), (Some(p), Some(v)) if p != v);
        if outside {
            return Err(E::ExcludeNotCovered {
                watch: i,
                at,
                entry: e.as_str().to_string(),
                api_version: w.api_version.as_str().to_string(),
            });
        }
    }
    Ok(())
}
