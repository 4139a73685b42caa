//! Registry mirrors, for clusters that cannot reach the registries their references name (air
//! gaps) or should not (rate limits): a reference to `ghcr.io/acme/hooks:1` is read from each
//! of `ghcr.io`'s mirrors in turn (`harbor.internal/ghcr-proxy/acme/hooks:1`), then from
//! `ghcr.io` itself, as containerd's `hosts.toml` mirrors are.
//!
//! What is read is the same artifact whatever the endpoint: the digest the reference resolves
//! to names it, and it is verified as it is read; a signature is checked against the policy's
//! keys, not the endpoint. So a pinned reference keeps its registry's name however it was read.

use std::collections::BTreeMap;

use oci_client::Reference;

/// Why a mirror endpoint cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BadEndpoint {
    /// It names a scheme.
    #[error("{0:?} has a scheme: give HOST[:PORT][/PREFIX]")]
    Scheme(String),
    /// It is not a host and repository prefix a reference could have.
    #[error("{endpoint:?} is not HOST[:PORT][/PREFIX]: {source}")]
    NotReference {
        /// The endpoint.
        endpoint: String,
        /// Why a reference under it does not parse.
        #[source]
        source: oci_client::ParseError,
    },
    /// Its first segment is not a registry host.
    #[error("{0:?} does not start with a registry host")]
    NoHost(String),
}

/// A registry's mirror that cannot be used, naming the registry.
#[derive(Debug, thiserror::Error)]
#[error("`{registry}`: {source}")]
pub struct BadMirror {
    /// The registry it mirrors.
    pub registry: String,
    /// What is wrong with it.
    #[source]
    pub source: BadEndpoint,
}

/// A place a registry's repositories are mirrored: `HOST[:PORT]`, and a path prefix its
/// repositories sit under there (empty for none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    host: String,
    prefix: String,
}

impl Endpoint {
    /// `HOST[:PORT][/PREFIX]`, without a scheme (plain HTTP is chosen as for any registry).
    pub fn parse(text: &str) -> Result<Self, BadEndpoint> {
        if text.contains("://") {
            return Err(BadEndpoint::Scheme(text.to_string()));
        }
        let (host, prefix) = text.split_once('/').unwrap_or((text, ""));
        let prefix = prefix.trim_end_matches('/');
        // What the reference grammar accepts is what a mirror may be: checked by parsing one.
        let probe = match prefix {
            "" => format!("{host}/probe:1"),
            p => format!("{host}/{p}/probe:1"),
        };
        let parsed: Reference = probe.parse().map_err(|source| BadEndpoint::NotReference {
            endpoint: text.to_string(),
            source,
        })?;
        if parsed.registry() != host || host.is_empty() {
            return Err(BadEndpoint::NoHost(text.to_string()));
        }
        Ok(Endpoint {
            host: host.to_string(),
            prefix: prefix.to_string(),
        })
    }

    /// Its registry host (`HOST[:PORT]`).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The repository prefix under it; empty for none.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Whether `reference` is under this host and prefix (at a path-segment boundary:
    /// `acme/hooks` holds `acme/hooks/policy`, not `acme/hooksmith`).
    pub fn holds(&self, reference: &Reference) -> bool {
        let repository = reference.repository();
        self.host == reference.registry()
            && (self.prefix.is_empty()
                || repository == self.prefix
                || repository
                    .strip_prefix(self.prefix.as_str())
                    .is_some_and(|rest| rest.starts_with('/')))
    }

    /// `reference`, as this endpoint holds it.
    fn of(&self, reference: &Reference) -> Reference {
        let repository = match self.prefix.as_str() {
            "" => reference.repository().to_string(),
            prefix => format!("{prefix}/{}", reference.repository()),
        };
        match (reference.tag(), reference.digest()) {
            (_, Some(digest)) => {
                Reference::with_digest(self.host.clone(), repository, digest.to_string())
            }
            (tag, None) => Reference::with_tag(
                self.host.clone(),
                repository,
                tag.unwrap_or("latest").to_string(),
            ),
        }
    }
}

/// The mirrors of each registry (by the name references give it: `ghcr.io`, `docker.io`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mirrors(BTreeMap<String, Vec<Endpoint>>);

impl Mirrors {
    /// Mirrors from a map of registry to endpoints (`HOST[:PORT][/PREFIX]` each), or why one
    /// is not an endpoint.
    pub fn new(map: &BTreeMap<String, Vec<String>>) -> Result<Self, BadMirror> {
        let mut mirrors = BTreeMap::new();
        for (registry, endpoints) in map {
            let endpoints = endpoints
                .iter()
                .map(|e| {
                    Endpoint::parse(e).map_err(|source| BadMirror {
                        registry: registry.clone(),
                        source,
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            mirrors.insert(registry.clone(), endpoints);
        }
        Ok(Mirrors(mirrors))
    }

    /// Where `reference` is read from, in turn: its registry's mirrors, then the registry.
    pub fn candidates(&self, reference: &Reference) -> Vec<Reference> {
        let mut all: Vec<Reference> = self
            .0
            .get(reference.registry())
            .or_else(|| self.0.get(reference.resolve_registry()))
            .map(|endpoints| endpoints.iter().map(|e| e.of(reference)).collect())
            .unwrap_or_default();
        all.push(reference.clone());
        all
    }
}

/// The first endpoint of `candidates` `op` succeeds at; else the first one's error (a mirror's,
/// where there is one: in an air gap, the registry's own would only say it is unreachable).
pub(crate) async fn first_ok<T, E, Fut>(
    candidates: Vec<Reference>,
    mut op: impl FnMut(Reference) -> Fut,
) -> Result<T, E>
where
    Fut: std::future::Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    let mut first = None;
    for candidate in candidates {
        let shown = candidate.whole();
        match op(candidate).await {
            Ok(done) => return Ok(done),
            Err(e) => {
                tracing::debug!(endpoint = %shown, error = %e, "not read there; trying the next");
                first.get_or_insert(e);
            }
        }
    }
    Err(first.expect("a reference is always read from its own registry last"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_is_read_from_its_mirrors_then_its_registry() {
        let mirrors = Mirrors::new(&BTreeMap::from([(
            "ghcr.io".to_string(),
            vec![
                "harbor.internal/ghcr-proxy/".to_string(),
                "127.0.0.1:5000".to_string(),
            ],
        )]))
        .unwrap();
        let tag: Reference = "ghcr.io/acme/hooks:1".parse().unwrap();
        let shown: Vec<String> = mirrors
            .candidates(&tag)
            .iter()
            .map(Reference::whole)
            .collect();
        assert_eq!(
            shown,
            [
                "harbor.internal/ghcr-proxy/acme/hooks:1",
                "127.0.0.1:5000/acme/hooks:1",
                "ghcr.io/acme/hooks:1"
            ]
        );
        let digest = format!("ghcr.io/acme/hooks@sha256:{}", "a".repeat(64));
        let pinned: Reference = digest.parse().unwrap();
        assert!(
            mirrors.candidates(&pinned)[0]
                .whole()
                .ends_with(&digest["ghcr.io".len()..])
        );
        // Another registry has no mirror: read from itself only.
        let other: Reference = "quay.io/acme/hooks:1".parse().unwrap();
        assert_eq!(mirrors.candidates(&other), std::slice::from_ref(&other));
    }

    #[test]
    fn endpoints_that_are_not_a_host_and_prefix_are_refused() {
        for bad in [
            "https://harbor.internal",
            "",
            "/prefix",
            "Harbor.internal/UPPER",
            "h:port/x",
        ] {
            let map = BTreeMap::from([("ghcr.io".to_string(), vec![bad.to_string()])]);
            let err = Mirrors::new(&map).unwrap_err().to_string();
            assert!(err.starts_with("`ghcr.io`: "), "{bad}: {err}");
        }
    }
}
