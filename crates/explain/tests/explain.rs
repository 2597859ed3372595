//! Offer explanations checked against the engine's own clearing, for every offer of generated
//! blocks: books that straddle the price within a fraction of a percent, wide books, one-sided
//! books, cancels and filter drops (overdraft, reused sequence number, bad signature).
//!
//! For every block and every offer in its clearing the explanation (from [`OfferTracer`], which
//! reads only the blocks and their drop lists) must agree with what the engine did:
//! - per pair, the amounts the explanations say were sold sum to the header's traded amount;
//! - what an offer sold is what left it in the state (its remaining amount after the block);
//! - an out-of-the-money offer has a limit above the rate, and its distance in hundredths of a
//!   basis point is the floor of `(limit − rate) / rate · 10^6` (checked by the inequality
//!   that defines the floor, in 256-bit integers);
//! - an offer that is in the money and did not trade has `volume_ahead` equal to the in-the-money
//!   amount ahead of it in the canonical order of the books the engine cleared (rebuilt here
//!   from the state before the block), and at least the pair's traded amount;
//! - a dropped creation names the rule the filter applied; a cancelled offer names its block.

use ethnum::U256;
use proptest::prelude::*;
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;
use std::collections::{BTreeMap, BTreeSet};
use walras_clearing::{PayoutTerms, DUST_PAYOUT_UNITS_MAX};
use walras_crypto::Keypair;
use walras_engine::{Block, DropReason, EngineConfig, ExchangeState};
use walras_explain::{explain_offer, BlockReason, OfferRef, OfferStatus, OfferTracer};
use walras_types::genesis::{Genesis, GenesisAccount};
use walras_types::{
    AccountId, AssetId, OfferId, OfferKey, Operation, PairId, Price, SignedTransaction,
    Transaction, Valuation,
};

const ASSETS: u16 = 3;

fn keypair(account: u64) -> Keypair {
    let mut seed = [11u8; 32];
    seed[..8].copy_from_slice(&account.to_be_bytes());
    Keypair::from_seed(seed)
}

fn genesis(accounts: u64) -> Genesis {
    Genesis {
        asset_info: Vec::new(),
        payments: None,
        assets: ASSETS,
        accounts: (0..accounts)
            .map(|id| GenesisAccount {
                id: AccountId(id),
                public_key: *keypair(id).public_key().as_bytes(),
                balances: (0..ASSETS)
                    .map(|asset| (AssetId(asset), 10_000_000))
                    .collect(),
            })
            .collect(),
    }
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

/// A small deterministic generator (`rand_xoshiro`'s SplitMix64): the test needs no workload
/// crate.
struct Rng(SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// How limit prices sit around the "true" rate.
#[derive(Clone, Copy, Debug)]
enum Model {
    /// Within ±0.25 %: books straddle the price within a fraction of a percent.
    Straddle,
    /// Within ±5 %.
    Wide,
    /// Pair 0→1 gets most of the offers, at ±1 %.
    OneSided,
}

struct Generator {
    rng: Rng,
    model: Model,
    accounts: u64,
    next_sequence: Vec<u64>,
    /// Offers made so far (to cancel some): (account, sell, buy, limit, id).
    made: Vec<(u64, AssetId, AssetId, Price, u64)>,
    valuations: [f64; ASSETS as usize],
}

impl Generator {
    fn new(seed: u64, model: Model, accounts: u64) -> Generator {
        Generator {
            rng: Rng(SplitMix64::seed_from_u64(seed)),
            model,
            accounts,
            next_sequence: vec![1; accounts as usize],
            made: Vec::new(),
            valuations: [1.0, 2.5, 0.4],
        }
    }

    fn sequence(&mut self, account: u64) -> u64 {
        let sequence = self.next_sequence[account as usize];
        self.next_sequence[account as usize] += 1;
        sequence
    }

    fn offer(&mut self) -> Operation {
        let (sell, buy) = match self.model {
            Model::OneSided if self.rng.below(4) != 0 => (0, 1),
            _ => {
                let sell = self.rng.below(ASSETS as u64) as u16;
                let buy = (sell + 1 + self.rng.below(ASSETS as u64 - 1) as u16) % ASSETS;
                (sell, buy)
            }
        };
        let spread = match self.model {
            Model::Straddle => 0.0025,
            Model::Wide => 0.05,
            Model::OneSided => 0.01,
        };
        let rate = self.valuations[sell as usize] / self.valuations[buy as usize];
        let offset = (self.rng.unit() * 2.0 - 1.0) * spread;
        Operation::CreateOffer {
            sell: AssetId(sell),
            buy: AssetId(buy),
            amount: 100 + self.rng.below(20_000),
            min_price: Price::from_f64(rate * (1.0 + offset)),
        }
    }

    /// One block of offers, cancels, payments and deliberately dropped groups.
    fn block(&mut self, size: usize) -> Vec<SignedTransaction> {
        let mut block = Vec::new();
        let mut spoiled = BTreeSet::new();
        for _ in 0..size {
            let source = self.rng.below(self.accounts);
            if spoiled.contains(&source) {
                continue;
            }
            match self.rng.below(20) {
                0..=12 => {
                    let operation = self.offer();
                    let sequence = self.sequence(source);
                    if let Operation::CreateOffer {
                        sell,
                        buy,
                        min_price,
                        ..
                    } = operation
                    {
                        self.made.push((source, sell, buy, min_price, sequence));
                    }
                    block.push(sign(source, sequence, operation));
                }
                13 | 14 => {
                    // Cancel an earlier offer of the account (it may have filled since: then
                    // the filter drops the cancel as unknown_offer).
                    let Some(at) = self.made.iter().position(|made| made.0 == source) else {
                        continue;
                    };
                    let (_, sell, buy, min_price, id) = self.made.remove(at);
                    let sequence = self.sequence(source);
                    let operation = Operation::CancelOffer {
                        sell,
                        buy,
                        min_price,
                        offer_id: OfferId(id),
                    };
                    block.push(sign(source, sequence, operation));
                }
                15 => {
                    let to = AccountId(self.rng.below(self.accounts));
                    let sequence = self.sequence(source);
                    let operation = Operation::Payment {
                        to,
                        asset: AssetId(self.rng.below(ASSETS as u64) as u16),
                        amount: 1 + self.rng.below(1_000),
                    };
                    block.push(sign(source, sequence, operation));
                }
                16 => {
                    // An offer and a payment that together overdraw: the filter drops both.
                    spoiled.insert(source);
                    let operation = self.offer();
                    let Operation::CreateOffer { sell, .. } = operation else {
                        unreachable!()
                    };
                    let sequence = self.sequence(source);
                    block.push(sign(source, sequence, operation));
                    let sequence = self.sequence(source);
                    let payment = Operation::Payment {
                        to: AccountId((source + 1) % self.accounts),
                        asset: sell,
                        amount: 20_000_000,
                    };
                    block.push(sign(source, sequence, payment));
                }
                17 => {
                    // Two offers with one sequence number: both dropped.
                    spoiled.insert(source);
                    let sequence = self.sequence(source);
                    let first = self.offer();
                    let second = self.offer();
                    block.push(sign(source, sequence, first));
                    block.push(sign(source, sequence, second));
                }
                18 => {
                    spoiled.insert(source);
                    let sequence = self.sequence(source);
                    let operation = self.offer();
                    let mut signed = sign(source, sequence, operation);
                    signed.signature[7] ^= 1;
                    block.push(signed);
                    // The sequence number stays free: the account's next uses it.
                    self.next_sequence[source as usize] -= 1;
                }
                _ => {
                    // Nothing this time.
                }
            }
        }
        for (asset, valuation) in self.valuations.iter_mut().enumerate() {
            *valuation *= 1.0 + 0.004 * ((self.rng.below(3) as f64) - 1.0) * (asset as f64 / 2.0);
        }
        block
    }
}

fn pair_index(sell: AssetId, buy: AssetId) -> usize {
    sell.0 as usize * ASSETS as usize + buy.0 as usize
}

fn pairs() -> Vec<PairId> {
    let mut pairs = Vec::new();
    for sell in 0..ASSETS {
        for buy in (0..ASSETS).filter(|buy| *buy != sell) {
            pairs.push(PairId {
                sell: AssetId(sell),
                buy: AssetId(buy),
            });
        }
    }
    pairs
}

/// Counts of what the checks saw, so a run can show it covered each case.
#[derive(Default, Debug)]
struct Seen {
    filled: u64,
    partly: u64,
    rounded: u64,
    out_of_money: u64,
    ran_out: u64,
    at_money: u64,
    dropped: u64,
    cancelled: u64,
    rested: u64,
    returned: u64,
}

/// Runs `blocks` generated blocks and checks every offer's explanation after each.
fn check_run(seed: u64, model: Model, blocks: usize, size: usize, seen: &mut Seen) {
    let genesis = genesis(16);
    let mut state = ExchangeState::from_genesis(&genesis, 1).unwrap();
    let config = EngineConfig::default();
    let epsilon = config.clearing.epsilon;
    let mut generator = Generator::new(seed, model, 16);
    let mut history: Vec<(Block, Vec<(u32, DropReason)>)> = Vec::new();
    for _ in 0..blocks {
        let transactions = generator.block(size);
        let before: Vec<BTreeMap<OfferKey, u64>> = pairs()
            .iter()
            .map(|pair| state.book(*pair).iter().collect())
            .collect();
        let (block, outcome) = state.propose(transactions, &config).unwrap();
        let height = block.header.height;
        let dropped: BTreeMap<u32, DropReason> = outcome.dropped.iter().copied().collect();
        // The books clearing saw, rebuilt independently: before, less cancels, plus creations.
        let mut cleared: BTreeMap<usize, BTreeMap<OfferKey, u64>> = BTreeMap::new();
        for (pair, book) in pairs().iter().zip(&before) {
            cleared.insert(pair_index(pair.sell, pair.buy), book.clone());
        }
        let mut cancels = Vec::new();
        let mut drops = Vec::new();
        for (index, signed) in block.transactions.iter().enumerate() {
            let transaction = &signed.transaction;
            match (dropped.get(&(index as u32)), transaction.new_offer()) {
                (Some(reason), Some(_)) => {
                    drops.push((transaction.source, transaction.sequence, *reason))
                }
                (None, Some(offer)) => {
                    cleared
                        .get_mut(&pair_index(offer.sell, offer.buy))
                        .unwrap()
                        .insert(offer.key, offer.amount);
                }
                (None, None) => {
                    if let Some(cancel) = transaction.cancelled_offer() {
                        cleared
                            .get_mut(&pair_index(cancel.sell, cancel.buy))
                            .unwrap()
                            .remove(&cancel.key);
                        cancels.push((cancel.key, height));
                    }
                }
                _ => {}
            }
        }
        history.push((block.clone(), outcome.dropped.clone()));
        let explain = |account: AccountId, id: u64| {
            let target = OfferRef {
                account,
                id: OfferId(id),
            };
            let blocks = history
                .iter()
                .map(|(block, dropped)| (block, dropped.as_slice()));
            explain_offer(target, ASSETS as usize, epsilon, blocks, None).unwrap()
        };
        let valuations: Vec<Valuation> = block
            .header
            .valuations
            .iter()
            .map(|v| Valuation(*v))
            .collect();
        for pair in pairs() {
            let index = pair_index(pair.sell, pair.buy);
            let book = &cleared[&index];
            let rate = valuations[pair.sell.0 as usize].rate_to(valuations[pair.buy.0 as usize]);
            let pair_sold = block
                .header
                .trades
                .iter()
                .find(|trade| trade.sell == pair.sell && trade.buy == pair.buy)
                .map_or(0, |trade| trade.sold);
            let after = state.book(pair);
            let mut sold_sum = 0u64;
            let mut in_money_ahead = 0u64;
            for (key, held) in book {
                let explanation = explain(key.account, key.id.0);
                let latest = explanation.latest.expect("an offer in the books was live");
                assert_eq!(latest.height, height, "{key:?} latest block");
                assert_eq!(latest.amount, *held, "{key:?} amount at clearing");
                assert_eq!(latest.rate, rate);
                assert_eq!(latest.pair_sold, pair_sold);
                sold_sum += latest.sold;
                // The limit promise on the integer amounts, computed independently:
                // received · 2^64 · 2^80 ≥ sold · limit_raw · (2^64 − ε_raw).
                let owed = U256::from(latest.sold)
                    * U256::from(key.min_price.0)
                    * ((U256::ONE << 64u32) - U256::from(epsilon.0));
                assert!(
                    (U256::from(latest.received) << 144u32) >= owed,
                    "{key:?} sold {} for {}: below its limit",
                    latest.sold,
                    latest.received
                );
                // What it sold, and the rest the rest rule returned, is what left it.
                let remaining = after.get(key).unwrap_or(0);
                assert_eq!(
                    held - latest.sold - latest.returned,
                    remaining,
                    "{key:?}: sold vs the state"
                );
                if latest.returned > 0 {
                    seen.returned += 1;
                    let terms = PayoutTerms::new(rate, epsilon);
                    assert_eq!(latest.returned, held - latest.sold, "all the rest returns");
                    assert_eq!(terms.sale(key.min_price, latest.returned).sold, 0);
                    assert!(terms.payout(latest.returned) <= DUST_PAYOUT_UNITS_MAX);
                    assert!(latest.returned < latest.sold);
                    assert_eq!(explanation.status, OfferStatus::Traded, "it closed");
                    assert!(explanation.summary().contains("rest rule returned it"));
                }
                if explanation.blocks_live > 1 {
                    seen.rested += 1;
                }
                match latest.reason {
                    BlockReason::Filled => {
                        seen.filled += 1;
                        assert_eq!(latest.sold, *held);
                        assert!(key.min_price <= rate);
                        assert_eq!(explanation.status, OfferStatus::Traded);
                    }
                    BlockReason::PartlyFilled => {
                        seen.partly += 1;
                        assert!(latest.sold > 0 && latest.sold < *held);
                        assert!(key.min_price <= rate);
                        // Offers ahead may have sold less than they held (rounded below their
                        // limits); nothing after this one sold.
                        assert!(latest.volume_ahead + latest.sold >= pair_sold);
                        assert_eq!(sold_sum, pair_sold, "{key:?}: the amount ended here");
                        let status = if latest.returned > 0 {
                            OfferStatus::Traded
                        } else {
                            OfferStatus::PartlyTraded
                        };
                        assert_eq!(explanation.status, status);
                    }
                    BlockReason::RoundedBelowLimit => {
                        seen.rounded += 1;
                        assert!(key.min_price <= rate);
                        let terms = PayoutTerms::new(rate, epsilon);
                        assert_eq!(latest.sold, terms.sale(key.min_price, *held).sold);
                        assert!(latest.sold < *held);
                    }
                    BlockReason::OutOfTheMoney => {
                        seen.out_of_money += 1;
                        assert_eq!(latest.sold, 0);
                        assert!(
                            key.min_price > rate,
                            "out of the money: limit above the rate"
                        );
                        let bp = latest.out_of_money.expect("a distance").0;
                        let gap = U256::from(key.min_price.0 - rate.0) * U256::from(1_000_000u32);
                        let rate = U256::from(rate.0);
                        assert!(bp * rate <= gap && gap < (bp + 1) * rate, "bp is the floor");
                    }
                    BlockReason::AtTheMoney | BlockReason::VolumeRanOut => {
                        if latest.reason == BlockReason::AtTheMoney {
                            seen.at_money += 1;
                            assert_eq!(key.min_price, rate);
                        } else {
                            seen.ran_out += 1;
                            assert!(key.min_price < rate);
                        }
                        assert_eq!(latest.sold, 0);
                        assert_eq!(latest.volume_ahead, in_money_ahead, "{key:?} volume ahead");
                        assert!(latest.volume_ahead >= pair_sold);
                    }
                }
                if latest.sold == 0 && explanation.sold_total == 0 {
                    assert_eq!(explanation.status, OfferStatus::NotTraded);
                }
                if key.min_price <= rate {
                    in_money_ahead += held;
                }
            }
            assert_eq!(
                sold_sum, pair_sold,
                "block {height} pair {pair:?}: sold amounts sum"
            );
        }
        for (account, sequence, reason) in drops {
            let explanation = explain(account, sequence);
            // A sequence number whose offer was dropped may be used again later (a bad
            // signature leaves it free); here nothing reused it yet in this block.
            assert_eq!(
                explanation.status,
                OfferStatus::Dropped,
                "{account:?}/{sequence}"
            );
            let drop = explanation.dropped.as_ref().unwrap();
            assert_eq!(drop.reason, reason, "the rule the filter applied");
            assert_eq!(drop.height, height);
            assert_eq!(explanation.reason_code(), reason.name());
            if matches!(
                reason,
                DropReason::AccountOverdraft | DropReason::AccountReusedSequence
            ) {
                assert!(
                    !drop.conflicting.is_empty(),
                    "{reason:?} names the conflict"
                );
            }
            seen.dropped += 1;
        }
        for (key, at) in cancels {
            let explanation = explain(key.account, key.id.0);
            assert_eq!(explanation.status, OfferStatus::Cancelled);
            assert_eq!(explanation.cancelled.map(|(height, _)| height), Some(at));
            assert_eq!(explanation.height(), Some(at));
            seen.cancelled += 1;
        }
    }
}

#[test]
fn every_offer_of_generated_blocks_is_explained_consistently_with_clearing() {
    let mut seen = Seen::default();
    let models = [Model::Straddle, Model::Wide, Model::OneSided];
    for seed in 1..=15u64 {
        check_run(seed, models[seed as usize % 3], 5, 80, &mut seen);
    }
    println!("{seen:?}");
    // The runs cover every case the explanation distinguishes (at the money needs a limit
    // exactly on the rate; it has its own unit test).
    assert!(
        seen.filled > 0 && seen.partly > 0 && seen.returned > 0,
        "{seen:?}"
    );
    assert!(seen.out_of_money > 0 && seen.ran_out > 0, "{seen:?}");
    assert!(
        seen.dropped > 0 && seen.cancelled > 0 && seen.rested > 0,
        "{seen:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn random_small_blocks_are_explained_consistently(
        seed in any::<u64>(),
        model in 0u8..3,
        blocks in 1usize..4,
        size in 5usize..40,
    ) {
        let model = [Model::Straddle, Model::Wide, Model::OneSided][model as usize];
        check_run(seed, model, blocks, size, &mut Seen::default());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Garbage in the log (valuations, trades, drop lists that contradict the blocks) is an
    /// error or an explanation, never a panic.
    #[test]
    fn a_log_that_contradicts_itself_never_panics(
        seed in any::<u64>(),
        valuations in proptest::collection::vec(0u128..=u128::MAX, 0..5),
        trades in proptest::collection::vec((0u16..4, 0u16..4, any::<u64>(), any::<u128>(), 0u64..16, 0u64..8), 0..4),
        drops in proptest::collection::btree_set(0u32..60, 0..20),
        account in 0u64..16,
        id in 0u64..8,
    ) {
        let mut generator = Generator::new(seed, Model::Wide, 16);
        let mut block = Block {
            header: walras_engine::BlockHeader {
                height: 1,
                previous: Default::default(),
                transactions_root: Default::default(),
                state_root: Default::default(),
                valuations,
                trades: trades
                    .into_iter()
                    .map(|(sell, buy, sold, price, account, id)| walras_engine::PairTrade {
                        sell: AssetId(sell),
                        buy: AssetId(buy),
                        sold,
                        last_offer: OfferKey {
                            min_price: Price(price),
                            account: AccountId(account),
                            id: OfferId(id),
                        },
                    })
                    .collect(),
            },
            transactions: generator.block(40),
        };
        let dropped: Vec<(u32, DropReason)> =
            drops.into_iter().map(|index| (index, DropReason::AccountOverdraft)).collect();
        let mut tracer = OfferTracer::new(
            OfferRef { account: AccountId(account), id: OfferId(id) },
            ASSETS as usize,
            EngineConfig::default().clearing.epsilon,
        );
        let first = tracer.block(&block, &dropped);
        block.header.height = 2;
        if first.is_ok() {
            let _ = tracer.block(&block, &dropped);
        }
        let _ = tracer.finish(None).summary();
    }
}

/// The node's path (the store, its per-offer index, `explain_committed` and `offer_accounts`)
/// answers exactly what the tracer answers over every block, for every offer id any
/// transaction used (filled, partly filled, rested, cancelled, dropped, a payment's sequence
/// number) and for ids no transaction used. Trigger: an index that misses a block touching an
/// offer (a dropped creation, a cancel) would make `explain_committed` answer `unknown`, or
/// list too few accounts.
#[test]
fn the_store_and_its_offer_index_explain_every_offer_as_the_full_pass_does() {
    // Book snapshots never, after every block, and every third block: the replay starts at
    // block 1, at the block before the creation, or up to two blocks before that.
    // In the block's transaction, and as files written off the block path (a node's store).
    for interval in [0, 1, 3] {
        store_path_agrees_with_the_full_pass(interval, false);
    }
    for interval in [1, 3] {
        store_path_agrees_with_the_full_pass(interval, true);
    }
}

fn store_path_agrees_with_the_full_pass(book_snapshot_interval_blocks: u64, background: bool) {
    let dir = tempfile::tempdir().unwrap();
    let genesis = genesis(16);
    let options = walras_store::StoreOptions {
        book_snapshot_interval_blocks,
        checkpoint_in_background: background,
        ..walras_store::StoreOptions::default()
    };
    let mut store =
        walras_store::BlockStore::create_with(dir.path(), &genesis, &[], &options).unwrap();
    let mut state = ExchangeState::from_genesis(&genesis, 1).unwrap();
    let config = EngineConfig::default();
    let epsilon = config.clearing.epsilon;
    let mut generator = Generator::new(7, Model::Straddle, 16);
    let mut history: Vec<(Block, Vec<(u32, DropReason)>)> = Vec::new();
    for _ in 0..10 {
        let (block, outcome) = state.propose(generator.block(80), &config).unwrap();
        store
            .append_with_results(&block, &outcome.dropped, None, Some(&outcome.fills), &state)
            .unwrap();
        history.push((block, outcome.dropped));
    }
    if background {
        // A clean stop lets the book thread finish; the snapshots are files then.
        drop(store);
        store = walras_store::BlockStore::open_with(dir.path(), &options).unwrap();
        // One file per interval at most: the book thread thins the older ones by age (and
        // skips one due while two wait), so an explanation may start further back.
        let files = std::fs::read_dir(dir.path().join("books")).unwrap().count() as u64;
        assert!(
            (1..=10 / book_snapshot_interval_blocks).contains(&files),
            "{files} book snapshot files"
        );
    }
    let tip = history.len() as u64;
    let mut used: BTreeMap<u64, BTreeSet<AccountId>> = BTreeMap::new();
    let mut creators: BTreeMap<u64, BTreeSet<AccountId>> = BTreeMap::new();
    for (block, _) in &history {
        for signed in &block.transactions {
            let transaction = &signed.transaction;
            used.entry(transaction.sequence)
                .or_default()
                .insert(transaction.source);
            if transaction.new_offer().is_some() {
                creators
                    .entry(transaction.sequence)
                    .or_default()
                    .insert(transaction.source);
            }
        }
    }
    let mut statuses = BTreeSet::new();
    for (&id, accounts) in &used {
        let listed = walras_explain::offer_accounts(&store, OfferId(id), tip, 100).unwrap();
        let expected: Vec<AccountId> = creators
            .get(&id)
            .map(|set| set.iter().copied().collect())
            .unwrap_or_default();
        assert_eq!(listed, expected, "accounts of offer id {id}");
        // Every account that used the id, and one that never did.
        for account in accounts.iter().copied().chain([AccountId(999)]) {
            let target = OfferRef {
                account,
                id: OfferId(id),
            };
            let blocks = history
                .iter()
                .map(|(block, dropped)| (block, dropped.as_slice()));
            let full = explain_offer(target, ASSETS as usize, epsilon, blocks, None).unwrap();
            let indexed = walras_explain::explain_committed(
                &store,
                target,
                (ASSETS as usize, epsilon),
                tip,
                None,
                || true,
            )
            .unwrap();
            assert_eq!(
                indexed, full,
                "offer {id} of account {}, snapshots every {book_snapshot_interval_blocks} blocks (files: {background})",
                account.0
            );
            statuses.insert(full.status.name());
        }
    }
    for status in ["traded", "not_traded", "cancelled", "dropped", "unknown"] {
        assert!(
            statuses.contains(status),
            "{status} not covered: {statuses:?}"
        );
    }
}
