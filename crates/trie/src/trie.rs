//! The [`Trie`] type: the public face of the modules beside it.

use walras_crypto::Hash;

use crate::hashing::{empty_root_hash, refresh};
use crate::iter::Iter;
use crate::merge::{build_over_leaves, leaves_from_sorted_pieces, merge, sort_batch};
use crate::nibble::nibble;
use crate::node::{Branch, Leaf, Node};
use crate::proof::{prove, Proof};
use crate::value::Value;
use crate::{delete, invariants};

/// Longest supported key. Depths are stored in a byte, which would allow 127; 64 is plenty.
pub const KEY_BYTES_MAX: usize = 64;

/// A trie's size: [`Trie::memory`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrieMemory {
    /// Leaves, tombstoned ones not yet cleaned included.
    pub leaves: u64,
    pub branches: u64,
    /// Bytes of the nodes: leaves, branches and the slots that hold them.
    pub bytes: u64,
}

/// A Merkle-Patricia trie from `KEY_BYTES`-byte keys to values `V` (see the crate docs).
pub struct Trie<const KEY_BYTES: usize, V: Value = Vec<u8>> {
    pub(crate) root: Option<Node<KEY_BYTES, V>>,
}

impl<const KEY_BYTES: usize, V: Value> Default for Trie<KEY_BYTES, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const KEY_BYTES: usize, V: Value> Trie<KEY_BYTES, V> {
    const KEY_BYTES_SUPPORTED: () = assert!(
        KEY_BYTES >= 1 && KEY_BYTES <= KEY_BYTES_MAX,
        "keys are 1 to 64 bytes"
    );

    /// An empty trie.
    pub fn new() -> Self {
        // Rejects unsupported key lengths at compile time.
        let () = Self::KEY_BYTES_SUPPORTED;
        Trie { root: None }
    }

    /// Number of live (not deleted) keys. O(1).
    pub fn len(&self) -> usize {
        self.root
            .as_ref()
            .map_or(0, |root| root.live_leaves() as usize)
    }

    /// True when no key is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What the trie's nodes take in memory, from its counts (O(1)): each leaf, each branch
    /// and each child slot at its type's size. Not counted: the allocator's rounding, spare
    /// capacity of children vectors, and bytes a value holds on the heap (the engine's values
    /// hold none).
    pub fn memory(&self) -> TrieMemory {
        let (leaves, branches) = self
            .root
            .as_ref()
            .map_or((0, 0), |root| (root.leaves(), root.branches()));
        // Every node but the root sits in its parent's children; the root in the trie.
        let node_slots = leaves + branches;
        let bytes = branches * std::mem::size_of::<Branch<KEY_BYTES, V>>() as u64
            + node_slots * std::mem::size_of::<Node<KEY_BYTES, V>>() as u64
            + leaves * std::mem::size_of::<Leaf<KEY_BYTES, V>>() as u64;
        TrieMemory {
            leaves,
            branches,
            bytes,
        }
    }

    /// Keys marked deleted and not yet removed by [`Trie::clean`]. O(1).
    pub fn deleted_len(&self) -> usize {
        self.root.as_ref().map_or(0, |root| root.deleted() as usize)
    }

    /// The value of a live `key`.
    pub fn get(&self, key: &[u8; KEY_BYTES]) -> Option<&V> {
        let mut node = self.root.as_ref()?;
        loop {
            match node {
                Node::Leaf(leaf) => {
                    let live = !leaf.deleted.load(std::sync::atomic::Ordering::Relaxed);
                    return (leaf.key == *key && live).then_some(&leaf.value);
                }
                Node::Branch(branch) => {
                    node = branch.child(nibble(key, usize::from(branch.depth)))?
                }
            }
        }
    }

    /// Live entries in increasing key order.
    pub fn iter(&self) -> Iter<'_, KEY_BYTES, V> {
        Iter::new(self.root.as_ref())
    }

    /// Live entries with key `>= start`, in increasing key order (an offer book from a price).
    pub fn range_from(&self, start: &[u8; KEY_BYTES]) -> Iter<'_, KEY_BYTES, V> {
        Iter::from_key(self.root.as_ref(), start)
    }

    /// Marks `key` deleted; true if it was live. Takes `&self`: threads may delete
    /// concurrently. The root hash ignores the key from now on; memory is reclaimed by `clean`.
    pub fn mark_deleted(&self, key: &[u8; KEY_BYTES]) -> bool {
        let was_live = self
            .root
            .as_ref()
            .is_some_and(|root| delete::mark_deleted(root, key));
        debug_assert!(self.get(key).is_none(), "a deleted key is not live");
        was_live
    }

    /// Removes every key marked deleted, visiting only subtrees that hold some. Leaves the
    /// root hash and cached hashes unchanged.
    pub fn clean(&mut self) {
        let live_before = self.len();
        self.root = self.root.take().and_then(delete::clean);
        assert_eq!(self.deleted_len(), 0, "clean leaves no deleted key behind");
        assert_eq!(self.len(), live_before, "clean removes no live key");
    }

    /// Panics, saying what is wrong, if a structural invariant is broken. For tests.
    #[doc(hidden)]
    pub fn check_invariants(&self)
    where
        V: Value,
    {
        if let Some(root) = &self.root {
            if let Err(problem) = invariants::check(root) {
                panic!("trie invariant broken: {problem}");
            }
        }
    }
}

impl<const KEY_BYTES: usize, V: Value + Send> Trie<KEY_BYTES, V> {
    /// Inserts (or overwrites, or revives) every entry of `batch`; for a key given twice the
    /// later entry wins. Uses up to `threads` threads; the resulting trie is the same for any
    /// thread count and equals inserting the entries one by one.
    pub fn insert_batch(&mut self, batch: Vec<([u8; KEY_BYTES], V)>, threads: usize) {
        let live_before = self.len();
        let batch_len = batch.len();
        #[cfg(debug_assertions)]
        let keys: Vec<[u8; KEY_BYTES]> = batch.iter().map(|(key, _)| *key).collect();
        let mut pending = sort_batch(batch, threads);
        self.root = merge(self.root.take(), &mut pending, threads.max(1));
        // Every entry is live afterwards; no other key changed liveness.
        assert!(
            (live_before..=live_before + batch_len).contains(&self.len()),
            "a batch of {batch_len} took the live keys from {live_before} to {}",
            self.len()
        );
        #[cfg(debug_assertions)]
        for key in &keys {
            debug_assert!(self.get(key).is_some(), "an inserted key is live");
        }
    }

    /// The trie of `len` entries made in pieces, keys strictly ascending across all of them:
    /// piece `i` is `make_piece(i * piece_len .. ((i + 1) * piece_len).min(len))`, one entry per
    /// index of its range. Pieces are made on up to `threads` threads, their leaves allocated
    /// there and placed straight into the list the trie's branches are built over. The same trie as [`Trie::insert_batch`] of every
    /// entry into an empty trie, without the batch's copies and its sort: for every account of
    /// a 10M-account state at a restart those were ~1.2 GB of memory touched once and freed,
    /// and about a second (issue 32).
    ///
    /// # Panics
    /// If `piece_len` is 0, a piece holds another number of entries than its range, or the
    /// keys are not strictly ascending (a caller's bug, not bad input).
    pub fn from_sorted_pieces(
        len: usize,
        piece_len: usize,
        threads: usize,
        make_piece: impl Fn(std::ops::Range<usize>) -> Vec<([u8; KEY_BYTES], V)> + Sync + Send,
    ) -> Self {
        let mut trie = Self::new();
        let mut leaves = leaves_from_sorted_pieces(len, piece_len, threads, make_piece);
        if !leaves.is_empty() {
            trie.root = Some(build_over_leaves(&mut leaves, threads.max(1)));
        }
        assert_eq!(trie.len(), len, "every entry of the pieces is a live leaf");
        trie
    }

    /// Inserts one entry; prefer [`Trie::insert_batch`] for many.
    pub fn insert(&mut self, key: [u8; KEY_BYTES], value: V) {
        self.insert_batch(vec![(key, value)], 1);
    }

    /// Hash of the live entries, recomputing only what changed since the last call, on up to
    /// `threads` threads. Depends only on the set of live (key, value) pairs.
    pub fn root_hash(&mut self, threads: usize) -> Hash {
        let live_hash = self
            .root
            .as_mut()
            .and_then(|root| refresh(root, threads.max(1)));
        live_hash.unwrap_or_else(empty_root_hash)
    }
}

impl<const KEY_BYTES: usize, V: AsRef<[u8]>> Trie<KEY_BYTES, V> {
    /// A proof of `key`'s presence (with its value) or absence, for the current root hash.
    /// Cheap after [`Trie::root_hash`]; parts changed since are hashed on the fly. Only for
    /// tries that hold their values' bytes (a proof carries the value).
    pub fn prove(&self, key: &[u8; KEY_BYTES]) -> Proof<KEY_BYTES> {
        prove(self.root.as_ref(), key)
    }
}
