//! What the clearing property tests share: a market and the check of every invariant of one
//! clearing, in exact integers, from the per-offer fills.

use std::collections::HashMap;
use walras_clearing::{clear, Budget, Clearing, ClearingParams, OrderBooks, Resources, SupplyGrid};
use walras_types::{Fraction, Offer};

/// Clears `books` on the calling thread with the supply table, under an iteration budget only
/// (no clock decides anything, so every case is deterministic).
pub fn clear_within(books: &OrderBooks, params: &ClearingParams, iterations_max: u64) -> Clearing {
    let grid = SupplyGrid::for_mu(books, params.mu);
    clear(
        books,
        grid.as_ref(),
        params,
        Resources::serial(Budget::iterations(iterations_max)),
    )
    .unwrap_or_else(|error| panic!("clearing failed: {error}"))
}

#[derive(Clone, Debug)]
pub struct Market {
    pub assets: usize,
    pub offers: Vec<Offer>,
}

/// Checks every invariant of one clearing against the per-offer fills.
pub fn check_invariants(
    market: &Market,
    books: &OrderBooks,
    clearing: &Clearing,
    epsilon: Fraction,
    mu: Fraction,
) {
    let settlement = &clearing.settlement;
    let valuations = settlement.valuations();
    assert!(
        valuations.iter().all(|valuation| valuation.0 > 0),
        "valuations positive"
    );
    let by_id: HashMap<u64, &Offer> = market
        .offers
        .iter()
        .map(|offer| (offer.id.0, offer))
        .collect();
    let fills: HashMap<u64, (u64, u64)> = settlement
        .fills(books)
        .map(|fill| (fill.offer.0, (fill.sold, fill.bought)))
        .collect();
    let mut received = vec![0u128; market.assets];
    let mut paid = vec![0u128; market.assets];
    for (id, (sold, bought)) in &fills {
        let offer = by_id[id];
        let rate = valuations[offer.sell.0 as usize].rate_to(valuations[offer.buy.0 as usize]);
        let payout_rate = rate.discounted_floor(epsilon);
        assert!(
            *sold > 0 && *sold <= offer.amount,
            "offer {id} sold {sold} of {}",
            offer.amount
        );
        assert!(
            offer.min_price <= rate,
            "offer {id} traded beyond its limit"
        );
        assert_eq!(
            *bought as u128,
            payout_rate.mul_amount_floor(*sold),
            "offer {id} payout"
        );
        received[offer.sell.0 as usize] += *sold as u128;
        paid[offer.buy.0 as usize] += *bought as u128;
    }
    for asset in 0..market.assets {
        assert!(
            received[asset] >= paid[asset],
            "asset {asset} not conserved"
        );
        assert_eq!(
            received[asset] - paid[asset],
            settlement.burned()[asset] as u128,
            "burn {asset}"
        );
    }
    for pair in books.pairs() {
        let offers = books.offers(pair);
        let sold: Vec<u64> = offers
            .iter()
            .map(|offer| fills.get(&offer.id.0).map_or(0, |fill| fill.0))
            .collect();
        let partial = sold
            .iter()
            .zip(offers)
            .filter(|(s, o)| **s > 0 && **s < o.amount)
            .count();
        assert!(
            partial <= 1,
            "pair {}->{}: {partial} partial fills",
            pair.sell,
            pair.buy
        );
        // Traded offers form a prefix of the canonical order, full fills before the partial one.
        let traded = sold.iter().take_while(|s| **s > 0).count();
        assert!(
            sold[traded..].iter().all(|s| *s == 0),
            "fills skip an offer in canonical order"
        );
        for index in 0..traded.saturating_sub(1) {
            assert_eq!(
                sold[index], offers[index].amount,
                "only the last traded offer is partial"
            );
        }
        if clearing.converged {
            let rate = valuations[pair.sell as usize].rate_to(valuations[pair.buy as usize]);
            let threshold = rate.discounted_floor(mu);
            for (offer, sold) in offers.iter().zip(&sold) {
                if offer.min_price < threshold {
                    assert_eq!(
                        *sold, offer.amount,
                        "converged but offer {} not filled",
                        offer.id.0
                    );
                }
            }
        }
    }
}
