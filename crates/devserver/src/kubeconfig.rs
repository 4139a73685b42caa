//! Kubeconfig and client for a running server: one cluster, one anonymous user, one context, all
//! named `informant`, plain HTTP.

use std::path::Path;

use super::{Error, Result};

const NAME: &str = "informant";

fn yaml(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {NAME}\n  cluster:\n    server: {url}\n\
         contexts:\n- name: {NAME}\n  context:\n    cluster: {NAME}\n    user: {NAME}\n    namespace: default\n\
         current-context: {NAME}\nusers:\n- name: {NAME}\n  user: {{}}\npreferences: {{}}\n"
    )
}

/// The kubeconfig as a typed value.
pub(crate) fn kubeconfig(url: &str) -> kube::config::Kubeconfig {
    // The YAML is generated above from a URL we formatted ourselves; it always parses.
    kube::config::Kubeconfig::from_yaml(&yaml(url)).expect("generated kubeconfig parses")
}

/// Writes the kubeconfig YAML.
pub(crate) fn write(url: &str, path: &Path) -> Result<()> {
    std::fs::write(path, yaml(url)).map_err(|source| Error::WriteKubeconfig {
        path: path.to_path_buf(),
        source,
    })
}

/// A kube client for `url`.
pub(crate) fn client(url: &str) -> kube::Client {
    // Both steps only fail for TLS/auth setup, which a plain-http anonymous config has none of.
    let uri = url.parse().expect("server URL is a valid URI");
    kube::Client::try_from(kube::Config::new(uri)).expect("plain-http kube client builds")
}
