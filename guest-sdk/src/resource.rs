//! Kubernetes kinds as the host names them.

use std::fmt;

/// A Kubernetes kind: `group` is empty for the core group (`v1`).
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Resource {
    /// API group, empty for the core group.
    pub group: String,
    /// API version within the group, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `ReplicaSet`.
    pub kind: String,
}

impl Resource {
    /// A kind from its parts.
    pub fn new(
        group: impl Into<String>,
        version: impl Into<String>,
        kind: impl Into<String>,
    ) -> Self {
        Resource {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    /// The kind of a `k8s-openapi` type, e.g. `Resource::of::<Deployment>()`.
    pub fn of<K: k8s_openapi::Resource>() -> Self {
        Resource::new(K::GROUP, K::VERSION, K::KIND)
    }

    /// A kind from an `apiVersion` string (`v1`, `apps/v1`) and a kind name.
    pub fn from_api_version(api_version: &str, kind: impl Into<String>) -> Self {
        match api_version.split_once('/') {
            Some((group, version)) => Resource::new(group, version, kind),
            None => Resource::new("", api_version, kind),
        }
    }

    /// The `apiVersion` objects of this kind carry: `version` for the core group, else `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    #[cfg(target_arch = "wasm32")]
    pub(crate) fn to_wit(&self) -> crate::wit::informant::plugin::types::Resource {
        crate::wit::informant::plugin::types::Resource {
            group: self.group.clone(),
            version: self.version.clone(),
            kind: self.kind.clone(),
        }
    }
}

/// Shows `apiVersion/kind`, e.g. `apps/v1/Deployment` or `v1/ConfigMap`.
impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.api_version(), self.kind)
    }
}
