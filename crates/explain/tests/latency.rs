//! What an offer explanation costs against the length of the block log (issue 30 item 1), the
//! store's per-offer index against the full pass over the log the node made before it:
//!
//! `cargo test -p walras-explain --test latency -- --ignored --nocapture`
//!
//! (`WALRAS_EXPLAIN_BLOCKS=1000,100000` is the default; the stores are built under `/dev/shm`
//! when it exists, so 100k synchronous commits do not wait on a disk.) A synthetic log of small
//! blocks over two assets: block `h` creates offer `h` of account `h % 64`, out of the money,
//! and cancels offer `h - 10`, except offer 2, which stays open to the tip. The explanations are
//! checked equal on both paths before any figure is printed, so this cannot pass with the index
//! answering something else than the full pass. Book snapshots every
//! [`walras_store::DEFAULT_BOOK_SNAPSHOT_INTERVAL_BLOCKS`] blocks, as a node writes them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use walras_crypto::Hash;
use walras_engine::{Block, BlockHeader};
use walras_explain::{explain_committed, offer_accounts, OfferExplanation, OfferRef, OfferTracer};
use walras_store::BlockStore;
use walras_types::genesis::Genesis;
use walras_types::{
    AccountId, AssetId, Fraction, OfferId, OfferKey, Operation, PairId, Price, SignedTransaction,
    Transaction,
};

const ASSETS: usize = 2;
const ACCOUNTS: u64 = 64;
/// Each offer is cancelled this many blocks after the block that created it...
const LIVE_BLOCKS: u64 = 10;
/// ... except this one, open to the tip.
const OPEN_OFFER: u64 = 2;
const EPSILON: Fraction = Fraction(1 << 54);
const RUNS: usize = 3;

fn limit() -> Price {
    Price::from_f64(1.5)
}

fn transaction(source: u64, sequence: u64, operation: Operation) -> SignedTransaction {
    SignedTransaction {
        transaction: Transaction {
            source: AccountId(source),
            sequence,
            operation,
        },
        // The tracer reads committed blocks: it checks no signature.
        signature: [0; 64],
    }
}

fn block(height: u64, previous: Hash) -> Block {
    let mut transactions = vec![transaction(
        height % ACCOUNTS,
        height,
        Operation::CreateOffer {
            sell: AssetId(0),
            buy: AssetId(1),
            amount: 100,
            min_price: limit(),
        },
    )];
    let old = height.wrapping_sub(LIVE_BLOCKS);
    if height > LIVE_BLOCKS && old != OPEN_OFFER {
        transactions.push(transaction(
            old % ACCOUNTS,
            (1 << 40) + height,
            Operation::CancelOffer {
                sell: AssetId(0),
                buy: AssetId(1),
                min_price: limit(),
                offer_id: OfferId(old),
            },
        ));
    }
    Block {
        header: BlockHeader {
            height,
            previous,
            transactions_root: Hash([0; 32]),
            state_root: Hash([0; 32]),
            valuations: vec![1 << 80; ASSETS],
            trades: Vec::new(),
        },
        transactions,
    }
}

fn genesis() -> Genesis {
    Genesis {
        assets: ASSETS as u16,
        asset_info: Vec::new(),
        accounts: Vec::new(),
        payments: None,
    }
}

/// A store of `blocks` blocks with book snapshots at the default interval, built once per
/// process run. The books are followed here as the blocks change them (creations in, cancels
/// out; nothing trades), for the snapshots.
fn store(blocks: u64, root: &std::path::Path) -> BlockStore {
    let dir = root.join(format!("explain-latency-{blocks}"));
    let _ = std::fs::remove_dir_all(&dir);
    let store = BlockStore::create(&dir, &genesis()).unwrap();
    let mut previous = Hash([0; 32]);
    let mut book: BTreeMap<OfferKey, u64> = BTreeMap::new();
    let empty = BTreeMap::new();
    let started = Instant::now();
    for height in 1..=blocks {
        let block = block(height, previous);
        for signed in &block.transactions {
            if let Some(offer) = signed.transaction.new_offer() {
                book.insert(offer.key, offer.amount);
            } else if let Some(cancel) = signed.transaction.cancelled_offer() {
                book.remove(&cancel.key);
            }
        }
        let books = |pair: PairId| {
            let book = if pair.sell == AssetId(0) && pair.buy == AssetId(1) {
                &book
            } else {
                &empty
            };
            book.iter().map(|(key, amount)| (*key, *amount))
        };
        store.append_with_books(&block, &[], ASSETS, books).unwrap();
        previous = block.header.hash();
    }
    eprintln!("{blocks} blocks stored in {:.1?}", started.elapsed());
    store
}

/// The node before the index: the tracer over every block from 1 until the offer closes.
fn full_pass(store: &BlockStore, target: OfferRef, tip: u64) -> OfferExplanation {
    let mut tracer = OfferTracer::new(target, ASSETS, EPSILON);
    for height in 1..=tip {
        let block = store.block(height).unwrap().unwrap();
        let dropped = store.dropped(height).unwrap().unwrap_or_default();
        tracer.block(&block, &dropped).unwrap();
        if tracer.finished() {
            break;
        }
    }
    tracer.finish(None)
}

/// The node before the index: every block read for the accounts that created an offer `id`.
fn full_pass_accounts(store: &BlockStore, id: u64, tip: u64) -> Vec<AccountId> {
    let mut accounts = BTreeSet::new();
    for height in 1..=tip {
        let block = store.block(height).unwrap().unwrap();
        accounts.extend(
            block
                .transactions
                .iter()
                .map(|signed| &signed.transaction)
                .filter(|transaction| {
                    transaction.sequence == id && transaction.new_offer().is_some()
                })
                .map(|transaction| transaction.source),
        );
    }
    accounts.into_iter().collect()
}

/// The median of `RUNS` timings of `run`, and its (last) result.
fn timed<T>(mut run: impl FnMut() -> T) -> (Duration, T) {
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..RUNS {
        let started = Instant::now();
        last = Some(run());
        times.push(started.elapsed());
    }
    times.sort();
    (times[RUNS / 2], last.expect("RUNS > 0"))
}

#[test]
#[ignore = "a measurement: builds a 100k-block store (about a minute); run with --ignored --nocapture"]
fn explanation_latency_against_the_length_of_the_log() {
    let sizes: Vec<u64> = std::env::var("WALRAS_EXPLAIN_BLOCKS")
        .unwrap_or_else(|_| "1000,100000".into())
        .split(',')
        .map(|size| {
            size.trim()
                .parse()
                .expect("WALRAS_EXPLAIN_BLOCKS: comma-separated counts")
        })
        .collect();
    let shm = std::path::Path::new("/dev/shm");
    let root = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    println!("| blocks | request | full pass (before) | with the index (after) |");
    println!("|---|---|---|---|");
    for blocks in sizes {
        let store = store(blocks, &root);
        let middle = blocks / 2;
        let cases = [
            (
                "offer created 5 blocks before the tip (account given)",
                OfferRef {
                    account: AccountId((blocks - 5) % ACCOUNTS),
                    id: OfferId(blocks - 5),
                },
            ),
            (
                "offer open since block 2 (account given)",
                OfferRef {
                    account: AccountId(OPEN_OFFER % ACCOUNTS),
                    id: OfferId(OPEN_OFFER),
                },
            ),
            (
                "offer cancelled mid-log (account given)",
                OfferRef {
                    account: AccountId(middle % ACCOUNTS),
                    id: OfferId(middle),
                },
            ),
            (
                "unknown offer (account given)",
                OfferRef {
                    account: AccountId(1),
                    id: OfferId(blocks + 5),
                },
            ),
        ];
        for (name, target) in cases {
            let (before, expected) = timed(|| full_pass(&store, target, blocks));
            let (after, found) = timed(|| {
                explain_committed(&store, target, (ASSETS, EPSILON), blocks, None, || true).unwrap()
            });
            assert_eq!(found, expected, "{name}: the index changed the explanation");
            println!("| {blocks} | {name} | {before:.2?} | {after:.2?} |");
        }
        // Without ?account=: which accounts created an offer with this id.
        let (before, expected) = timed(|| full_pass_accounts(&store, middle, blocks));
        let (after, found) = timed(|| offer_accounts(&store, OfferId(middle), blocks, 11).unwrap());
        assert_eq!(found, expected);
        assert_eq!(found, [AccountId(middle % ACCOUNTS)]);
        println!("| {blocks} | accounts of an offer id (no account given) | {before:.2?} | {after:.2?} |");
        let dir = store.dir().to_path_buf();
        drop(store);
        let _ = std::fs::remove_dir_all(dir);
    }
}
