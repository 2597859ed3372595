//! Property tests of clearing over random markets, degenerate ones included.
//!
//! Each case builds a market from hidden "true" valuations (offers priced a little around the
//! true ratio, some out of the money), clears it single-threaded and checks, from the per-offer
//! fills and in exact integers:
//! - conservation: per asset, what offers sold to the auctioneer covers what it paid out, and the
//!   difference is exactly what is reported burned;
//! - limit prices: an offer trades only if its limit is at or below the batch rate, and receives
//!   exactly `floor(sold · floor(rate · (1 − ε)))`;
//! - canonical order: within a pair the offers that traded are a prefix of the canonical order,
//!   all in full except at most the last one;
//! - μ-completeness when converged: every offer with limit below `(1 − μ)` times the rate traded
//!   in full;
//! - determinism, and invariance (up to scaling) when an asset is redenominated.

mod common;

use common::{check_invariants, clear_within, Market};
use proptest::prelude::*;
use std::collections::HashMap;
use walras_clearing::{Clearing, ClearingParams, OrderBooks};
use walras_types::{AccountId, AssetId, Fraction, Offer, OfferId, Price, MAX_AMOUNT};

/// An iteration cap rather than the clock ends tâtonnement, so every case is deterministic.
const ITERATIONS_MAX: u64 = 400;

fn params(epsilon: Fraction, mu: Fraction) -> ClearingParams {
    ClearingParams {
        epsilon,
        mu,
        ..ClearingParams::default()
    }
}

/// An offer row before pricing: (sell, buy, amount, limit offset from the true ratio).
type RawOffer = (usize, usize, u64, f64);

fn build_market(assets: usize, log_valuations: &[f64], raw: &[RawOffer]) -> Market {
    let offers = raw
        .iter()
        .enumerate()
        .filter(|(_, (sell, buy, _, _))| sell != buy)
        .map(|(index, &(sell, buy, amount, offset))| {
            let ratio = (log_valuations[sell] - log_valuations[buy]).exp();
            Offer {
                id: OfferId(index as u64),
                account: AccountId((index % 7) as u64),
                sell: AssetId(sell as u16),
                buy: AssetId(buy as u16),
                amount,
                min_price: Price::from_f64((ratio * (1.0 - offset)).clamp(1e-9, 1e9)),
            }
        })
        .collect();
    Market { assets, offers }
}

prop_compose! {
    fn market(max_assets: usize, max_offers: usize)
        (assets in 2..=max_assets)
        (log_valuations in proptest::collection::vec(-4.0f64..4.0, assets),
         raw in proptest::collection::vec(
             (0..assets, 0..assets, amount(), -0.02f64..0.05), 0..max_offers),
         assets in Just(assets))
        -> Market
    {
        build_market(assets, &log_valuations, &raw)
    }
}

prop_compose! {
    /// Offers of similar *value* (amount × true valuation), as real order flow is: amounts drawn
    /// in units regardless of valuation make some assets demanded in hundreds of times the value
    /// they supply, a market with no interesting equilibrium.
    fn liquid_market(min_assets: usize, max_assets: usize, offers: std::ops::Range<usize>)
        (assets in min_assets..=max_assets)
        (log_valuations in proptest::collection::vec(-4.0f64..4.0, assets),
         rows in proptest::collection::vec(
             (0..assets, 0..assets, 1e8f64..3e8, -0.02f64..0.05), offers.clone()),
         assets in Just(assets))
        -> Market
    {
        let raw: Vec<RawOffer> = rows
            .iter()
            .map(|&(sell, buy, value, offset)| {
                let amount = (value / log_valuations[sell].exp()).round().max(1.0) as u64;
                (sell, buy, amount, offset)
            })
            .collect();
        build_market(assets, &log_valuations, &raw)
    }
}

fn amount() -> impl Strategy<Value = u64> {
    prop_oneof![
        1u64..10,
        1_000u64..1_000_000,
        1_000_000u64..1_000_000_000_000
    ]
}

fn epsilon_and_mu() -> impl Strategy<Value = (Fraction, Fraction)> {
    (
        prop_oneof![
            Just(Fraction::ZERO),
            Just(Fraction::power_of_two(15)),
            Just(Fraction::power_of_two(8))
        ],
        prop_oneof![
            Just(Fraction::power_of_two(10)),
            Just(Fraction::power_of_two(6))
        ],
    )
}

fn clear_market(market: &Market, epsilon: Fraction, mu: Fraction) -> (OrderBooks, Clearing) {
    let books = OrderBooks::build(market.offers.clone(), market.assets, 1).expect("valid market");
    let clearing = clear_within(&books, &params(epsilon, mu), ITERATIONS_MAX);
    (books, clearing)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn small_markets_clear_within_every_invariant(market in market(6, 120), (epsilon, mu) in epsilon_and_mu()) {
        let (books, clearing) = clear_market(&market, epsilon, mu);
        check_invariants(&market, &books, &clearing, epsilon, mu);
    }

    /// Deep books (thousands of offers per market): tâtonnement must converge, so μ-completeness
    /// is checked on every case.
    #[test]
    fn liquid_markets_converge_and_are_mu_complete(
        market in liquid_market(2, 8, 2_000..4_000),
        (epsilon, mu) in epsilon_and_mu(),
    ) {
        let (books, clearing) = clear_market(&market, epsilon, mu);
        prop_assert!(clearing.converged, "liquid market did not converge in {} iterations", clearing.iterations);
        check_invariants(&market, &books, &clearing, epsilon, mu);
    }

    #[test]
    fn one_direction_only_trades_nothing(
        log_valuations in proptest::collection::vec(-2.0f64..2.0, 3),
        rows in proptest::collection::vec((1_000u64..1_000_000, -0.02f64..0.05), 1..50),
    ) {
        let raw: Vec<RawOffer> = rows.iter().map(|(amount, offset)| (0, 1, *amount, *offset)).collect();
        let market = build_market(3, &log_valuations, &raw);
        let (books, clearing) = clear_market(&market, Fraction::power_of_two(15), Fraction::power_of_two(10));
        check_invariants(&market, &books, &clearing, Fraction::power_of_two(15), Fraction::power_of_two(10));
        prop_assert_eq!(clearing.settlement.fills(&books).count(), 0);
    }

    #[test]
    fn two_asset_markets_with_one_huge_offer(
        log_ratio in -3.0f64..3.0,
        rows in proptest::collection::vec((0..2usize, 1u64..1_000_000_000, -0.02f64..0.05), 0..40),
        huge_side in 0..2usize,
    ) {
        let mut raw: Vec<RawOffer> = rows.iter().map(|(sell, amount, offset)| (*sell, 1 - sell, *amount, *offset)).collect();
        raw.push((huge_side, 1 - huge_side, MAX_AMOUNT / 2, 0.01));
        let market = build_market(2, &[log_ratio, 0.0], &raw);
        for (epsilon, mu) in [(Fraction::ZERO, Fraction::power_of_two(10)), (Fraction::power_of_two(15), Fraction::power_of_two(10))] {
            let (books, clearing) = clear_market(&market, epsilon, mu);
            check_invariants(&market, &books, &clearing, epsilon, mu);
        }
    }

    #[test]
    fn redenominating_an_asset_only_rescales_its_price(
        market in liquid_market(2, 5, 500..1_500),
        asset_choice in 0..5usize,
        shift in 1u32..6,
    ) {
        let asset = asset_choice % market.assets;
        let factor = 1u64 << shift;
        let (epsilon, mu) = (Fraction::power_of_two(15), Fraction::power_of_two(10));
        let Some(rescaled) = redenominate(&market, asset, shift) else { return Ok(()) };
        let (_, original) = clear_market(&market, epsilon, mu);
        let (rescaled_books, changed) = clear_market(&rescaled, epsilon, mu);
        check_invariants(&rescaled, &rescaled_books, &changed, epsilon, mu);
        prop_assert!(original.converged && changed.converged, "liquid markets converge");
        // Valuations are only determined where trading ties assets together: compare the rate of
        // every pair that traded in both clearings, undoing the redenomination of `asset`.
        let rates = |clearing: &Clearing| -> HashMap<(u16, u16), f64> {
            clearing
                .settlement
                .pairs()
                .iter()
                .filter(|pair| pair.sold > 0)
                .map(|pair| ((pair.sell, pair.buy), pair.rate.to_f64()))
                .collect()
        };
        let (before, after) = (rates(&original), rates(&changed));
        for ((sell, buy), rate) in &before {
            let Some(rescaled_rate) = after.get(&(*sell, *buy)) else { continue };
            let mut expected = *rate;
            if *sell as usize == asset {
                expected /= factor as f64;
            }
            if *buy as usize == asset {
                expected *= factor as f64;
            }
            let relative = (rescaled_rate / expected - 1.0).abs();
            prop_assert!(relative <= 4.0 * mu.to_f64(), "pair {sell}->{buy}: {expected} vs {rescaled_rate}");
        }
    }

    #[test]
    fn clearing_is_deterministic(market in market(5, 80)) {
        let (epsilon, mu) = (Fraction::power_of_two(15), Fraction::power_of_two(10));
        let (_, first) = clear_market(&market, epsilon, mu);
        let (_, second) = clear_market(&market, epsilon, mu);
        prop_assert_eq!(&first.settlement, &second.settlement);
    }
}

/// The same market with `asset` counted in units 2^shift times smaller: amounts of offers selling
/// it multiply, limit prices scale to match. `None` if an amount would pass the issuance cap.
fn redenominate(market: &Market, asset: usize, shift: u32) -> Option<Market> {
    let mut offers = Vec::with_capacity(market.offers.len());
    let mut total = 0u64;
    for offer in &market.offers {
        let mut offer = *offer;
        if offer.sell.0 as usize == asset {
            offer.amount = offer
                .amount
                .checked_shl(shift)
                .filter(|amount| amount >> shift == offer.amount)?;
            total = total
                .checked_add(offer.amount)
                .filter(|total| *total <= MAX_AMOUNT)?;
            offer.min_price = Price(offer.min_price.0 >> shift);
        }
        if offer.buy.0 as usize == asset {
            offer.min_price = Price(offer.min_price.0 << shift);
        }
        if offer.min_price < Price::MIN_LIMIT || offer.min_price > Price::MAX_LIMIT {
            return None;
        }
        offers.push(offer);
    }
    Some(Market {
        assets: market.assets,
        offers,
    })
}

#[test]
fn no_offers_clears_to_nothing() {
    let market = Market {
        assets: 4,
        offers: Vec::new(),
    };
    let (books, clearing) = clear_market(
        &market,
        Fraction::power_of_two(15),
        Fraction::power_of_two(10),
    );
    assert_eq!(clearing.settlement.fills(&books).count(), 0);
    assert!(clearing.converged);
    assert!(clearing
        .settlement
        .burned()
        .iter()
        .all(|burned| *burned == 0));
}

#[test]
fn a_hundred_assets() {
    let mut state = 7u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let log_valuations: Vec<f64> = (0..100)
        .map(|_| (next() % 8000) as f64 / 1000.0 - 4.0)
        .collect();
    let raw: Vec<RawOffer> = (0..20_000)
        .map(|_| {
            let sell = (next() % 100) as usize;
            let buy = (next() % 100) as usize;
            (
                sell,
                buy,
                1_000 + next() % 1_000_000,
                (next() % 700) as f64 / 10_000.0 - 0.02,
            )
        })
        .collect();
    let market = build_market(100, &log_valuations, &raw);
    let mu = Fraction::power_of_two(10);
    let epsilon = Fraction::power_of_two(15);
    let (books, clearing) = clear_market(&market, epsilon, mu);
    check_invariants(&market, &books, &clearing, epsilon, mu);
    assert!(
        clearing.settlement.fills(&books).count() > 1000,
        "a liquid market trades"
    );
}
