//! Wildcard watches: `kind = "*"` covers every kind discovery finds under the watch's
//! `api-version` pattern, minus its `exclude` entries.
//!
//! ```toml
//! [[watch]]
//! api-version = "*"                 # every group; or "example.com/*" (one group), or
//!                                   # "apps/v1" / "v1" (one group version)
//! kind = "*"
//! exclude = ["v1/Event", "coordination.k8s.io/v1/Lease", "events.k8s.io/Event"]
//! ```
//!
//! With `*` or `GROUP/*` each group is watched at its preferred version (as `kubectl get`
//! does), so an object served under several versions is seen once. An exclude entry is
//! `GROUP/VERSION/Kind`, `v1/Kind` for the core group, or `GROUP/Kind` for every version of a
//! group's kind; two segments whose first looks like a version (`v1`, `v2beta1`) are core.

use std::fmt;

/// Why a watch's `kind`, `api-version` and `exclude` do not make sense together; each names the
/// field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WildcardError {
    /// A kind with a `*` that is not just `*`.
    #[error(
        "field `watch[{watch}].kind`: `{kind}`: a kind is either `*` (every kind) or one kind; partial wildcards are not supported"
    )]
    PartialKind {
        /// The watch's position.
        watch: usize,
        /// The kind as written.
        kind: String,
    },
    /// A wildcard api-version with one kind.
    #[error(
        "field `watch[{watch}].kind`: api-version `{api_version}` is a wildcard, so kind must be `*`; to watch one kind `{kind}`, name its GROUP/VERSION"
    )]
    OneKindOfWildcardVersion {
        /// The watch's position.
        watch: usize,
        /// The api-version as written.
        api_version: String,
        /// The kind as written.
        kind: String,
    },
    /// `exclude` on a watch of one kind.
    #[error("field `watch[{watch}].exclude`: only a wildcard watch (kind = \"*\") excludes kinds")]
    ExcludeWithoutWildcard {
        /// The watch's position.
        watch: usize,
    },
    /// An entry listed twice.
    #[error("field `watch[{watch}].exclude[{at}]`: `{entry}` is listed twice")]
    ExcludedTwice {
        /// The watch's position.
        watch: usize,
        /// The entry's position.
        at: usize,
        /// The entry as written.
        entry: String,
    },
    /// An entry the watch does not cover anyway.
    #[error(
        "field `watch[{watch}].exclude[{at}]`: `{entry}` is not covered by api-version `{api_version}`, so excluding it means nothing"
    )]
    ExcludeNotCovered {
        /// The watch's position.
        watch: usize,
        /// The entry's position.
        at: usize,
        /// The entry as written.
        entry: String,
        /// The watch's api-version.
        api_version: String,
    },
}

/// Which group versions a wildcard watch covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindPattern {
    /// The group (empty for core), or `None` for every group.
    pub group: Option<String>,
    /// The version, or `None` for each group's preferred version.
    pub version: Option<String>,
}

impl KindPattern {
    /// Whether resources of `group`/`version` are covered; `preferred` says whether `version`
    /// is its group's preferred version.
    pub fn covers(&self, group: &str, version: &str, preferred: bool) -> bool {
        self.group.as_deref().is_none_or(|g| g == group)
            && match &self.version {
                Some(v) => v == version,
                None => preferred,
            }
    }
}

impl fmt::Display for KindPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.group, &self.version) {
            (None, _) => f.write_str("*/*"),
            (Some(g), None) => write!(f, "{g}/*/*"),
            (Some(g), Some(v)) if g.is_empty() => write!(f, "{v}/*"),
            (Some(g), Some(v)) => write!(f, "{g}/{v}/*"),
        }
    }
}

/// One `exclude` entry of a wildcard watch, validated while deserializing.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "String")]
pub struct Exclude {
    text: String,
    pub(crate) group: String,
    /// `None`: every version of the group's kind.
    pub(crate) version: Option<String>,
    kind: String,
}

impl Exclude {
    /// The entry as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the entry excludes `group/version` `kind`.
    pub fn matches(&self, group: &str, version: &str, kind: &str) -> bool {
        self.group == group
            && self.kind == kind
            && self.version.as_deref().is_none_or(|v| v == version)
    }
}

/// Whether `s` reads as a Kubernetes API version (`v1`, `v1beta2`, `v2alpha1`).
pub fn looks_like_version(s: &str) -> bool {
    let Some(rest) = s.strip_prefix('v') else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || rest.starts_with('0') {
        return false;
    }
    let tail = &rest[digits..];
    tail.is_empty()
        || ["alpha", "beta"].iter().any(|stage| {
            tail.strip_prefix(stage)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
}

/// A group name: DNS-subdomain-like (lowercase alphanumerics, `-` and `.`).
fn valid_group(g: &str) -> bool {
    !g.is_empty()
        && g.len() <= 253
        && g.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// A kind: starts with a letter, then alphanumerics (`ConfigMap`, `CronJob`).
pub fn valid_kind(k: &str) -> bool {
    k.as_bytes().first().is_some_and(u8::is_ascii_alphabetic)
        && k.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Why an `exclude` entry is refused: the entry, what is wrong with it, and the forms it may take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid exclude entry `{text}`: {flaw} (expected GROUP/VERSION/Kind, v1/Kind for core, or GROUP/Kind for every version)"
)]
pub struct ExcludeError {
    /// The entry as written.
    pub text: String,
    /// What is wrong with it.
    pub flaw: ExcludeFlaw,
}

/// What is wrong with an `exclude` entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExcludeFlaw {
    /// The first of three parts is not a group.
    #[error("`{0}` is not an API group")]
    NotAGroup(String),
    /// The middle of three parts is not a version.
    #[error("`{0}` is not an API version")]
    NotAVersion(String),
    /// The first of two parts is neither.
    #[error("`{0}` is neither an API group nor a version")]
    NeitherGroupNorVersion(String),
    /// Not two or three parts.
    #[error("wrong number of `/`-separated parts")]
    PartCount,
    /// A `*` in the kind.
    #[error("wildcards are not allowed in an exclude entry")]
    Wildcard,
    /// The kind is not a kind.
    #[error("`{0}` is not a kind")]
    NotAKind(String),
}

impl TryFrom<String> for Exclude {
    type Error = ExcludeError;
    fn try_from(text: String) -> Result<Self, ExcludeError> {
        let bad = |flaw: ExcludeFlaw| ExcludeError {
            text: text.clone(),
            flaw,
        };
        let parts: Vec<&str> = text.split('/').collect();
        let (group, version, kind) = match parts.as_slice() {
            [g, v, k] => {
                if !valid_group(g) {
                    return Err(bad(ExcludeFlaw::NotAGroup(g.to_string())));
                }
                if !looks_like_version(v) {
                    return Err(bad(ExcludeFlaw::NotAVersion(v.to_string())));
                }
                (g.to_string(), Some(v.to_string()), *k)
            }
            [v, k] if looks_like_version(v) => (String::new(), Some(v.to_string()), *k),
            [g, k] => {
                if !valid_group(g) {
                    return Err(bad(ExcludeFlaw::NeitherGroupNorVersion(g.to_string())));
                }
                (g.to_string(), None, *k)
            }
            _ => return Err(bad(ExcludeFlaw::PartCount)),
        };
        if kind.contains('*') {
            return Err(bad(ExcludeFlaw::Wildcard));
        }
        if !valid_kind(kind) {
            return Err(bad(ExcludeFlaw::NotAKind(kind.to_string())));
        }
        Ok(Exclude {
            group,
            version,
            kind: kind.to_string(),
            text,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(s: &str) -> Result<Exclude, String> {
        Exclude::try_from(s.to_string()).map_err(|e| e.to_string())
    }

    #[test]
    fn versions_are_told_from_groups() {
        for v in ["v1", "v2", "v1beta1", "v2alpha3", "v10"] {
            assert!(looks_like_version(v), "{v}");
        }
        for g in [
            "apps",
            "v",
            "v0",
            "v1gamma1",
            "v1beta",
            "vx",
            "example.com",
            "V1",
        ] {
            assert!(!looks_like_version(g), "{g}");
        }
    }

    #[test]
    fn exclude_forms_match_what_they_say() {
        let core = ex("v1/Event").unwrap();
        assert!(core.matches("", "v1", "Event"));
        assert!(!core.matches("events.k8s.io", "v1", "Event"));
        let exact = ex("coordination.k8s.io/v1/Lease").unwrap();
        assert!(exact.matches("coordination.k8s.io", "v1", "Lease"));
        assert!(!exact.matches("coordination.k8s.io", "v1beta1", "Lease"));
        let any_version = ex("events.k8s.io/Event").unwrap();
        assert!(any_version.matches("events.k8s.io", "v1", "Event"));
        assert!(any_version.matches("events.k8s.io", "v1beta1", "Event"));
        assert!(!any_version.matches("", "v1", "Event"));
        // A no-dot group such as `apps` is a group, not a version.
        assert!(
            ex("apps/Deployment")
                .unwrap()
                .matches("apps", "v1", "Deployment")
        );
    }

    #[test]
    fn bad_excludes_say_why() {
        for (text, needle) in [
            ("Event", "wrong number"),
            ("a/b/c/d", "wrong number"),
            ("v1/*", "wildcards are not allowed"),
            ("*/v1/Event", "`*` is not an API group"),
            ("apps/v1/", "`` is not a kind"),
            ("Apps/Deployment", "neither an API group nor a version"),
            ("apps/one/Deployment", "`one` is not an API version"),
            ("v1/config-map", "`config-map` is not a kind"),
            ("/v1/Pod", "`` is not an API group"),
        ] {
            let err = ex(text).unwrap_err();
            assert!(err.contains(needle), "`{text}` -> `{err}` lacks `{needle}`");
            assert!(err.contains(&format!("`{text}`")), "{err}");
        }
    }

    #[test]
    fn patterns_cover_preferred_or_named_versions() {
        let all = KindPattern {
            group: None,
            version: None,
        };
        assert!(all.covers("apps", "v1", true));
        assert!(!all.covers("apps", "v1beta1", false));
        let group = KindPattern {
            group: Some("example.com".into()),
            version: None,
        };
        assert!(group.covers("example.com", "v2", true));
        assert!(!group.covers("other.com", "v2", true));
        let gv = KindPattern {
            group: Some("example.com".into()),
            version: Some("v1".into()),
        };
        assert!(gv.covers("example.com", "v1", false));
        assert!(!gv.covers("example.com", "v2", true));
        assert_eq!(gv.to_string(), "example.com/v1/*");
        assert_eq!(all.to_string(), "*/*");
    }
}
