//! `walras init`: create a node's store with its genesis, without starting the node.

use super::args;
use anyhow::{anyhow, Context};
use std::path::PathBuf;
use walras_server::{create_store, GenesisSource};
use walras_store::StoreOptions;

#[derive(clap::Args, Debug)]
pub(crate) struct InitArgs {
    /// Data directory: missing or empty. A directory that has a store is refused.
    #[arg(long)]
    data: PathBuf,
    #[command(flatten)]
    genesis: args::GenesisArgs,
    /// Threads to generate a development genesis with (default: all cores).
    #[arg(long, value_parser = args::thread_count)]
    threads: Option<usize>,
}

pub(crate) fn run(args: InitArgs) -> anyhow::Result<()> {
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let source = args.genesis.source()?;
    let (genesis, dev) = match &source {
        GenesisSource::Stored => {
            return Err(anyhow!(
                "walras init needs a genesis: --genesis FILE, or --dev for a development chain"
            ))
        }
        GenesisSource::File(path) => {
            let bytes =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            let genesis = walras_types::Genesis::decode(&bytes)
                .with_context(|| format!("genesis file {}", path.display()))?;
            (genesis, None)
        }
        GenesisSource::Dev(dev, build) => {
            eprintln!(
                "walras init: WARNING: development genesis: its account keys can be derived by \
                 anyone; never hold real value on this chain"
            );
            let genesis = build(dev, threads).map_err(anyhow::Error::msg)?;
            (genesis, Some(*dev))
        }
    };
    create_store(&args.data, &genesis, dev.as_ref(), &StoreOptions::default())?;
    println!("{}", walras_server::genesis_hash(&genesis));
    Ok(())
}
