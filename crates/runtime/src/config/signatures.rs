//! `[signatures]` and `[tenants.NAME.signatures]`: the trust policy a source is pulled under,
//! its files and patterns checked while the config is read.

use std::path::PathBuf;

use informant_manifest::toml_error;
use serde::Deserialize;

use informant_oci::signature::{Identity, KeyError, PublicKey};

use crate::plugin::load::host_config::SignaturePolicy;

/// A trust policy table that cannot be used; each names its key.
#[derive(Debug, thiserror::Error)]
pub(super) enum BadPolicy {
    /// Neither keys nor keyless identities.
    #[error(
        "key `{0}`: neither `keys` nor `keyless`: list the public keys (PEM) or keyless identities signatures must be made with, or drop the table"
    )]
    Empty(String),
    /// A key file that holds no usable public key.
    #[error("key `{key}.keys[{index}]`: {source}")]
    Key {
        /// The table.
        key: String,
        /// The key's place.
        index: usize,
        /// Why.
        #[source]
        source: KeyError,
    },
    /// Keyless identities without a trust root, or a trust root without identities.
    #[error(
        "key `{0}`: `keyless`, `fulcio-roots` and `rekor-keys` go together: keyless signatures are checked against Fulcio's CAs and Rekor's keys"
    )]
    Apart(String),
    /// An identity pattern that does not compile.
    #[error("key `{key}.keyless[{index}].identity`: {source}")]
    Identity {
        /// The table.
        key: String,
        /// The identity's place.
        index: usize,
        /// Why.
        #[source]
        source: regex::Error,
    },
    /// The keyless trust root's files cannot be used.
    #[error("key `{key}`: {source}")]
    TrustRoot {
        /// The table.
        key: String,
        /// Why.
        #[source]
        source: KeyError,
    },
}

/// A `[signatures]` (or `[tenants.NAME.signatures]`) table: the public keys one of whose cosign
/// signatures a pulled plugin must carry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct FileSignatures {
    #[serde(default)]
    keys: Vec<PathBuf>,
    #[serde(default, deserialize_with = "toml_error::tables")]
    keyless: Vec<FileIdentity>,
    fulcio_roots: Option<PathBuf>,
    #[serde(default)]
    rekor_keys: Vec<PathBuf>,
}

/// A `[[signatures.keyless]]` table: an identity whose keyless signatures are trusted.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct FileIdentity {
    issuer: String,
    identity: String,
}

impl FileSignatures {
    /// The policy, each file checked to hold what it should and each pattern to compile
    /// (`key` names the table in errors).
    pub(super) fn policy(&self, key: &str) -> Result<SignaturePolicy, BadPolicy> {
        let key = key.to_string();
        if self.keys.is_empty() && self.keyless.is_empty() {
            return Err(BadPolicy::Empty(key));
        }
        for (index, path) in self.keys.iter().enumerate() {
            PublicKey::from_file(path).map_err(|source| BadPolicy::Key {
                key: key.clone(),
                index,
                source,
            })?;
        }
        let together = match (&self.fulcio_roots, self.rekor_keys.is_empty()) {
            (None, true) => self.keyless.is_empty(),
            (Some(_), false) => !self.keyless.is_empty(),
            _ => false,
        };
        if !together {
            return Err(BadPolicy::Apart(key));
        }
        for (index, id) in self.keyless.iter().enumerate() {
            Identity::new(&id.issuer, &id.identity).map_err(|source| BadPolicy::Identity {
                key: key.clone(),
                index,
                source,
            })?;
        }
        let policy = SignaturePolicy {
            keys: self.keys.clone(),
            keyless: self
                .keyless
                .iter()
                .map(|i| (i.issuer.clone(), i.identity.clone()))
                .collect(),
            fulcio_roots: self.fulcio_roots.clone(),
            rekor_keys: self.rekor_keys.clone(),
        };
        policy
            .load()
            .map_err(|source| BadPolicy::TrustRoot { key, source })?;
        Ok(policy)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use informant_oci::signature::SigningKey;

    fn parse(text: &str) -> Result<crate::plugin::load::host_config::HostConfig, String> {
        super::super::parse(text, Path::new("/etc/informant.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn a_tenant_without_its_own_policy_takes_the_top_level_one() {
        let dir = tempfile::tempdir().unwrap();
        let key = |name: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, SigningKey::generate().public_key_pem()).unwrap();
            path.display().to_string()
        };
        let (operator, team_a) = (key("operator.pub"), key("team-a.pub"));
        let config = parse(&format!(
            r#"
    [signatures]
    keys = ["{operator}"]

    [[sources]]
    reference = "registry.example/ops/audit:1"

    [tenants.team-a]
    namespaces = ["team-a"]
    registries = ["registry.example/team-a"]
    signatures = {{ keys = ["{team_a}"] }}
    sources = [{{ reference = "registry.example/team-a/policy:1" }}]

    [tenants.team-b]
    namespaces = ["team-b"]
    registries = ["registry.example/team-b"]
    sources = [{{ reference = "registry.example/team-b/policy:1" }}]
    "#
        ))
        .unwrap();
        let keys = |tenant: &str| {
            let s = config.sources.iter().find(|s| s.tenant == tenant).unwrap();
            s.signatures
                .as_ref()
                .unwrap()
                .keys
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(keys(""), std::slice::from_ref(&operator));
        assert_eq!(keys("team-a"), [team_a]);
        assert_eq!(keys("team-b"), [operator]);
        // No policy at all: nothing is checked.
        let unchecked =
            parse("[[sources]]\nreference = \"registry.example/ops/audit:1\"\n").unwrap();
        assert!(unchecked.sources[0].signatures.is_none());
    }

    #[test]
    fn key_files_that_hold_no_public_key_are_refused_naming_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let private = dir.path().join("cosign.key");
        std::fs::write(&private, SigningKey::generate().private_key_pem()).unwrap();
        let private = private.display();
        for (text, needles) in [
            (
                "[signatures]\nkeys = []\n".to_string(),
                &["key `signatures`: neither `keys` nor `keyless`"][..],
            ),
            (
                "[tenants.a]\nnamespaces = [\"a\"]\nsignatures = { keys = [\"/nonexistent/a.pub\"] }\n"
                    .to_string(),
                &["key `tenants.a.signatures.keys[0]`: key `/nonexistent/a.pub`:"],
            ),
            (
                format!("[signatures]\nkeys = [\"{private}\"]\n"),
                &["key `signatures.keys[0]`", "not a PEM public key"],
            ),
            (
                "[signatures]\nkeys = [\"a.pub\"]\nrequire = false\n".to_string(),
                &["unknown field `require`"],
            ),
        ] {
            let err = parse(&text).unwrap_err();
            assert!(
                err.starts_with("config `/etc/informant.toml`: ")
                    && needles.iter().all(|n| err.contains(n)),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn a_keyless_policy_needs_its_trust_root_and_patterns_that_compile() {
        let dir = tempfile::tempdir().unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca
            .self_signed(&rcgen::KeyPair::generate().unwrap())
            .unwrap();
        let roots = dir.path().join("fulcio.pem");
        std::fs::write(&roots, ca.pem()).unwrap();
        let rekor = dir.path().join("rekor.pub");
        std::fs::write(&rekor, SigningKey::generate().public_key_pem()).unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let (roots, rekor, empty) = (roots.display(), rekor.display(), empty.display());
        let table = |extra: &str, identity: &str| {
            format!(
                "[signatures]\n{extra}\n[[signatures.keyless]]\n\
                 issuer = \"https://token.actions.githubusercontent.com\"\nidentity = '{identity}'\n"
            )
        };
        let ok = parse(&table(
            &format!("fulcio-roots = \"{roots}\"\nrekor-keys = [\"{rekor}\"]"),
            r"https://github\.com/acme/.+",
        ))
        .unwrap();
        assert!(ok.sources.is_empty());
        for (text, needle) in [
            (
                table("", "x"),
                "`keyless`, `fulcio-roots` and `rekor-keys` go together",
            ),
            (
                table(&format!("fulcio-roots = \"{roots}\""), "x"),
                "`keyless`, `fulcio-roots` and `rekor-keys` go together",
            ),
            (
                table(
                    &format!("fulcio-roots = \"{roots}\"\nrekor-keys = [\"{rekor}\"]"),
                    "https://github.com/(acme",
                ),
                "key `signatures.keyless[0].identity`",
            ),
            (
                table(
                    &format!("fulcio-roots = \"{empty}\"\nrekor-keys = [\"{rekor}\"]"),
                    "x",
                ),
                "holds no certificate",
            ),
            (
                table(
                    &format!("fulcio-roots = \"{roots}\"\nrekor-keys = [\"{roots}\"]"),
                    "x",
                ),
                "not a PEM public key",
            ),
        ] {
            let err = parse(&text).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
