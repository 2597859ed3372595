//! Node hashes (the scheme is specified in the crate docs) and their lazy, parallel refresh.

use std::sync::atomic::Ordering;
use walras_crypto::{domain, hash_in, Hash, Hasher};

use crate::nibble::{bitmap_nibbles, prefix_bytes};
use crate::node::{Branch, Node};
use crate::parallel::run_weighted;

/// Root hash of a trie with no live leaf.
pub fn empty_root_hash() -> Hash {
    hash_in(domain::TRIE_EMPTY, &[])
}

/// `H_leaf(key_bytes ‖ key ‖ value)`.
pub(crate) fn leaf_hash(key: &[u8], value: &[u8]) -> Hash {
    let mut hasher = Hasher::new(domain::TRIE_LEAF);
    hasher.update(&[key.len() as u8]).update(key).update(value);
    hasher.finalize()
}

/// Live children of a branch: (nibble, hash), ascending, at most 16.
pub(crate) struct LiveChildren {
    entries: [(u8, Hash); 16],
    count: usize,
}

impl LiveChildren {
    pub(crate) fn new() -> Self {
        LiveChildren {
            entries: [(0, Hash::default()); 16],
            count: 0,
        }
    }

    /// Appends a child; nibbles must come in ascending order.
    pub(crate) fn push(&mut self, nibble: u8, hash: Hash) {
        self.entries[self.count] = (nibble, hash);
        self.count += 1;
    }

    /// The live ones among children listed by `bitmap`, given each child's live hash in order.
    pub(crate) fn collect(
        bitmap: u16,
        child_hashes: impl IntoIterator<Item = Option<Hash>>,
    ) -> Self {
        let mut live = LiveChildren::new();
        for (nibble, child_hash) in bitmap_nibbles(bitmap).zip(child_hashes) {
            if let Some(child_hash) = child_hash {
                live.push(nibble, child_hash);
            }
        }
        live
    }

    pub(crate) fn as_slice(&self) -> &[(u8, Hash)] {
        &self.entries[..self.count]
    }

    pub(crate) fn bitmap(&self) -> u16 {
        self.as_slice()
            .iter()
            .fold(0, |bits, (nibble, _)| bits | 1 << nibble)
    }

    /// The subtree's live hash: none, the only child's (a branch with one live child vanishes
    /// on `clean`), or the branch hash.
    pub(crate) fn combined(&self, depth: u8, prefix: &[u8]) -> Option<Hash> {
        match self.as_slice() {
            [] => None,
            [(_, only)] => Some(*only),
            _ => Some(branch_hash(
                depth,
                prefix,
                self.bitmap(),
                self.as_slice().iter().map(|c| &c.1),
            )),
        }
    }
}

/// `H_branch(depth ‖ prefix[..⌈depth/2⌉] ‖ bitmap ‖ child hashes in nibble order)`.
/// `prefix` must be canonical (nibbles past `depth` zero).
pub(crate) fn branch_hash<'a>(
    depth: u8,
    prefix: &[u8],
    bitmap: u16,
    child_hashes: impl Iterator<Item = &'a Hash>,
) -> Hash {
    let mut hasher = Hasher::new(domain::TRIE_BRANCH);
    hasher
        .update(&[depth])
        .update(&prefix[..prefix_bytes(usize::from(depth))]);
    hasher.update(&bitmap.to_be_bytes());
    for child in child_hashes {
        hasher.update(child.as_bytes());
    }
    hasher.finalize()
}

/// Brings every cached hash under `node` up to date, using up to `threads` threads, and
/// returns the subtree's live hash.
pub(crate) fn refresh<const KEY_BYTES: usize, V>(
    node: &mut Node<KEY_BYTES, V>,
    threads: usize,
) -> Option<Hash>
where
    V: AsRef<[u8]> + Send,
{
    match node {
        Node::Leaf(leaf) => {
            if *leaf.deleted.get_mut() {
                return None;
            }
            Some(
                *leaf
                    .hash
                    .get_or_insert_with(|| leaf_hash(&leaf.key, leaf.value.as_ref())),
            )
        }
        Node::Branch(branch) => refresh_branch(branch, threads),
    }
}

fn refresh_branch<const KEY_BYTES: usize, V>(
    branch: &mut Branch<KEY_BYTES, V>,
    threads: usize,
) -> Option<Hash>
where
    V: AsRef<[u8]> + Send,
{
    if !*branch.dirty.get_mut() {
        return branch.live_hash;
    }
    let bitmap = branch.bitmap;
    let live = if threads > 1 {
        let children: Vec<&mut Node<KEY_BYTES, V>> = branch.children.iter_mut().collect();
        let hashes = run_weighted(children, threads, stale_weight, |child, budget| {
            refresh(child, budget)
        });
        LiveChildren::collect(bitmap, hashes)
    } else {
        LiveChildren::collect(
            bitmap,
            branch.children.iter_mut().map(|child| refresh(child, 1)),
        )
    };
    branch.live_hash = live.combined(branch.depth, &branch.prefix);
    *branch.dirty.get_mut() = false;
    branch.live_hash
}

/// Work to refresh a child: its leaves if anything below is stale.
fn stale_weight<const KEY_BYTES: usize, V>(child: &&mut Node<KEY_BYTES, V>) -> u64 {
    if child.needs_hashing() {
        child.leaves()
    } else {
        0
    }
}

/// The live hash of `node` without touching caches: cached values where fresh, recomputed
/// (single-threaded) where stale. Lets proofs be served from a trie changed since its last
/// `root_hash`.
pub(crate) fn live_hash_now<const KEY_BYTES: usize, V: AsRef<[u8]>>(
    node: &Node<KEY_BYTES, V>,
) -> Option<Hash> {
    match node {
        Node::Leaf(leaf) => {
            if leaf.deleted.load(Ordering::Relaxed) {
                return None;
            }
            Some(
                leaf.hash
                    .unwrap_or_else(|| leaf_hash(&leaf.key, leaf.value.as_ref())),
            )
        }
        Node::Branch(branch) => {
            if !branch.dirty.load(Ordering::Relaxed) {
                return branch.live_hash;
            }
            let live =
                LiveChildren::collect(branch.bitmap, branch.children.iter().map(live_hash_now));
            live.combined(branch.depth, &branch.prefix)
        }
    }
}
