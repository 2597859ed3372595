//! One pair's open offers as the state keeps them: the pair's offer trie (key: the offer's
//! canonical order as bytes, see [`offer_trie_key`]; value: the amount left, big-endian), read
//! through [`OfferBook`].
//!
//! The trie is the state's only copy of its open offers. A `BTreeMap` per pair used to sit
//! beside it holding the same (key, amount) pairs, edited alongside the trie on every block and
//! built beside it on every restart: about 57 bytes an open offer (570 MB at 10M) and a second
//! ordered structure walked per edit, for reads the trie answers itself (issue 32).

use walras_trie::{Iter, Trie};
use walras_types::{AccountId, OfferId, OfferKey, Price};

/// Bytes of an offer trie key: limit price (16) ‖ account (8) ‖ offer id (8).
pub(crate) const OFFER_KEY_BYTES: usize = 32;

/// A pair's offer trie.
pub(crate) type OfferTrie = Trie<OFFER_KEY_BYTES, [u8; 8]>;

/// The offer trie key of an offer: its canonical order (limit, account, id) as big-endian
/// bytes, so that key order is canonical order.
pub(crate) fn offer_trie_key(key: &OfferKey) -> [u8; OFFER_KEY_BYTES] {
    let mut bytes = [0u8; OFFER_KEY_BYTES];
    bytes[..16].copy_from_slice(&key.min_price.0.to_be_bytes());
    bytes[16..24].copy_from_slice(&key.account.0.to_be_bytes());
    bytes[24..].copy_from_slice(&key.id.0.to_be_bytes());
    bytes
}

/// The offer key an offer trie key encodes (the inverse of [`offer_trie_key`]).
pub(crate) fn offer_key_of(bytes: &[u8; OFFER_KEY_BYTES]) -> OfferKey {
    let (limit, rest) = bytes.split_at(16);
    let (account, id) = rest.split_at(8);
    OfferKey {
        min_price: Price(u128::from_be_bytes(limit.try_into().expect("16 bytes"))),
        account: AccountId(u64::from_be_bytes(account.try_into().expect("8 bytes"))),
        id: OfferId(u64::from_be_bytes(id.try_into().expect("8 bytes"))),
    }
}

/// The open offers of one pair, in canonical order, with the amounts they have left.
#[derive(Clone, Copy)]
pub struct OfferBook<'a> {
    trie: &'a OfferTrie,
}

impl<'a> OfferBook<'a> {
    pub(crate) fn new(trie: &'a OfferTrie) -> OfferBook<'a> {
        OfferBook { trie }
    }

    /// Open offers. O(1).
    pub fn len(self) -> usize {
        self.trie.len()
    }

    pub fn is_empty(self) -> bool {
        self.trie.is_empty()
    }

    /// The amount left of the open offer `key`.
    pub fn get(self, key: &OfferKey) -> Option<u64> {
        self.trie
            .get(&offer_trie_key(key))
            .copied()
            .map(u64::from_be_bytes)
    }

    pub fn contains_key(self, key: &OfferKey) -> bool {
        self.get(key).is_some()
    }

    /// (key, amount left) of each open offer, in canonical order.
    pub fn iter(self) -> OfferBookIter<'a> {
        OfferBookIter {
            entries: self.trie.iter(),
            left: self.len(),
        }
    }
}

impl<'a> IntoIterator for OfferBook<'a> {
    type Item = (OfferKey, u64);
    type IntoIter = OfferBookIter<'a>;

    fn into_iter(self) -> OfferBookIter<'a> {
        self.iter()
    }
}

/// Books are equal when they hold the same offers with the same amounts.
impl PartialEq for OfferBook<'_> {
    fn eq(&self, other: &OfferBook<'_>) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl std::fmt::Debug for OfferBook<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// The iterator of [`OfferBook::iter`].
pub struct OfferBookIter<'a> {
    entries: Iter<'a, OFFER_KEY_BYTES, [u8; 8]>,
    /// Offers not yet yielded (the trie counts its live leaves): an exact size, so that an
    /// encoder of a book of millions of offers reserves its bytes once.
    left: usize,
}

impl Iterator for OfferBookIter<'_> {
    type Item = (OfferKey, u64);

    fn next(&mut self) -> Option<(OfferKey, u64)> {
        let (key, amount) = self.entries.next()?;
        self.left -= 1;
        Some((offer_key_of(key), u64::from_be_bytes(*amount)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for OfferBookIter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn key(limit: u128, account: u64, id: u64) -> OfferKey {
        OfferKey {
            min_price: Price(limit),
            account: AccountId(account),
            id: OfferId(id),
        }
    }

    proptest! {
        /// The book reads what a map of the same edits holds: the same amounts by key, and
        /// the same entries in the same (canonical) order, through inserts, overwrites and
        /// deletions; its iterator's size is the number of entries it has left to yield.
        #[test]
        fn a_book_reads_as_the_map_of_its_edits(
            edits in proptest::collection::vec(
                (0u128..4, 0u64..3, 0u64..5, 0u64..3), 0..200)
        ) {
            let mut trie = OfferTrie::new();
            let mut model: BTreeMap<OfferKey, u64> = BTreeMap::new();
            for (limit, account, id, amount) in edits {
                // Limits far apart in the high bytes and near in the low ones.
                let key = key(limit << 100 | limit, account, id);
                if amount == 0 {
                    model.remove(&key);
                    trie.mark_deleted(&offer_trie_key(&key));
                } else {
                    model.insert(key, amount);
                    trie.insert(offer_trie_key(&key), amount.to_be_bytes());
                }
            }
            let book = OfferBook::new(&trie);
            prop_assert_eq!(book.len(), model.len());
            prop_assert_eq!(book.iter().collect::<Vec<_>>(), model.clone().into_iter().collect::<Vec<_>>());
            // Its size is exact at every step, tombstoned offers left out.
            let mut entries = book.iter();
            for left in (0..=model.len()).rev() {
                prop_assert_eq!(entries.len(), left);
                prop_assert_eq!(entries.next().is_some(), left > 0);
            }
            for limit in 0u128..4 {
                for account in 0..3 {
                    for id in 0..5 {
                        let key = key(limit << 100 | limit, account, id);
                        prop_assert_eq!(book.get(&key), model.get(&key).copied());
                    }
                }
            }
        }
    }

    #[test]
    fn an_offer_key_survives_its_trie_key() {
        let key = key(u128::MAX - 7, u64::MAX, 1 << 40);
        assert_eq!(offer_key_of(&offer_trie_key(&key)), key);
    }
}
