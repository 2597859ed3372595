//! Checkpoints bound restart time: recovery starts from the newest stored checkpoint whose
//! rebuilt state root equals the stored header's, and replays only the blocks after it. A
//! damaged checkpoint is never used: recovery falls back to the one before it (or genesis) and
//! reports each refusal, so the node can say so.

mod common;

use common::{
    config, fresh_store_with, propose_and_append, propose_and_append_with_state, TempDir,
};
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
    rewrite_checkpoint(dir.path(), 30, |bytes| flip_a_middle_byte(bytes));
    let (recovery, replayed) = recover_counting(dir.path());
    assert_eq!(replayed, 15);
    assert_the_newest_was_refused_by_its_checksum(recovery, &mut live);
}

/// Flips one bit in the middle of `/3` checkpoint bytes, as a failing disk would.
fn flip_a_middle_byte(bytes: &mut [u8]) {
    assert!(bytes.starts_with(b"walras-checkpoint/3"));
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
}

/// Recovery refused the checkpoint at 30 for its checksum, started from the one at 20 and
/// replayed the 15 blocks after it to the live state.
fn assert_the_newest_was_refused_by_its_checksum(mut recovery: Recovery, live: &mut ExchangeState) {
    assert_eq!(recovery.refused_checkpoints.len(), 1);
    assert_eq!(recovery.refused_checkpoints[0].height, 30);
    assert!(
        recovery.refused_checkpoints[0].reason.contains("checksum"),
        "{:?}",
        recovery.refused_checkpoints
    );
    assert_eq!(recovery.checkpoint_height, 20);
    assert_eq!(recovery.replayed_blocks, 15);
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
    assert_eq!(
        store.checkpoint_buffer_bytes(),
        0,
        "no checkpoint written yet"
    );
    for _ in 0..BLOCKS {
        propose_and_append_with_state(&store, &mut live);
        store.wait_for_checkpoints();
    }
    assert_eq!(store.checkpoint_heights().unwrap(), vec![30, 20]);
    assert_eq!(store.background_checkpoint_height(), 30);
    assert_eq!(store.checkpoint_failure(), None);
    // The writer's kept buffer holds at least the last checkpoint's bytes (for the node's
    // memory gauges).
    let newest = store.checkpoint(30).unwrap().expect("checkpoint 30");
    assert!(store.checkpoint_buffer_bytes() >= newest.len() as u64);
    drop(store);
    let store = BlockStore::open_with(dir.path(), &background).unwrap();
    let mut recovery = recover_store_with(&store, &config(), 1, |_, _| {}).unwrap();
    assert_eq!(recovery.checkpoint_height, 30);
    assert_eq!(recovery.replayed_blocks, 5);
    assert_eq!(recovery.state.state_root(1), live.state_root(1));
}

fn background_options() -> StoreOptions {
    StoreOptions {
        checkpoint_in_background: true,
        ..options()
    }
}

/// The checkpoint files of the store in `dir`, by name, ascending.
fn checkpoint_file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("checkpoints"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// Background checkpoints are files beside `data.mdb` (the writer takes no lock the block
/// path needs); a flipped byte in the newest is refused by its checksum and the one before it
/// is used, as for checkpoints in LMDB.
#[test]
fn a_damaged_checkpoint_file_is_refused_loudly_and_the_previous_one_used() {
    let dir = TempDir::new("checkpoint-file-flipped");
    let (store, mut live) = fresh_store_with(dir.path(), &background_options());
    for _ in 0..BLOCKS {
        propose_and_append_with_state(&store, &mut live);
        store.wait_for_checkpoints();
    }
    assert!(store.checkpoint_file_bytes() > 0);
    drop(store);
    // The oldest is kept as the spare that the next checkpoint is written over.
    assert_eq!(
        checkpoint_file_names(dir.path()),
        vec![
            "00000000000000000020.ckpt",
            "00000000000000000030.ckpt",
            "spare.ckpt.old"
        ]
    );
    let newest = dir.path().join("checkpoints/00000000000000000030.ckpt");
    let mut bytes = std::fs::read(&newest).unwrap();
    flip_a_middle_byte(&mut bytes);
    std::fs::write(&newest, &bytes).unwrap();
    let store = BlockStore::open_with(dir.path(), &background_options()).unwrap();
    let recovery = recover_store_with(&store, &config(), 1, |_, _| {}).unwrap();
    assert_the_newest_was_refused_by_its_checksum(recovery, &mut live);
}

/// Trigger: a crash while a checkpoint file is written leaves a partial `….ckpt.tmp`. It must
/// never be taken for a checkpoint (here it is the newest height, and garbage), and the next
/// writer removes it.
#[test]
fn a_partial_checkpoint_file_left_by_a_crash_is_never_loaded_and_is_removed() {
    let dir = TempDir::new("checkpoint-file-partial");
    let (store, mut live) = fresh_store_with(dir.path(), &background_options());
    for _ in 0..25 {
        propose_and_append_with_state(&store, &mut live);
        store.wait_for_checkpoints();
    }
    drop(store);
    let partial = dir.path().join("checkpoints/00000000000000000025.ckpt.tmp");
    std::fs::write(&partial, b"walras-checkpoint/3 torn").unwrap();
    let store = BlockStore::open_with(dir.path(), &background_options()).unwrap();
    assert_eq!(store.checkpoint_heights().unwrap(), vec![20, 10]);
    let mut recovery = recover_store_with(&store, &config(), 1, |_, _| {}).unwrap();
    assert!(recovery.refused_checkpoints.is_empty());
    assert_eq!(recovery.checkpoint_height, 20);
    assert_eq!(recovery.state.state_root(1), live.state_root(1));
    store.wait_for_checkpoints();
    let mut state = recovery.state;
    for _ in 0..5 {
        propose_and_append_with_state(&store, &mut state);
        store.wait_for_checkpoints();
    }
    assert_eq!(store.checkpoint_failure(), None);
    assert!(!partial.exists(), "the writer left the partial file");
    assert_eq!(
        checkpoint_file_names(dir.path()),
        vec![
            "00000000000000000020.ckpt",
            "00000000000000000030.ckpt",
            "spare.ckpt.old"
        ]
    );
}

/// Trigger: checkpoints moved from LMDB to files. A store whose checkpoints are in LMDB (the
/// block's own transaction, or a build before files) recovers from them; once two files
/// exist, the LMDB ones (older) are deleted so they do not take space for ever.
#[test]
fn checkpoints_left_in_lmdb_are_used_until_files_replace_them() {
    let dir = TempDir::new("checkpoint-lmdb-to-files");
    let mut live = chain(dir.path());
    let store = BlockStore::open_with(dir.path(), &background_options()).unwrap();
    let recovery = recover_store_with(&store, &config(), 1, |_, _| {}).unwrap();
    assert_eq!(recovery.checkpoint_height, 30);
    let mut state = recovery.state;
    for height in BLOCKS + 1..=50 {
        propose_and_append_with_state(&store, &mut state);
        store.wait_for_checkpoints();
        let expected = match height {
            36..=39 => vec![30, 20],
            40..=49 => vec![40, 30, 20],
            _ => vec![50, 40],
        };
        assert_eq!(store.checkpoint_heights().unwrap(), expected, "{height}");
    }
    assert_eq!(store.checkpoint_failure(), None);
    drop(store);
    let store = BlockStore::open_with(dir.path(), &background_options()).unwrap();
    let mut recovery = recover_store_with(&store, &config(), 1, |_, _| {}).unwrap();
    assert_eq!(recovery.checkpoint_height, 50);
    for _ in BLOCKS..50 {
        propose_and_append_with_state_unstored(&mut live);
    }
    assert_eq!(recovery.state.state_root(1), live.state_root(1));
}

/// [`common::genesis`] and accounts that never sign up to three account pieces: the blocks
/// of the workload touch only the first piece, so a draft copies the others from the last
/// checkpoint file.
fn genesis_of_three_pieces() -> walras_types::genesis::Genesis {
    let mut genesis = common::genesis();
    let signers = genesis.accounts.len() as u64;
    let quiet = 3 * walras_engine::PIECE_ACCOUNTS as u64 - 7 - signers;
    genesis
        .accounts
        .extend((0..quiet).map(|n| walras_types::genesis::GenesisAccount {
            id: walras_types::AccountId(1_000 + n),
            public_key: [(n % 200) as u8 + 1; 32],
            balances: vec![(walras_types::AssetId(0), 1 + n)],
        }));
    genesis
}

/// Background checkpoints are drafted against the last file (only the account pieces a block
/// touched are encoded on the block path) and every file is byte for byte the whole
/// checkpoint of its state; when the file a draft was made against is gone, that checkpoint
/// is refused loudly and the next one is written whole, and right.
#[test]
fn drafted_checkpoints_are_the_whole_checkpoints_of_their_states() {
    let dir = TempDir::new("checkpoint-drafts");
    let every_block = StoreOptions {
        checkpoint_interval_blocks: 1,
        checkpoint_in_background: true,
        ..StoreOptions::default()
    };
    let genesis = genesis_of_three_pieces();
    let store = BlockStore::create_with(dir.path(), &genesis, &[], &every_block).unwrap();
    let mut live = ExchangeState::from_genesis(&genesis, 1).unwrap();
    for height in 1..=8u64 {
        if height == 5 {
            // The base of the next draft (height 4's file) vanishes.
            std::fs::remove_file(dir.path().join("checkpoints/00000000000000000004.ckpt")).unwrap();
        }
        propose_and_append_with_state(&store, &mut live);
        store.wait_for_checkpoints();
        let stored = store.checkpoint(height).unwrap();
        if height == 5 {
            assert_eq!(stored, None);
            let failure = store.checkpoint_failure().expect("the refusal is reported");
            assert!(failure.contains("height 5"), "{failure}");
            continue;
        }
        assert_eq!(
            stored.as_deref(),
            Some(&live.encode_checkpoint()[..]),
            "checkpoint at height {height}"
        );
    }
    assert_eq!(store.draft_base_height(), Some(8));
    drop(store);
    // A restart takes the file it loads as the next draft's base (two blocks are replayed
    // after it first), so the first checkpoint after it is drafted too, and right.
    let store = BlockStore::open_with(dir.path(), &every_block).unwrap();
    for _ in 0..2 {
        propose_and_append(&store, &mut live);
    }
    drop(store);
    let store = BlockStore::open_with(dir.path(), &every_block).unwrap();
    assert_eq!(store.draft_base_height(), None);
    let recovery = recover_store_with(&store, &config(), 2, |_, _| {}).unwrap();
    assert_eq!(
        (recovery.checkpoint_height, recovery.replayed_blocks),
        (8, 2)
    );
    assert_eq!(store.draft_base_height(), Some(8));
    let mut state = recovery.state;
    propose_and_append_with_state(&store, &mut state);
    store.wait_for_checkpoints();
    propose_and_append_with_state_unstored(&mut live);
    assert_eq!(store.draft_base_height(), Some(11));
    assert_eq!(
        store.checkpoint(11).unwrap().as_deref(),
        Some(&live.encode_checkpoint()[..]),
        "the first checkpoint after the restart"
    );
    assert_eq!(state.state_root(1), live.state_root(1));
}

/// Under a light load neither the block nor the transaction interval comes for a long while
/// (1,000 blocks, 100,000 transactions), so the newest checkpoint could be hours old: the first
/// block appended `checkpoint_interval_seconds` after the last checkpoint is checkpointed, and
/// the clock starts again from it.
#[test]
fn a_block_appended_an_interval_after_the_last_checkpoint_is_checkpointed() {
    let by_time = StoreOptions {
        checkpoint_interval_blocks: 1_000,
        checkpoint_interval_transactions: 1_000_000,
        checkpoint_interval_seconds: 2,
        ..StoreOptions::default()
    };
    let dir = TempDir::new("checkpoint-by-time");
    let (store, mut live) = fresh_store_with(dir.path(), &by_time);
    propose_and_append_with_state(&store, &mut live);
    std::thread::sleep(std::time::Duration::from_millis(2_100));
    propose_and_append_with_state(&store, &mut live);
    propose_and_append_with_state(&store, &mut live);
    assert_eq!(
        store.checkpoint_heights().unwrap().first(),
        Some(&2),
        "block 2 came two seconds after the last checkpoint, block 3 right after block 2's"
    );
}
