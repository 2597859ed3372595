//! Clearing is a pure function of (books, supply table, params) under an iteration budget: the
//! same result on 1, 2 and 4 threads and on every run, whichever instance wins the race. Under
//! a deadline only the number of rounds depends on time (checked with clocks the test steers).

mod common;
#[path = "common/market.rs"]
mod market;

use common::{check_invariants, clear_within};
use market::{market_books, pair_choice};
use proptest::prelude::*;
use std::time::{Duration, Instant};
use walras_clearing::{
    clear, planning_epsilon, settle, settle_given, Budget, Clearing, ClearingParams, Clock,
    OrderBooks, Resources, SupplyGrid,
};
use walras_sim::PairChoice;
use walras_types::Fraction;

const ITERATIONS_MAX: u64 = 2_000;

fn params(reversed_controls: bool) -> ClearingParams {
    let mut params = ClearingParams::default();
    if reversed_controls {
        // Newton last: the tâtonnement instances race each other, so the lowest-index rule
        // decides between instances that converge in the same round.
        params.controls.reverse();
    }
    params
}

fn clear_on(
    books: &OrderBooks,
    params: &ClearingParams,
    threads: usize,
    budget: Budget,
    clock: &dyn Clock,
) -> Clearing {
    let grid = SupplyGrid::for_mu(books, params.mu);
    let pool = walras_par::pool(threads);
    let resources = Resources {
        budget,
        clock,
        pool: Some(&pool),
    };
    clear(books, grid.as_ref(), params, resources)
        .unwrap_or_else(|error| panic!("clearing failed: {error}"))
}

/// Everything of a clearing that is not a measurement (times, and query counts that include
/// losing instances' work).
fn decided(clearing: &Clearing) -> impl PartialEq + std::fmt::Debug + '_ {
    (
        &clearing.settlement,
        clearing.converged,
        clearing.iterations,
        clearing.cut_steps,
        clearing.instance,
        clearing.quality,
    )
}

/// A clock that never moves: a deadline after its instant never passes, one at it always has.
struct FrozenClock(Instant);

impl Clock for FrozenClock {
    fn now(&self) -> Instant {
        self.0
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn the_result_is_the_same_on_any_pool_and_every_run(
        assets in 2usize..=12,
        offers in 200usize..4_000,
        seed in any::<u64>(),
        spread_ppm in 500u32..=20_000,
        pairs in pair_choice(),
        reversed_controls in any::<bool>(),
    ) {
        let market = market_books(assets, offers, seed, spread_ppm, pairs, 2);
        let books = OrderBooks::build(market.offers.clone(), assets, 1).expect("valid market");
        let params = params(reversed_controls);
        let budget = Budget::iterations(ITERATIONS_MAX);
        let clock = walras_clearing::SystemClock;
        let serial = clear_within(&books, &params, ITERATIONS_MAX);
        check_invariants(&market, &books, &serial, params.epsilon, params.mu);
        for threads in [1, 2, 4, 4, 2] {
            let parallel = clear_on(&books, &params, threads, budget, &clock);
            prop_assert_eq!(decided(&parallel), decided(&serial), "{} threads", threads);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Settling's per-pair passes run on the block's threads: the settlement a proposer
    /// computes and a follower's check of a header's trades (honest, and with some pairs' sold
    /// amounts changed, which the check may refuse anywhere in its passes) must be the same,
    /// error included, for any thread count.
    #[test]
    fn settling_and_checking_trades_give_the_same_result_and_first_error_on_any_thread_count(
        assets in 6usize..=12,
        offers in 1_000usize..4_000,
        seed in any::<u64>(),
        pairs in pair_choice(),
        tampered in prop::collection::vec((any::<prop::sample::Index>(), any::<u64>()), 0..6),
    ) {
        let market = market_books(assets, offers, seed, 5_000, pairs, 2);
        let books = OrderBooks::build(market.offers.clone(), assets, 1).expect("valid market");
        let params = params(false);
        let cleared = clear_within(&books, &params, ITERATIONS_MAX);
        let valuations = cleared.settlement.valuations().to_vec();
        let lp_epsilon = planning_epsilon(params.epsilon);
        let serial = settle(&books, &valuations, params.epsilon, params.mu, lp_epsilon, None);
        let traded: Vec<_> = cleared
            .settlement
            .pairs()
            .iter()
            .filter(|pair| pair.sold > 0)
            .collect();
        let mut trades: Vec<(u16, u16, u64)> =
            traded.iter().map(|pair| (pair.sell, pair.buy, pair.sold)).collect();
        let honest = settle_given(&books, &valuations, params.epsilon, params.mu, &trades, None);
        prop_assert!(honest.is_ok(), "{:?}", honest);
        if !trades.is_empty() {
            // Another amount within the pair's bounds: the walk may then find a part below
            // its offer's limit, or an asset paying out more than it receives.
            for (index, amount) in &tampered {
                let at = index.index(trades.len());
                trades[at].2 = 1 + amount % traded[at].upper;
            }
        }
        let checked = settle_given(&books, &valuations, params.epsilon, params.mu, &trades, None);
        for threads in [2, 3, 8] {
            let pool = walras_par::pool(threads);
            let parallel =
                settle(&books, &valuations, params.epsilon, params.mu, lp_epsilon, Some(&pool));
            prop_assert_eq!(&parallel, &serial, "{} threads", threads);
            let again = settle_given(
                &books, &valuations, params.epsilon, params.mu, &trades, Some(&pool),
            );
            prop_assert_eq!(&again, &checked, "{} threads", threads);
        }
    }
}

/// The exact demand queries and Newton's slope estimates spread their pairs over the pool once
/// a book holds hundreds of pairs (512 and 256); the per-asset sums stay in pair order on one
/// thread. With 30 and 34 assets (870 and 1,122 pairs), with and without the supply table, the
/// clearing on pools of 2, 3 and 4 threads must be the serial one, bit for bit.
#[test]
fn with_hundreds_of_pairs_the_queries_spread_over_the_pool_give_the_serial_clearing() {
    for (assets, seed) in [(30, 11), (34, 12)] {
        let market = market_books(assets, 40_000, seed, 5_000, PairChoice::Uniform, 2);
        let books = OrderBooks::build(market.offers.clone(), assets, 1).expect("valid market");
        assert!(books.pairs().len() >= 512, "{} pairs", books.pairs().len());
        let params = params(false);
        let budget = Budget::iterations(ITERATIONS_MAX);
        let clock = walras_clearing::SystemClock;
        let grid = SupplyGrid::for_mu(&books, params.mu);
        for table in [grid.as_ref(), None] {
            let serial =
                clear(&books, table, &params, Resources::serial(budget)).expect("clearing");
            check_invariants(&market, &books, &serial, params.epsilon, params.mu);
            for threads in [2, 3, 4] {
                let pool = walras_par::pool(threads);
                let resources = Resources {
                    budget,
                    clock: &clock,
                    pool: Some(&pool),
                };
                let parallel = clear(&books, table, &params, resources).expect("clearing");
                assert_eq!(
                    decided(&parallel),
                    decided(&serial),
                    "{assets} assets, {threads} threads, table {}",
                    table.is_some()
                );
            }
        }
    }
}

/// A deadline that never passes changes nothing; one that passed before the start runs no
/// round, no polishing and no cut repair, and still settles within every invariant.
#[test]
fn a_deadline_only_changes_how_many_rounds_run() {
    let market = market_books(8, 3_000, 7, 10_000, PairChoice::PowerLaw, 2);
    let books = OrderBooks::build(market.offers.clone(), 8, 1).expect("valid market");
    let params = ClearingParams {
        // Cold start: the fitted start may already converge, and then no round is needed.
        start_prices: Some(vec![1.0; 8]),
        ..params(false)
    };
    let frozen = FrozenClock(Instant::now());
    let unlimited = clear_on(
        &books,
        &params,
        2,
        Budget::iterations(ITERATIONS_MAX),
        &frozen,
    );
    assert!(unlimited.iterations > 0, "the cold start needs iterations");
    let later = Budget {
        deadline: Some(frozen.0 + Duration::from_secs(1)),
        iterations_max: ITERATIONS_MAX,
    };
    let never_expires = clear_on(&books, &params, 2, later, &frozen);
    assert_eq!(decided(&never_expires), decided(&unlimited));
    assert_eq!(
        never_expires.price_millis, 0.0,
        "times come from the clock passed in"
    );

    let expired = Budget {
        deadline: Some(frozen.0),
        iterations_max: ITERATIONS_MAX,
    };
    for threads in [1, 2, 4] {
        let stopped = clear_on(&books, &params, threads, expired, &frozen);
        assert_eq!(stopped.iterations, 0, "{threads} threads");
        assert_eq!(stopped.cut_steps, 0);
        check_invariants(&market, &books, &stopped, params.epsilon, params.mu);
    }
}

/// A table built for another μ is refused, not silently rebuilt or used.
#[test]
fn a_supply_table_for_another_mu_is_refused() {
    let market = market_books(4, 500, 3, 10_000, PairChoice::Uniform, 2);
    let books = OrderBooks::build(market.offers, 4, 1).expect("valid market");
    let params = params(false);
    let other = SupplyGrid::for_mu(&books, Fraction::power_of_two(8));
    let error = clear(
        &books,
        other.as_ref(),
        &params,
        Resources::serial(Budget::iterations(10)),
    )
    .expect_err("a table for μ = 2^-8 with μ = 2^-10");
    assert!(error.to_string().contains("SupplyGrid::for_mu"), "{error}");
}
