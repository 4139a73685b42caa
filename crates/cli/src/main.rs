//! The `informant` command line: a thin layer over the library, one module per subcommand.

mod cli;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use informant_runtime::workers::{self, WorkerAffinity};

#[derive(Parser)]
#[command(
    name = "informant",
    version,
    about = "Kubernetes event hooks in sandboxed WebAssembly"
)]
struct Cli {
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,
    /// `pin`: each tokio worker on a CPU of its own, for CPUs the process has to itself (the
    /// process must be allowed exactly one CPU per worker; `TOKIO_WORKER_THREADS` sets the
    /// number of workers). Cuts dispatch latency's tail; costs throughput when other busy
    /// processes share the CPUs. `off`: the scheduler places them.
    #[arg(long, default_value = "off", global = true)]
    worker_affinity: WorkerAffinity,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the embedded Kubernetes API server (for kubectl, tests and demos).
    Apiserver(cli::apiserver::Args),
    /// Embedded API server, informers and plugins in one process: no cluster needed.
    Dev(cli::dev::Args),
    /// Informers and plugins against a real cluster (kubeconfig or in-cluster).
    Run(cli::run::Args),
    /// Would this plugin load? Checks the component, the manifest and a tenant's grant, offline.
    Check(cli::check::Args),
    /// Scaffold a plugin crate (informant-sdk, manifest, a passing unit test).
    New(cli::new::Args),
    /// Record a live event stream to a JSON Lines file, to replay later.
    Record(cli::record::Args),
    /// Run one plugin offline against a recording, printing its logs.
    Replay(cli::replay::Args),
    /// What a running host's plugins are doing: a table read from its admin server.
    Status(cli::status::Args),
    /// One plugin's log lines from a running host's admin server (`-f` to follow).
    Logs(cli::logs::Args),
    /// Events a running host's plugins failed for good (with `--state-dir`): list, retry, drop.
    DeadLetters(cli::dead_letters::Args),
    /// Ask a running host to check a plugin's OCI source now.
    Poll(cli::poll::Args),
    /// Push a plugin and its manifest to an OCI registry (CNCF wasm layout).
    Push(cli::registry::PushArgs),
    /// Pull a plugin from an OCI registry into a plugins directory.
    Pull(cli::registry::PullArgs),
    /// Sign a pushed plugin with a key, as `cosign sign --key` does.
    Sign(cli::registry::SignArgs),
}

/// mimalloc rather than glibc's malloc: a list's decoding garbage is handed back to the system
/// after sync (end-to-end bench, 20k pods with managedFields: 19.5 -> 8.9 KiB RSS per pod).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<()> {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    let runtime = workers::runtime(cli.worker_affinity).context("starting the tokio runtime")?;
    runtime.block_on(run(cli.command))
}

async fn run(command: Command) -> Result<()> {
    match command {
        Command::Apiserver(args) => cli::apiserver::run(args).await,
        Command::Dev(args) => cli::dev::run(args).await,
        Command::Run(args) => cli::run::run(args).await,
        Command::Check(args) => cli::check::run(args).await,
        Command::New(args) => cli::new::run(args),
        Command::Record(args) => cli::record::run(args).await,
        Command::Replay(args) => cli::replay::run(args).await,
        Command::Status(args) => cli::status::run(args).await,
        Command::Logs(args) => cli::logs::run(args).await,
        Command::DeadLetters(args) => cli::dead_letters::run(args).await,
        Command::Poll(args) => cli::poll::run(args).await,
        Command::Push(args) => cli::registry::push(args).await,
        Command::Pull(args) => cli::registry::pull(args).await,
        Command::Sign(args) => cli::registry::sign(args).await,
    }
}

fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    let spec = std::env::var("RUST_LOG").unwrap_or_default();
    let mut filter = tracing_subscriber::EnvFilter::try_new(&spec)
        .ok()
        .filter(|_| !spec.is_empty())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new("info"));
    for target in informant_runtime::informer::reflector::QUIETED_TARGETS {
        if !spec.contains(target)
            && let Ok(directive) = format!("{target}=error").parse()
        {
            filter = filter.add_directive(directive);
        }
    }
    // tungstenite traces every websocket frame's payload, and a port-forward's frames carry
    // the admin request with its bearer token: never below info, whatever RUST_LOG says.
    if let Ok(directive) = "tungstenite=info".parse() {
        filter = filter.add_directive(directive);
    }
    let ansi = colour(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}

/// Colour only for a person at a terminal: a file or a pipe gets plain text, and a non-empty
/// `NO_COLOR` turns it off everywhere (no-color.org).
pub(crate) fn colour(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::colour;
    use std::ffi::OsStr;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour(true, None));
        assert!(colour(true, Some(OsStr::new(""))));
        assert!(!colour(true, Some(OsStr::new("1"))));
        assert!(!colour(false, None));
        assert!(!colour(false, Some(OsStr::new("1"))));
    }
}
