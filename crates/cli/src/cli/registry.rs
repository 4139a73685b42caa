//! `informant push`, `informant pull` and `informant sign`: plugins as OCI artifacts in the CNCF
//! wasm layout, signed as cosign signs ([`informant_oci`]).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use informant_oci::credentials::Credentials;
use informant_oci::files::write_plugin;
use informant_oci::registry::PlainHttp;
use informant_oci::signature::{PublicKey, SigningKey, TrustPolicy};
use informant_oci::{Options, Reference, Registry};
use informant_runtime::manifest::Manifest;
use informant_runtime::plugin::load::check::manifest_beside;

/// How to reach the registry: the same for `push` and `pull`.
#[derive(clap::Args)]
pub struct RegistryArgs {
    /// Registry logins: a dockerconfigjson (default: `$DOCKER_CONFIG/config.json`, else
    /// `~/.docker/config.json`, if there is one).
    #[arg(long, value_name = "config.json")]
    registry_config: Option<PathBuf>,
    /// CA certificates (PEM) trusted for the registry besides the system's.
    #[arg(long, value_name = "PEM")]
    registry_ca: Option<PathBuf>,
    /// Plain HTTP instead of HTTPS, for a registry on a loopback address only.
    #[arg(long)]
    plain_http: bool,
    /// Plain HTTP for any registry: credentials and plugins cross the network unprotected.
    #[arg(long)]
    plain_http_anywhere: bool,
}

impl RegistryArgs {
    /// A registry client with these logins, CA and plain-HTTP setting.
    pub(super) fn registry(&self) -> Result<Registry> {
        let credentials = match self.registry_config.clone().or_else(default_docker_config) {
            Some(path) => Credentials::from_file(&path)?,
            None => Credentials::none(),
        };
        let plain_http = match (self.plain_http_anywhere, self.plain_http) {
            (true, _) => PlainHttp::Anywhere,
            (false, true) => PlainHttp::Loopback,
            (false, false) => PlainHttp::Never,
        };
        Ok(Registry::new(Options {
            credentials,
            ca_file: self.registry_ca.clone(),
            plain_http,
            ..Options::default()
        })?)
    }
}

/// Docker's own default, where `docker login` writes: only if the file is there.
fn default_docker_config() -> Option<PathBuf> {
    let dir = match std::env::var_os("DOCKER_CONFIG") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".docker"),
    };
    Some(dir.join("config.json")).filter(|p| p.is_file())
}

/// Arguments of `informant push`.
#[derive(clap::Args)]
pub struct PushArgs {
    /// The plugin component (`NAME.wasm`).
    plugin: PathBuf,
    /// Where to push it: `REGISTRY/REPOSITORY:TAG`.
    reference: String,
    /// Its manifest (default: `NAME.toml` beside the component); carried in the artifact.
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// The plugin's name in the artifact (default: the component's file name without `.wasm`).
    #[arg(long)]
    name: Option<String>,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Pushes a plugin and its manifest; prints the reference pinned to what was pushed.
pub async fn push(args: PushArgs) -> Result<()> {
    let reference = parse(&args.reference)?;
    let manifest_path = args
        .manifest
        .clone()
        .unwrap_or_else(|| manifest_beside(&args.plugin));
    let name = match &args.name {
        Some(n) => n.clone(),
        None => args
            .plugin
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .with_context(|| format!("`{}` names no file", args.plugin.display()))?,
    };
    let registry = args.registry.registry()?;
    let pushed = push_files(&registry, &reference, &args.plugin, &manifest_path, &name).await?;
    println!("{}", pushed.pinned);
    Ok(())
}

/// Pushes the component at `plugin` with the manifest at `manifest_path` as `name` to
/// `reference`, once the manifest is known to load.
pub(super) async fn push_files(
    registry: &Registry,
    reference: &Reference,
    plugin: &std::path::Path,
    manifest_path: &std::path::Path,
    name: &str,
) -> Result<informant_oci::Pushed> {
    let wasm = std::fs::read(plugin).with_context(|| format!("reading `{}`", plugin.display()))?;
    let manifest = std::fs::read_to_string(manifest_path)
        .with_context(|| format!("reading `{}`", manifest_path.display()))?;
    // What would not load here is not worth publishing.
    Manifest::parse(&manifest, manifest_path)?;
    eprintln!(
        "pushing `{}` ({} KiB) and `{}` to {}",
        plugin.display(),
        wasm.len().div_ceil(1024),
        manifest_path.display(),
        reference.whole()
    );
    Ok(registry.push(reference, name, wasm, &manifest).await?)
}

/// Where `informant dev --push` pushes each plugin it builds: `PREFIX/[TENANT/]NAME:dev`.
pub(super) struct DevPush {
    registry: Registry,
    prefix: String,
}

impl DevPush {
    /// Pushes under `prefix` (`REGISTRY/REPOSITORY-PREFIX`) with `args`' registry access; the
    /// prefix is checked now.
    pub(super) fn new(prefix: &str, args: &RegistryArgs) -> Result<Self> {
        let prefix = prefix.trim_end_matches('/').to_string();
        parse(&format!("{prefix}/plugin:dev"))
            .with_context(|| format!("--push {prefix}: not REGISTRY/REPOSITORY-PREFIX"))?;
        Ok(DevPush {
            registry: args.registry()?,
            prefix,
        })
    }

    /// Pushes the built plugin `tenant/name` from the plugins directory `out_dir`; the pinned
    /// reference pushed.
    pub(super) async fn push(
        &self,
        out_dir: &std::path::Path,
        tenant: &str,
        name: &str,
    ) -> Result<String> {
        let (dir, repository) = match tenant {
            "" => (out_dir.to_path_buf(), format!("{}/{name}", self.prefix)),
            t => (out_dir.join(t), format!("{}/{t}/{name}", self.prefix)),
        };
        let reference = parse(&format!("{repository}:dev"))?;
        let pushed = push_files(
            &self.registry,
            &reference,
            &dir.join(format!("{name}.wasm")),
            &dir.join(format!("{name}.toml")),
            name,
        )
        .await?;
        Ok(pushed.pinned)
    }
}

/// Arguments of `informant pull`.
#[derive(clap::Args)]
pub struct PullArgs {
    /// What to pull: `REGISTRY/REPOSITORY:TAG` or `REGISTRY/REPOSITORY@sha256:…`.
    reference: String,
    /// The plugins directory (or a tenant's subdirectory) to write `NAME.wasm` and `NAME.toml`
    /// into.
    dir: PathBuf,
    /// The name to write it under (default: the artifact's title, else the repository's last
    /// segment).
    #[arg(long)]
    name: Option<String>,
    /// Write it only if it carries a cosign signature by this public key (PEM); repeat for
    /// several, any one of which will do.
    #[arg(long = "key", value_name = "cosign.pub")]
    keys: Vec<PathBuf>,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Pulls a plugin into a directory, each file replaced whole; prints what it wrote.
pub async fn pull(args: PullArgs) -> Result<()> {
    let reference = parse(&args.reference)?;
    if !args.dir.is_dir() {
        bail!("`{}` is not a directory", args.dir.display());
    }
    let policy = match args.keys.is_empty() {
        true => None,
        false => Some(TrustPolicy::new(
            args.keys
                .iter()
                .map(|k| PublicKey::from_file(k))
                .collect::<Result<_, _>>()?,
        )),
    };
    let registry = args.registry.registry()?;
    let artifact = registry.pull(&reference).await?;
    if let Some(policy) = &policy {
        let signer = registry
            .verify(&reference, &artifact.digest, policy)
            .await?;
        eprintln!("{} is signed by {signer}", artifact.pinned);
    }
    let name = match (&args.name, &artifact.name) {
        (Some(n), _) | (None, Some(n)) => n.clone(),
        (None, None) => informant_oci::layout::repository_name(&reference).to_string(),
    };
    informant_oci::layout::check_name(&name)
        .map_err(|reason| anyhow::anyhow!("plugin name {name:?} {reason}: pass --name"))?;
    // What would not load here is not worth writing.
    if let Some(text) = &artifact.manifest {
        Manifest::parse(text, &args.dir.join(format!("{name}.toml")))
            .with_context(|| format!("the manifest carried by {}", artifact.pinned))?;
    }
    let written = write_plugin(
        &args.dir,
        &name,
        &artifact.wasm,
        artifact.manifest.as_deref(),
    )?;
    for path in &written {
        println!("{} -> {}", artifact.pinned, path.display());
    }
    if artifact.manifest.is_none() {
        eprintln!(
            "note: the artifact carries no manifest{}: write `{}` beside the component",
            if artifact.legacy {
                " (a legacy wasm layout)"
            } else {
                ""
            },
            args.dir.join(format!("{name}.toml")).display()
        );
    }
    Ok(())
}

/// Arguments of `informant sign`.
#[derive(clap::Args)]
pub struct SignArgs {
    /// What to sign: `REGISTRY/REPOSITORY:TAG` (its current digest) or `…@sha256:…`.
    reference: String,
    /// The private key: unencrypted PKCS#8 PEM (`openssl genpkey -algorithm EC -pkeyopt
    /// ec_paramgen_curve:P-256`), ECDSA P-256 or P-384, or Ed25519.
    #[arg(long, value_name = "KEY.pem")]
    key: PathBuf,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Signs a pushed plugin as `cosign sign --key` does, beside its other signatures; prints the
/// digest signed and where the signature is.
pub async fn sign(args: SignArgs) -> Result<()> {
    let reference = parse(&args.reference)?;
    let key = SigningKey::from_file(&args.key)?;
    let registry = args.registry.registry()?;
    let signed = registry.sign(&reference, &key).await?;
    eprintln!(
        "signed {} with {} ({})",
        signed.pinned,
        args.key.display(),
        key.public_key().fingerprint()
    );
    println!("{}", signed.tag);
    Ok(())
}

fn parse(reference: &str) -> Result<Reference> {
    reference
        .parse()
        .with_context(|| format!("`{reference}` is not an OCI reference (REGISTRY/REPOSITORY:TAG)"))
}
