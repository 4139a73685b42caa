//! Registry logins from a `dockerconfigjson`: Docker's `config.json`, which `docker login`,
//! `podman login` and `oras login` write, and the data of a `kubernetes.io/dockerconfigjson`
//! Secret. Only `auths` is read: credential helpers are not run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

/// A `dockerconfigjson` that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("registry credentials: cannot read `{path}`: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It is not a `dockerconfigjson`.
    #[error("registry credentials: `{origin}` is not a dockerconfigjson: {source}")]
    Parse {
        /// The file, or what else held it.
        origin: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// An `auth` entry that is not base64 of `USER:PASSWORD`.
    #[error(
        "registry credentials: `{origin}`: the `auth` of `{registry}` is not base64 of USER:PASSWORD"
    )]
    Auth {
        /// The file, or what else held it.
        origin: String,
        /// The registry the entry is for.
        registry: String,
    },
}

#[derive(Debug, Deserialize, Default)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, Entry>,
}

#[derive(Debug, Deserialize)]
struct Entry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

/// Logins by registry host (`host[:port]`).
#[derive(Default, Clone)]
pub struct Credentials {
    by_registry: BTreeMap<String, (String, String)>,
}

impl std::fmt::Debug for Credentials {
    /// The registries only: a password never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.by_registry.keys()).finish()
    }
}

impl Credentials {
    /// No logins: every registry is asked anonymously.
    pub fn none() -> Self {
        Self::default()
    }

    /// The logins of the `dockerconfigjson` file at `path`.
    pub fn from_file(path: &Path) -> Result<Self, Error> {
        let text = std::fs::read(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_json(&text, &path.display().to_string())
    }

    /// The logins of a `dockerconfigjson` document; `origin` names it in errors.
    pub fn from_json(json: &[u8], origin: &str) -> Result<Self, Error> {
        let config: DockerConfig = serde_json::from_slice(json).map_err(|source| Error::Parse {
            origin: origin.to_string(),
            source,
        })?;
        let mut by_registry = BTreeMap::new();
        for (key, entry) in config.auths {
            let registry = host_of(&key);
            let login = match (entry.username, entry.password, entry.auth) {
                (Some(user), Some(password), _) => (user, password),
                (_, _, Some(auth)) => decode(&auth).ok_or_else(|| Error::Auth {
                    origin: origin.to_string(),
                    registry: registry.clone(),
                })?,
                _ => continue,
            };
            by_registry.insert(registry, login);
        }
        Ok(Credentials { by_registry })
    }

    /// How to log in to `registry` (`host[:port]`): Basic with its login, or anonymously.
    pub fn auth_for(&self, registry: &str) -> RegistryAuth {
        match self.by_registry.get(registry) {
            Some((user, password)) => RegistryAuth::Basic(user.clone(), password.clone()),
            None => RegistryAuth::Anonymous,
        }
    }
}

/// The registry host of an `auths` key: Docker accepts `host`, `https://host` and
/// `https://host/v1/`.
fn host_of(key: &str) -> String {
    let rest = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    rest.split('/').next().unwrap_or(rest).to_string()
}

fn decode(auth: &str) -> Option<(String, String)> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(auth.trim())
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_auth_and_username_password_entries_by_host() {
        let json = br#"{"auths": {
            "https://registry.example:5000/v1/": {"auth": "YWxpY2U6czNjcmV0"},
            "127.0.0.1:5001": {"username": "bob", "password": "pw:with:colons"},
            "helper-only.example": {}
        }}"#;
        let c = Credentials::from_json(json, "test").unwrap();
        assert!(matches!(
            c.auth_for("registry.example:5000"),
            RegistryAuth::Basic(u, p) if u == "alice" && p == "s3cret"
        ));
        assert!(matches!(
            c.auth_for("127.0.0.1:5001"),
            RegistryAuth::Basic(u, p) if u == "bob" && p == "pw:with:colons"
        ));
        assert!(matches!(
            c.auth_for("helper-only.example"),
            RegistryAuth::Anonymous
        ));
        assert!(!format!("{c:?}").contains("s3cret"));
    }

    #[test]
    fn a_broken_auth_entry_names_its_registry() {
        let json = br#"{"auths": {"r.example": {"auth": "not base64!"}}}"#;
        let e = Credentials::from_json(json, "secret team-a/pull").unwrap_err();
        assert_eq!(
            e.to_string(),
            "registry credentials: `secret team-a/pull`: the `auth` of `r.example` is not base64 of USER:PASSWORD"
        );
    }
}
