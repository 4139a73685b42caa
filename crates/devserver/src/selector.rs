//! Selectors on list and watch: label selectors through the crate's shared parser
//! ([`informant_apimachinery`]), and field selectors (`metadata.name`, `metadata.namespace`, and any
//! other dotted path into the object, compared as strings). Parse errors are 400 BadRequest, as
//! from a real apiserver.

use serde_json::Value;

pub(crate) use informant_apimachinery::LabelSelector;

use super::resources::ResourceType;
use super::store::Obj;
use super::{Error, Result};

/// Parses the `labelSelector` query parameter with the crate's parser; errors are 400.
pub(crate) fn parse_labels(s: &str) -> Result<LabelSelector> {
    LabelSelector::parse(s)
        .map_err(|e| Error::BadRequest(format!("unable to parse requirement: {e}")))
}

/// Whether a stored object's labels satisfy `selector`.
pub(crate) fn labels_match(selector: &LabelSelector, labels: &[(Box<str>, Box<str>)]) -> bool {
    selector.matches(|key| labels.iter().find(|(k, _)| &**k == key).map(|(_, v)| &**v))
}

/// A parsed field selector; empty matches everything.
#[derive(Debug, Clone, Default)]
pub(crate) struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses the `fieldSelector` query parameter.
    pub fn parse(s: &str) -> Result<FieldSelector> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, eq, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(Error::BadRequest(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            if field.is_empty() || !field.chars().all(|c| c.is_ascii_alphanumeric() || c == '.') {
                return Err(Error::BadRequest(format!(
                    "\"{field}\" is not a known field selector"
                )));
            }
            out.push((field.to_string(), eq, value.trim().to_string()));
        }
        Ok(FieldSelector(out))
    }

    /// Refuses fields the resource's registry does not index, as the apiserver's field label
    /// conversion does (400 `field label not supported: X`).
    pub fn check_supported(&self, res: &ResourceType) -> Result<()> {
        let extra = supported_fields(&res.group, &res.plural);
        for (field, _, _) in &self.0 {
            let known = matches!(field.as_str(), "metadata.name" | "metadata.namespace")
                || extra.contains(&field.as_str());
            if !known {
                return Err(Error::BadRequest(format!(
                    "field label not supported: {field}"
                )));
            }
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the object (stored under namespace/name) is selected.
    pub fn matches(&self, namespace: &str, name: &str, obj: &Obj) -> bool {
        let mut parsed: Option<Value> = None;
        self.0.iter().all(|(field, eq, want)| {
            let got = match field.as_str() {
                "metadata.name" => name.to_string(),
                "metadata.namespace" => namespace.to_string(),
                path => {
                    // Stored objects parse (see `Obj::value`); one that did not has no fields.
                    let v = parsed.get_or_insert_with(|| obj.value().unwrap_or_default());
                    let mut cur = &*v;
                    for seg in path.split('.') {
                        cur = &cur[seg];
                    }
                    match cur {
                        Value::String(s) => s.clone(),
                        Value::Null => String::new(),
                        other => other.to_string(),
                    }
                }
            };
            (got == *want) == *eq
        })
    }
}

/// Field selectors beyond `metadata.name`/`metadata.namespace`, per resource, from each
/// registry's `GetAttrs`/`SelectableFields` and field-label conversion funcs (pkg/registry/core/
/// pod/strategy.go PodToSelectableFields, core/event, core/secret, core/namespace, core/node,
/// core/replicationcontroller, apps/replicaset, batch/job, pkg/apis/*/v1/conversion.go).
fn supported_fields(group: &str, plural: &str) -> &'static [&'static str] {
    match (group, plural) {
        ("", "pods") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        ],
        ("", "events") | ("events.k8s.io", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("", "secrets") => &["type"],
        ("", "namespaces") => &["status.phase"],
        ("", "nodes") => &["spec.unschedulable"],
        ("", "replicationcontrollers") | ("apps", "replicasets") => &["status.replicas"],
        ("batch", "jobs") => &["status.successful"],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Vec<(Box<str>, Box<str>)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn label_selector_operators() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        for (sel, want) in [
            ("app=web", true),
            ("app==web,tier=front", true),
            ("app!=web", false),
            ("app in (web, db)", true),
            ("tier notin (front)", false),
            ("app", true),
            ("!app", false),
            ("!missing,app", true),
            ("", true),
        ] {
            assert_eq!(labels_match(&parse_labels(sel).unwrap(), &l), want, "{sel}");
        }
        for bad in [
            "app in web",
            "=x",
            "a,,b",
            "app in (web",
            "a b",
            "a=b=c",
            "!",
        ] {
            let err = parse_labels(bad).unwrap_err();
            assert_eq!(err.code_and_reason(), (400, "BadRequest"), "{bad}");
        }
    }
}
