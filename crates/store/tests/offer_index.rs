//! The per-offer index (`offers`): written in batches of blocks (the newest blocks' entries
//! wait in memory), it names every block that created, cancelled or traded an offer and every
//! account that used an offer id; a store written before it existed is indexed when opened.

mod common;

use common::{fresh_store, offer_creators_of, TempDir};
use heed::types::Bytes;
use heed::{CommitOrAbort, Database, EnvOpenOptions};
use std::collections::BTreeMap;
use walras_engine::{ExchangeState, OfferFill};
use walras_store::{BlockStore, OfferTouch};
use walras_types::{AccountId, AssetId, OfferId, PairId};

const BLOCKS: u64 = 6;

/// Proposes and appends `BLOCKS` blocks with their fills; returns each height's fills.
fn chain_with_fills(
    store: &BlockStore,
    state: &mut ExchangeState,
) -> BTreeMap<u64, Vec<OfferFill>> {
    (1..=BLOCKS)
        .map(|height| (height, common::propose_and_append_with_fills(store, state)))
        .collect()
}

/// Every (account, id) of the workload's blocks with its touches.
fn all_touches(store: &BlockStore) -> BTreeMap<(u64, u64), Vec<(u64, OfferTouch)>> {
    let mut touches = BTreeMap::new();
    for id in 0..=BLOCKS + 1 {
        for account in 0..common::ACCOUNTS + 1 {
            let found = store
                .offer_touches(AccountId(account), OfferId(id))
                .unwrap();
            if !found.is_empty() {
                touches.insert((account, id), found);
            }
        }
    }
    touches
}

#[test]
fn the_offer_index_names_each_offer_s_creating_block_its_trades_and_its_accounts() {
    let dir = TempDir::new("offer-index");
    let (store, mut state) = fresh_store(dir.path());
    let fills = chain_with_fills(&store, &mut state);
    for height in 1..=BLOCKS {
        let creators = offer_creators_of(height);
        assert!(!creators.is_empty(), "block {height} creates offers");
        assert_eq!(
            store.offer_creators(OfferId(height), BLOCKS, 100).unwrap(),
            creators,
            "block {height}"
        );
        // Not yet at the height before it, and listed up to the limit only.
        assert!(store
            .offer_creators(OfferId(height), height - 1, 100)
            .unwrap()
            .is_empty());
        assert_eq!(
            store.offer_creators(OfferId(height), BLOCKS, 1).unwrap(),
            creators[..1]
        );
        for account in 0..common::ACCOUNTS {
            let touches = store
                .offer_touches(AccountId(account), OfferId(height))
                .unwrap();
            let (first_height, first) = touches[0];
            assert_eq!(first_height, height, "account {account}");
            let expected = if creators.contains(&AccountId(account)) {
                OfferTouch::CREATES
            } else {
                OfferTouch::SEQUENCE
            };
            assert!(first.contains(expected), "account {account}: {first:?}");
        }
    }
    let mut traded = 0;
    for (height, fills) in &fills {
        for fill in fills {
            let touches = store.offer_touches(fill.account, fill.offer_id).unwrap();
            assert!(
                touches
                    .iter()
                    .any(|(at, touch)| at == height && touch.contains(OfferTouch::TRADED)),
                "fill {fill:?} of block {height}: {touches:?}"
            );
            traded += 1;
        }
    }
    assert!(traded > 0, "the workload's offers trade");
    assert!(store
        .offer_touches(AccountId(0), OfferId(BLOCKS + 1))
        .unwrap()
        .is_empty());
}

/// Trigger: a store written before the index existed (no `offers` entries, no stamp) opened by
/// this build. Without indexing on open, every offer of its old blocks would be unknown.
#[test]
fn a_store_written_before_the_offer_index_is_indexed_when_opened() {
    let dir = TempDir::new("offer-index-old");
    let (store, mut state) = fresh_store(dir.path());
    chain_with_fills(&store, &mut state);
    let written = all_touches(&store);
    assert!(!written.is_empty());
    drop(store);
    unindex(dir.path());
    {
        let unindexed = BlockStore::open(dir.path()).unwrap();
        assert_eq!(all_touches(&unindexed), written);
        assert_eq!(
            unindexed.offer_creators(OfferId(2), BLOCKS, 100).unwrap(),
            offer_creators_of(2)
        );
    }
    // Indexed once: the watermark is back, and a second open finds the same entries.
    let reopened = BlockStore::open(dir.path()).unwrap();
    assert_eq!(all_touches(&reopened), written);
}

/// Every offer id's creators as `offer_creators` lists them, at each height.
fn all_creators(store: &BlockStore) -> BTreeMap<(u64, u64), Vec<AccountId>> {
    let mut creators = BTreeMap::new();
    for id in 0..=BLOCKS + 1 {
        for through in 0..=BLOCKS {
            creators.insert(
                (id, through),
                store.offer_creators(OfferId(id), through, 100).unwrap(),
            );
        }
    }
    creators
}

/// What the index answers: every (account, id)'s touches and every (id, height)'s creators.
type Answers = (
    BTreeMap<(u64, u64), Vec<(u64, OfferTouch)>>,
    BTreeMap<(u64, u64), Vec<AccountId>>,
);

/// The index's answers after each block of the workload, for a store writing its batches every
/// `flush_blocks` blocks; the store is dropped and reopened after block `reopen_after` (a
/// crash, as far as the entries held in memory go).
fn answers_after_each_block(flush_blocks: u64, reopen_after: Option<u64>) -> Vec<Answers> {
    let dir = TempDir::new("offer-index-batches");
    let options = walras_store::StoreOptions {
        offer_index_flush_blocks: flush_blocks,
        ..walras_store::StoreOptions::default()
    };
    let (mut store, mut state) = common::fresh_store_with(dir.path(), &options);
    let mut answers = Vec::new();
    for height in 1..=BLOCKS {
        common::propose_and_append_with_fills(&store, &mut state);
        if reopen_after == Some(height) {
            drop(store);
            store = BlockStore::open_with(dir.path(), &options).unwrap();
        }
        answers.push((all_touches(&store), all_creators(&store)));
    }
    answers
}

/// Trigger: the index's entries held in memory between its batches. A reader that looked in
/// the table alone would miss the newest blocks' offers; one that read both around a batch
/// would list its entries twice. Every batch size answers as a store writing each block's
/// entries with it (a batch of one), after every block.
#[test]
fn the_offer_index_answers_the_same_whatever_its_batch_size() {
    let each_block = answers_after_each_block(1, None);
    assert!(each_block.iter().all(|(touches, _)| !touches.is_empty()));
    for flush_blocks in [2, 4, 7] {
        assert!(
            answers_after_each_block(flush_blocks, None) == each_block,
            "batches of {flush_blocks} blocks"
        );
    }
}

/// Trigger: a crash (here, the store dropped) while blocks' entries wait for their batch: the
/// store opened again derives them from its blocks, and names no block twice.
#[test]
fn a_reopened_store_names_the_offers_of_the_blocks_its_last_batch_had_not_written() {
    let each_block = answers_after_each_block(1, None);
    for (flush_blocks, reopen_after) in [(4, 6), (4, 4), (4, 3), (7, 5), (2, 1)] {
        assert!(
            answers_after_each_block(flush_blocks, Some(reopen_after)) == each_block,
            "batches of {flush_blocks} blocks, reopened after block {reopen_after}"
        );
    }
}

/// Every (key, value) of a store's `offers` table (no store may be open on `dir`).
fn table_entries(dir: &std::path::Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let (offers, _, env) = raw_tables(dir);
    let txn = env.read_txn().unwrap();
    let entries = offers
        .iter(&txn)
        .unwrap()
        .map(|entry| {
            let (key, value) = entry.unwrap();
            (key.to_vec(), value.to_vec())
        })
        .collect();
    entries
}

/// The slices are what the table holds (and what memory holds is the rest, as its gauge
/// counts): with 4 slices, block h writes the entries of the
/// offer ids i with i mod 4 = h mod 4. After 6 blocks, slice 0 was written by block 4, 1 by
/// 5, 2 by 6 and 3 by 3: the table holds those slices' entries up to those blocks and no
/// later ones, and the watermark is 3 (every entry of blocks 1-3 is in).
#[test]
fn the_offer_index_table_holds_each_slice_up_to_the_block_that_wrote_it() {
    let each_block = TempDir::new("offer-index-each-block");
    let one = walras_store::StoreOptions {
        offer_index_flush_blocks: 1,
        ..walras_store::StoreOptions::default()
    };
    let (store, mut state) = common::fresh_store_with(each_block.path(), &one);
    chain_with_fills(&store, &mut state);
    drop(store);
    let every_entry = table_entries(each_block.path());
    let every_entry_count = every_entry.len();
    let dir = TempDir::new("offer-index-slices");
    let options = walras_store::StoreOptions {
        offer_index_flush_blocks: 4,
        ..walras_store::StoreOptions::default()
    };
    let (store, mut state) = common::fresh_store_with(dir.path(), &options);
    chain_with_fills(&store, &mut state);
    let pending = store.offer_index_pending_entries();
    drop(store);
    let written_at = [4u64, 5, 6, 3];
    let word = |key: &[u8], at: usize| u64::from_be_bytes(key[at..at + 8].try_into().unwrap());
    let expected: BTreeMap<Vec<u8>, Vec<u8>> = every_entry
        .into_iter()
        .filter(|(key, _)| word(key, 16) <= written_at[(word(key, 0) % 4) as usize])
        .collect();
    assert!(expected.len() > 10);
    // The memory gauge counts what the table does not hold yet.
    assert_eq!(pending, every_entry_count - expected.len());
    assert!(pending > 0);
    assert_eq!(table_entries(dir.path()), expected);
    let (_, meta, env) = raw_tables(dir.path());
    let txn = env.read_txn().unwrap();
    let through = meta.get(&txn, b"offer_index_through").unwrap().unwrap();
    assert_eq!(through, 3u64.to_be_bytes());
}

/// Trigger: a store stamped by a build before the slices (`offer_index` in `meta`: every stored
/// block in the table), with no watermark (written by such a build) or a stale one (one of
/// this build that such a build opened, and indexed again). Opened with a watermark of 0 or
/// the stale one, every open would derive the blocks above it again (a restart that grows with
/// the history); it gets its tip as watermark, loses the old stamp (so that such a build
/// indexes it again rather than trust a table without the newest blocks), lists each entry
/// once, and later blocks go to slices as usual.
#[test]
fn a_store_stamped_by_a_build_before_the_slices_gets_its_tip_as_watermark() {
    for stale_watermark in [None, Some(1u64)] {
        let dir = TempDir::new("offer-index-stamped");
        let options = walras_store::StoreOptions {
            offer_index_flush_blocks: 1,
            ..walras_store::StoreOptions::default()
        };
        let (store, mut state) = common::fresh_store_with(dir.path(), &options);
        let mut appended = 0u64;
        for _ in 0..BLOCKS - 2 {
            common::propose_and_append_with_state(&store, &mut state);
            appended += 1;
        }
        drop(store);
        {
            let (_, meta, env) = raw_tables(dir.path());
            let mut txn = env.write_txn().unwrap();
            match stale_watermark {
                None => assert!(meta.delete(&mut txn, b"offer_index_through").unwrap()),
                Some(height) => meta
                    .put(&mut txn, b"offer_index_through", &height.to_be_bytes())
                    .unwrap(),
            }
            meta.put(&mut txn, b"offer_index", &[]).unwrap();
            txn.commit().unwrap();
        }
        let batched = walras_store::StoreOptions {
            offer_index_flush_blocks: 3,
            ..walras_store::StoreOptions::default()
        };
        drop(BlockStore::open_with(dir.path(), &batched).unwrap());
        {
            let (_, meta, env) = raw_tables(dir.path());
            let txn = env.read_txn().unwrap();
            let through = meta.get(&txn, b"offer_index_through").unwrap().unwrap();
            assert_eq!(through, appended.to_be_bytes(), "the tip at the open");
            assert!(meta.get(&txn, b"offer_index").unwrap().is_none());
        }
        let store = BlockStore::open_with(dir.path(), &batched).unwrap();
        for height in appended + 1..=BLOCKS {
            common::propose_and_append_with_state(&store, &mut state);
            assert_eq!(state.height(), height);
        }
        for height in 1..=BLOCKS {
            assert_eq!(
                store.offer_creators(OfferId(height), BLOCKS, 100).unwrap(),
                offer_creators_of(height),
                "block {height}"
            );
            for account in 0..common::ACCOUNTS {
                let touches = store
                    .offer_touches(AccountId(account), OfferId(height))
                    .unwrap();
                let heights: Vec<u64> = touches.iter().map(|(at, _)| *at).collect();
                let mut unique = heights.clone();
                unique.dedup();
                assert_eq!(
                    heights, unique,
                    "account {account}, id {height}: listed once"
                );
                assert_eq!(heights.first(), Some(&height), "account {account}");
            }
        }
    }
}

/// The store's `offers` and `meta` databases opened raw (no store may be open on `dir`).
fn raw_tables(
    dir: &std::path::Path,
) -> (
    Database<'static, Bytes, Bytes>,
    Database<'static, Bytes, Bytes>,
    heed::Env,
) {
    // SAFETY: no store is open on this directory; nothing else maps the file.
    let env = unsafe { EnvOpenOptions::new().max_dbs(8).open(dir) }.unwrap();
    let opening = env.write_txn().unwrap();
    let [offers, meta]: [Database<'static, Bytes, Bytes>; 2] = env
        .create_databases_and_commit(opening, |opener, txn| {
            let offers = opener.create_database(txn, Some("offers"))?;
            let meta = opener.create_database(txn, Some("meta"))?;
            Ok::<_, heed::Error>(CommitOrAbort::<_, ()>::Commit([offers, meta]))
        })
        .unwrap()
        .unwrap_commit();
    (offers, meta, env)
}

/// What a store of a build before the index looks like: `offers` empty, no stamp, no
/// watermark.
fn unindex(dir: &std::path::Path) {
    let (offers, meta, env) = raw_tables(dir);
    let mut txn = env.write_txn().unwrap();
    offers.clear(&mut txn).unwrap();
    assert!(meta.get(&txn, b"offer_index").unwrap().is_none());
    assert!(meta.delete(&mut txn, b"offer_index_through").unwrap());
    txn.commit().unwrap();
    let txn = env.read_txn().unwrap();
    assert!(offers.is_empty(&txn).unwrap());
}

/// A book snapshot is the state's book after its block, found from any later height; before
/// the first one the books are those before block 1 (empty). Trigger: a snapshot taken before
/// the block's trades, or found at the height asked (the replay would apply that block twice).
#[test]
fn the_book_snapshot_below_a_height_is_the_state_s_book_after_its_block() {
    let dir = TempDir::new("book-snapshots");
    let options = walras_store::StoreOptions {
        book_snapshot_interval_blocks: 2,
        ..walras_store::StoreOptions::default()
    };
    let (store, mut state) = common::fresh_store_with(dir.path(), &options);
    let pairs: Vec<PairId> = (0..common::ASSETS)
        .flat_map(|sell| {
            (0..common::ASSETS)
                .filter(move |buy| *buy != sell)
                .map(move |buy| PairId {
                    sell: AssetId(sell),
                    buy: AssetId(buy),
                })
        })
        .collect();
    let mut after = vec![vec![std::collections::BTreeMap::new(); pairs.len()]];
    for _ in 0..BLOCKS {
        common::propose_and_append_with_state(&store, &mut state);
        after.push(
            pairs
                .iter()
                .map(|pair| state.book(*pair).iter().collect())
                .collect(),
        );
    }
    let mut nonempty = 0;
    for height in 1..=BLOCKS + 1 {
        let expected_height = (height - 1) / 2 * 2;
        for (index, pair) in pairs.iter().enumerate() {
            let (found_height, book) = store.pair_book_before(height, *pair).unwrap();
            assert_eq!(found_height, expected_height, "below {height}");
            assert_eq!(
                book, after[expected_height as usize][index],
                "below {height}"
            );
            nonempty += usize::from(!book.is_empty());
        }
    }
    assert!(nonempty > 0, "the workload leaves offers open");
}
