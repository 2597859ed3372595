//! Clearing on books shaped like real markets (issue 10): every pair quoted on both sides of its
//! rate within a fraction of a percent, uniform or power-law pairs (thin assets), valuations over
//! up to twelve decades, from 2 to 40 assets. Each case is drawn from `walras_sim`'s `market`
//! model (a fresh seed, spread, pair choice, size and valuation span per case), cleared on one
//! thread with an iteration cap (so every case is deterministic), and checked for:
//! - convergence on every case (the point of the issue: tâtonnement stalled on such books), or,
//!   over six decades of valuations, convergence of the prices with μ-completeness missed by
//!   dust alone (offers that no whole amount lets trade in full at their limit);
//! - conservation, limit prices, canonical fills and μ-completeness, from the per-offer fills;
//! - determinism: clearing the same books twice gives the same valuations and amounts.
//!
//! Then degenerate batches: a tiny batch does bounded work, and one in which no cycle of offers
//! crosses is recognised without iterating.

mod common;
#[path = "common/market.rs"]
mod market;

use common::{check_invariants, clear_within, Market};
use market::{market_books, pair_choice};
use proptest::prelude::*;
use walras_clearing::{Clearing, ClearingParams, OrderBooks};
use walras_sim::PairChoice;
use walras_types::{AccountId, AssetId, Fraction, Offer, OfferId, Price};

fn epsilon() -> Fraction {
    Fraction::power_of_two(15)
}

fn mu() -> Fraction {
    Fraction::power_of_two(10)
}

/// An iteration cap rather than the clock ends tâtonnement, so every case is deterministic.
const ITERATIONS_MAX: u64 = 2_000;

fn params() -> ClearingParams {
    ClearingParams {
        epsilon: epsilon(),
        mu: mu(),
        ..ClearingParams::default()
    }
}

fn clear_market(market: &Market) -> (OrderBooks, Clearing) {
    let books = OrderBooks::build(market.offers.clone(), market.assets, 1).expect("valid market");
    let clearing = clear_within(&books, &params(), ITERATIONS_MAX);
    (books, clearing)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Every invariant and convergence on every case, thin books included (many assets, a few
    /// thousand power-law offers: most pairs empty or holding one offer).
    #[test]
    fn market_books_clear_within_every_invariant(
        assets in 2usize..=40,
        offers in 2_000usize..20_000,
        seed in any::<u64>(),
        spread_ppm in 500u32..=20_000,
        pairs in pair_choice(),
        valuation_decades in 0u8..=6,
    ) {
        let market = market_books(assets, offers, seed, spread_ppm, pairs, valuation_decades);
        let (books, clearing) = clear_market(&market);
        check_invariants(&market, &books, &clearing, epsilon(), mu());
        prop_assert!(
            converged_but_for_integer_limits(&clearing),
            "not converged after {} iterations and {} cut steps",
            clearing.iterations,
            clearing.cut_steps
        );
    }

    #[test]
    fn market_clearing_is_deterministic(
        assets in 2usize..=12,
        seed in any::<u64>(),
        spread_ppm in 500u32..=20_000,
        pairs in pair_choice(),
    ) {
        let market = market_books(assets, 3_000, seed, spread_ppm, pairs, 2);
        let (_, first) = clear_market(&market);
        let (_, second) = clear_market(&market);
        prop_assert_eq!(&first.settlement, &second.settlement);
    }

    /// Tiny batches (issue 10: 40 offers over 5 assets spun 1.4 million iterations for two
    /// seconds) stop after bounded work, converged or not, and still hold every invariant.
    #[test]
    fn tiny_batches_do_bounded_work(
        assets in 2usize..=6,
        offers in 1usize..=60,
        seed in any::<u64>(),
        spread_ppm in 500u32..=20_000,
        pairs in pair_choice(),
    ) {
        let market = market_books(assets, offers, seed, spread_ppm, pairs, 1);
        let books = OrderBooks::build(market.offers.clone(), market.assets, 1).expect("valid");
        let clearing = clear_within(&books, &params(), u64::MAX);
        prop_assert!(clearing.queries <= 4_000, "{} demand queries", clearing.queries);
        check_invariants(&market, &books, &clearing, epsilon(), mu());
    }
}

fn offer(id: u64, sell: u16, buy: u16, limit: f64) -> Offer {
    Offer {
        id: OfferId(id),
        account: AccountId(id % 3),
        sell: AssetId(sell),
        buy: AssetId(buy),
        amount: 1_000 + id,
        min_price: Price::from_f64(limit),
    }
}

/// Trigger: 40 offers over 5 assets whose every cycle needs rates multiplying above one; nothing
/// can trade, and the old race iterated until its deadline.
#[test]
fn a_batch_where_no_cycle_crosses_is_recognised_without_iterating() {
    let mut offers = Vec::new();
    for id in 0..40u64 {
        let (sell, buy) = ((id % 5) as u16, ((id + 1 + id / 5 % 4) % 5) as u16);
        if sell == buy {
            continue;
        }
        // Every limit is 1.05× the "fair" ratio of 1: around any cycle the product exceeds one.
        offers.push(offer(id, sell, buy, 1.05 + (id % 7) as f64 * 0.01));
    }
    let market = Market { assets: 5, offers };
    let (books, clearing) = clear_market(&market);
    assert!(clearing.converged);
    assert_eq!(clearing.iterations, 0);
    assert_eq!(clearing.queries, 0);
    assert_eq!(clearing.settlement.fills(&books).count(), 0);
    check_invariants(&market, &books, &clearing, epsilon(), mu());
}

#[test]
fn a_crossing_pair_among_idle_ones_still_trades() {
    let offers = vec![
        offer(0, 0, 1, 0.98),
        offer(1, 1, 0, 0.99),
        offer(2, 1, 2, 5.0),
        offer(3, 2, 1, 5.0),
    ];
    let market = Market { assets: 3, offers };
    let (books, clearing) = clear_market(&market);
    check_invariants(&market, &books, &clearing, epsilon(), mu());
    assert!(clearing.converged);
    assert!(
        clearing.settlement.fills(&books).count() >= 2,
        "the 0-1 cycle trades"
    );
}

/// Convergence over a fixed grid of the market class: asset counts, sizes, spreads, both pair
/// choices and valuation spans, each with its own seed. Thin books are in: 50 assets with 2,000
/// power-law offers (most pairs empty or holding one offer) stopped unconverged on 3 of 12
/// shapes before clearing learned to repair cuts (see `walras_clearing::cut`).
#[test]
fn market_books_of_every_shape_converge() {
    let mut failures = Vec::new();
    let (mut short_by_dust, mut short_by_repair) = (0usize, 0usize);
    let mut seed = 1;
    for assets in [2usize, 10, 50] {
        for offers in [2_000usize, 20_000] {
            for spread_ppm in [500, 1_000, 10_000, 20_000] {
                for pairs in [PairChoice::Uniform, PairChoice::PowerLaw] {
                    for decades in [0, 2, 6] {
                        seed += 1;
                        let market = market_books(assets, offers, seed, spread_ppm, pairs, decades);
                        let (books, clearing) = clear_market(&market);
                        check_invariants(&market, &books, &clearing, epsilon(), mu());
                        if !converged_but_for_integer_limits(&clearing) {
                            failures.push((assets, offers, spread_ppm, pairs, decades, seed));
                        }
                        if !clearing.converged {
                            if clearing.settlement.short_of_mu_by_dust_only() {
                                short_by_dust += 1;
                            } else {
                                short_by_repair += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "not converged: {failures:?}");
    eprintln!("short of μ: {short_by_dust} shapes by dust, {short_by_repair} by a repair");
    // Measured (see the report of issue 28): 23 of the 144 shapes miss μ-completeness by dust
    // alone and 4 by a repair, all with valuations over six decades. Asserted loosely so that a
    // change in those counts is seen, not hidden.
    assert!(
        short_by_dust <= 30,
        "{short_by_dust} shapes short of μ by dust"
    );
    assert!(
        short_by_repair <= 8,
        "{short_by_repair} shapes short of μ by a repair"
    );
}

/// Converged, or the prices converged and μ-completeness was missed only where an offer cannot
/// be paid its limit on whole amounts: dust below `(1 − μ) · rate` that no whole amount lets
/// trade in full at its limit (at a rate of 2e-7 an offer is paid under one unit per 5 million
/// it sells), or a repair after a pair's last offer was cut to a part that meets its limit (the
/// pair sells a little less than the LP planned, its asset runs short elsewhere, and the repair
/// lowers another pair below its lower bound). Before payouts were held to the limit on the
/// integers such offers "traded" and were paid below it.
fn converged_but_for_integer_limits(clearing: &Clearing) -> bool {
    let settlement = &clearing.settlement;
    clearing.converged
        || (clearing.prices_converged
            && settlement.lp_with_lower_bounds()
            && (settlement.short_of_mu_by_dust_only() || settlement.repairs() > 0))
}
