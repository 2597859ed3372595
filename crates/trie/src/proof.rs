//! Membership and non-membership proofs, their verification and binary encoding.
//!
//! A proof describes the *live* trie (as it would be after `clean`) along the key's path: the
//! branches passed on the way down ([`ProofStep`]: depth, live-child bitmap, the other children's
//! hashes) and the node where the walk stops ([`ProofEnd`]). The verifier rebuilds the hashes
//! bottom-up, using the key itself for every step's prefix, and compares with the root.

use std::cmp::Ordering;
use std::iter::once;
use walras_crypto::{Hash, HASH_BYTES};
use walras_types::codec::{Reader, Writer};

use crate::error::{ProofDecodeError, ProofError};
use crate::hashing::{branch_hash, empty_root_hash, live_hash_now, LiveChildren};
use crate::nibble::{
    child_position, common_prefix_nibbles, compare_prefix, nibble, prefix_bytes, truncated,
};
use crate::node::Node;
use crate::value::leaf_hash;
use crate::value::Value;

/// Evidence about one key under a root hash; check it with [`verify`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proof<const KEY_BYTES: usize> {
    /// Branches on the key's path, root first.
    pub steps: Vec<ProofStep>,
    /// Where the path stops.
    pub end: ProofEnd<KEY_BYTES>,
}

/// A branch the key's path goes through. Its prefix is the key's first `depth` nibbles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProofStep {
    pub depth: u8,
    /// Live children, including the one on the path (at the key's nibble `depth`).
    pub bitmap: u16,
    /// Hashes of the other live children, in nibble order.
    pub siblings: Vec<Hash>,
}

/// The node where the key's path stops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProofEnd<const KEY_BYTES: usize> {
    /// The trie has no live leaf (only as the root).
    Empty,
    /// A leaf: the key itself (membership) or another key in its place (absence).
    Leaf {
        key: [u8; KEY_BYTES],
        value: Vec<u8>,
    },
    /// A branch whose prefix departs from the key, or that has no child at the key's nibble
    /// (absence).
    Branch {
        depth: u8,
        prefix: [u8; KEY_BYTES],
        bitmap: u16,
        children: Vec<Hash>,
    },
}

const END_EMPTY: u8 = 0;
const END_LEAF: u8 = 1;
const END_BRANCH: u8 = 2;

/// Proves `key`'s presence or absence in the live trie under `root`.
pub(crate) fn prove<const KEY_BYTES: usize, V: AsRef<[u8]>>(
    root: Option<&Node<KEY_BYTES, V>>,
    key: &[u8; KEY_BYTES],
) -> Proof<KEY_BYTES> {
    let mut steps = Vec::new();
    let mut current = root.and_then(effective);
    while let Some(node) = current {
        let branch = match node {
            Node::Leaf(leaf) => {
                let end = ProofEnd::Leaf {
                    key: leaf.key,
                    value: leaf.value.as_ref().to_vec(),
                };
                return Proof { steps, end };
            }
            Node::Branch(branch) => branch,
        };
        let depth = usize::from(branch.depth);
        let live = LiveChildren::collect(branch.bitmap, branch.children.iter().map(live_hash_now));
        let key_nibble = nibble(key, depth);
        let on_path = compare_prefix(&branch.prefix, key, depth) == Ordering::Equal
            && live.bitmap() & (1 << key_nibble) != 0;
        if !on_path {
            let children = live.as_slice().iter().map(|(_, hash)| *hash).collect();
            let end = ProofEnd::Branch {
                depth: branch.depth,
                prefix: branch.prefix,
                bitmap: live.bitmap(),
                children,
            };
            return Proof { steps, end };
        }
        let siblings = live
            .as_slice()
            .iter()
            .filter(|(n, _)| *n != key_nibble)
            .map(|(_, hash)| *hash)
            .collect();
        steps.push(ProofStep {
            depth: branch.depth,
            bitmap: live.bitmap(),
            siblings,
        });
        current = branch.child(key_nibble).and_then(effective);
    }
    Proof {
        steps,
        end: ProofEnd::Empty,
    }
}

/// The node that stands in `node`'s place in the live trie: branches with one live child are
/// see-through (`clean` would replace them by that child); `None` when nothing below is live.
fn effective<const KEY_BYTES: usize, V: Value>(
    node: &Node<KEY_BYTES, V>,
) -> Option<&Node<KEY_BYTES, V>> {
    let mut node = node;
    loop {
        if node.live_leaves() == 0 {
            return None;
        }
        let Node::Branch(branch) = node else {
            return Some(node);
        };
        let mut live = branch
            .children
            .iter()
            .filter(|child| child.live_leaves() > 0);
        let first_live = live.next()?;
        if live.next().is_some() {
            return Some(node);
        }
        node = first_live;
    }
}

/// Checks `proof` for `key` against `root`: `Ok(Some(value))` proves the key is present with that
/// value, `Ok(None)` that it is absent. Trusts nothing in the proof and never panics.
pub fn verify<const KEY_BYTES: usize>(
    root: Hash,
    key: &[u8; KEY_BYTES],
    proof: &Proof<KEY_BYTES>,
) -> Result<Option<Vec<u8>>, ProofError> {
    let floor_depth = check_steps(key, &proof.steps)?;
    let (end_hash, found) = end_hash(key, &proof.end, floor_depth, proof.steps.len())?;
    let computed = fold_up(key, &proof.steps, end_hash);
    if computed != root {
        return Err(ProofError::RootMismatch {
            expected: root,
            computed,
        });
    }
    Ok(found)
}

/// [`verify`] for a proof in its binary encoding.
pub fn verify_bytes<const KEY_BYTES: usize>(
    root: Hash,
    key: &[u8; KEY_BYTES],
    proof_bytes: &[u8],
) -> Result<Option<Vec<u8>>, ProofError> {
    verify(root, key, &Proof::from_bytes(proof_bytes)?)
}

/// Checks each step is deeper than the last and branches on the key's nibble; returns the
/// smallest depth the end node may have.
fn check_steps<const KEY_BYTES: usize>(
    key: &[u8; KEY_BYTES],
    steps: &[ProofStep],
) -> Result<usize, ProofError> {
    let mut floor_depth = 0;
    for (index, step) in steps.iter().enumerate() {
        let depth = usize::from(step.depth);
        let on_path = depth >= floor_depth
            && depth < 2 * KEY_BYTES
            && step.bitmap & (1 << nibble(key, depth)) != 0;
        if !on_path {
            return Err(ProofError::StepOffPath { step: index });
        }
        let children = step.bitmap.count_ones() as usize;
        if children < 2 || step.siblings.len() != children - 1 {
            return Err(ProofError::WrongSiblingCount { step: index });
        }
        floor_depth = depth + 1;
    }
    Ok(floor_depth)
}

/// The end node's hash and, for a member, its value. `floor_depth`: nibbles the end node must
/// share with the key (those fixed by the steps above it).
fn end_hash<const KEY_BYTES: usize>(
    key: &[u8; KEY_BYTES],
    end: &ProofEnd<KEY_BYTES>,
    floor_depth: usize,
    steps: usize,
) -> Result<(Hash, Option<Vec<u8>>), ProofError> {
    match end {
        ProofEnd::Empty if steps > 0 => Err(ProofError::EmptyBelowRoot),
        ProofEnd::Empty => Ok((empty_root_hash(), None)),
        ProofEnd::Leaf {
            key: leaf_key,
            value,
        } => {
            if common_prefix_nibbles(leaf_key, key) < floor_depth {
                return Err(ProofError::EndOffPath);
            }
            let found = (leaf_key == key).then(|| value.clone());
            Ok((leaf_hash(leaf_key, value), found))
        }
        ProofEnd::Branch {
            depth,
            prefix,
            bitmap,
            children,
        } => {
            check_end_branch(key, *depth, prefix, *bitmap, children, floor_depth, steps)?;
            Ok((branch_hash(*depth, prefix, *bitmap, children.iter()), None))
        }
    }
}

/// An end branch must sit on the key's path and show that the key is not below it.
fn check_end_branch<const KEY_BYTES: usize>(
    key: &[u8; KEY_BYTES],
    depth: u8,
    prefix: &[u8; KEY_BYTES],
    bitmap: u16,
    children: &[Hash],
    floor_depth: usize,
    steps: usize,
) -> Result<(), ProofError> {
    let depth = usize::from(depth);
    let placed = depth >= floor_depth
        && depth < 2 * KEY_BYTES
        && truncated(prefix, depth) == *prefix
        && compare_prefix(prefix, key, floor_depth) == Ordering::Equal;
    if !placed {
        return Err(ProofError::EndOffPath);
    }
    if bitmap.count_ones() < 2 || children.len() != bitmap.count_ones() as usize {
        return Err(ProofError::WrongSiblingCount { step: steps });
    }
    let key_may_be_below = compare_prefix(prefix, key, depth) == Ordering::Equal
        && bitmap & (1 << nibble(key, depth)) != 0;
    if key_may_be_below {
        return Err(ProofError::Incomplete);
    }
    Ok(())
}

/// Hashes from the end node up through the steps (already checked) to the root.
fn fold_up<const KEY_BYTES: usize>(key: &[u8; KEY_BYTES], steps: &[ProofStep], end: Hash) -> Hash {
    steps.iter().rev().fold(end, |below, step| {
        let depth = usize::from(step.depth);
        let position = child_position(step.bitmap, nibble(key, depth));
        let (left, right) = step.siblings.split_at(position);
        let children = left.iter().chain(once(&below)).chain(right);
        branch_hash(step.depth, &truncated(key, depth), step.bitmap, children)
    })
}

impl<const KEY_BYTES: usize> Proof<KEY_BYTES> {
    /// Canonical encoding:
    ///
    /// ```text
    /// key_bytes: u8, step_count: u8,
    /// step_count × (depth: u8, bitmap: u16 BE, (popcount(bitmap) − 1) × hash: [u8; 32]),
    /// end: 0                                                        (empty trie)
    ///    | 1, key: [u8; key_bytes], value_len: u32 BE, value         (leaf)
    ///    | 2, depth: u8, prefix: [u8; ⌈depth/2⌉], bitmap: u16 BE,
    ///         popcount(bitmap) × hash: [u8; 32]                      (branch)
    /// ```
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = vec![KEY_BYTES as u8, self.steps.len() as u8];
        for step in &self.steps {
            out.put_u8(step.depth);
            out.put_u16(step.bitmap);
            put_hashes(&mut out, &step.siblings);
        }
        match &self.end {
            ProofEnd::Empty => out.put_u8(END_EMPTY),
            ProofEnd::Leaf { key, value } => {
                out.put_u8(END_LEAF);
                out.put_bytes(key);
                out.put_u32(value.len() as u32);
                out.put_bytes(value);
            }
            ProofEnd::Branch {
                depth,
                prefix,
                bitmap,
                children,
            } => {
                out.put_u8(END_BRANCH);
                out.put_u8(*depth);
                out.put_bytes(&prefix[..prefix_bytes(usize::from(*depth))]);
                out.put_u16(*bitmap);
                put_hashes(&mut out, children);
            }
        }
        out
    }

    /// Decodes [`Proof::to_bytes`]'s format, refusing anything non-canonical. Never panics.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ProofDecodeError> {
        let mut reader = Reader::new(bytes);
        let key_bytes = usize::from(reader.u8()?);
        if key_bytes != KEY_BYTES {
            return Err(ProofDecodeError::KeyLength {
                expected: KEY_BYTES,
                actual: key_bytes,
            });
        }
        let step_count = usize::from(reader.u8()?);
        if step_count > 2 * KEY_BYTES {
            return Err(ProofDecodeError::TooManySteps {
                steps: step_count,
                max: 2 * KEY_BYTES,
            });
        }
        let steps = (0..step_count)
            .map(|_| read_step::<KEY_BYTES>(&mut reader))
            .collect::<Result<_, _>>()?;
        let end = read_end(&mut reader)?;
        reader.finish()?;
        Ok(Proof { steps, end })
    }
}

fn read_step<const KEY_BYTES: usize>(
    reader: &mut Reader<'_>,
) -> Result<ProofStep, ProofDecodeError> {
    let depth = read_depth::<KEY_BYTES>(reader)?;
    let bitmap = read_bitmap(reader)?;
    let siblings = read_hashes(reader, bitmap.count_ones() as usize - 1)?;
    Ok(ProofStep {
        depth,
        bitmap,
        siblings,
    })
}

fn read_end<const KEY_BYTES: usize>(
    reader: &mut Reader<'_>,
) -> Result<ProofEnd<KEY_BYTES>, ProofDecodeError> {
    match reader.u8()? {
        END_EMPTY => Ok(ProofEnd::Empty),
        END_LEAF => {
            let key = reader.array::<KEY_BYTES>()?;
            let value_len = reader.u32()? as usize;
            let value = reader.take(value_len)?.to_vec();
            Ok(ProofEnd::Leaf { key, value })
        }
        END_BRANCH => {
            let depth = read_depth::<KEY_BYTES>(reader)?;
            let mut prefix = [0u8; KEY_BYTES];
            let prefix_len = prefix_bytes(usize::from(depth));
            prefix[..prefix_len].copy_from_slice(reader.take(prefix_len)?);
            if truncated(&prefix, usize::from(depth)) != prefix {
                return Err(ProofDecodeError::NonCanonicalPrefix);
            }
            let bitmap = read_bitmap(reader)?;
            let children = read_hashes(reader, bitmap.count_ones() as usize)?;
            Ok(ProofEnd::Branch {
                depth,
                prefix,
                bitmap,
                children,
            })
        }
        tag => Err(ProofDecodeError::UnknownEndTag { tag }),
    }
}

/// A branch depth: strictly inside the key.
fn read_depth<const KEY_BYTES: usize>(reader: &mut Reader<'_>) -> Result<u8, ProofDecodeError> {
    let depth = reader.u8()?;
    if usize::from(depth) >= 2 * KEY_BYTES {
        return Err(ProofDecodeError::DepthOutOfRange {
            depth,
            key_nibbles: 2 * KEY_BYTES,
        });
    }
    Ok(depth)
}

/// A branch's child bitmap: at least two children.
fn read_bitmap(reader: &mut Reader<'_>) -> Result<u16, ProofDecodeError> {
    let bitmap = reader.u16()?;
    if bitmap.count_ones() < 2 {
        return Err(ProofDecodeError::TooFewChildren { bitmap });
    }
    Ok(bitmap)
}

/// `count` hashes (bitmaps hold at most 16 children, so no count needs a limit here).
fn read_hashes(reader: &mut Reader<'_>, count: usize) -> Result<Vec<Hash>, ProofDecodeError> {
    (0..count)
        .map(|_| Ok(Hash(reader.array::<HASH_BYTES>()?)))
        .collect()
}

fn put_hashes(out: &mut Vec<u8>, hashes: &[Hash]) {
    hashes
        .iter()
        .for_each(|hash| out.put_bytes(hash.as_bytes()));
}
