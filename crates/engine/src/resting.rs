//! A genesis state that already holds open offers: how benchmarks get a state of millions of
//! resting offers without executing millions of transactions first (issue 32).
//!
//! The offers' amounts are issued into the books, as if each offer's seller had held the amount
//! and locked it, so conservation holds (`accounted() == issued()`). Nothing on the block path
//! calls this: a node's state starts from its genesis alone.

use crate::offer_book::offer_trie_key;
use crate::state::{ExchangeState, StateError};
use walras_types::genesis::Genesis;
use walras_types::{Offer, Price, MAX_AMOUNT};

impl ExchangeState {
    /// The state before the first block of `genesis`, with `offers` open on its books.
    /// Refuses an offer of an unknown account or asset, selling what it buys, with an amount
    /// outside `1..=MAX_AMOUNT` or a limit outside the accepted range, one whose key
    /// (limit, account, id) is already open, and offers that take an asset's issuance over the
    /// cap.
    pub fn from_genesis_with_resting_offers(
        genesis: &Genesis,
        offers: Vec<Offer>,
        threads: usize,
    ) -> Result<ExchangeState, StateError> {
        let mut state = ExchangeState::from_genesis(genesis, threads)?;
        let mut batches: Vec<Vec<([u8; 32], [u8; 8])>> = vec![Vec::new(); state.offer_tries.len()];
        for offer in offers {
            state.check_resting(&offer)?;
            let sell = usize::from(offer.sell.0);
            let issued = state.issued[sell]
                .checked_add(offer.amount)
                .filter(|sum| *sum <= MAX_AMOUNT)
                .ok_or_else(|| {
                    StateError::Genesis(format!("resting offers take asset {sell} over the cap"))
                })?;
            state.issued[sell] = issued;
            let index = state.pair_index(offer.sell, offer.buy);
            batches[index].push((offer_trie_key(&offer.key()), offer.amount.to_be_bytes()));
        }
        for (trie, mut batch) in state.offer_tries.iter_mut().zip(batches) {
            // Trie keys are canonical order: an offer given twice is two equal neighbours.
            batch.sort_unstable_by_key(|(key, _)| *key);
            if let Some(twice) = batch.windows(2).find(|two| two[0].0 == two[1].0) {
                let key = crate::offer_book::offer_key_of(&twice[0].0);
                return Err(StateError::Genesis(format!(
                    "resting offer {} of account {} twice",
                    key.id.0, key.account.0
                )));
            }
            if !batch.is_empty() {
                trie.insert_batch(batch, threads);
            }
        }
        Ok(state)
    }

    fn check_resting(&self, offer: &Offer) -> Result<(), StateError> {
        let refuse = |why: &str| {
            Err(StateError::Genesis(format!(
                "resting offer {} of account {}: {why}",
                offer.id.0, offer.account.0
            )))
        };
        let assets = self.assets;
        if usize::from(offer.sell.0) >= assets || usize::from(offer.buy.0) >= assets {
            return refuse("unknown asset");
        }
        if offer.sell == offer.buy {
            return refuse("sells the asset it buys");
        }
        if offer.amount == 0 || offer.amount > MAX_AMOUNT {
            return refuse("amount outside 1..=2^63-1");
        }
        if !(Price::MIN_LIMIT..=Price::MAX_LIMIT).contains(&offer.min_price) {
            return refuse("limit price outside the accepted range");
        }
        if self.slot(offer.account).is_none() {
            return refuse("unknown account");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use walras_types::genesis::GenesisAccount;
    use walras_types::{AccountId, AssetId, OfferId};

    fn genesis() -> Genesis {
        Genesis {
            assets: 3,
            asset_info: Vec::new(),
            accounts: (1..=4)
                .map(|id| GenesisAccount {
                    id: AccountId(id),
                    public_key: [id as u8; 32],
                    balances: vec![(AssetId(0), 1_000), (AssetId(1), 1_000)],
                })
                .collect(),
            payments: None,
        }
    }

    fn resting(id: u64, account: u64, sell: u16, buy: u16, amount: u64) -> Offer {
        Offer {
            id: OfferId(id),
            account: AccountId(account),
            sell: AssetId(sell),
            buy: AssetId(buy),
            amount,
            min_price: Price::from_f64(1_000.0),
        }
    }

    /// The offers' amounts are issued into the books: the state conserves every asset, and
    /// the offers are in the books and in the state root.
    #[test]
    fn resting_offers_are_open_and_conserve_every_asset() {
        let offers = vec![resting(1, 1, 0, 1, 50), resting(2, 2, 2, 0, 70)];
        let mut plain = ExchangeState::from_genesis(&genesis(), 1).expect("genesis");
        let mut state =
            ExchangeState::from_genesis_with_resting_offers(&genesis(), offers, 2).expect("state");
        assert!(state.conserves());
        assert_eq!(state.open_offer_count(), 2);
        assert_eq!(state.issued()[0], plain.issued()[0] + 50);
        assert_eq!(state.issued()[2], 70);
        assert_ne!(state.state_root(1), plain.state_root(1));
    }

    /// The root of a state with resting offers does not depend on the order they are given in
    /// nor on the thread count.
    #[test]
    fn the_root_does_not_depend_on_offer_order_or_threads() {
        let offers: Vec<Offer> = (0..200)
            .map(|i| resting(i, 1 + i % 4, (i % 3) as u16, ((i + 1) % 3) as u16, 1 + i))
            .collect();
        let mut reversed = offers.clone();
        reversed.reverse();
        let mut one =
            ExchangeState::from_genesis_with_resting_offers(&genesis(), offers, 1).expect("state");
        let mut two = ExchangeState::from_genesis_with_resting_offers(&genesis(), reversed, 2)
            .expect("state");
        assert_eq!(one.state_root(1), two.state_root(2));
    }

    #[test]
    fn a_resting_offer_of_an_unknown_account_or_twice_is_refused() {
        let unknown = vec![resting(1, 99, 0, 1, 5)];
        let twice = vec![resting(1, 1, 0, 1, 5), resting(1, 1, 0, 1, 6)];
        let same_asset = vec![resting(1, 1, 1, 1, 5)];
        for offers in [unknown, twice, same_asset] {
            let result = ExchangeState::from_genesis_with_resting_offers(&genesis(), offers, 1);
            assert!(matches!(result, Err(StateError::Genesis(_))));
        }
    }
}
