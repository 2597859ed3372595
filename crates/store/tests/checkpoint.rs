//! Checkpoints bound restart time: recovery starts from the newest stored checkpoint whose
//! rebuilt state root equals the stored header's, and replays only the blocks after it. A
//! damaged checkpoint is never used: recovery falls back to the one before it (or genesis) and
//! reports each refusal, so the node can say so.

mod common;

use common::{config, fresh_store_with, propose_and_append_with_state, TempDir};
use heed::types::Bytes;
use heed::{CommitOrAbort, Database, EnvOpenOptions};
use std::path::Path;
use walras_engine::ExchangeState;
use walras_store::{recover_store_with, BlockStore, Recovery, StoreOptions};

const INTERVAL_BLOCKS: u64 = 10;
const BLOCKS: u64 = 35;

fn options() -> StoreOptions {
    StoreOptions {
        checkpoint_interval_blocks: INTERVAL_BLOCKS,
        ..StoreOptions::default()
    }
}

/// Appends [`BLOCKS`] blocks with checkpoints every [`INTERVAL_BLOCKS`]; returns the live state.
fn chain(dir: &Path) -> ExchangeState {
    let (store, mut live) = fresh_store_with(dir, &options());
    for _ in 0..BLOCKS {
        propose_and_append_with_state(&store, &mut live);
    }
    live
}

fn recover_counting(dir: &Path) -> (Recovery, u64) {
    let store = BlockStore::open_with(dir, &options()).unwrap();
    let mut replayed = 0;
    let recovery = recover_store_with(&store, &config(), 1, |_, _| replayed += 1).unwrap();
    (recovery, replayed)
}

/// Rewrites the checkpoint stored at `height` through LMDB directly, as a failing disk would.
fn rewrite_checkpoint(dir: &Path, height: u64, rewrite: impl FnOnce(&mut Vec<u8>)) {
    // SAFETY: no store is open on this directory; nothing else maps the file.
    let env = unsafe { EnvOpenOptions::new().max_dbs(5).open(dir) }.unwrap();
    let opening = env.write_txn().unwrap();
    let checkpoints: Database<'static, Bytes, Bytes> = env
        .create_databases_and_commit(opening, |opener, txn| {
            let checkpoints = opener.create_database(txn, Some("checkpoints"))?;
            Ok::<_, heed::Error>(CommitOrAbort::<_, ()>::Commit(checkpoints))
        })
        .unwrap()
        .unwrap_commit();
    let mut txn = env.write_txn().unwrap();
    let key = height.to_be_bytes();
    let mut bytes = checkpoints.get(&txn, &key).unwrap().unwrap().to_vec();
    rewrite(&mut bytes);
    checkpoints.put(&mut txn, &key, &bytes).unwrap();
    txn.commit().unwrap();
}

#[test]
fn recovery_replays_only_the_blocks_after_the_newest_checkpoint() {
    let dir = TempDir::new("checkpoint-replay");
    let mut live = chain(dir.path());
    let store = BlockStore::open_with(dir.path(), &options()).unwrap();
    assert_eq!(store.checkpoint_heights().unwrap(), vec![30, 20]);
    drop(store);

    let (mut recovery, replayed) = recover_counting(dir.path());
    assert_eq!(recovery.checkpoint_height, 30);
    assert_eq!(recovery.replayed_blocks, 5);
    assert_eq!(replayed, 5);
    assert!(recovery.refused_checkpoints.is_empty());
    assert_eq!(recovery.state.height(), BLOCKS);
    assert_eq!(recovery.state.state_root(1), live.state_root(1));
    assert!(
        live.open_offer_count() > 0,
        "the checkpoint should hold offers"
    );
    assert_eq!(recovery.state.open_offer_count(), live.open_offer_count());
}

/// Trigger: one byte of the newest checkpoint (format `/3`, as written now) flipped on disk.
#[test]
fn a_corrupted_newest_checkpoint_is_refused_loudly_and_the_previous_one_used() {
    let dir = TempDir::new("checkpoint-flipped");
    let mut live = chain(dir.path());
    rewrite_checkpoint(dir.path(), 30, |bytes| {
        assert!(bytes.starts_with(b"walras-checkpoint/3"));
        let middle = bytes.len() / 2;
        bytes[middle] ^= 1;
    });
    let (mut recovery, replayed) = recover_counting(dir.path());
    assert_eq!(recovery.refused_checkpoints.len(), 1);
    assert_eq!(recovery.refused_checkpoints[0].height, 30);
    assert!(
        recovery.refused_checkpoints[0].reason.contains("checksum"),
        "{:?}",
        recovery.refused_checkpoints
    );
    assert_eq!(recovery.checkpoint_height, 20);
    assert_eq!(replayed, 15);
    assert_eq!(recovery.state.state_root(1), live.state_root(1));
}

/// Trigger: format `/3` replaced `/2`; a store written before holds `/2` checkpoints, which
/// recovery must still start from (not refuse and replay everything).
#[test]
fn a_v2_checkpoint_written_before_format_3_is_still_recovered_from() {
    let dir = TempDir::new("checkpoint-v2");
    let (store, mut live) = fresh_store_with(dir.path(), &options());
    for _ in 0..3 * INTERVAL_BLOCKS {
        propose_and_append_with_state(&store, &mut live);
    }
    drop(store);
    let v2 = live.encode_checkpoint_v2();
    rewrite_checkpoint(dir.path(), 3 * INTERVAL_BLOCKS, |bytes| *bytes = v2);
    let (mut recovery, replayed) = recover_counting(dir.path());
    assert!(
        recovery.refused_checkpoints.is_empty(),
        "{:?}",
        recovery.refused_checkpoints
    );
    assert_eq!(recovery.checkpoint_height, 3 * INTERVAL_BLOCKS);
    assert_eq!(replayed, 0);
    assert_eq!(recovery.state.state_root(1), live.state_root(1));
}

/// Trigger: well-formed checkpoints stored under the wrong heights (an outside writer, a bad
/// restore): the checksum passes, the state is another one; recovery must fall back to
/// genesis, not start from a different state.
#[test]
fn checkpoints_of_another_state_are_refused_and_recovery_replays_from_genesis() {
    let dir = TempDir::new("checkpoint-swapped");
    let mut live = chain(dir.path());
    let store = BlockStore::open_with(dir.path(), &options()).unwrap();
    let at_20 = store.checkpoint(20).unwrap().unwrap();
    let at_30 = store.checkpoint(30).unwrap().unwrap();
    drop(store);
    rewrite_checkpoint(dir.path(), 30, |bytes| *bytes = at_20);
    rewrite_checkpoint(dir.path(), 20, |bytes| *bytes = at_30);
    let (mut recovery, replayed) = recover_counting(dir.path());
    let refused: Vec<u64> = recovery
        .refused_checkpoints
        .iter()
        .map(|refused| refused.height)
        .collect();
    assert_eq!(refused, vec![30, 20]);
    assert_eq!(recovery.checkpoint_height, 0);
    assert_eq!(replayed, BLOCKS);
    assert_eq!(recovery.state.state_root(1), live.state_root(1));
}

#[test]
fn truncated_checkpoint_bytes_are_refused_without_panicking() {
    let dir = TempDir::new("checkpoint-prefixes");
    let mut live = chain(dir.path());
    let bytes = live.encode_checkpoint();
    let mut decoded = ExchangeState::decode_checkpoint(&bytes, 1).unwrap();
    assert_eq!(decoded.state_root(1), live.state_root(1));
    for length in 0..bytes.len() {
        assert!(ExchangeState::decode_checkpoint(&bytes[..length], 1).is_err());
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(ExchangeState::decode_checkpoint(&longer, 1).is_err());
}

/// Trigger (issue 32): checkpoints came every 1,000 blocks whatever their size, so a node whose
/// newest checkpoint was 142 large blocks (~1.6M transactions) back took 62 s to serve after a
/// restart. Now a block that brings the transactions since the last checkpoint to the
/// transaction interval is checkpointed too, and a restart counts the replayed ones.
#[test]
fn checkpoints_come_by_transactions_as_well_as_by_blocks_and_across_restarts() {
    let by_work = StoreOptions {
        checkpoint_interval_blocks: 1_000,
        // Blocks of common::ACCOUNTS (8) transactions: every 3rd block reaches 20.
        checkpoint_interval_transactions: 20,
        ..StoreOptions::default()
    };
    let dir = TempDir::new("checkpoint-by-work");
    let (store, mut live) = fresh_store_with(dir.path(), &by_work);
    for _ in 0..7 {
        propose_and_append_with_state(&store, &mut live);
    }
    assert_eq!(store.checkpoint_heights().unwrap(), vec![6, 3]);
    drop(store);

    // A restart replays block 7 (8 transactions); two more blocks reach 24 >= 20.
    let store = BlockStore::open_with(dir.path(), &by_work).unwrap();
    let recovery = recover_store_with(&store, &config(), 1, |_, _| {}).unwrap();
    assert_eq!(
        (recovery.checkpoint_height, recovery.replayed_blocks),
        (6, 1)
    );
    let mut state = recovery.state;
    propose_and_append_with_state(&store, &mut state);
    assert_eq!(store.checkpoint_heights().unwrap(), vec![6, 3]);
    propose_and_append_with_state(&store, &mut state);
    assert_eq!(store.checkpoint_heights().unwrap(), vec![9, 6]);
    assert_eq!(state.state_root(1), {
        for _ in 0..2 {
            propose_and_append_with_state_unstored(&mut live);
        }
        live.state_root(1)
    });
}

/// The live state advanced as [`propose_and_append_with_state`] would, without a store.
fn propose_and_append_with_state_unstored(state: &mut ExchangeState) {
    let height = state.height() + 1;
    state
        .propose(common::transactions(height), &config())
        .expect("the workload's blocks clear");
}

/// Checkpoints written by the background thread are the ones the block path would have
/// written (here the writer keeps up: each is done before the next falls due, after waiting),
/// and recovery from them gives the live state.
#[test]
fn background_checkpoints_recover_the_live_state() {
    let dir = TempDir::new("checkpoint-background");
    let background = StoreOptions {
        checkpoint_in_background: true,
        ..options()
    };
    let (store, mut live) = fresh_store_with(dir.path(), &background);
    for _ in 0..BLOCKS {
        propose_and_append_with_state(&store, &mut live);
        store.wait_for_checkpoints();
    }
    assert_eq!(store.checkpoint_heights().unwrap(), vec![30, 20]);
    assert_eq!(store.background_checkpoint_height(), 30);
    assert_eq!(store.checkpoint_failure(), None);
    drop(store);
    let store = BlockStore::open_with(dir.path(), &background).unwrap();
    let mut recovery = recover_store_with(&store, &config(), 1, |_, _| {}).unwrap();
    assert_eq!(recovery.checkpoint_height, 30);
    assert_eq!(recovery.replayed_blocks, 5);
    assert_eq!(recovery.state.state_root(1), live.state_root(1));
}
