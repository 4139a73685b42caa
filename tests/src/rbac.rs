//! A least-privilege host against the embedded API server: its identity, rules shaped as a
//! ClusterRole's, and echoing plugins naming the kinds they watch.

use std::path::Path;

use informant_devserver::audit::AllowRule;

use crate::plugins::wasm;

/// The host's identity, as the Helm chart's ServiceAccount would be.
pub const HOST: &str = "system:serviceaccount:informant:informant";

/// `verbs` on `resource` (`plural` or `plural.group`) in every namespace and at cluster scope.
pub fn rule(verbs: &[&str], resource: &str) -> AllowRule {
    AllowRule {
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        resource: resource.into(),
        namespace: None,
        ..AllowRule::default()
    }
}

/// Read ConfigMaps and Deployments; ask what it may do (every authenticated user may).
pub fn reader_rules() -> Vec<AllowRule> {
    vec![
        rule(&["get", "list", "watch"], "configmaps"),
        rule(&["get", "list", "watch"], "deployments.apps"),
        rule(&["create"], "selfsubjectaccessreviews.authorization.k8s.io"),
        rule(&["create"], "selfsubjectrulesreviews.authorization.k8s.io"),
    ]
}

/// Installs in `dir` the hostile test plugin as `name`, echoing every event of
/// `api_version`/`kind` tagged with its name.
pub fn echo(dir: &Path, name: &str, api_version: &str, kind: &str) {
    std::fs::copy(wasm("hostile"), dir.join(format!("{name}.wasm"))).unwrap();
    std::fs::write(
        dir.join(format!("{name}.toml")),
        format!(
            "[limits]\ndeadline-ms = 2000\nmemory-mib = 16\n[[watch]]\napi-version = \"{api_version}\"\nkind = \"{kind}\"\n[config]\nmode = \"echo\"\ntag = \"{name}\"\n"
        ),
    )
    .unwrap();
}
