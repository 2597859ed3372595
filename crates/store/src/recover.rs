//! Rebuilding the exchange state from the block log.

use crate::store::HeaderEntry;
use crate::{BlockStore, StoreError};
use std::path::Path;
use walras_engine::{Block, BlockOutcome, EngineConfig, ExchangeState};

/// Opens the store in `dir` and rebuilds the state: genesis, then every stored block through
/// the follower path, which checks each header and state root. Fails on the first block that
/// does not check out, naming its height; never drops blocks.
pub fn recover(
    dir: &Path,
    config: &EngineConfig,
    threads: usize,
) -> Result<(BlockStore, ExchangeState), StoreError> {
    let store = BlockStore::open(dir)?;
    let state = recover_store(&store, config, threads)?;
    Ok((store, state))
}

/// Rebuilds the state from an open store; see [`recover`].
pub fn recover_store(
    store: &BlockStore,
    config: &EngineConfig,
    threads: usize,
) -> Result<ExchangeState, StoreError> {
    recover_store_with(store, config, threads, |_, _| {})
}

/// [`recover_store`], calling `on_block` with each block re-applied and what it did (so a node
/// can rebuild its indexes in the same pass). Each block's recomputed dropped transactions must
/// equal the stored ones.
pub fn recover_store_with(
    store: &BlockStore,
    config: &EngineConfig,
    threads: usize,
    mut on_block: impl FnMut(&Block, &BlockOutcome),
) -> Result<ExchangeState, StoreError> {
    let genesis = store.genesis()?.ok_or(StoreError::NotInitialized)?;
    let mut state = ExchangeState::from_genesis(&genesis, threads).map_err(|error| {
        StoreError::CorruptGenesis {
            reason: error.to_string(),
        }
    })?;
    for block in store.blocks_from(1) {
        let block = block?;
        let height = block.header.height;
        check_header_entry(store, height, HeaderEntry::of(&block.header))?;
        let outcome = state
            .apply(&block, config)
            .map_err(|error| StoreError::Replay { height, error })?;
        if store.dropped(height)?.as_deref() != Some(outcome.dropped.as_slice()) {
            return Err(StoreError::CorruptBlock {
                height,
                reason: "its stored results differ from re-executing it".into(),
            });
        }
        on_block(&block, &outcome);
    }
    let last_height = store.last_height()?;
    if state.height() < last_height {
        return Err(StoreError::MissingBlock {
            height: state.height() + 1,
        });
    }
    Ok(state)
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
