//! The node's shared state and the solo block producer.
//!
//! One producer thread owns block production: it waits until the mempool holds a full block or
//! the block interval has passed with something waiting, takes the transactions, proposes and
//! executes the block under the state's write lock, appends it to the store (synchronous
//! commit), and only then reports it: mempool, recent-transaction index, tip, metrics, events.
//! "Reported committed" therefore always means "on disk".
//!
//! Signatures are verified once on this node, at admission, with the very function replay and
//! recovery use (`walras_crypto`'s acceptance rule). The producer's batches come from the
//! mempool, where only what admission accepted goes, and keys never change, so the block takes
//! admission's verdicts and hashes ([`Signatures::AcceptedAtAdmission`]) instead of checking
//! again: what it commits is what a replay that checks every signature commits (recovery does
//! on every restart; `the_producer_commits_what_a_replay_checking_every_signature_commits`).
//! A gateway's sealed batches were checked by nobody: their blocks check every signature.

use super::mempool::Mempool;
use super::metrics::{add_seconds, gauge_value, Metrics, MEMORY_PARTS};
use super::overload::Overload;
use super::recent::RecentTransactions;
use arc_swap::ArcSwap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::broadcast;
use walras_api::wire::{
    AssetPriceJson, BlockEventJson, ClearingQualityJson, DevGenesisJson, PairPriceJson,
    PhaseTimingsJson, ReferencePricesJson,
};
use walras_crypto::{AcceptedSignatures, Hash};
use walras_engine::{
    AccountView, Block, BlockHeader, BlockOutcome, ClearingReport, EngineConfig, EngineError,
    ExchangeState, MarketPrices, StateMemory,
};
use walras_store::{BlockStore, StoreError};
use walras_types::SignedTransaction;

/// How blocks are cut and executed.
#[derive(Clone, Debug)]
pub(crate) struct ProducerConfig {
    pub block_interval: Duration,
    pub max_block_txs: usize,
    pub engine: EngineConfig,
    pub warm_start: super::oracle::WarmStart,
}

/// The last committed block, as clients see it.
#[derive(Clone, Debug)]
pub struct Tip {
    pub height: u64,
    pub block_hash: Hash,
    pub state_root: Hash,
    /// The last block's clearing valuations (meaningful only for the assets it traded).
    pub valuations: Vec<u128>,
    /// The last block's display prices ([`block_prices`]).
    pub prices: Vec<Option<String>>,
    /// Last traded prices carried forward to this block (the state's record, kept beside it
    /// so that readers need not lock the state).
    pub market: Arc<MarketPrices>,
    /// What the state held after the block, for the same reason.
    pub counts: StateCounts,
}

/// What the state holds, as `GET /v1/status` reports it. Published with the tip: status read
/// them under the state's read lock, so it waited for the block being executed, and the
/// producer waited for it (0.7-0.9 ms of each block of 1,000 payments while the overload test
/// sampled status every 20 ms).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StateCounts {
    pub accounts: u64,
    pub open_offers: u64,
    /// Bytes by part, for `/metrics` (`walras_state_memory_bytes`); `None` where not measured
    /// with this block (see [`StateCounts::after_block`]).
    pub memory: Option<StateMemory>,
}

/// How often blocks measure the state's memory: [`ExchangeState::memory`] reads every shard of
/// the id index and every chunk of the carried books (on the order of a millisecond at 10M
/// accounts and a million offers), under the state's lock on the block path.
pub(crate) const MEMORY_GAUGE_INTERVAL: Duration = Duration::from_secs(1);

impl StateCounts {
    /// Counts and memory of `state` (recovery: once).
    pub fn of(state: &ExchangeState) -> StateCounts {
        StateCounts {
            memory: Some(state.memory()),
            ..StateCounts::counts_of(state)
        }
    }

    /// Counts of `state` after a block; its memory too if the last measure is
    /// [`MEMORY_GAUGE_INTERVAL`] old (or none was taken since the start).
    pub(crate) fn after_block(shared: &Shared, state: &ExchangeState) -> StateCounts {
        let mut measured = shared
            .memory_measured_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let due = measured.is_none_or(|at| now.duration_since(at) >= MEMORY_GAUGE_INTERVAL);
        if due {
            *measured = Some(now);
        }
        StateCounts {
            memory: due.then(|| state.memory()),
            ..StateCounts::counts_of(state)
        }
    }

    fn counts_of(state: &ExchangeState) -> StateCounts {
        StateCounts {
            accounts: state.account_count() as u64,
            open_offers: state.open_offer_count() as u64,
            memory: None,
        }
    }
}

/// Everything the HTTP handlers and the producer share.
pub struct Shared {
    /// Written only by the producer, for the length of one block.
    pub state: tokio::sync::RwLock<ExchangeState>,
    pub mempool: Mutex<Mempool>,
    /// The commit bound and the measured commit rate: how much the mempool may hold
    /// ([`super::overload`]). Locked briefly, never while waiting for anything else.
    pub overload: Mutex<Overload>,
    /// What admission reads of every account (key, last committed sequence number), as of the
    /// last committed block: one immutable view per block, read without locking the state.
    /// Replaced only by [`Shared::committed`], while it holds the mempool lock, so a submission
    /// that reads it under that lock sees the view and the mempool of the same block.
    pub accounts: ArcSwap<AccountView>,
    /// Signalled when the mempool gets work for the producer, and on shutdown.
    pub producer_wake: Condvar,
    pub store: BlockStore,
    pub recent: Mutex<RecentTransactions>,
    pub tip: RwLock<Tip>,
    pub events: broadcast::Sender<Arc<BlockEventJson>>,
    pub metrics: Metrics,
    pub dev_genesis: Option<DevGenesisJson>,
    pub assets: u16,
    /// What the genesis calls each asset (`GET /v1/assets`).
    pub asset_names: walras_api::wire::AssetsJson,
    pub max_block_txs: usize,
    /// `true` once the node is stopping; async tasks (event streams, the server) wait on it.
    pub shutting_down: tokio::sync::watch::Sender<bool>,
    /// `Some` with `--block-source gateway`: blocks come only from the gateway's sealed batches.
    pub gateway: Option<super::gateway_link::GatewayLink>,
    /// `Some` with `--oracle-feed`: the valuation oracle's latest prices (advisory).
    pub oracle: Option<Arc<super::oracle::OracleHandle>>,
    /// What offer explanations need: the commission, and one permit (an explanation reads
    /// the block log, so they run one at a time).
    pub explain: super::limits::ExplainGate,
    /// Scans of every open offer (`GET /v1/accounts/{id}/offers`): a few at once, one per
    /// client address waiting or running, the others served in arrival order.
    pub offer_scans: super::limits::FairTurns,
    /// CometBFT's RPC URL in replicated mode, set once CometBFT is started (`GET /v1/node`).
    pub cometbft_rpc: std::sync::OnceLock<String>,
    /// Accepted signature verdicts, for what checks transactions by content after admission:
    /// the ABCI app's CheckTx and proposal checks (they check those they do not find, by the
    /// same rule; see `walras_crypto::accept`), and a gateway's sealed batches. The solo
    /// producer does not look here: its batches come from the mempool, whose every signature
    /// admission accepted ([`Signatures::AcceptedAtAdmission`]).
    pub accepted_signatures: Arc<AcceptedSignatures>,
    /// Whether admission records its accepted verdicts in `accepted_signatures`: set by the
    /// ABCI app, whose proposal checks find them there; off in solo mode, where nothing would
    /// (recording costs a hash of each transaction and a lock).
    pub record_admitted_verdicts: std::sync::atomic::AtomicBool,
    /// The last background checkpoint failure logged (each is logged once).
    pub checkpoint_failure_reported: Mutex<Option<String>>,
    /// When a block last measured the state's memory ([`StateCounts::after_block`]).
    pub memory_measured_at: Mutex<Option<Instant>>,
    /// Transactions submissions have room reserved for while their signatures are checked
    /// (between the room check and the mempool lock): counted as pending by the overload rule,
    /// so the verification queue is bounded too.
    pub verifying: std::sync::atomic::AtomicUsize,
    /// CometBFT mode: the transactions CometBFT's mempool holds as this node's CheckTx saw
    /// them (its own forwarded ones and its peers' gossiped ones), not yet committed; 0 in
    /// solo mode. Admission counts the larger of this and its own mempool, so that a node
    /// admits nothing while the network's pending set is full (Trigger: node 0 of a localnet
    /// counted only its own mempool, forgot forwarded transactions after the bound while
    /// CometBFT still held them, and admitted again: 160,000 of 160,000 offered at 3x, 102,000
    /// expired; its peers, which count the network's, refused its bundles, so only node 0
    /// could propose them).
    pub replicated_pending: std::sync::atomic::AtomicUsize,
}

impl Shared {
    /// What the overload rule counts as pending, given the mempool's own count: the larger of
    /// it and CometBFT's pending set, plus the room reserved for signature checks.
    pub fn pending_for_admission(&self, mempool_len: usize) -> usize {
        use std::sync::atomic::Ordering;
        mempool_len.max(self.replicated_pending.load(Ordering::Relaxed))
            + self.verifying.load(Ordering::Relaxed)
    }
}

/// Why the producer stopped the node.
#[derive(Debug, thiserror::Error)]
pub enum ProducerError {
    /// The engine refused to build a block from the mempool's transactions.
    #[error("block production failed: {0}")]
    Engine(#[source] EngineError),
    /// The block could not be stored: nothing after the last stored block was reported.
    #[error(
        "committing a block failed, so the node stopped (nothing after the last committed \
         block was reported): {0}"
    )]
    Store(#[source] StoreError),
}

impl Shared {
    /// The mempool, even if a thread panicked while holding it (its data stays consistent:
    /// every method finishes its changes before returning).
    pub fn mempool(&self) -> MutexGuard<'_, Mempool> {
        self.mempool
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Reports a committed block to admission: the mempool forgets its transactions and the
    /// account view after it (`state`, the state after the block: the view shares its
    /// account chunks) is published, both under one hold of the mempool lock. The view is
    /// taken before the lock is (the caller holds the state, so nothing else writes it
    /// meanwhile), and the previous view is dropped after it is released: freeing the
    /// chunks only that view held took 0.6-1.2 ms of each block of 1,000 payments (measured
    /// in the overload test), during which admission waited for the mempool.
    /// Its time counts in `walras_block_publish_seconds_total`: serial work on the block
    /// path that the block timings do not show (while every view took a reference per chunk
    /// of accounts: 4.6-6.0 µs per transaction, ~10 ms a block of 2,000, at 10M accounts and
    /// 1M senders on the 2-core VM; issue 32).
    pub fn committed(&self, batch: &[(Hash, SignedTransaction)], state: &ExchangeState) {
        let started = Instant::now();
        let view = Arc::new(self.accounts.load().after_block(state));
        let previous = {
            let mut mempool = self.mempool();
            mempool.committed(batch);
            self.accounts.swap(view)
        };
        drop(previous);
        add_seconds(&self.metrics.block_publish_seconds_total, started.elapsed());
    }

    /// The overload state (a copy is cheap; the lock is held only to read or record).
    pub fn overload(&self) -> MutexGuard<'_, Overload> {
        self.overload
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records a committed block of `transactions` that took `busy`, after which
    /// `left_waiting` were pending, in the commit-rate estimate, and reports the estimate in
    /// the metrics.
    /// Feeds the commit-rate estimate a rate measured over several blocks (replicated mode).
    pub fn record_drain_rate(&self, tx_per_s: f64, saturated: bool) {
        let mut overload = self.overload();
        overload.drain.record_rate(tx_per_s, saturated);
        if let Some(rate) = overload.drain.tx_per_s() {
            self.metrics.commit_rate_tx_per_s.set(rate as i64);
        }
    }

    pub fn record_drain(&self, transactions: usize, busy: Duration, left_waiting: usize) {
        let mut overload = self.overload();
        overload
            .drain
            .record_block(transactions, busy, left_waiting);
        if let Some(rate) = overload.drain.tx_per_s() {
            self.metrics.commit_rate_tx_per_s.set(rate as i64);
        }
    }

    pub fn recent(&self) -> MutexGuard<'_, RecentTransactions> {
        self.recent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn tip(&self) -> Tip {
        self.tip
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Asks the producer to stop after the block it is executing, if any.
    /// Also ends every event stream and stops the HTTP server.
    pub fn shut_down(&self) {
        self.shutting_down.send_replace(true);
        let _guard = self.mempool();
        self.producer_wake.notify_all();
    }

    pub fn is_shutting_down(&self) -> bool {
        *self.shutting_down.borrow()
    }

    /// Resolves once the node is stopping.
    pub async fn stopped(&self) {
        let mut stopping = self.shutting_down.subscribe();
        // `self` owns the sender, so the channel cannot close while this waits.
        let _ = stopping.wait_for(|stopping| *stopping).await;
    }
}

/// Produces blocks until shutdown; an error stops the node. Each block's work feeds the
/// commit-rate estimate admission goes by, and the age of its oldest transaction at commit is
/// checked against the commit bound ([`record_commit_age`]).
pub(crate) fn run_producer(shared: &Shared, config: &ProducerConfig) -> Result<(), ProducerError> {
    let mut last_cut = Instant::now();
    while let Some((batch, oldest)) = wait_for_batch(shared, config, &mut last_cut) {
        let started = Instant::now();
        let transactions = batch.len();
        produce_block(shared, config, batch, Signatures::AcceptedAtAdmission)?;
        let committed_at = Instant::now();
        let left_waiting = shared.mempool().len();
        shared.record_drain(transactions, committed_at - started, left_waiting);
        if let Some(oldest) = oldest {
            record_commit_age(shared, committed_at.saturating_duration_since(oldest));
        }
    }
    Ok(())
}

/// The age at commit of a block's oldest transaction: the largest so far is a gauge, and a
/// block that committed one later than the bound is counted (the rule is meant to make that
/// count stay zero; see [`super::overload`]).
fn record_commit_age(shared: &Shared, age: Duration) {
    let metrics = &shared.metrics;
    let age_ms = gauge_value(age.as_millis());
    if age_ms > metrics.commit_age_max_ms.get() {
        metrics.commit_age_max_ms.set(age_ms);
    }
    if age > shared.overload().commit_bound {
        metrics.blocks_committed_late_total.inc();
    }
}

/// A batch for the next block, and when its oldest transaction was admitted.
pub(crate) type Batch = (Vec<(Hash, SignedTransaction)>, Option<Instant>);

/// Waits until a block is due: `max_block_txs` waiting, or the interval since the last cut
/// has passed and something is waiting. (Under overload the first comes first: the overload
/// rule always admits a full block.) Before taking the block, drops (oldest first) what its
/// block would commit after the bound. `None` on shutdown (what is waiting is dropped: the
/// mempool is not durable).
pub(crate) fn wait_for_batch(
    shared: &Shared,
    config: &ProducerConfig,
    last_cut: &mut Instant,
) -> Option<Batch> {
    let mut mempool = shared.mempool();
    loop {
        if shared.is_shutting_down() {
            return None;
        }
        let now = Instant::now();
        let due = *last_cut + config.block_interval;
        let waiting = mempool.waiting();
        if waiting >= config.max_block_txs || (waiting > 0 && now >= due) {
            let block_transactions = waiting.min(config.max_block_txs);
            let cutoff = shared.overload().expiry_cutoff(now, block_transactions);
            if let Some(cutoff) = cutoff {
                let shed = mempool.shed_admitted_before(cutoff);
                if !shed.is_empty() {
                    shared.metrics.count_shed("expired", shed.len());
                    continue; // what is left may no longer make a block
                }
            }
            *last_cut = now;
            let oldest = mempool.oldest_admitted_at();
            return Some((mempool.take(config.max_block_txs), oldest));
        }
        let timeout = if waiting > 0 {
            due - now
        } else {
            config.block_interval
        };
        mempool = shared
            .producer_wake
            .wait_timeout(mempool, timeout)
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .0;
    }
}

/// Where a batch's signature verdicts come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Signatures {
    /// The batch came from this node's mempool: admission accepted each signature under its
    /// source's key (`crate::admission`), and the block takes those verdicts and hashes
    /// (`ExchangeState::propose_admitted`).
    AcceptedAtAdmission,
    /// Nothing checked them yet (a gateway's sealed batch): the block checks each.
    Unchecked,
}

/// Executes, commits and reports one block; returns its outcome (the gateway link answers with it).
pub(super) fn produce_block(
    shared: &Shared,
    config: &ProducerConfig,
    batch: Vec<(Hash, SignedTransaction)>,
    signatures: Signatures,
) -> Result<BlockOutcome, ProducerError> {
    let transactions: Vec<SignedTransaction> = batch.iter().map(|(_, signed)| *signed).collect();
    let hashes: Vec<Hash> = batch.iter().map(|(hash, _)| *hash).collect();
    let engine = warm_started(shared, config);
    let mut state = shared.state.blocking_write();
    let started = Instant::now();
    let proposed = match signatures {
        Signatures::AcceptedAtAdmission => state.propose_admitted(transactions, &hashes, &engine),
        Signatures::Unchecked => state.propose(transactions, &engine),
    };
    let (block, outcome) = proposed.map_err(ProducerError::Engine)?;
    let executed = Instant::now();
    shared
        .store
        .append_with_results(
            &block,
            &outcome.dropped,
            outcome.clearing.as_ref(),
            Some(&outcome.fills),
            &state,
        )
        .map_err(ProducerError::Store)?;
    let persisted = Instant::now();
    // Index the block's transactions before the mempool forgets them: a status query in between
    // found a transaction neither pending nor recently committed (404 for an accepted one).
    index_block(shared, &block, &outcome, hashes);
    shared.committed(&batch, &state);
    let counts = StateCounts::after_block(shared, &state);
    drop(state);
    record_state_gauges(shared, counts);
    let timings = BlockTimings {
        execute: executed - started,
        persist: persisted - executed,
    };
    announce_block(shared, &block, &outcome, &timings, counts);
    Ok(outcome)
}

/// The engine configuration with tâtonnement starting where `config.warm_start` says: the
/// books' fit, the last block's valuations, or the oracle's prices when every asset has a
/// healthy one (each falling back to the next). Only the proposer's search starts there:
/// followers and recovery check the header exactly, so the start never changes what is valid.
fn warm_started(shared: &Shared, config: &ProducerConfig) -> EngineConfig {
    let mut engine = config.engine.clone();
    engine.accepted_signatures = Some(shared.accepted_signatures.clone());
    let oracle = shared
        .oracle
        .as_ref()
        .and_then(|oracle| oracle.start_prices(shared.assets));
    let (start, used) = super::oracle::choose_start(
        config.warm_start,
        &shared.tip().valuations,
        shared.assets,
        oracle.as_deref(),
    );
    shared.metrics.count_warm_start(used.name());
    engine.clearing.start_prices = start;
    engine
}

/// Reports a block that is on disk: recent-transaction index, tip, metrics, events. Whatever
/// orders blocks (the solo producer, or CometBFT through the ABCI app) calls this only after
/// the store committed the block.
pub(super) fn publish_block(
    shared: &Shared,
    block: &Block,
    outcome: &BlockOutcome,
    hashes: Vec<Hash>,
    timings: &BlockTimings,
    counts: StateCounts,
) {
    index_block(shared, block, outcome, hashes);
    announce_block(shared, block, outcome, timings, counts);
}

/// The block's transactions into the recent-transaction index (their status answers).
fn index_block(shared: &Shared, block: &Block, outcome: &BlockOutcome, hashes: Vec<Hash>) {
    shared
        .recent()
        .insert_block(block.header.height, hashes, &outcome.dropped);
}

/// The tip after `header`: its market record is the previous one carried past the header, by
/// the same function the state applies ([`MarketPrices::record`]), so both agree.
fn next_tip(previous: &Tip, header: &BlockHeader, counts: StateCounts) -> Tip {
    let mut market = MarketPrices::clone(&previous.market);
    market.record(header);
    Tip {
        height: header.height,
        block_hash: header.hash(),
        state_root: header.state_root,
        valuations: header.valuations.clone(),
        prices: block_prices(header),
        market: Arc::new(market),
        counts,
    }
}

/// The tip, metrics and the block event; `counts`, the state's after the block.
fn announce_block(
    shared: &Shared,
    block: &Block,
    outcome: &BlockOutcome,
    timings: &BlockTimings,
    counts: StateCounts,
) {
    // Computed before the write lock is taken (it reads the previous tip).
    let tip = next_tip(&shared.tip(), &block.header, counts);
    let prices = tip.prices.clone();
    *shared
        .tip
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner()) = tip;
    record_metrics(&shared.metrics, outcome, block.transactions.len(), timings);
    // Advisory, after the block is durable: nothing committed depends on it.
    let band = shared.oracle.as_ref().and_then(|oracle| {
        super::oracle::check_block(oracle, block.header.height, &block.header.valuations)
    });
    let event = block_event(outcome, prices, block.transactions.len(), timings, band);
    // No subscriber is not an error.
    let _ = shared.events.send(Arc::new(event));
}

/// The memory gauges (issue 32): state sizes, the recent-transaction index, the store file
/// and the newest background checkpoint. Both paths that commit blocks call it (the solo
/// producer, the CometBFT application).
pub(crate) fn record_state_gauges(shared: &Shared, counts: StateCounts) {
    let metrics = &shared.metrics;
    metrics.state_accounts.set(gauge_value(counts.accounts));
    metrics
        .state_open_offers
        .set(gauge_value(counts.open_offers));
    if let Some(memory) = counts.memory {
        let decoded_keys = walras_engine::decoded_keys_live() * walras_engine::DECODED_KEY_BYTES;
        let parts = [
            memory.accounts,
            memory.account_index,
            memory.account_trie,
            memory.offer_tries,
            memory.books,
            decoded_keys,
        ];
        for (part, bytes) in MEMORY_PARTS.into_iter().zip(parts) {
            metrics
                .state_memory_bytes
                .with_label_values(&[part])
                .set(gauge_value(bytes));
        }
        // Measured as often as the state's memory: the index's lists are read one by one.
        metrics
            .recent_index_bytes
            .set(gauge_value(shared.recent().heap_bytes()));
        if let Some(bytes) = mapped_resident_bytes() {
            metrics.mapped_resident_bytes.set(gauge_value(bytes));
        }
    }
    metrics
        .recent_index_transactions
        .set(gauge_value(shared.recent().len()));
    metrics
        .offer_index_pending_entries
        .set(gauge_value(shared.store.offer_index_pending_entries()));
    if let Ok(file) = std::fs::metadata(shared.store.dir().join("data.mdb")) {
        metrics.store_file_bytes.set(gauge_value(file.len()));
    }
    metrics
        .checkpoint_height
        .set(gauge_value(shared.store.background_checkpoint_height()));
    metrics
        .checkpoint_file_bytes
        .set(gauge_value(shared.store.checkpoint_file_bytes()));
    metrics
        .checkpoint_buffer_bytes
        .set(gauge_value(shared.store.checkpoint_buffer_bytes()));
    // Blocks are durable without it, so a failed checkpoint does not stop the node; but a
    // restart then replays more, so the operator hears of it (once per failure).
    if let Some(failure) = shared.store.checkpoint_failure() {
        let mut reported = shared
            .checkpoint_failure_reported
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if reported.as_deref() != Some(failure.as_str()) {
            tracing::warn!("writing a checkpoint failed: {failure}");
            *reported = Some(failure);
        }
    }
}

/// Resident bytes of the process's file mappings (`RssFile` in /proc/self/status): the pages
/// of the store's files it touched, and its binary. `None` where /proc does not say (not Linux).
fn mapped_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("RssFile:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

pub(super) struct BlockTimings {
    pub execute: Duration,
    pub persist: Duration,
}

fn record_metrics(
    metrics: &Metrics,
    outcome: &BlockOutcome,
    transactions: usize,
    timings: &BlockTimings,
) {
    metrics.height.set(gauge_value(outcome.header.height));
    metrics.blocks_total.inc();
    if let Some(report) = &outcome.clearing {
        metrics.count_clearing(
            outcome.converged,
            report.iterations,
            report.millis,
            report.unrealized_utility_ratio,
        );
    }
    metrics
        .transactions_committed_total
        .inc_by(transactions as u64);
    metrics
        .transactions_accepted_total
        .inc_by(outcome.accepted as u64);
    add_seconds(&metrics.block_execute_seconds_total, timings.execute);
    add_seconds(&metrics.block_persist_seconds_total, timings.persist);
    metrics
        .block_transactions_last
        .set(gauge_value(transactions));
    for (_, reason) in &outcome.dropped {
        metrics.count_dropped(reason.name());
    }
}

/// Display prices of one block: asset i in units of asset 0 where the block priced it (it
/// traded in one group of traded pairs with asset 0), `None` elsewhere — by the rule of
/// [`MarketPrices::record`], applied to this block alone.
/// Decimal strings of 12 significant digits, as every other price the API serves.
pub(crate) fn block_prices(header: &BlockHeader) -> Vec<Option<String>> {
    let mut market = MarketPrices::new(header.valuations.len(), header.height.saturating_sub(1));
    market.record(header);
    market
        .assets()
        .iter()
        .map(|asset| asset.price_in_asset0.map(|price| price.rate.to_string()))
        .collect()
}

/// The reference prices of `market` as JSON (decimal strings, exact beside rounded).
pub(crate) fn reference_prices_json(market: &MarketPrices) -> ReferencePricesJson {
    ReferencePricesJson {
        since_height: market.since_height(),
        assets: market
            .assets()
            .iter()
            .enumerate()
            .map(|(asset, known)| AssetPriceJson {
                asset: asset as u16,
                last_traded_height: known.last_traded_height,
                price: known.price_in_asset0.map(|price| price.rate.to_string()),
                price_exact: known
                    .price_in_asset0
                    .map(|price| price.rate.to_exact_decimal()),
                price_height: known.price_in_asset0.map(|price| price.height),
            })
            .collect(),
        pairs: market
            .pairs()
            .map(|((sell, buy), trade)| PairPriceJson {
                sell,
                buy,
                rate: trade.rate.to_string(),
                rate_exact: trade.rate.to_exact_decimal(),
                height: trade.height,
            })
            .collect(),
    }
}

/// The JSON form of a block's clearing quality (events and `GET /v1/blocks/{height}`).
pub(crate) fn clearing_quality_json(report: &ClearingReport) -> ClearingQualityJson {
    ClearingQualityJson {
        iterations: report.iterations,
        achieved_epsilon: report.achieved_epsilon,
        achieved_mu: report.achieved_mu,
        unrealized_utility_ratio: Some(report.unrealized_utility_ratio)
            .filter(|ratio| ratio.is_finite()),
        millis: report.millis,
    }
}

fn block_event(
    outcome: &BlockOutcome,
    prices: Vec<Option<String>>,
    transactions: usize,
    timings: &BlockTimings,
    oracle_band: Option<walras_api::wire::OracleBandJson>,
) -> BlockEventJson {
    let header = &outcome.header;
    BlockEventJson {
        height: header.height,
        hash: header.hash().to_string(),
        state_root: header.state_root.to_string(),
        transactions: transactions as u32,
        accepted: outcome.accepted as u32,
        dropped: outcome.dropped.len() as u32,
        converged: outcome.converged,
        clearing: outcome.clearing.as_ref().map(clearing_quality_json),
        trades: header.trades.len() as u32,
        prices,
        execute_ms: timings.execute.as_secs_f64() * 1e3,
        persist_ms: timings.persist.as_secs_f64() * 1e3,
        committed_unix_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_millis() as u64),
        oracle_band,
        dropped_by_reason: outcome.dropped.iter().fold(
            std::collections::BTreeMap::new(),
            |mut counts, (_, reason)| {
                *counts.entry(reason.name().to_string()).or_insert(0) += 1;
                counts
            },
        ),
        phases: Some(PhaseTimingsJson {
            signatures: outcome.timings.signatures,
            filter: outcome.timings.filter,
            plan: outcome.timings.plan,
            clearing: outcome.timings.clearing,
            apply: outcome.timings.apply,
            commit: outcome.timings.commit,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use walras_engine::{BlockHeader, PhaseTimings};

    /// Trigger: a block whose offers could trade but none did has an infinite unrealized/realized
    /// utility ratio; serde_json writes it as `null`, and every client reading the event stream
    /// (the load generator in `client_cli`) refused the event as "invalid type: null, expected f64".
    #[test]
    fn a_block_event_with_an_infinite_utility_ratio_parses_back() {
        let outcome = BlockOutcome {
            header: BlockHeader {
                height: 3,
                previous: Hash::default(),
                transactions_root: Hash::default(),
                state_root: Hash::default(),
                valuations: vec![1 << 100, 1 << 90],
                trades: Vec::new(),
            },
            accepted: 0,
            dropped: Vec::new(),
            fills: Vec::new(),
            converged: false,
            clearing: Some(ClearingReport {
                iterations: 7,
                achieved_epsilon: 0.0,
                achieved_mu: 0.0,
                unrealized_utility_ratio: f64::INFINITY,
                millis: 1.0,
            }),
            timings: PhaseTimings::default(),
            touched_accounts: Vec::new(),
        };
        let timings = BlockTimings {
            execute: Duration::from_millis(1),
            persist: Duration::from_millis(1),
        };
        let text =
            serde_json::to_string(&block_event(&outcome, Vec::new(), 0, &timings, None)).unwrap();
        let event: BlockEventJson = serde_json::from_str(&text).expect("the event parses back");
        let quality = event.clearing.expect("the proposer's clearing quality");
        assert_eq!(quality.unrealized_utility_ratio, None);
        assert_eq!(quality.iterations, 7);
    }
}
