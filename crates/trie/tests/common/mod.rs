//! Shared by the trie tests: key strategies with the shapes tries care about, and a reference
//! model (a `BTreeMap`) to compare against.

#![allow(dead_code)] // Each test file uses a different subset.

use proptest::prelude::*;
use std::collections::BTreeMap;
use walras_trie::Trie;

pub(crate) type Key = [u8; 8];
pub(crate) type Model = BTreeMap<Key, Vec<u8>>;

/// Keys that exercise every trie shape: uniform (wide, shallow), dense low ranges (long shared
/// prefixes, full branches), and clusters under a few high prefixes (deep compressed paths).
pub(crate) fn key() -> impl Strategy<Value = Key> {
    prop_oneof![
        any::<u64>().prop_map(u64::to_be_bytes),
        (0u64..600).prop_map(u64::to_be_bytes),
        (0u64..8, 0u64..64).prop_map(|(high, low)| ((high << 60) | (low * 0x0101)).to_be_bytes()),
    ]
}

pub(crate) fn value() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..6)
}

pub(crate) fn batch(max_len: usize) -> impl Strategy<Value = Vec<(Key, Vec<u8>)>> {
    proptest::collection::vec((key(), value()), 0..max_len)
}

/// A trie holding exactly `model`, built in one sequential batch.
pub(crate) fn fresh_trie(model: &Model) -> Trie<8> {
    let mut trie = Trie::new();
    trie.insert_batch(model.iter().map(|(k, v)| (*k, v.clone())).collect(), 1);
    trie
}

/// Applies a batch to the model the way the trie must: in order, later entries win.
pub(crate) fn apply_batch(model: &mut Model, batch: &[(Key, Vec<u8>)]) {
    for (key, value) in batch {
        model.insert(*key, value.clone());
    }
}
