//! `informant poll`: a running host asked to check a plugin's source now (its tag resolved, a
//! new digest pulled, verified and swapped in) instead of at its next `poll-seconds`.

use anyhow::{Result, bail};

use super::AdminArgs;

/// Arguments of `informant poll`.
#[derive(clap::Args)]
pub struct Args {
    /// The plugin the source writes: `tenant/name`, or `name` for a top-level plugin (as
    /// `informant status` shows it with its tenant).
    plugin: String,
    #[command(flatten)]
    admin: AdminArgs,
}

/// Prints what the check left: the digest the plugin runs and who signed it, or why the check
/// failed (then exits non-zero).
pub async fn run(args: Args) -> Result<()> {
    let client = args.admin.client().await?;
    let status = client.poll_source(&args.plugin).await?;
    if let Some(error) = &status.error {
        bail!("{}: {error}", args.plugin);
    }
    let pinned = status.pinned.as_deref().unwrap_or("nothing pulled");
    match &status.signer {
        Some(signer) => println!("{}: {pinned}, signed by {signer}", args.plugin),
        None => println!("{}: {pinned}", args.plugin),
    }
    Ok(())
}
