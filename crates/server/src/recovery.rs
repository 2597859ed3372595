//! Start-up: open (or create) the store, recover the state from its newest checkpoint and the
//! blocks after it, and build the node's shared state ([`Shared`]) from it.

use crate::config::{admission_floor, proposer_engine_config, recovery_engine_config, Consensus};
use crate::genesis::{asset_names, open_or_create, warn_if_dev};
use crate::metrics::gauge_value;
use crate::node::{record_state_gauges, Shared, StateCounts, Tip};
use crate::oracle::OracleSettings;
use crate::{gateway_link, limits, mempool, metrics, oracle, overload, recent};
use crate::{NodeConfig, NodeError};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;
use walras_crypto::Hash;
use walras_engine::transaction_hash;
use walras_engine::ExchangeState;
use walras_store::{recover_store_with, BlockStore, Recovery};

/// Opens (or creates) the store, recovers the state, and builds the shared state.
pub(crate) fn open_and_recover(config: &NodeConfig) -> Result<Shared, NodeError> {
    warn_if_dev(&config.genesis);
    let (store, dev_genesis) = open_or_create(config)?;
    let genesis = store
        .genesis_summary()
        .map_err(NodeError::storage("reading the genesis"))?;
    let last_height = store
        .last_height()
        .map_err(NodeError::storage("reading the block log"))?;
    tracing::info!(
        "recovering {last_height} blocks from {} ({} accounts, {} assets)",
        config.data_dir.display(),
        genesis.accounts,
        genesis.assets
    );
    let started = Instant::now();
    // The recent-transaction index reads and hashes the last ~1M stored transactions on one
    // thread (0.8 s at 10M accounts): it is built beside the recovery, which ends at the
    // log's last block (its postcondition), and checked against the recovered height.
    let (recovery, recent) = std::thread::scope(|scope| {
        let recent = scope.spawn(|| recent_transactions(&store, last_height));
        let recovery = recover(&store, config, last_height);
        match recent.join() {
            Ok(recent) => (recovery, recent),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    });
    let mut recovery = recovery?;
    report_recovery(&recovery);
    let recent = recent?;
    assert_eq!(
        recovery.state.height(),
        last_height,
        "recovery ends at the log's last block"
    );
    let tip = recovered_tip(&store, &mut recovery.state, config.threads)?;
    tracing::info!(
        "recovered height {} state root {} in {:.1} s",
        tip.height,
        tip.state_root,
        started.elapsed().as_secs_f64()
    );
    let state = recovery.state;
    let assets = state.assets() as u16;
    // A reference to the state's account chunks: nothing copied, nothing to time.
    let accounts = walras_engine::AccountView::of(&state);
    let oracle = match &config.oracle {
        Some(settings) => Some(Arc::new(oracle_handle(settings, assets)?)),
        None => None,
    };
    let shared = Shared {
        explain: limits::ExplainGate::new(proposer_engine_config(config).clearing.epsilon),
        offer_scans: limits::FairTurns::new(
            limits::OFFER_SCANS_MAX,
            limits::OFFER_SCANS_WAITING_MAX,
        ),
        oracle,
        assets: state.assets() as u16,
        asset_names: asset_names(&genesis),
        accounts: arc_swap::ArcSwap::from_pointee(accounts),
        state: tokio::sync::RwLock::new(state),
        mempool: Mutex::new(mempool::Mempool::new(config.mempool_capacity)),
        overload: Mutex::new(overload::Overload::new(
            config.commit_bound,
            config.mempool_capacity,
            admission_floor(config),
        )),
        producer_wake: Condvar::new(),
        store,
        recent: Mutex::new(recent),
        tip: RwLock::new(tip),
        events: broadcast::channel(1024).0,
        metrics: metrics::Metrics::new().map_err(NodeError::Metrics)?,
        dev_genesis,
        max_block_txs: config.max_block_txs,
        shutting_down: tokio::sync::watch::channel(false).0,
        gateway: match &config.consensus {
            Consensus::Gateway(link) => Some(gateway_link::GatewayLink::new(link)),
            Consensus::Solo | Consensus::Cometbft(_) => None,
        },
        cometbft_rpc: std::sync::OnceLock::new(),
        verifying: std::sync::atomic::AtomicUsize::new(0),
        replicated_pending: std::sync::atomic::AtomicUsize::new(0),
        // Room for a full mempool's verdicts in each of its two generations.
        accepted_signatures: Arc::new(walras_crypto::AcceptedSignatures::new(
            config.mempool_capacity.max(1024),
        )),
        record_admitted_verdicts: std::sync::atomic::AtomicBool::new(false),
        checkpoint_failure_reported: Mutex::new(None),
        memory_measured_at: Mutex::new(None),
    };
    // The gauges of what the node holds describe the recovered state from the start, not only
    // after the next block (an idle node restarted on 10M accounts reported 0 of them).
    shared.metrics.height.set(gauge_value(shared.tip().height));
    record_state_gauges(&shared, shared.tip().counts);
    Ok(shared)
}

/// The oracle's shared state, with its asset map checked against the genesis's assets.
fn oracle_handle(
    settings: &OracleSettings,
    assets: u16,
) -> Result<oracle::OracleHandle, NodeError> {
    let handle = oracle::OracleHandle::new(settings, assets).map_err(NodeError::Metrics)?;
    if let Some(entry) = handle.map.entries().iter().find(|e| e.id >= assets) {
        return Err(NodeError::Config(format!(
            "the oracle asset map names asset {} ({}), but the genesis has only {assets} assets",
            entry.id, entry.symbol
        )));
    }
    if !handle.map.covers(assets) {
        tracing::warn!(
            "the oracle asset map does not name every one of the {assets} assets: the band \
             check covers the mapped ones, and --warm-start oracle falls back to the previous \
             block's prices"
        );
    }
    tracing::info!(
        "oracle: {} for {} mapped assets, band {} bps",
        handle.source,
        handle.map.entries().len(),
        handle.band_bps
    );
    Ok(handle)
}

/// The state from the store's newest good checkpoint and the blocks after it.
fn recover(
    store: &BlockStore,
    config: &NodeConfig,
    last_height: u64,
) -> Result<Recovery, NodeError> {
    let mut last_report = Instant::now();
    recover_store_with(
        store,
        &recovery_engine_config(config),
        config.threads,
        |block, _| {
            if last_report.elapsed() > Duration::from_secs(2) {
                tracing::info!(
                    "replayed up to block {} of {last_height}",
                    block.header.height
                );
                last_report = Instant::now();
            }
        },
    )
    .map_err(NodeError::storage("recovering the state from the store"))
}

/// Says where recovery started, and loudly which checkpoints it refused.
fn report_recovery(recovery: &Recovery) {
    for refused in &recovery.refused_checkpoints {
        tracing::warn!(
            "WARNING: the checkpoint at height {} is damaged and was not used ({}); \
             recovered from an older one instead: check the disk",
            refused.height,
            refused.reason
        );
    }
    let timings = &recovery.timings;
    match recovery.checkpoint_height {
        0 => tracing::info!(
            "replayed {} blocks from genesis in {:.0} ms",
            recovery.replayed_blocks,
            timings.replay_ms
        ),
        height => tracing::info!(
            "loaded the checkpoint at height {height}, replayed {} blocks after it \
             (ms: checksum {:.0}, accounts {:.0}, offers {:.0}, account trie {:.0}, \
             state root {:.0}, replay {:.0})",
            recovery.replayed_blocks,
            timings.decode.checksum_ms,
            timings.decode.decode_accounts_ms,
            timings.decode.decode_offers_ms,
            timings.decode.account_trie_ms,
            timings.state_root_ms,
            timings.replay_ms
        ),
    }
}

/// The recent-transaction index over the last stored blocks (at least
/// [`recent::RECENT_TRANSACTIONS_MIN`] transactions, whole blocks), from the stored blocks and
/// their stored results: nothing is re-executed.
fn recent_transactions(
    store: &BlockStore,
    height: u64,
) -> Result<recent::RecentTransactions, NodeError> {
    let mut blocks = Vec::new();
    let mut transactions = 0;
    let mut next = height;
    while next > 0 && transactions < recent::RECENT_TRANSACTIONS_MIN {
        let block = store
            .block(next)
            .map_err(NodeError::storage(
                "reading a block for the transaction index",
            ))?
            .ok_or(NodeError::BlockMissing { height: next })?;
        let dropped = store
            .dropped(next)
            .map_err(NodeError::storage("reading block results"))?
            .unwrap_or_default();
        transactions += block.transactions.len();
        blocks.push((block, dropped));
        next -= 1;
    }
    let mut recent = recent::RecentTransactions::new(recent::RECENT_TRANSACTIONS_MIN);
    for (block, dropped) in blocks.into_iter().rev() {
        let hashes = block.transactions.iter().map(transaction_hash).collect();
        recent.insert_block(block.header.height, hashes, &dropped);
    }
    Ok(recent)
}

fn recovered_tip(
    store: &BlockStore,
    state: &mut ExchangeState,
    threads: usize,
) -> Result<Tip, NodeError> {
    let height = state.height();
    if height == 0 {
        return Ok(Tip {
            height: 0,
            block_hash: Hash::default(),
            state_root: state.state_root(threads),
            valuations: Vec::new(),
            prices: Vec::new(),
            market: Arc::new(state.market().clone()),
            counts: StateCounts::of(state),
        });
    }
    let block = store
        .block(height)
        .map_err(NodeError::storage("reading the last block"))?
        .ok_or(NodeError::BlockMissing { height })?;
    Ok(Tip {
        height,
        block_hash: block.header.hash(),
        state_root: block.header.state_root,
        valuations: block.header.valuations.clone(),
        prices: crate::node::block_prices(&block.header),
        market: Arc::new(state.market().clone()),
        counts: StateCounts::of(state),
    })
}
