//! `informant logs`: one plugin's log lines from a running host's admin server, followed with
//! `-f`.

use std::io::Write;

use anyhow::Result;

use super::{AdminArgs, Output};

/// Arguments of `informant logs`.
#[derive(clap::Args)]
pub struct Args {
    /// The plugin's name (its file stem).
    plugin: String,
    /// Its tenant: the plugins subdirectory it sits in (left out for a top-level plugin).
    #[arg(long, default_value = "")]
    tenant: String,
    /// Keep printing lines as the plugin logs them, until it is removed or the host stops.
    #[arg(long, short)]
    follow: bool,
    /// Only the last N lines the host keeps.
    #[arg(long, value_name = "N")]
    tail: Option<usize>,
    #[command(flatten)]
    admin: AdminArgs,
    /// `table`: `TIME LEVEL MESSAGE` a line, control characters escaped; `json`: the admin
    /// server's JSON lines as they are.
    #[arg(long, short, value_enum, default_value_t = Output::Table)]
    output: Output,
}

/// Prints the plugin's lines; a closed stdout (`| head`) ends it quietly.
pub async fn run(args: Args) -> Result<()> {
    let client = args.admin.client().await?;
    let mut lines = client
        .logs(&args.tenant, &args.plugin, args.follow, args.tail)
        .await?;
    let mut out = std::io::stdout().lock();
    while let Some(line) = lines.next().await? {
        let text = match args.output {
            Output::Table => line.display(),
            Output::Json => serde_json::to_string(&line)?,
        };
        if writeln!(out, "{text}").and_then(|()| out.flush()).is_err() {
            break;
        }
    }
    Ok(())
}
