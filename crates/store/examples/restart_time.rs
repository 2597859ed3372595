//! Restart time after 1k, 10k and 100k blocks: with checkpoints (what a node does now) and by
//! replaying every block from genesis (what it did before: the same loop as the old
//! `recover_store_with`).
//!
//! Blocks are written straight through the engine and the store (no HTTP node): each block is
//! `PAYMENTS_PER_BLOCK` signed payments among `ACCOUNTS` genesis accounts, so the state stays
//! the same size while the chain grows. Every append is a synchronous LMDB commit.
//!
//! Usage: `cargo run --release -p walras-store --example restart_time -- DIR [HEIGHTS...]`
//! (DIR must not exist; default heights 1000 10000 100000). Prints one line per height and
//! mode with the three run times and their median.

use std::path::Path;
use std::time::Instant;
use walras_crypto::Keypair;
use walras_engine::{EngineConfig, ExchangeState};
use walras_store::{recover_store_with, BlockStore, StoreOptions};
use walras_types::genesis::{Genesis, GenesisAccount};
use walras_types::{AccountId, AssetId, Operation, SignedTransaction, Transaction};

const ACCOUNTS: u64 = 10_000;
const ASSETS: u16 = 4;
const PAYMENTS_PER_BLOCK: u64 = 8;
const RUNS: usize = 3;

fn keypair(account: u64) -> Keypair {
    let mut seed = [3u8; 32];
    seed[..8].copy_from_slice(&account.to_be_bytes());
    Keypair::from_seed(seed)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("usage: restart_time DIR [HEIGHTS...]");
    let dir = Path::new(&dir);
    let mut heights: Vec<u64> = args.map(|text| text.parse().expect("a height")).collect();
    if heights.is_empty() {
        heights = vec![1_000, 10_000, 100_000];
    }
    let keys: Vec<Keypair> = (0..ACCOUNTS).map(keypair).collect();
    let genesis = Genesis {
        asset_info: Vec::new(),
        payments: None,
        assets: ASSETS,
        accounts: (0..ACCOUNTS)
            .map(|id| GenesisAccount {
                id: AccountId(id),
                public_key: *keys[id as usize].public_key().as_bytes(),
                balances: (0..ASSETS).map(|asset| (AssetId(asset), 1 << 40)).collect(),
            })
            .collect(),
    };
    let options = StoreOptions::default();
    let store = BlockStore::create_with(dir, &genesis, &[], &options).expect("a new directory");
    let mut state = ExchangeState::from_genesis(&genesis, 1).unwrap();
    let config = EngineConfig::default();
    println!(
        "# {ACCOUNTS} accounts, {ASSETS} assets, {PAYMENTS_PER_BLOCK} payments per block, \
         checkpoint every {} blocks",
        options.checkpoint_interval_blocks
    );
    println!("height mode run1_s run2_s run3_s median_s write_s");
    for target in heights {
        let started = Instant::now();
        while state.height() < target {
            let height = state.height() + 1;
            let transactions = (0..PAYMENTS_PER_BLOCK)
                .map(|index| payment(&keys, height, index))
                .collect();
            let (block, outcome) = state.propose(transactions, &config).unwrap();
            store
                .append_with_state(&block, &outcome.dropped, &state)
                .unwrap();
        }
        let write_s = started.elapsed().as_secs_f64();
        measure(target, "checkpoint", write_s, || {
            let recovery = recover_store_with(&store, &config, 1, |_, _| {}).unwrap();
            assert_eq!(recovery.state.height(), target);
        });
        measure(target, "genesis", write_s, || {
            let recovered = replay_from_genesis(&store, &genesis, &config);
            assert_eq!(recovered, target);
        });
    }
}

/// Account `height * PAYMENTS_PER_BLOCK + index` (mod ACCOUNTS) pays the next one; each account
/// sends at most once per block, so sequence numbers follow the number of blocks it sent in.
fn payment(keys: &[Keypair], height: u64, index: u64) -> SignedTransaction {
    let slot = (height - 1) * PAYMENTS_PER_BLOCK + index;
    let source = slot % ACCOUNTS;
    let transaction = Transaction {
        source: AccountId(source),
        sequence: slot / ACCOUNTS + 1,
        operation: Operation::Payment {
            to: AccountId((source + 1) % ACCOUNTS),
            asset: AssetId((slot % ASSETS as u64) as u16),
            amount: 1,
        },
    };
    let signature = *keys[source as usize].sign(&transaction.encode()).as_bytes();
    SignedTransaction {
        transaction,
        signature,
    }
}

/// Recovery as it was before checkpoints: genesis, then every stored block through the
/// follower path, checking each block's stored results.
fn replay_from_genesis(store: &BlockStore, genesis: &Genesis, config: &EngineConfig) -> u64 {
    let mut state = ExchangeState::from_genesis(genesis, 1).unwrap();
    for block in store.blocks_from(1) {
        let block = block.unwrap();
        let outcome = state.apply(&block, config).unwrap();
        let stored = store.dropped(block.header.height).unwrap();
        assert_eq!(stored.as_deref(), Some(outcome.dropped.as_slice()));
    }
    state.height()
}

fn measure(height: u64, mode: &str, write_s: f64, mut run: impl FnMut()) {
    let mut times: Vec<f64> = (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            run();
            started.elapsed().as_secs_f64()
        })
        .collect();
    let shown: Vec<String> = times.iter().map(|time| format!("{time:.3}")).collect();
    times.sort_by(f64::total_cmp);
    println!(
        "{height} {mode} {} {:.3} {write_s:.1}",
        shown.join(" "),
        times[RUNS / 2]
    );
}
