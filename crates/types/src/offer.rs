//! Identifiers, limit sell offers and their canonical order.

use crate::Price;
use serde::{Deserialize, Serialize};

/// An asset, numbered 0..N-1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AssetId(pub u16);

/// An account.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AccountId(pub u64);

/// An offer, unique across the exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OfferId(pub u64);

/// An ordered asset pair: `sell` is sold for `buy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PairId {
    pub sell: AssetId,
    pub buy: AssetId,
}

/// A limit sell offer: sell up to `amount` units of `sell` for `buy`, receiving at least
/// `min_price` units of `buy` per unit of `sell` (before the commission).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Offer {
    pub id: OfferId,
    pub account: AccountId,
    pub sell: AssetId,
    pub buy: AssetId,
    pub amount: u64,
    pub min_price: Price,
}

impl Offer {
    pub fn pair(&self) -> PairId {
        PairId {
            sell: self.sell,
            buy: self.buy,
        }
    }

    /// The offer's position in its pair's book.
    pub fn key(&self) -> OfferKey {
        OfferKey {
            min_price: self.min_price,
            account: self.account,
            id: self.id,
        }
    }
}

/// The canonical order of offers within one pair: (limit price, account, offer id), ascending.
/// Offers fill in this order, so lower limit prices trade first and ties break deterministically.
/// Field order matters: the derived `Ord` compares fields top to bottom.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OfferKey {
    pub min_price: Price,
    pub account: AccountId,
    pub id: OfferId,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_order_is_price_then_account_then_id() {
        let key = |price: u128, account: u64, id: u64| OfferKey {
            min_price: Price(price),
            account: AccountId(account),
            id: OfferId(id),
        };
        let mut keys = vec![key(2, 0, 0), key(1, 5, 9), key(1, 5, 3), key(1, 2, 99)];
        keys.sort();
        assert_eq!(
            keys,
            vec![key(1, 2, 99), key(1, 5, 3), key(1, 5, 9), key(2, 0, 0)]
        );
    }
}
