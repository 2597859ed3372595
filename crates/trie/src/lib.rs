//! A Merkle-Patricia trie built for blocks (SPEEDEX §9.3, appendix K): changes arrive in
//! batches, deletions are marked and swept in bulk, and the root hash is computed once per block.
//!
//! Keys are fixed-length byte strings (`KEY_BYTES`: 8 for accounts; for offers, big-endian
//! price ‖ account ‖ offer id, so key order is the canonical offer order), read as strings of
//! 4-bit nibbles, most significant first. Values are any `V: AsRef<[u8]>` (`Vec<u8>` by
//! default), or each leaf's hash alone ([`LeafHash`]) where the caller keeps the values' bytes.
//!
//! # Operations
//!
//! - [`Trie::insert_batch`]: sort the batch, then merge it top-down; at each node the batch
//!   splits by nibble into runs for disjoint subtrees, each merged into the existing child or
//!   built as a fresh local subtree, on separate threads (`walras-par` pools, `threads`
//!   parameter). Same trie for any thread count and any batch split.
//! - [`Trie::from_sorted_pieces`]: a whole trie from entries already in key order, made in
//!   pieces on several threads and written straight into the build (a restart's account trie).
//! - [`Trie::mark_deleted`] (through `&self`, thread-safe) sets a leaf's tombstone and counts it
//!   in every branch above; [`Trie::clean`] removes tombstoned leaves in one pass that skips
//!   subtrees without any and drops fully deleted subtrees whole.
//! - [`Trie::root_hash`] recomputes only stale hashes, splitting the work across threads by the
//!   leaf counts of the stale subtrees.
//! - [`Trie::get`], [`Trie::iter`], [`Trie::range_from`]: live entries, in key order.
//! - [`Trie::prove`] and [`verify`]: membership and non-membership proofs, with a canonical
//!   binary encoding ([`Proof::to_bytes`], [`Proof::from_bytes`]).
//! - [`Trie::len`] is O(1): every branch counts the leaves below it.
//!
//! # Node layout
//!
//! A node is a leaf or a branch, each boxed; a parent holds its children as `Vec<Node>` (16 bytes
//! each: tag and pointer).
//!
//! - **Leaf**: `key: [u8; KEY_BYTES]`, `value: V` (the value's bytes, or only the leaf's hash:
//!   [`LeafHash`]), cached `hash: Option<Hash>` (filled by the next root-hash computation;
//!   nothing for a [`LeafHash`], which is its hash),
//!   `deleted: AtomicBool` (tombstone).
//! - **Branch**: `prefix: [u8; KEY_BYTES]` (the first `depth` nibbles shared by every key below,
//!   later nibbles zero), `depth: u8`, `bitmap: u16` (bit n set: a child for nibble n),
//!   `children` (one per bit, in nibble order), `leaves: u64` (leaves below, tombstoned ones
//!   included), `branches: u64` (branches below, itself included: with `leaves`, the trie's
//!   memory, [`Trie::memory`]), `deleted: AtomicU64` (tombstoned leaves below), cached `live_hash:
//!   Option<Hash>`, `dirty: AtomicBool` (something below changed since `live_hash`).
//!
//! Path compression: a branch exists only where keys differ, and after `clean` every branch has
//! at least two children, so the shape is a function of the key set alone and no chain of
//! single-child nodes exists. Between a deletion and `clean`, branches may have zero or one live
//! child; the hash treats them as already gone (below).
//!
//! # Hashing scheme
//!
//! BLAKE2b-256 in three domains (BLAKE2b personalization, see `walras_crypto::domain`), so a
//! leaf, a branch and the empty root can never be confused with each other or with any other
//! hash in Walras:
//!
//! - leaf: `H_leaf(KEY_BYTES as u8 ‖ key ‖ value)`. The key is fixed-length, so the value is
//!   the rest of the input; the hash commits to the leaf's whole path (its key).
//! - branch: `H_branch(depth as u8 ‖ prefix[..⌈depth/2⌉] ‖ bitmap as u16 big-endian ‖ the
//!   children's hashes in nibble order)`, where `prefix` is the branch's *absolute* path from
//!   the root (an odd final nibble occupies the high half of the last byte, low half zero) and
//!   `bitmap` lists its live children. A branch commits to where it is in the key space, its
//!   compressed path included, so no proof can move it elsewhere.
//! - empty trie: `H_empty("")` ([`empty_root_hash`]).
//!
//! Hashes cover live leaves only, as the trie would be after `clean`: a tombstoned leaf has no
//! hash, a branch with no live child has none, and a branch with exactly one live child takes
//! that child's hash unchanged. This is sound because hashes commit to absolute paths: a child's
//! hash does not depend on where its parent branches, so removing a single-child branch changes
//! nothing above. Hence the root hash depends only on the set of live (key, value) pairs: never
//! on insertion order, batching, thread count or deletion history.
//!
//! # Proofs
//!
//! A [`Proof`] lists the live branches on the key's path (depth, live bitmap, other children's
//! hashes) and the node where the path stops: the key's own leaf (member); another leaf in its
//! place, a branch whose prefix departs from the key, or a branch without a child at the key's
//! nibble (absent); or the empty trie. [`verify`] takes nothing on trust: it checks the path is
//! well formed and follows the key, rebuilds every hash (deriving branch prefixes from the key)
//! and compares with the root.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod delete;
mod error;
mod hashing;
mod invariants;
mod iter;
mod merge;
mod nibble;
mod node;
mod parallel;
mod proof;
mod trie;
mod value;

pub use error::{ProofDecodeError, ProofError};
pub use hashing::empty_root_hash;
pub use iter::Iter;
pub use proof::{verify, verify_bytes, Proof, ProofEnd, ProofStep};
pub use trie::{Trie, TrieMemory, KEY_BYTES_MAX};
pub use value::{leaf_hashes, LeafHash, LeafInput, Value};
