//! `Trie::from_sorted_pieces` (the account trie of a whole state, built at a restart) makes the
//! trie that inserting the same entries in one batch makes: same contents, same shape (its
//! invariants), same root hash, for any piece length and thread count; and it refuses pieces
//! that break its contract instead of building a wrong trie.

mod common;

use common::{batch, Key};
use proptest::prelude::*;
use std::collections::BTreeMap;
use walras_trie::{LeafHash, Trie};

/// The distinct entries of `entries` (a later repeat wins), in key order.
fn sorted_unique(entries: Vec<(Key, Vec<u8>)>) -> Vec<(Key, Vec<u8>)> {
    entries
        .into_iter()
        .collect::<BTreeMap<_, _>>()
        .into_iter()
        .collect()
}

/// The trie of `sorted` built from pieces of `piece_len` on `threads` threads.
fn from_pieces(sorted: &[(Key, Vec<u8>)], piece_len: usize, threads: usize) -> Trie<8> {
    Trie::from_sorted_pieces(sorted.len(), piece_len, threads, |range| {
        sorted[range].to_vec()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The pieces' trie equals the batch's: the constructor must not depend on where the
    /// pieces are cut or how many threads make them.
    #[test]
    fn a_trie_built_from_sorted_pieces_is_the_trie_of_the_same_batch(
        entries in batch(700),
        piece_len in 1usize..300,
        threads in prop_oneof![Just(1usize), Just(2), Just(4)],
    ) {
        let sorted = sorted_unique(entries);
        let mut expected = Trie::<8>::new();
        expected.insert_batch(sorted.clone(), 1);
        let mut built = from_pieces(&sorted, piece_len, threads);
        built.check_invariants();
        prop_assert_eq!(built.len(), sorted.len());
        let contents: Vec<(Key, Vec<u8>)> = built.iter().map(|(k, v)| (*k, v.clone())).collect();
        prop_assert_eq!(&contents, &sorted);
        prop_assert_eq!(built.root_hash(threads), expected.root_hash(1));

        // The engine's account trie holds leaf hashes: the same root from them.
        let mut hashed = Trie::<8, LeafHash>::from_sorted_pieces(
            sorted.len(),
            piece_len,
            threads,
            |range| sorted[range].iter().map(|(key, value)| (*key, LeafHash::of(key, value))).collect(),
        );
        hashed.check_invariants();
        prop_assert_eq!(hashed.root_hash(threads), expected.root_hash(1));
    }
}

/// Many entries in many pieces on several threads (past the parallel thresholds).
#[test]
fn a_large_trie_from_pieces_on_several_threads_has_the_batch_s_root() {
    let sorted: Vec<(Key, Vec<u8>)> = (0..50_000u64)
        .map(|i| {
            let key = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            (key.to_be_bytes(), i.to_le_bytes().to_vec())
        })
        .collect::<BTreeMap<_, _>>()
        .into_iter()
        .collect();
    let mut expected = Trie::<8>::new();
    expected.insert_batch(sorted.clone(), 1);
    for threads in [1, 2, 4] {
        let mut built = from_pieces(&sorted, 4_096, threads);
        built.check_invariants();
        assert_eq!(
            built.root_hash(threads),
            expected.root_hash(1),
            "threads {threads}"
        );
    }
}

#[test]
fn no_pieces_make_the_empty_trie() {
    let mut built = from_pieces(&[], 16, 2);
    assert!(built.is_empty());
    assert_eq!(built.root_hash(1), Trie::<8>::new().root_hash(1));
}

#[test]
#[should_panic(expected = "across pieces")]
fn pieces_out_of_order_are_refused() {
    let sorted = sorted_unique((0..10u64).map(|i| (i.to_be_bytes(), vec![1])).collect());
    // Each piece ascends; the second piece's keys come before the first's.
    Trie::<8>::from_sorted_pieces(10, 5, 1, |range| {
        let other = if range.start == 0 { 5..10 } else { 0..5 };
        sorted[other].to_vec()
    });
}

#[test]
#[should_panic(expected = "not strictly ascending")]
fn a_repeated_key_inside_a_piece_is_refused() {
    Trie::<8>::from_sorted_pieces(3, 3, 1, |_| {
        vec![
            (1u64.to_be_bytes(), vec![1]),
            (2u64.to_be_bytes(), vec![2]),
            (2u64.to_be_bytes(), vec![3]),
        ]
    });
}

#[test]
#[should_panic(expected = "made 2 entries for 3 indexes")]
fn a_piece_of_the_wrong_length_is_refused() {
    Trie::<8>::from_sorted_pieces(3, 3, 1, |_| {
        vec![(1u64.to_be_bytes(), vec![1]), (2u64.to_be_bytes(), vec![2])]
    });
}

/// `Trie::memory` counts nodes as they are: 16 keys differing in their last nibble are one
/// branch over 16 leaves; 16 more under another prefix add that prefix's branch and a root
/// above both; cleaning deleted keys gives their memory back.
#[test]
fn a_trie_s_memory_counts_its_leaves_and_branches() {
    let mut trie = Trie::<8>::new();
    assert_eq!(trie.memory().bytes, 0);
    trie.insert_batch((0..16u64).map(|i| (i.to_be_bytes(), vec![1])).collect(), 1);
    let one = trie.memory();
    assert_eq!((one.leaves, one.branches), (16, 1));
    trie.insert_batch(
        (0..16u64)
            .map(|i| ((0x100 + i).to_be_bytes(), vec![1]))
            .collect(),
        2,
    );
    let two = trie.memory();
    assert_eq!((two.leaves, two.branches), (32, 3));
    assert!(two.bytes > 2 * one.bytes);
    for i in 0..16u64 {
        assert!(trie.mark_deleted(&(0x100 + i).to_be_bytes()));
    }
    assert_eq!(trie.memory(), two, "marked, not yet removed");
    trie.clean();
    assert_eq!(trie.memory(), one);
}
