//! The root hash depends only on the set of live (key, value) pairs.
//!
//! Proptest runs random sequences of batch inserts (with repeated keys), marked deletions,
//! cleans and hash computations on 1, 2 or 4 threads, mirrored in a `BTreeMap` model. After
//! every step the trie's invariants hold, its length and contents match the model, and its root
//! hash equals that of a fresh trie built from the model's live set in one sequential batch.
//! Deterministic tests add large batches (past the parallel threshold) compared across thread
//! counts and against one-by-one insertion, the empty-trie constant, and concurrent deletion.
//! A trie of leaf hashes (`LeafHash`) follows the same histories to the same roots.

mod common;

use common::{apply_batch, batch, fresh_trie, Key, Model};
use proptest::prelude::*;
use proptest::sample::Index;
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;
use walras_trie::{empty_root_hash, LeafHash, Trie};

#[derive(Clone, Debug)]
enum Step {
    Insert {
        entries: Vec<(Key, Vec<u8>)>,
        threads: usize,
    },
    Delete {
        picks: Vec<Index>,
        absent: Vec<Key>,
    },
    Clean,
    Hash {
        threads: usize,
    },
}

fn threads() -> impl Strategy<Value = usize> {
    prop_oneof![Just(1usize), Just(2), Just(4)]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (batch(40), threads()).prop_map(|(entries, threads)| Step::Insert { entries, threads }),
        1 => (batch(700), threads()).prop_map(|(entries, threads)| Step::Insert { entries, threads }),
        3 => (proptest::collection::vec(any::<Index>(), 0..30), proptest::collection::vec(common::key(), 0..3))
            .prop_map(|(picks, absent)| Step::Delete { picks, absent }),
        1 => Just(Step::Clean),
        2 => threads().prop_map(|threads| Step::Hash { threads }),
    ]
}

fn apply(trie: &mut Trie<8>, model: &mut Model, step: &Step) {
    match step {
        Step::Insert { entries, threads } => {
            trie.insert_batch(entries.clone(), *threads);
            apply_batch(model, entries);
        }
        Step::Delete { picks, absent } => {
            let keys: Vec<Key> = model.keys().copied().collect();
            for pick in picks.iter().filter(|_| !keys.is_empty()) {
                let key = keys[pick.index(keys.len())];
                assert_eq!(trie.mark_deleted(&key), model.remove(&key).is_some());
            }
            for key in absent {
                assert_eq!(trie.mark_deleted(key), model.remove(key).is_some());
            }
        }
        Step::Clean => {
            trie.clean();
            assert_eq!(trie.deleted_len(), 0);
        }
        Step::Hash { threads } => {
            trie.root_hash(*threads);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn root_hash_equals_fresh_trie_of_live_set_after_any_history(
        steps in proptest::collection::vec(step(), 1..12),
        final_threads in threads(),
    ) {
        let mut trie = Trie::<8>::new();
        let mut model = Model::new();
        for step in &steps {
            apply(&mut trie, &mut model, step);
            trie.check_invariants();
            prop_assert_eq!(trie.len(), model.len());
            let contents: Vec<(Key, Vec<u8>)> = trie.iter().map(|(k, v)| (*k, v.clone())).collect();
            let expected: Vec<(Key, Vec<u8>)> = model.iter().map(|(k, v)| (*k, v.clone())).collect();
            prop_assert_eq!(contents, expected);
        }
        let expected_root = fresh_trie(&model).root_hash(1);
        prop_assert_eq!(trie.root_hash(final_threads), expected_root);
        trie.check_invariants();
        trie.clean();
        trie.check_invariants();
        prop_assert_eq!(trie.root_hash(1), expected_root, "clean must not change the hash");
    }
}

/// `trie`'s entries as leaf hashes (what the engine's account trie holds).
fn hashed_batch(entries: &[(Key, Vec<u8>)]) -> Vec<(Key, LeafHash)> {
    entries
        .iter()
        .map(|(key, value)| (*key, LeafHash::of(key, value)))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// A trie holding only leaf hashes follows any history to the root of the trie holding the
    /// values: the engine's account trie holds hashes, and the state root must not change.
    #[test]
    fn a_trie_of_leaf_hashes_follows_any_history_to_the_same_root(
        steps in proptest::collection::vec(step(), 1..12),
        final_threads in threads(),
    ) {
        let mut trie = Trie::<8>::new();
        let mut hashed = Trie::<8, LeafHash>::new();
        let mut model = Model::new();
        for step in &steps {
            let deleted_before: Vec<Key> = model.keys().copied().collect();
            apply(&mut trie, &mut model, step);
            match step {
                Step::Insert { entries, threads } => {
                    hashed.insert_batch(hashed_batch(entries), *threads);
                }
                Step::Delete { .. } => {
                    for key in deleted_before.iter().filter(|key| !model.contains_key(*key)) {
                        prop_assert!(hashed.mark_deleted(key));
                    }
                }
                Step::Clean => hashed.clean(),
                Step::Hash { threads } => {
                    prop_assert_eq!(hashed.root_hash(*threads), trie.root_hash(*threads));
                }
            }
            hashed.check_invariants();
            prop_assert_eq!(hashed.len(), model.len());
        }
        prop_assert_eq!(hashed.root_hash(final_threads), trie.root_hash(final_threads));
    }
}

fn random_entries(count: usize, seed: u64, key_mask: u64) -> Vec<(Key, Vec<u8>)> {
    // Deterministic pseudo-random values, for inputs too large for proptest to shrink.
    let mut rng = SplitMix64::seed_from_u64(seed);
    (0..count)
        .map(|_| {
            let key = (rng.next_u64() & key_mask).to_be_bytes();
            (key, rng.next_u64().to_le_bytes().to_vec())
        })
        .collect()
}

#[test]
fn big_batches_give_the_same_trie_for_any_thread_count_and_as_one_by_one_inserts() {
    // The narrow mask forces repeated keys (later wins) and dense subtrees; batches of 20,000
    // are sorted and converted on several threads (shorter ones on the calling thread), with
    // and without repeated keys.
    let batches = [
        random_entries(6000, 1, u64::MAX),
        random_entries(6000, 2, 0xffff),
        random_entries(20_000, 3, 0x3fff),
        random_entries(20_000, 4, u64::MAX),
    ];
    let mut one_by_one = Trie::<8>::new();
    for (key, value) in batches.iter().flatten() {
        one_by_one.insert(*key, value.clone());
    }
    let expected_root = one_by_one.root_hash(1);
    let expected: Vec<_> = one_by_one.iter().map(|(k, v)| (*k, v.clone())).collect();
    for threads in [1, 2, 3, 4, 8] {
        let mut trie = Trie::<8>::new();
        for batch in &batches {
            trie.insert_batch(batch.clone(), threads);
        }
        trie.check_invariants();
        assert_eq!(
            trie.root_hash(threads),
            expected_root,
            "threads = {threads}"
        );
        let contents: Vec<_> = trie.iter().map(|(k, v)| (*k, v.clone())).collect();
        assert_eq!(contents, expected, "threads = {threads}");
    }
}

#[test]
fn root_hash_recomputes_only_what_changed_and_still_matches_a_fresh_trie() {
    let mut trie = Trie::<8>::new();
    let mut model = Model::new();
    for round in 0..5 {
        let entries = random_entries(2000, 10 + round, 0xff_ffff);
        trie.insert_batch(entries.clone(), 2);
        apply_batch(&mut model, &entries);
        let doomed: Vec<Key> = model.keys().step_by(7).copied().collect();
        for key in &doomed {
            assert!(trie.mark_deleted(key));
            model.remove(key);
        }
        assert_eq!(
            trie.root_hash(2),
            fresh_trie(&model).root_hash(1),
            "round {round}"
        );
        trie.check_invariants();
    }
}

#[test]
fn empty_trie_hashes_to_the_fixed_constant_also_after_deleting_everything() {
    let mut trie = Trie::<8>::new();
    assert_eq!(trie.root_hash(1), empty_root_hash());
    assert!(trie.is_empty());
    trie.insert_batch(random_entries(500, 3, u64::MAX), 2);
    assert_ne!(trie.root_hash(1), empty_root_hash());
    let keys: Vec<Key> = trie.iter().map(|(k, _)| *k).collect();
    keys.iter().for_each(|key| assert!(trie.mark_deleted(key)));
    assert_eq!((trie.len(), trie.deleted_len()), (0, keys.len()));
    assert_eq!(trie.root_hash(2), empty_root_hash());
    trie.clean();
    assert_eq!((trie.len(), trie.deleted_len()), (0, 0));
    assert_eq!(trie.root_hash(1), empty_root_hash());
}

#[test]
fn reinserting_a_deleted_key_revives_it_with_the_new_value() {
    let mut trie = Trie::<8>::new();
    trie.insert_batch(vec![([1; 8], b"old".to_vec()), ([2; 8], b"x".to_vec())], 1);
    assert!(trie.mark_deleted(&[1; 8]));
    assert!(!trie.mark_deleted(&[1; 8]), "already deleted");
    assert!(!trie.mark_deleted(&[3; 8]), "never present");
    trie.insert([1; 8], b"new".to_vec());
    assert_eq!(trie.get(&[1; 8]), Some(&b"new".to_vec()));
    assert_eq!((trie.len(), trie.deleted_len()), (2, 0));
    trie.check_invariants();
}

#[test]
fn concurrent_deletions_are_each_counted_once() {
    let mut trie = Trie::<8>::new();
    let entries = random_entries(4000, 4, u64::MAX);
    trie.insert_batch(entries.clone(), 2);
    trie.root_hash(1);
    let keys: Vec<Key> = trie.iter().map(|(k, _)| *k).collect();
    // Four threads delete overlapping halves of the keys: each key is claimed exactly once.
    let claimed: usize = std::thread::scope(|scope| {
        let trie = &trie;
        let workers: Vec<_> = (0..4)
            .map(|worker| {
                let keys = &keys;
                scope.spawn(move || {
                    keys.iter()
                        .skip(worker % 2)
                        .step_by(2)
                        .filter(|key| trie.mark_deleted(key))
                        .count()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("deleter thread"))
            .sum()
    });
    assert_eq!(claimed, keys.len());
    assert_eq!((trie.len(), trie.deleted_len()), (0, keys.len()));
    trie.check_invariants();
    assert_eq!(trie.root_hash(2), empty_root_hash());
}
