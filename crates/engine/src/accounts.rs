//! The state's accounts by slot, in chunks of [`CHUNK_ACCOUNTS`] shared by reference count.
//!
//! Admission reads a snapshot of every account as of the last committed block
//! ([`crate::AccountView`]) while the producer writes the next block's changes. A snapshot's
//! base is a clone of this table: one reference per chunk, no account copied. A write goes through
//! [`Arc::make_mut`], so the first change to a chunk still held by a snapshot copies that chunk
//! ([`CHUNK_ACCOUNTS`] accounts) and every other chunk stays shared.
//!
//! Before, the view kept its own copy of every account's admission facts, built whole at
//! start-up (1.7-2.2 s and 1.28 GB of fresh pages at 10M accounts on the 2-core VM, issue
//! 32) and updated chunk by chunk after each block: the same copies per block as now, plus
//! that second table. `std`'s `Arc` does the sharing; no crate offers a chunked
//! copy-on-write vector with disjoint mutable shards, which the block's parallel phases need.

use crate::account::Account;
use std::ops::Index;
use std::sync::Arc;

/// Accounts per shared chunk: what a block copies for each account it writes while a view's
/// base still holds the chunk, against one reference per chunk that retaking a view's base
/// takes (and later drops). At 256, blocks whose transactions came from a million different
/// accounts took twice as long to apply as blocks from 10,000 (the copies and the kernel
/// zeroing their fresh pages); at 32 the apply phase took about half as long there. Retaking a
/// base costs ~4 ms to take and as much to drop at 10M accounts (312,500 chunks) against ~1.1
/// ms at 256 (BENCHMARKS.md, "Account chunks of 32", 2-core VM); a view retakes it only every
/// few blocks (see `crate::account_view`).
pub(crate) const CHUNK_ACCOUNTS: usize = 32;

/// Accounts by slot; every chunk but the last is full.
#[derive(Clone, Debug, Default)]
pub(crate) struct Accounts {
    chunks: Vec<Arc<Vec<Account>>>,
    len: usize,
}

impl Accounts {
    /// The table of `accounts`, slot `i` holding `accounts[i]`.
    pub(crate) fn from_vec(accounts: Vec<Account>) -> Accounts {
        let mut table = Accounts::default();
        for account in accounts {
            table.push(account);
        }
        table
    }

    /// The table whose chunks are `chunks`, in order: each of [`CHUNK_ACCOUNTS`] accounts but
    /// the last, which holds at least one.
    pub(crate) fn from_chunks(chunks: Vec<Vec<Account>>) -> Accounts {
        let last = chunks.len().saturating_sub(1);
        for (index, chunk) in chunks.iter().enumerate() {
            assert!(
                chunk.len() == CHUNK_ACCOUNTS || (index == last && !chunk.is_empty()),
                "chunk {index} of {} holds {} accounts",
                chunks.len(),
                chunk.len()
            );
        }
        let len = chunks.iter().map(Vec::len).sum();
        Accounts {
            chunks: chunks.into_iter().map(Arc::new).collect(),
            len,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes of the table, O(1): its list of chunks, and each chunk (the `Arc`'s counters, the
    /// vector and [`CHUNK_ACCOUNTS`] accounts; every chunk but the last is full, the last is
    /// counted full). Balances past an account's inline ones, on the heap, are not counted.
    pub(crate) fn heap_bytes(&self) -> u64 {
        use std::mem::size_of;
        let chunk = 2 * size_of::<usize>()
            + size_of::<Vec<Account>>()
            + CHUNK_ACCOUNTS * size_of::<Account>();
        (self.chunks.capacity() * size_of::<Arc<Vec<Account>>>() + self.chunks.len() * chunk) as u64
    }

    /// Appends an account at slot [`Self::len`].
    pub(crate) fn push(&mut self, account: Account) {
        match self.chunks.last_mut() {
            Some(last) if last.len() < CHUNK_ACCOUNTS => Arc::make_mut(last).push(account),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK_ACCOUNTS);
                chunk.push(account);
                self.chunks.push(Arc::new(chunk));
            }
        }
        self.len += 1;
    }

    /// Every account in slot order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Account> {
        self.chunks.iter().flat_map(|chunk| chunk.iter())
    }

    /// The account at `slot`, to change (copying its chunk first if a snapshot holds it).
    #[cfg(test)]
    pub(crate) fn get_mut(&mut self, slot: usize) -> &mut Account {
        &mut Arc::make_mut(&mut self.chunks[slot / CHUNK_ACCOUNTS])[slot % CHUNK_ACCOUNTS]
    }

    /// Per chunk of `self`, whether `other` holds the very same chunk (for tests of what a
    /// write copies).
    #[cfg(test)]
    pub(crate) fn chunks_shared_with(&self, other: &Accounts) -> Vec<bool> {
        self.chunks
            .iter()
            .enumerate()
            .map(|(index, chunk)| {
                other
                    .chunks
                    .get(index)
                    .is_some_and(|o| Arc::ptr_eq(chunk, o))
            })
            .collect()
    }

    /// Gives each account of `self` the key decoded meanwhile in `older` (an earlier snapshot
    /// of this table), in the chunks `self` copied since: a reader of the snapshot that
    /// decoded a key after the copy decoded it in the snapshot's chunk only. Without this, at
    /// 10,000 accounts (every chunk written each block) admission would decode most keys again
    /// after every block.
    pub(crate) fn keep_decoded_keys(&self, older: &Accounts) {
        for (chunk, older_chunk) in self.chunks.iter().zip(&older.chunks) {
            if Arc::ptr_eq(chunk, older_chunk) {
                continue;
            }
            for (account, older_account) in chunk.iter().zip(older_chunk.iter()) {
                account.keep_decoded_key(older_account);
            }
        }
    }

    /// The table cut into disjoint ranges of `width` slots (a multiple of
    /// [`CHUNK_ACCOUNTS`]), each writable on its own thread; the last may be shorter.
    pub(crate) fn shards_mut(&mut self, width: usize) -> Vec<AccountShard<'_>> {
        assert!(
            width > 0 && width.is_multiple_of(CHUNK_ACCOUNTS),
            "shard width {width} is not a positive multiple of {CHUNK_ACCOUNTS}"
        );
        self.chunks
            .chunks_mut(width / CHUNK_ACCOUNTS)
            .enumerate()
            .map(|(shard, chunks)| AccountShard {
                base: shard * width,
                chunks,
            })
            .collect()
    }
}

impl Index<usize> for Accounts {
    type Output = Account;

    fn index(&self, slot: usize) -> &Account {
        &self.chunks[slot / CHUNK_ACCOUNTS][slot % CHUNK_ACCOUNTS]
    }
}

/// Equal when every account is: how the chunks are shared is not a fact of the state.
impl PartialEq for Accounts {
    fn eq(&self, other: &Accounts) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for Accounts {}

/// The accounts at slots `base..` of one shard of [`Accounts::shards_mut`].
pub(crate) struct AccountShard<'a> {
    base: usize,
    chunks: &'a mut [Arc<Vec<Account>>],
}

impl AccountShard<'_> {
    /// The account at `slot` (a slot of this shard), to change; its chunk is copied first if
    /// a snapshot still holds it.
    pub(crate) fn get_mut(&mut self, slot: usize) -> &mut Account {
        let offset = slot - self.base;
        &mut Arc::make_mut(&mut self.chunks[offset / CHUNK_ACCOUNTS])[offset % CHUNK_ACCOUNTS]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use walras_types::AssetId;

    fn account(n: u64) -> Account {
        Account::new([n as u8; 32], vec![(AssetId(0), n + 1)])
    }

    /// A snapshot keeps what it saw: a write after it copies the written chunk only.
    #[test]
    fn a_clone_keeps_its_accounts_while_the_table_changes_and_shares_the_rest() {
        let count = 3 * CHUNK_ACCOUNTS + 5;
        let mut table = Accounts::from_vec((0..count as u64).map(account).collect());
        let snapshot = table.clone();
        table.get_mut(CHUNK_ACCOUNTS + 7).credit(AssetId(1), 9);
        {
            let mut shards = table.shards_mut(2 * CHUNK_ACCOUNTS);
            assert_eq!(shards.len(), 2);
            shards[1].get_mut(count - 1).credit(AssetId(2), 4);
        }
        table.push(account(99));
        assert_eq!(snapshot.len(), count);
        assert_eq!(table.len(), count + 1);
        for slot in 0..count {
            assert_eq!(snapshot[slot], account(slot as u64), "slot {slot}");
        }
        assert_eq!(table[CHUNK_ACCOUNTS + 7].balance(AssetId(1)), 9);
        assert_eq!(table[count - 1].balance(AssetId(2)), 4);
        assert_eq!(table[count], account(99));
        assert_eq!(
            table.chunks_shared_with(&snapshot),
            vec![true, false, true, false]
        );
    }

    #[test]
    fn chunks_laid_end_to_end_are_the_table_of_their_accounts() {
        let count = 2 * CHUNK_ACCOUNTS + 1;
        let all: Vec<Account> = (0..count as u64).map(account).collect();
        let chunks: Vec<Vec<Account>> = all.chunks(CHUNK_ACCOUNTS).map(<[_]>::to_vec).collect();
        assert_eq!(
            Accounts::from_chunks(chunks),
            Accounts::from_vec(all.clone())
        );
        assert!(Accounts::from_vec(all)
            .iter()
            .map(|a| a.public_key[0])
            .eq((0..count).map(|n| n as u8)));
    }

    #[test]
    #[should_panic(expected = "holds 3 accounts")]
    fn a_short_chunk_before_the_last_is_refused() {
        let chunks = vec![(0..3).map(account).collect(), (0..3).map(account).collect()];
        let _ = Accounts::from_chunks(chunks);
    }
}
