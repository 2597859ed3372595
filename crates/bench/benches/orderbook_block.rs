//! The serial order-book baseline on one large block (criterion; was the ignored test
//! `timing_one_block_of_100k_transactions_over_100k_accounts` in `tests/orderbook.rs`):
//!
//! `cargo bench -p walras-bench --bench orderbook_block`
//! (a quick look: `cargo bench -p walras-bench --bench orderbook_block -- --quick`)
//!
//! One block of 100,000 transactions over 100,000 accounts holding two assets: 80% offers of
//! 100..10,000 units either way at limits within 1% of 1, 10% cancels of an offer made earlier in
//! the block, 10% payments, from random sources (a fixed SplitMix64 stream). Each iteration runs
//! the block, in order, on a fresh copy of the genesis exchange (the copy is not timed), with
//! and without signature checks. Before timing, one untimed run checks conservation and prints
//! the block's counts and the rejections by reason.

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;
use std::collections::BTreeMap;
use std::time::Duration;
use walras_bench::orderbook::OrderbookExchange;
use walras_crypto::Keypair;
use walras_engine::DropReason;
use walras_types::genesis::{Genesis, GenesisAccount};
use walras_types::{AccountId, AssetId, OfferId, Operation, Price, SignedTransaction, Transaction};

const ACCOUNTS: u64 = 100_000;
const TRANSACTIONS: usize = 100_000;
const A: AssetId = AssetId(0);
const B: AssetId = AssetId(1);

/// SplitMix64 (`rand_xoshiro`'s): a tiny deterministic generator for the workload.
struct SplitMix(SplitMix64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

fn keypair(account: u64) -> Keypair {
    let mut seed = [3u8; 32];
    seed[..8].copy_from_slice(&account.to_be_bytes());
    Keypair::from_seed(seed)
}

fn genesis(keys: &[Keypair]) -> Genesis {
    Genesis {
        asset_info: Vec::new(),
        payments: None,
        assets: 2,
        accounts: (0..ACCOUNTS)
            .map(|id| GenesisAccount {
                id: AccountId(id),
                public_key: *keys[id as usize].public_key().as_bytes(),
                balances: vec![(A, 1_000_000_000), (B, 1_000_000_000)],
            })
            .collect(),
    }
}

/// The block described in the module documentation.
fn block(keys: &[Keypair]) -> Vec<SignedTransaction> {
    let mut rng = SplitMix(SplitMix64::seed_from_u64(42));
    let mut next_sequence = vec![1u64; keys.len()];
    let mut offers: Vec<(u64, AssetId, AssetId, Price, u64)> = Vec::new();
    let mut block = Vec::with_capacity(TRANSACTIONS);
    while block.len() < TRANSACTIONS {
        let roll = rng.below(10);
        let (source, operation) = if roll == 0 && !offers.is_empty() {
            let at = rng.below(offers.len() as u64) as usize;
            let (owner, sell, buy, min_price, id) = offers.swap_remove(at);
            let cancel = Operation::CancelOffer {
                sell,
                buy,
                min_price,
                offer_id: OfferId(id),
            };
            (owner, cancel)
        } else if roll == 1 {
            let payment = Operation::Payment {
                to: AccountId(rng.below(keys.len() as u64)),
                asset: AssetId(rng.below(2) as u16),
                amount: 1 + rng.below(1_000),
            };
            (rng.below(keys.len() as u64), payment)
        } else {
            let source = rng.below(keys.len() as u64);
            let (sell, buy) = if rng.below(2) == 0 { (A, B) } else { (B, A) };
            let min_price = Price::from_f64(0.99 + rng.below(2_001) as f64 / 100_000.0);
            offers.push((source, sell, buy, min_price, next_sequence[source as usize]));
            let offer = Operation::CreateOffer {
                sell,
                buy,
                amount: 100 + rng.below(9_901),
                min_price,
            };
            (source, offer)
        };
        let sequence = next_sequence[source as usize];
        next_sequence[source as usize] += 1;
        let transaction = Transaction {
            source: AccountId(source),
            sequence,
            operation,
        };
        let signature = *keys[source as usize].sign(&transaction.encode()).as_bytes();
        block.push(SignedTransaction {
            transaction,
            signature,
        });
    }
    block
}

/// One untimed run: the counts, conservation, and the rejections by reason.
fn check_once(fresh: &OrderbookExchange, block: &[SignedTransaction]) {
    let mut exchange = fresh.clone();
    let stats = exchange.execute_block(block, true);
    let issued: Vec<u128> = exchange.issued().iter().map(|i| *i as u128).collect();
    assert_eq!(exchange.accounted(), issued, "the block broke conservation");
    let mut reasons: BTreeMap<DropReason, usize> = BTreeMap::new();
    let mut exchange = fresh.clone();
    let mut fills = Vec::new();
    for signed in block {
        if let Err(reason) = exchange.execute_transaction(signed, false, &mut fills) {
            *reasons.entry(reason).or_insert(0) += 1;
        }
    }
    println!(
        "{} tx: {} accepted, {} rejected, {} trades; rejections by reason: {reasons:?}",
        block.len(),
        stats.accepted,
        stats.rejected,
        stats.trades,
    );
}

fn one_block_100k_transactions_100k_accounts(c: &mut Criterion) {
    let keys: Vec<Keypair> = (0..ACCOUNTS).map(keypair).collect();
    let fresh = OrderbookExchange::from_genesis(&genesis(&keys)).expect("valid genesis");
    let block = block(&keys);
    check_once(&fresh, &block);
    let mut group = c.benchmark_group("orderbook block, 100k tx over 100k accounts");
    group.throughput(Throughput::Elements(TRANSACTIONS as u64));
    group.sample_size(10);
    for (verify, label) in [
        (false, "signatures not checked"),
        (true, "signatures checked"),
    ] {
        // With signatures a run takes seconds: give the ten samples the time they need.
        group.measurement_time(Duration::from_secs(if verify { 60 } else { 10 }));
        group.bench_function(BenchmarkId::from_parameter(label), |b| {
            b.iter_batched(
                || fresh.clone(),
                |mut exchange| exchange.execute_block(&block, verify),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, one_block_100k_transactions_100k_accounts);
criterion_main!(benches);
