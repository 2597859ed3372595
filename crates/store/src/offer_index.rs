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
//! [`OfferTouch`] entries are derived from the block and its results only, in
//! [`crate::BlockStore`]'s block write transaction: the block and its index entries commit
//! together or not at all, so no crash leaves one without the other. A store written before
//! the index existed has no `offer_index` stamp in `meta`; opening it indexes every stored
//! block in the opening transaction, then stamps it (once; see `BlockStore::open_with`).

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
) -> BTreeMap<[u8; OFFER_KEY_BYTES], u8> {
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
