//! Trie nodes. Layout and invariants are described in the crate docs; this module keeps them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use walras_crypto::Hash;

use crate::nibble::{bitmap_nibbles, nibble};
use crate::value::Value;
use walras_par::prefetch::prefetch_slice;

/// A subtree: one leaf, or a branch with at least two children.
pub(crate) enum Node<const KEY_BYTES: usize, V: Value> {
    Leaf(Box<Leaf<KEY_BYTES, V>>),
    Branch(Box<Branch<KEY_BYTES, V>>),
}

pub(crate) struct Leaf<const KEY_BYTES: usize, V: Value> {
    pub key: [u8; KEY_BYTES],
    pub value: V,
    /// `H_leaf(key, value)` once the next root-hash computation has found it, where the value
    /// is not already the hash (see [`Value::Cache`]).
    pub hash: V::Cache,
    /// Tombstone. Atomic so that many threads may mark deletions through `&Trie`.
    pub deleted: AtomicBool,
}

pub(crate) struct Branch<const KEY_BYTES: usize, V: Value> {
    /// The first `depth` nibbles, shared by every key below; later nibbles are zero.
    pub prefix: [u8; KEY_BYTES],
    /// Length of `prefix` in nibbles. Children differ in the key's nibble at index `depth`.
    pub depth: u8,
    /// Bit `n` is set when there is a child for nibble `n`.
    pub bitmap: u16,
    /// One child per set bit, in nibble order (hence key order).
    pub children: Vec<Node<KEY_BYTES, V>>,
    /// Leaves below, tombstoned ones included (the structure's size, for work splitting).
    pub leaves: u64,
    /// Branches below, this one included (with `leaves`, the trie's memory: `Trie::memory`).
    pub branches: u64,
    /// Tombstoned leaves below: `clean` skips subtrees where this is 0 and drops subtrees
    /// where it equals `leaves`.
    pub deleted: AtomicU64,
    /// Hash of the live leaves below, as the subtree would hash after `clean`; `None` when none
    /// is live. Meaningful only when `dirty` is false.
    pub live_hash: Option<Hash>,
    /// Set when anything below changed since `live_hash` was computed.
    pub dirty: AtomicBool,
}

impl<const KEY_BYTES: usize, V: Value> Node<KEY_BYTES, V> {
    pub(crate) fn new_leaf(key: [u8; KEY_BYTES], value: V) -> Self {
        Node::Leaf(Box::new(Leaf {
            key,
            value,
            hash: V::Cache::default(),
            deleted: AtomicBool::new(false),
        }))
    }

    /// A fresh (dirty) branch over `children`, which must be in nibble order at `depth`.
    pub(crate) fn new_branch(prefix: [u8; KEY_BYTES], depth: usize, children: Vec<Self>) -> Self {
        let mut branch = Branch {
            prefix,
            depth: depth as u8,
            bitmap: 0,
            children,
            leaves: 0,
            branches: 1,
            deleted: AtomicU64::new(0),
            live_hash: None,
            dirty: AtomicBool::new(true),
        };
        branch.recount();
        Node::Branch(Box::new(branch))
    }

    /// Asks the cache for the node's own allocation (a hint: see `walras_par::prefetch`).
    pub(crate) fn prefetch(&self) {
        match self {
            Node::Leaf(leaf) => prefetch_slice(std::slice::from_ref(&**leaf)),
            Node::Branch(branch) => prefetch_slice(std::slice::from_ref(&**branch)),
        }
    }

    /// The key of a leaf, the prefix of a branch.
    pub(crate) fn path(&self) -> &[u8; KEY_BYTES] {
        match self {
            Node::Leaf(leaf) => &leaf.key,
            Node::Branch(branch) => &branch.prefix,
        }
    }

    /// Nibbles of `path` that are fixed: the whole key for a leaf.
    pub(crate) fn depth(&self) -> usize {
        match self {
            Node::Leaf(_) => 2 * KEY_BYTES,
            Node::Branch(branch) => usize::from(branch.depth),
        }
    }

    pub(crate) fn leaves(&self) -> u64 {
        match self {
            Node::Leaf(_) => 1,
            Node::Branch(branch) => branch.leaves,
        }
    }

    /// Branches in this subtree, itself included.
    pub(crate) fn branches(&self) -> u64 {
        match self {
            Node::Leaf(_) => 0,
            Node::Branch(branch) => branch.branches,
        }
    }

    pub(crate) fn deleted(&self) -> u64 {
        match self {
            Node::Leaf(leaf) => u64::from(leaf.deleted.load(Ordering::Relaxed)),
            Node::Branch(branch) => branch.deleted.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn live_leaves(&self) -> u64 {
        self.leaves() - self.deleted()
    }

    /// Whether computing this subtree's live hash has work to do.
    pub(crate) fn needs_hashing(&self) -> bool {
        match self {
            Node::Leaf(leaf) => {
                leaf.value.known_hash(&leaf.hash).is_none() && !leaf.deleted.load(Ordering::Relaxed)
            }
            Node::Branch(branch) => branch.dirty.load(Ordering::Relaxed),
        }
    }
}

impl<const KEY_BYTES: usize, V: Value> Branch<KEY_BYTES, V> {
    /// Recomputes bitmap and counters from the children (after they changed).
    pub(crate) fn recount(&mut self) {
        let depth = usize::from(self.depth);
        self.bitmap = self
            .children
            .iter()
            .fold(0, |bits, child| bits | 1 << nibble(child.path(), depth));
        self.leaves = self.children.iter().map(Node::leaves).sum();
        self.branches = 1 + self.children.iter().map(Node::branches).sum::<u64>();
        *self.deleted.get_mut() = self.children.iter().map(Node::deleted).sum();
    }

    /// Children paired with their nibble.
    pub(crate) fn nibbled_children(&self) -> impl Iterator<Item = (u8, &Node<KEY_BYTES, V>)> {
        bitmap_nibbles(self.bitmap).zip(&self.children)
    }

    /// The child for `nibble`, if any.
    pub(crate) fn child(&self, nibble: u8) -> Option<&Node<KEY_BYTES, V>> {
        if self.bitmap & (1 << nibble) == 0 {
            return None;
        }
        self.children
            .get(crate::nibble::child_position(self.bitmap, nibble))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LeafHash;

    /// A leaf of a trie of hashes keeps its hash once (the engine's account trie has one leaf
    /// per account: at 10M accounts a second copy was 320 MB).
    #[test]
    fn a_leaf_of_leaf_hashes_keeps_its_hash_once() {
        assert_eq!(
            std::mem::size_of::<Leaf<8, LeafHash>>(),
            8 + std::mem::size_of::<Hash>() + 1
        );
    }
}
