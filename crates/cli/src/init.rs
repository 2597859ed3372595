//! `walras init`: create a node's store with its genesis, without starting the node.

use super::{args, CliError};
use std::path::PathBuf;
use walras_server::{create_store, GenesisSource};
use walras_store::StoreOptions;

#[derive(clap::Args, Debug)]
pub struct InitArgs {
    /// Data directory: missing or empty. A directory that has a store is refused.
    #[arg(long)]
    data: PathBuf,
    #[command(flatten)]
    genesis: args::GenesisArgs,
    /// Threads to generate a development genesis with (default: all cores).
    #[arg(long, value_parser = args::thread_count)]
    threads: Option<usize>,
}

pub fn run(args: InitArgs) -> Result<(), CliError> {
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let source = args.genesis.source()?;
    let (genesis, dev) = match &source {
        GenesisSource::Stored => {
            return Err(CliError(
                "walras init needs a genesis: --genesis FILE, or --dev for a development chain"
                    .into(),
            ))
        }
        GenesisSource::File(path) => {
            let bytes = std::fs::read(path)
                .map_err(|error| CliError(format!("reading {}: {error}", path.display())))?;
            let genesis = walras_types::Genesis::decode(&bytes)
                .map_err(|error| CliError(format!("genesis file {}: {error}", path.display())))?;
            (genesis, None)
        }
        GenesisSource::Dev(dev, build) => {
            eprintln!(
                "walras init: WARNING: development genesis: its account keys can be derived by \
                 anyone; never hold real value on this chain"
            );
            let genesis = build(dev, threads).map_err(CliError)?;
            (genesis, Some(*dev))
        }
    };
    create_store(&args.data, &genesis, dev.as_ref(), &StoreOptions::default())?;
    println!("{}", walras_server::genesis_hash(&genesis));
    Ok(())
}
