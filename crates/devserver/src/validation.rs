//! Field validation a real apiserver does before storing, with its own wording: object names
//! (apimachinery `ValidateObjectMeta` and the per-kind name functions), label keys and values
//! (`ValidateLabels`), and the workload fields users get wrong most (replicas, selector vs pod
//! template labels, containers). Every check yields [`Cause`]s; the caller turns them into one
//! 422 Invalid, as `errors.NewInvalid` does.

use serde_json::Value;

use super::resources::ResourceType;
use super::{Cause, Error, Result};

const DNS1123_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1035_LABEL: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const LABEL_NAME: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// Which name rule a kind's `ValidateObjectMeta` call uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NameRule {
    /// `NameIsDNSSubdomain`: most kinds.
    Subdomain,
    /// `ValidateNamespaceName` (a DNS-1123 label).
    Label1123,
    /// `ValidateServiceName` (a DNS-1035 label).
    Label1035,
}

fn name_rule(res: &ResourceType) -> NameRule {
    match (res.group.as_str(), res.kind.as_str()) {
        ("", "Namespace") => NameRule::Label1123,
        ("", "Service") => NameRule::Label1035,
        _ => NameRule::Subdomain,
    }
}

fn is_label_1123(s: &str, first_alpha: bool) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(ok)
        && s.starts_with(|c: char| c.is_ascii_lowercase() || (!first_alpha && c.is_ascii_digit()))
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn is_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(|part| is_label_1123(part, false))
}

/// The causes of an invalid `metadata.name` (empty when the name is fine).
pub(crate) fn name_causes(res: &ResourceType, name: &str) -> Vec<Cause> {
    let (ok, detail) = match name_rule(res) {
        NameRule::Subdomain => (is_subdomain(name), DNS1123_SUBDOMAIN),
        NameRule::Label1123 => (is_label_1123(name, false), DNS1123_LABEL),
        NameRule::Label1035 => (is_label_1123(name, true), DNS1035_LABEL),
    };
    if ok {
        return Vec::new();
    }
    let detail = if name.len() > 253 || (name_rule(res) != NameRule::Subdomain && name.len() > 63) {
        let max = if name_rule(res) == NameRule::Subdomain {
            253
        } else {
            63
        };
        format!("must be no more than {max} characters")
    } else {
        detail.to_string()
    };
    vec![Cause::invalid(
        "metadata.name",
        &format!("{name:?}"),
        &detail,
    )]
}

/// `ValidateLabels`: keys are qualified names (optional DNS-subdomain prefix), values at most
/// 63 characters of the label alphabet.
pub(crate) fn label_causes(labels: &Value, field: &str) -> Vec<Cause> {
    let Some(map) = labels.as_object() else {
        return Vec::new();
    };
    let name_ok = |s: &str| {
        !s.is_empty()
            && s.len() <= 63
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    let mut causes = Vec::new();
    for (key, value) in map {
        let (prefix, name) = match key.split_once('/') {
            Some((p, n)) => (Some(p), n),
            None => (None, key.as_str()),
        };
        if prefix.is_some_and(|p| !is_subdomain(p)) {
            causes.push(Cause::invalid(
                field,
                &format!("{key:?}"),
                &format!("prefix part {DNS1123_SUBDOMAIN}"),
            ));
        } else if !name_ok(name) {
            let detail = if name.len() > 63 {
                "name part must be no more than 63 characters"
            } else {
                LABEL_NAME
            };
            causes.push(Cause::invalid(field, &format!("{key:?}"), detail));
        }
        let v = value.as_str().unwrap_or_default();
        if !v.is_empty() && !name_ok(v) {
            let detail = if v.len() > 63 {
                "must be no more than 63 characters"
            } else {
                LABEL_VALUE
            };
            causes.push(Cause::invalid(field, &format!("{v:?}"), detail));
        }
    }
    causes
}

/// Turns causes into the 422 for `res`'s kind, or Ok when there are none.
pub(crate) fn check(res: &ResourceType, name: &str, causes: Vec<Cause>) -> Result<()> {
    if causes.is_empty() {
        return Ok(());
    }
    Err(Error::Invalid {
        kind: res.kind.clone(),
        group: res.group.clone(),
        name: name.into(),
        causes,
    })
}
