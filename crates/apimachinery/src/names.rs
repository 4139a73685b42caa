//! Object names and namespaces, checked with the API server's rules (apimachinery's
//! `validation.IsDNS1123Label` for namespaces, `path.ValidatePathSegmentName` for names).
//!
//! An object's identity is the pair (namespace, name). Checking both wherever a plugin or a
//! manifest supplies them means no spelling of one (`team-b/secret` as a name,
//! `team-a-x/../team-b` as a namespace) can stand for another.

/// Longest namespace (a DNS-1123 label).
pub const MAX_NAMESPACE_LEN: usize = 63;

/// Longest object name the API server stores (a DNS-1123 subdomain; kinds with looser name
/// rules still keep to this length).
pub const MAX_NAME_LEN: usize = 253;

/// Why a namespace or an object name is refused: the input as messages show it, and the flaw.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Not a namespace name (a DNS-1123 label).
    #[error("`{shown}` is not a namespace name: {flaw}")]
    Namespace {
        /// The namespace as messages show it (see [`shown`]).
        shown: String,
        /// What breaks the rule.
        flaw: Flaw,
    },
    /// Not an object name (a path segment).
    #[error("`{shown}` is not an object name: {flaw}")]
    Object {
        /// The name as messages show it (see [`shown`]).
        shown: String,
        /// What breaks the rule.
        flaw: Flaw,
    },
}

/// What breaks a namespace or name rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Flaw {
    /// Nothing at all.
    #[error("it is empty")]
    Empty,
    /// Over the rule's length.
    #[error("longer than {0} characters")]
    TooLong(usize),
    /// A character a DNS label may not hold.
    #[error("`{}` is not allowed (lowercase letters, digits and `-` only)", .0.escape_debug())]
    NotLabelChar(char),
    /// A DNS label starting or ending with `-`.
    #[error("it must start and end with a letter or digit")]
    Ends,
    /// `.` or `..`.
    #[error("`.` and `..` are not names")]
    Dots,
    /// A character a path segment may not hold.
    #[error("`{}` is not allowed", .0.escape_debug())]
    NotAllowed(char),
}

/// Why `namespace` is not a namespace name, if it is not.
pub fn check_namespace(namespace: &str) -> Result<(), NameError> {
    let bad = |flaw: Flaw| {
        Err(NameError::Namespace {
            shown: shown(namespace),
            flaw,
        })
    };
    if namespace.is_empty() {
        return bad(Flaw::Empty);
    }
    if namespace.len() > MAX_NAMESPACE_LEN {
        return bad(Flaw::TooLong(MAX_NAMESPACE_LEN));
    }
    if let Some(c) = namespace
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return bad(Flaw::NotLabelChar(c));
    }
    if namespace.starts_with('-') || namespace.ends_with('-') {
        return bad(Flaw::Ends);
    }
    Ok(())
}

/// Why `name` cannot be an object's name, if it cannot: the rules every kind shares (a path
/// segment: not `.` or `..`, no `/` or `%`, at most 253 characters).
pub fn check_name(name: &str) -> Result<(), NameError> {
    let bad = |flaw: Flaw| {
        Err(NameError::Object {
            shown: shown(name),
            flaw,
        })
    };
    if name.is_empty() {
        return bad(Flaw::Empty);
    }
    if name.len() > MAX_NAME_LEN {
        return bad(Flaw::TooLong(MAX_NAME_LEN));
    }
    if name == "." || name == ".." {
        return bad(Flaw::Dots);
    }
    if let Some(c) = name
        .chars()
        .find(|c| matches!(c, '/' | '%') || c.is_control())
    {
        return bad(Flaw::NotAllowed(c));
    }
    Ok(())
}

/// Why a name is not a name of the kind it names: the rule and the offending part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{shown}` is not a valid {kind} name: {why} ({rule})")]
pub struct InvalidName {
    /// The name as messages show it (escaped, cut).
    pub shown: String,
    /// The kind whose rules it broke.
    pub kind: String,
    /// The rule, as the API server names it.
    pub rule: NameRule,
    /// What broke it.
    pub why: String,
}

/// The rules the API server holds an object's name to; which applies depends on its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// Most kinds, built-in and custom: lowercase alphanumerics, `-` and `.`, at most 253.
    Dns1123Subdomain,
    /// Namespaces: lowercase alphanumerics and `-`, at most 63.
    Dns1123Label,
    /// Services: a DNS-1123 label that starts with a letter.
    Dns1035Label,
    /// RBAC kinds (e.g. `system:aggregate-to-admin`): anything but `/`, `%`, `.` and `..`.
    PathSegment,
}

impl std::fmt::Display for NameRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NameRule::Dns1123Subdomain => "a DNS-1123 subdomain",
            NameRule::Dns1123Label => "a DNS-1123 label",
            NameRule::Dns1035Label => "a DNS-1035 label",
            NameRule::PathSegment => "a path segment",
        })
    }
}

impl NameRule {
    /// The rule the API server applies to names of `group` `kind`: apimachinery's
    /// `NameIsDNSSubdomain` unless the kind's strategy says otherwise.
    pub fn of(group: &str, kind: &str) -> NameRule {
        match (group, kind) {
            ("", "Namespace") => NameRule::Dns1123Label,
            ("", "Service") => NameRule::Dns1035Label,
            ("rbac.authorization.k8s.io", _) => NameRule::PathSegment,
            _ => NameRule::Dns1123Subdomain,
        }
    }

    /// Why `name` breaks this rule, if it does.
    fn why_not(self, name: &str) -> Option<String> {
        let label_chars = |s: &str, max: usize, what: &str| -> Option<String> {
            if s.is_empty() {
                return Some(format!("{what} is empty"));
            }
            if s.len() > max {
                return Some(format!("{what} is longer than {max} characters"));
            }
            if let Some(c) = s
                .chars()
                .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
            {
                return Some(format!(
                    "`{}` is not allowed (lowercase letters, digits, `-`{})",
                    c.escape_debug(),
                    if what == "a part" { " and `.`" } else { "" }
                ));
            }
            if s.starts_with('-') || s.ends_with('-') {
                return Some(format!("{what} must start and end with a letter or digit"));
            }
            None
        };
        match self {
            NameRule::PathSegment => check_name(name).err().map(|e| e.to_string()),
            NameRule::Dns1123Label => label_chars(name, MAX_NAMESPACE_LEN, "it"),
            NameRule::Dns1035Label => label_chars(name, MAX_NAMESPACE_LEN, "it").or_else(|| {
                (!name.starts_with(|c: char| c.is_ascii_lowercase()))
                    .then(|| "it must start with a lowercase letter".to_string())
            }),
            NameRule::Dns1123Subdomain => {
                if name.len() > MAX_NAME_LEN {
                    return Some("it is longer than 253 characters".into());
                }
                if name.is_empty() {
                    return Some("it is empty".into());
                }
                name.split('.')
                    .find_map(|part| label_chars(part, 63, "a part"))
            }
        }
    }
}

/// Why `name` cannot name an object of `group` `kind`, by the rule the API server holds that
/// kind's names to. A name that passes contains nothing a URL treats specially except, for
/// path-segment kinds, what percent-encoding the segment makes plain.
pub fn check_object_name(group: &str, kind: &str, name: &str) -> Result<(), InvalidName> {
    let rule = NameRule::of(group, kind);
    match rule.why_not(name) {
        None => Ok(()),
        Some(why) => Err(InvalidName {
            shown: shown(name),
            kind: kind.to_string(),
            rule,
            why,
        }),
    }
}

/// Characters a path segment keeps as they are: RFC 3986 unreserved, `:` and `@`. Everything
/// else (`?`, `#`, `%`, `/`, `&`, spaces, non-ASCII) is percent-encoded.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b':')
    .remove(b'@');

/// `segment` percent-encoded as one URL path segment: whatever it holds, it can end neither
/// the segment nor the path.
pub fn path_segment(segment: &str) -> std::borrow::Cow<'_, str> {
    percent_encoding::utf8_percent_encode(segment, SEGMENT).into()
}

/// An input as error messages show it: escaped (one line, no control characters) and cut
/// after 80 characters.
pub fn shown(s: &str) -> String {
    const MAX: usize = 80;
    let mut out: String = s.chars().take(MAX).flat_map(char::escape_debug).collect();
    if s.chars().nth(MAX).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_dns_labels() {
        for ok in ["a", "team-a", "a1", "0", &"x".repeat(63)] {
            assert!(check_namespace(ok).is_ok(), "{ok}");
        }
        for (bad, needle) in [
            ("", "empty"),
            ("team-a-x/../team-b", "`/`"),
            ("Team", "`T`"),
            ("-a", "start and end"),
            ("a-", "start and end"),
            ("a.b", "`.`"),
            ("a\nb", "`\\n`"),
            (&"x".repeat(64), "63"),
        ] {
            let e = check_namespace(bad).unwrap_err().to_string();
            assert!(e.contains(needle), "{bad:?}: {e}");
        }
    }

    #[test]
    fn names_are_path_segments() {
        for ok in ["a", "system:controller:x", "My.Name", "a..b"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for (bad, needle) in [
            ("", "empty"),
            ("team-b/b-secret", "`/`"),
            ("..", "`.`"),
            (".", "`.`"),
            ("a%2Fb", "`%`"),
            (&"x".repeat(254), "253"),
        ] {
            let e = check_name(bad).unwrap_err().to_string();
            assert!(e.contains(needle), "{bad:?}: {e}");
        }
        let long = check_name(&format!("{}/", "y".repeat(1000)))
            .unwrap_err()
            .to_string();
        assert!(
            long.len() < 200,
            "a long name is cut in the message: {long}"
        );
    }

    #[test]
    fn object_names_follow_their_kinds_rules() {
        for (group, kind, ok) in [
            ("", "ConfigMap", "a-cm"),
            ("", "ConfigMap", "a.b-c.d0"),
            ("apps", "Deployment", "web"),
            ("", "Namespace", "team-a"),
            ("", "Service", "web1"),
            (
                "rbac.authorization.k8s.io",
                "ClusterRole",
                "system:aggregate-to-admin",
            ),
            ("example.com", "Widget", "w.1"),
        ] {
            assert!(check_object_name(group, kind, ok).is_ok(), "{kind} {ok}");
        }
        for (group, kind, bad, needle) in [
            ("", "ConfigMap", "a-cm?dryRun=All&x=", "`?`"),
            ("", "ConfigMap", "a-cm#", "`#`"),
            ("", "ConfigMap", "a-cm&x", "`&`"),
            ("", "ConfigMap", "a-cm%3F", "`%`"),
            ("", "ConfigMap", "a-cm ", "` `"),
            ("", "ConfigMap", "a\u{2010}cm", "`\u{2010}`"),
            ("", "ConfigMap", "A-CM", "`A`"),
            ("", "ConfigMap", "a..b", "a part is empty"),
            ("", "ConfigMap", "-a", "start and end"),
            ("", "Namespace", "a.b", "`.`"),
            ("", "Service", "1web", "start with a lowercase letter"),
            ("rbac.authorization.k8s.io", "Role", "a/b", "`/`"),
            ("rbac.authorization.k8s.io", "Role", "..", "`.`"),
        ] {
            let e = check_object_name(group, kind, bad).unwrap_err().to_string();
            assert!(e.contains(needle) && e.contains(kind), "{bad:?}: {e}");
        }
    }

    #[test]
    fn path_segments_cannot_end_the_segment_or_the_path() {
        assert_eq!(
            path_segment("system:aggregate-to-admin"),
            "system:aggregate-to-admin"
        );
        assert_eq!(path_segment("a?b#c&d e"), "a%3Fb%23c%26d%20e");
        assert_eq!(path_segment("a/../b%2F"), "a%2F..%2Fb%252F");
    }
}
