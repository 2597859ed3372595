//! How settling and an exact demand query scale with the pool they run on: one market-shaped
//! batch (`walras_sim`'s market model), cleared once; then `settle` at the clearing's valuations
//! and `clear` itself, each timed `REPS` times per pool size, medians printed. The figures of
//! BENCHMARKS.md "Settling's per-pair passes on the block's threads" come from it.
//!
//! Run: `cargo run --release -p walras-clearing --example settle_threads -- [assets] [offers] [threads,...]`

use std::time::Instant;
use walras_clearing::{
    clear, planning_epsilon, settle, Budget, ClearingParams, OrderBooks, Resources, SupplyGrid,
};
use walras_sim::{generate_offers, MarketShape, OfferModel, OfferWorkload, PairChoice};

const REPS: usize = 41;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let assets: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(50);
    let offers: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let threads: Vec<usize> = args
        .next()
        .unwrap_or_else(|| "1,2".into())
        .split(',')
        .filter_map(|t| t.parse().ok())
        .collect();
    let workload = OfferWorkload {
        assets,
        offers,
        seed: 1,
        model: OfferModel::Market,
        market: MarketShape {
            spread_ppm: 1_000,
            pairs: PairChoice::Uniform,
            valuation_decades: 2,
        },
    };
    let books = OrderBooks::build(generate_offers(&workload).offers, assets, 1).expect("books");
    let params = ClearingParams::default();
    let grid = SupplyGrid::for_mu(&books, params.mu);
    let budget = Budget::iterations(5_000);
    let cleared = clear(&books, grid.as_ref(), &params, Resources::serial(budget)).expect("clear");
    let valuations = cleared.settlement.valuations().to_vec();
    let lp_epsilon = planning_epsilon(params.epsilon);
    println!(
        "{assets} assets, {} pairs, {offers} offers",
        books.pairs().len()
    );
    // Alternate pool sizes within each repetition so that the machine's drift hits all alike.
    let mut settle_ms = vec![Vec::new(); threads.len()];
    let mut clear_ms = vec![Vec::new(); threads.len()];
    for _ in 0..REPS {
        for (at, &count) in threads.iter().enumerate() {
            let pool = walras_par::pool(count);
            let lent = (count > 1).then_some(&*pool);
            let started = Instant::now();
            let settled = settle(
                &books,
                &valuations,
                params.epsilon,
                params.mu,
                lp_epsilon,
                lent,
            )
            .expect("settle");
            settle_ms[at].push(started.elapsed().as_secs_f64() * 1e3);
            assert_eq!(
                settled, cleared.settlement,
                "the same settlement on any pool"
            );
            let resources = Resources::serial(budget);
            let resources = match lent {
                Some(pool) => resources.on(pool),
                None => resources,
            };
            let started = Instant::now();
            let again = clear(&books, grid.as_ref(), &params, resources).expect("clear");
            clear_ms[at].push(started.elapsed().as_secs_f64() * 1e3);
            assert_eq!(
                again.settlement, cleared.settlement,
                "the same clearing on any pool"
            );
        }
    }
    for (at, count) in threads.iter().enumerate() {
        println!(
            "threads {count:>2}: settle {:.2} ms, clear {:.2} ms (medians of {REPS})",
            median(settle_ms[at].clone()),
            median(clear_ms[at].clone())
        );
    }
}
