//! Tâtonnement (SPEEDEX §5 and appendix C.1): iterative price adjustment towards clearing
//! valuations, several differently-tuned instances raced against each other.
//!
//! One iteration of an instance, at valuations `p` with value-weighted net demand
//! `z_A = bought_A − sold_A` (from a smoothed [`demand::query`]):
//!
//! - proposes `p'_A = p_A · (1 + δ · z_A / v_A)`, the step clamped to a factor in [1/2, 2]:
//!   multiplicative, in value units (so redenominating an asset changes nothing), normalised by a
//!   volume `v_A` estimated from the current query (the smaller or the larger side of the asset's
//!   trade), so thin and thick assets move at comparable relative speeds;
//! - rescales `p'` to geometric mean 1 (only ratios matter);
//! - queries demand at `p'` and compares the line-search heuristic `Σ_A z_A²` (the squared l2 norm
//!   of value net demand): if it went down, moves to `p'` and grows δ; otherwise keeps `p` and
//!   shrinks δ — a backtracking line search with a weakened acceptance rule.
//!
//! Convergence is judged on the current prices: cheaply every iteration (the smoothed demand itself
//! satisfies conservation with the commission), and every `feasibility_interval` iterations by the
//! max-flow test of the clearing LP (appendix C.3), which also exploits the freedom within μ.
//!
//! Racing, in lockstep rounds: in each round every instance still going runs one slice of
//! [`SLICE_ITERATIONS`] iterations (the slices of one round in parallel on the caller's pool);
//! the race ends with the round in which some instance converged, and the winner is the
//! lowest-index instance that converged in it. An instance's slice depends only on its own
//! state, so the winner and its prices do not depend on the pool's size or on scheduling; the
//! budget's deadline is read only between rounds, so under a deadline only the number of rounds
//! depends on time. (Not one long task per instance on the pool: a pool may run two such tasks
//! one after the other on one worker, and the first would hold the second until the deadline.
//! A round is short, so the pool's workers are shared fairly.) Within a round an instance whose
//! index is above one that already converged stops at once: it can no longer win, and on one
//! thread this makes a round exactly the old round-robin pass, which stopped at the first
//! converged instance.

use crate::book::OrderBooks;
use crate::demand::{self, DemandWorkspace};
use crate::flow;
use crate::grid::SupplyGrid;
use crate::lp::PairFlowBounds;
use crate::newton::NewtonStepper;
use crate::{Budget, Clock, Resources};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use walras_par::ThreadPool;

/// Which per-asset volume normalises an asset's step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VolumeNormalization {
    /// min(sold, bought): aggressive on assets close to balance.
    SmallerSide,
    /// max(sold, bought): the relative step never exceeds δ.
    LargerSide,
}

/// How an instance steps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Method {
    /// SPEEDEX's tâtonnement: each asset moves by its own volume-normalised net demand.
    #[default]
    Tatonnement,
    /// Damped Newton steps on the whole system (see [`crate::newton`]); the step fields are unused.
    Newton,
}

/// Control parameters of one tâtonnement instance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Control {
    pub method: Method,
    pub step_initial: f64,
    pub step_grow: f64,
    pub step_shrink: f64,
    pub volume: VolumeNormalization,
}

/// The instances raced by default, most generally useful first.
pub(crate) fn default_controls() -> Vec<Control> {
    use VolumeNormalization::*;
    vec![
        Control {
            method: Method::Newton,
            step_initial: 1.0,
            step_grow: 1.0,
            step_shrink: 1.0,
            volume: LargerSide,
        },
        Control {
            method: Method::Tatonnement,
            step_initial: 0.5,
            step_grow: 1.5,
            step_shrink: 0.6,
            volume: LargerSide,
        },
        Control {
            method: Method::Tatonnement,
            step_initial: 0.1,
            step_grow: 1.2,
            step_shrink: 0.5,
            volume: SmallerSide,
        },
        Control {
            method: Method::Tatonnement,
            step_initial: 1.0,
            step_grow: 2.0,
            step_shrink: 0.4,
            volume: LargerSide,
        },
        Control {
            method: Method::Tatonnement,
            step_initial: 0.05,
            step_grow: 1.1,
            step_shrink: 0.7,
            volume: SmallerSide,
        },
    ]
}

/// What every instance of one race shares.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RaceParams {
    pub epsilon: f64,
    pub mu: f64,
    /// Iterations between max-flow feasibility checks.
    pub feasibility_interval: u32,
    /// Iterations after which an instance stops (the budget's, see [`crate::Budget`]).
    pub iterations_max: u64,
}

/// One instance's final state.
#[derive(Clone, Debug)]
pub(crate) struct InstanceResult {
    /// Valuations, geometric mean 1.
    pub prices: Vec<f64>,
    pub iterations: u64,
    pub converged: bool,
    pub counts: QueryCounts,
}

/// Demand queries made and the time spent in them (measurements, not decisions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct QueryCounts {
    /// Queries for steps, and the time spent in them.
    pub queries: u64,
    pub query_nanos: u64,
    /// Exact queries made to confirm convergence, and the time spent in them.
    pub check_queries: u64,
    pub check_nanos: u64,
}

impl std::ops::AddAssign for QueryCounts {
    fn add_assign(&mut self, other: QueryCounts) {
        self.queries += other.queries;
        self.query_nanos += other.query_nanos;
        self.check_queries += other.check_queries;
        self.check_nanos += other.check_nanos;
    }
}

/// Every instance's result and which one converged first, if any.
#[derive(Clone, Debug)]
pub(crate) struct RaceOutcome {
    pub winner: Option<usize>,
    pub results: Vec<InstanceResult>,
}

impl RaceOutcome {
    /// No race was needed: every instance "converged" at `prices` without iterating (a batch in
    /// which nothing can trade, see [`crate::crossing`]).
    pub(crate) fn settled_at(controls: &[Control], prices: Vec<f64>) -> RaceOutcome {
        let results = controls
            .iter()
            .map(|_| InstanceResult {
                prices: prices.clone(),
                iterations: 0,
                converged: true,
                counts: QueryCounts::default(),
            })
            .collect();
        RaceOutcome {
            winner: Some(0),
            results,
        }
    }
}

/// An instance stops reading the supply table after this many rejected steps in a row, or this
/// many iterations: near equilibrium the table's interpolation error can hide the remaining
/// imbalance from the line search, and exact queries always see it.
const GRID_REJECTIONS_MAX: u32 = 16;
const GRID_ITERATIONS_MAX: u64 = 256;

/// Iterations of one instance per round of the race. Long enough that one instance's working
/// set stays in cache (instances sharing a core otherwise evict each other's lines) and that a
/// round's fork-join costs little against its work, short enough that a stuck instance soon
/// yields the core. Part of the deterministic result: the race ends with a round.
pub(crate) const SLICE_ITERATIONS: u32 = 32;
const STEP_MIN: f64 = 1e-9;
/// An instance whose best heuristic has not improved by [`PROGRESS_MIN`] (relative) for this many
/// iterations has stalled and stops: tiny or degenerate books must not spin until the deadline.
const STALL_ITERATIONS: u64 = 256;
const PROGRESS_MIN: f64 = 1e-3;
/// Iterations of one instance at most, whatever the deadline: on books where Newton steps
/// converge they take tens; an instance still going after this many (slow progress on a tiny or
/// degenerate book) would only burn the block's budget.
pub(crate) const INSTANCE_ITERATIONS_MAX: u64 = 600;
// A stall must be detectable before the cap stops an instance anyway.
const _: () = assert!(STALL_ITERATIONS < INSTANCE_ITERATIONS_MAX);

/// Damped Newton steps taken after convergence, at most.
pub(crate) const POLISH_ITERATIONS_MAX: u64 = 8;
/// The smoothing width polishing balances, as a fraction of μ.
const POLISH_MU_FRACTION: f64 = 0.25;

/// Improves converged valuations: convergence only says the LP is feasible with the μ band's
/// freedom, and on books whose offers sit within a few μ of the rate that is already true far from
/// where demand balances, leaving much of the band untraded. Up to [`POLISH_ITERATIONS_MAX`] damped
/// Newton steps move towards balance (stopping once every asset's net demand is within a quarter
/// of ε of its volume); the result is kept only if it is still converged. Returns the new prices
/// and the queries made, or `None` when nothing better was found.
/// The deadline of `budget` is read on `clock` before each step.
pub(crate) fn polish(
    books: &OrderBooks,
    prices: &[f64],
    params: RaceParams,
    budget: Budget,
    (clock, pool): (&dyn Clock, Option<&ThreadPool>),
) -> Option<(Vec<f64>, u64)> {
    let control = default_controls()
        .into_iter()
        .find(|control| control.method == Method::Newton)
        .expect("a Newton control");
    // Balance demand smoothed over a narrower band than μ: closer to where what may trade (not
    // only what must) balances, which is what the LP then realizes.
    let target = RaceParams {
        mu: params.mu * POLISH_MU_FRACTION,
        ..params
    };
    let mut instance = Instance::new(books, None, control, prices, (clock, pool));
    let start = instance.prices.clone(); // normalised
    instance.query_current(&target);
    instance.start_newton(&target);
    while instance.iterations < POLISH_ITERATIONS_MAX
        && !instance.stalled
        && !budget.expired(clock)
        && !balanced(&instance.current, params.epsilon / 4.0)
    {
        instance.iterate_newton(&target);
    }
    // A step is only taken when it lowers the merit (at the scales of the point it left); the
    // merit's scales change with every step, so compare positions, not merit values.
    if instance.prices == start {
        return None;
    }
    instance.query_current(&params);
    if !instance.check_converged(&params, true) {
        return None;
    }
    Some((instance.prices, instance.counts.queries))
}

/// Whether every asset's net demand is within `tolerance` of its traded volume.
fn balanced(workspace: &DemandWorkspace, tolerance: f64) -> bool {
    workspace
        .sold_value
        .iter()
        .zip(&workspace.bought_value)
        .all(|(sold, bought)| (bought - sold).abs() <= tolerance * sold.max(*bought))
}

/// Races one instance per control from `start` prices, in lockstep rounds on `resources`'
/// pool, until one converges, every instance has stopped, or the budget's deadline passes.
pub(crate) fn race(
    books: &OrderBooks,
    grid: Option<&SupplyGrid>,
    controls: &[Control],
    start: &[f64],
    params: RaceParams,
    resources: Resources<'_>,
) -> RaceOutcome {
    assert!(!controls.is_empty(), "a race needs at least one instance");
    let Resources {
        budget,
        clock,
        pool,
    } = resources;
    // Every instance starts from the same prices: make that first (cold) query once.
    let first =
        Instance::new(books, grid, controls[0], start, (clock, pool)).with_first_query(&params);
    let mut instances: Vec<Instance> = controls
        .iter()
        .map(|control| first.restarted_with(*control))
        .collect();
    let pool = pool.filter(|pool| pool.current_num_threads() > 1);
    let mut winner = None;
    while !budget.expired(clock)
        // A converged instance is not "done": its round below reports the win.
        && !instances
            .iter()
            .all(|instance| !instance.converged && instance.finished(&params))
    {
        winner = round(&mut instances, &params, pool);
        if winner.is_some() {
            break;
        }
    }
    let mut results: Vec<InstanceResult> =
        instances.into_iter().map(Instance::into_result).collect();
    // The shared first query counts once, with the first instance.
    results[0].counts += first.counts;
    RaceOutcome { winner, results }
}

/// One round: every instance runs one slice; returns the lowest index that converged.
fn round(
    instances: &mut [Instance],
    params: &RaceParams,
    pool: Option<&ThreadPool>,
) -> Option<usize> {
    let lowest_converged = AtomicUsize::new(usize::MAX);
    let slice = |index: usize, instance: &mut Instance| {
        let outrun = || lowest_converged.load(Ordering::Relaxed) < index;
        if instance.run(SLICE_ITERATIONS, params, &outrun) {
            lowest_converged.fetch_min(index, Ordering::Relaxed);
        }
    };
    match pool {
        Some(pool) => pool.install(|| {
            use rayon::prelude::*;
            // One instance per task: a round's tasks are few and long.
            instances
                .par_iter_mut()
                .with_max_len(1)
                .enumerate()
                .for_each(|(index, instance)| slice(index, instance))
        }),
        None => {
            for (index, instance) in instances.iter_mut().enumerate() {
                slice(index, instance);
            }
        }
    }
    let lowest = lowest_converged.into_inner();
    (lowest != usize::MAX).then_some(lowest)
}

struct Instance<'b> {
    books: &'b OrderBooks,
    /// Where an exact query's pairs and Newton's slopes are spread (`None`: this thread).
    pool: Option<&'b ThreadPool>,
    /// Where query times are read (measurements only: no time decides a step).
    clock: &'b dyn Clock,
    /// Where steps read demand from; `None` means exact queries throughout.
    grid: Option<&'b SupplyGrid>,
    /// Exact demand at the current prices, for confirming convergence.
    exact: DemandWorkspace,
    control: Control,
    prices: Vec<f64>,
    trial_prices: Vec<f64>,
    current: DemandWorkspace,
    trial: DemandWorkspace,
    heuristic: f64,
    step: f64,
    iterations: u64,
    converged: bool,
    flow_bounds: Vec<PairFlowBounds>,
    counts: QueryCounts,
    /// Steps rejected since the last accepted one.
    rejections_in_row: u32,
    /// The damped Newton stepper, for [`Method::Newton`] instances.
    newton: Option<NewtonStepper>,
    /// The heuristic when the instance last made progress, and the iteration it did.
    progress_heuristic: f64,
    progress_iteration: u64,
    stalled: bool,
}

impl<'b> Instance<'b> {
    fn new(
        books: &'b OrderBooks,
        grid: Option<&'b SupplyGrid>,
        control: Control,
        start: &[f64],
        (clock, pool): (&'b dyn Clock, Option<&'b ThreadPool>),
    ) -> Instance<'b> {
        let mut prices = start.to_vec();
        normalize(&mut prices);
        let current = DemandWorkspace::new(books);
        Instance {
            books,
            pool,
            clock,
            grid,
            exact: current.clone(),
            control,
            trial_prices: prices.clone(),
            prices,
            trial: current.clone(),
            current,
            heuristic: f64::INFINITY,
            step: control.step_initial,
            iterations: 0,
            converged: false,
            flow_bounds: Vec::with_capacity(books.pairs().len()),
            counts: QueryCounts::default(),
            rejections_in_row: 0,
            newton: None,
            progress_heuristic: f64::INFINITY,
            progress_iteration: 0,
            stalled: false,
        }
    }

    /// Queries demand at the starting prices and checks them.
    fn with_first_query(mut self, params: &RaceParams) -> Instance<'b> {
        self.query_current(params);
        self.heuristic = heuristic(&self.current);
        self.converged = self.check_converged(params, true);
        self
    }

    /// A copy of this (not yet iterated) instance under other controls.
    fn restarted_with(&self, control: Control) -> Instance<'b> {
        Instance {
            books: self.books,
            pool: self.pool,
            clock: self.clock,
            grid: self.grid,
            exact: self.exact.clone(),
            control,
            prices: self.prices.clone(),
            trial_prices: self.trial_prices.clone(),
            current: self.current.clone(),
            trial: self.trial.clone(),
            heuristic: self.heuristic,
            step: control.step_initial,
            iterations: 0,
            converged: self.converged,
            flow_bounds: Vec::with_capacity(self.flow_bounds.capacity()),
            counts: QueryCounts::default(),
            rejections_in_row: 0,
            newton: None,
            progress_heuristic: self.heuristic,
            progress_iteration: 0,
            stalled: false,
        }
    }

    /// Whether this instance will iterate no more.
    fn finished(&self, params: &RaceParams) -> bool {
        self.converged
            || self.stalled
            || self.iterations >= params.iterations_max.min(INSTANCE_ITERATIONS_MAX)
    }

    /// Newton instances step on exact demand: leave the grid and set up the stepper.
    fn start_newton(&mut self, params: &RaceParams) {
        if self.grid.is_some() {
            self.grid = None;
            self.query_current(params);
        }
        let mut stepper = NewtonStepper::new(self.books, params.mu);
        stepper.rescale(&self.prices, &self.current);
        self.heuristic = stepper.merit(&self.current);
        self.progress_heuristic = self.heuristic;
        self.newton = Some(stepper);
    }

    /// Runs up to `iterations` iterations, fewer once `outrun` says another instance has won;
    /// true once converged.
    fn run(&mut self, iterations: u32, params: &RaceParams, outrun: &dyn Fn() -> bool) -> bool {
        if outrun() {
            return self.converged;
        }
        if self.control.method == Method::Newton && self.newton.is_none() && !self.converged {
            self.start_newton(params);
        }
        for _ in 0..iterations {
            if self.finished(params) || outrun() {
                break;
            }
            match self.newton {
                Some(_) => self.iterate_newton(params),
                None => self.iterate(params),
            }
            self.note_progress();
            let full_check = self
                .iterations
                .is_multiple_of(params.feasibility_interval as u64);
            self.converged = self.check_converged(params, full_check);
        }
        self.converged
    }

    fn iterate(&mut self, params: &RaceParams) {
        self.iterations += 1;
        self.propose();
        let started = self.clock.now();
        match self.grid {
            Some(grid) => demand::query_grid(self.books, grid, &self.trial_prices, &mut self.trial),
            None => demand::query_on(
                self.books,
                &self.trial_prices,
                params.mu,
                &mut self.trial,
                self.pool,
            ),
        }
        self.count_query(started);
        let trial_heuristic = heuristic(&self.trial);
        if trial_heuristic < self.heuristic {
            std::mem::swap(&mut self.prices, &mut self.trial_prices);
            std::mem::swap(&mut self.current, &mut self.trial);
            self.heuristic = trial_heuristic;
            self.step *= self.control.step_grow;
            self.rejections_in_row = 0;
        } else {
            self.step = (self.step * self.control.step_shrink).max(STEP_MIN);
            self.rejections_in_row += 1;
        }
        if self.grid.is_some()
            && (self.rejections_in_row >= GRID_REJECTIONS_MAX
                || self.iterations >= GRID_ITERATIONS_MAX)
        {
            self.leave_grid(params);
        }
    }

    /// One damped Newton step on exact demand (see [`crate::newton`]).
    fn iterate_newton(&mut self, params: &RaceParams) {
        self.iterations += 1;
        let stepper = self
            .newton
            .as_mut()
            .expect("a Newton instance has a stepper");
        stepper.propose(
            (self.books, self.pool),
            &self.prices,
            &self.current,
            &mut self.trial_prices,
        );
        normalize(&mut self.trial_prices);
        let started = self.clock.now();
        demand::query_on(
            self.books,
            &self.trial_prices,
            params.mu,
            &mut self.trial,
            self.pool,
        );
        self.count_query(started);
        let stepper = self
            .newton
            .as_mut()
            .expect("a Newton instance has a stepper");
        if stepper.merit(&self.trial) < self.heuristic {
            std::mem::swap(&mut self.prices, &mut self.trial_prices);
            std::mem::swap(&mut self.current, &mut self.trial);
            stepper.accepted(params.mu);
            stepper.rescale(&self.prices, &self.current);
            self.heuristic = stepper.merit(&self.current);
        } else {
            stepper.refused();
            if stepper.exhausted() {
                self.stalled = true;
            }
        }
    }

    /// Marks the instance stalled when its heuristic has not improved enough for a while.
    fn note_progress(&mut self) {
        if self.heuristic < self.progress_heuristic * (1.0 - PROGRESS_MIN) {
            self.progress_heuristic = self.heuristic;
            self.progress_iteration = self.iterations;
        } else if self.iterations - self.progress_iteration >= STALL_ITERATIONS {
            self.stalled = true;
        }
    }

    /// Writes the multiplicative, volume-normalised step from `prices` into `trial_prices`.
    fn propose(&mut self) {
        let total: f64 = self.current.sold_value.iter().sum();
        let volume_floor = (total * 1e-12).max(f64::MIN_POSITIVE);
        for asset in 0..self.prices.len() {
            let sold = self.current.sold_value[asset];
            let bought = self.current.bought_value[asset];
            let volume = match self.control.volume {
                VolumeNormalization::SmallerSide => sold.min(bought),
                VolumeNormalization::LargerSide => sold.max(bought),
            }
            .max(volume_floor);
            let change = (self.step * (bought - sold) / volume).clamp(-0.5, 1.0);
            self.trial_prices[asset] = self.prices[asset] * (1.0 + change);
        }
        normalize(&mut self.trial_prices);
    }

    /// From now on query exactly; the current demand and heuristic are recomputed to match.
    fn leave_grid(&mut self, params: &RaceParams) {
        self.grid = None;
        self.query_current(params);
        self.heuristic = heuristic(&self.current);
        self.step = self.control.step_initial;
        self.rejections_in_row = 0;
    }

    /// Demand at the current prices.
    fn query_current(&mut self, params: &RaceParams) {
        let started = self.clock.now();
        match self.grid {
            Some(grid) => demand::query_grid(self.books, grid, &self.prices, &mut self.current),
            None => demand::query_on(
                self.books,
                &self.prices,
                params.mu,
                &mut self.current,
                self.pool,
            ),
        }
        self.count_query(started);
    }

    /// Cheap test every iteration: the smoothed demand itself conserves every asset with the
    /// commission. Every `full` iteration, or when the cheap test passes on the grid's
    /// approximate demand, the decision is made on exact demand: the cheap test again, then the
    /// max-flow test of the LP.
    fn check_converged(&mut self, params: &RaceParams, full: bool) -> bool {
        let cheap = conserves(&self.current, params.epsilon);
        if !cheap && !full {
            return false;
        }
        let exact = if self.grid.is_some() {
            let started = self.clock.now();
            demand::query_on(
                self.books,
                &self.prices,
                params.mu,
                &mut self.exact,
                self.pool,
            );
            self.counts.check_queries += 1;
            self.counts.check_nanos += (self.clock.now() - started).as_nanos() as u64;
            &self.exact
        } else {
            &self.current
        };
        if conserves(exact, params.epsilon) {
            return true;
        }
        if !full {
            return false;
        }
        self.flow_bounds.clear();
        for (index, pair) in self.books.pairs().iter().enumerate() {
            self.flow_bounds.push(PairFlowBounds {
                sell: pair.sell as usize,
                buy: pair.buy as usize,
                lower: exact.pair_lower_value[index],
                upper: exact.pair_upper_value[index],
            });
        }
        flow::circulation_feasible(self.books.assets(), &self.flow_bounds, params.epsilon)
    }

    fn count_query(&mut self, started: Instant) {
        self.counts.queries += 1;
        self.counts.query_nanos += (self.clock.now() - started).as_nanos() as u64;
    }

    fn into_result(self) -> InstanceResult {
        InstanceResult {
            prices: self.prices,
            iterations: self.iterations,
            converged: self.converged,
            counts: self.counts,
        }
    }
}

/// Whether every asset is sold to the auctioneer at least as much as it pays out, less ε.
fn conserves(workspace: &DemandWorkspace, epsilon: f64) -> bool {
    workspace
        .sold_value
        .iter()
        .zip(&workspace.bought_value)
        .all(|(sold, bought)| *sold >= (1.0 - epsilon) * bought)
}

/// Squared l2 norm of value net demand.
fn heuristic(workspace: &DemandWorkspace) -> f64 {
    workspace
        .sold_value
        .iter()
        .zip(&workspace.bought_value)
        .map(|(sold, bought)| (bought - sold) * (bought - sold))
        .sum()
}

/// Rescales to geometric mean 1.
pub(crate) fn normalize(prices: &mut [f64]) {
    let mean_log = prices.iter().map(|price| price.ln()).sum::<f64>() / prices.len() as f64;
    let factor = (-mean_log).exp();
    for price in prices.iter_mut() {
        *price *= factor;
    }
}

/// A starting point from the books alone: valuations whose ratios best fit (least squares in
/// log space, weighted by offer count) each pair's median limit price. Cheap — a few sweeps over
/// the pairs — and usually within a few percent of the clearing valuations.
pub(crate) fn initial_guess(books: &OrderBooks) -> Vec<f64> {
    let assets = books.assets();
    let edges: Vec<(usize, usize, f64, f64)> = books
        .pairs()
        .iter()
        .map(|pair| {
            let median = books.offer_at(pair, pair.len() / 2).min_price.to_f64();
            (
                pair.sell as usize,
                pair.buy as usize,
                median.ln(),
                pair.len() as f64,
            )
        })
        .collect();
    let mut log_prices = vec![0.0f64; assets];
    let mut weighted_sum = vec![0.0f64; assets];
    let mut weight_total = vec![0.0f64; assets];
    for _sweep in 0..60 {
        weighted_sum.fill(0.0);
        weight_total.fill(0.0);
        for &(sell, buy, log_rate, weight) in &edges {
            // log p_sell - log p_buy ≈ log_rate
            weighted_sum[sell] += weight * (log_prices[buy] + log_rate);
            weight_total[sell] += weight;
            weighted_sum[buy] += weight * (log_prices[sell] - log_rate);
            weight_total[buy] += weight;
        }
        for asset in 0..assets {
            if weight_total[asset] > 0.0 {
                // Damped Jacobi: the undamped update oscillates on two-asset markets.
                let target = weighted_sum[asset] / weight_total[asset];
                log_prices[asset] = 0.5 * (log_prices[asset] + target);
            }
        }
    }
    let mut prices: Vec<f64> = log_prices
        .iter()
        .map(|log| log.clamp(-600.0, 600.0).exp())
        .collect();
    normalize(&mut prices);
    prices
}
