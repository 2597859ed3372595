//! Block execution in phases (SPEEDEX §3, §8, appendix K).
//!
//! 1. Signatures: transaction hashes, then the signatures verified in batches, in parallel —
//!    `walras_crypto`'s one acceptance rule (ZIP-215, whose batch verdicts equal its single
//!    ones), the same function admission and CheckTx call, so a block never holds a
//!    transaction that one path accepts and another drops.
//! 2. Filtering (see [`crate::filter`]).
//! 3. Planning, without touching the state: the offers cancelled and created, and the books as
//!    clearing will see them.
//! 4. Clearing: the proposer runs tâtonnement and the LP; a follower checks the header's
//!    valuations and amounts exactly (no offer beyond its limit, every asset conserved, the
//!    stated last offers) and rejects an inconsistent header *before any state change*.
//! 5. Applying, sharded by account slot range: debits, sequence numbers, refunds; payment
//!    credits routed to the receiver's shard; books updated per pair; trades executed per pair
//!    with seller payouts routed by shard; burns.
//! 6. Commitment: changed accounts and offers into the tries, the state root.
//!
//! Threads coordinate only by ownership: a phase hands each thread a disjoint `&mut` range of
//! accounts (or pairs) and messages for other ranges are applied in the next phase. There is no
//! lock and nothing depends on scheduling; the state root is the same for any thread count.

use crate::account::Account;
use crate::accounts::AccountShard;
use crate::block::{transaction_hash, Block, BlockHeader, PairTrade};
use crate::carried::Use;
use crate::filter::{filter, shard_width, Admitted, DropReason, Filtered};
use crate::offer_book::{offer_trie_key, OfferTrie, OFFER_KEY_BYTES};
use crate::parallel::{map_in_order, run_each, sort_unstable};
use crate::slot_index::SlotIndex;
use crate::state::{new_slot, BlockWrites, ExchangeState, ACCOUNTS_MAX};
use std::sync::Arc;
use std::time::{Duration, Instant};
use walras_clearing::{
    clear, settle_given, Budget, ClearingError, ClearingParams, Clock, OrderBooks, Resources,
    SettleError, Settlement, SupplyGrid, SystemClock, TradedPair,
};
use walras_crypto::{verify_each_parallel, AcceptedSignatures, Hash, PublicKey, Signature};
use walras_types::{
    AccountId, AssetId, Offer, OfferId, OfferKey, Operation, SignedTransaction, Valuation,
};

/// How a node executes blocks.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    pub threads: usize,
    /// Verify signatures (phase 1). Every path that commits or replays blocks keeps it on, so
    /// the producer drops exactly what replay drops; off only to time the other phases
    /// (`walras replay --no-verify-signatures`).
    pub verify_signatures: bool,
    /// Accepted signature verdicts this node has already computed (its admission's), so phase
    /// 1 does not check them again. A verdict is a pure function of the bytes it is keyed by,
    /// so this changes no outcome, only time; `None` checks every signature (replay, recovery,
    /// replicas).
    pub accepted_signatures: Option<Arc<AcceptedSignatures>>,
    /// Commission, smoothing and tâtonnement's tuning.
    pub clearing: ClearingParams,
    /// How long the proposer's clearing may take, read on the system clock from the start of
    /// clearing; `None`: no deadline, the iteration budget alone ends it, and the proposed
    /// block is a function of (state, transactions, config) on any machine and thread count.
    pub clearing_timeout: Option<Duration>,
    /// Tâtonnement iterations per instance at most (see `walras_clearing::Budget`).
    pub clearing_iterations_max: u64,
}

impl Default for EngineConfig {
    fn default() -> EngineConfig {
        EngineConfig {
            threads: 1,
            verify_signatures: true,
            accepted_signatures: None,
            clearing: ClearingParams::default(),
            clearing_timeout: None,
            clearing_iterations_max: 5_000,
        }
    }
}

/// Wall-clock time of each phase, in milliseconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct PhaseTimings {
    pub signatures: f64,
    pub filter: f64,
    pub plan: f64,
    pub clearing: f64,
    pub apply: f64,
    pub commit: f64,
}

impl PhaseTimings {
    pub fn total(&self) -> f64 {
        self.signatures + self.filter + self.plan + self.clearing + self.apply + self.commit
    }
}

/// What executing one block did.
#[derive(Clone, Debug)]
pub struct BlockOutcome {
    pub header: BlockHeader,
    pub accepted: usize,
    /// Dropped transactions: index in the block and why.
    pub dropped: Vec<(u32, DropReason)>,
    /// What each offer that traded sold and received, by pair (pair order), each pair's offers
    /// in canonical order.
    pub fills: Vec<OfferFill>,
    /// Whether clearing was μ-complete.
    pub converged: bool,
    /// How well tâtonnement did, when this node computed the clearing (the proposer); `None`
    /// when it checked a header made elsewhere.
    pub clearing: Option<ClearingReport>,
    pub timings: PhaseTimings,
    /// Every account whose committed entry the block changed (sequence number, balances, or
    /// created), by slot: what an account view after the block must read again. Not
    /// consensus data.
    pub touched_accounts: Vec<AccountId>,
}

/// Clearing quality of a proposed block (not consensus data: only the proposer knows it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClearingReport {
    pub iterations: u64,
    pub achieved_epsilon: f64,
    pub achieved_mu: f64,
    pub unrealized_utility_ratio: f64,
    /// Price computation and settlement, in milliseconds.
    pub millis: f64,
}

/// Why a block was not applied. Nothing in the state changed, except for `StateRootMismatch`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    #[error("clearing failed: {0}")]
    Clearing(ClearingError),
    /// The header's clearing does not check out.
    #[error("block header rejected: {0}")]
    HeaderClearing(SettleError),
    #[error("block header rejected: height {found}, expected {expected}")]
    HeaderHeight { expected: u64, found: u64 },
    #[error("block header rejected: it does not follow the last block")]
    HeaderPrevious,
    #[error("block header rejected: transactions root does not match")]
    HeaderTransactionsRoot,
    /// The header's trades are not one entry per pair that traded.
    #[error("block header rejected: trades must list each traded pair once")]
    HeaderTrades,
    /// A traded pair's last offer is not the one the amounts imply.
    #[error("block header rejected: pair {sell}->{buy} names the wrong last offer")]
    HeaderLastOffer { sell: u16, buy: u16 },
    /// Executing the block gave another state root than the header's: this node and the
    /// proposer disagree, and the node must stop.
    #[error("state root {computed} differs from the header's {expected}: stop this node")]
    StateRootMismatch { expected: String, computed: String },
    /// [`ExchangeState::apply_checked`] got a check of another block or another state.
    #[error("the block was checked against another state or was another block: check it again")]
    StaleCheck,
}

/// New offers (pair, key, amount), cancelled offers (pair, key), new accounts (id, key).
type BookChanges = (
    Vec<(usize, OfferKey, u64)>,
    Vec<(usize, OfferKey)>,
    Vec<(AccountId, [u8; 32])>,
);

/// What the caller already knows of a block's transactions, for phase 1.
#[derive(Clone, Copy)]
enum Known<'a> {
    /// Nothing: every transaction is hashed and every signature checked.
    Nothing,
    /// This node's admission accepted each (see [`ExchangeState::propose_admitted`]).
    Admitted { hashes: &'a [Hash] },
}

/// The block's effect, decided before anything changes.
struct Plan {
    filtered: Filtered,
    transactions_root: Hash,
    /// (pair index, key, amount) of every offer created.
    new_offers: Vec<(usize, OfferKey, u64)>,
    /// (pair index, key) of every offer cancelled.
    cancelled: Vec<(usize, OfferKey)>,
    /// New accounts: (id, public key), sorted by id.
    new_accounts: Vec<(AccountId, [u8; 32])>,
    books: OrderBooks,
}

/// A block checked against a state by [`ExchangeState::check`], ready to execute on that
/// state with [`ExchangeState::apply_checked`].
pub struct CheckedBlock {
    /// The last header hash of the state it was checked against.
    previous: Hash,
    transactions: usize,
    /// Execution uses the check's thread count: the plan is sharded by it.
    threads: usize,
    cleared: Cleared,
}

/// A block planned and cleared (proposer) or checked (follower), not yet executed.
struct Cleared {
    plan: Plan,
    settlement: Settlement,
    /// The block's header; its state root is not yet known.
    header: BlockHeader,
    converged: bool,
    report: Option<ClearingReport>,
    timings: PhaseTimings,
}

/// A credit for an account of another shard.
type Credit = (u32, AssetId, u64);

/// Credits as the shards (or pair ranges) that made them left them: `[source][destination
/// shard]`. They reach their destination shard as these batches, never copied into one list
/// per destination: merging the ~300k credits of a 500k block on one thread cost about 50 ms
/// on the 16-core device and 46–77 ms on the 2-core VM.
type Outboxes = Vec<Vec<Vec<Credit>>>;

/// A shard's index, its accounts and the batches of credits for them.
type CreditShard<'a> = (AccountShard<'a>, Vec<Vec<Credit>>);

/// A shard's accounts and its accepted transactions.
type SourceShard<'a> = (AccountShard<'a>, &'a Vec<Admitted>);

impl ExchangeState {
    /// Proposes and applies a block of `transactions`: filters them, clears, executes; returns
    /// the block (its header carrying the clearing result) for other nodes.
    pub fn propose(
        &mut self,
        transactions: Vec<SignedTransaction>,
        config: &EngineConfig,
    ) -> Result<(Block, BlockOutcome), EngineError> {
        self.propose_known(transactions, Known::Nothing, config)
    }

    /// [`Self::propose`] for transactions this node's own admission accepted, each with its
    /// hash: `hashes[i]` is [`transaction_hash`] of `transactions[i]`, and its signature was
    /// accepted by `walras_crypto`'s rule under its source's key. Keys never change, so phase
    /// 1 checks only that each source still has a key instead of checking the signature again
    /// (the verdict would be the same: the rule is a function of the bytes alone), and takes
    /// the hashes instead of computing them. The block and outcome are those
    /// [`Self::propose`] gives (debug and test builds compare the hashes).
    pub fn propose_admitted(
        &mut self,
        transactions: Vec<SignedTransaction>,
        hashes: &[Hash],
        config: &EngineConfig,
    ) -> Result<(Block, BlockOutcome), EngineError> {
        assert_eq!(
            hashes.len(),
            transactions.len(),
            "one hash per admitted transaction"
        );
        self.propose_known(transactions, Known::Admitted { hashes }, config)
    }

    fn propose_known(
        &mut self,
        transactions: Vec<SignedTransaction>,
        known: Known<'_>,
        config: &EngineConfig,
    ) -> Result<(Block, BlockOutcome), EngineError> {
        let cleared = self.clear_block(&transactions, known, config, Use::Execute)?;
        let outcome = self.execute_cleared(&transactions, cleared, config);
        self.last_header_hash = outcome.header.hash();
        Ok((
            Block {
                header: outcome.header.clone(),
                transactions,
            },
            outcome,
        ))
    }

    /// The proposer's half of [`Self::propose`] with nothing changed: the header a replicated
    /// proposer puts in its proposal. Its state root is zero: the block is executed once it is
    /// decided ([`Self::apply_decided`]).
    pub fn propose_header(
        &self,
        transactions: &[SignedTransaction],
        config: &EngineConfig,
    ) -> Result<BlockHeader, EngineError> {
        Ok(self
            .clear_block(transactions, Known::Nothing, config, Use::Look)?
            .header)
    }

    /// Applies a block proposed elsewhere (the follower path): checks its header's clearing
    /// exactly instead of running tâtonnement, and rejects an inconsistent header with no change
    /// to the state.
    pub fn apply(
        &mut self,
        block: &Block,
        config: &EngineConfig,
    ) -> Result<BlockOutcome, EngineError> {
        let cleared = self.check_block(block, config, Use::Execute)?;
        let outcome = self.execute_cleared(&block.transactions, cleared, config);
        if outcome.header.state_root != block.header.state_root {
            return Err(EngineError::StateRootMismatch {
                expected: block.header.state_root.to_string(),
                computed: outcome.header.state_root.to_string(),
            });
        }
        self.last_header_hash = outcome.header.hash();
        Ok(outcome)
    }

    /// Checks a proposed block exactly, as [`Self::apply`] does before it changes anything —
    /// height, previous header, transactions root, and the clearing (conservation, limit
    /// prices, the last offers) — except for the state root, which a proposal cannot know.
    /// Nothing changes.
    ///
    /// The result can execute the block later ([`Self::apply_checked`]) without checking it
    /// (and verifying its signatures) again.
    pub fn check(&self, block: &Block, config: &EngineConfig) -> Result<CheckedBlock, EngineError> {
        let cleared = self.check_block(block, config, Use::Look)?;
        Ok(CheckedBlock {
            previous: self.last_header_hash,
            transactions: block.transactions.len(),
            threads: config.threads,
            cleared,
        })
    }

    /// Applies a block that consensus decided: checked like [`Self::check`], then executed.
    /// The header's state root is ignored; the outcome's header carries the computed one (the
    /// header to store, and the one the next block's `previous` names).
    pub fn apply_decided(
        &mut self,
        block: &Block,
        config: &EngineConfig,
    ) -> Result<BlockOutcome, EngineError> {
        let checked = self.check(block, config)?;
        self.apply_checked(block, checked, config)
    }

    /// [`Self::apply_decided`] for a block [`Self::check`] already checked against this very
    /// state, executed with the check's thread count (the state root is the same for any). A
    /// check made against another state (another height or previous block) or of another
    /// header is refused with [`EngineError::StaleCheck`], nothing changed. The caller passes
    /// the transactions that were checked (the ABCI app keys its check by block hash).
    pub fn apply_checked(
        &mut self,
        block: &Block,
        checked: CheckedBlock,
        config: &EngineConfig,
    ) -> Result<BlockOutcome, EngineError> {
        if checked.previous != self.last_header_hash
            || checked.cleared.header.height != self.height + 1
            || checked.cleared.header != block.header
            || checked.transactions != block.transactions.len()
        {
            return Err(EngineError::StaleCheck);
        }
        // The plan's shards are cut for the thread count it was made with.
        let config = EngineConfig {
            threads: checked.threads,
            ..config.clone()
        };
        let outcome = self.execute_cleared(&block.transactions, checked.cleared, &config);
        self.last_header_hash = outcome.header.hash();
        Ok(outcome)
    }

    /// The proposer's phases 1–4: plan and clear, nothing changed.
    fn clear_block(
        &self,
        transactions: &[SignedTransaction],
        known: Known<'_>,
        config: &EngineConfig,
        usage: Use,
    ) -> Result<Cleared, EngineError> {
        let mut timings = PhaseTimings::default();
        let plan = self.plan(transactions, known, config, usage, &mut timings);
        // The proposer's supply table, beside the books (a follower checks the header exactly
        // and needs none); timed with planning, as before clearing.
        let started = Instant::now();
        let supply_grid = SupplyGrid::for_mu_reusing(
            &plan.books,
            config.clearing.mu,
            config.threads,
            self.carried.take_grid_values(),
        );
        timings.plan += elapsed_ms(started);
        let started = Instant::now();
        let clock = SystemClock;
        let budget = match config.clearing_timeout {
            Some(timeout) => Budget::within(&clock, timeout, config.clearing_iterations_max),
            None => Budget::iterations(config.clearing_iterations_max),
        };
        let pool = walras_par::pool(config.threads);
        let resources = Resources {
            budget,
            clock: &clock as &dyn Clock,
            pool: Some(&pool),
        };
        let clearing = clear(
            &plan.books,
            supply_grid.as_ref(),
            &config.clearing,
            resources,
        )
        .map_err(EngineError::Clearing)?;
        if let Some(grid) = supply_grid {
            self.carried.keep_grid_values(grid.into_values());
        }
        timings.clearing = elapsed_ms(started);
        let header = BlockHeader {
            height: self.height + 1,
            previous: self.last_header_hash,
            transactions_root: plan.transactions_root,
            state_root: Hash::default(),
            valuations: clearing
                .settlement
                .valuations()
                .iter()
                .map(|v| v.0)
                .collect(),
            trades: header_trades(&plan.books, &clearing.settlement),
        };
        let report = ClearingReport {
            iterations: clearing.iterations,
            achieved_epsilon: clearing.quality.achieved_epsilon,
            achieved_mu: clearing.quality.achieved_mu,
            unrealized_utility_ratio: clearing.quality.unrealized_utility_ratio,
            millis: clearing.millis(),
        };
        Ok(Cleared {
            plan,
            settlement: clearing.settlement,
            header,
            converged: clearing.converged,
            report: Some(report),
            timings,
        })
    }

    /// The follower's phases 1–4: plan, and check the header's clearing exactly.
    fn check_block(
        &self,
        block: &Block,
        config: &EngineConfig,
        usage: Use,
    ) -> Result<Cleared, EngineError> {
        let header = &block.header;
        if header.height != self.height + 1 {
            return Err(EngineError::HeaderHeight {
                expected: self.height + 1,
                found: header.height,
            });
        }
        if header.previous != self.last_header_hash {
            return Err(EngineError::HeaderPrevious);
        }
        let mut timings = PhaseTimings::default();
        let plan = self.plan(
            &block.transactions,
            Known::Nothing,
            config,
            usage,
            &mut timings,
        );
        if plan.transactions_root != header.transactions_root {
            return Err(EngineError::HeaderTransactionsRoot);
        }
        let started = Instant::now();
        let valuations: Vec<Valuation> = header.valuations.iter().map(|v| Valuation(*v)).collect();
        let given: Vec<(u16, u16, u64)> = header
            .trades
            .iter()
            .map(|trade| (trade.sell.0, trade.buy.0, trade.sold))
            .collect();
        let settlement = settle_given(
            &plan.books,
            &valuations,
            config.clearing.epsilon,
            config.clearing.mu,
            &given,
            Some(&walras_par::pool(config.threads)),
        )
        .map_err(EngineError::HeaderClearing)?;
        let implied = header_trades(&plan.books, &settlement);
        if implied.len() != header.trades.len() {
            // Zero amounts or a pair listed twice: not the canonical list of what traded.
            return Err(EngineError::HeaderTrades);
        }
        if let Some(trade) = header
            .trades
            .iter()
            .zip(&implied)
            .find(|(a, b)| a != b)
            .map(|(a, _)| a)
        {
            return Err(EngineError::HeaderLastOffer {
                sell: trade.sell.0,
                buy: trade.buy.0,
            });
        }
        timings.clearing = elapsed_ms(started);
        Ok(Cleared {
            plan,
            converged: settlement.lower_bounds_met(),
            settlement,
            header: header.clone(),
            report: None,
            timings,
        })
    }

    /// Phases 5–6 of a cleared block; the outcome's header carries the new state root. The
    /// caller records the header hash once it accepts the root.
    fn execute_cleared(
        &mut self,
        transactions: &[SignedTransaction],
        cleared: Cleared,
        config: &EngineConfig,
    ) -> BlockOutcome {
        let Cleared {
            plan,
            settlement,
            header,
            converged,
            report,
            mut timings,
        } = cleared;
        let (accepted, dropped) = (
            plan.filtered.accepted_count(),
            plan.filtered.dropped.clone(),
        );
        let fills = block_fills(&plan.books, &settlement, config.threads);
        let state_root = self.execute(transactions, plan, &settlement, config, &mut timings);
        let touched_accounts = self
            .last_writes
            .slots
            .iter()
            .map(|slot| self.account_ids[*slot as usize])
            .collect();
        self.market.record(&header);
        BlockOutcome {
            header: BlockHeader {
                state_root,
                ..header
            },
            accepted,
            dropped,
            fills,
            converged,
            clearing: report,
            timings,
            touched_accounts,
        }
    }

    /// Phases 1–3: everything decided from the state at the start of the block.
    fn plan(
        &self,
        transactions: &[SignedTransaction],
        known: Known<'_>,
        config: &EngineConfig,
        usage: Use,
        timings: &mut PhaseTimings,
    ) -> Plan {
        let threads = config.threads.max(1);
        let started = Instant::now();
        let hashes = match known {
            Known::Nothing => map_in_order(transactions, threads, transaction_hash),
            Known::Admitted { hashes } => {
                debug_assert!(
                    hashes == map_in_order(transactions, threads, transaction_hash),
                    "an admitted transaction's hash is not its transaction_hash"
                );
                hashes.to_vec()
            }
        };
        let transactions_root = transactions_root_of(hashes, threads);
        let signature_ok = match (config.verify_signatures, known) {
            (false, _) => vec![true; transactions.len()],
            (true, Known::Nothing) => self.verify_signatures_remembering(
                transactions,
                threads,
                config.accepted_signatures.as_deref(),
            ),
            (true, Known::Admitted { .. }) => self.sources_keyed(transactions, threads),
        };
        timings.signatures = elapsed_ms(started);
        let started = Instant::now();
        let filtered = filter(self, transactions, &signature_ok, threads);
        timings.filter = elapsed_ms(started);
        let started = Instant::now();
        let (mut new_offers, mut cancelled, mut new_accounts) =
            self.book_changes(transactions, &filtered.accepted, threads);
        // Whole tuples are compared: elements that compare equal are identical.
        sort_unstable(&mut new_offers, threads);
        sort_unstable(&mut cancelled, threads);
        sort_unstable(&mut new_accounts, threads);
        let books = match self.carried.next_books(
            self.height,
            self.assets,
            &cancelled,
            &new_offers,
            threads,
            usage,
        ) {
            Some(books) => {
                // Postcondition (debug and test builds, O(open offers)): the carried books
                // are those a build from the state's books gives (see `crate::carried`).
                debug_assert!(
                    books == self.clearing_books(&cancelled, &new_offers, threads),
                    "carried clearing books differ from the state's at height {}",
                    self.height
                );
                books
            }
            None => self.clearing_books(&cancelled, &new_offers, threads),
        };
        timings.plan = elapsed_ms(started);
        Plan {
            filtered,
            transactions_root,
            new_offers,
            cancelled,
            new_accounts,
            books,
        }
    }

    /// Per transaction, whether its signature is accepted under `walras_crypto`'s rule
    /// (ZIP-215: batched, and each verdict equal to the signature's single verdict, so it does
    /// not depend on order or grouping); a source that does not exist or has no usable key
    /// fails here too.
    pub fn verify_signatures(
        &self,
        transactions: &[SignedTransaction],
        threads: usize,
    ) -> Vec<bool> {
        self.verify_signatures_remembering(transactions, threads, None)
    }

    /// What the accepted transactions change in the books and accounts: (pair, key, amount)
    /// of each new offer, (pair, key) of each cancelled one, (id, key) of each new account;
    /// each shard's read on its own thread, in no particular order (the caller sorts).
    fn book_changes(
        &self,
        transactions: &[SignedTransaction],
        accepted: &[Vec<Admitted>],
        threads: usize,
    ) -> BookChanges {
        let per_shard = walras_par::map_in_order(accepted, threads, 2, |shard| {
            let mut changes = BookChanges::default();
            for (index, _) in shard {
                let transaction = &transactions[*index as usize].transaction;
                if let Some(offer) = transaction.new_offer() {
                    let pair = self.pair_index(offer.sell, offer.buy);
                    changes.0.push((pair, offer.key, offer.amount));
                } else if let Some(cancel) = transaction.cancelled_offer() {
                    changes
                        .1
                        .push((self.pair_index(cancel.sell, cancel.buy), cancel.key));
                } else if let Operation::CreateAccount {
                    new_account,
                    public_key,
                } = transaction.operation
                {
                    changes.2.push((new_account, public_key));
                }
            }
            changes
        });
        let mut all = BookChanges::default();
        for (offers, cancels, accounts) in per_shard {
            all.0.extend(offers);
            all.1.extend(cancels);
            all.2.extend(accounts);
        }
        all
    }

    /// Per transaction, whether its source exists with a usable key: phase 1's verdict for a
    /// signature admission accepted under that key (see [`Self::propose_admitted`]).
    fn sources_keyed(&self, transactions: &[SignedTransaction], threads: usize) -> Vec<bool> {
        map_in_order(transactions, threads, |signed| {
            self.slot(signed.transaction.source)
                .and_then(|slot| self.accounts[slot as usize].verifying_key())
                .is_some()
        })
    }

    /// As [`ExchangeState::verify_signatures`], taking the verdicts `remembered` already holds
    /// instead of checking those signatures again, and recording the new accepted ones.
    pub fn verify_signatures_remembering(
        &self,
        transactions: &[SignedTransaction],
        threads: usize,
        remembered: Option<&AcceptedSignatures>,
    ) -> Vec<bool> {
        let prepared: Vec<Option<(Vec<u8>, &PublicKey, Signature)>> =
            map_in_order(transactions, threads, |signed| {
                let slot = self.slot(signed.transaction.source)?;
                let key = self.accounts[slot as usize].verifying_key()?;
                let signature = Signature::from_bytes(&signed.signature).ok()?;
                Some((signed.transaction.encode(), key, signature))
            });
        let items: Vec<(&[u8], &PublicKey, &Signature)> = prepared
            .iter()
            .flatten()
            .map(|(message, key, signature)| (message.as_slice(), *key, signature))
            .collect();
        let verdicts = match remembered {
            Some(remembered) => remembered.verify_each_parallel(&items, threads),
            None => verify_each_parallel(&items, threads),
        };
        let mut verdicts = verdicts.into_iter();
        prepared
            .iter()
            .map(|entry| entry.is_some() && verdicts.next().unwrap_or(false))
            .collect()
    }

    /// The offers clearing sees: those open now, less the cancelled, plus the new. Each pair's
    /// list is merged in canonical order straight from its book (no regrouping, no sort: see
    /// `OrderBooks::from_sorted_pairs`), the pairs spread over `threads`.
    fn clearing_books(
        &self,
        cancelled: &[(usize, OfferKey)],
        new_offers: &[(usize, OfferKey, u64)],
        threads: usize,
    ) -> OrderBooks {
        let indices: Vec<usize> = (0..self.offer_tries.len()).collect();
        let lists = walras_par::map_in_order(&indices, threads, 2, |index| {
            let cancelled = pair_slice(cancelled, *index, |(pair, _)| *pair);
            let created = pair_slice(new_offers, *index, |(pair, _, _)| *pair);
            self.pair_offers(*index, cancelled, created)
        });
        OrderBooks::from_sorted_pairs(lists, self.assets, threads)
            .unwrap_or_else(|error| panic!("open offers break a book invariant: {error}"))
    }

    /// Pair `index`'s offers in canonical order: its book less `cancelled`, merged with
    /// `created` (both sorted by key; an offer's key is unique: its id is its account's
    /// sequence number).
    fn pair_offers(
        &self,
        index: usize,
        cancelled: &[(usize, OfferKey)],
        created: &[(usize, OfferKey, u64)],
    ) -> Vec<Offer> {
        let book = self.book_at(index);
        if book.is_empty() && created.is_empty() {
            return Vec::new();
        }
        let (sell, buy) = (
            AssetId((index / self.assets) as u16),
            AssetId((index % self.assets) as u16),
        );
        let mut offers = Vec::with_capacity(book.len() + created.len());
        let mut cancel = cancelled.iter().map(|(_, key)| key).peekable();
        let mut create = created.iter().peekable();
        for (key, amount) in book {
            while let Some((_, new_key, new_amount)) = create.next_if(|(_, new, _)| *new < key) {
                offers.push(offer(sell, buy, new_key, *new_amount));
            }
            if cancel.next_if_eq(&&key).is_some() {
                continue;
            }
            offers.push(offer(sell, buy, &key, amount));
        }
        for (_, key, amount) in create {
            offers.push(offer(sell, buy, key, *amount));
        }
        offers
    }

    /// Phases 5–6: apply the block's effects and commit them; returns the new state root. The
    /// slots of the accounts the block changed (sorted, distinct) are left in `last_writes`.
    fn execute(
        &mut self,
        transactions: &[SignedTransaction],
        plan: Plan,
        settlement: &Settlement,
        config: &EngineConfig,
        timings: &mut PhaseTimings,
    ) -> Hash {
        let threads = config.threads.max(1);
        let started = Instant::now();
        let width = shard_width(self.accounts.len(), threads);
        let (outboxes, mut touched) =
            self.apply_sources(transactions, &plan.filtered, width, threads);
        self.apply_credits(outboxes, width, threads);
        self.apply_bridge(transactions, &plan.filtered);
        let (trade_credits, fills) = self.update_pairs(&plan, settlement, width, threads);
        touched.extend(
            trade_credits
                .iter()
                .flatten()
                .flatten()
                .map(|(slot, _, _)| *slot),
        );
        self.apply_credits(trade_credits, width, threads);
        for (asset, burned) in settlement.burned().iter().enumerate() {
            self.burned[asset] += burned;
        }
        for (id, public_key) in &plan.new_accounts {
            // The filter dropped every creation beyond the cap (`AccountsFull`).
            let Some(slot) = new_slot(self.accounts.len(), ACCOUNTS_MAX) else {
                panic!("block creates accounts beyond ACCOUNTS_MAX: the filter let them through");
            };
            touched.push(slot);
            self.slots.insert(*id, slot);
            self.account_ids.push(*id);
            let account = Account::new(*public_key, Vec::new());
            self.accounts.push(account);
        }
        timings.apply = elapsed_ms(started);
        let started = Instant::now();
        // Slots are plain integers: the sorted list is the same whatever the thread count.
        sort_unstable(&mut touched, threads);
        touched.dedup();
        // Postcondition (checked in debug and test builds, O(state)): the block conserved
        // every asset.
        debug_assert!(
            self.conserves(),
            "block {} broke conservation: accounted {:?}, issued {:?}",
            self.height + 1,
            self.accounted(),
            self.issued
        );
        self.commit_accounts(&touched, threads);
        self.height += 1;
        self.last_writes = BlockWrites {
            height: self.height,
            slots: touched,
        };
        self.carried.keep(self.height, plan.books, fills);
        let root = self.state_root(threads);
        timings.commit = elapsed_ms(started);
        root
    }

    /// Source-side effects, per shard: sequence numbers, debits, refunds. Returns payment
    /// credits by source and destination shard, and the slots touched.
    fn apply_sources(
        &mut self,
        transactions: &[SignedTransaction],
        filtered: &Filtered,
        width: usize,
        threads: usize,
    ) -> (Outboxes, Vec<u32>) {
        let slots = &self.slots;
        let refunds = &filtered.cancel_amounts;
        let shards: Vec<SourceShard> = self
            .accounts
            .shards_mut(width)
            .into_iter()
            .zip(&filtered.accepted)
            .collect();
        let results = run_each(shards, threads, |(mut accounts, accepted)| {
            let mut outbox: Vec<Vec<Credit>> = vec![Vec::new(); threads];
            let mut touched = Vec::with_capacity(accepted.len() * 2);
            for (index, slot) in accepted {
                let transaction = &transactions[*index as usize].transaction;
                let account = accounts.get_mut(*slot as usize);
                account.last_sequence = account.last_sequence.max(transaction.sequence);
                touched.push(*slot);
                match transaction.operation {
                    Operation::Payment { to, asset, amount } => {
                        account.debit(asset, amount);
                        let receiver = slots[&to];
                        outbox[receiver as usize / width].push((receiver, asset, amount));
                        touched.push(receiver);
                    }
                    Operation::CreateOffer { sell, amount, .. } => account.debit(sell, amount),
                    Operation::CancelOffer { sell, .. } => {
                        let at = refunds
                            .binary_search_by_key(index, |(i, _)| *i)
                            .expect("every accepted cancel has its amount");
                        account.credit(sell, refunds[at].1);
                    }
                    Operation::CreateAccount { .. } => {}
                    Operation::DepositToPayments { asset, amount, .. } => {
                        account.debit(asset, amount)
                    }
                    Operation::WithdrawFromPayments { output, .. } => {
                        account.credit(output.asset, output.amount)
                    }
                }
            }
            (outbox, touched)
        });
        let touched_len = results.iter().map(|(_, touched)| touched.len()).sum();
        let mut touched = Vec::with_capacity(touched_len);
        let mut outboxes = Vec::with_capacity(results.len());
        for (outbox, shard_touched) in results {
            outboxes.push(outbox);
            touched.extend_from_slice(&shard_touched);
        }
        (outboxes, touched)
    }

    /// The escrow and withdrawn-set side of the block's accepted deposits and withdrawals (the
    /// accounts' side is in [`Self::apply_sources`]). Serial: one sum per asset and one trie
    /// batch, in the order of the accepted list (additions commute; ids are distinct).
    fn apply_bridge(&mut self, transactions: &[SignedTransaction], filtered: &Filtered) {
        let height = (self.height + 1).to_be_bytes();
        let Some(payments) = &mut self.payments else {
            return;
        };
        let mut withdrawn = Vec::new();
        for (index, _) in filtered.accepted.iter().flatten() {
            match transactions[*index as usize].transaction.operation {
                Operation::DepositToPayments { asset, amount, .. } => {
                    let escrow = &mut payments.escrow[usize::from(asset.0)];
                    *escrow = escrow
                        .checked_add(amount)
                        .expect("escrow is part of an issuance capped in u64");
                }
                Operation::WithdrawFromPayments { output, .. } => {
                    let escrow = &mut payments.escrow[usize::from(output.asset.0)];
                    *escrow = escrow
                        .checked_sub(output.amount)
                        .expect("the filter keeps withdrawals within the escrow");
                    withdrawn.push((output.id, height));
                }
                _ => {}
            }
        }
        if !withdrawn.is_empty() {
            payments.withdrawn.insert_batch(withdrawn, 1);
        }
    }

    /// Applies credits, each destination shard its own batches. Additions commute, so order
    /// does not matter.
    fn apply_credits(&mut self, outboxes: Outboxes, width: usize, threads: usize) {
        let mut inboxes: Vec<Vec<Vec<Credit>>> = (0..self.accounts.len().div_ceil(width))
            .map(|_| Vec::with_capacity(outboxes.len()))
            .collect();
        for outbox in outboxes {
            for (destination, batch) in outbox.into_iter().enumerate() {
                if !batch.is_empty() {
                    inboxes[destination].push(batch);
                }
            }
        }
        let shards: Vec<CreditShard> = self
            .accounts
            .shards_mut(width)
            .into_iter()
            .zip(inboxes)
            .collect();
        run_each(shards, threads, |(mut accounts, inbox)| {
            for (slot, asset, amount) in inbox.into_iter().flatten() {
                accounts.get_mut(slot as usize).credit(asset, amount);
            }
        });
    }

    /// Per pair, in parallel over contiguous pair ranges: removes cancelled offers, adds new
    /// ones, fills the traded offers in canonical order, and rehashes the pair's offer trie.
    /// Returns seller payouts by pair range and destination account shard, and what each
    /// traded offer has left (pair, key, rest: 0 when it closed), in (pair, key) order: the
    /// edits the block's fills make to the books it was cleared on.
    fn update_pairs(
        &mut self,
        plan: &Plan,
        settlement: &Settlement,
        width: usize,
        threads: usize,
    ) -> (Outboxes, Vec<FillRest>) {
        let assets = self.assets;
        let per_range = self.offer_tries.len().div_ceil(threads);
        let slots = &self.slots;
        let ranges: Vec<PairRange> = self
            .offer_tries
            .chunks_mut(per_range)
            .enumerate()
            .map(|(range, tries)| PairRange {
                start: range * per_range,
                tries,
            })
            .collect();
        let per_range = run_each(ranges, threads, |mut range| {
            range.cancel(&plan.cancelled);
            let (credits, fills) =
                range.trade(&plan.books, settlement, assets, slots, width, threads);
            range.add_and_fill(&plan.new_offers, &fills);
            range.rehash();
            (credits, fills)
        });
        // Ranges are contiguous and in pair order: their fills concatenated are in (pair, key)
        // order.
        let mut outboxes = Vec::with_capacity(per_range.len());
        let mut fills = Vec::with_capacity(per_range.iter().map(|(_, fills)| fills.len()).sum());
        for (credits, range_fills) in per_range {
            outboxes.push(credits);
            fills.extend(range_fills);
        }
        (outboxes, fills)
    }
}

/// What a block's fill left of an offer that traded: (pair index, key, the amount it rests
/// with: 0 when it closed, filled in full or its dust returned).
type FillRest = (usize, OfferKey, u64);

/// A contiguous range of pairs, owned by one thread during [`ExchangeState::update_pairs`].
struct PairRange<'a> {
    start: usize,
    tries: &'a mut [OfferTrie],
}

impl PairRange<'_> {
    fn contains(&self, pair: usize) -> bool {
        (self.start..self.start + self.tries.len()).contains(&pair)
    }

    /// The part of a list sorted by pair index that falls in this range.
    fn slice<'s, T>(&self, sorted: &'s [T], pair_of: impl Fn(&T) -> usize) -> &'s [T] {
        let low = sorted.partition_point(|item| pair_of(item) < self.start);
        let high = sorted.partition_point(|item| pair_of(item) < self.start + self.tries.len());
        &sorted[low..high]
    }

    fn cancel(&mut self, cancelled: &[(usize, OfferKey)]) {
        for (pair, key) in self.slice(cancelled, |(pair, _)| *pair) {
            self.tries[pair - self.start].mark_deleted(&offer_trie_key(key));
        }
    }

    /// Books the block's new offers and what its fills left of the offers that traded, per
    /// pair one trie batch: a new offer that traded keeps only its rest, and one that traded
    /// in full never enters the books (many of the trading mix's offers fill in the block
    /// that brings them: inserting each, then tombstoning and sweeping it, walked its trie
    /// three times for nothing). `fills` holds (pair, key, rest) in (pair, key) order, as
    /// [`Self::trade`] returns them. The books and tries end as applying the new offers and
    /// then the fills one by one leaves them.
    fn add_and_fill(&mut self, new_offers: &[(usize, OfferKey, u64)], fills: &[FillRest]) {
        let new_offers = self.slice(new_offers, |(pair, _, _)| *pair);
        let mut new_offers = new_offers.iter().peekable();
        let mut fills = fills.iter().peekable();
        let mut batch: Vec<([u8; OFFER_KEY_BYTES], [u8; 8])> = Vec::new();
        let mut batch_pair = None;
        loop {
            let next_new = new_offers.peek().map(|(pair, key, _)| (*pair, *key));
            let next_fill = fills.peek().map(|(pair, key, _)| (*pair, *key));
            let new_untraded = match (next_new, next_fill) {
                (None, None) => break,
                (Some(new), fill) => fill.is_none_or(|fill| new < fill),
                (None, Some(_)) => false,
            };
            // (pair, key, the amount it rests with: 0 when it left the books, whether it is new)
            let (pair, key, rests_with, is_new) = match new_offers.next_if(|_| new_untraded) {
                Some((pair, key, amount)) => (*pair, *key, *amount, true),
                None => {
                    let (pair, key, rest) = fills.next().expect("a fill comes next");
                    let traded_new = new_offers.next_if(|(p, k, _)| (p, k) == (pair, key));
                    (*pair, *key, *rest, traded_new.is_some())
                }
            };
            if batch_pair != Some(pair) {
                self.insert_batch(batch_pair, std::mem::take(&mut batch));
                batch_pair = Some(pair);
            }
            if rests_with > 0 {
                batch.push((offer_trie_key(&key), rests_with.to_be_bytes()));
            } else if !is_new {
                self.tries[pair - self.start].mark_deleted(&offer_trie_key(&key));
            }
        }
        self.insert_batch(batch_pair, batch);
    }

    /// Inserts `batch` into the trie of `pair` (when there is a pair and a batch).
    fn insert_batch(&mut self, pair: Option<usize>, batch: Vec<([u8; OFFER_KEY_BYTES], [u8; 8])>) {
        if let (Some(pair), false) = (pair, batch.is_empty()) {
            self.tries[pair - self.start].insert_batch(batch, 1);
        }
    }

    /// Pays this range's traded offers; returns the payouts per destination account shard,
    /// and what each traded offer has left, (pair, key, rest: 0 when it closed, filled in
    /// full or its dust returned), in (pair, key) order.
    fn trade(
        &self,
        books: &OrderBooks,
        settlement: &Settlement,
        assets: usize,
        slots: &SlotIndex,
        width: usize,
        threads: usize,
    ) -> (Vec<Vec<Credit>>, Vec<FillRest>) {
        let mut credits: Vec<Vec<Credit>> = vec![Vec::new(); threads];
        let mut fills = Vec::new();
        for pair in settlement.traded(books) {
            let index = pair.sell().0 as usize * assets + pair.buy().0 as usize;
            if !self.contains(index) {
                continue;
            }
            let mut pay = |account: &AccountId, asset: AssetId, amount: u64| {
                let seller = slots[account];
                credits[seller as usize / width].push((seller, asset, amount));
            };
            // An offer selling less than its amount (the last one, or one too small to trade
            // in full at its limit) keeps the rest on the book, unless the rest is dust that
            // the rest rule returns to its account.
            for (offer, fill) in pair.offer_fills() {
                let rest = offer.amount - fill.sold - fill.returned;
                fills.push((index, offer.key(), rest));
                pay(&offer.account, pair.buy(), fill.bought);
                if fill.returned > 0 {
                    pay(&offer.account, pair.sell(), fill.returned);
                }
            }
        }
        (credits, fills)
    }

    /// Sweeps deleted offers and hashes each changed trie, so the state root finds them ready.
    fn rehash(&mut self) {
        for trie in self.tries.iter_mut() {
            if trie.deleted_len() > 0 {
                trie.clean();
            }
            trie.root_hash(1);
        }
    }
}

/// What one offer sold and received in a block (the integer amounts its account's balances
/// moved by).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OfferFill {
    pub account: AccountId,
    pub offer_id: OfferId,
    pub sell: AssetId,
    pub buy: AssetId,
    /// Amount of `sell` the offer gave.
    pub sold: u64,
    /// Amount of `buy` it received.
    pub bought: u64,
    /// Amount of `sell` returned to the account as the offer closed: the dust its fill left
    /// (the rest rule, `walras_clearing::PayoutTerms::returned_rest`); 0 when the offer sold
    /// its whole amount or rests with the rest.
    pub returned: u64,
}

/// Every offer that traded, by the same fill rule as [`PairRange::trade`] applies.
fn block_fills(books: &OrderBooks, settlement: &Settlement, threads: usize) -> Vec<OfferFill> {
    flat_map_traded(books, settlement, threads, |pair| {
        pair.offer_fills()
            .map(|(offer, fill)| OfferFill {
                account: offer.account,
                offer_id: offer.id,
                sell: pair.sell(),
                buy: pair.buy(),
                sold: fill.sold,
                bought: fill.bought,
                returned: fill.returned,
            })
            .filter(|fill| fill.sold > 0)
            .collect()
    })
}

/// `per_pair` of each traded pair, the pairs spread over `threads`, the lists concatenated in
/// pair order (a block fills hundreds of thousands of offers: 15–20 ms on one thread of the
/// 16-core device for a 500k-transaction block).
fn flat_map_traded<T: Send>(
    books: &OrderBooks,
    settlement: &Settlement,
    threads: usize,
    per_pair: impl Fn(TradedPair<'_>) -> Vec<T> + Sync + Send,
) -> Vec<T> {
    let traded: Vec<TradedPair<'_>> = settlement.traded(books).collect();
    let lists = walras_par::map_in_order(&traded, threads, 2, |pair| per_pair(*pair));
    let mut all = Vec::with_capacity(lists.iter().map(Vec::len).sum());
    for list in lists {
        all.extend(list);
    }
    all
}

/// Per traded pair: amount sold and the last offer that traded.
fn header_trades(books: &OrderBooks, settlement: &Settlement) -> Vec<PairTrade> {
    settlement
        .traded(books)
        .map(|pair| PairTrade {
            sell: pair.sell(),
            buy: pair.buy(),
            sold: pair.sold(),
            last_offer: pair.last_offer().key(),
        })
        .collect()
}

fn offer(sell: AssetId, buy: AssetId, key: &OfferKey, amount: u64) -> Offer {
    Offer {
        id: key.id,
        account: key.account,
        sell,
        buy,
        amount,
        min_price: key.min_price,
    }
}

/// The part of a list sorted by pair index that belongs to pair `index`.
fn pair_slice<T>(sorted: &[T], index: usize, pair_of: impl Fn(&T) -> usize) -> &[T] {
    let low = sorted.partition_point(|item| pair_of(item) < index);
    let high = sorted.partition_point(|item| pair_of(item) <= index);
    &sorted[low..high]
}

fn transactions_root_of(hashes: Vec<Hash>, threads: usize) -> Hash {
    crate::block::root_of_hashes(hashes, threads)
}

fn elapsed_ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1e3
}
