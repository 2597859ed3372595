//! What the clearing property tests share: a market and the check of every invariant of one
//! clearing, in exact integers, from the per-offer fills.

use ethnum::U256;
use std::collections::HashMap;
use walras_clearing::{clear, Budget, Clearing, ClearingParams, OrderBooks, Resources, SupplyGrid};
use walras_types::{Fraction, Offer, Price};

/// Clears `books` on the calling thread with the supply table, under an iteration budget only
/// (no clock decides anything, so every case is deterministic).
pub(crate) fn clear_within(
    books: &OrderBooks,
    params: &ClearingParams,
    iterations_max: u64,
) -> Clearing {
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
pub(crate) struct Market {
    pub assets: usize,
    pub offers: Vec<Offer>,
}

/// The limit promise on the integer amounts, computed here independently of clearing:
/// `received · 2^64 · 2^80 ≥ sold · limit_raw · (2^64 − ε_raw)` (ε = ε_raw / 2^64, limit =
/// limit_raw / 2^80), exactly in 256 bits.
pub(crate) fn meets_limit_exactly(
    limit: Price,
    sold: u64,
    received: u64,
    epsilon: Fraction,
) -> bool {
    let den = U256::ONE << 64u32;
    let lhs = U256::from(received) * den * (U256::ONE << 80u32);
    let rhs = U256::from(sold) * U256::from(limit.0) * (den - U256::from(epsilon.0));
    lhs >= rhs
}

/// Panics unless `offer` selling `sold` for `received` meets its limit exactly.
pub(crate) fn assert_meets_limit(offer: &Offer, sold: u64, received: u64, epsilon: Fraction) {
    assert!(
        meets_limit_exactly(offer.min_price, sold, received, epsilon),
        "offer {} sold {sold} for {received}: below its limit {} after ε",
        offer.id.0,
        offer.min_price.to_exact_decimal()
    );
}

/// Checks every invariant of one clearing against the per-offer fills.
pub(crate) fn check_invariants(
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
        assert_meets_limit(offer, *sold, *bought, epsilon);
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
        let offers: Vec<&Offer> = books.offers(pair).collect();
        let sold: Vec<u64> = offers
            .iter()
            .map(|offer| fills.get(&offer.id.0).map_or(0, |fill| fill.0))
            .collect();
        // The fill rule: offers in canonical order sell what the rule allows of their whole
        // amount (all of it unless that would pay below the limit); only the last that sold
        // anything may sell less than that, and nothing after it sells.
        let terms = walras_clearing::PayoutTerms::new(
            valuations[pair.sell as usize].rate_to(valuations[pair.buy as usize]),
            epsilon,
        );
        let last = sold.iter().rposition(|s| *s > 0).unwrap_or(0);
        for (index, offer) in offers.iter().enumerate().take(last) {
            assert_eq!(
                sold[index],
                terms.sale(offer.min_price, offer.amount).sold,
                "offer {} before the last traded one did not sell what the rule allows",
                offer.id.0
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
