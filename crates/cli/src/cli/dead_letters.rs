//! `informant dead-letters`: the events a running host's plugins failed for good (kept with
//! `--state-dir`), listed, delivered again or dropped through its admin server.

use anyhow::Result;
use informant_runtime::admin::client::dead_letters::{dead_letters_table, outcome_text};
use informant_runtime::admin::dead_letters::Selection;

use super::Output;

/// Arguments of `informant dead-letters`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    admin: super::AdminArgs,
    /// `table` (aligned columns) or `json` (what the admin server answered).
    #[arg(long, short, value_enum, default_value_t = Output::Table, global = true)]
    output: Output,
}

#[derive(clap::Subcommand)]
enum Command {
    /// The dead letters kept: of one plugin, one tenant's plugins, or all.
    List {
        /// Only this plugin: `tenant/name`, or its name with `--tenant`, or a top-level
        /// plugin's name.
        #[arg(long)]
        plugin: Option<String>,
        /// Only this tenant's plugins (with `--plugin`: the plugin's tenant).
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Delivers the letters' objects again, as the cache has them now, and removes them.
    Retry(Pick),
    /// Removes the letters without delivering them.
    Drop(Pick),
}

/// Which letters of which plugin.
#[derive(clap::Args)]
struct Pick {
    /// The plugin: `tenant/name`, or `name` for a top-level plugin (as `informant status`
    /// shows it with its tenant).
    plugin: String,
    /// The letters' ids (the `ID` column of `list`).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    ids: Vec<u64>,
    /// Every letter of the plugin.
    #[arg(long)]
    all: bool,
}

impl Pick {
    fn selection(self) -> Selection {
        Selection {
            plugin: self.plugin,
            ids: (!self.all).then_some(self.ids),
            all: self.all,
        }
    }
}

/// Runs the subcommand; an admin server's refusal (no state dir, unknown plugin) is the error.
pub async fn run(args: Args) -> Result<()> {
    let client = args.admin.client().await?;
    match args.command {
        Command::List { plugin, tenant } => {
            let plugin = match (plugin, &tenant) {
                (Some(p), Some(t)) if !t.is_empty() => Some(format!("{t}/{p}")),
                (p, _) => p,
            };
            let mut letters = client.dead_letters(plugin.as_deref()).await?;
            if let (None, Some(t)) = (&plugin, &tenant) {
                let prefix = format!("{t}/");
                letters.retain(|l| match t.is_empty() {
                    true => !l.plugin.contains('/'),
                    false => l.plugin.starts_with(&prefix),
                });
            }
            match args.output {
                Output::Table => print!("{}", dead_letters_table(&letters)),
                Output::Json => println!(
                    "{}",
                    serde_json::to_string_pretty(&serde_json::json!({ "dead_letters": letters }))?
                ),
            }
        }
        Command::Retry(pick) => {
            let outcome = client.retry_dead_letters(&pick.selection()).await?;
            print_outcome(&outcome, args.output)?;
        }
        Command::Drop(pick) => {
            let outcome = client.drop_dead_letters(&pick.selection()).await?;
            print_outcome(&outcome, args.output)?;
        }
    }
    Ok(())
}

fn print_outcome(
    outcome: &informant_runtime::admin::dead_letters::Outcome,
    output: Output,
) -> Result<()> {
    match output {
        Output::Table => print!("{}", outcome_text(outcome)),
        Output::Json => println!("{}", serde_json::to_string_pretty(outcome)?),
    }
    Ok(())
}
