//! An in-memory index of recently committed transactions, for `GET /v1/transactions/{hash}`.
//!
//! Why not in the store: an index keyed by transaction hash is a random-key B-tree, and each
//! block of n transactions would dirty about n LMDB pages (4 KiB each) to sync; blocks are
//! written in height order and stay cheap. The index covers at least the last
//! [`RECENT_TRANSACTIONS_MIN`] committed transactions (whole blocks) and is rebuilt from the
//! store's last blocks during recovery; older transactions are found through their block.

use std::collections::{HashMap, VecDeque};
use walras_crypto::Hash;
use walras_engine::DropReason;

/// The index keeps whole blocks until it holds at least this many transactions.
pub(crate) const RECENT_TRANSACTIONS_MIN: usize = 1_000_000;

/// Where a committed transaction is and what it did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Committed {
    pub height: u64,
    pub index: u32,
    /// `None` when accepted.
    pub dropped: Option<DropReason>,
}

#[derive(Default)]
pub struct RecentTransactions {
    by_hash: HashMap<Hash, Committed>,
    /// Per indexed block, oldest first: its height and hashes.
    blocks: VecDeque<(u64, Vec<Hash>)>,
    min_transactions: usize,
}

impl RecentTransactions {
    pub fn new(min_transactions: usize) -> RecentTransactions {
        RecentTransactions {
            min_transactions,
            ..RecentTransactions::default()
        }
    }

    /// Transactions indexed.
    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// Bytes of the index on the heap, O(indexed blocks): the map by hash and the per-block
    /// lists of hashes, at their capacities.
    pub fn heap_bytes(&self) -> u64 {
        use std::mem::size_of;
        let map = walras_engine::hash_map_heap_bytes(
            self.by_hash.capacity(),
            size_of::<(Hash, Committed)>(),
        );
        let lists: usize = self
            .blocks
            .iter()
            .map(|(_, hashes)| hashes.capacity() * size_of::<Hash>())
            .sum();
        map + (self.blocks.capacity() * size_of::<(u64, Vec<Hash>)>() + lists) as u64
    }

    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    pub fn get(&self, hash: &Hash) -> Option<Committed> {
        self.by_hash.get(hash).copied()
    }

    /// Indexes block `height`, whose transactions have `hashes` in block order, and evicts
    /// the oldest blocks not needed to keep `min_transactions`.
    pub fn insert_block(&mut self, height: u64, hashes: Vec<Hash>, dropped: &[(u32, DropReason)]) {
        let reasons: HashMap<u32, DropReason> = dropped.iter().copied().collect();
        for (index, hash) in hashes.iter().enumerate() {
            let index = index as u32;
            let entry = Committed {
                height,
                index,
                dropped: reasons.get(&index).copied(),
            };
            // A transaction included twice (the second time dropped as a replay) keeps the
            // entry of its first inclusion.
            self.by_hash.entry(*hash).or_insert(entry);
        }
        self.blocks.push_back((height, hashes));
        self.evict();
    }

    fn evict(&mut self) {
        loop {
            let newer: usize = self.by_hash.len();
            let Some((height, oldest)) = self.blocks.front() else {
                return;
            };
            if newer.saturating_sub(oldest.len()) < self.min_transactions {
                return;
            }
            let height = *height;
            if let Some((_, hashes)) = self.blocks.pop_front() {
                for hash in hashes {
                    if self.by_hash.get(&hash).is_some_and(|c| c.height == height) {
                        self.by_hash.remove(&hash);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hashes(block: u8, count: u8) -> Vec<Hash> {
        (0..count).map(|i| Hash([block; 32]).xor_byte(i)).collect()
    }

    trait XorByte {
        fn xor_byte(self, byte: u8) -> Hash;
    }

    impl XorByte for Hash {
        fn xor_byte(mut self, byte: u8) -> Hash {
            self.0[31] ^= byte;
            self
        }
    }

    #[test]
    fn keeps_whole_blocks_until_the_minimum_and_reports_drops() {
        let mut recent = RecentTransactions::new(5);
        recent.insert_block(1, hashes(1, 3), &[]);
        recent.insert_block(2, hashes(2, 3), &[(1, DropReason::AccountOverdraft)]);
        assert!(
            recent.get(&hashes(1, 3)[0]).is_some(),
            "6 - 3 < 5: block 1 stays"
        );
        recent.insert_block(3, hashes(3, 3), &[]);
        assert_eq!(
            recent.get(&hashes(1, 3)[0]),
            None,
            "9 - 3 >= 5: block 1 goes"
        );
        assert_eq!(
            recent.get(&hashes(2, 3)[1]),
            Some(Committed {
                height: 2,
                index: 1,
                dropped: Some(DropReason::AccountOverdraft)
            })
        );
        assert_eq!(recent.get(&hashes(3, 3)[2]).map(|c| c.height), Some(3));
    }
}
