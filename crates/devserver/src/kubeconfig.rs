//! Kubeconfig and client for a running server: one cluster, one user, one context, all named
//! `informant`, plain HTTP. The user is anonymous (the server's unrestricted admin) or carries
//! a bearer token the server maps to a named user.

use std::path::Path;

use super::{Error, Result};

const NAME: &str = "informant";

fn yaml(url: &str, token: Option<&str>) -> String {
    // Tokens are `informant-<hex>`, issued by this server: nothing in them needs YAML quoting.
    let user = token.map_or_else(|| "{}".to_string(), |t| format!("{{token: {t}}}"));
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {NAME}\n  cluster:\n    server: {url}\n\
         contexts:\n- name: {NAME}\n  context:\n    cluster: {NAME}\n    user: {NAME}\n    namespace: default\n\
         current-context: {NAME}\nusers:\n- name: {NAME}\n  user: {user}\npreferences: {{}}\n"
    )
}

/// The kubeconfig as a typed value.
pub(crate) fn kubeconfig(url: &str, token: Option<&str>) -> kube::config::Kubeconfig {
    // The YAML is generated above from a URL we formatted ourselves; it always parses.
    kube::config::Kubeconfig::from_yaml(&yaml(url, token)).expect("generated kubeconfig parses")
}

/// Writes the kubeconfig YAML.
pub(crate) fn write(url: &str, token: Option<&str>, path: &Path) -> Result<()> {
    std::fs::write(path, yaml(url, token)).map_err(|source| Error::WriteKubeconfig {
        path: path.to_path_buf(),
        source,
    })
}

/// A kube client for `url`, with the user of [`kubeconfig`] (so the client sends exactly what
/// the kubeconfig holds).
pub(crate) fn client(url: &str, token: Option<&str>) -> kube::Client {
    // Both steps only fail for TLS/auth setup, which a plain-http config with at most a static
    // token has none of.
    let uri = url.parse().expect("server URL is a valid URI");
    let mut config = kube::Config::new(uri);
    let user = kubeconfig(url, token)
        .auth_infos
        .into_iter()
        .next()
        .and_then(|named| named.auth_info);
    if let Some(user) = user {
        config.auth_info = user;
    }
    kube::Client::try_from(config).expect("plain-http kube client builds")
}
