//! The per-offer index: which blocks touched each offer, written with the block itself.
//!
//! An offer is named by its account and id (the sequence number of the transaction that
//! created it). Answering "what happened to offer (account, id)?" or "which accounts have an
//! offer id?" from the block log alone means decoding every block; this index answers both
//! with one B-tree descent and a short prefix scan.
//!
//! Key: offer id, account, height (u64 big-endian each: LMDB's byte order is then id order,
//! then account order, then height order, so one id's accounts and one offer's heights are
//! contiguous). Value: one byte of [`OfferTouch`] flags, what the block did to the offer.
//!
//! [`OfferTouch`] entries are derived from the block and its results only. They reach the
//! `offers` table in batches, not block by block. Keyed by offer id, a block's entries fall on
//! pages all over the table's newest ids (each account is at its own sequence number), and
//! written with their block they dirtied about 800 pages (3 MB) of LMDB for a 2,000-transaction
//! block after a few minutes of load, several times the block itself, and more as the
//! accounts' sequence numbers drift apart (BENCHMARKS.md, "The offer index written in
//! slices"). So the entries wait in memory ([`Pending`]), split in
//! [`crate::StoreOptions::offer_index_flush_blocks`] slices by offer id, and block `h`'s
//! transaction writes slice `h mod slices`: each page of the table is written about once per
//! that many blocks, and every block writes about the same amount (a batch written whole
//! every so many blocks was one 100–200 ms write). The watermark (`meta/offer_index_through`)
//! is the newest height whose blocks' entries are all in the table. Readers see the table and
//! the pending entries merged, so nothing changes for them. The pending entries are derived
//! data: a crash loses them and the next open derives the entries of the stored blocks above
//! the watermark again (some of which their slice had already written: the same key with the
//! same value, read once), so the index never names a block that is not stored nor misses one
//! that is. A store written before the index existed has neither watermark nor stamp; opening
//! it indexes every stored block in the opening transaction, then sets the watermark (once;
//! see `BlockStore::open_with`). The builds before the slices stamped a store whose table held
//! every stored block (`meta/offer_index`): its open sets the watermark to its tip and removes
//! the stamp, so that such a build, opening a store of this one, indexes it again rather than
//! trust a table without the newest blocks' entries.

use std::collections::BTreeMap;
use walras_engine::{Block, DropReason, OfferFill};
use walras_types::{AccountId, OfferId};

/// What one block did to one offer (flags; several may hold).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OfferTouch(pub u8);

impl OfferTouch {
    /// A transaction of the account with the offer's id as its sequence number creates an
    /// offer (accepted or dropped by the block filter).
    pub const CREATES: OfferTouch = OfferTouch(1);
    /// Another transaction of the account with that sequence number (accepted or dropped):
    /// it uses up the sequence number, so a later creation with it is a replay.
    pub const SEQUENCE: OfferTouch = OfferTouch(2);
    /// An accepted cancel names the offer.
    pub const CANCELLED: OfferTouch = OfferTouch(4);
    /// The offer sold something in the block's clearing (known when the block was stored with
    /// its fills).
    pub const TRADED: OfferTouch = OfferTouch(8);

    pub fn contains(self, other: OfferTouch) -> bool {
        self.0 & other.0 == other.0
    }
}

/// Bytes of an index key: id, account, height.
pub(crate) const OFFER_KEY_BYTES: usize = 24;

pub(crate) fn offer_key(id: OfferId, account: AccountId, height: u64) -> [u8; OFFER_KEY_BYTES] {
    let mut key = [0; OFFER_KEY_BYTES];
    key[..8].copy_from_slice(&id.0.to_be_bytes());
    key[8..16].copy_from_slice(&account.0.to_be_bytes());
    key[16..].copy_from_slice(&height.to_be_bytes());
    key
}

/// The prefix of every key of offer `id` (all accounts), or of `(id, account)`.
pub(crate) fn offer_prefix(id: OfferId, account: Option<AccountId>) -> Vec<u8> {
    let mut prefix = id.0.to_be_bytes().to_vec();
    if let Some(account) = account {
        prefix.extend_from_slice(&account.0.to_be_bytes());
    }
    prefix
}

/// The height in a key of [`OFFER_KEY_BYTES`].
pub(crate) fn height_of(key: &[u8; OFFER_KEY_BYTES]) -> u64 {
    let mut bytes = [0; 8];
    bytes.copy_from_slice(&key[16..]);
    u64::from_be_bytes(bytes)
}

/// A block's index entries, in key order.
pub(crate) type Entries = BTreeMap<[u8; OFFER_KEY_BYTES], u8>;

/// The index entries not yet in the `offers` table, by slice: the entries of offer id `i` are
/// in slice `i mod slices`, and block `h`'s transaction writes slice `h mod slices` (what it
/// held, and the block's own entries of that slice). So each slice is written every `slices`
/// blocks, a batch of that many blocks' entries on the table's pages of its ids, and every
/// block writes about the same amount: no block pays for a whole batch (see the module's
/// documentation).
#[derive(Debug)]
pub(crate) struct Pending {
    /// The watermark: every entry of every block up to here is in the table (stored in
    /// `meta`; the open derives the entries of the blocks above it again).
    pub(crate) through: u64,
    /// The newest block whose entries were added.
    tip: u64,
    /// Per slice, the newest block whose transaction wrote the slice.
    written_at: Vec<u64>,
    /// Per slice, entries not yet written (after an open some may also be in the table: the
    /// same key with the same value, derived from the same block).
    slices: Vec<Entries>,
}

impl Pending {
    /// Nothing pending above a table that holds every block up to `through`, the tip, in
    /// `slices` slices (at least 1).
    pub(crate) fn above(through: u64, slices: u64) -> Pending {
        let slices = slices.max(1) as usize;
        Pending {
            through,
            tip: through,
            written_at: vec![through; slices],
            slices: vec![Entries::new(); slices],
        }
    }

    /// Adds the entries of block `tip + 1`.
    pub(crate) fn add_block(&mut self, entries: Entries) {
        let height = self.tip + 1;
        debug_assert!(entries.keys().all(|key| height_of(key) == height));
        for (key, touch) in entries {
            let slice = self.slice_of(&key);
            self.slices[slice].insert(key, touch);
        }
        self.tip = height;
    }

    /// The height of the block whose entries come next.
    pub(crate) fn next_height(&self) -> u64 {
        self.tip + 1
    }

    pub(crate) fn all_slices(&self) -> std::ops::Range<usize> {
        0..self.slices.len()
    }

    /// The slice block `height`'s transaction writes.
    pub(crate) fn slice_written_by(&self, height: u64) -> usize {
        (height % self.slices.len() as u64) as usize
    }

    /// Entries held in all slices.
    pub(crate) fn len(&self) -> usize {
        self.slices.iter().map(Entries::len).sum()
    }

    /// What block `tip + 1`'s transaction writes, given its `entries`: the entries of the
    /// slices `written` and the block's own entries in them, in key order per slice.
    pub(crate) fn to_write<'a>(
        &'a self,
        written: &'a [usize],
        entries: &'a Entries,
    ) -> impl Iterator<Item = (&'a [u8; OFFER_KEY_BYTES], &'a u8)> + 'a {
        written.iter().flat_map(move |slice| {
            self.slices[*slice].iter().chain(
                entries
                    .iter()
                    .filter(move |(key, _)| self.slice_of(key) == *slice),
            )
        })
    }

    /// The watermark once block `tip + 1`'s transaction has written the slices `written`.
    pub(crate) fn through_after(&self, written: &[usize]) -> u64 {
        let height = self.tip + 1;
        (0..self.slices.len())
            .map(|slice| {
                if written.contains(&slice) {
                    height
                } else {
                    self.written_at[slice]
                }
            })
            .min()
            .unwrap_or(height)
    }

    /// Block `tip + 1` with `entries` committed, with the slices `written`.
    pub(crate) fn committed(&mut self, written: &[usize], entries: Entries) {
        let through = self.through_after(written);
        let height = self.tip + 1;
        for slice in written {
            self.slices[*slice].clear();
            self.written_at[*slice] = height;
        }
        let kept = entries
            .into_iter()
            .filter(|(key, _)| !written.contains(&self.slice_of(key)))
            .collect();
        self.add_block(kept);
        self.through = through;
    }

    /// Entries whose key starts with `prefix` (an offer id, then possibly an account), in key
    /// order.
    pub(crate) fn with_prefix<'a>(
        &'a self,
        prefix: &'a [u8],
    ) -> impl Iterator<Item = (&'a [u8; OFFER_KEY_BYTES], u8)> + 'a {
        let mut start = [0; OFFER_KEY_BYTES];
        start[..prefix.len()].copy_from_slice(prefix);
        self.slices[self.slice_of(&start)]
            .range(start..)
            .take_while(move |(key, _)| key.starts_with(prefix))
            .map(|(key, touch)| (key, *touch))
    }

    fn slice_of(&self, key: &[u8; OFFER_KEY_BYTES]) -> usize {
        let mut id = [0; 8];
        id.copy_from_slice(&key[..8]);
        (u64::from_be_bytes(id) % self.slices.len() as u64) as usize
    }
}

/// Splits a key into (account, height); `None` for a key of another length.
pub(crate) fn decode_offer_key(key: &[u8]) -> Option<(AccountId, u64)> {
    let key: &[u8; OFFER_KEY_BYTES] = key.try_into().ok()?;
    let word = |at: usize| {
        let mut bytes = [0; 8];
        bytes.copy_from_slice(&key[at..at + 8]);
        u64::from_be_bytes(bytes)
    };
    Some((AccountId(word(8)), word(16)))
}

/// The index entries of one block, in key order (a `BTreeMap`: the same block always writes
/// the same entries in the same order).
pub(crate) fn entries_of(
    block: &Block,
    dropped: &[(u32, DropReason)],
    fills: Option<&[OfferFill]>,
) -> Entries {
    let height = block.header.height;
    let mut entries = BTreeMap::new();
    let mut touch = |account: AccountId, id: OfferId, what: OfferTouch| {
        *entries.entry(offer_key(id, account, height)).or_insert(0) |= what.0;
    };
    for (index, signed) in block.transactions.iter().enumerate() {
        let transaction = &signed.transaction;
        let what = if transaction.new_offer().is_some() {
            OfferTouch::CREATES
        } else {
            OfferTouch::SEQUENCE
        };
        touch(transaction.source, OfferId(transaction.sequence), what);
        let accepted = dropped
            .binary_search_by_key(&(index as u32), |(at, _)| *at)
            .is_err();
        if let (true, Some(cancel)) = (accepted, transaction.cancelled_offer()) {
            touch(cancel.key.account, cancel.key.id, OfferTouch::CANCELLED);
        }
    }
    for fill in fills.unwrap_or_default() {
        touch(fill.account, fill.offer_id, OfferTouch::TRADED);
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(height: u64, ids: &[u64]) -> Entries {
        ids.iter()
            .map(|id| (offer_key(OfferId(*id), AccountId(1), height), 1))
            .collect()
    }

    /// Each block's commit empties the slice it wrote and moves the watermark to the oldest
    /// slice's write: memory holds at most `slices` blocks' entries.
    #[test]
    fn a_written_slice_leaves_memory_and_the_watermark_follows_the_oldest_slice() {
        let mut pending = Pending::above(0, 3);
        for height in 1..=7u64 {
            assert_eq!(pending.next_height(), height);
            let written = [pending.slice_written_by(height)];
            pending.committed(&written, entries(height, &[0, 1, 2, 3, 4, 5]));
            // Slice s holds the ids s and s + 3 of the blocks since s was last written.
            let held = |slice: u64| {
                pending
                    .with_prefix(&slice.to_be_bytes())
                    .chain(pending.with_prefix(&(slice + 3).to_be_bytes()))
                    .count() as u64
            };
            for slice in 0..3u64 {
                let last_written = (1..=height).rev().find(|h| h % 3 == slice).unwrap_or(0);
                assert_eq!(
                    held(slice),
                    2 * (height - last_written),
                    "slice {slice} after {height}"
                );
            }
            assert_eq!(pending.through, height.saturating_sub(2), "after {height}");
        }
        let all: Vec<usize> = pending.all_slices().collect();
        pending.committed(&all, entries(8, &[7]));
        assert_eq!((pending.len(), pending.through), (0, 8));
    }
}
