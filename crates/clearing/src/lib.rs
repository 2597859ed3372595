//! Batch clearing (SPEEDEX §4–5, appendices B, C, D, G) as pure functions.
//!
//! Given a batch of limit sell offers, [`clear`] computes one valuation per asset and, per ordered
//! pair, the amount sold, such that assets are conserved exactly (the auctioneer never pays out
//! more than it receives, in integers), no offer trades below its limit price, and — when
//! tâtonnement converged — every offer whose limit is below `(1 − μ)` times the batch rate trades
//! in full, with at most one partial fill per pair.
//!
//! Pipeline: [`book::OrderBooks::build`] (sort and index; not part of clearing time) →
//! [`tatonnement::race`] (valuations) → [`settle::settle`] (LP, integer amounts, fills) →
//! [`quality::measure`].

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod book;
pub mod crossing;
pub mod cut;
pub mod demand;
pub mod flow;
pub mod grid;
pub mod lp;
pub mod newton;
pub mod quality;
pub mod settle;
pub mod tatonnement;

pub use book::{BookError, OrderBooks};
pub use grid::SupplyGrid;
pub use quality::Quality;
pub use settle::{PairClearing, SettleError, Settlement};

use std::time::{Duration, Instant};
use walras_types::Fraction;

/// How to clear.
#[derive(Clone, Debug)]
pub struct ClearingParams {
    /// Commission charged on every payout.
    pub epsilon: Fraction,
    /// Smoothing width: offers with limits below `(1 − μ)` × rate must trade in full.
    pub mu: Fraction,
    /// Tâtonnement gives up after this long and takes its best prices.
    pub timeout: Duration,
    /// Tâtonnement also gives up after this many iterations per instance (and never runs more
    /// than [`tatonnement::INSTANCE_ITERATIONS_MAX`]); unlike the timeout this cut-off does not
    /// depend on the machine, so with one thread clearing is deterministic.
    pub max_iterations: u64,
    /// Threads racing tâtonnement instances.
    pub threads: usize,
    /// Iterations between LP feasibility checks inside tâtonnement.
    pub feasibility_interval: u32,
    /// Starting valuations (for example the previous block's); by default fitted to the books.
    pub start_prices: Option<Vec<f64>>,
    /// The tâtonnement instances raced.
    pub controls: Vec<tatonnement::Control>,
    /// Whether tâtonnement's steps read the supply table (see [`grid`]) rather than searching
    /// the books exactly.
    pub supply_grid: bool,
}

impl Default for ClearingParams {
    fn default() -> ClearingParams {
        ClearingParams {
            epsilon: Fraction::power_of_two(15),
            mu: Fraction::power_of_two(10),
            timeout: Duration::from_secs(2),
            max_iterations: u64::MAX,
            threads: 1,
            feasibility_interval: 10,
            start_prices: None,
            controls: tatonnement::default_controls(),
            supply_grid: true,
        }
    }
}

/// The outcome of clearing one batch.
#[derive(Clone, Debug)]
pub struct Clearing {
    pub settlement: Settlement,
    /// Tâtonnement converged and the settlement meets μ-completeness.
    pub converged: bool,
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

/// Clears a batch, building the supply table itself when `params.supply_grid` asks for one.
pub fn clear(books: &OrderBooks, params: &ClearingParams) -> Result<Clearing, ClearingError> {
    clear_with_grid(books, None, params)
}

/// Clears a batch with a supply table built beforehand ([`SupplyGrid::for_mu`]), so that
/// building it is not timed as clearing; a table for another μ is ignored and one is built.
pub fn clear_with_grid(
    books: &OrderBooks,
    supply_grid: Option<&SupplyGrid>,
    params: &ClearingParams,
) -> Result<Clearing, ClearingError> {
    validate(books, params)?;
    let started = Instant::now();
    let start_prices = match &params.start_prices {
        Some(prices) => prices.clone(),
        None => tatonnement::initial_guess(books),
    };
    let race_params = tatonnement::RaceParams {
        epsilon: planning_epsilon(params.epsilon),
        mu: params.mu.to_f64(),
        feasibility_interval: params.feasibility_interval.max(1),
        deadline: started + params.timeout,
        max_iterations: params.max_iterations,
        threads: params.threads,
    };
    let mu = params.mu.to_f64();
    let own_grid;
    let grid = match supply_grid {
        _ if !params.supply_grid => None,
        Some(grid) if grid.mu() == mu => Some(grid),
        _ if mu > 0.0 => {
            own_grid = grid::SupplyGrid::build(books, mu);
            Some(&own_grid)
        }
        _ => None,
    };
    let idle = crossing::idle_valuations(books);
    let nothing_can_trade = idle.is_some();
    let mut outcome = match idle {
        Some(prices) => tatonnement::RaceOutcome::settled_at(&params.controls, prices),
        None => tatonnement::race(books, grid, &params.controls, &start_prices, race_params),
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
            race_params.deadline,
        );
        cut_steps = repair.steps;
        result.queries += repair.queries;
        if repair.converged {
            result.prices = repair.prices;
            result.converged = true;
            outcome.winner = Some(0);
        }
    }
    if let Some(winner) = outcome.winner.filter(|_| !nothing_can_trade) {
        let result = &mut outcome.results[winner];
        if let Some((prices, queries)) = tatonnement::polish(books, &result.prices, race_params) {
            result.prices = prices;
            result.queries += queries;
        }
    }
    let priced = Instant::now();
    // The winner's prices; after a timeout, whichever instance leaves least utility unrealized.
    let candidates: Vec<usize> = match outcome.winner {
        Some(winner) => vec![winner],
        None => (0..outcome.results.len()).collect(),
    };
    let mut best: Option<(usize, Settlement, Quality)> = None;
    let mut settle_time = Duration::ZERO;
    for index in candidates {
        let settle_started = Instant::now();
        let valuations =
            settle::quantize(&outcome.results[index].prices).map_err(ClearingError::Settle)?;
        let settlement = settle::settle(
            books,
            &valuations,
            params.epsilon,
            params.mu,
            race_params.epsilon,
        )
        .map_err(ClearingError::Settle)?;
        settle_time += settle_started.elapsed();
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
    let converged =
        outcome.winner.is_some() && settlement.lp_with_lower_bounds && settlement.lower_bounds_met;
    let queries: u64 = outcome.results.iter().map(|result| result.queries).sum();
    let check_queries: u64 = outcome
        .results
        .iter()
        .map(|result| result.check_queries)
        .sum();
    let check_nanos: u64 = outcome
        .results
        .iter()
        .map(|result| result.check_nanos)
        .sum();
    let query_nanos: u64 = outcome
        .results
        .iter()
        .map(|result| result.query_nanos)
        .sum();
    Ok(Clearing {
        queries,
        query_micros_mean: query_nanos as f64 / 1e3 / queries.max(1) as f64,
        check_queries,
        check_micros_mean: check_nanos as f64 / 1e3 / check_queries.max(1) as f64,
        converged,
        iterations: outcome.results[instance].iterations,
        cut_steps,
        instance,
        settlement,
        quality,
        price_millis: (priced - started).as_secs_f64() * 1e3,
        settle_millis: settle_time.as_secs_f64() * 1e3,
        quality_millis: (priced.elapsed() - settle_time).as_secs_f64() * 1e3,
    })
}

fn validate(books: &OrderBooks, params: &ClearingParams) -> Result<(), ClearingError> {
    if params.controls.is_empty() {
        return Err(ClearingError::InvalidParams(
            "at least one tâtonnement control".into(),
        ));
    }
    if params.threads == 0 {
        return Err(ClearingError::InvalidParams(
            "threads must be at least 1".into(),
        ));
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
