//! The per-offer index (`offers`): written in each block's own transaction, it names every
//! block that created, cancelled or traded an offer and every account that used an offer id;
//! a store written before it existed is indexed when opened.

mod common;

use common::{config, fresh_store, offer_creators_of, transactions, TempDir};
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
    let mut fills = BTreeMap::new();
    for height in 1..=BLOCKS {
        let (block, outcome) = state
            .propose(transactions(height), &config())
            .expect("the workload's blocks clear");
        store
            .append_with_results(&block, &outcome.dropped, None, Some(&outcome.fills), state)
            .expect("the next block is appended");
        fills.insert(height, outcome.fills);
    }
    fills
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
    // Indexed once: the stamp is back, and a second open finds the same entries.
    let reopened = BlockStore::open(dir.path()).unwrap();
    assert_eq!(all_touches(&reopened), written);
}

/// What a store of the earlier build looks like: `offers` empty and no `offer_index` stamp.
fn unindex(dir: &std::path::Path) {
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
    let mut txn = env.write_txn().unwrap();
    offers.clear(&mut txn).unwrap();
    assert!(meta.delete(&mut txn, b"offer_index").unwrap());
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
