//! What a leaf holds, and so how its hash is found.
//!
//! A leaf's hash is `H_leaf(KEY_BYTES ‖ key ‖ value)` whatever the leaf holds. Most tries keep
//! the value's bytes ([`Value`] for every `AsRef<[u8]>`) and hash them when the root is next
//! computed. A trie whose values live elsewhere in full (the engine's account trie: every
//! account is in the state's account vector) holds only each leaf's hash, computed by the
//! caller from the same bytes ([`LeafHash::of`], [`leaf_hashes`]): at 10M accounts a copy of
//! each account's encoding in its leaf was ~1.5 GB of memory that nothing read, and the pages a
//! restart filled with it took seconds of it (issue 32). The root is the same either way.
//!
//! A [`LeafHash`] trie cannot prove a key ([`crate::Trie::prove`] needs the value's bytes for
//! the proof): that is a compile-time refusal, not a proof with a wrong leaf.

use walras_crypto::{domain, hash_in_each, Hash, Hasher};

/// `H_leaf(key_bytes ‖ key ‖ value)`.
pub(crate) fn leaf_hash(key: &[u8], value: &[u8]) -> Hash {
    let mut hasher = Hasher::new(domain::TRIE_LEAF);
    let length = [key.len() as u8];
    for part in leaf_input(&length, key, value) {
        hasher.update(part);
    }
    hasher.finalize()
}

/// The hash of the leaf `key` → `value`, whatever the value holds.
pub(crate) fn leaf_hash_of<V: Value>(key: &[u8], value: &V) -> Hash {
    match value.leaf_input() {
        LeafInput::Bytes(bytes) => leaf_hash(key, bytes),
        LeafInput::Hashed(hash) => hash,
    }
}

/// What a leaf hash covers, in order: `key_bytes ‖ key ‖ value` (`length` holds
/// `key.len()` as one byte). The one definition for [`leaf_hash`] and leaves hashed together
/// ([`hash_group`]).
fn leaf_input<'a>(length: &'a [u8; 1], key: &'a [u8], value: &'a [u8]) -> [&'a [u8]; 3] {
    [length, key, value]
}

/// What a leaf's hash covers, as its value gives it.
pub enum LeafInput<'a> {
    /// The value's bytes: the leaf hash is `H_leaf(KEY_BYTES ‖ key ‖ bytes)`.
    Bytes(&'a [u8]),
    /// The leaf hash itself, computed from bytes the trie does not hold.
    Hashed(Hash),
}

/// A value a trie leaf can hold.
pub trait Value {
    /// What a leaf keeps beside its value for its hash: the hash once computed
    /// (`Option<Hash>`), or nothing where the value is the hash.
    type Cache: Default + Send + Sync;

    /// What the leaf's hash covers.
    fn leaf_input(&self) -> LeafInput<'_>;

    /// The leaf's hash if known without hashing.
    fn known_hash(&self, cache: &Self::Cache) -> Option<Hash>;

    /// Keeps a hash computed from [`Value::leaf_input`]'s bytes.
    fn keep_hash(cache: &mut Self::Cache, hash: Hash);
}

impl<T: AsRef<[u8]>> Value for T {
    type Cache = Option<Hash>;

    fn leaf_input(&self) -> LeafInput<'_> {
        LeafInput::Bytes(self.as_ref())
    }

    fn known_hash(&self, cache: &Option<Hash>) -> Option<Hash> {
        *cache
    }

    fn keep_hash(cache: &mut Option<Hash>, hash: Hash) {
        *cache = Some(hash);
    }
}

/// The hash of a leaf whose value's bytes the caller keeps: the trie stores 32 bytes per key
/// and hashes nothing for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafHash(Hash);

impl LeafHash {
    /// The hash a trie gives the leaf `key` → `value`.
    pub fn of(key: &[u8], value: &[u8]) -> LeafHash {
        LeafHash(leaf_hash(key, value))
    }

    pub fn hash(&self) -> Hash {
        self.0
    }
}

/// The leaf keeps no second copy of its hash: 48 bytes a leaf of an 8-byte key, not 80.
impl Value for LeafHash {
    type Cache = ();

    fn leaf_input(&self) -> LeafInput<'_> {
        LeafInput::Hashed(self.0)
    }

    fn known_hash(&self, _: &()) -> Option<Hash> {
        Some(self.0)
    }

    fn keep_hash(_: &mut (), _: Hash) {}
}

/// [`LeafHash::of`] of each `(key, value)`, in order, hashed four at a time on SIMD lanes
/// (`walras_crypto::hash_in_each`).
pub fn leaf_hashes<const KEY_BYTES: usize>(entries: &[([u8; KEY_BYTES], &[u8])]) -> Vec<LeafHash> {
    let mut hashes = vec![Hash::default(); entries.len()];
    for (group, out) in entries.chunks(16).zip(hashes.chunks_mut(16)) {
        hash_group(group, out);
    }
    hashes.into_iter().map(LeafHash).collect()
}

/// Leaf hashes of at most 16 entries, their inputs laid end to end in one buffer.
pub(crate) fn hash_group<const KEY_BYTES: usize>(
    group: &[([u8; KEY_BYTES], &[u8])],
    out: &mut [Hash],
) {
    debug_assert!(group.len() <= 16 && group.len() == out.len());
    let length = [KEY_BYTES as u8];
    let mut inputs = Vec::new();
    let mut ends = [0; 16];
    for ((key, value), end) in group.iter().zip(&mut ends) {
        for part in leaf_input(&length, key, value) {
            inputs.extend_from_slice(part);
        }
        *end = inputs.len();
    }
    let mut slices: [&[u8]; 16] = [&[]; 16];
    let mut start = 0;
    for (slice, &end) in slices.iter_mut().zip(&ends[..group.len()]) {
        *slice = &inputs[start..end];
        start = end;
    }
    hash_in_each(domain::TRIE_LEAF, &slices[..group.len()], out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Trie;

    /// A trie of leaf hashes has the root of the same keys with their values: the state root
    /// must not depend on which of the two the engine keeps.
    #[test]
    fn a_trie_of_leaf_hashes_has_the_root_of_the_trie_of_their_values() {
        for threads in [1, 2] {
            let entries: Vec<([u8; 8], Vec<u8>)> = (0..3000u64)
                .map(|i| {
                    (
                        (i * 7919 % 5003).to_be_bytes(),
                        vec![i as u8; (i % 300) as usize],
                    )
                })
                .collect();
            let mut bytes: Trie<8> = Trie::new();
            let mut hashed: Trie<8, LeafHash> = Trie::new();
            bytes.insert_batch(entries.clone(), threads);
            let borrowed: Vec<([u8; 8], &[u8])> =
                entries.iter().map(|(k, v)| (*k, v.as_slice())).collect();
            let hashes = leaf_hashes(&borrowed);
            hashed.insert_batch(
                entries.iter().map(|(k, _)| *k).zip(hashes).collect(),
                threads,
            );
            assert_eq!(hashed.root_hash(threads), bytes.root_hash(threads));
            // Overwrites, one alone and many together, keep them equal.
            let key = entries[17].0;
            bytes.insert(key, b"changed".to_vec());
            hashed.insert(key, LeafHash::of(&key, b"changed"));
            assert_eq!(hashed.root_hash(threads), bytes.root_hash(threads));
            for (key, _) in &entries[..40] {
                assert!(bytes.mark_deleted(key) && hashed.mark_deleted(key));
            }
            assert_eq!(hashed.root_hash(threads), bytes.root_hash(threads));
        }
    }

    /// Hashed in groups or alone, a leaf's hash is the same.
    #[test]
    fn leaf_hashes_hashed_together_equal_each_alone() {
        let values: Vec<Vec<u8>> = (0..37).map(|i| vec![i as u8; i * 11]).collect();
        let entries: Vec<([u8; 8], &[u8])> = values
            .iter()
            .enumerate()
            .map(|(i, v)| ((i as u64).to_be_bytes(), v.as_slice()))
            .collect();
        let together = leaf_hashes(&entries);
        for ((key, value), hash) in entries.iter().zip(together) {
            assert_eq!(hash, LeafHash::of(key, value));
        }
    }
}
