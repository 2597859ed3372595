//! Batch clearing (SPEEDEX §4–5, appendices B, C, D, G) as pure functions.
//!
//! Given a batch of limit sell offers, [`clear`] computes one valuation per asset and, per ordered
//! pair, the amount sold, such that assets are conserved exactly (the auctioneer never pays out
//! more than it receives, in integers), no offer receives less than its limit price after the
//! commission on the integer amounts it gives and gets (`received ≥ sold · limit · (1 − ε)`
//! exactly; see [`fill`]), and — when tâtonnement converged — every offer whose limit is below
//! `(1 − μ)` times the batch rate trades in full. Per pair, the offer where the amount ends
//! trades partially, and so may offers too small to trade in full at their limit (dust, or
//! offers at the rate), which keep the rest.
//!
//! Pipeline: [`book::OrderBooks::build`] (sort and index; not part of clearing time) →
//! [`SupplyGrid::for_mu`] (the supply table, beside the books) → [`tatonnement::race`]
//! (valuations) → [`settle::settle`] (LP, integer amounts, fills) → [`quality::measure`].
//!
//! Clearing owns no time and no threads: the caller lends them in [`Resources`] — a [`Budget`]
//! (an iteration cap and an optional deadline), the [`Clock`] the deadline and the reported
//! timings are read from, and the thread pool that tâtonnement's instances, the demand queries
//! and settling's per-pair passes run on. Under an
//! iteration budget with no deadline the result is a pure function of (books, table, params):
//! the same for any pool size and on every run (see `tests/determinism.rs`).

#![cfg_attr(not(test), deny(clippy::unwrap_used))]
#![warn(unreachable_pub)]

mod book;
mod crossing;
mod cut;
mod demand;
mod fill;
mod flow;
mod grid;
mod lp;
mod newton;
mod quality;
mod settle;
mod tatonnement;

pub use book::{BookBuffers, BookError, Chunk, OfferEdit, OrderBooks, PairBook, CHUNK_OFFERS_MEAN};
pub use demand::{query as query_demand, query_grid as query_demand_on_grid, DemandWorkspace};
pub use fill::{FillWalk, PayoutTerms, Sale, DUST_PAYOUT_UNITS_MAX};
pub use grid::SupplyGrid;
pub use quality::Quality;
pub use settle::{
    quantize, settle, settle_given, Fill, PairClearing, SettleError, Settlement, ShortFill,
    TradedPair,
};

use std::time::{Duration, Instant};
use walras_par::ThreadPool;
use walras_types::Fraction;

/// Where clearing reads the time: the deadline of its [`Budget`] and the timings it reports.
/// The production value is [`SystemClock`]; a test can pass a clock it steers.
pub trait Clock: Sync {
    fn now(&self) -> Instant;
}

/// The operating system's monotonic clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// How much work one clearing may do.
///
/// `iterations_max` caps each tâtonnement instance (never above
/// [`tatonnement::INSTANCE_ITERATIONS_MAX`]); it does not depend on the machine, so with no
/// deadline clearing is deterministic. A deadline is read between rounds of the race (and
/// between polishing and cut-repair steps): it changes how many rounds run, never what one round
/// computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    pub deadline: Option<Instant>,
    pub iterations_max: u64,
}

impl Budget {
    /// Iterations only: the result is a function of the input alone.
    pub fn iterations(iterations_max: u64) -> Budget {
        Budget {
            deadline: None,
            iterations_max,
        }
    }

    /// At most `timeout` from now on `clock`, and at most `iterations_max` iterations per
    /// instance.
    pub fn within(clock: &dyn Clock, timeout: Duration, iterations_max: u64) -> Budget {
        Budget {
            deadline: Some(clock.now() + timeout),
            iterations_max,
        }
    }

    /// Whether the deadline (if any) has passed on `clock`.
    pub fn expired(&self, clock: &dyn Clock) -> bool {
        self.deadline
            .is_some_and(|deadline| clock.now() >= deadline)
    }
}

/// What the caller lends one clearing: its budget, the clock, and the pool its parallel parts
/// run on (`None`: the calling thread).
#[derive(Clone, Copy)]
pub struct Resources<'a> {
    pub budget: Budget,
    pub clock: &'a dyn Clock,
    pub pool: Option<&'a ThreadPool>,
}

impl Resources<'static> {
    /// `budget` on the system clock and the calling thread.
    pub fn serial(budget: Budget) -> Resources<'static> {
        Resources {
            budget,
            clock: &SystemClock,
            pool: None,
        }
    }
}

impl<'a> Resources<'a> {
    /// The same with tâtonnement's instances on `pool`.
    pub fn on(self, pool: &'a ThreadPool) -> Resources<'a> {
        Resources {
            pool: Some(pool),
            ..self
        }
    }
}

/// How to clear: the batch's targets and tâtonnement's tuning. Time and threads are not here
/// (see [`Resources`]).
#[derive(Clone, Debug)]
pub struct ClearingParams {
    /// Commission charged on every payout.
    pub epsilon: Fraction,
    /// Smoothing width: offers with limits below `(1 − μ)` × rate must trade in full.
    pub mu: Fraction,
    /// Iterations between LP feasibility checks inside tâtonnement.
    pub feasibility_interval: u32,
    /// Starting valuations (for example the previous block's); by default fitted to the books.
    pub start_prices: Option<Vec<f64>>,
    /// The tâtonnement instances raced.
    pub controls: Vec<tatonnement::Control>,
}

impl Default for ClearingParams {
    fn default() -> ClearingParams {
        ClearingParams {
            epsilon: Fraction::power_of_two(15),
            mu: Fraction::power_of_two(10),
            feasibility_interval: 10,
            start_prices: None,
            controls: tatonnement::default_controls(),
        }
    }
}

/// The outcome of clearing one batch.
///
/// Under an iteration budget `settlement`, `converged`, `iterations`, `cut_steps`, `instance`
/// and `quality` are a function of the input alone. The rest are measurements: times read from
/// the clock, and query counts that include the work of losing instances, which with more than
/// one thread depends on scheduling (a loser stops early once a lower instance has won).
#[derive(Clone, Debug)]
pub struct Clearing {
    pub settlement: Settlement,
    /// Tâtonnement converged and the settlement meets μ-completeness.
    pub converged: bool,
    /// Tâtonnement (or the cut repair after it) converged, whether or not the settlement then
    /// met μ-completeness: it can miss it by dust alone, offers below `(1 − μ) · rate` that no
    /// whole amount lets trade in full at their limit ([`Settlement::mu_shortfall`]).
    pub prices_converged: bool,
    /// Iterations of the instance whose prices were used.
    pub iterations: u64,
    /// Cut-repair steps taken after the race (see [`cut`]); 0 when an instance converged.
    pub cut_steps: u32,
    /// Index of that instance among the controls.
    pub instance: usize,
    /// Demand queries made by all instances for their steps, and the mean time of one.
    pub queries: u64,
    pub query_micros_mean: f64,
    /// Exact queries made to confirm convergence, and the mean time of one.
    pub check_queries: u64,
    pub check_micros_mean: f64,
    pub quality: Quality,
    /// Time to compute prices (tâtonnement).
    pub price_millis: f64,
    /// Time to settle (LP, integer amounts, fill points and payouts).
    pub settle_millis: f64,
    /// Time to measure quality (and, after a timeout, to compare instances).
    pub quality_millis: f64,
}

impl Clearing {
    /// Price computation and clearing: tâtonnement, LP and fills.
    pub fn millis(&self) -> f64 {
        self.price_millis + self.settle_millis
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClearingError {
    #[error("{0}")]
    InvalidParams(String),
    #[error("{0}")]
    Settle(SettleError),
}

/// The commission the LP and tâtonnement plan with: 7/8 of what is charged, so that the last
/// eighth absorbs rounding to whole units (see [`settle`]).
pub fn planning_epsilon(epsilon: Fraction) -> f64 {
    epsilon.to_f64() * 0.875
}

/// Clears a batch. Tâtonnement's steps read `supply_grid` when one is given (it must be the
/// table of these books for `params.mu`, [`SupplyGrid::for_mu`]) and search the books exactly
/// otherwise; building the table is the caller's, so it is not timed as clearing.
pub fn clear(
    books: &OrderBooks,
    supply_grid: Option<&SupplyGrid>,
    params: &ClearingParams,
    resources: Resources<'_>,
) -> Result<Clearing, ClearingError> {
    validate(books, supply_grid, params, &resources)?;
    let Resources {
        budget,
        clock,
        pool,
    } = resources;
    let started = clock.now();
    let start_prices = match &params.start_prices {
        Some(prices) => prices.clone(),
        None => tatonnement::initial_guess(books),
    };
    let race_params = tatonnement::RaceParams {
        epsilon: planning_epsilon(params.epsilon),
        mu: params.mu.to_f64(),
        feasibility_interval: params.feasibility_interval.max(1),
        iterations_max: budget.iterations_max,
    };
    let idle = crossing::idle_valuations(books);
    let nothing_can_trade = idle.is_some();
    let mut outcome = match idle {
        Some(prices) => tatonnement::RaceOutcome::settled_at(&params.controls, prices),
        None => tatonnement::race(
            books,
            supply_grid,
            &params.controls,
            &start_prices,
            race_params,
            resources,
        ),
    };
    let mut cut_steps = 0;
    if outcome.winner.is_none() {
        // No instance converged (thin books): repair the cuts the feasibility test names,
        // starting from the first instance's prices (see [`cut`]).
        let result = &mut outcome.results[0];
        let repair = cut::repair(
            books,
            &result.prices,
            race_params.mu,
            race_params.epsilon,
            budget,
            clock,
        );
        cut_steps = repair.steps;
        result.counts.queries += repair.queries;
        if repair.converged {
            result.prices = repair.prices;
            result.converged = true;
            outcome.winner = Some(0);
        }
    }
    if let Some(winner) = outcome.winner.filter(|_| !nothing_can_trade) {
        let result = &mut outcome.results[winner];
        if let Some((prices, queries)) =
            tatonnement::polish(books, &result.prices, race_params, budget, (clock, pool))
        {
            result.prices = prices;
            result.counts.queries += queries;
        }
    }
    let priced = clock.now();
    // The winner's prices; after a timeout, whichever instance leaves least utility unrealized.
    let candidates: Vec<usize> = match outcome.winner {
        Some(winner) => vec![winner],
        None => (0..outcome.results.len()).collect(),
    };
    let mut best: Option<(usize, Settlement, Quality)> = None;
    let mut settle_time = Duration::ZERO;
    for index in candidates {
        let settle_started = clock.now();
        let valuations =
            settle::quantize(&outcome.results[index].prices).map_err(ClearingError::Settle)?;
        let settlement = settle::settle(
            books,
            &valuations,
            params.epsilon,
            params.mu,
            race_params.epsilon,
            pool,
        )
        .map_err(ClearingError::Settle)?;
        settle_time += clock.now() - settle_started;
        let quality = quality::measure(books, &settlement);
        let better = match &best {
            None => true,
            Some((_, _, best_quality)) => {
                quality.unrealized_utility_ratio < best_quality.unrealized_utility_ratio
            }
        };
        if better {
            best = Some((index, settlement, quality));
        }
    }
    let (instance, settlement, quality) = best.expect("at least one instance ran");
    let converged = outcome.winner.is_some()
        && settlement.lp_with_lower_bounds()
        && settlement.lower_bounds_met();
    let mut counts = tatonnement::QueryCounts::default();
    for result in &outcome.results {
        counts += result.counts;
    }
    let tatonnement::QueryCounts {
        queries,
        query_nanos,
        check_queries,
        check_nanos,
    } = counts;
    let finished = clock.now();
    Ok(Clearing {
        queries,
        query_micros_mean: query_nanos as f64 / 1e3 / queries.max(1) as f64,
        check_queries,
        check_micros_mean: check_nanos as f64 / 1e3 / check_queries.max(1) as f64,
        converged,
        prices_converged: outcome.winner.is_some(),
        iterations: outcome.results[instance].iterations,
        cut_steps,
        instance,
        settlement,
        quality,
        price_millis: (priced - started).as_secs_f64() * 1e3,
        settle_millis: settle_time.as_secs_f64() * 1e3,
        quality_millis: ((finished - priced).saturating_sub(settle_time)).as_secs_f64() * 1e3,
    })
}

fn validate(
    books: &OrderBooks,
    supply_grid: Option<&SupplyGrid>,
    params: &ClearingParams,
    resources: &Resources<'_>,
) -> Result<(), ClearingError> {
    if params.controls.is_empty() {
        return Err(ClearingError::InvalidParams(
            "at least one tâtonnement control".into(),
        ));
    }
    if resources.budget.iterations_max == 0 {
        return Err(ClearingError::InvalidParams(
            "the iteration budget must be at least 1".into(),
        ));
    }
    if let Some(grid) = supply_grid {
        // The table is looked up by the exact fraction it was built for, never by a float.
        if grid.mu() != params.mu || grid.pairs() != books.pairs().len() {
            return Err(ClearingError::InvalidParams(format!(
                "the supply table was built for μ = {} and {} pairs; these books have {} pairs \
                 and μ = {}: build it with SupplyGrid::for_mu(books, mu)",
                grid.mu().to_f64(),
                grid.pairs(),
                books.pairs().len(),
                params.mu.to_f64()
            )));
        }
    }
    if let Some(prices) = &params.start_prices {
        if prices.len() != books.assets() || prices.iter().any(|p| !(p.is_finite() && *p > 0.0)) {
            return Err(ClearingError::InvalidParams(format!(
                "start prices must be {} positive numbers",
                books.assets()
            )));
        }
    }
    Ok(())
}
