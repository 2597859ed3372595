//! Merkle batch signatures: sign many messages with one ed25519 signature.
//!
//! A signer builds a binary Merkle tree over the messages' hashes, signs the root once, and hands
//! each recipient its message's inclusion proof. A verifier recomputes the root from (message
//! hash, proof) and checks the one signature.
//!
//! Tree shape: leaf `i` is `H_leaf(message_hash_i)`; each level pairs nodes left to right into
//! `H_node(left ‖ right)`, and a last unpaired node moves up unchanged (never duplicated, so no two
//! different leaf lists share a root). Leaf and inner hashes are in different domains, so a leaf
//! can never be presented as an inner node. What is signed is `H_root(leaf_count ‖ root)`, not the
//! bare root: it cannot be mistaken for any other signed 32-byte message, and it fixes the tree
//! shape the proofs are checked against.

use crate::error::VerifyError;
use crate::hash::{domain, hash_in, Hash, Hasher};
use crate::sign::{verify, Keypair, PublicKey, Signature};

/// Most messages one batch signature covers (the leaf index travels as a `u32`).
pub const MERKLE_BATCH_MESSAGES_MAX: usize = u32::MAX as usize;

/// A batch that cannot be signed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MerkleBatchError {
    /// No messages: there is nothing to sign.
    #[error("a Merkle batch needs at least one message")]
    Empty,
    /// More than [`MERKLE_BATCH_MESSAGES_MAX`] messages.
    #[error(
        "a Merkle batch holds at most {max} messages, got {messages}; split it",
        max = MERKLE_BATCH_MESSAGES_MAX
    )]
    TooManyMessages { messages: usize },
}

/// A Merkle tree over message hashes, every level kept so proofs are read off directly.
#[derive(Clone, Debug)]
pub struct MerkleTree {
    /// `levels[0]` holds the leaf hashes, the last level the root alone.
    levels: Vec<Vec<Hash>>,
}

impl MerkleTree {
    /// Builds the tree over `message_hashes` (in this order).
    pub fn new(message_hashes: &[Hash]) -> Result<MerkleTree, MerkleBatchError> {
        if message_hashes.is_empty() {
            return Err(MerkleBatchError::Empty);
        }
        if message_hashes.len() > MERKLE_BATCH_MESSAGES_MAX {
            return Err(MerkleBatchError::TooManyMessages {
                messages: message_hashes.len(),
            });
        }
        let mut levels = vec![message_hashes.iter().map(leaf_hash).collect::<Vec<_>>()];
        while let Some(level) = levels.last().filter(|level| level.len() > 1) {
            levels.push(level.chunks(2).map(parent_of_pair).collect());
        }
        Ok(MerkleTree { levels })
    }

    /// The root hash.
    pub fn root(&self) -> Hash {
        // `new` guarantees a last level with exactly one hash.
        self.levels
            .last()
            .and_then(|level| level.first())
            .copied()
            .unwrap_or_default()
    }

    /// Number of messages.
    pub fn leaf_count(&self) -> usize {
        self.levels[0].len()
    }

    /// The inclusion proof of message `leaf_index`, or `None` past the end.
    pub fn proof(&self, leaf_index: usize) -> Option<MerkleProof> {
        if leaf_index >= self.leaf_count() {
            return None;
        }
        let mut siblings = Vec::new();
        let mut index = leaf_index;
        for level in &self.levels[..self.levels.len() - 1] {
            if let Some(sibling) = level.get(index ^ 1) {
                siblings.push(*sibling);
            }
            index /= 2;
        }
        Some(MerkleProof {
            leaf_index: leaf_index as u32,
            siblings,
        })
    }
}

/// Leaves per subtree below which [`merkle_root`] stays on the calling thread.
const ROOT_SERIAL_BELOW: usize = 4_096;

/// The root [`MerkleTree::new`] gives over `message_hashes`, on up to `threads` threads and
/// without keeping the levels (a block's transactions root: only the root is wanted).
///
/// Why the parallel split gives the same root: a node pairs with its neighbour by index, left
/// to right, and only a level's last node can be unpaired. So a subtree of `2^k` leaves that
/// starts at a multiple of `2^k` reduces to the same node wherever it sits, and the last,
/// shorter subtree reduces to the node the whole tree has there (every level before it has an
/// even count). The subtrees are reduced in parallel, then their roots by the same rule.
pub fn merkle_root(message_hashes: &[Hash], threads: usize) -> Result<Hash, MerkleBatchError> {
    let span = subtree_leaves(message_hashes.len(), threads);
    merkle_root_in_subtrees(message_hashes, span, threads)
}

/// Leaves per subtree: a power of two, about four subtrees per thread, and the whole list
/// (one subtree) when it is short or there is one thread.
fn subtree_leaves(leaves: usize, threads: usize) -> usize {
    if threads <= 1 || leaves < ROOT_SERIAL_BELOW {
        return leaves.max(1).next_power_of_two();
    }
    leaves
        .div_ceil(threads * 4)
        .max(ROOT_SERIAL_BELOW / 4)
        .next_power_of_two()
}

/// [`merkle_root`] with subtrees of `span` leaves (a power of two).
fn merkle_root_in_subtrees(
    message_hashes: &[Hash],
    span: usize,
    threads: usize,
) -> Result<Hash, MerkleBatchError> {
    if message_hashes.is_empty() {
        return Err(MerkleBatchError::Empty);
    }
    if message_hashes.len() > MERKLE_BATCH_MESSAGES_MAX {
        return Err(MerkleBatchError::TooManyMessages {
            messages: message_hashes.len(),
        });
    }
    assert!(span.is_power_of_two(), "a subtree spans 2^k leaves");
    let subtrees: Vec<&[Hash]> = message_hashes.chunks(span).collect();
    let roots = walras_par::map_in_order(&subtrees, threads, 2, |leaves| {
        reduce(leaves.iter().map(leaf_hash).collect())
    });
    Ok(reduce(roots))
}

/// The root of one level's nodes, pairing level after level in place.
fn reduce(mut level: Vec<Hash>) -> Hash {
    while level.len() > 1 {
        let pairs = level.len() / 2;
        for index in 0..pairs {
            level[index] = node_hash(&level[2 * index], &level[2 * index + 1]);
        }
        if level.len() % 2 == 1 {
            level[pairs] = level[level.len() - 1];
        }
        level.truncate(level.len().div_ceil(2));
    }
    level.first().copied().unwrap_or_default()
}

/// Where one message sits in a batch and the sibling hashes from its leaf up to the root
/// (levels where the node had no sibling contribute none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MerkleProof {
    pub leaf_index: u32,
    pub siblings: Vec<Hash>,
}

/// One signature over a whole batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MerkleBatchSignature {
    /// Number of messages in the batch; fixes the tree shape.
    pub leaf_count: u32,
    /// Signature over `H_root(leaf_count ‖ root)`.
    pub signature: Signature,
}

/// Signs every message of `message_hashes` at once; proof `i` is for message `i`.
pub fn sign_merkle_batch(
    keypair: &Keypair,
    message_hashes: &[Hash],
) -> Result<(MerkleBatchSignature, Vec<MerkleProof>), MerkleBatchError> {
    let tree = MerkleTree::new(message_hashes)?;
    let leaf_count = tree.leaf_count() as u32;
    let signature = keypair.sign(signed_root(leaf_count, &tree.root()).as_bytes());
    let proofs = (0..tree.leaf_count())
        .filter_map(|index| tree.proof(index))
        .collect();
    Ok((
        MerkleBatchSignature {
            leaf_count,
            signature,
        },
        proofs,
    ))
}

/// Checks that `message_hash` is in the batch `batch` signed by `public_key`, at the place
/// `proof` says.
pub fn verify_merkle_batch_member(
    public_key: &PublicKey,
    message_hash: &Hash,
    batch: &MerkleBatchSignature,
    proof: &MerkleProof,
) -> Result<(), VerifyError> {
    let root = root_from_proof(message_hash, batch.leaf_count, proof)
        .ok_or(VerifyError::BadInclusionProof)?;
    let message = signed_root(batch.leaf_count, &root);
    verify(public_key, message.as_bytes(), &batch.signature)
}

/// Recomputes the root, or `None` when the proof does not fit a tree of `leaf_count` leaves.
fn root_from_proof(message_hash: &Hash, leaf_count: u32, proof: &MerkleProof) -> Option<Hash> {
    if proof.leaf_index >= leaf_count {
        return None;
    }
    let mut siblings = proof.siblings.iter();
    let (mut index, mut width) = (proof.leaf_index, leaf_count);
    let mut node = leaf_hash(message_hash);
    while width > 1 {
        let has_sibling = index % 2 == 1 || index + 1 < width;
        if has_sibling {
            let sibling = siblings.next()?;
            node = if index % 2 == 0 {
                node_hash(&node, sibling)
            } else {
                node_hash(sibling, &node)
            };
        }
        index /= 2;
        width = width.div_ceil(2);
    }
    // Surplus siblings mean the proof was made for another shape.
    siblings.next().is_none().then_some(node)
}

fn leaf_hash(message_hash: &Hash) -> Hash {
    hash_in(domain::MERKLE_LEAF, message_hash.as_bytes())
}

fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut hasher = Hasher::new(domain::MERKLE_NODE);
    hasher.update(left.as_bytes()).update(right.as_bytes());
    hasher.finalize()
}

fn parent_of_pair(pair: &[Hash]) -> Hash {
    match pair {
        [left, right] => node_hash(left, right),
        [alone] => *alone,
        _ => unreachable!("chunks(2) yields one or two hashes"),
    }
}

/// The 32-byte message the batch signature signs.
fn signed_root(leaf_count: u32, root: &Hash) -> Hash {
    let mut hasher = Hasher::new(domain::MERKLE_ROOT);
    hasher
        .update(&leaf_count.to_be_bytes())
        .update(root.as_bytes());
    hasher.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn message_hashes(count: usize) -> Vec<Hash> {
        (0..count)
            .map(|index| crate::hash(format!("transaction {index}").as_bytes()))
            .collect()
    }

    fn tree_root(hashes: &[Hash]) -> Hash {
        MerkleTree::new(hashes).expect("non-empty").root()
    }

    /// Every tree shape up to 300 leaves (unpaired nodes at every level), cut into subtrees of
    /// every size from 1 leaf to more than the whole list, on 1 to 3 threads.
    #[test]
    fn roots_reduced_in_subtrees_are_the_tree_s_root() {
        for count in 1..=300 {
            let hashes = message_hashes(count);
            let expected = tree_root(&hashes);
            for span in [1, 2, 4, 8, 64, 512] {
                for threads in [1, 2, 3] {
                    assert_eq!(
                        merkle_root_in_subtrees(&hashes, span, threads),
                        Ok(expected),
                        "{count} leaves, subtrees of {span}, {threads} threads"
                    );
                }
            }
        }
    }

    #[test]
    fn a_block_sized_root_is_the_same_on_any_thread_count() {
        for count in [4_095, 20_000, 65_537] {
            let hashes = message_hashes(count);
            let expected = tree_root(&hashes);
            for threads in [0, 1, 2, 8, 16] {
                assert_eq!(
                    merkle_root(&hashes, threads),
                    Ok(expected),
                    "{count}, {threads}"
                );
            }
        }
        assert_eq!(merkle_root(&[], 4), Err(MerkleBatchError::Empty));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn any_cut_into_subtrees_gives_the_tree_s_root(
            count in 1usize..3_000,
            span_log2 in 0u32..12,
            threads in 1usize..5,
        ) {
            let hashes = message_hashes(count);
            prop_assert_eq!(
                merkle_root_in_subtrees(&hashes, 1 << span_log2, threads),
                Ok(tree_root(&hashes))
            );
        }
    }
}
