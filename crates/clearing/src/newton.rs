//! Damped Newton steps for valuations (Levenberg–Marquardt), raced beside plain tâtonnement.
//!
//! Why: on books shaped like real markets every pair is quoted on both sides of its rate, a
//! fraction of a percent away, so near equilibrium a pair's supply moves from nothing to
//! everything within a percent of its rate. Plain tâtonnement steps each asset by its own net
//! demand; with steep, strongly coupled demand (every asset trades with every other) its step size
//! must shrink until it barely moves, and it stalls far from a clearing point (issue 10). The
//! demand structure is simple enough to use its derivative instead.
//!
//! With `u = ln p` and, per ordered pair S→B at rate `r = p_S / p_B`, value flow
//! `F = p_S · x(r)` and slope `G = p_S · dx / d ln r`, value net demand `z_A = bought_A − sold_A`
//! has the Jacobian
//!
//! ```text
//! −J = Σ_pairs  G · (e_S − e_B)(e_S − e_B)ᵀ  +  F · (e_S − e_B) e_Sᵀ
//! ```
//!
//! a singular M-matrix (columns sum to zero: only ratios matter). One step solves
//! `(−J + λ·diag(v)) Δu = z` with `v_A` the asset's traded value: as the damping λ grows the step
//! becomes tâtonnement's volume-normalised step `z_A / (λ v_A)`, as it shrinks it becomes Newton's.
//! λ adapts like a line search: a step that lowers `Σ z²` is taken and λ shrinks; otherwise the step
//! is refused and λ grows.
//!
//! The slope `dx / d ln r` is estimated over a window of relative width `±w` around the rate (amount
//! of offers with limits in the window over `2w`), not at the rate alone: inside μ only a few offers
//! set the local slope, and the window averages the book's density at the scale the next step
//! moves. `w` follows the size of the last accepted step, between μ and [`WINDOW_MAX`].
//!
//! Cost per iteration: one exact demand query, two searches per pair for the slopes (only after an
//! accepted step), and a dense solve (LU with partial pivoting, `n³/3` flops) for up to
//! [`DENSE_SOLVE_ASSETS_MAX`] assets, Gauss–Seidel sweeps above. The solve is written here (30
//! lines) rather than taken from a linear-algebra crate: it is the only one the project needs.

use crate::book::OrderBooks;
use crate::demand::{self, DemandWorkspace};
use walras_par::ThreadPool;

/// Below this many pairs the slopes are estimated on the calling thread (a pair's two
/// searches cost well under a microsecond).
const SLOPES_SERIAL_BELOW: usize = 256;

/// Widest slope window (relative): wider averages hide the curvature near equilibrium.
pub(crate) const WINDOW_MAX: f64 = 0.05;
/// Largest step of one log-valuation in one iteration.
const STEP_LOG_MAX: f64 = 0.5;
const DAMPING_INITIAL: f64 = 1.0;
const DAMPING_MIN: f64 = 1e-7;
const DAMPING_MAX: f64 = 1e9;
const DAMPING_SHRINK: f64 = 0.3;
const DAMPING_GROW: f64 = 10.0;
/// Above this many assets the step is solved by Gauss–Seidel sweeps instead of a dense LU.
pub(crate) const DENSE_SOLVE_ASSETS_MAX: usize = 160;
const GAUSS_SEIDEL_SWEEPS: usize = 30;
/// Smallest merit scale of an asset, as a fraction of the value of everything offered of it.
pub(crate) const MERIT_SCALE_FLOOR: f64 = 1e-3;

/// The damped Newton stepper's state between iterations.
#[derive(Clone, Debug)]
pub(crate) struct NewtonStepper {
    damping: f64,
    window: f64,
    /// Per pair: `G = p_S · dx / d ln r` at the current prices (value per unit of log rate).
    slopes: Vec<f64>,
    slopes_fresh: bool,
    /// Row-major `n × n` system and its right-hand side (then the solution).
    matrix: Vec<f64>,
    solution: Vec<f64>,
    /// Per asset: total amount offered for sale.
    offered: Vec<f64>,
    /// Per asset: the scale its net demand is measured in by [`NewtonStepper::merit`].
    merit_scale: Vec<f64>,
}

impl NewtonStepper {
    pub(crate) fn new(books: &OrderBooks, mu: f64) -> NewtonStepper {
        let assets = books.assets();
        let mut offered = vec![0.0; assets];
        for (index, pair) in books.pairs().iter().enumerate() {
            offered[pair.sell as usize] += books.pair_totals(index).amount;
        }
        NewtonStepper {
            offered,
            merit_scale: vec![1.0; assets],
            damping: DAMPING_INITIAL,
            window: (4.0 * mu).clamp(mu.max(1e-6), WINDOW_MAX),
            slopes: vec![0.0; books.pairs().len()],
            slopes_fresh: false,
            matrix: vec![0.0; assets * assets],
            solution: vec![0.0; assets],
        }
    }

    /// Writes the proposed valuations into `trial` (not normalised), from `prices` and the exact
    /// smoothed demand `current` at them.
    pub(crate) fn propose(
        &mut self,
        (books, pool): (&OrderBooks, Option<&ThreadPool>),
        prices: &[f64],
        current: &DemandWorkspace,
        trial: &mut [f64],
    ) {
        if !self.slopes_fresh {
            self.estimate_slopes((books, pool), prices, current);
            self.slopes_fresh = true;
        }
        self.build_system(books, current);
        solve(books.assets(), &mut self.matrix, &mut self.solution);
        for ((trial, price), step) in trial.iter_mut().zip(prices).zip(&self.solution) {
            let step = if step.is_finite() { *step } else { 0.0 };
            *trial = price * step.clamp(-STEP_LOG_MAX, STEP_LOG_MAX).exp();
        }
    }

    /// Measures net demand from now on relative to each asset's volume at `current` (at least
    /// [`MERIT_SCALE_FLOOR`] of the value offered), so that the merit weighs a cheap or thin
    /// asset's imbalance like a deep one's. The scale stays fixed while steps from one point are
    /// compared, so the Newton direction remains a descent direction for the merit.
    pub(crate) fn rescale(&mut self, prices: &[f64], current: &DemandWorkspace) {
        for (asset, price) in prices.iter().enumerate() {
            let volume = current.sold_value[asset].max(current.bought_value[asset]);
            let floor = MERIT_SCALE_FLOOR * price * self.offered[asset];
            self.merit_scale[asset] = volume.max(floor).max(f64::MIN_POSITIVE);
        }
    }

    /// Sum over assets of (net demand / scale)².
    pub(crate) fn merit(&self, workspace: &DemandWorkspace) -> f64 {
        workspace
            .sold_value
            .iter()
            .zip(&workspace.bought_value)
            .zip(&self.merit_scale)
            .map(|((sold, bought), scale)| {
                let relative = (bought - sold) / scale;
                relative * relative
            })
            .sum()
    }

    /// The proposed step was taken: trust the model more, and look at the scale it moved.
    pub(crate) fn accepted(&mut self, mu: f64) {
        let moved = self
            .solution
            .iter()
            .map(|step| step.abs().min(STEP_LOG_MAX))
            .fold(0.0f64, f64::max);
        self.window = (2.0 * moved).clamp(mu.max(1e-6), WINDOW_MAX);
        self.damping = (self.damping * DAMPING_SHRINK).max(DAMPING_MIN);
        self.slopes_fresh = false;
    }

    /// The proposed step was refused: damp more (the prices, and so the slopes, are unchanged).
    pub(crate) fn refused(&mut self) {
        self.damping = (self.damping * DAMPING_GROW).min(DAMPING_MAX);
    }

    /// Whether damping has grown so large that steps no longer move the prices.
    pub(crate) fn exhausted(&self) -> bool {
        self.damping >= DAMPING_MAX
    }

    /// Each pair's slope alone (two searches of its book), the pairs spread over `pool`.
    fn estimate_slopes(
        &mut self,
        (books, pool): (&OrderBooks, Option<&ThreadPool>),
        prices: &[f64],
        current: &DemandWorkspace,
    ) {
        let (up, down) = (self.window.exp(), (-self.window).exp());
        let inverse_width = 1.0 / (2.0 * self.window);
        let indexes: Vec<usize> = (0..books.pairs().len()).collect();
        self.slopes = walras_par::map_in_order_on(pool, &indexes, SLOPES_SERIAL_BELOW, |index| {
            let pair = &books.pairs()[*index];
            let rate = current.rate(*index);
            let above = demand::amount_at_or_below(books, pair, rate * up);
            let below = demand::amount_at_or_below(books, pair, rate * down);
            prices[pair.sell as usize] * (above - below) * inverse_width
        });
    }

    /// `(−J + λ·diag(v)) Δu = z`, into `matrix` and `solution`.
    fn build_system(&mut self, books: &OrderBooks, current: &DemandWorkspace) {
        let n = books.assets();
        self.matrix.fill(0.0);
        let total: f64 = current.sold_value.iter().sum();
        let floor = (total * 1e-12).max(f64::MIN_POSITIVE);
        for (index, pair) in books.pairs().iter().enumerate() {
            let (s, b) = (pair.sell as usize, pair.buy as usize);
            let flow = current.pair_flow_value(index);
            let slope = self.slopes[index];
            self.matrix[s * n + s] += flow + slope;
            self.matrix[b * n + s] -= flow + slope;
            self.matrix[s * n + b] -= slope;
            self.matrix[b * n + b] += slope;
        }
        for asset in 0..n {
            let volume = current.sold_value[asset]
                .max(current.bought_value[asset])
                .max(floor);
            self.matrix[asset * n + asset] += self.damping * volume;
            self.solution[asset] = current.bought_value[asset] - current.sold_value[asset];
        }
    }
}

/// Solves `matrix · x = rhs` in place (`rhs` becomes `x`). The matrix is a nonsingular M-matrix
/// (the damping keeps it so), so elimination needs no pivoting for stability in exact arithmetic;
/// partial pivoting guards the floats.
fn solve(n: usize, matrix: &mut [f64], rhs: &mut [f64]) {
    if n > DENSE_SOLVE_ASSETS_MAX {
        gauss_seidel(n, matrix, rhs);
        return;
    }
    for column in 0..n {
        let pivot_row = (column..n)
            .max_by(|&a, &b| {
                matrix[a * n + column]
                    .abs()
                    .total_cmp(&matrix[b * n + column].abs())
            })
            .unwrap_or(column);
        if pivot_row != column {
            for k in 0..n {
                matrix.swap(column * n + k, pivot_row * n + k);
            }
            rhs.swap(column, pivot_row);
        }
        let pivot = matrix[column * n + column];
        if pivot == 0.0 || !pivot.is_finite() {
            rhs.fill(0.0); // no usable step: the caller damps and tries again
            return;
        }
        for row in column + 1..n {
            let factor = matrix[row * n + column] / pivot;
            if factor == 0.0 {
                continue;
            }
            for k in column..n {
                matrix[row * n + k] -= factor * matrix[column * n + k];
            }
            rhs[row] -= factor * rhs[column];
        }
    }
    for row in (0..n).rev() {
        let tail: f64 = (row + 1..n).map(|k| matrix[row * n + k] * rhs[k]).sum();
        rhs[row] = (rhs[row] - tail) / matrix[row * n + row];
    }
}

/// Gauss–Seidel sweeps from zero; converges for the column-diagonally-dominant systems built here.
fn gauss_seidel(n: usize, matrix: &[f64], rhs: &mut [f64]) {
    let target = rhs.to_vec();
    rhs.fill(0.0);
    for _ in 0..GAUSS_SEIDEL_SWEEPS {
        for row in 0..n {
            let diagonal = matrix[row * n + row];
            if diagonal <= 0.0 {
                continue;
            }
            let off: f64 = (0..n)
                .filter(|&k| k != row)
                .map(|k| matrix[row * n + k] * rhs[k])
                .sum();
            rhs[row] = (target[row] - off) / diagonal;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_solve_matches_a_known_solution() {
        // [[4, -1, 0], [-1, 4, -1], [0, -1, 4]] · [1, 2, 3] = [2, 4, 10]
        let mut matrix = vec![4.0, -1.0, 0.0, -1.0, 4.0, -1.0, 0.0, -1.0, 4.0];
        let mut rhs = vec![2.0, 4.0, 10.0];
        solve(3, &mut matrix, &mut rhs);
        for (got, want) in rhs.iter().zip([1.0, 2.0, 3.0]) {
            assert!((got - want).abs() < 1e-12, "{got} vs {want}");
        }
    }

    #[test]
    fn gauss_seidel_solves_a_diagonally_dominant_system() {
        let matrix = vec![4.0, -1.0, 0.0, -1.0, 4.0, -1.0, 0.0, -1.0, 4.0];
        let mut rhs = vec![2.0, 4.0, 10.0];
        gauss_seidel(3, &matrix, &mut rhs);
        for (got, want) in rhs.iter().zip([1.0, 2.0, 3.0]) {
            assert!((got - want).abs() < 1e-9, "{got} vs {want}");
        }
    }
}
