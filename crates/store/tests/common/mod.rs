//! Helpers shared by the store's tests: a temporary directory, a small keyed genesis, and a
//! deterministic workload whose block at height h is a function of h alone (so a process that
//! recovered a store can go on producing blocks without remembering anything).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use walras_crypto::Keypair;
use walras_engine::{Block, EngineConfig, ExchangeState, OfferFill};
use walras_store::{BlockStore, StoreOptions};
use walras_types::genesis::{Genesis, GenesisAccount};
use walras_types::{AccountId, AssetId, Operation, Price, SignedTransaction, Transaction};

pub(crate) const ASSETS: u16 = 4;
pub(crate) const ACCOUNTS: u64 = 8;
const BALANCE_START: u64 = 1_000_000_000;
/// Valuation of each asset the offers are priced around, so some of them trade.
const VALUATIONS: [f64; ASSETS as usize] = [1.0, 2.0, 0.5, 4.0];

/// A directory under the system temp dir, removed when dropped.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new(name: &str) -> TempDir {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let unique = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "walras-store-{name}-{}-{unique}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&path);
        TempDir(path)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn keypair(account: u64) -> Keypair {
    let mut seed = [7u8; 32];
    seed[..8].copy_from_slice(&account.to_be_bytes());
    Keypair::from_seed(seed)
}

pub(crate) fn genesis() -> Genesis {
    Genesis {
        asset_info: Vec::new(),
        payments: None,
        assets: ASSETS,
        accounts: (0..ACCOUNTS)
            .map(|id| GenesisAccount {
                id: AccountId(id),
                public_key: *keypair(id).public_key().as_bytes(),
                balances: (0..ASSETS)
                    .map(|asset| (AssetId(asset), BALANCE_START))
                    .collect(),
            })
            .collect(),
    }
}

pub(crate) fn config() -> EngineConfig {
    EngineConfig::default()
}

fn sign(source: u64, sequence: u64, operation: Operation) -> SignedTransaction {
    let transaction = Transaction {
        source: AccountId(source),
        sequence,
        operation,
    };
    let signature = *keypair(source).sign(&transaction.encode()).as_bytes();
    SignedTransaction {
        transaction,
        signature,
    }
}

/// The transactions of the block at `height`: every account sends one, with sequence number
/// `height` (one more than its previous one), a payment or an offer near the valuations.
pub(crate) fn transactions(height: u64) -> Vec<SignedTransaction> {
    (0..ACCOUNTS)
        .map(|account| {
            let mix = height.wrapping_mul(31).wrapping_add(account * 17);
            sign(account, height, operation(account, mix))
        })
        .collect()
}

fn operation(account: u64, mix: u64) -> Operation {
    let sell = AssetId((mix % ASSETS as u64) as u16);
    if mix.is_multiple_of(3) {
        return Operation::Payment {
            to: AccountId((account + 1) % ACCOUNTS),
            asset: sell,
            amount: 1 + mix % 5_000,
        };
    }
    let buy = AssetId(((sell.0 as u64 + 1 + mix % 3) % ASSETS as u64) as u16);
    let rate = VALUATIONS[sell.0 as usize] / VALUATIONS[buy.0 as usize];
    let offset = (mix % 400) as f64 / 10_000.0 - 0.01;
    Operation::CreateOffer {
        sell,
        buy,
        amount: 1_000 + mix % 100_000,
        min_price: Price::from_f64(rate * (1.0 - offset)),
    }
}

/// Proposes the next block on `state` and appends it to `store`.
pub(crate) fn propose_and_append(store: &BlockStore, state: &mut ExchangeState) -> Block {
    let height = state.height() + 1;
    let (block, outcome) = state
        .propose(transactions(height), &config())
        .expect("the workload's blocks clear");
    store
        .append(&block, &outcome.dropped)
        .expect("the next block is appended");
    block
}

/// A store created with [`genesis`] and the live state beside it.
pub(crate) fn fresh_store(dir: &Path) -> (BlockStore, ExchangeState) {
    fresh_store_with(dir, &StoreOptions::default())
}

/// [`fresh_store`] with `options` (a checkpoint interval, say).
pub(crate) fn fresh_store_with(dir: &Path, options: &StoreOptions) -> (BlockStore, ExchangeState) {
    let store = BlockStore::create_with(dir, &genesis(), &[], options)
        .expect("a new directory takes a genesis");
    let state = ExchangeState::from_genesis(&genesis(), 1).expect("the genesis is valid");
    (store, state)
}

/// Proposes the next block on `state` and appends it with the state (so checkpoints are
/// written at the store's interval).
pub(crate) fn propose_and_append_with_state(
    store: &BlockStore,
    state: &mut ExchangeState,
) -> Block {
    let height = state.height() + 1;
    let (block, outcome) = state
        .propose(transactions(height), &config())
        .expect("the workload's blocks clear");
    store
        .append_with_state(&block, &outcome.dropped, state)
        .expect("the next block is appended");
    block
}

/// Proposes the next block on `state` and appends it with its results and the state (as a
/// node does); returns what its offers sold and bought.
pub(crate) fn propose_and_append_with_fills(
    store: &BlockStore,
    state: &mut ExchangeState,
) -> Vec<OfferFill> {
    let height = state.height() + 1;
    let (block, outcome) = state
        .propose(transactions(height), &config())
        .expect("the workload's blocks clear");
    store
        .append_with_results(&block, &outcome.dropped, None, Some(&outcome.fills), state)
        .expect("the next block is appended");
    outcome.fills
}

/// The accounts whose transaction in block `height` of the workload creates an offer (its id
/// is `height`: every account uses sequence number `height` there), ascending.
pub(crate) fn offer_creators_of(height: u64) -> Vec<AccountId> {
    transactions(height)
        .iter()
        .filter(|signed| signed.transaction.new_offer().is_some())
        .map(|signed| signed.transaction.source)
        .collect()
}
