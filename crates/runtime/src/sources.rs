//! Plugins pulled from OCI registries (`[[sources]]`, `[[tenants.NAME.sources]]`).
//!
//! Each source's reference is resolved to a digest, pulled and checked ([`informant_oci`]), and
//! its `NAME.wasm` and `NAME.toml` written whole into the pulled directory, laid out as the
//! plugins directory is (a tenant's in its subdirectory); the host scans it beside the plugins
//! directory, so a pulled plugin is admitted, granted and run exactly as one dropped in. A tag
//! is resolved again every `poll-seconds`: a new digest is pulled and hot-swapped by the same
//! reconcile a changed file gets. A failed resolve or pull keeps what runs, says why in the
//! plugin's status and log, and is retried with the host's backoff.
//!
//! Under a trust policy (`[signatures]`, or the tenant's own), what is pulled is written only
//! when it carries a cosign signature by one of the policy's keys, for its digest; otherwise
//! the running version stays, as for any failed pull. A kept directory's files are loaded at
//! start only if the signer the marker records is one the policy in force still trusts.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use informant_oci::credentials::Credentials;
use informant_oci::registry::PlainHttp;
use informant_oci::signature::{KeyError, Signer, TrustPolicy, VerifyError};
use informant_oci::{Options, Reference, Registry};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use crate::backoff::Backoff;
use crate::manifest::Manifest;
use crate::plugin::id::PluginId;
use crate::plugin::load::host_config::SourceSpec;
use crate::plugin::load::loader::PluginHost;
use crate::plugin::load::status::{ReconcileReport, SourceStatus};

/// The pulled directory's layer cache (a name no tenant can have).
const LAYERS: &str = ".layers";

/// The most layer bytes kept in the cache.
const LAYER_CACHE_BYTES: u64 = 256 << 20;

/// Retries of a failed resolve or pull: from 5 s up to the poll interval's order.
const RETRY: Backoff = Backoff::new(Duration::from_secs(5), Duration::from_secs(300));

/// Why one source could not be brought up to date.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Its registry login or CA could not be read, or the registry refused or failed.
    #[error(transparent)]
    Registry(#[from] informant_oci::Error),
    /// Its dockerconfigjson could not be read.
    #[error(transparent)]
    Credentials(#[from] informant_oci::credentials::Error),
    /// The artifact carries no manifest (`NAME.toml`) to load it with.
    #[error(
        "{pinned} carries no plugin manifest (a layout other tools push): push it with `informant push`"
    )]
    NoManifest {
        /// What was pulled.
        pinned: String,
    },
    /// The manifest it carries is not one this host loads.
    #[error("{pinned}: its manifest: {source}")]
    Manifest {
        /// What was pulled.
        pinned: String,
        /// Why.
        #[source]
        source: crate::manifest::ManifestError,
    },
    /// The plugins directory has a plugin of the same name for the same tenant: it runs.
    #[error("`{path}` is in the plugins directory: it runs instead; rename one")]
    Clash {
        /// The plugin directory's file.
        path: PathBuf,
    },
    /// The pulled files could not be written.
    #[error(transparent)]
    Write(#[from] informant_oci::files::WriteError),
    /// The tenant's directory in the pulled directory could not be made, or is not private.
    #[error(transparent)]
    Dir(#[from] informant_state::private::PrivateError),
    /// A key of its trust policy could not be read.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// It is not signed as its trust policy requires.
    #[error(transparent)]
    Signature(#[from] VerifyError),
}

/// What a source last wrote: the reference pinned to it and, under a trust policy, who signed
/// it. Kept in the marker file as JSON.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Pulled {
    pinned: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    signer: Option<Signer>,
}

/// The running sources; stopped when dropped.
pub struct Sources {
    _tasks: JoinSet<()>,
    polls: Polls,
}

/// A request to check a source now, answered with what the check left.
type Poll = oneshot::Sender<SourceStatus>;

/// Asks the sources' followers to check now, whatever their poll interval or backoff says.
#[derive(Clone, Default)]
pub struct Polls(Arc<std::collections::BTreeMap<PluginId, mpsc::Sender<Poll>>>);

impl Polls {
    /// Has `id`'s source resolved (and, if it moved, pulled, checked and written) now; what
    /// that left, or `None` when no source writes `id`.
    pub async fn poll(&self, id: &PluginId) -> Option<SourceStatus> {
        let follower = self.0.get(id)?;
        let (reply, answer) = oneshot::channel();
        follower.send(reply).await.ok()?;
        answer.await.ok()
    }
}

impl Sources {
    /// Starts following every source in `host`'s config, writing into `pulled` (the directory
    /// `host` was given with [`PluginHost::with_pulled_dir`]); each reconcile a new pull causes
    /// is reported to `reports`. Before it returns, what `pulled` holds of sources no longer
    /// configured is removed, so a kept directory never runs a plugin the config dropped; what
    /// it holds of configured ones loads at once, before its registry answers.
    pub fn start(
        host: Arc<PluginHost>,
        pulled: PathBuf,
        reports: Option<mpsc::UnboundedSender<ReconcileReport>>,
    ) -> Sources {
        let specs = host.config().sources.clone();
        prune(&pulled, &specs);
        for spec in &specs {
            distrust(&pulled, spec);
        }
        let cache = match informant_state::private::ensure_dir(
            &pulled.join(LAYERS),
            informant_state::private::Secret::No,
        ) {
            Ok(()) => Some(informant_oci::cache::BlobCache::new(
                pulled.join(LAYERS),
                LAYER_CACHE_BYTES,
            )),
            Err(e) => {
                tracing::warn!(error = %e, "pulled layers are not cached: each pull downloads its layer");
                None
            }
        };
        let mut tasks = JoinSet::new();
        let mut polls = std::collections::BTreeMap::new();
        for spec in specs {
            let (ask, asked) = mpsc::channel(16);
            let follower = Follower {
                host: host.clone(),
                dir: match spec.tenant.as_str() {
                    "" => pulled.clone(),
                    tenant => pulled.join(tenant),
                },
                id: PluginId {
                    tenant: spec.tenant.clone(),
                    name: spec.name.clone(),
                },
                reports: reports.clone(),
                cache: cache.clone(),
                spec,
            };
            polls.insert(follower.id.clone(), ask);
            tasks.spawn(follower.run(asked));
        }
        Sources {
            _tasks: tasks,
            polls: Polls(Arc::new(polls)),
        }
    }

    /// What asks the followers to check now.
    pub fn polls(&self) -> Polls {
        self.polls.clone()
    }
}

/// One source, kept up to date.
struct Follower {
    host: Arc<PluginHost>,
    spec: SourceSpec,
    /// Its tenant's directory in the pulled directory.
    dir: PathBuf,
    id: PluginId,
    reports: Option<mpsc::UnboundedSender<ReconcileReport>>,
    /// Layers kept by digest, shared by every source.
    cache: Option<informant_oci::cache::BlobCache>,
}

impl Follower {
    /// Follows the source; each request on `asked` is a check now, answered when it is done.
    async fn run(self, mut asked: mpsc::Receiver<Poll>) {
        let span = self.id.span();
        // What an earlier run wrote, if its files are still there.
        let mut written = kept(&self.dir, &self.spec);
        let mut failures = 0;
        let mut waiting: Vec<Poll> = Vec::new();
        loop {
            let outcome = self.sync(written.as_ref()).await;
            let mut status = SourceStatus {
                reference: self.spec.reference.clone(),
                pinned: written.as_ref().map(|w| w.pinned.clone()),
                signer: written.as_ref().and_then(|w| w.signer.clone()),
                error: None,
                checked: jiff::Timestamp::now().to_string(),
            };
            let wait = match outcome {
                Ok(Some(pulled)) => {
                    let signer = pulled.signer.as_ref().map(ToString::to_string);
                    span.in_scope(
                        || tracing::info!(source = %self.spec.reference, pinned = %pulled.pinned, signer = signer.as_deref().unwrap_or("not checked"), "plugin pulled"),
                    );
                    status.pinned = Some(pulled.pinned.clone());
                    status.signer = pulled.signer.clone();
                    written = Some(pulled);
                    self.host.set_source_status(&self.id, status);
                    let report = self.host.reconcile().await;
                    if let Some(r) = &self.reports {
                        let _ = r.send(report);
                    }
                    failures = 0;
                    self.spec.poll
                }
                Ok(None) => {
                    self.host.set_source_status(&self.id, status);
                    failures = 0;
                    self.spec.poll
                }
                Err(e) => {
                    span.in_scope(|| tracing::warn!(source = %self.spec.reference, error = %e, kept = written.as_ref().map_or("nothing", |w| w.pinned.as_str()), "plugin source not pulled; retried with backoff"));
                    status.error = Some(e.to_string());
                    self.host.set_source_status(&self.id, status);
                    failures += 1;
                    Some(RETRY.delay(failures))
                }
            };
            // Answered with what this check recorded (each branch above records it).
            if let Some(status) = self.host.source_status(&self.id) {
                for reply in waiting.drain(..) {
                    let _ = reply.send(status.clone());
                }
            }
            // The poll interval (or the retry's backoff): a schedule, not a wait for something;
            // a digest never moves, so only a request checks it again.
            let due = async {
                match wait {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = due => {}
                Some(reply) = asked.recv() => waiting.push(reply),
            }
            // Requests that arrived meanwhile are answered by the same check.
            while let Ok(reply) = asked.try_recv() {
                waiting.push(reply);
            }
        }
    }

    /// Pulls the source if it now names something other than `written`; what it wrote.
    async fn sync(&self, written: Option<&Pulled>) -> Result<Option<Pulled>, Error> {
        let registry = self.registry()?;
        let reference: Reference = self
            .spec
            .reference
            .parse()
            .expect("checked when the config was read");
        let digest = registry.resolve(&reference).await?;
        if written.is_some_and(|w| w.pinned.ends_with(&format!("@{digest}")))
            && self.dir.join(format!("{}.wasm", self.spec.name)).is_file()
        {
            return Ok(None);
        }
        let artifact = registry.pull(&reference).await?;
        let text = artifact
            .manifest
            .as_deref()
            .ok_or_else(|| Error::NoManifest {
                pinned: artifact.pinned.clone(),
            })?;
        let manifest_path = self.dir.join(format!("{}.toml", self.spec.name));
        Manifest::parse(text, &manifest_path).map_err(|source| Error::Manifest {
            pinned: artifact.pinned.clone(),
            source,
        })?;
        let own = match self.spec.tenant.as_str() {
            "" => self.host.dir().to_path_buf(),
            tenant => self.host.dir().join(tenant),
        };
        self.clash(&own)?;
        // The digest of the bytes pulled, not the tag's: a signature vouches for one manifest.
        let signer = match policy(&self.spec)? {
            Some(policy) => Some(
                registry
                    .verify(&reference, &artifact.digest, &policy)
                    .await?,
            ),
            None => None,
        };
        informant_state::private::ensure_dir(&self.dir, informant_state::private::Secret::No)?;
        informant_oci::files::write_plugin(&self.dir, &self.spec.name, &artifact.wasm, Some(text))?;
        let pulled = Pulled {
            pinned: artifact.pinned,
            signer,
        };
        // Only a shortcut for the next start: a marker that is lost or torn means a pull.
        let _ = std::fs::write(
            marker(&self.dir, &self.spec),
            serde_json::to_vec(&pulled).expect("serializes"),
        );
        Ok(Some(pulled))
    }

    /// Refuses a name the plugins directory already has for this tenant.
    fn clash(&self, own: &Path) -> Result<(), Error> {
        for ext in ["wasm", "toml"] {
            let path = own.join(format!("{}.{ext}", self.spec.name));
            if path.exists() {
                return Err(Error::Clash { path });
            }
        }
        Ok(())
    }

    /// A registry client with the source's login, CA and plain-HTTP setting, and the host's
    /// size limits. Made per pull: a rotated login or CA file is read again.
    fn registry(&self) -> Result<Registry, Error> {
        let config = self.host.config();
        let credentials = match &self.spec.registry_config {
            Some(path) => Credentials::from_file(path)?,
            None => Credentials::none(),
        };
        Ok(Registry::new(Options {
            credentials,
            ca_file: self.spec.registry_ca.clone(),
            plain_http: match self.spec.plain_http {
                true => PlainHttp::Loopback,
                false => PlainHttp::Never,
            },
            max_wasm_bytes: config.max_wasm_bytes,
            max_manifest_bytes: config.max_manifest_bytes,
            mirrors: config.mirrors.clone(),
            cache: self.cache.clone(),
            ..Options::default()
        })?)
    }
}

/// Where a source's [`Pulled`] is kept, in its tenant's directory `dir` (no `.wasm` or `.toml`
/// name a scan would pick up).
fn marker(dir: &Path, spec: &SourceSpec) -> PathBuf {
    dir.join(format!(".{}.pinned", spec.name))
}

/// What an earlier run wrote for `spec` in `dir`, if its files are still there. A marker of an
/// earlier release holds the pinned reference alone.
fn kept(dir: &Path, spec: &SourceSpec) -> Option<Pulled> {
    if !dir.join(format!("{}.wasm", spec.name)).is_file() {
        return None;
    }
    let text = std::fs::read_to_string(marker(dir, spec)).ok()?;
    serde_json::from_str(&text).ok().or_else(|| {
        Some(Pulled {
            pinned: text.trim().to_string(),
            signer: None,
        })
    })
}

/// The trust policy `spec` is pulled under, read from its key files now (a rotated key is read
/// again); none when its signatures are not checked.
fn policy(spec: &SourceSpec) -> Result<Option<TrustPolicy>, KeyError> {
    spec.signatures.as_ref().map(|p| p.load()).transpose()
}

/// Removes `spec`'s kept files from `pulled` when its trust policy does not trust who signed
/// them (unsigned, another key, or keys that cannot be read now): a policy made stricter must
/// not run what an earlier one let in, even for the moment before its registry answers.
fn distrust(pulled: &Path, spec: &SourceSpec) {
    let dir = match spec.tenant.as_str() {
        "" => pulled.to_path_buf(),
        tenant => pulled.join(tenant),
    };
    let Some(kept) = kept(&dir, spec) else {
        return;
    };
    let trusted = match policy(spec) {
        Ok(None) => true,
        Ok(Some(policy)) => kept.signer.as_ref().is_some_and(|s| policy.trusts(s)),
        Err(_) => false,
    };
    if !trusted {
        tracing::warn!(source = %spec.reference, pinned = %kept.pinned, "a kept pull is not signed by a key the trust policy holds now; pulled again");
        for file in [
            format!("{}.wasm", spec.name),
            format!("{}.toml", spec.name),
            format!(".{}.pinned", spec.name),
        ] {
            remove(&dir.join(file));
        }
    }
}

/// Removes from `pulled` every plugin file (and marker) no source in `specs` writes: a source
/// dropped from the config must not keep running from a kept directory.
fn prune(pulled: &Path, specs: &[SourceSpec]) {
    let wanted = |tenant: &str, file: &str| {
        specs.iter().any(|s| {
            s.tenant == tenant
                && [
                    format!("{}.wasm", s.name),
                    format!("{}.toml", s.name),
                    format!(".{}.pinned", s.name),
                ]
                .iter()
                .any(|f| f == file)
        })
    };
    let Ok(top) = std::fs::read_dir(pulled) else {
        return;
    };
    for entry in top.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        // The layer cache, which trims itself.
        if name == LAYERS {
            continue;
        }
        if kind.is_dir() {
            let Ok(inner) = std::fs::read_dir(entry.path()) else {
                continue;
            };
            for file in inner.flatten() {
                let file_name = file.file_name().to_string_lossy().into_owned();
                if !wanted(&name, &file_name) {
                    remove(&file.path());
                }
            }
        } else if !wanted("", &name) {
            remove(&entry.path());
        }
    }
}

fn remove(path: &Path) {
    if let Err(e) = std::fs::remove_file(path) {
        tracing::warn!(path = %path.display(), error = %e, "a pulled file no source writes could not be removed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(tenant: &str, name: &str) -> SourceSpec {
        SourceSpec {
            tenant: tenant.into(),
            reference: format!("r.example/{name}:1"),
            name: name.into(),
            poll: None,
            registry_config: None,
            registry_ca: None,
            plain_http: false,
            signatures: None,
        }
    }

    #[test]
    fn a_kept_directory_loses_what_no_source_writes_any_more() {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            "kept.wasm",
            "kept.toml",
            ".kept.pinned",
            "dropped.wasm",
            "dropped.toml",
            "team-a/mine.wasm",
            "team-a/mine.toml",
            "team-a/kept.wasm",
            "team-b/mine.wasm",
            ".layers/sha256-0000",
        ];
        for f in files {
            let path = dir.path().join(f);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b"x").unwrap();
        }
        prune(dir.path(), &[spec("", "kept"), spec("team-a", "mine")]);
        let mut left: Vec<String> = files
            .iter()
            .filter(|f| dir.path().join(f).exists())
            .map(|f| f.to_string())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                ".kept.pinned",
                ".layers/sha256-0000",
                "kept.toml",
                "kept.wasm",
                "team-a/mine.toml",
                "team-a/mine.wasm"
            ]
        );
    }
}
