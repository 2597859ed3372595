//! Block workloads: a genesis state and blocks of signed transactions, with injected faults.
//!
//! The model is SPEEDEX §7, scaled to the parameters. Accounts `0..accounts` exist at genesis.
//! Their activity follows a power law over a random permutation of the ids (so the busy accounts
//! are spread over the id space, as in a real trie): a few accounts send many transactions, most
//! send few. Assets have hidden valuations, log-uniform over [0.1, 10] at genesis, that take one
//! step of a geometric Brownian motion (σ = 0.02) after every block.
//!
//! **Genesis.** Each account holds `min(4, assets)` distinct random assets. The value it holds of
//! each grows with its expected activity, so busy accounts can afford their many offers; one value
//! scale for all accounts keeps every asset's supply at most 2^60 (an eighth of
//! [`MAX_AMOUNT`](walras_types::MAX_AMOUNT)) while typical amounts are large integers.
//!
//! **Blocks.** Each block has exactly `txs_per_block` transactions. A slot is an injected fault
//! with probability 1%; otherwise about 73.5% create an offer, 18% cancel an offer, 8% are
//! payments and 0.5% create accounts (in the first block, with nothing to cancel yet, cancels
//! become offers). In detail:
//!
//! - *Offers* sell an asset the account holds, for a random other asset; `amount = value /
//!   valuation` with a log-uniform value over two decades, and a limit price at a small random
//!   distance below the current valuation ratio (the distance distribution of [`crate::offers`]).
//! - *Cancels* name an offer the generator created in an earlier block. The generator cannot know
//!   which offers were filled: cancelling a filled offer is rejected by the exchange. That is
//!   expected, and such cancels are counted with the others.
//! - *Payments* move a small fraction (0.1%..5%) of the sender's known balance of a held asset to
//!   a random existing account.
//! - *Account creations* make new ids `accounts, accounts + 1, ...`, sent by existing accounts.
//!   Created accounts receive payments in later blocks but send nothing.
//!
//! **Balances the generator knows.** It tracks, per account and held asset, a lower bound on the
//! balance: genesis, minus every offer lock and payment it generated, plus payments received. It
//! ignores trade proceeds and cancelled remainders, which can only add. Within a block, an
//! account's debits of an asset never exceed this bound at the start of the block (the exchange
//! decides overdrafts before any credit of the block, SPEEDEX §8), so only injected faults
//! overdraft.
//!
//! **Sequence numbers.** Every genesis account starts at sequence 0. Within a block, an account's
//! transactions carry distinct sequence numbers, increasing in list order, all in
//! `(last, last + 64]`, with occasional gaps (at most 16 skipped per account and block). An
//! account sends at most 64 transactions per block. `last` advances to the highest sequence
//! number of the account's transactions that survive filtering: transactions dropped for a bad
//! signature or by the block filter consume no sequence number, while a cancel rejected at
//! execution (its offer was filled) does.
//!
//! **Faults** ([`FaultKind`]), each recorded in [`Workload::faults`] at the position of the
//! transaction that completes the conflict:
//!
//! - `Overdraft`: the account's debits of one asset in the block exceed its balance. Preferably
//!   the fault is a debit the account could afford on its own, on top of earlier debits of the
//!   block, of an asset whose balance the generator knows exactly (the account never offered to
//!   buy it nor cancelled an offer selling it, so no trade or cancel can have added to it);
//!   otherwise the debits add up to more than the asset's whole supply, which overdraws whatever
//!   trades brought in. All the account's transactions in the block are dropped.
//! - `ReusedSequence`: a second transaction reusing the sequence number of the account's first
//!   transaction in the block (both validly signed). All its transactions are dropped.
//! - `BadSignature`: an otherwise ordinary transaction with one bit of its signature flipped.
//!   Only that transaction is dropped.
//! - `DoubleCancel`: a second cancel of an offer already cancelled earlier in the block by the
//!   same account. All its transactions are dropped.
//! - `DuplicateAccountCreation`: a second creation (by another account) of an id created earlier
//!   in the block. Both creations are dropped; the id is never used again.
//!
//! With `payments_only`, every transaction is a payment, and faults are overdrafts, reused
//! sequence numbers and bad signatures (the other kinds need offers or creations).
//!
//! **Keys.** Account `id` signs with `Keypair::from_seed(hash(seed ‖ key_index))` (both as u64
//! big-endian, `hash` = [`walras_crypto::hash`]) where `key_index = id mod key_pool` and
//! `key_pool = min(accounts, 65536)`. Several accounts thus share one key: think of one holder
//! owning many accounts. Deriving a key costs a scalar multiplication, so a pool keeps the
//! genesis of 10 million accounts cheap; signatures still verify against each account's own
//! genesis public key.
//!
//! **Determinism.** Everything except signing is sequential and draws from [`Rng`] streams of
//! the seed; signing (RFC 8032) is deterministic. So the same parameters give identical bytes
//! for any thread count (for a given build and platform, see the crate docs on floats).

mod block;
pub mod keys;
mod ledger;

use crate::rng::Rng;
use crate::shape::{SPREAD_PPM_MAX, SPREAD_PPM_MIN};
use block::BlockPlanner;
use keys::KeyPool;
use ledger::Ledger;
use std::fmt;
use walras_types::{Genesis, SignedTransaction, MAX_ASSETS};

pub use keys::{key_pool_size, key_seed, KEY_POOL_MAX};

/// The most genesis accounts a workload may have (memory: about 200 bytes each).
pub const MAX_WORKLOAD_ACCOUNTS: usize = 20_000_000;
/// The most blocks a workload may have.
pub const MAX_WORKLOAD_BLOCKS: usize = 100_000;
/// The most transactions per block.
pub const MAX_TXS_PER_BLOCK: usize = 2_000_000;
/// Blocks may hold at most this many transactions per genesis account, so that accounts with
/// room for more (at most 64 each) can always be found.
pub const MAX_TXS_PER_ACCOUNT_PER_BLOCK_AVERAGE: usize = 32;

/// Random streams of one seed.
const STREAM_GENESIS: u64 = 11;
const STREAM_VALUATIONS: u64 = 12;
const STREAM_BLOCKS: u64 = 13;

/// Valuations: log-uniform over [0.1, 10] at genesis, GBM with this σ per block.
const VALUATION_LO: f64 = 0.1;
const VALUATION_HI: f64 = 10.0;
const VALUATION_SIGMA: f64 = 0.02;

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WorkloadParams {
    /// Genesis accounts, 2..=[`MAX_WORKLOAD_ACCOUNTS`].
    pub accounts: usize,
    /// Assets, 2..=[`MAX_ASSETS`].
    pub assets: usize,
    /// Blocks, 1..=[`MAX_WORKLOAD_BLOCKS`].
    pub blocks: usize,
    /// Transactions per block, 1..=[`MAX_TXS_PER_BLOCK`], and at most
    /// [`MAX_TXS_PER_ACCOUNT_PER_BLOCK_AVERAGE`] per genesis account.
    pub txs_per_block: usize,
    pub seed: u64,
    /// Only payments (the payments benchmark of SPEEDEX §7.1).
    pub payments_only: bool,
    /// Inject about 1% invalid transactions (see [`FaultKind`]). Off, every transaction is
    /// valid — as in blocks built from a mempool that checked signatures on admission.
    pub faults: bool,
    /// `None`: limits a normal distance below the valuation ratio (mean 0.5%, sd 1%; most
    /// offers in the money). `Some(ppm)`: the `market` model's limits, symmetric around the
    /// ratio, `ratio × exp(σ·Z)` with σ = ppm / 10^6 (see [`crate::market`]): two-sided books,
    /// about half of each pair's volume out of the money. In
    /// [`SPREAD_PPM_MIN`](crate::shape::SPREAD_PPM_MIN)..=[`SPREAD_PPM_MAX`](crate::shape::SPREAD_PPM_MAX).
    pub market_spread_ppm: Option<u32>,
}

/// Why parameters cannot be generated.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    #[error("accounts must be 2..={max}, got {0}", max = MAX_WORKLOAD_ACCOUNTS)]
    Accounts(usize),
    #[error("assets must be 2..={max}, got {0}", max = MAX_ASSETS)]
    Assets(usize),
    #[error("blocks must be 1..={max}, got {0}", max = MAX_WORKLOAD_BLOCKS)]
    Blocks(usize),
    #[error("transactions per block must be 1..={max}, got {0}", max = MAX_TXS_PER_BLOCK)]
    TxsPerBlock(usize),
    /// More transactions per block than the accounts can send.
    #[error(
        "{txs_per_block} transactions per block need at least {needed} accounts \
         (at most {average} per account on average), got {accounts}: add accounts or shrink the blocks",
        needed = .txs_per_block.div_ceil(MAX_TXS_PER_ACCOUNT_PER_BLOCK_AVERAGE),
        average = MAX_TXS_PER_ACCOUNT_PER_BLOCK_AVERAGE
    )]
    TooFewAccounts {
        accounts: usize,
        txs_per_block: usize,
    },
    /// A market spread outside the accepted range, in parts per million.
    #[error("the market spread must be {min}..={max} ppm, got {0}", min = SPREAD_PPM_MIN, max = SPREAD_PPM_MAX)]
    MarketSpread(u32),
}

impl WorkloadParams {
    /// Checks every limit documented on the fields.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        if !(2..=MAX_WORKLOAD_ACCOUNTS).contains(&self.accounts) {
            return Err(WorkloadError::Accounts(self.accounts));
        }
        if !(2..=MAX_ASSETS).contains(&self.assets) {
            return Err(WorkloadError::Assets(self.assets));
        }
        if !(1..=MAX_WORKLOAD_BLOCKS).contains(&self.blocks) {
            return Err(WorkloadError::Blocks(self.blocks));
        }
        if !(1..=MAX_TXS_PER_BLOCK).contains(&self.txs_per_block) {
            return Err(WorkloadError::TxsPerBlock(self.txs_per_block));
        }
        if self.txs_per_block > self.accounts * MAX_TXS_PER_ACCOUNT_PER_BLOCK_AVERAGE {
            return Err(WorkloadError::TooFewAccounts {
                accounts: self.accounts,
                txs_per_block: self.txs_per_block,
            });
        }
        if let Some(ppm) = self.market_spread_ppm {
            if !(SPREAD_PPM_MIN..=SPREAD_PPM_MAX).contains(&ppm) {
                return Err(WorkloadError::MarketSpread(ppm));
            }
        }
        Ok(())
    }
}

/// A kind of invalid transaction the generator injects on purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    Overdraft,
    ReusedSequence,
    BadSignature,
    DoubleCancel,
    DuplicateAccountCreation,
}

impl FaultKind {
    pub const ALL: [FaultKind; 5] = [
        FaultKind::Overdraft,
        FaultKind::ReusedSequence,
        FaultKind::BadSignature,
        FaultKind::DoubleCancel,
        FaultKind::DuplicateAccountCreation,
    ];

    /// The kinds a payments-only workload can hold.
    pub const PAYMENTS: [FaultKind; 3] = [
        FaultKind::Overdraft,
        FaultKind::ReusedSequence,
        FaultKind::BadSignature,
    ];

    /// The name used in `faults.csv`.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Overdraft => "overdraft",
            FaultKind::ReusedSequence => "reused_sequence",
            FaultKind::BadSignature => "bad_signature",
            FaultKind::DoubleCancel => "double_cancel",
            FaultKind::DuplicateAccountCreation => "duplicate_account_creation",
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// One injected fault: the transaction at `index` of block `block` (both 0-based) completes a
/// conflict of this kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InjectedFault {
    pub block: usize,
    pub index: usize,
    pub kind: FaultKind,
}

/// Transactions per operation, over all blocks (fault transactions included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OperationCounts {
    pub create_offer: u64,
    pub cancel_offer: u64,
    pub payment: u64,
    pub create_account: u64,
}

impl OperationCounts {
    pub fn total(&self) -> u64 {
        self.create_offer + self.cancel_offer + self.payment + self.create_account
    }
}

/// Injected faults per kind, over all blocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FaultCounts {
    pub overdraft: u64,
    pub reused_sequence: u64,
    pub bad_signature: u64,
    pub double_cancel: u64,
    pub duplicate_account_creation: u64,
}

impl FaultCounts {
    pub fn total(&self) -> u64 {
        self.overdraft
            + self.reused_sequence
            + self.bad_signature
            + self.double_cancel
            + self.duplicate_account_creation
    }

    /// The count of one kind.
    pub fn of(&self, kind: FaultKind) -> u64 {
        match kind {
            FaultKind::Overdraft => self.overdraft,
            FaultKind::ReusedSequence => self.reused_sequence,
            FaultKind::BadSignature => self.bad_signature,
            FaultKind::DoubleCancel => self.double_cancel,
            FaultKind::DuplicateAccountCreation => self.duplicate_account_creation,
        }
    }

    fn add(&mut self, kind: FaultKind) {
        let count = match kind {
            FaultKind::Overdraft => &mut self.overdraft,
            FaultKind::ReusedSequence => &mut self.reused_sequence,
            FaultKind::BadSignature => &mut self.bad_signature,
            FaultKind::DoubleCancel => &mut self.double_cancel,
            FaultKind::DuplicateAccountCreation => &mut self.duplicate_account_creation,
        };
        *count += 1;
    }
}

/// What a workload holds, in numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WorkloadStats {
    /// All transactions of all blocks.
    pub transactions: u64,
    pub operations: OperationCounts,
    pub faults: FaultCounts,
    /// Account creations expected to succeed (neither dropped nor duplicated).
    pub accounts_created: u64,
}

/// A generated workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    pub genesis: Genesis,
    /// `params.blocks` blocks of exactly `params.txs_per_block` transactions.
    pub blocks: Vec<Vec<SignedTransaction>>,
    /// Every injected fault, in block and position order.
    pub faults: Vec<InjectedFault>,
    pub stats: WorkloadStats,
    /// The model valuation of each asset when each block was made (one row per block).
    pub valuations: Vec<Vec<f64>>,
}

/// One block as [`WorkloadGenerator::next_block`] returns it.
#[derive(Clone, Debug, PartialEq)]
pub struct GeneratedBlock {
    /// 0-based block number.
    pub number: usize,
    pub transactions: Vec<SignedTransaction>,
    /// This block's faults, in position order.
    pub faults: Vec<InjectedFault>,
    /// The model valuations the block was made at.
    pub valuations: Vec<f64>,
}

/// Generates a workload block by block, so that a caller can write each block out before the
/// next is made (a workload of many large blocks need not fit in memory).
pub struct WorkloadGenerator {
    params: WorkloadParams,
    genesis: Genesis,
    keys: KeyPool,
    ledger: Ledger,
    valuations: Vec<f64>,
    valuation_rng: Rng,
    block_rng: Rng,
    next_block: usize,
    stats: WorkloadStats,
}

impl WorkloadGenerator {
    /// Derives the key pool (in parallel over `threads`; 0 means 1) and builds the genesis.
    pub fn new(
        params: &WorkloadParams,
        threads: usize,
    ) -> Result<WorkloadGenerator, WorkloadError> {
        params.validate()?;
        let keys = KeyPool::derive(params.seed, params.accounts, threads);
        let mut valuation_rng = Rng::with_stream(params.seed, STREAM_VALUATIONS);
        let valuations: Vec<f64> = (0..params.assets)
            .map(|_| valuation_rng.log_uniform(VALUATION_LO, VALUATION_HI))
            .collect();
        let mut genesis_rng = Rng::with_stream(params.seed, STREAM_GENESIS);
        let (ledger, genesis) = Ledger::genesis(params, &valuations, &keys, &mut genesis_rng);
        Ok(WorkloadGenerator {
            params: *params,
            genesis,
            keys,
            ledger,
            valuations,
            valuation_rng,
            block_rng: Rng::with_stream(params.seed, STREAM_BLOCKS),
            next_block: 0,
            stats: WorkloadStats::default(),
        })
    }

    pub fn params(&self) -> &WorkloadParams {
        &self.params
    }

    pub fn genesis(&self) -> &Genesis {
        &self.genesis
    }

    /// Totals over the blocks generated so far.
    pub fn stats(&self) -> &WorkloadStats {
        &self.stats
    }

    /// The next block, signed in parallel over `threads` (0 means 1); `None` after the last.
    pub fn next_block(&mut self, threads: usize) -> Option<GeneratedBlock> {
        if self.next_block == self.params.blocks {
            return None;
        }
        let number = self.next_block;
        let planner = BlockPlanner::new(
            number,
            &self.params,
            &mut self.ledger,
            &self.keys,
            &self.valuations,
            &mut self.block_rng,
        );
        let plan = planner.plan();
        let mut transactions = keys::sign_all(&plan.transactions, &self.keys, threads);
        for &index in &plan.bad_signatures {
            flip_signature_bit(&mut transactions[index], &mut self.block_rng);
        }
        self.ledger.commit(plan.surviving());
        self.forget_filled_offers();
        self.count(&plan, &transactions);
        let block = GeneratedBlock {
            number,
            transactions,
            faults: plan.faults,
            valuations: self.valuations.clone(),
        };
        crate::offers::gbm_step(
            &mut self.valuations,
            VALUATION_SIGMA,
            &mut self.valuation_rng,
        );
        self.next_block += 1;
        Some(block)
    }

    /// Drops from the cancel candidates every offer at or near the money at this block's
    /// valuations: the exchange has most likely filled it, and cancelling it would only be
    /// rejected (and not use up its sequence number). What remains is likely still resting.
    fn forget_filled_offers(&mut self) {
        let valuations = &self.valuations;
        self.ledger.open_offers.retain(|offer| {
            let ratio =
                valuations[usize::from(offer.sell.0)] / valuations[usize::from(offer.buy.0)];
            offer.min_price.to_f64() > ratio * (1.0 + LIKELY_OPEN_MARGIN)
        });
    }

    fn count(&mut self, plan: &block::BlockPlan, transactions: &[SignedTransaction]) {
        use walras_types::Operation::*;
        let stats = &mut self.stats;
        stats.transactions += transactions.len() as u64;
        for signed in transactions {
            let counter = match signed.transaction.operation {
                CreateOffer { .. } => &mut stats.operations.create_offer,
                CancelOffer { .. } => &mut stats.operations.cancel_offer,
                Payment { .. } => &mut stats.operations.payment,
                CreateAccount { .. } => &mut stats.operations.create_account,
                // The generator makes no payments-bridge transactions; nothing to count.
                DepositToPayments { .. } | WithdrawFromPayments { .. } => continue,
            };
            *counter += 1;
        }
        for fault in &plan.faults {
            stats.faults.add(fault.kind);
        }
        stats.accounts_created += plan.accounts_created as u64;
    }
}

/// Flips one random bit of the signature: the result never verifies, under ZIP-215 as under
/// strict RFC 8032 rules (a changed R changes k; a changed s breaks the equation or its range).
fn flip_signature_bit(signed: &mut SignedTransaction, rng: &mut Rng) {
    let bit = rng.index(signed.signature.len() * 8);
    signed.signature[bit / 8] ^= 1 << (bit % 8);
}

/// Generates the whole workload in memory, signing in parallel over `threads` (0 means 1).
///
/// # Panics
/// If the parameters are invalid (see [`WorkloadParams::validate`]).
/// How far above the valuation ratio an offer's limit must be to count as still resting: the
/// clearing rate is not exactly the model's ratio.
const LIKELY_OPEN_MARGIN: f64 = 0.005;

pub fn generate_workload(params: &WorkloadParams, threads: usize) -> Workload {
    let mut generator = match WorkloadGenerator::new(params, threads) {
        Ok(generator) => generator,
        Err(error) => panic!("invalid workload parameters: {error}"),
    };
    let mut blocks = Vec::with_capacity(params.blocks);
    let mut faults = Vec::new();
    let mut valuations = Vec::with_capacity(params.blocks);
    while let Some(block) = generator.next_block(threads) {
        blocks.push(block.transactions);
        faults.extend(block.faults);
        valuations.push(block.valuations);
    }
    Workload {
        genesis: generator.genesis,
        blocks,
        faults,
        stats: generator.stats,
        valuations,
    }
}

#[cfg(test)]
mod error_message_tests {
    //! The one message computed from its fields keeps the exact text the hand-written
    //! `Display` gave.

    use super::*;

    #[test]
    fn too_few_accounts_names_the_accounts_needed() {
        let error = WorkloadError::TooFewAccounts {
            accounts: 10,
            txs_per_block: 1000,
        };
        assert_eq!(
            error.to_string(),
            "1000 transactions per block need at least 32 accounts (at most 32 per account on \
             average), got 10: add accounts or shrink the blocks"
        );
        assert_eq!(
            WorkloadError::MarketSpread(5).to_string(),
            "the market spread must be 100..=100000 ppm, got 5"
        );
    }
}
