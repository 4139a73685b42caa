//! `informant dev`: the embedded API server, informers and plugins in one process — no cluster.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use informant_dev::{Builder, DevEvent, DevLoop, DevLoopConfig, Lang, Polyglot};
use informant_devserver::{DevServer, DevServerConfig};
use informant_runtime::admin::client::dev_address;
use informant_runtime::informer::WatchScope;
use informant_runtime::runtime::{Runtime, RuntimeOptions, StateOptions};

/// Arguments of `informant dev`.
#[derive(clap::Args)]
pub struct Args {
    /// Address for the embedded API server.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Where to write the kubeconfig (default: a file in the temp dir).
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
    /// Plugins: compiled (`NAME.wasm` + `NAME.toml`) or sources (directories `NAME/` holding
    /// `NAME.toml` and a `Cargo.toml`, a `plugin.py` or a `src/plugin.ts`, built into components
    /// and rebuilt on change); tenants in subdirectories. Hot-reloaded either way.
    #[arg(long)]
    plugins: Option<PathBuf>,
    /// cargo's target directory for plugin sources, shared by all of them; the built plugins
    /// are installed in its `plugins/` subdirectory, and the Python and JS toolchains (when
    /// the SDKs do not have them) in `py-toolchain/` and `js-toolchain/`.
    #[arg(long, default_value = "target/informant-dev")]
    target_dir: PathBuf,
    /// Don't create the demo namespace and objects.
    #[arg(long)]
    no_seed: bool,
    /// Create these objects at start instead of the built-in demo (multi-document YAML, as
    /// for `kubectl apply -f`).
    #[arg(long, value_name = "FILE.yaml", conflicts_with = "no_seed")]
    seed: Option<PathBuf>,
    /// Serve the admin endpoints (/metrics, /healthz, /readyz, /plugins, /logs,
    /// /dead-letters) here, plain HTTP without authentication. Default: 127.0.0.1:9091, or a
    /// free loopback port if that is taken; the address is published for `informant status`.
    #[arg(long, value_name = "ADDR", conflicts_with = "no_admin")]
    admin: Option<SocketAddr>,
    /// Serve no admin endpoints.
    #[arg(long)]
    no_admin: bool,
    /// Push each plugin built from source, at its first build and whenever a build changes it, to
    /// `REGISTRY/PREFIX/[TENANT/]NAME:dev` (a local registry: `127.0.0.1:5000/dev`).
    #[arg(long, value_name = "REGISTRY/PREFIX")]
    push: Option<String>,
    #[command(flatten)]
    registry: super::registry::RegistryArgs,
    #[command(flatten)]
    host: super::HostArgs,
}

/// What `dev`'s state is kept for: its embedded API server, whatever port it listens on.
const DEV_CLUSTER: &str = "informant dev: the embedded API server";

/// Runs until SIGINT (Ctrl-C) or SIGTERM.
pub async fn run(args: Args) -> Result<()> {
    // Held to the end: dropping it sends the spans still queued.
    let _traces = args.host.start_traces()?;
    let server = DevServer::start(DevServerConfig {
        listen: args.listen,
        ..Default::default()
    })
    .await?;
    let path = args.kubeconfig_out.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("informant-{}.kubeconfig", server.addr().port()))
    });
    server.write_kubeconfig(&path)?;
    match &args.seed {
        Some(file) => seed_file(&server, file)?,
        None if !args.no_seed => seed_demo(&server)?,
        None => {}
    }
    // Plugin sources are built into a compiled plugins directory, which the runtime loads.
    let push = match &args.push {
        Some(prefix) => Some(super::registry::DevPush::new(prefix, &args.registry)?),
        None => None,
    };
    let (plugins, _dev_loop) = match args.plugins {
        Some(dir) => {
            let (dir, dev_loop) = build_sources(dir, args.target_dir, push).await?;
            (Some(dir), dev_loop)
        }
        None => (None, None),
    };
    let admin = match (args.admin, args.no_admin) {
        (_, true) => None,
        (Some(addr), false) => Some(addr),
        (None, false) => Some(default_admin()),
    };
    let (host, state_dir) = args.host.runtime_options()?;
    // Admission plugins run end to end: the embedded server calls the host's webhooks.
    let admission = args
        .host
        .admission()
        .options(Some((DEFAULT_ADMISSION, DEV_WEBHOOK)))?;
    let runtime = Runtime::start(
        server.client(),
        RuntimeOptions {
            plugins,
            scope: WatchScope::default(),
            admin,
            state: state_dir.map(|dir| StateOptions {
                dir,
                // Not the URL: its port is new on every start, and the state would be set
                // aside as another cluster's each time.
                cluster: DEV_CLUSTER.into(),
                server_starts_empty: true,
                ..Default::default()
            }),
            admission,
            ..host
        },
    )
    .await?;
    eprintln!(
        "Embedded API server on {}\nkubeconfig: {}\nTry:\n  kubectl --kubeconfig {} create configmap hello --from-literal=greeting=hi",
        server.url(),
        path.display(),
        path.display()
    );
    // Held to the end: dropping it removes the published address.
    let _published = runtime.admin_addr().and_then(publish_admin);
    super::shutdown_signal().await?;
    runtime.stop().await;
    server.shutdown().await;
    Ok(())
}

/// Where dev's admission webhooks listen unless told: a free loopback port.
const DEFAULT_ADMISSION: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

/// The webhook configurations `dev` keeps pointing at its host.
const DEV_WEBHOOK: &str = "informant-dev";

/// Where dev's admin listens unless told: a fixed port, so bookmarks and scripts keep working.
const DEFAULT_ADMIN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 9091);

/// [`DEFAULT_ADMIN`], or a free loopback port (port 0) if something else holds it.
fn default_admin() -> SocketAddr {
    match std::net::TcpListener::bind(DEFAULT_ADMIN) {
        Ok(_) => DEFAULT_ADMIN,
        Err(e) => {
            eprintln!(
                "admin: {DEFAULT_ADMIN} is taken ({e}); serving on a free loopback port instead"
            );
            SocketAddr::new(DEFAULT_ADMIN.ip(), 0)
        }
    }
}

/// Tells `informant status` where the admin is (see
/// [`informant_runtime::admin::client::dev_address`]); a failure is a warning, not an exit.
fn publish_admin(addr: SocketAddr) -> Option<dev_address::Published> {
    // A wildcard address is reached on loopback; another host's address is not published
    // (a reader takes loopback only).
    let addr = match addr.ip() {
        ip if ip.is_unspecified() => SocketAddr::new(DEFAULT_ADMIN.ip(), addr.port()),
        ip if ip.is_loopback() => addr,
        _ => {
            eprintln!("admin on http://{addr} (pass --admin {addr} to informant status)");
            return None;
        }
    };
    let Some(file) = dev_address::path() else {
        eprintln!(
            "admin on http://{addr} (no home or runtime directory to publish it in: pass --admin {addr} to informant status)"
        );
        return None;
    };
    match dev_address::publish(&file, addr) {
        Ok(published) => {
            eprintln!("admin on http://{addr}: `informant status` and `informant logs` read it");
            Some(published)
        }
        Err(e) => {
            eprintln!(
                "admin on http://{addr}; cannot publish it in {}: {e} (pass --admin {addr} to informant status)",
                file.display()
            );
            None
        }
    }
}

/// A namespace, a deployment and a configmap so `informant dev` has something to show.
fn seed_demo(server: &DevServer) -> Result<()> {
    let objects = [
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}}),
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "demo", "labels": {"app": "web"}},
            "data": {"color": "blue"}}),
        serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "demo", "labels": {"app": "web"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}}),
    ];
    server.seed(objects).context("seeding demo objects")?;
    Ok(())
}

/// Creates the objects of a multi-document YAML file, naming the document of any failure.
fn seed_file(server: &DevServer, file: &Path) -> Result<()> {
    let objects = informant_runtime::replay::read_yaml_objects(file)?;
    for o in &objects {
        server
            .create(o.object.clone())
            .with_context(|| format!("--seed {}: document {}", file.display(), o.document))?;
    }
    eprintln!("seeded {} objects from {}", objects.len(), file.display());
    Ok(())
}

/// For a directory of plugin sources: builds them once (printing progress) and keeps
/// rebuilding them on change; returns the compiled plugins directory to load. A directory of
/// compiled plugins is returned as it is.
/// With `push`, each plugin is pushed at its first build, and again whenever a build changes it.
async fn build_sources(
    dir: PathBuf,
    target_dir: PathBuf,
    push: Option<super::registry::DevPush>,
) -> Result<(PathBuf, Option<DevLoop>)> {
    let sources =
        informant_dev::scan(&dir).with_context(|| format!("--plugins {}", dir.display()))?;
    if sources.plugins.is_empty() {
        return Ok((dir, None));
    }
    let builder = Builder {
        out_dir: target_dir.join("plugins"),
        target_dir,
        color: std::io::stderr().is_terminal(),
        polyglot: Polyglot::detect(),
    };
    let out_dir = builder.out_dir.clone();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let installed = out_dir.clone();
    tokio::spawn(async move {
        // Pushed in this session: a plugin is pushed at its first build here (what is
        // installed may be an earlier session's, and the registry may not have it), then
        // whenever a build changes it.
        let mut pushed = std::collections::HashSet::new();
        while let Some(event) = rx.recv().await {
            print_event(&event);
            let (Some(push), DevEvent::Built { id, changed, .. }) = (&push, &event) else {
                continue;
            };
            if !changed && pushed.contains(id) {
                continue;
            }
            // A push that fails is reported; the plugin runs here all the same.
            match push.push(&installed, &id.tenant, &id.name).await {
                Ok(pinned) => {
                    pushed.insert(id.clone());
                    eprintln!("{id}: pushed {pinned}")
                }
                Err(e) => eprintln!("{id}: not pushed: {e:#}"),
            }
        }
    });
    let dev_loop = DevLoop::start(
        DevLoopConfig {
            sources: dir,
            builder,
        },
        tx,
    )
    .await?;
    Ok((out_dir, Some(dev_loop)))
}

fn print_event(event: &DevEvent) {
    match event {
        DevEvent::Skipped { dir, reason } => {
            eprintln!("skipping {}: {reason}", dir.display())
        }
        DevEvent::InstallingToolchain { lang, dir } => {
            let tool = match lang {
                Lang::Python => "componentize-py from PyPI",
                _ => "componentize-js and esbuild from npm",
            };
            eprintln!(
                "installing {tool} into {} (once; {} plugins build with it)…",
                dir.display(),
                lang.name()
            )
        }
        DevEvent::Building { id, index, total } => {
            eprintln!("building {index}/{total} plugins: {id}…")
        }
        DevEvent::Built {
            id,
            changed,
            warnings,
            elapsed,
        } => {
            for w in warnings {
                eprintln!("{}", w.trim_end());
            }
            let what = if *changed {
                "new version installed"
            } else {
                "unchanged"
            };
            eprintln!("{id}: built in {:.1}s, {what}", elapsed.as_secs_f64());
        }
        DevEvent::Failed { id, error } => {
            eprintln!(
                "{error}\n{id}: not swapped; the running version (if any) keeps handling events"
            )
        }
        DevEvent::Removed { id } => eprintln!("{id}: source removed; plugin unloaded"),
    }
}
