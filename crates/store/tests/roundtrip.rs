//! Round trip: blocks proposed by a live exchange and appended to a store come back from
//! `recover` as the same chain: same height, same state root, same blocks, and the store keeps
//! accepting blocks after reopening. Also checks what `open` and `create` refuse.

mod common;

use common::{config, fresh_store, genesis, propose_and_append, TempDir};
use walras_engine::DropReason;
use walras_store::{recover, BlockStore, StoreError};

#[test]
fn recover_rebuilds_the_live_state_from_five_blocks() {
    let dir = TempDir::new("roundtrip");
    let (store, mut live) = fresh_store(dir.path());
    let mut proposed = Vec::new();
    for _ in 0..5 {
        proposed.push(propose_and_append(&store, &mut live));
    }
    assert_eq!(store.last_height().unwrap(), 5);
    assert!(
        proposed.iter().any(|block| !block.header.trades.is_empty()),
        "the workload should make offers trade"
    );
    drop(store);

    let (store, mut recovered) = recover(dir.path(), &config(), 1).unwrap();
    assert_eq!(recovered.height(), 5);
    assert_eq!(recovered.state_root(1), live.state_root(1));
    assert_eq!(store.genesis().unwrap(), genesis());
    let stored: Vec<_> = store.blocks_from(1).collect::<Result<_, _>>().unwrap();
    assert_eq!(stored, proposed);
    assert_eq!(store.block(3).unwrap().as_ref(), Some(&proposed[2]));
    assert_eq!(store.block(6).unwrap(), None);
    let entry = store.header_entry(5).unwrap().unwrap();
    assert_eq!(entry.state_root, proposed[4].header.state_root);
    assert_eq!(entry.header_hash, proposed[4].header.hash());

    let next = propose_and_append(&store, &mut recovered);
    assert_eq!(next.header.height, 6);
    assert_eq!(store.last_height().unwrap(), 6);
}

#[test]
fn create_refuses_a_directory_that_already_holds_a_store() {
    let dir = TempDir::new("genesis");
    let (store, _) = fresh_store(dir.path());
    drop(store);
    let mut other = genesis();
    other.accounts.pop();
    let error = BlockStore::create(dir.path(), &other).err().unwrap();
    assert!(matches!(error, StoreError::AlreadyExists { .. }), "{error}");
    let error = BlockStore::create(dir.path(), &genesis()).err().unwrap();
    assert!(matches!(error, StoreError::AlreadyExists { .. }), "{error}");
    assert_eq!(
        BlockStore::open(dir.path()).unwrap().genesis().unwrap(),
        genesis()
    );
}

#[test]
fn open_refuses_a_directory_without_a_store_and_creates_nothing() {
    let dir = TempDir::new("no-store");
    let error = BlockStore::open(dir.path()).err().unwrap();
    assert!(matches!(error, StoreError::NoStore { .. }), "{error}");
    assert!(!dir.path().exists());
    assert!(matches!(
        recover(dir.path(), &config(), 1),
        Err(StoreError::NoStore { .. })
    ));
}

#[test]
fn open_refuses_a_directory_of_other_files() {
    let dir = TempDir::new("foreign");
    std::fs::create_dir_all(dir.path()).unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"not a store").unwrap();
    let error = BlockStore::create(dir.path(), &genesis()).err().unwrap();
    assert!(matches!(error, StoreError::NotAStore { .. }), "{error}");
    assert!(!dir.path().join("data.mdb").exists());
}

#[test]
fn open_refuses_a_data_file_that_is_not_lmdb() {
    let dir = TempDir::new("garbage");
    std::fs::create_dir_all(dir.path()).unwrap();
    std::fs::write(dir.path().join("data.mdb"), vec![0xA5; 64 * 1024]).unwrap();
    let error = BlockStore::open(dir.path()).err().unwrap();
    assert!(matches!(error, StoreError::NotAStore { .. }), "{error}");
}

#[test]
fn block_results_and_app_metadata_survive_reopening() {
    let dir = TempDir::new("results");
    let (store, mut live) = fresh_store(dir.path());
    let height = live.height() + 1;
    let (block, _) = live
        .propose(common::transactions(height), &config())
        .unwrap();
    // Every reason, so each code round-trips; the store does not interpret the list.
    let dropped: Vec<(u32, DropReason)> = DropReason::ALL
        .iter()
        .enumerate()
        .map(|(index, reason)| (index as u32 * 7, *reason))
        .collect();
    store.append(&block, &dropped).unwrap();
    store
        .put_app_meta("genesis", b"not the store's genesis")
        .unwrap();
    drop(store);

    let store = BlockStore::open(dir.path()).unwrap();
    assert_eq!(store.dropped(1).unwrap(), Some(dropped));
    assert_eq!(store.dropped(2).unwrap(), None);
    assert_eq!(
        store.app_meta("genesis").unwrap().as_deref(),
        Some(&b"not the store's genesis"[..])
    );
    assert_eq!(store.app_meta("missing").unwrap(), None);
    assert_eq!(
        store.genesis().unwrap(),
        genesis(),
        "application keys live apart from the store's own"
    );
}
