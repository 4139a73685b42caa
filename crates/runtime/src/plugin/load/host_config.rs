//! Host-wide plugin settings: the defaults and ceilings manifests are admitted against.

use crate::files::MAX_PLUGIN_FILE_BYTES;
use crate::plugin::exec::supervisor::RestartPolicy;
use crate::plugin::imports::log::TextLimits;
use crate::plugin::metrics::MetricLimits;
use crate::tenancy::Tenancy;

/// Host-wide plugin settings: defaults and ceilings for what manifests ask.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// Memory cap when a manifest names none (MiB).
    pub default_memory_mib: u32,
    /// Highest memory cap a manifest may get (MiB).
    pub max_memory_mib: u32,
    /// Deadline when a manifest names none (ms).
    pub default_deadline_ms: u32,
    /// Longest deadline a manifest may get (ms).
    pub max_deadline_ms: u32,
    /// Restart and quarantine policy.
    pub restart: RestartPolicy,
    /// Plugin log lines buffered for slow subscribers before they miss some.
    pub log_buffer: usize,
    /// Largest `.wasm` the loader reads (bytes).
    pub max_wasm_bytes: u64,
    /// Largest manifest the loader reads (bytes).
    pub max_manifest_bytes: u64,
    /// Most `[[watch]]` tables one manifest may have.
    pub max_watches: u32,
    /// Most `[[schedule]]` tables one manifest may have.
    pub max_schedules: usize,
    /// What a plugin's own text (log lines, errors) may cost the host.
    pub text: TextLimits,
    /// What one plugin version's own metrics may hold (each tenant's budget over all its
    /// plugins is its [`TenantPolicy`](crate::tenancy::TenantPolicy)'s).
    pub metrics: MetricLimits,
    /// Tenants, their grants and quotas; whether top-level plugins run.
    pub tenancy: Tenancy,
    /// With `--shard-group`: what is assigned to one replica (`shard-by`).
    pub shard_by: crate::shard::ShardBy,
    /// Plugins pulled from OCI registries (`[[sources]]`, `[[tenants.NAME.sources]]`).
    pub sources: Vec<SourceSpec>,
    /// Where each registry's artifacts are read from before the registry itself.
    pub mirrors: informant_oci::mirror::Mirrors,
}

/// A plugin pulled from an OCI registry into its tenant's directory, as if dropped there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceSpec {
    /// The tenant whose directory it goes in (empty: the operator's top level).
    pub tenant: String,
    /// `REGISTRY/REPOSITORY:TAG` or `…@sha256:…`, checked to parse.
    pub reference: String,
    /// The plugin's name: `NAME.wasm`, `NAME.toml` (checked).
    pub name: String,
    /// How often a tag is resolved again; `None`: never (a digest, or `poll-seconds = 0`).
    pub poll: Option<std::time::Duration>,
    /// The dockerconfigjson with the registry's login.
    pub registry_config: Option<std::path::PathBuf>,
    /// CA certificates (PEM) trusted for the registry besides the system's.
    pub registry_ca: Option<std::path::PathBuf>,
    /// Plain HTTP, for a registry on a loopback address only.
    pub plain_http: bool,
    /// The trust policy its signatures are checked under; none: they are not checked.
    pub signatures: Option<SignaturePolicy>,
}

/// A trust policy as configured: one of its keys, or a keyless identity it trusts, must have
/// signed a pulled plugin.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SignaturePolicy {
    /// Public keys (PEM files).
    pub keys: Vec<std::path::PathBuf>,
    /// Keyless identities: an OIDC issuer, and a pattern the subject matches whole.
    pub keyless: Vec<(String, String)>,
    /// Fulcio's CA certificates (a PEM file), for keyless signatures.
    pub fulcio_roots: Option<std::path::PathBuf>,
    /// Rekor's public keys (PEM files), for keyless signatures.
    pub rekor_keys: Vec<std::path::PathBuf>,
}

impl SignaturePolicy {
    /// The policy, its files read now (a rotated key is read again at each use).
    pub fn load(
        &self,
    ) -> Result<informant_oci::signature::TrustPolicy, informant_oci::signature::KeyError> {
        use informant_oci::signature::{Identity, KeyError, Keyless, PublicKey, TrustPolicy};
        let keys = self
            .keys
            .iter()
            .map(|p| PublicKey::from_file(p))
            .collect::<Result<_, _>>()?;
        let mut policy = TrustPolicy::new(keys);
        if let Some(roots) = &self.fulcio_roots {
            let identities = self
                .keyless
                .iter()
                .map(|(issuer, pattern)| {
                    Identity::new(issuer, pattern).map_err(|source| KeyError::Pattern {
                        pattern: pattern.clone(),
                        source,
                    })
                })
                .collect::<Result<_, _>>()?;
            policy = policy.with_keyless(Keyless::from_files(roots, &self.rekor_keys, identities)?);
        }
        Ok(policy)
    }
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            default_memory_mib: 64,
            max_memory_mib: 256,
            default_deadline_ms: 200,
            max_deadline_ms: 10_000,
            restart: RestartPolicy::default(),
            log_buffer: 4096,
            max_wasm_bytes: MAX_PLUGIN_FILE_BYTES,
            max_manifest_bytes: 256 << 10,
            max_watches: 16,
            max_schedules: informant_manifest::schedule::DEFAULT_MAX_SCHEDULES,
            text: TextLimits::default(),
            metrics: MetricLimits::default(),
            tenancy: Tenancy::default(),
            shard_by: crate::shard::ShardBy::default(),
            sources: Vec::new(),
            mirrors: Default::default(),
        }
    }
}

/// Whether the host limits a manifest is admitted against are the same.
pub(super) fn same_limits(a: &HostConfig, b: &HostConfig) -> bool {
    let limits = |c: &HostConfig| {
        (
            c.default_memory_mib,
            c.max_memory_mib,
            c.default_deadline_ms,
            c.max_deadline_ms,
            c.max_watches,
            c.max_schedules,
            c.text,
        )
    };
    limits(a) == limits(b)
}

/// A reloaded host config the running host cannot take without a restart; the old one stays.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NeedsRestart {
    /// More memory per plugin than the engine's instance slots were sized for at start.
    #[error(
        "key `limits.max-memory-mib`: {asked_mib} is above the {engine_mib} MiB the plugin engine was started with; raising it needs a restart"
    )]
    MaxMemory {
        /// What the new config allows.
        asked_mib: u32,
        /// What the engine's slots hold.
        engine_mib: usize,
    },
}
