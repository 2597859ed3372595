//! Development networks: the development genesis, built as the workload generator builds it,
//! and its account keys, derived from a public seed so that anyone can sign for any account.
//! For tests, demos and localnets only; a production build of `walras` does not link this
//! crate (nor the workload generator behind it).

use walras_api::wire::DevGenesisJson;
use walras_crypto::Keypair;
use walras_sim::workload::keys::{key_pool_size, key_seed};
use walras_sim::{WorkloadGenerator, WorkloadParams};
use walras_types::{AccountId, Genesis};

pub use walras_api::wire::DEV_ACCOUNTS_MAX;

/// Why a development genesis could not be built.
#[derive(Debug, thiserror::Error)]
#[error("generating the development genesis: {0}")]
pub struct DevGenesisError(String);

/// The genesis of a development network: `accounts` accounts holding some of `assets` assets, as
/// the workload generator builds it. Its keys are derived from the public `seed`
/// ([`dev_keypair`]), so anyone can sign for any account: for tests and demos only.
pub fn dev_genesis(dev: &DevGenesisJson, threads: usize) -> Result<Genesis, DevGenesisError> {
    if dev.accounts > DEV_ACCOUNTS_MAX {
        return Err(DevGenesisError(format!(
            "{} accounts is more than the {DEV_ACCOUNTS_MAX} a development genesis may have",
            dev.accounts
        )));
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
    let generator = WorkloadGenerator::new(&params, threads)
        .map_err(|error| DevGenesisError(error.to_string()))?;
    Ok(generator.genesis().clone())
}

/// [`dev_genesis`] as the node's genesis builder (what `--dev` hands the server, which does
/// not link the workload generator itself).
pub fn dev_genesis_builder(dev: &DevGenesisJson, threads: usize) -> Result<Genesis, String> {
    dev_genesis(dev, threads).map_err(|error| error.to_string())
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
