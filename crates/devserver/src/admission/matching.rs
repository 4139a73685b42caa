//! Which webhooks a write calls: the configurations read from the store, their `rules` matched
//! as kube-apiserver's `rules.Matcher` does, then `namespaceSelector` and `objectSelector`; and
//! the checks a configuration must pass to be stored at all.
//!
//! Matching, in kube-apiserver's terms:
//! - A rule's `resources` entry `pods` names the main resource only, `pods/status` one
//!   subresource, `*` every main resource, `*/status` that subresource of any resource, `*/*`
//!   everything. `scope` is `*` (the default), `Cluster` (cluster-scoped objects, and Namespace
//!   objects themselves) or `Namespaced`.
//! - `matchPolicy` is taken as `Exact`: a rule matches the group-version the request named,
//!   never an equivalent one (the built-ins here serve one version each).
//! - `namespaceSelector` is matched against the labels of the object's Namespace as stored; a
//!   cluster-scoped object always matches it, and a Namespace created or updated is matched by
//!   its own new labels.
//! - `objectSelector` matches when the object or the old object carries matching labels.
//! - `matchConditions` (CEL) are not evaluated: a webhook with them is called as if they held.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1 as reg;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as MetaSelector;
use kube::core::admission::Operation;
use serde_json::Value;

use crate::resources::ResourceType;
use crate::selector::LabelSelector;
use crate::{Cause, Shared};

/// The API group of the webhook configurations.
pub(crate) const GROUP: &str = "admissionregistration.k8s.io";
const MUTATING_KEY: &str = "mutatingwebhookconfigurations.admissionregistration.k8s.io";
const VALIDATING_KEY: &str = "validatingwebhookconfigurations.admissionregistration.k8s.io";

/// `timeoutSeconds` when a webhook names none, as kube-apiserver defaults it.
const DEFAULT_TIMEOUT: u64 = 10;

/// Why a `metav1.LabelSelector` is not one this server can match.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SelectorError {
    /// An operator other than In, NotIn, Exists, DoesNotExist.
    #[error("{operator:?} is not a valid label selector operator")]
    Operator {
        /// The operator given.
        operator: String,
    },
    /// `In`/`NotIn` without values, or `Exists`/`DoesNotExist` with some.
    #[error("key {key:?}: operator {operator} {rule}")]
    Values {
        /// The requirement's key.
        key: String,
        /// Its operator.
        operator: String,
        /// What the operator needs.
        rule: &'static str,
    },
    /// A key or value the label rules refuse.
    #[error(transparent)]
    Parse(#[from] informant_apimachinery::SelectorError),
}

/// One webhook of a stored configuration, as the calls need it.
#[derive(Debug, Clone)]
pub(crate) struct Hook {
    /// The webhook's `name`.
    pub name: String,
    /// From a MutatingWebhookConfiguration.
    pub mutating: bool,
    /// Where to call it.
    pub client: reg::WebhookClientConfig,
    /// What it asks to see.
    pub rules: Vec<reg::RuleWithOperations>,
    /// `failurePolicy: Ignore`: a failed call skips the webhook instead of failing the write.
    pub ignore_failures: bool,
    /// The parsed `namespaceSelector` (empty: every namespace).
    pub namespace_selector: LabelSelector,
    /// The parsed `objectSelector` (empty: every object).
    pub object_selector: LabelSelector,
    /// `sideEffects`: only `None` and `NoneOnDryRun` may see dry-run requests.
    pub side_effects: String,
    /// `timeoutSeconds`, within 1..=30.
    pub timeout: Duration,
    /// `admissionReviewVersions`, in the webhook's order of preference.
    pub review_versions: Vec<String>,
}

/// The request a rule is matched against.
pub(crate) struct RuleTarget<'a> {
    /// The resource written.
    pub res: &'a ResourceType,
    /// The version the URL named.
    pub version: &'a str,
    /// `status`, `scale`, or empty.
    pub subresource: &'a str,
    /// Whether the request names a namespace (for a Namespace object: itself).
    pub namespaced: bool,
}

impl Hook {
    /// Whether one of the webhook's rules covers `op` on `t`.
    pub fn rules_match(&self, t: &RuleTarget<'_>, op: &Operation) -> bool {
        self.rules.iter().any(|rule| rule_matches(rule, t, op))
    }

    /// Whether the webhook may see a dry-run request (`sideEffects` None or NoneOnDryRun).
    pub fn dry_run_safe(&self) -> bool {
        matches!(self.side_effects.as_str(), "None" | "NoneOnDryRun")
    }
}

fn has(list: &Option<Vec<String>>, want: &str) -> bool {
    list.iter().flatten().any(|x| x == "*" || x == want)
}

fn operation_name(op: &Operation) -> &'static str {
    match op {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}

fn rule_matches(rule: &reg::RuleWithOperations, t: &RuleTarget<'_>, op: &Operation) -> bool {
    let resource = rule.resources.iter().flatten().any(|entry| {
        let (res, sub) = entry.split_once('/').unwrap_or((entry, ""));
        (res == "*" || res == t.res.plural) && (sub == "*" || sub == t.subresource)
    });
    let is_namespace = t.res.group.is_empty() && t.res.plural == "namespaces";
    let scope = match rule.scope.as_deref() {
        None | Some("*") => true,
        Some("Namespaced") => !is_namespace && t.namespaced,
        Some("Cluster") => is_namespace || !t.namespaced,
        Some(_) => false,
    };
    has(&rule.operations, operation_name(op))
        && has(&rule.api_groups, &t.res.group)
        && has(&rule.api_versions, t.version)
        && resource
        && scope
}

/// Every webhook of every stored configuration: the mutating ones first, each kind's
/// configurations ordered by name and their webhooks in their order. A configuration that
/// does not decode (only a verbatim replace could store one) is skipped with a warning.
pub(crate) fn hooks(shared: &Shared) -> Vec<Hook> {
    let mut out = Vec::new();
    for (key, mutating) in [(MUTATING_KEY, true), (VALIDATING_KEY, false)] {
        let mut stored = Vec::new();
        shared.api.store.scan(key, None, None, |k, obj| {
            stored.push((k.1.clone(), obj.clone()));
            true
        });
        stored.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, obj) in stored {
            match decode(&obj.json, mutating) {
                Ok(hooks) => out.extend(hooks),
                Err(e) => tracing::warn!(configuration = %name, error = %e,
                    "admission: skipping a webhook configuration that does not decode"),
            }
        }
    }
    out
}

/// What the two configuration kinds' webhooks share, all this server reads of them.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Webhook {
    name: String,
    client_config: reg::WebhookClientConfig,
    rules: Option<Vec<reg::RuleWithOperations>>,
    namespace_selector: Option<MetaSelector>,
    object_selector: Option<MetaSelector>,
    timeout_seconds: Option<i32>,
    failure_policy: Option<String>,
    side_effects: String,
    admission_review_versions: Vec<String>,
}

/// A Validating- or MutatingWebhookConfiguration, as far as [`Webhook`] goes.
#[derive(serde::Deserialize)]
struct Configuration {
    webhooks: Option<Vec<Webhook>>,
}

/// A configuration's webhooks.
fn decode(json: &[u8], mutating: bool) -> Result<Vec<Hook>, DecodeError> {
    let config: Configuration = serde_json::from_slice(json)?;
    config
        .webhooks
        .unwrap_or_default()
        .into_iter()
        .map(|w| {
            Ok(Hook {
                namespace_selector: selector(w.namespace_selector.as_ref())?,
                object_selector: selector(w.object_selector.as_ref())?,
                timeout: timeout(w.timeout_seconds),
                ignore_failures: w.failure_policy.as_deref() == Some("Ignore"),
                name: w.name,
                mutating,
                client: w.client_config,
                rules: w.rules.unwrap_or_default(),
                side_effects: w.side_effects,
                review_versions: w.admission_review_versions,
            })
        })
        .collect()
}

/// Why a stored configuration cannot be used.
#[derive(Debug, thiserror::Error)]
enum DecodeError {
    /// Not the configuration type.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A selector that cannot be matched.
    #[error(transparent)]
    Selector(#[from] SelectorError),
}

/// `timeoutSeconds`, defaulted and held to 1..=30 as the API validates it.
fn timeout(seconds: Option<i32>) -> Duration {
    let s = seconds.map_or(DEFAULT_TIMEOUT, |s| s.clamp(1, 30) as u64);
    Duration::from_secs(s)
}

/// A `metav1.LabelSelector` in the shared selector type, by way of the selector syntax it
/// stands for (absent: matches everything, as the API defaults it to `{}`).
pub(crate) fn selector(s: Option<&MetaSelector>) -> Result<LabelSelector, SelectorError> {
    let Some(s) = s else {
        return Ok(LabelSelector::default());
    };
    let mut parts: Vec<String> = s
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for r in s.match_expressions.iter().flatten() {
        let values = r.values.clone().unwrap_or_default();
        let needs = |want_values: bool, rule| {
            if values.is_empty() == want_values {
                Err(SelectorError::Values {
                    key: r.key.clone(),
                    operator: r.operator.clone(),
                    rule,
                })
            } else {
                Ok(())
            }
        };
        parts.push(match r.operator.as_str() {
            "In" | "NotIn" => {
                needs(true, "needs at least one value")?;
                let op = if r.operator == "In" { "in" } else { "notin" };
                format!("{} {op} ({})", r.key, values.join(","))
            }
            "Exists" => {
                needs(false, "takes no values")?;
                r.key.clone()
            }
            "DoesNotExist" => {
                needs(false, "takes no values")?;
                format!("!{}", r.key)
            }
            other => {
                return Err(SelectorError::Operator {
                    operator: other.into(),
                });
            }
        });
    }
    Ok(LabelSelector::parse(&parts.join(","))?)
}

/// Whether `labels` (an object's `metadata.labels`) satisfy `selector`.
pub(crate) fn labels_match(selector: &LabelSelector, labels: &Value) -> bool {
    selector.matches(|k| labels.get(k).and_then(Value::as_str))
}

/// Labels of a stored cluster-scoped object (a Namespace), as a JSON map (what the selectors
/// read); none when it is not stored.
pub(crate) fn stored_labels(shared: &Shared, key: &str, name: &str) -> Value {
    let mut map = serde_json::Map::new();
    if let Some(obj) = shared.api.store.get(key, "", name) {
        for (k, v) in &obj.labels {
            map.insert(k.to_string(), Value::String(v.to_string()));
        }
    }
    Value::Object(map)
}

/// Whether writes to `res` are never sent to webhooks: the webhook configurations themselves,
/// so that a webhook that fails cannot lock its own removal out (kube-apiserver exempts them
/// the same way).
pub(crate) fn exempt(res: &ResourceType) -> bool {
    res.group == GROUP
}

/// What the API refuses in a webhook configuration, as apimachinery's validation words it
/// (the subset this server relies on); empty for every other kind.
pub(crate) fn config_causes(res: &ResourceType, obj: &Value) -> Vec<Cause> {
    let mutating = match (res.group.as_str(), res.kind.as_str()) {
        (GROUP, "MutatingWebhookConfiguration") => true,
        (GROUP, "ValidatingWebhookConfiguration") => false,
        _ => return Vec::new(),
    };
    let mut causes = Vec::new();
    let mut names = Vec::new();
    for (i, w) in obj["webhooks"].as_array().into_iter().flatten().enumerate() {
        let at = |field: &str| format!("webhooks[{i}].{field}");
        let name = w["name"].as_str().unwrap_or_default();
        if name.is_empty() {
            causes.push(Cause::required(&at("name"), ""));
        } else if names.contains(&name) {
            causes.push(Cause {
                reason: "FieldValueDuplicate",
                field: at("name"),
                message: format!("Duplicate value: {name:?}"),
            });
        }
        names.push(name);
        let side_effects = w["sideEffects"].as_str().unwrap_or_default();
        // v1 admits only None and NoneOnDryRun; Some and Unknown are kept so that tests can
        // prove a dry run never reaches such a webhook.
        let known = ["None", "NoneOnDryRun", "Some", "Unknown"];
        if side_effects.is_empty() {
            causes.push(Cause::not_supported(&at("sideEffects"), "", &known));
        } else if !known.contains(&side_effects) {
            causes.push(Cause::not_supported(
                &at("sideEffects"),
                side_effects,
                &known,
            ));
        }
        if w["admissionReviewVersions"]
            .as_array()
            .is_none_or(|v| v.is_empty())
        {
            causes.push(Cause::required(
                &at("admissionReviewVersions"),
                "must specify one of v1, v1beta1",
            ));
        }
        if let Some(policy) = w["failurePolicy"].as_str()
            && !["Fail", "Ignore"].contains(&policy)
        {
            let supported = ["Fail", "Ignore"];
            causes.push(Cause::not_supported(
                &at("failurePolicy"),
                policy,
                &supported,
            ));
        }
        if let Some(t) = w["timeoutSeconds"].as_i64()
            && !(1..=30).contains(&t)
        {
            causes.push(Cause::invalid(
                &at("timeoutSeconds"),
                &t.to_string(),
                "the timeout value must be between 1 and 30 seconds",
            ));
        }
        causes.extend(client_causes(&w["clientConfig"], &at("clientConfig")));
        for field in ["namespaceSelector", "objectSelector"] {
            let parsed = serde_json::from_value::<Option<MetaSelector>>(w[field].clone())
                .map_err(|e| e.to_string())
                .and_then(|s| selector(s.as_ref()).map_err(|e| e.to_string()));
            if let Err(e) = parsed {
                causes.push(Cause::invalid(&at(field), &w[field].to_string(), &e));
            }
        }
    }
    if causes.is_empty()
        && let Err(e) = decode(obj.to_string().as_bytes(), mutating)
    {
        causes.push(Cause::invalid("webhooks", "", &e.to_string()));
    }
    causes
}

/// `clientConfig`: exactly one of `url` (https, no user or fragment) and `service`.
fn client_causes(client: &Value, at: &str) -> Vec<Cause> {
    let url = client["url"].as_str();
    let service = client.get("service").filter(|s| !s.is_null());
    match (url, service) {
        (Some(_), Some(_)) | (None, None) => vec![Cause::required(
            at,
            "exactly one of url or service is required",
        )],
        (Some(url), None) => {
            let field = format!("{at}.url");
            match url.parse::<http::Uri>() {
                Ok(u) if u.scheme_str() == Some("https") && u.host().is_some() => Vec::new(),
                Ok(u) if u.scheme_str() != Some("https") => vec![Cause::not_supported(
                    &field,
                    u.scheme_str().unwrap_or_default(),
                    &["https"],
                )],
                Ok(_) => vec![Cause::invalid(
                    &field,
                    &format!("{url:?}"),
                    "host must be specified",
                )],
                Err(e) => vec![Cause::invalid(&field, &format!("{url:?}"), &e.to_string())],
            }
        }
        (None, Some(_)) => Vec::new(),
    }
}
