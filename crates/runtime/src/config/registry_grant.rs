//! What registries and logins a tenant's sources may use (`registries`, `registry-configs` in
//! its table). Fail closed: a tenant whose table names none may pull from no registry, and its
//! sources may use no login file but those named.

use std::path::PathBuf;

use informant_oci::Reference;
use informant_oci::mirror::{BadEndpoint, Endpoint};

/// A tenant's source outside its grant, or a grant that cannot be read; each names its key.
#[derive(Debug, thiserror::Error)]
pub(super) enum GrantError {
    /// A `registries` entry is not a registry and repository prefix.
    #[error("key `{key}.registries[{index}]`: {source}")]
    Entry {
        /// The tenant's table.
        key: String,
        /// The entry's place.
        index: usize,
        /// Why it is not one.
        #[source]
        source: BadEndpoint,
    },
    /// A source names a repository no entry grants.
    #[error("key `{key}.reference`: `{repository}` is outside the tenant's `registries`")]
    Outside {
        /// The source's table.
        key: String,
        /// `REGISTRY/REPOSITORY` it names.
        repository: String,
    },
    /// A source names a login file the tenant was not given.
    #[error("key `{key}.registry-config`: `{}` is not one of the tenant's `registry-configs`", .path.display())]
    Login {
        /// The source's table.
        key: String,
        /// The file it names.
        path: PathBuf,
    },
}

/// A tenant's grant of registries and logins.
#[derive(Debug, Default)]
pub(super) struct RegistryGrant {
    /// Registry hosts and repository prefixes, as mirrors are written.
    registries: Vec<Endpoint>,
    /// Login files its sources may name, exactly as written.
    configs: Vec<PathBuf>,
}

impl RegistryGrant {
    /// The grant of `registries` and `configs` (`key` names the tenant's table in errors).
    pub(super) fn new(
        registries: &[String],
        configs: &[PathBuf],
        key: &str,
    ) -> Result<Self, GrantError> {
        let registries = registries
            .iter()
            .enumerate()
            .map(|(index, entry)| {
                Endpoint::parse(entry).map_err(|source| GrantError::Entry {
                    key: key.to_string(),
                    index,
                    source,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(RegistryGrant {
            registries,
            configs: configs.to_vec(),
        })
    }

    /// Whether a source of `reference` with the login file `config` is within the grant; else
    /// why not (`key` names the source's table).
    pub(super) fn check(
        &self,
        reference: &Reference,
        config: Option<&PathBuf>,
        key: &str,
    ) -> Result<(), GrantError> {
        if !self.registries.iter().any(|e| e.holds(reference)) {
            return Err(GrantError::Outside {
                key: key.to_string(),
                repository: format!("{}/{}", reference.registry(), reference.repository()),
            });
        }
        if let Some(config) = config
            && !self.configs.contains(config)
        {
            return Err(GrantError::Login {
                key: key.to_string(),
                path: config.clone(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(registries: &[&str], configs: &[&str]) -> RegistryGrant {
        RegistryGrant::new(
            &registries.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            &configs.iter().map(PathBuf::from).collect::<Vec<_>>(),
            "tenants.a",
        )
        .unwrap()
    }

    fn check(g: &RegistryGrant, reference: &str, config: Option<&str>) -> Result<(), String> {
        g.check(
            &reference.parse().unwrap(),
            config.map(PathBuf::from).as_ref(),
            "tenants.a.sources[0]",
        )
        .map_err(|e| e.to_string())
    }

    #[test]
    fn a_source_is_within_its_tenants_registries_at_a_segment_boundary() {
        let g = grant(
            &["registry.example:5000/team-a", "ghcr.io/acme/hooks/"],
            &["/etc/informant-registry/team-a/.dockerconfigjson"],
        );
        for ok in [
            "registry.example:5000/team-a/snoop:1",
            "registry.example:5000/team-a/nested/snoop@sha256:0000000000000000000000000000000000000000000000000000000000000000",
            "ghcr.io/acme/hooks:2",
            "ghcr.io/acme/hooks/policy:2",
        ] {
            check(&g, ok, None).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for outside in [
            "registry.example:5000/team-a-evil/snoop:1",
            "registry.example:5000/team-b/snoop:1",
            "registry.example/team-a/snoop:1",
            "registry.example:5001/team-a/snoop:1",
            "ghcr.io/acme/hooksmith:1",
            "ghcr.io/acme/other:1",
            "docker.io/team-a/snoop:1",
        ] {
            let err = check(&g, outside, None).unwrap_err();
            assert!(
                err.contains("is outside the tenant's `registries`"),
                "{outside}: {err}"
            );
        }
        // A login file other than the granted one, however spelled.
        for config in [
            "/etc/informant-registry/team-b/.dockerconfigjson",
            "/etc/informant-registry/team-a/../team-b/.dockerconfigjson",
            "/etc/informant-registry/team-a/.dockerconfigjson ",
        ] {
            let err = check(&g, "ghcr.io/acme/hooks:2", Some(config)).unwrap_err();
            assert!(err.contains("`registry-configs`"), "{config}: {err}");
        }
        check(
            &g,
            "ghcr.io/acme/hooks:2",
            Some("/etc/informant-registry/team-a/.dockerconfigjson"),
        )
        .unwrap();
        // No grant at all: no registry.
        let none = RegistryGrant::default();
        assert!(check(&none, "ghcr.io/acme/hooks:2", None).is_err());
    }

    #[test]
    fn grant_entries_that_are_not_a_registry_and_prefix_are_refused() {
        for bad in [
            "",
            "team-a",
            "ghcr.io/Acme",
            "ghcr.io/acme:1",
            "ghcr.io/acme@sha256:00",
            "ghcr.io/a b",
            // Other spellings of a path: escaped, climbing, look-alike, padded.
            "ghcr.io/acme%2Fhooks",
            "ghcr.io/acme/../hooks",
            "ghcr.io/\u{ff41}cme",
            " ghcr.io/acme",
            "ghcr.io/acme ",
            "https://ghcr.io/acme",
        ] {
            let err = RegistryGrant::new(&[bad.to_string()], &[], "tenants.a")
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with("key `tenants.a.registries[0]`"),
                "{bad}: {err}"
            );
        }
    }
}
