//! Bad input: a block record corrupted on disk (rewritten through LMDB directly, as a failing
//! disk or an outside writer would) makes `recover` fail with an error naming its height, never
//! a shorter chain; a block that does not extend the log is refused and changes nothing.

mod common;

use common::{config, fresh_store, propose_and_append, TempDir};
use heed::types::Bytes;
use heed::{CommitOrAbort, Database, EnvOpenOptions};
use std::path::Path;
use walras_crypto::Hash;
use walras_store::{recover, StoreError};

/// Stores three blocks, then lets `corrupt` rewrite the bytes of block 2.
fn store_with_corrupt_block_2(dir: &Path, corrupt: impl FnOnce(&mut Vec<u8>)) {
    let (store, mut state) = fresh_store(dir);
    for _ in 0..3 {
        propose_and_append(&store, &mut state);
    }
    drop(store);
    // SAFETY: the store above is closed; nothing else maps this file.
    let env = unsafe { EnvOpenOptions::new().max_dbs(3).open(dir) }.unwrap();
    let opening = env.write_txn().unwrap();
    let blocks: Database<'static, Bytes, Bytes> = env
        .create_databases_and_commit(opening, |opener, txn| {
            let blocks = opener.create_database(txn, Some("blocks"))?;
            Ok::<_, heed::Error>(CommitOrAbort::<_, ()>::Commit(blocks))
        })
        .unwrap()
        .unwrap_commit();
    let mut txn = env.write_txn().unwrap();
    let key = 2u64.to_be_bytes();
    let mut bytes = blocks.get(&txn, &key).unwrap().unwrap().to_vec();
    corrupt(&mut bytes);
    blocks.put(&mut txn, &key, &bytes).unwrap();
    txn.commit().unwrap();
}

#[test]
fn recover_names_the_height_of_a_truncated_block() {
    let dir = TempDir::new("truncated");
    store_with_corrupt_block_2(dir.path(), |bytes| bytes.truncate(bytes.len() / 2));
    let error = recover(dir.path(), &config(), 1).err().unwrap();
    assert!(
        matches!(error, StoreError::CorruptBlock { height: 2, .. }),
        "{error}"
    );
    assert!(error.to_string().contains("block 2"), "{error}");
}

#[test]
fn recover_names_the_height_of_a_block_with_a_flipped_byte() {
    let dir = TempDir::new("flipped");
    // The last byte belongs to the last transaction's signature: the block still decodes, so
    // the replay must catch it.
    store_with_corrupt_block_2(dir.path(), |bytes| *bytes.last_mut().unwrap() ^= 1);
    let error = recover(dir.path(), &config(), 1).err().unwrap();
    assert!(
        matches!(error, StoreError::Replay { height: 2, .. }),
        "{error}"
    );
}

#[test]
fn append_refuses_a_block_that_does_not_extend_the_log() {
    let dir = TempDir::new("refuse");
    let (store, mut state) = fresh_store(dir.path());
    propose_and_append(&store, &mut state);
    let (next, _) = state.propose(common::transactions(2), &config()).unwrap();

    let mut skipping = next.clone();
    skipping.header.height = 3;
    let error = store.append(&skipping, &[]).err().unwrap();
    assert!(
        matches!(
            error,
            StoreError::HeightNotNext {
                expected: 2,
                found: 3
            }
        ),
        "{error}"
    );
    let mut forked = next.clone();
    forked.header.previous = Hash([9; 32]);
    let error = store.append(&forked, &[]).err().unwrap();
    assert!(
        matches!(error, StoreError::PreviousMismatch { height: 2 }),
        "{error}"
    );
    let replayed = store.block(1).unwrap().unwrap();
    assert!(matches!(
        store.append(&replayed, &[]),
        Err(StoreError::HeightNotNext {
            expected: 2,
            found: 1
        })
    ));

    assert_eq!(store.last_height().unwrap(), 1);
    assert_eq!(store.block(2).unwrap(), None);
    assert_eq!(store.header_entry(2).unwrap(), None);
    assert_eq!(store.header_entry(3).unwrap(), None);
    store.append(&next, &[]).unwrap();
    drop(store);
    let (_, mut recovered) = recover(dir.path(), &config(), 1).unwrap();
    assert_eq!(recovered.state_root(1), state.state_root(1));
}
