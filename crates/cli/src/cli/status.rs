//! `informant status`: what a running host's plugins are doing, as a table read from its admin
//! server.

use anyhow::Result;
use informant_runtime::admin::client::{status_json, status_table};

use super::{AdminArgs, Output};

/// Arguments of `informant status`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    admin: AdminArgs,
    /// `table` (aligned columns) or `json` (`{"plugins": [...]}`).
    #[arg(long, short, value_enum, default_value_t = Output::Table)]
    output: Output,
}

/// Prints one row per plugin the host runs or waits to load.
pub async fn run(args: Args) -> Result<()> {
    let client = args.admin.client().await?;
    let rows = client.status().await?;
    match args.output {
        Output::Table => {
            use std::io::IsTerminal;
            let colour = crate::colour(
                std::io::stdout().is_terminal(),
                std::env::var_os("NO_COLOR").as_deref(),
            );
            print!("{}", status_table(&rows, colour));
        }
        Output::Json => println!("{}", status_json(&rows)),
    }
    Ok(())
}
