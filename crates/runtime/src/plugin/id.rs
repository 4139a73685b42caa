//! Which plugin: a tenant and a name.

/// Which plugin: its tenant (empty for top-level plugins) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PluginId {
    /// The subdirectory it sits in, or empty.
    pub tenant: String,
    /// The file stem.
    pub name: String,
}

impl PluginId {
    /// The span a plugin's load, calls and host imports are logged in: its tenant and name are
    /// fields of the span, not of each line.
    pub fn span(&self) -> tracing::Span {
        tracing::info_span!("plugin", plugin = %self.name, tenant = %self.tenant)
    }

    /// Stands for a whole directory in errors: the plugins directory (`tenant` empty) or a
    /// tenant's.
    pub fn directory(tenant: &str) -> Self {
        PluginId {
            tenant: tenant.to_string(),
            name: "*".into(),
        }
    }
}

impl std::fmt::Display for PluginId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.tenant.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.tenant, self.name)
        }
    }
}
