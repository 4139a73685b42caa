//! What one admin caller may see: everything (the operator, or an admin served without
//! authentication on loopback), or the data of some tenants only.
//!
//! Authorization decides the scope once per request; every endpoint filters its answer by it,
//! so a tenant's identity never reads another tenant's plugin, log line, dead letter or metric
//! series. Top-level plugins (tenant `""`) are the operator's: only [`Scope::Everything`] sees
//! them, as it alone sees the host's own series (informers, reflectors, state).

use std::collections::BTreeSet;

/// The part of the admin surface one caller may read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every tenant, the operator's plugins and the host's own figures.
    Everything,
    /// Only these tenants' plugins and series (possibly none).
    Tenants(BTreeSet<String>),
}

impl Scope {
    /// Whether plugins of `tenant` (`""`: the operator's top-level plugins) are visible.
    pub fn sees_tenant(&self, tenant: &str) -> bool {
        match self {
            Scope::Everything => true,
            Scope::Tenants(set) => !tenant.is_empty() && set.contains(tenant),
        }
    }

    /// Whether the host's own figures (informers, reflectors, state, shard) are visible.
    pub fn sees_host(&self) -> bool {
        matches!(self, Scope::Everything)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_scope_sees_its_tenants_only_and_never_the_operators() {
        let s = Scope::Tenants(["team-a".to_string()].into());
        assert!(s.sees_tenant("team-a"));
        assert!(!s.sees_tenant("team-b"));
        assert!(!s.sees_tenant(""));
        assert!(!s.sees_tenant("team-a "));
        assert!(!s.sees_host());
        assert!(Scope::Everything.sees_tenant(""));
        assert!(Scope::Everything.sees_host());
    }
}
