//! `walras keygen`: a fresh random key, or the development key of an account, as a key file.

use super::remote::{block_on, dev_secret_seed, NodeArgs};
use std::path::PathBuf;
use walras_client::keyfile;

#[derive(clap::Args, Debug)]
pub(crate) struct KeygenArgs {
    /// Write the key to FILE (readable by you only) instead of printing it; never overwrites
    #[arg(long)]
    out: Option<PathBuf>,
    /// The development key of account ID, from the node's development genesis (tests and
    /// demos only: anyone can derive it)
    #[arg(long, value_name = "ID")]
    dev_account: Option<u64>,
    /// With --out: print `{"path": ..., "public_key": ...}` instead of a sentence (for
    /// scripts; the secret stays in the file)
    #[arg(long, requires = "out")]
    json: bool,
    #[command(flatten)]
    node: NodeArgs,
}

pub(crate) fn run(args: KeygenArgs) -> anyhow::Result<()> {
    let seed = match args.dev_account {
        Some(account) => block_on(async { dev_secret_seed(&args.node.client()?, account).await })??,
        None => keyfile::random_seed()?,
    };
    match &args.out {
        Some(path) => {
            keyfile::write(path, &seed)?;
            let public_key = keyfile::to_json(&seed).public_key;
            if args.json {
                let written = serde_json::json!({
                    "path": path.display().to_string(),
                    "public_key": public_key,
                });
                println!("{written}");
            } else {
                println!("wrote {} (public key {public_key})", path.display());
            }
        }
        None => println!(
            "{}",
            serde_json::to_string_pretty(&keyfile::to_json(&seed))?
        ),
    }
    Ok(())
}
