//! Development networks: the development genesis, built as the workload generator builds it,
//! and its account keys, derived from a public seed so that anyone can sign for any account.
//! For tests, demos and localnets only; a production build of `walras` does not link this
//! crate (nor the workload generator behind it).

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

use walras_api::wire::DevGenesisJson;
use walras_crypto::Keypair;
use walras_sim::workload::keys::{key_pool_size, key_seed};
use walras_sim::{WorkloadGenerator, WorkloadParams};
use walras_types::genesis::AssetInfo;
use walras_types::{AccountId, Genesis};

pub use walras_api::wire::DEV_ACCOUNTS_MAX;

/// Why a development genesis could not be built.
#[derive(Debug, thiserror::Error)]
pub enum DevGenesisError {
    #[error(
        "generating the development genesis: {accounts} accounts is more than the \
         {DEV_ACCOUNTS_MAX} a development genesis may have"
    )]
    TooManyAccounts { accounts: u64 },
    #[error("generating the development genesis: {0}")]
    Workload(#[from] walras_sim::WorkloadError),
}

/// The genesis of a development network: `accounts` accounts holding some of `assets` assets, as
/// the workload generator builds it. Its keys are derived from the public `seed`
/// ([`dev_keypair`]), so anyone can sign for any account: for tests and demos only.
pub fn dev_genesis(dev: &DevGenesisJson, threads: usize) -> Result<Genesis, DevGenesisError> {
    if dev.accounts > DEV_ACCOUNTS_MAX {
        return Err(DevGenesisError::TooManyAccounts {
            accounts: dev.accounts,
        });
    }
    let params = WorkloadParams {
        accounts: dev.accounts as usize,
        assets: dev.assets as usize,
        blocks: 1,
        txs_per_block: 1,
        seed: dev.seed,
        payments_only: false,
        faults: false,
        market_spread_ppm: None,
    };
    let generator = WorkloadGenerator::new(&params, threads)?;
    let mut genesis = generator.genesis().clone();
    genesis.asset_info = dev_asset_info(genesis.assets);
    Ok(genesis)
}

/// Symbols of the development chain's assets: asset 0 is the unit prices are quoted in.
const DEV_SYMBOLS: [&str; 10] = [
    "USD", "BTC", "ETH", "SOL", "XRP", "DOT", "DOGE", "ADA", "LINK", "LTC",
];

/// Decimals of every development asset: one token is 100 base units, so a price per base
/// unit is also the price per token.
const DEV_DECIMALS: u8 = 2;

/// The development chain's asset names: [`DEV_SYMBOLS`], then `A10`, `A11`, ...
pub fn dev_asset_info(assets: u16) -> Vec<AssetInfo> {
    (0..assets)
        .map(|asset| AssetInfo {
            symbol: DEV_SYMBOLS
                .get(usize::from(asset))
                .map_or_else(|| format!("A{asset}"), |symbol| symbol.to_string()),
            decimals: DEV_DECIMALS,
        })
        .collect()
}

/// [`dev_genesis`] as the node's genesis builder (what `--dev` hands the server, which does
/// not link the workload generator itself). The error is boxed because the server's builder
/// type cannot name [`DevGenesisError`] (this crate is not linked into the server).
pub fn dev_genesis_builder(
    dev: &DevGenesisJson,
    threads: usize,
) -> Result<Genesis, Box<dyn std::error::Error + Send + Sync>> {
    Ok(dev_genesis(dev, threads)?)
}

/// The key of `account` in the development genesis `dev`.
pub fn dev_keypair(dev: &DevGenesisJson, account: AccountId) -> Keypair {
    Keypair::from_seed(dev_secret_seed(dev, account))
}

/// The secret seed of [`dev_keypair`] (what `walras keygen --dev-account` writes to a key file).
pub fn dev_secret_seed(dev: &DevGenesisJson, account: AccountId) -> [u8; 32] {
    let pool = key_pool_size(dev.accounts as usize) as u64;
    key_seed(dev.seed, account.0 % pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Too many accounts and parameters the generator refuses are typed errors, and the boxed
    /// builder error the server receives still says which.
    #[test]
    fn a_development_genesis_out_of_range_is_a_typed_error() {
        let too_many = DevGenesisJson {
            accounts: DEV_ACCOUNTS_MAX + 1,
            assets: 4,
            seed: 1,
        };
        assert!(matches!(
            dev_genesis(&too_many, 1),
            Err(DevGenesisError::TooManyAccounts { accounts }) if accounts == DEV_ACCOUNTS_MAX + 1
        ));
        let one_asset = DevGenesisJson {
            accounts: 10,
            assets: 1,
            seed: 1,
        };
        assert!(matches!(
            dev_genesis(&one_asset, 1),
            Err(DevGenesisError::Workload(
                walras_sim::WorkloadError::Assets(1)
            ))
        ));
        let boxed = dev_genesis_builder(&one_asset, 1).err().unwrap();
        assert!(boxed.to_string().contains("assets must be 2"), "{boxed}");
        assert!(dev_genesis_builder(
            &DevGenesisJson {
                accounts: 10,
                assets: 2,
                seed: 1
            },
            1
        )
        .is_ok());
    }
}
