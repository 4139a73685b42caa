//! The host config file, `informant.toml`: plugin limits and tenants with their grants.
//!
//! Validated while reading: unknown keys, malformed globs and resources, limits that are not
//! positive, defaults above ceilings and namespaces granted to two tenants are refused, each
//! error naming the file, the key and the reason. A [`ConfigWatcher`] applies changes to the file
//! without a restart.
//!
//! Every key, its default and what it does: the book's configuration reference,
//! `docs/src/configuration.md` (a test holds its table equal to the fields parsed here).

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod reference;
mod registry_grant;
mod signatures;
mod watch;

pub use watch::ConfigWatcher;

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use informant_manifest::toml_error::{self, Table};
use serde::Deserialize;

use crate::plugin::load::host_config::{HostConfig, SignaturePolicy, SourceSpec};
use crate::plugin::metrics::{MetricLimits, name as metric_name};
use crate::tenancy::{
    Budget, Grant, Impersonate, NamespacePattern, ResourceRule, Tenancy, TenantPolicy,
};
use registry_grant::RegistryGrant;
use signatures::FileSignatures;

/// Plugins a tenant may run when its table does not say.
pub(crate) const DEFAULT_MAX_PLUGINS: u32 = 10;

/// Informers a tenant's plugins may use together when its table does not say.
pub(crate) const DEFAULT_MAX_INFORMERS: u32 = 32;

/// Field indexes a tenant's plugins may declare together when its table does not say.
pub(crate) const DEFAULT_MAX_FIELD_INDEXES: u32 = 16;

/// Writes per second a tenant's plugins share when its table does not say.
pub(crate) const DEFAULT_WRITES_PER_SECOND: u32 = 20;

/// `[[schedule]]` tables a tenant's plugins may declare together when neither its table nor
/// `limits.tenant-max-schedules` says.
pub(crate) const DEFAULT_TENANT_MAX_SCHEDULES: u32 = 64;

/// `informant.toml` could not be read or is invalid.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("config `{path}`: {source}")]
    Io {
        /// The config file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A key is unknown or its value invalid; the message names the key and the reason.
    #[error("config `{path}`: {message}")]
    Invalid {
        /// The config file.
        path: PathBuf,
        /// What is wrong, where.
        message: String,
    },
}

/// A whole number greater than zero, refused with a clear message otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "i64")]
struct Positive(NonZeroU32);

impl TryFrom<i64> for Positive {
    type Error = NotPositive;
    fn try_from(n: i64) -> Result<Self, NotPositive> {
        u32::try_from(n)
            .ok()
            .and_then(NonZeroU32::new)
            .map(Positive)
            .ok_or(NotPositive(n))
    }
}

/// A count or size that must be a positive `u32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("must be a whole number from 1 to {max}, got {0}", max = u32::MAX)]
struct NotPositive(i64);

impl Positive {
    fn get(self) -> u32 {
        self.0.get()
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct File {
    /// Read only to refuse a version other than 1.
    #[serde(default)]
    #[allow(dead_code)]
    manifest_version: informant_manifest::version::FormatVersion,
    operator_plugins: Option<bool>,
    /// With `--shard-group`: whether plugins or whole tenants are spread across replicas.
    #[serde(default)]
    shard_by: crate::shard::ShardBy,
    #[serde(default, deserialize_with = "toml_error::table")]
    limits: FileLimits,
    #[serde(default)]
    tenants: BTreeMap<String, Table<FileTenant>>,
    #[serde(default, deserialize_with = "toml_error::tables")]
    sources: Vec<FileSource>,
    signatures: Option<FileSignatures>,
    #[serde(default)]
    mirrors: BTreeMap<String, Vec<String>>,
}

/// A `[[sources]]` table: a plugin pulled from an OCI registry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FileSource {
    reference: String,
    name: Option<String>,
    poll_seconds: Option<u32>,
    registry_config: Option<PathBuf>,
    registry_ca: Option<PathBuf>,
    #[serde(default)]
    plain_http: bool,
}

/// How often a tag is resolved again when its table does not say.
pub(crate) const DEFAULT_SOURCE_POLL_SECONDS: u32 = 300;

/// A `[[sources]]` table that cannot be followed; each names its key.
#[derive(Debug, thiserror::Error)]
enum BadSource {
    /// `reference` does not parse.
    #[error(
        "key `{key}.reference`: `{reference}` is not an OCI reference (REGISTRY/REPOSITORY:TAG or @sha256:…): {source}"
    )]
    Reference {
        /// The table's key.
        key: String,
        /// What it says.
        reference: String,
        /// Why it does not parse.
        #[source]
        source: informant_oci::ParseError,
    },
    /// `name` cannot name the plugin's files.
    #[error("key `{key}.name`: {name:?} {reason}")]
    Name {
        /// The table's key.
        key: String,
        /// The name.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// With no `name`, the repository's last segment cannot name the plugin's files.
    #[error("key `{key}.reference`: its repository's last segment {name:?} {reason}: set `name`")]
    RepositoryName {
        /// The table's key.
        key: String,
        /// That segment.
        name: String,
        /// Why.
        reason: &'static str,
    },
}

impl FileSource {
    /// The source for `tenant`, or why not (`key` names the table in errors).
    fn spec(
        &self,
        tenant: &str,
        key: &str,
        signatures: Option<&SignaturePolicy>,
    ) -> Result<SourceSpec, BadSource> {
        let reference: informant_oci::Reference =
            self.reference
                .parse()
                .map_err(|source| BadSource::Reference {
                    key: key.to_string(),
                    reference: self.reference.clone(),
                    source,
                })?;
        let name = match &self.name {
            Some(n) => n.clone(),
            None => informant_oci::layout::repository_name(&reference).to_string(),
        };
        informant_oci::layout::check_name(&name).map_err(|reason| {
            let (key, name) = (key.to_string(), name.clone());
            match &self.name {
                Some(_) => BadSource::Name { key, name, reason },
                None => BadSource::RepositoryName { key, name, reason },
            }
        })?;
        let poll = match (reference.digest(), self.poll_seconds) {
            (Some(_), _) | (None, Some(0)) => None,
            (None, s) => Some(std::time::Duration::from_secs(
                s.unwrap_or(DEFAULT_SOURCE_POLL_SECONDS).into(),
            )),
        };
        Ok(SourceSpec {
            tenant: tenant.to_string(),
            reference: self.reference.clone(),
            name,
            poll,
            registry_config: self.registry_config.clone(),
            registry_ca: self.registry_ca.clone(),
            plain_http: self.plain_http,
            signatures: signatures.cloned(),
        })
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FileLimits {
    default_memory_mib: Option<Positive>,
    max_memory_mib: Option<Positive>,
    default_deadline_ms: Option<Positive>,
    max_deadline_ms: Option<Positive>,
    max_wasm_mib: Option<Positive>,
    max_manifest_kib: Option<Positive>,
    max_watches: Option<Positive>,
    max_log_bytes: Option<Positive>,
    max_error_bytes: Option<Positive>,
    log_lines_per_second: Option<Positive>,
    max_metric_series: Option<Positive>,
    max_metric_kib: Option<Positive>,
    tenant_max_metric_series: Option<Positive>,
    tenant_max_metric_kib: Option<Positive>,
    max_schedules: Option<Positive>,
    tenant_max_schedules: Option<Positive>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FileTenant {
    #[serde(default)]
    namespaces: Vec<NamespacePattern>,
    resources: Option<Vec<ResourceRule>>,
    #[serde(default)]
    cluster_scoped: bool,
    max_plugins: Option<Positive>,
    max_memory_mib: Option<Positive>,
    max_deadline_ms: Option<Positive>,
    events_per_second: Option<Positive>,
    max_informers: Option<Positive>,
    max_field_indexes: Option<Positive>,
    #[serde(default)]
    allowed_outbound_hosts: Vec<crate::manifest::Origin>,
    impersonate: Option<String>,
    #[serde(default)]
    impersonate_groups: Vec<String>,
    writes_per_second: Option<Positive>,
    max_metric_series: Option<Positive>,
    max_metric_kib: Option<Positive>,
    max_schedules: Option<Positive>,
    #[serde(default, deserialize_with = "toml_error::tables")]
    write: Vec<crate::manifest::Write>,
    #[serde(default, deserialize_with = "toml_error::tables")]
    sources: Vec<FileSource>,
    signatures: Option<FileSignatures>,
    #[serde(default)]
    registries: Vec<String>,
    #[serde(default)]
    registry_configs: Vec<PathBuf>,
}

/// Reads and validates `informant.toml` into the host's plugin settings.
pub fn load(path: &Path) -> Result<HostConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, path)
}

/// Parses config text; `path` is only for messages.
pub fn parse(text: &str, path: &Path) -> Result<HostConfig, ConfigError> {
    let invalid = |message: String| ConfigError::Invalid {
        path: path.to_path_buf(),
        message,
    };
    let file: File = toml_error::from_str(text).map_err(|e| invalid(e.to_string()))?;
    let mut host = HostConfig::default();
    let l = &file.limits;
    for (value, slot) in [
        (l.default_memory_mib, &mut host.default_memory_mib),
        (l.max_memory_mib, &mut host.max_memory_mib),
        (l.default_deadline_ms, &mut host.default_deadline_ms),
        (l.max_deadline_ms, &mut host.max_deadline_ms),
    ] {
        if let Some(v) = value {
            *slot = v.get();
        }
    }
    if let Some(v) = l.max_wasm_mib {
        host.max_wasm_bytes = u64::from(v.get()) << 20;
    }
    if let Some(v) = l.max_manifest_kib {
        host.max_manifest_bytes = u64::from(v.get()) << 10;
    }
    if let Some(v) = l.max_watches {
        host.max_watches = v.get();
    }
    if let Some(v) = l.max_log_bytes {
        host.text.log_bytes = v.get() as usize;
    }
    if let Some(v) = l.max_error_bytes {
        host.text.error_bytes = v.get() as usize;
    }
    if let Some(v) = l.log_lines_per_second {
        host.text.log_lines_per_second = v.get();
    }
    if let Some(v) = l.max_metric_series {
        host.metrics.max_series = v.get() as usize;
    }
    if let Some(v) = l.max_metric_kib {
        host.metrics.max_bytes = kib(v);
    }
    if let Some(v) = l.max_schedules {
        host.max_schedules = v.get() as usize;
    }
    let tenant_metrics = MetricLimits {
        max_series: l
            .tenant_max_metric_series
            .map_or(MetricLimits::TENANT_DEFAULT.max_series, |v| {
                v.get() as usize
            }),
        max_bytes: l
            .tenant_max_metric_kib
            .map_or(MetricLimits::TENANT_DEFAULT.max_bytes, kib),
    };
    let tenant_max_schedules = l
        .tenant_max_schedules
        .map_or(DEFAULT_TENANT_MAX_SCHEDULES, Positive::get);
    // The operator's policy, and each tenant's unless it has its own.
    let operator_policy = match &file.signatures {
        Some(s) => Some(s.policy("signatures").map_err(|e| invalid(e.to_string()))?),
        None => None,
    };
    for (default, max, what) in [
        (host.default_memory_mib, host.max_memory_mib, "memory-mib"),
        (
            host.default_deadline_ms,
            host.max_deadline_ms,
            "deadline-ms",
        ),
    ] {
        if default > max {
            return Err(invalid(format!(
                "key `limits.default-{what}`: {default} is above `limits.max-{what}` ({max})"
            )));
        }
    }
    let mut tenants = BTreeMap::new();
    let mut claimed: Vec<(&str, &NamespacePattern)> = Vec::new();
    let mut forms: BTreeMap<String, &str> = BTreeMap::new();
    for (name, Table(t)) in &file.tenants {
        let key = |k: &str| format!("key `tenants.{name}.{k}`");
        check_tenant_name(name)
            .map_err(|why| invalid(format!("table `[tenants.{name}]`: {why}")))?;
        // Its metric families are named after it: one form per tenant, or two tenants would
        // share families.
        let form = metric_name::tenant_form(name);
        if let Some(other) = forms.insert(form.clone(), name) {
            return Err(invalid(format!(
                "table `[tenants.{name}]`: tenants `{other}` and `{name}` differ only in `-`, `_` or `.`; their plugins' metrics would share the prefix `{}{form}__`",
                metric_name::TENANT_PREFIX
            )));
        }
        if t.namespaces.is_empty() && !t.cluster_scoped {
            return Err(invalid(format!(
                "table `[tenants.{name}]`: grants nothing: give `namespaces` or `cluster-scoped = true`"
            )));
        }
        for p in &t.namespaces {
            if let Some((other, q)) = claimed.iter().find(|(_, q)| p.overlaps(q)) {
                let whose = if *other == name.as_str() {
                    "its own".to_string()
                } else {
                    format!("tenant `{other}`'s")
                };
                return Err(invalid(format!(
                    "{}: `{}` overlaps {whose} `{}`: a namespace may be granted once, to one tenant",
                    key("namespaces"),
                    p.as_str(),
                    q.as_str()
                )));
            }
            claimed.push((name, p));
        }
        for (value, ceiling, what) in [
            (t.max_memory_mib, host.max_memory_mib, "max-memory-mib"),
            (t.max_deadline_ms, host.max_deadline_ms, "max-deadline-ms"),
        ] {
            if let Some(v) = value
                && v.get() > ceiling
            {
                return Err(invalid(format!(
                    "{}: {} is above the host's `limits.{what}` ({ceiling})",
                    key(what),
                    v.get()
                )));
            }
        }
        for (i, w) in t.write.iter().enumerate() {
            let field = |f: &str| key(&format!("write[{i}].{f}"));
            w.check(true)
                .map_err(|e| invalid(format!("{}: {e}", field(e.field()))))?;
            for ns in w.namespace_list().into_iter().flatten() {
                if !t.namespaces.iter().any(|p| p.matches(ns)) {
                    return Err(invalid(format!(
                        "{}: namespace `{ns}` is outside the tenant's `namespaces`",
                        field("namespaces")
                    )));
                }
            }
        }
        let identity = |what: &str, s: &str| -> Result<(), ConfigError> {
            if s.is_empty() || s.len() > 253 || s.chars().any(|c| c.is_control()) {
                return Err(invalid(format!(
                    "{}: `{}` is not a user or group name (1 to 253 printable characters)",
                    key(what),
                    s.escape_debug()
                )));
            }
            Ok(())
        };
        if let Some(user) = &t.impersonate {
            identity("impersonate", user)?;
        }
        for g in &t.impersonate_groups {
            identity("impersonate-groups", g)?;
        }
        if t.impersonate.is_none() && !t.impersonate_groups.is_empty() {
            return Err(invalid(format!(
                "{}: groups are impersonated with a user: set `impersonate` too",
                key("impersonate-groups")
            )));
        }
        let resources = t
            .resources
            .clone()
            .unwrap_or_else(|| vec![ResourceRule::try_from("*".to_string()).expect("valid")]);
        let policy = TenantPolicy {
            grant: Arc::new(Grant::new(
                name,
                t.namespaces.clone(),
                resources,
                t.cluster_scoped,
            )),
            max_plugins: t.max_plugins.map_or(DEFAULT_MAX_PLUGINS, Positive::get) as usize,
            max_memory_mib: t.max_memory_mib.map(Positive::get),
            max_deadline_ms: t.max_deadline_ms.map(Positive::get),
            budget: t.events_per_second.map(|r| Budget::per_second(r.0)),
            max_informers: t.max_informers.map_or(DEFAULT_MAX_INFORMERS, Positive::get) as usize,
            max_field_indexes: t
                .max_field_indexes
                .map_or(DEFAULT_MAX_FIELD_INDEXES, Positive::get)
                as usize,
            allowed_outbound_hosts: Some(t.allowed_outbound_hosts.clone()),
            writes: Some(t.write.clone()),
            impersonate: t.impersonate.clone().map(|user| Impersonate {
                user,
                groups: t.impersonate_groups.clone(),
            }),
            write_budget: Some(Budget::per_second(t.writes_per_second.map_or(
                NonZeroU32::new(DEFAULT_WRITES_PER_SECOND).expect("positive"),
                |r| r.0,
            ))),
            metrics: MetricLimits {
                max_series: t
                    .max_metric_series
                    .map_or(tenant_metrics.max_series, |v| v.get() as usize),
                max_bytes: t.max_metric_kib.map_or(tenant_metrics.max_bytes, kib),
            },
            max_schedules: t.max_schedules.map_or(tenant_max_schedules, Positive::get) as usize,
        };
        let signatures = match &t.signatures {
            Some(s) => Some(
                s.policy(&format!("tenants.{name}.signatures"))
                    .map_err(|e| invalid(e.to_string()))?,
            ),
            None => operator_policy.clone(),
        };
        let grant = RegistryGrant::new(
            &t.registries,
            &t.registry_configs,
            &format!("tenants.{name}"),
        )
        .map_err(|e| invalid(e.to_string()))?;
        for (i, source) in t.sources.iter().enumerate() {
            let key = format!("tenants.{name}.sources[{i}]");
            let spec = source
                .spec(name, &key, signatures.as_ref())
                .map_err(|e| invalid(e.to_string()))?;
            let reference = spec.reference.parse().expect("checked by spec");
            grant
                .check(&reference, spec.registry_config.as_ref(), &key)
                .map_err(|e| invalid(e.to_string()))?;
            host.sources.push(spec);
        }
        tenants.insert(name.clone(), Arc::new(policy));
    }
    for (i, source) in file.sources.iter().enumerate() {
        let spec = source
            .spec("", &format!("sources[{i}]"), operator_policy.as_ref())
            .map_err(|e| invalid(e.to_string()))?;
        host.sources.push(spec);
    }
    // Two sources writing one plugin's files would overwrite each other.
    let mut seen = std::collections::BTreeSet::new();
    for s in &host.sources {
        if !seen.insert((s.tenant.as_str(), s.name.as_str())) {
            let whose = match s.tenant.as_str() {
                "" => "the operator".to_string(),
                t => format!("tenant `{t}`"),
            };
            return Err(invalid(format!(
                "key `sources`: two sources of {whose} are named `{}`: set `name` on one",
                s.name
            )));
        }
    }
    host.mirrors = informant_oci::mirror::Mirrors::new(&file.mirrors)
        .map_err(|e| invalid(format!("key `mirrors`: {e}")))?;
    host.tenancy = Tenancy::new(file.operator_plugins.unwrap_or(false), tenants);
    host.shard_by = file.shard_by;
    Ok(host)
}

/// A tenant is a directory name, and names its plugins' metric families: keep it to what is
/// safe and unambiguous on every system and in a metric name.
fn check_tenant_name(name: &str) -> Result<(), BadTenantName> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'))
        && metric_name::check_tenant(name).is_none();
    if ok {
        Ok(())
    } else {
        Err(BadTenantName(name.to_string()))
    }
}

/// A tenant name that is not a safe directory name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tenant name `{0}` must be a directory name of lowercase letters, digits, `-`, `_` or `.`, starting and ending with a letter or digit, with no two of `-`, `_`, `.` in a row, at most 63 characters"
)]
struct BadTenantName(String);

/// KiB from the config, as bytes.
fn kib(v: Positive) -> usize {
    (v.get() as usize).saturating_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<HostConfig, String> {
        super::parse(text, Path::new("/etc/informant.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn a_tenants_write_grant_is_checked_while_reading() {
        let base = "[tenants.a]\nnamespaces = [\"a\", \"a-*\"]\n";
        let ok = parse(&format!(
            "{base}impersonate = \"system:serviceaccount:a:hooks\"\nwrites-per-second = 3\n\
             [[tenants.a.write]]\napi-version = \"apps/v1\"\nkind = \"*\"\nverbs = [\"apply\"]\nnamespaces = [\"a-x\"]\n"
        ))
        .unwrap();
        let a = ok.tenancy.policy("a").unwrap();
        assert_eq!(a.writes.as_ref().unwrap().len(), 1);
        assert_eq!(
            a.impersonate.as_ref().unwrap().user,
            "system:serviceaccount:a:hooks"
        );
        assert_eq!(a.write_budget.as_ref().unwrap().rate().get(), 3);
        // No tables: no writes, and the default budget.
        let none = parse(base).unwrap();
        let a = none.tenancy.policy("a").unwrap();
        assert_eq!(a.writes.as_deref(), Some(&[][..]));
        assert_eq!(
            a.write_budget.as_ref().unwrap().rate().get(),
            DEFAULT_WRITES_PER_SECOND
        );
        for (extra, want) in [
            (
                "[[tenants.a.write]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nverbs = [\"apply\"]\nnamespace = \"b\"\n",
                "key `tenants.a.write[0].namespaces`: namespace `b` is outside the tenant's `namespaces`",
            ),
            (
                "[[tenants.a.write]]\napi-version = \"v1\"\nkind = \"Config Map\"\nverbs = [\"apply\"]\n",
                "key `tenants.a.write[0].kind`: invalid kind",
            ),
            (
                "[[tenants.a.write]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\nverbs = [\"sudo\"]\n",
                "unknown variant `sudo`",
            ),
            ("impersonate-groups = [\"g\"]\n", "set `impersonate` too"),
            (
                "impersonate = \"\"\n",
                "key `tenants.a.impersonate`: `` is not a user or group name",
            ),
            ("impersonate = \"a\\nb\"\n", "is not a user or group name"),
            ("writes-per-second = 0\n", "writes-per-second"),
            ("write = [1]\n", "expected a table"),
        ] {
            let (keys, tables): (Vec<&str>, Vec<&str>) = if extra.starts_with("[[") {
                (vec![], vec![extra])
            } else {
                (vec![extra], vec![])
            };
            let text = format!("{base}{}{}", keys.join(""), tables.join(""));
            let err = parse(&text).unwrap_err();
            assert!(err.contains(want), "{extra}: {err}");
        }
    }

    #[test]
    fn a_full_config_parses_with_defaults_filled() {
        let c = parse(
            r#"
operator-plugins = true
[limits]
max-memory-mib = 128
[tenants.team-a]
namespaces = ["team-a", "team-a-*"]
resources = ["v1/ConfigMap", "apps/v1/*"]
max-plugins = 2
max-memory-mib = 32
events-per-second = 100
max-informers = 3
max-field-indexes = 1
[tenants.ops]
cluster-scoped = true
"#,
        )
        .unwrap();
        assert_eq!(c.max_memory_mib, 128);
        assert_eq!(
            c.default_deadline_ms,
            HostConfig::default().default_deadline_ms
        );
        let a = c.tenancy.policy("team-a").unwrap();
        assert_eq!(a.max_plugins, 2);
        assert_eq!(a.max_memory_mib, Some(32));
        assert_eq!(a.budget.as_ref().unwrap().rate().get(), 100);
        assert_eq!((a.max_informers, a.max_field_indexes), (3, 1));
        assert!(a.grant.allows_namespace(Some("team-a-dev")));
        assert!(!a.grant.allows_namespace(Some("team-b")));
        assert!(a.grant.allows_resource("apps", "v1", "StatefulSet"));
        assert!(!a.grant.allows_resource("", "v1", "Secret"));
        let ops = c.tenancy.policy("ops").unwrap();
        assert_eq!(ops.max_plugins, DEFAULT_MAX_PLUGINS as usize);
        assert_eq!(ops.max_informers, DEFAULT_MAX_INFORMERS as usize);
        assert!(ops.grant.allows_resource("", "v1", "Node"));
        assert!(ops.grant.allows_namespace(None));
        assert!(!ops.grant.allows_namespace(Some("team-a")));
        assert!(c.tenancy.policy("").is_ok());
        assert!(c.tenancy.policy("nobody").is_err());
    }

    #[test]
    fn operator_plugins_need_the_config_to_say_so() {
        let c = parse("[tenants.a]\nnamespaces = [\"a\"]\n").unwrap();
        let e = c.tenancy.policy("").unwrap_err().to_string();
        assert!(e.contains("operator-plugins = true"), "{e}");
        // Without any config file, the single-user default applies.
        assert!(HostConfig::default().tenancy.policy("").is_ok());
    }

    #[test]
    fn bad_input_names_the_key_and_the_reason() {
        for (text, needles) in [
            (
                "[tenants.a]\nnamespaces = [\"a\"]\ncolour = 1\n",
                &["/etc/informant.toml", "line 3", "unknown field `colour`"][..],
            ),
            ("verbose = true\n", &["unknown field `verbose`"]),
            (
                "tenants.a = [[\"a\"], [\"v1/Pod\"], false, 1, 1, 1, 1, 1, 1]\n",
                &["line 1", "field `tenants.a`", "expected a table"],
            ),
            (
                "limits = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n",
                &["field `limits`", "expected a table"],
            ),
            (
                "[tenants.a]\nnamespaces = [\"team_[a]\"]\n",
                &[
                    "line 2",
                    "tenants.a.namespaces",
                    "bad namespace glob `team_[a]`",
                ],
            ),
            (
                "[tenants.a]\nnamespaces = [\"a\"]\nresources = [\"ConfigMap\"]\n",
                &["line 3", "bad resource `ConfigMap`"],
            ),
            (
                "[tenants.a]\nnamespaces = [\"team-a\"]\n[tenants.b]\nnamespaces = [\"team-*\"]\n",
                &[
                    "key `tenants.b.namespaces`",
                    "`team-*` overlaps tenant `a`'s `team-a`",
                ],
            ),
            (
                "[tenants.a]\nnamespaces = [\"x-*\", \"x-1\"]\n",
                &["tenants.a.namespaces", "overlaps its own"],
            ),
            (
                "[tenants.a]\nnamespaces = [\"a\"]\nmax-memory-mib = -5\n",
                &[
                    "line 3",
                    "tenants.a.max-memory-mib",
                    "whole number from 1",
                    "got -5",
                ],
            ),
            (
                "[tenants.a]\nnamespaces = [\"a\"]\nmax-plugins = 0\n",
                &["tenants.a.max-plugins", "got 0"],
            ),
            (
                "[limits]\ndefault-deadline-ms = 500\nmax-deadline-ms = 100\n",
                &[
                    "limits.default-deadline-ms",
                    "above `limits.max-deadline-ms`",
                ],
            ),
            (
                "[tenants.a]\nnamespaces = [\"a\"]\nmax-deadline-ms = 99999\n",
                &["tenants.a.max-deadline-ms", "above the host's"],
            ),
            ("[tenants.a]\n", &["[tenants.a]", "grants nothing"]),
            (
                "[limits]\nmax-watches = 0\n",
                &["line 2", "limits.max-watches", "got 0"],
            ),
            (
                "[tenants.a]\nnamespaces = [\"a\"]\nmax-field-indexes = -1\n",
                &["line 3", "tenants.a.max-field-indexes", "got -1"],
            ),
            (
                "[tenants.\"../b\"]\nnamespaces = [\"a\"]\n",
                &["tenant name `../b`"],
            ),
            ("[tenants.a\n", &["line 1"]),
            (
                "[tenants.a]\nnamespaces = [\"a\"]\nallowed-outbound-hosts = [\"http://127.0.0.1:80\", \"https://*.slack.com\"]\n",
                &[
                    "line 3",
                    "tenants.a.allowed-outbound-hosts",
                    "invalid origin `https://*.slack.com`: host wildcards are not supported",
                ],
            ),
            (
                "[tenants.a]\nnamespaces = [\"a\"]\nallowed-outbound-hosts = [\"http://u@h\"]\n",
                &["tenants.a.allowed-outbound-hosts", "user info"],
            ),
        ] {
            let err = parse(text).unwrap_err();
            for n in needles {
                assert!(err.contains(n), "`{text}` -> `{err}` lacks `{n}`");
            }
        }
    }
}
