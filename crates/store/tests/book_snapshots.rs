//! Book snapshots written off the block path, as files (a node's store: background mode).

mod common;

use common::{fresh_store_with, propose_and_append_with_fills, TempDir};
use std::collections::BTreeMap;
use walras_engine::ExchangeState;
use walras_store::{BlockStore, StoreError, StoreOptions};
use walras_types::{AssetId, OfferKey, PairId};

fn background(book_snapshot_interval_blocks: u64) -> StoreOptions {
    StoreOptions {
        checkpoint_in_background: true,
        book_snapshot_interval_blocks,
        ..StoreOptions::default()
    }
}

fn pairs() -> Vec<PairId> {
    let assets = common::ASSETS;
    (0..assets)
        .flat_map(|sell| {
            (0..assets)
                .filter(move |buy| *buy != sell)
                .map(move |buy| PairId {
                    sell: AssetId(sell),
                    buy: AssetId(buy),
                })
        })
        .collect()
}

/// Every pair's book of `state`.
fn books_of(state: &ExchangeState) -> BTreeMap<PairId, BTreeMap<OfferKey, u64>> {
    pairs()
        .into_iter()
        .map(|pair| (pair, state.book(pair).iter().collect()))
        .collect()
}

/// `blocks` blocks of the shared workload on a fresh background store; the books after each.
fn run(
    dir: &TempDir,
    options: &StoreOptions,
    blocks: u64,
) -> Vec<BTreeMap<PairId, BTreeMap<OfferKey, u64>>> {
    let (store, mut state) = fresh_store_with(dir.path(), options);
    let mut books = vec![books_of(&state)];
    for _ in 1..=blocks {
        propose_and_append_with_fills(&store, &mut state);
        books.push(books_of(&state));
    }
    books
}

/// Reads every pair's book below `height` back from `store` and checks it is the state's book
/// after block `snapshot`, from the snapshot taken there; returns how many hold offers.
fn assert_books_before(
    store: &BlockStore,
    height: u64,
    snapshot: u64,
    books: &[BTreeMap<PairId, BTreeMap<OfferKey, u64>>],
) -> usize {
    let mut open = 0;
    for pair in pairs() {
        let (at, book) = store.pair_book_before(height, pair).unwrap();
        assert_eq!(at, snapshot, "snapshot below {height}");
        assert_eq!(
            book, books[snapshot as usize][&pair],
            "pair {pair:?} before {height}"
        );
        open += usize::from(!book.is_empty());
    }
    open
}

fn snapshot_files(dir: &TempDir) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.path().join("books"))
        .map(|entries| {
            entries
                .map(|entry| entry.unwrap().file_name().into_string().unwrap())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Trigger: book snapshots moved from the block's LMDB transaction to files the store's
/// book thread writes from the carried clearing books and their fills. Every pair's book
/// read back for any height is the state's book after the newest snapshot below it, byte
/// for byte (offers filled in part at their remaining amount, closed ones gone).
#[test]
fn book_snapshots_written_off_the_block_path_are_the_books_of_their_heights() {
    let dir = TempDir::new("book-snapshots");
    let options = background(3);
    let books = run(&dir, &options, 10);
    let store = BlockStore::open_with(dir.path(), &options).unwrap();
    assert_eq!(
        snapshot_files(&dir),
        vec![
            "00000000000000000003.books",
            "00000000000000000006.books",
            "00000000000000000009.books"
        ]
    );
    let mut open_books = 0;
    for height in 1..=11u64 {
        open_books += assert_books_before(&store, height, (height - 1) / 3 * 3, &books);
    }
    assert!(
        open_books > 20,
        "the workload leaves offers open: {open_books}"
    );
}

/// Trigger: every book snapshot file was kept forever (one every 1,024 blocks, 400 MB each at
/// 10M open offers), so a node under load for weeks filled its disk with them. The book thread
/// now thins the older files after each write: with a snapshot every block, 40 blocks leave
/// far fewer than 40 files, the newest kept, every file one the rule keeps, and every height's
/// book read back is still the state's book at the file it starts from.
#[test]
fn a_long_chain_keeps_few_book_snapshot_files_and_each_still_reads_its_height() {
    let dir = TempDir::new("book-snapshots-thinned");
    let options = background(1);
    let blocks = 40;
    let books = run(&dir, &options, blocks);
    let heights: Vec<u64> = snapshot_files(&dir)
        .iter()
        .map(|name| name.trim_end_matches(".books").parse().unwrap())
        .collect();
    assert!(
        heights.len() < 24,
        "{} files kept of {blocks} snapshots: {heights:?}",
        heights.len()
    );
    // The thread writes what was queued before the store's drop returns; two may wait, so
    // a late one may be skipped, never one of the middle of the chain thinned wrongly.
    let newest = *heights.last().unwrap();
    assert!(
        newest + 2 >= blocks,
        "the newest snapshot is kept: {heights:?}"
    );
    // The rule, from its documentation: a file stays when its height (in intervals) is a
    // multiple of the largest power of two at most its age over 4 (1 when that is 0).
    for height in &heights {
        let spacing = match (newest - height) / 4 {
            0 => 1,
            quarter => 1 << quarter.ilog2(),
        };
        assert_eq!(height % spacing, 0, "{height} kept: {heights:?}");
    }
    let store = BlockStore::open_with(dir.path(), &options).unwrap();
    for height in 1..=blocks + 1 {
        let expected = heights
            .iter()
            .rev()
            .find(|kept| **kept < height)
            .copied()
            .unwrap_or(0);
        assert_books_before(&store, height, expected, &books);
    }
}

/// A snapshot file listed but gone when opened (the book thread thinned it out in between; here
/// a dangling link in its place, the same to a reader) is passed over for the next older one,
/// never an error and never a loop.
#[test]
fn a_book_snapshot_file_gone_when_read_is_passed_over_for_an_older_one() {
    let dir = TempDir::new("book-snapshots-gone");
    let options = background(3);
    let books = run(&dir, &options, 10);
    let gone = dir.path().join("books/00000000000000000009.books");
    std::fs::remove_file(&gone).unwrap();
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &gone).unwrap();
    let store = BlockStore::open_with(dir.path(), &options).unwrap();
    // The next older snapshot.
    assert_books_before(&store, 11, 6, &books);
}

/// A snapshot file damaged on disk is refused loudly, never read as a wrong book; a partial
/// file a crash left behind is never read and is removed when the store opens.
#[test]
fn a_damaged_book_snapshot_file_is_refused_and_a_partial_one_never_read() {
    let dir = TempDir::new("book-snapshots-damage");
    let options = background(2);
    run(&dir, &options, 4);
    let file = dir.path().join("books/00000000000000000004.books");
    let partial = dir.path().join("books/00000000000000000006.books.tmp");
    std::fs::write(&partial, b"walras-books/1").unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    let store = BlockStore::open_with(dir.path(), &options).unwrap();
    let busiest = pairs()
        .into_iter()
        .max_by_key(|pair| store.pair_book_before(5, *pair).unwrap().1.len())
        .unwrap();
    assert!(!store.pair_book_before(5, busiest).unwrap().1.is_empty());
    assert_eq!(store.pair_book_before(7, busiest).unwrap().0, 4);
    // The book thread removes it before writing anything; a clean stop waits for that thread.
    drop(store);
    assert!(!partial.exists(), "the partial file is removed");
    let store = BlockStore::open_with(dir.path(), &options).unwrap();
    // One bit of an offer's amount, near the end of the file: a pair's section fails its hash.
    let last_offer_amount = bytes.len() - 8 - 1;
    bytes[last_offer_amount] ^= 1;
    std::fs::write(&file, &bytes).unwrap();
    let damaged: Vec<StoreError> = pairs()
        .into_iter()
        .filter_map(|pair| store.pair_book_before(5, pair).err())
        .collect();
    assert_eq!(damaged.len(), 1, "{damaged:?}");
    assert!(
        matches!(
            &damaged[0],
            StoreError::CorruptBookSnapshot { height: 4, .. }
        ),
        "{damaged:?}"
    );
    // Cut short: every pair is refused.
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    for pair in pairs() {
        assert!(matches!(
            store.pair_book_before(5, pair),
            Err(StoreError::CorruptBookSnapshot { height: 4, .. })
        ));
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// A book snapshot file damaged anyhow (bytes changed, cut, lengthened, or replaced by
    /// any bytes) is read as a book or refused as `CorruptBookSnapshot`: never a panic, never
    /// another error.
    #[test]
    fn any_damage_to_a_book_snapshot_file_is_an_answer_or_a_clear_refusal(
        flips in proptest::collection::vec((proptest::prelude::any::<usize>(), 1u8..=255), 0..4),
        cut in proptest::prelude::any::<Option<usize>>(),
        tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..48),
        replace in proptest::prelude::any::<bool>(),
    ) {
        let dir = TempDir::new("book-snapshots-hostile");
        let options = background(2);
        run(&dir, &options, 2);
        let file = dir.path().join("books/00000000000000000002.books");
        let mut bytes = std::fs::read(&file).unwrap();
        if replace {
            bytes = tail.clone();
        }
        for (at, flip) in &flips {
            if !bytes.is_empty() {
                let at = at % bytes.len();
                bytes[at] ^= flip;
            }
        }
        if let Some(cut) = cut {
            bytes.truncate(cut % (bytes.len() + 1));
        }
        if !replace {
            bytes.extend_from_slice(&tail);
        }
        std::fs::write(&file, &bytes).unwrap();
        let store = BlockStore::open_with(dir.path(), &options).unwrap();
        for pair in pairs() {
            match store.pair_book_before(3, pair) {
                Ok((height, _)) => proptest::prop_assert_eq!(height, 2),
                Err(StoreError::CorruptBookSnapshot { height: 2, .. }) => {}
                Err(other) => proptest::prop_assert!(false, "{other}"),
            }
        }
    }
}
