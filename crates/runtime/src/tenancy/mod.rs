//! Who may see what: tenant grants and quotas, applied by the host to loads, events and queries.
//!
//! - [`grant`]: a tenant's namespaces, resources and cluster-scoped visibility.
//! - [`budget`]: a tenant's event-rate budget, shared by its plugins.
//!
//! A plugin's tenant is the subdirectory of the plugins directory it sits in; the plugin has no
//! say in it. Plugins at the top level are the operator's and see everything, but only where
//! [`Tenancy::operator_plugins`] allows them.
//!
//! Informers stay shared: tenants watching the same resource share one watch, and the grant is
//! applied per plugin when events are queued and when the cache is queried.

pub(crate) mod budget;
pub(crate) mod grant;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use budget::{Budget, Budgeted};
pub use grant::{BadPattern, Grant, NamespacePattern, Outside, ResourceRule};

/// Why a plugin's tenant may not load plugins at all.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Denied {
    /// Top-level plugins are not enabled.
    #[error(
        "plugins at the top level of the plugins directory are the operator's and are not enabled \
         (set `operator-plugins = true` in informant.toml, or move the plugin into a tenant's directory)"
    )]
    OperatorPluginsDisabled,
    /// The directory names a tenant the config does not know.
    #[error("tenant `{0}` has no grant in informant.toml (add a [tenants.{0}] table)")]
    UnknownTenant(String),
}

/// One tenant's grant and quotas.
#[derive(Debug, Clone)]
pub struct TenantPolicy {
    /// What its plugins may see.
    pub grant: Arc<Grant>,
    /// How many plugins it may run.
    pub max_plugins: usize,
    /// Memory ceiling per plugin (MiB); the host's ceiling when `None`.
    pub max_memory_mib: Option<u32>,
    /// Deadline ceiling per event (ms); the host's ceiling when `None`.
    pub max_deadline_ms: Option<u32>,
    /// Events per second shared by its plugins; unlimited when `None`.
    pub budget: Option<Arc<Budget>>,
    /// Informers its plugins may use together (each is a list+watch and a cache).
    pub max_informers: usize,
    /// Field indexes its plugins may declare together (each costs work on every change).
    pub max_field_indexes: usize,
    /// Origins its plugins may name in `allowed-outbound-hosts`; `None`: no ceiling (the
    /// operator's plugins: the manifest alone decides).
    pub allowed_outbound_hosts: Option<Vec<crate::manifest::Origin>>,
    /// What its plugins may name in `[[write]]`; `None`: no ceiling (the operator's plugins).
    pub writes: Option<Vec<crate::manifest::Write>>,
    /// Who its writes are sent as; `None`: the host's own identity.
    pub impersonate: Option<Impersonate>,
    /// Writes per second shared by its plugins; unlimited when `None`.
    pub write_budget: Option<Arc<Budget>>,
    /// Series and bytes its plugins' own metrics may hold together.
    pub metrics: crate::plugin::metrics::MetricLimits,
    /// `[[schedule]]` tables its plugins may declare together.
    pub max_schedules: usize,
}

/// An identity writes are sent as (`Impersonate-User`, `Impersonate-Group`), so the cluster's
/// RBAC judges a tenant's writes by the tenant's own rights.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Impersonate {
    /// The user, e.g. `system:serviceaccount:team-a:informant-team-a`.
    pub user: String,
    /// Extra groups.
    pub groups: Vec<String>,
}

/// Equal when they admit and limit alike; budgets compare by rate, not by their buckets.
impl PartialEq for TenantPolicy {
    fn eq(&self, other: &Self) -> bool {
        self.grant == other.grant
            && self.max_plugins == other.max_plugins
            && self.max_memory_mib == other.max_memory_mib
            && self.max_deadline_ms == other.max_deadline_ms
            && self.max_informers == other.max_informers
            && self.max_field_indexes == other.max_field_indexes
            && self.allowed_outbound_hosts == other.allowed_outbound_hosts
            && self.writes == other.writes
            && self.impersonate == other.impersonate
            && self.budget.as_ref().map(|b| b.rate()) == other.budget.as_ref().map(|b| b.rate())
            && self.write_budget.as_ref().map(|b| b.rate())
                == other.write_budget.as_ref().map(|b| b.rate())
            && self.metrics == other.metrics
            && self.max_schedules == other.max_schedules
    }
}

impl TenantPolicy {
    /// The operator's policy: everything visible, no quotas beyond the host's.
    pub fn operator() -> Self {
        TenantPolicy {
            grant: Arc::new(Grant::full()),
            max_plugins: usize::MAX,
            max_memory_mib: None,
            max_deadline_ms: None,
            budget: None,
            max_informers: usize::MAX,
            max_field_indexes: usize::MAX,
            allowed_outbound_hosts: None,
            writes: None,
            impersonate: None,
            write_budget: None,
            metrics: crate::plugin::metrics::MetricLimits::UNLIMITED,
            max_schedules: usize::MAX,
        }
    }
}

/// Every tenant's policy, and whether operator plugins may run.
#[derive(Debug, Clone)]
pub struct Tenancy {
    /// Whether top-level plugins run (with full access).
    pub operator_plugins: bool,
    /// Tenants by directory name.
    pub tenants: BTreeMap<String, Arc<TenantPolicy>>,
    operator: Arc<TenantPolicy>,
}

impl Default for Tenancy {
    /// Single-user: top-level plugins see everything; no tenant directories are accepted.
    fn default() -> Self {
        Tenancy::new(true, BTreeMap::new())
    }
}

impl Tenancy {
    /// A policy set.
    pub fn new(operator_plugins: bool, tenants: BTreeMap<String, Arc<TenantPolicy>>) -> Self {
        Tenancy {
            operator_plugins,
            tenants,
            operator: Arc::new(TenantPolicy::operator()),
        }
    }

    /// Takes over `old`'s policy for every tenant whose policy is unchanged, so a config reload
    /// leaves those tenants' plugins alone (the loader compares policies by identity) and their
    /// event budget keeps its bucket rather than starting a second one.
    pub fn keep_unchanged(&mut self, old: &Tenancy) {
        for (name, policy) in &mut self.tenants {
            if let Some(before) = old.tenants.get(name)
                && before == policy
            {
                *policy = before.clone();
            }
        }
        self.operator = old.operator.clone();
    }

    /// The policy for plugins in `tenant`'s directory (empty: the top level).
    pub fn policy(&self, tenant: &str) -> Result<Arc<TenantPolicy>, Denied> {
        if tenant.is_empty() {
            return if self.operator_plugins {
                Ok(self.operator.clone())
            } else {
                Err(Denied::OperatorPluginsDisabled)
            };
        }
        self.tenants
            .get(tenant)
            .cloned()
            .ok_or_else(|| Denied::UnknownTenant(tenant.to_string()))
    }
}
