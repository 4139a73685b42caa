//! Field validation a real apiserver does before storing, with its own wording: object names
//! (apimachinery `ValidateObjectMeta` and the per-kind name functions), label keys and values
//! (`ValidateLabels`), and the workload fields users get wrong most (replicas, selector vs pod
//! template labels, containers). Every check yields [`Cause`]s; the caller turns them into one
//! 422 Invalid, as `errors.NewInvalid` does.

use std::collections::HashMap;

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

/// `ValidateListOptions` / `validateWatchOptions` (apimachinery
/// pkg/apis/meta/internalversion/validation/validation.go): the combinations of
/// `resourceVersion`, `resourceVersionMatch`, `sendInitialEvents` and `continue` a real server
/// refuses, as 422 `ListOptions.meta.k8s.io "" is invalid`.
pub(crate) fn list_options(q: &HashMap<String, String>, watch: bool) -> Result<()> {
    let get = |k: &str| q.get(k).map(String::as_str).filter(|v| !v.is_empty());
    let mode = get("resourceVersionMatch");
    let rv = get("resourceVersion");
    let cont = get("continue");
    let initial = get("sendInitialEvents");
    let field = "resourceVersionMatch";
    let mut causes = Vec::new();
    if watch {
        if initial.is_some() && mode != Some("NotOlderThan") {
            causes.push(Cause::forbidden(
                field,
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if initial == Some("true") && get("allowWatchBookmarks") != Some("true") {
            causes.push(Cause::forbidden(
                "allowWatchBookmarks",
                "allowWatchBookmarks must be set to true when sendInitialEvents is set to true",
            ));
        }
        if let Some(m) = mode {
            if initial.is_none() {
                causes.push(Cause::forbidden(
                    field,
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if m != "NotOlderThan" {
                causes.push(Cause::not_supported(field, m, &["NotOlderThan"]));
            }
            if cont.is_some() {
                causes.push(Cause::forbidden(
                    field,
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
        }
    } else {
        if let Some(m) = mode {
            if rv.is_none() {
                causes.push(Cause::forbidden(
                    field,
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if cont.is_some() {
                causes.push(Cause::forbidden(
                    field,
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if m != "Exact" && m != "NotOlderThan" {
                causes.push(Cause::not_supported(
                    field,
                    m,
                    &["Exact", "NotOlderThan", ""],
                ));
            }
            if m == "Exact" && rv == Some("0") {
                causes.push(Cause::forbidden(
                    field,
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        if initial.is_some() {
            causes.push(Cause::forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            ));
        }
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(Error::Invalid {
        kind: "ListOptions".into(),
        group: "meta.k8s.io".into(),
        name: String::new(),
        causes,
    })
}

/// Go's `%#v` of a `map[string]string`, as validation messages print label maps.
fn go_map(labels: &Value) -> String {
    let mut pairs: Vec<(String, String)> = labels
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect();
    if pairs.is_empty() {
        return "map[string]string(nil)".into();
    }
    pairs.sort();
    let body: Vec<String> = pairs.iter().map(|(k, v)| format!("{k:?}:{v:?}")).collect();
    format!("map[string]string{{{}}}", body.join(", "))
}

/// `metav1.LabelSelectorAsSelector(sel).Matches(labels)`; a missing selector matches nothing.
fn selector_matches(selector: &Value, labels: &Value) -> bool {
    if !selector.is_object() {
        return false;
    }
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let by_labels = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    let by_expressions = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let key = e["key"].as_str().unwrap_or_default();
            let values: Vec<&str> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match e["operator"].as_str() {
                Some("In") => label(key).is_some_and(|v| values.contains(&v)),
                Some("NotIn") => label(key).is_none_or(|v| !values.contains(&v)),
                Some("Exists") => label(key).is_some(),
                Some("DoesNotExist") => label(key).is_none(),
                _ => false,
            }
        });
    by_labels && by_expressions
}

/// `ValidatePodTemplateSpec`'s checks users trip over: template labels, at least one
/// container, each with a name and an image (pkg/apis/core/validation/validation.go).
fn pod_template_causes(template: &Value, at: &str) -> Vec<Cause> {
    let mut causes = label_causes(
        &template["metadata"]["labels"],
        &format!("{at}.metadata.labels"),
    );
    causes.extend(pod_spec_causes(&template["spec"], &format!("{at}.spec")));
    causes
}

fn pod_spec_causes(spec: &Value, at: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    match spec["containers"].as_array().filter(|c| !c.is_empty()) {
        None => causes.push(Cause::required(&format!("{at}.containers"), "")),
        Some(containers) => {
            for (i, c) in containers.iter().enumerate() {
                for field in ["name", "image"] {
                    if c[field].as_str().is_none_or(str::is_empty) {
                        causes.push(Cause::required(
                            &format!("{at}.containers[{i}].{field}"),
                            "",
                        ));
                    }
                }
            }
        }
    }
    causes
}

/// The spec checks of the workload kinds (pkg/apis/apps/validation/validation.go
/// ValidateDeploymentSpec, ValidateReplicaSetSpec, ValidateStatefulSetSpec,
/// ValidateDaemonSetSpec; pkg/apis/batch/validation for Jobs; core for Pods), in their order.
pub(crate) fn spec_causes(res: &ResourceType, obj: &Value) -> Vec<Cause> {
    let spec = &obj["spec"];
    let mut causes = Vec::new();
    if let Some(schema) = res.schema.as_deref().filter(|_| !res.builtin) {
        causes.extend(super::structural::validate(schema, obj));
    }
    causes.extend(super::admission::config_causes(res, obj));
    let replicas = |causes: &mut Vec<Cause>| {
        if let Some(n) = spec["replicas"].as_i64().filter(|n| *n < 0) {
            causes.push(Cause::invalid(
                "spec.replicas",
                &n.to_string(),
                "must be greater than or equal to 0",
            ));
        }
    };
    let selected = |causes: &mut Vec<Cause>, what: &str| {
        let selector = &spec["selector"];
        if !selector.is_object() {
            causes.push(Cause::required("spec.selector", ""));
        } else if selector["matchLabels"]
            .as_object()
            .is_none_or(|m| m.is_empty())
            && selector["matchExpressions"]
                .as_array()
                .is_none_or(|a| a.is_empty())
        {
            causes.push(Cause::invalid(
                "spec.selector",
                "v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}",
                &format!("empty selector is invalid for {what}"),
            ));
            return;
        }
        let labels = &spec["template"]["metadata"]["labels"];
        if !selector_matches(selector, labels) {
            causes.push(Cause::invalid(
                "spec.template.metadata.labels",
                &go_map(labels),
                "`selector` does not match template `labels`",
            ));
        }
    };
    match (res.group.as_str(), res.kind.as_str()) {
        ("apps", "Deployment") => {
            replicas(&mut causes);
            selected(&mut causes, "deployment");
        }
        ("apps", "ReplicaSet") => {
            replicas(&mut causes);
            selected(&mut causes, "deployment");
        }
        ("apps", "StatefulSet") => {
            replicas(&mut causes);
            selected(&mut causes, "statefulset");
        }
        ("apps", "DaemonSet") => selected(&mut causes, "daemonset"),
        ("batch", "Job") => {
            causes.extend(pod_template_causes(&spec["template"], "spec.template"));
            // ValidateJobSpec: a Job's pods must not restart in place.
            let policy = spec["template"]["spec"]["restartPolicy"]
                .as_str()
                .unwrap_or_default();
            if policy != "OnFailure" && policy != "Never" {
                causes.push(Cause::not_supported(
                    "spec.template.spec.restartPolicy",
                    policy,
                    &["OnFailure", "Never"],
                ));
            }
            return causes;
        }
        ("", "Pod") => return pod_spec_causes(spec, "spec"),
        _ => return causes,
    }
    causes.extend(pod_template_causes(&spec["template"], "spec.template"));
    causes
}
