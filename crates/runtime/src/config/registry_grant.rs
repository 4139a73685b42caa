//! What registries and logins a tenant's sources may use (`registries`, `registry-configs` in
//! its table). Fail closed: a tenant whose table names none may pull from no registry, and its
//! sources may use no login file but those named.

use std::path::PathBuf;

use informant_oci::Reference;

/// A tenant's grant of registries and logins.
#[derive(Debug, Default)]
pub(super) struct RegistryGrant {
    /// `REGISTRY[/REPOSITORY-PREFIX]` entries, parsed as references are.
    registries: Vec<(String, String)>,
    /// Login files its sources may name, exactly as written.
    configs: Vec<PathBuf>,
}

impl RegistryGrant {
    /// The grant of `registries` and `configs` (`key` names the tenant's table in errors).
    pub(super) fn new(
        registries: &[String],
        configs: &[PathBuf],
        key: &str,
    ) -> Result<Self, String> {
        let registries = registries
            .iter()
            .enumerate()
            .map(|(i, entry)| {
                scope(entry).ok_or_else(|| {
                    format!(
                        "key `{key}.registries[{i}]`: {:?} is not REGISTRY[/REPOSITORY-PREFIX]",
                        entry
                    )
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
    ) -> Result<(), String> {
        let (registry, repository) = (reference.registry(), reference.repository());
        let within = self.registries.iter().any(|(r, prefix)| {
            r == registry
                && (prefix.is_empty()
                    || repository == prefix
                    || repository
                        .strip_prefix(prefix.as_str())
                        .is_some_and(|rest| rest.starts_with('/')))
        });
        if !within {
            return Err(format!(
                "key `{key}.reference`: `{registry}/{repository}` is outside the tenant's `registries`"
            ));
        }
        if let Some(config) = config
            && !self.configs.contains(config)
        {
            return Err(format!(
                "key `{key}.registry-config`: `{}` is not one of the tenant's `registry-configs`",
                config.display()
            ));
        }
        Ok(())
    }
}

/// `REGISTRY[/PREFIX]` as a reference's registry and repository prefix, normalized as a
/// reference is (`ghcr.io`, `docker.io/library`).
fn scope(entry: &str) -> Option<(String, String)> {
    let entry = entry.strip_suffix('/').unwrap_or(entry);
    let (host, rest) = entry.split_once('/').unwrap_or((entry, ""));
    // A port in the host only; no tag or digest.
    if entry.contains('@') || rest.contains(':') {
        return None;
    }
    let probe: Reference = format!("{entry}/probe:1").parse().ok()?;
    // A bare name would parse as a Docker Hub repository: the entry must name its registry.
    if probe.registry() != host {
        return None;
    }
    let prefix = probe
        .repository()
        .strip_suffix("probe")?
        .trim_end_matches('/');
    Some((probe.registry().to_string(), prefix.to_string()))
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
        ] {
            let err = RegistryGrant::new(&[bad.to_string()], &[], "tenants.a").unwrap_err();
            assert!(
                err.starts_with("key `tenants.a.registries[0]`"),
                "{bad}: {err}"
            );
        }
    }
}
