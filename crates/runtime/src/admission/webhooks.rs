//! The webhook configurations that send the API server's admission requests to this host: one
//! `ValidatingWebhookConfiguration` and one `MutatingWebhookConfiguration`, both named after
//! the host, holding a webhook per hook of every running plugin, server-side applied whenever
//! the hooks change.
//!
//! Each webhook names the hook's kind and operations (`matchPolicy: Exact`), its timeout and
//! failure policy, `sideEffects: None`, the manifest's selectors, and for a tenant granted
//! namespaces by name, those namespaces (`kubernetes.io/metadata.name`): the API server then
//! sends a tenant's hook nothing from elsewhere, and the server checks the grant again per
//! request. An empty list of hooks leaves both configurations with no webhooks.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector as K8sSelector, LabelSelectorRequirement, ObjectMeta,
};
use kube::api::{Api, Patch, PatchParams};

use crate::apimachinery::{LabelSelector, Requirement};
use crate::manifest::admit::Mode;
use crate::plugin::exec::admit::{Admitter, Hook};
use crate::plugin::id::PluginId;

/// The field manager the configurations are applied as.
pub(crate) const FIELD_MANAGER: &str = "informant";

/// Where the API server reaches the webhook server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A base URL, `https://HOST[:PORT]` (outside a cluster, and in `informant dev`).
    Url(String),
    /// A Service in the cluster.
    Service {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Its port.
        port: i32,
    },
}

/// What the configurations say about this host.
#[derive(Debug, Clone)]
pub struct Registration {
    /// The configurations' name.
    pub name: String,
    /// Where requests go.
    pub endpoint: Endpoint,
    /// The CA certificates (PEM) the API server verifies the server with, as they change.
    pub ca_bundle: tokio::sync::watch::Receiver<Vec<u8>>,
}

/// What a path segment keeps unencoded: RFC 3986's unreserved characters.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The path a hook is served at (segments percent-encoded).
pub fn path(id: &PluginId, hook: &str) -> String {
    let seg = |s: &str| percent_encoding::utf8_percent_encode(s, SEGMENT).to_string();
    if id.tenant.is_empty() {
        format!("/admit/{}/{}", seg(&id.name), seg(hook))
    } else {
        format!("/admit/{}/{}/{}", seg(&id.tenant), seg(&id.name), seg(hook))
    }
}

/// A webhook's name: a DNS subdomain of three labels at least, unique per hook.
fn webhook_name(id: &PluginId, hook: &str) -> String {
    let label = |s: &str| {
        let l: String = s
            .chars()
            .map(|c| match c.to_ascii_lowercase() {
                c @ ('a'..='z' | '0'..='9' | '-') => c,
                _ => '-',
            })
            .take(63)
            .collect();
        l.trim_matches('-').to_string()
    };
    let tenant = if id.tenant.is_empty() {
        "operator".to_string()
    } else {
        label(&id.tenant)
    };
    format!(
        "{}.{}.{tenant}.admit.informant.dev",
        label(hook),
        label(&id.name)
    )
}

fn client_config(
    reg: &Registration,
    ca_bundle: &[u8],
    id: &PluginId,
    hook: &str,
) -> WebhookClientConfig {
    let path = path(id, hook);
    let (url, service) = match &reg.endpoint {
        Endpoint::Url(base) => (Some(format!("{}{path}", base.trim_end_matches('/'))), None),
        Endpoint::Service {
            namespace,
            name,
            port,
        } => (
            None,
            Some(ServiceReference {
                namespace: namespace.clone(),
                name: name.clone(),
                port: Some(*port),
                path: Some(path),
            }),
        ),
    };
    WebhookClientConfig {
        url,
        service,
        ca_bundle: Some(ByteString(ca_bundle.to_vec())),
    }
}

fn selector(selector: &LabelSelector) -> Vec<LabelSelectorRequirement> {
    let req = |key: &str, operator: &str, values: Option<Vec<String>>| LabelSelectorRequirement {
        key: key.to_string(),
        operator: operator.to_string(),
        values,
    };
    selector
        .requirements()
        .iter()
        .map(|r| match r {
            Requirement::Equals(k, v) => req(k, "In", Some(vec![v.clone()])),
            Requirement::NotEquals(k, v) => req(k, "NotIn", Some(vec![v.clone()])),
            Requirement::In(k, vs) => req(k, "In", Some(vs.iter().cloned().collect())),
            Requirement::NotIn(k, vs) => req(k, "NotIn", Some(vs.iter().cloned().collect())),
            Requirement::Exists(k) => req(k, "Exists", None),
            Requirement::DoesNotExist(k) => req(k, "DoesNotExist", None),
        })
        .collect()
}

/// What one hook's webhook shares between the validating and the mutating form.
struct Common {
    name: String,
    client: WebhookClientConfig,
    rules: Vec<RuleWithOperations>,
    namespace_selector: Option<K8sSelector>,
    object_selector: Option<K8sSelector>,
    failure_policy: String,
    timeout_seconds: i32,
}

fn common(
    reg: &Registration,
    ca_bundle: &[u8],
    id: &PluginId,
    admitter: &Admitter,
    hook: &Hook,
) -> Common {
    let t = &hook.table;
    let ar = &hook.resource.api_resource;
    let parse = |text: &Option<crate::manifest::SelectorText>| {
        text.as_ref()
            .and_then(|s| LabelSelector::parse(&s.0).ok())
            .map(|s| selector(&s))
            .unwrap_or_default()
    };
    let mut in_namespaces = parse(&t.namespace_selector);
    if let Some(names) = admitter.grant().exact_namespaces() {
        in_namespaces.push(LabelSelectorRequirement {
            key: "kubernetes.io/metadata.name".into(),
            operator: "In".into(),
            values: Some(names.into_iter().map(String::from).collect()),
        });
    }
    let wrap = |reqs: Vec<LabelSelectorRequirement>| {
        (!reqs.is_empty()).then_some(K8sSelector {
            match_expressions: Some(reqs),
            match_labels: None,
        })
    };
    Common {
        name: webhook_name(id, t.name.as_str()),
        client: client_config(reg, ca_bundle, id, t.name.as_str()),
        rules: vec![RuleWithOperations {
            api_groups: Some(vec![ar.group.clone()]),
            api_versions: Some(vec![ar.version.clone()]),
            resources: Some(vec![ar.plural.clone()]),
            operations: Some(
                t.operations
                    .iter()
                    .map(|o| o.as_kubernetes().to_string())
                    .collect(),
            ),
            scope: Some(
                if hook.resource.namespaced {
                    "Namespaced"
                } else {
                    "Cluster"
                }
                .into(),
            ),
        }],
        namespace_selector: wrap(in_namespaces),
        object_selector: wrap(parse(&t.object_selector)),
        failure_policy: t.failure_policy.as_kubernetes().into(),
        timeout_seconds: t.timeout_seconds() as i32,
    }
}

/// A webhook of type `$ty` (the validating and mutating ones share these fields) from
/// `common`'s parts, with side effects none, v1 reviews and exact matching, plus `$extra`.
macro_rules! webhook {
    ($ty:ident, $c:expr $(, $field:ident: $value:expr)*) => {{
        let c = $c;
        $ty {
            name: c.name,
            client_config: c.client,
            rules: Some(c.rules),
            namespace_selector: c.namespace_selector,
            object_selector: c.object_selector,
            failure_policy: Some(c.failure_policy),
            timeout_seconds: Some(c.timeout_seconds),
            side_effects: "None".into(),
            admission_review_versions: vec!["v1".into()],
            match_policy: Some("Exact".into()),
            match_conditions: None,
            $($field: $value,)*
        }
    }};
}

/// The two configurations for `hooks` (every running version with hooks, by plugin).
pub fn configurations(
    reg: &Registration,
    hooks: &[(PluginId, Arc<Admitter>)],
) -> (ValidatingWebhookConfiguration, MutatingWebhookConfiguration) {
    let (mut validating, mut mutating) = (Vec::new(), Vec::new());
    let ca_bundle = reg.ca_bundle.borrow().clone();
    for (id, admitter) in hooks {
        for hook in admitter.hooks() {
            let c = common(reg, &ca_bundle, id, admitter, hook);
            let sorted = (c.name.clone(), ());
            match hook.table.mode {
                Mode::Validate => validating.push((sorted, webhook!(ValidatingWebhook, c))),
                Mode::Mutate => mutating.push((
                    sorted,
                    webhook!(MutatingWebhook, c, reinvocation_policy: Some("Never".into())),
                )),
            }
        }
    }
    // Sorted by name: the order the API server calls mutating webhooks in does not depend on
    // the order plugins loaded in.
    validating.sort_by(|a, b| a.0.cmp(&b.0));
    mutating.sort_by(|a, b| a.0.cmp(&b.0));
    let metadata = ObjectMeta {
        name: Some(reg.name.clone()),
        labels: Some(BTreeMap::from([(
            "app.kubernetes.io/managed-by".to_string(),
            "informant".to_string(),
        )])),
        ..Default::default()
    };
    (
        // No hooks: no list, so the apply gives up the webhooks this host owned.
        ValidatingWebhookConfiguration {
            metadata: metadata.clone(),
            webhooks: (!validating.is_empty())
                .then(|| validating.into_iter().map(|(_, w)| w).collect()),
        },
        MutatingWebhookConfiguration {
            metadata,
            webhooks: (!mutating.is_empty())
                .then(|| mutating.into_iter().map(|(_, w)| w).collect()),
        },
    )
}

/// Server-side applies both configurations for `hooks`, taking the fields from any other
/// manager: this host owns them.
pub async fn apply(
    client: &kube::Client,
    reg: &Registration,
    hooks: &[(PluginId, Arc<Admitter>)],
) -> Result<(), kube::Error> {
    let (validating, mutating) = configurations(reg, hooks);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut validating = serde_json::to_value(&validating).map_err(kube::Error::SerdeError)?;
    validating["apiVersion"] = "admissionregistration.k8s.io/v1".into();
    validating["kind"] = "ValidatingWebhookConfiguration".into();
    let mut mutating = serde_json::to_value(&mutating).map_err(kube::Error::SerdeError)?;
    mutating["apiVersion"] = "admissionregistration.k8s.io/v1".into();
    mutating["kind"] = "MutatingWebhookConfiguration".into();
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .patch(&reg.name, &params, &Patch::Apply(&validating))
        .await?;
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .patch(&reg.name, &params, &Patch::Apply(&mutating))
        .await?;
    Ok(())
}

/// Keeps both configurations in step with the hooks that run: applied at start and again
/// whenever a plugin version with hooks comes or goes; a failed apply is retried with a backoff
/// (and logged), never given up. Stops when dropped.
pub(crate) struct Registrar(tokio::task::JoinHandle<()>);

impl Registrar {
    /// Follows `host`'s running versions, applying through `client` as `reg` says.
    pub(crate) fn start(
        client: kube::Client,
        reg: Registration,
        host: Arc<crate::plugin::load::loader::PluginHost>,
    ) -> Registrar {
        Registrar(tokio::spawn(async move {
            let mut changes = host.subscribe_running();
            let mut bundle = reg.ca_bundle.clone();
            let backoff = crate::backoff::Backoff::new(
                std::time::Duration::from_millis(500),
                std::time::Duration::from_secs(60),
            );
            let (mut applied, mut failures) = (None, 0u32);
            loop {
                let hooks = host.admitters();
                let wanted = serde_json::to_value(configurations(&reg, &hooks)).ok();
                if wanted != applied {
                    match apply(&client, &reg, &hooks).await {
                        Ok(()) => {
                            let webhooks =
                                hooks.iter().map(|(_, a)| a.hooks().len()).sum::<usize>();
                            tracing::info!(name = %reg.name, webhooks, "admission webhook configurations applied");
                            applied = wanted;
                            failures = 0;
                        }
                        Err(e) => {
                            let wait = backoff.delay(failures);
                            failures = failures.saturating_add(1);
                            tracing::warn!(name = %reg.name, error = %e, retry_in = ?wait, "cannot apply the admission webhook configurations");
                            tokio::select! {
                                () = tokio::time::sleep(wait) => continue,
                                changed = changes.changed() => if changed.is_err() { break } else { continue },
                            }
                        }
                    }
                }
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { break },
                    changed = bundle.changed() => if changed.is_err() { break },
                }
            }
        }))
    }
}

impl Drop for Registrar {
    fn drop(&mut self) {
        self.0.abort();
    }
}
