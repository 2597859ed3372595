//! Node hashes (the scheme is specified in the crate docs) and their lazy, parallel refresh.

use std::sync::atomic::Ordering;
use walras_crypto::{domain, hash_in, Hash, Hasher};

use crate::nibble::{bitmap_nibbles, prefix_bytes};
use crate::node::{Branch, Node};
use crate::parallel::run_weighted;
use crate::value::{hash_group, leaf_hash_of, LeafInput, Value};
use walras_par::prefetch::prefetch_slice;

/// Root hash of a trie with no live leaf.
pub fn empty_root_hash() -> Hash {
    hash_in(domain::TRIE_EMPTY, &[])
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
    V: Value + Send,
{
    match node {
        Node::Leaf(leaf) => {
            if *leaf.deleted.get_mut() {
                return None;
            }
            if let Some(hash) = leaf.value.known_hash(&leaf.hash) {
                return Some(hash);
            }
            let hash = leaf_hash_of(&leaf.key, &leaf.value);
            V::keep_hash(&mut leaf.hash, hash);
            Some(hash)
        }
        Node::Branch(branch) => refresh_branch(branch, threads),
    }
}

fn refresh_branch<const KEY_BYTES: usize, V>(
    branch: &mut Branch<KEY_BYTES, V>,
    threads: usize,
) -> Option<Hash>
where
    V: Value + Send,
{
    if !*branch.dirty.get_mut() {
        return branch.live_hash;
    }
    // Every child is read below, the leaves first: ask for them all at once, so that their
    // misses overlap instead of following the hashing of the children before them.
    for child in &branch.children {
        child.prefetch();
    }
    hash_stale_leaves(&mut branch.children);
    // By now the children have come in: ask for the child lists of the stale child branches
    // too, so that entering each finds its list and asks for its own children at once.
    for child in &branch.children {
        if let Node::Branch(child) = child {
            if child.dirty.load(Ordering::Relaxed) {
                prefetch_slice(&child.children);
            }
        }
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

/// Fills the hashes of the live leaves among `children` that have none, hashing them together
/// (`hash_group`: four at a time on SIMD lanes). Most leaves of a large trie sit in branches of
/// many leaves, so this is where nearly all leaf hashing happens; one stale leaf alone is left
/// to [`refresh`]. Leaves holding their hash take it.
fn hash_stale_leaves<const KEY_BYTES: usize, V: Value>(children: &mut [Node<KEY_BYTES, V>]) {
    // Positions of the stale leaves whose value gives bytes; a branch has at most 16 children.
    let mut stale = [0usize; 16];
    let mut stale_len = 0;
    for (position, child) in children.iter_mut().enumerate() {
        let Node::Leaf(leaf) = child else { continue };
        if leaf.value.known_hash(&leaf.hash).is_some() || leaf.deleted.load(Ordering::Relaxed) {
            continue;
        }
        match leaf.value.leaf_input() {
            LeafInput::Hashed(hash) => V::keep_hash(&mut leaf.hash, hash),
            LeafInput::Bytes(_) => {
                stale[stale_len] = position;
                stale_len += 1;
            }
        }
    }
    if stale_len < 2 {
        return;
    }
    let mut group: [([u8; KEY_BYTES], &[u8]); 16] = [([0; KEY_BYTES], &[]); 16];
    let mut group_len = 0;
    for &position in &stale[..stale_len] {
        if let Node::Leaf(leaf) = &children[position] {
            if let LeafInput::Bytes(bytes) = leaf.value.leaf_input() {
                group[group_len] = (leaf.key, bytes);
                group_len += 1;
            }
        }
    }
    let mut hashes = [Hash::default(); 16];
    hash_group(&group[..group_len], &mut hashes[..group_len]);
    for (&position, hash) in stale[..stale_len].iter().zip(hashes) {
        if let Node::Leaf(leaf) = &mut children[position] {
            V::keep_hash(&mut leaf.hash, hash);
        }
    }
}

/// Work to refresh a child: its leaves if anything below is stale.
fn stale_weight<const KEY_BYTES: usize, V: Value>(child: &&mut Node<KEY_BYTES, V>) -> u64 {
    if child.needs_hashing() {
        child.leaves()
    } else {
        0
    }
}

/// The live hash of `node` without touching caches: cached values where fresh, recomputed
/// (single-threaded) where stale. Lets proofs be served from a trie changed since its last
/// `root_hash`.
pub(crate) fn live_hash_now<const KEY_BYTES: usize, V: Value>(
    node: &Node<KEY_BYTES, V>,
) -> Option<Hash> {
    match node {
        Node::Leaf(leaf) => {
            if leaf.deleted.load(Ordering::Relaxed) {
                return None;
            }
            Some(
                leaf.value
                    .known_hash(&leaf.hash)
                    .unwrap_or_else(|| leaf_hash_of(&leaf.key, &leaf.value)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Trie;

    /// The live hash by the crate's hashing scheme, every leaf hashed on its own and no cache
    /// read.
    fn by_definition<const KEY_BYTES: usize, V: Value>(node: &Node<KEY_BYTES, V>) -> Option<Hash> {
        match node {
            Node::Leaf(leaf) if leaf.deleted.load(Ordering::Relaxed) => None,
            Node::Leaf(leaf) => Some(leaf_hash_of(&leaf.key, &leaf.value)),
            Node::Branch(branch) => {
                LiveChildren::collect(branch.bitmap, branch.children.iter().map(by_definition))
                    .combined(branch.depth, &branch.prefix)
            }
        }
    }

    /// Leaves hashed together (`hash_stale_leaves`) get the hash each would get alone: the root
    /// is the scheme's, for values of many lengths (one and two BLAKE2b blocks), after a
    /// first root and after changes that leave some leaves of a branch stale and some not.
    #[test]
    fn leaves_hashed_together_give_the_root_of_the_hashing_scheme() {
        for threads in [1, 2] {
            let mut trie: Trie<8> = Trie::new();
            let entries = |seed: u64, count: u64| -> Vec<([u8; 8], Vec<u8>)> {
                (0..count)
                    .map(|i| {
                        let key = (i * 7919 % 5003).to_be_bytes();
                        let value = vec![(i + seed) as u8; ((i * 37 + seed) % 300) as usize];
                        (key, value)
                    })
                    .collect()
            };
            trie.insert_batch(entries(1, 3000), threads);
            let root = trie.root_hash(threads);
            assert_eq!(Some(root), trie.root.as_ref().and_then(by_definition));
            trie.insert_batch(entries(2, 300), threads);
            let root = trie.root_hash(threads);
            assert_eq!(Some(root), trie.root.as_ref().and_then(by_definition));
        }
    }
}
