//! Argument parsers shared by commands.

use anyhow::anyhow;
use std::path::PathBuf;
use walras_api::wire::DevGenesisJson;
use walras_api::wire::DEV_ACCOUNTS_MAX;
use walras_server::GenesisSource;
pub(crate) use walras_types::parse::{asset_count, thread_count};

/// Which genesis a command names: `--genesis FILE`, `--dev` (with its parameters), or none.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct GenesisArgs {
    /// Genesis file: starts a new store in a directory without one; an existing store must
    /// hold this genesis, or the command refuses.
    #[arg(long, conflicts_with = "dev")]
    pub genesis: Option<PathBuf>,
    /// Development genesis (opt-in): accounts whose keys ANYONE can derive from the seed.
    /// For tests and demos only; a warning is printed.
    #[arg(long)]
    pub dev: bool,
    /// Accounts of the development genesis.
    #[arg(long, default_value_t = 10_000, requires = "dev")]
    pub dev_accounts: u64,
    #[arg(long, default_value = "10", value_parser = asset_count, requires = "dev")]
    pub dev_assets: usize,
    #[arg(long, default_value_t = 1, requires = "dev")]
    pub dev_seed: u64,
}

impl GenesisArgs {
    /// The genesis source these arguments name; refuses out-of-range development parameters.
    pub(crate) fn source(&self) -> anyhow::Result<GenesisSource> {
        if let Some(path) = &self.genesis {
            return Ok(GenesisSource::File(path.clone()));
        }
        if !self.dev {
            return Ok(GenesisSource::Stored);
        }
        if !(2..=DEV_ACCOUNTS_MAX).contains(&self.dev_accounts) {
            return Err(anyhow!(
                "--dev-accounts must be 2..={DEV_ACCOUNTS_MAX}, got {}",
                self.dev_accounts
            ));
        }
        let dev = DevGenesisJson {
            seed: self.dev_seed,
            accounts: self.dev_accounts,
            assets: self.dev_assets as u16,
        };
        dev_source(dev)
    }
}

/// `--dev` with the development tools built in: the devnet crate builds the genesis.
#[cfg(feature = "dev-tools")]
fn dev_source(dev: DevGenesisJson) -> anyhow::Result<GenesisSource> {
    Ok(GenesisSource::Dev(dev, walras_devnet::dev_genesis_builder))
}

/// `--dev` in a production build, which has no development genesis to build.
#[cfg(not(feature = "dev-tools"))]
fn dev_source(_dev: DevGenesisJson) -> anyhow::Result<GenesisSource> {
    Err(anyhow!(
        "--dev needs the development tools, which this build of walras leaves out: build it \
         with `cargo build --release -p walras-cli` (default features)"
    ))
}
