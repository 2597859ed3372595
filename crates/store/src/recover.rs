//! Rebuilding the exchange state: from the newest checkpoint that checks out (or from genesis),
//! then the blocks stored after it.

use crate::store::HeaderEntry;
use crate::{BlockStore, StoreError};
use std::path::Path;
use std::time::Instant;
use walras_engine::{Block, BlockOutcome, EngineConfig, ExchangeState, LoadTimings};

/// What recovery did, for the operator: where it started and what it refused on the way.
pub struct Recovery {
    pub state: ExchangeState,
    /// Height of the checkpoint recovery started from; 0 when it started from genesis.
    pub checkpoint_height: u64,
    /// Blocks re-applied after that checkpoint.
    pub replayed_blocks: u64,
    /// Checkpoints that did not check out, newest first, with why; recovery fell back past
    /// them. Not empty means the store is damaged: a node must say so loudly.
    pub refused_checkpoints: Vec<RefusedCheckpoint>,
    /// Where the time went (what an operator reads when a restart is slow).
    pub timings: RecoveryTimings,
}

/// Milliseconds spent in each part of recovery.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RecoveryTimings {
    /// Decoding the checkpoint that was used, in place in the store ([`LoadTimings`]:
    /// checksum, accounts, offers, account trie).
    pub decode: LoadTimings,
    /// Its state root, compared with the stored header's.
    pub state_root_ms: f64,
    /// Re-applying the blocks stored after it.
    pub replay_ms: f64,
}

/// A stored checkpoint that recovery did not use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefusedCheckpoint {
    pub height: u64,
    pub reason: String,
}

/// Opens the store in `dir` and rebuilds the state; see [`recover_store_with`].
pub fn recover(
    dir: &Path,
    config: &EngineConfig,
    threads: usize,
) -> Result<(BlockStore, ExchangeState), StoreError> {
    let store = BlockStore::open(dir)?;
    let state = recover_store(&store, config, threads)?;
    Ok((store, state))
}

/// Rebuilds the state from an open store; see [`recover_store_with`].
pub fn recover_store(
    store: &BlockStore,
    config: &EngineConfig,
    threads: usize,
) -> Result<ExchangeState, StoreError> {
    Ok(recover_store_with(store, config, threads, |_, _| {})?.state)
}

/// Rebuilds the state: the newest stored checkpoint whose rebuilt state root and header hash
/// equal the stored header's at its height (older ones, then genesis, if it does not check
/// out: each refusal is reported in [`Recovery::refused_checkpoints`]), then every later
/// block through the follower path, which checks each header and state root. Calls
/// `on_block` with each block re-applied and what it did; each block's recomputed dropped
/// transactions must equal the stored ones. Fails on the first block that does not check
/// out, naming its height; never drops blocks.
pub fn recover_store_with(
    store: &BlockStore,
    config: &EngineConfig,
    threads: usize,
    mut on_block: impl FnMut(&Block, &BlockOutcome),
) -> Result<Recovery, StoreError> {
    let (mut state, refused_checkpoints, mut timings) = starting_state(store, threads)?;
    let checkpoint_height = state.height();
    if checkpoint_height > 0 {
        store.adopt_draft_base(checkpoint_height, &state, threads)?;
    }
    let replay_started = Instant::now();
    let mut replayed_transactions = 0u64;
    for block in store.blocks_from(checkpoint_height + 1) {
        let block = block?;
        let height = block.header.height;
        // The log is consecutive; a gap is a damaged store, not a bug here.
        if height != state.height() + 1 {
            return Err(StoreError::MissingBlock {
                height: state.height() + 1,
            });
        }
        check_header_entry(store, height, HeaderEntry::of(&block.header))?;
        let outcome = state
            .apply(&block, config)
            .map_err(|error| StoreError::Replay { height, error })?;
        assert_eq!(
            state.height(),
            height,
            "applying block {height} leaves the state at the block's height"
        );
        if store.dropped(height)?.as_deref() != Some(outcome.dropped.as_slice()) {
            return Err(StoreError::CorruptBlock {
                height,
                reason: "its stored results differ from re-executing it".into(),
            });
        }
        replayed_transactions += block.transactions.len() as u64;
        on_block(&block, &outcome);
    }
    timings.replay_ms = replay_started.elapsed().as_secs_f64() * 1e3;
    store.set_transactions_since_checkpoint(replayed_transactions);
    let last_height = store.last_height()?;
    if state.height() < last_height {
        return Err(StoreError::MissingBlock {
            height: state.height() + 1,
        });
    }
    assert_eq!(
        state.height(),
        last_height,
        "recovery replays no block beyond the log's last"
    );
    assert!(checkpoint_height <= state.height());
    Ok(Recovery {
        replayed_blocks: state.height() - checkpoint_height,
        state,
        checkpoint_height,
        refused_checkpoints,
        timings,
    })
}

/// The newest checkpoint that checks out, else the genesis state; with the refused ones and
/// the time loading the used one took.
fn starting_state(
    store: &BlockStore,
    threads: usize,
) -> Result<(ExchangeState, Vec<RefusedCheckpoint>, RecoveryTimings), StoreError> {
    let mut refused = Vec::new();
    for height in store.checkpoint_heights()? {
        let mut timings = RecoveryTimings::default();
        match load_checkpoint(store, height, threads, &mut timings)? {
            Ok(state) => return Ok((state, refused, timings)),
            Err(reason) => refused.push(RefusedCheckpoint { height, reason }),
        }
    }
    let genesis = store.genesis()?;
    let state = ExchangeState::from_genesis(&genesis, threads).map_err(|error| {
        StoreError::CorruptGenesis {
            reason: error.to_string(),
        }
    })?;
    Ok((state, refused, RecoveryTimings::default()))
}

/// The checkpoint at `height` as a state, or why it does not check out (inner `Err`). Only a
/// failure to read the store is an outer error.
fn load_checkpoint(
    store: &BlockStore,
    height: u64,
    threads: usize,
    timings: &mut RecoveryTimings,
) -> Result<Result<ExchangeState, String>, StoreError> {
    let Some(entry) = store.header_entry(height)? else {
        return Ok(Err(format!("block {height} is not in the log")));
    };
    let decoded = store.with_checkpoint(height, |bytes| {
        ExchangeState::decode_checkpoint_timed(bytes, threads)
    })?;
    let mut state = match decoded {
        None => return Ok(Err("vanished while recovering".into())),
        Some(Err(error)) => return Ok(Err(error.to_string())),
        Some(Ok((state, decode))) => {
            timings.decode = decode;
            state
        }
    };
    if state.height() != height {
        return Ok(Err(format!(
            "it holds the state of height {}",
            state.height()
        )));
    }
    if state.last_header_hash() != entry.header_hash {
        return Ok(Err(format!(
            "its last header hash {} is not block {height}'s {}",
            state.last_header_hash(),
            entry.header_hash
        )));
    }
    let clock = Instant::now();
    let root = state.state_root(threads);
    timings.state_root_ms = clock.elapsed().as_secs_f64() * 1e3;
    if root != entry.state_root {
        return Ok(Err(format!(
            "its state root {root} is not block {height}'s {}",
            entry.state_root
        )));
    }
    Ok(Ok(state))
}

fn check_header_entry(
    store: &BlockStore,
    height: u64,
    expected: HeaderEntry,
) -> Result<(), StoreError> {
    match store.header_entry(height)? {
        Some(entry) if entry == expected => Ok(()),
        Some(_) => Err(StoreError::CorruptHeaderEntry {
            height,
            reason: "it does not match the stored block".into(),
        }),
        None => Err(StoreError::CorruptHeaderEntry {
            height,
            reason: "missing".into(),
        }),
    }
}
