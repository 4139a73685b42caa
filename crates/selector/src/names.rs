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

/// Why `namespace` is not a namespace name, if it is not.
pub fn check_namespace(namespace: &str) -> Result<(), String> {
    let bad = |why: &str| {
        Err(format!(
            "`{}` is not a namespace name: {why}",
            shown(namespace)
        ))
    };
    if namespace.is_empty() {
        return bad("it is empty");
    }
    if namespace.len() > MAX_NAMESPACE_LEN {
        return bad("longer than 63 characters");
    }
    if let Some(c) = namespace
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return bad(&format!(
            "`{}` is not allowed (lowercase letters, digits and `-` only)",
            c.escape_debug()
        ));
    }
    if namespace.starts_with('-') || namespace.ends_with('-') {
        return bad("it must start and end with a letter or digit");
    }
    Ok(())
}

/// Why `name` cannot be an object's name, if it cannot: the rules every kind shares (a path
/// segment: not `.` or `..`, no `/` or `%`, at most 253 characters).
pub fn check_name(name: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("`{}` is not an object name: {why}", shown(name)));
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.len() > MAX_NAME_LEN {
        return bad("longer than 253 characters");
    }
    if name == "." || name == ".." {
        return bad("`.` and `..` are not names");
    }
    if let Some(c) = name
        .chars()
        .find(|c| matches!(c, '/' | '%') || c.is_control())
    {
        return bad(&format!("`{}` is not allowed", c.escape_debug()));
    }
    Ok(())
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
            let e = check_namespace(bad).unwrap_err();
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
            let e = check_name(bad).unwrap_err();
            assert!(e.contains(needle), "{bad:?}: {e}");
        }
        let long = check_name(&format!("{}/", "y".repeat(1000))).unwrap_err();
        assert!(
            long.len() < 200,
            "a long name is cut in the message: {long}"
        );
    }
}
