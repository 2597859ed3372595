//! The linear program of SPEEDEX appendix D, solved with microlp.
//!
//! Variables are value flows `y[S→B] = p_S · x[S→B]`. Maximise `Σ y` subject to
//! `lower ≤ y ≤ upper` per pair and, per asset A, `Σ_B y[A→B] ≥ (1 − ε) Σ_B y[B→A]`: the auctioneer
//! receives at least what it pays out less the commission. With ε = 0 this is a maximum
//! circulation.
//!
//! The solver works in floating point within an absolute tolerance, so values are scaled (see
//! [`Formulation`] for the two ways and [`solve`] for which one decides), and the answer is
//! clamped into the bounds. Exactness is not this module's job: [`crate::settle`] turns the flows
//! into integer amounts and enforces conservation exactly.

use microlp::{ComparisonOp, OptimizationDirection, Problem};

/// Bounds on one pair's value flow.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PairFlowBounds {
    pub sell: usize,
    pub buy: usize,
    pub lower: f64,
    pub upper: f64,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LpError {
    /// No flows satisfy the bounds and conservation.
    #[error("the clearing LP is infeasible")]
    Infeasible,
    /// The solver failed for a numerical reason; the message is the solver's.
    #[error("the LP solver failed: {0}")]
    Solver(String),
}

/// A relative imbalance (per asset, of its volume) the exact settlement absorbs without cutting
/// anything: far below the gap between the commission charged and the one the LP plans with
/// (2^-16 of volume with the defaults), far above the solver's rounding on a well-scaled problem.
pub(crate) const BALANCE_TOLERANCE_RELATIVE: f64 = 1e-12;

/// How the LP's numbers are scaled for the solver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Formulation {
    /// Flows as fractions of the largest upper bound, conservation rows as written. Several
    /// times faster with microlp, and exact enough whenever assets' volumes are of one order.
    Plain,
    /// Each pair's flow as the fraction of its own upper bound, each asset's row divided by the
    /// asset's volume: what keeps thin or cheap assets balanced to their own volume.
    PerAsset,
}

/// Solves the LP; returns one flow per entry of `pairs`, within its bounds.
///
/// Scaling: the solver's tolerance is absolute, so in the plain formulation an asset whose flows
/// are 10^-6 of the largest (valuations spanning decades, thin assets) can be balanced only to
/// within 10^-3 of its own volume: far beyond ε, which the exact settlement then repairs below
/// the μ lower bounds. The per-asset formulation fixes that but costs microlp several times more
/// on thick books (measured: 19–31 against 4–9 ms at a million offers over 50 assets). So the
/// plain one is solved first and its answer kept only when every asset balances to
/// [`BALANCE_TOLERANCE_RELATIVE`] of its volume; otherwise (or when it finds no solution) the
/// per-asset one decides.
pub(crate) fn solve(
    assets: usize,
    pairs: &[PairFlowBounds],
    epsilon: f64,
) -> Result<Vec<f64>, LpError> {
    let volume = volumes(assets, pairs);
    if let Ok(flows) = solve_as(Formulation::Plain, &volume, pairs, epsilon) {
        if balanced(&volume, pairs, &flows, epsilon) {
            return Ok(flows);
        }
    }
    solve_as(Formulation::PerAsset, &volume, pairs, epsilon)
}

/// Each asset's volume: the upper bounds of the pairs that sell or buy it.
fn volumes(assets: usize, pairs: &[PairFlowBounds]) -> Vec<f64> {
    let mut volume = vec![0.0f64; assets];
    for pair in pairs {
        volume[pair.sell] += pair.upper;
        volume[pair.buy] += pair.upper;
    }
    volume
}

/// Every asset receives at least (1 − ε) of what it pays, to within
/// [`BALANCE_TOLERANCE_RELATIVE`] of its volume.
fn balanced(volume: &[f64], pairs: &[PairFlowBounds], flows: &[f64], epsilon: f64) -> bool {
    let mut net = vec![0.0f64; volume.len()];
    for (pair, flow) in pairs.iter().zip(flows) {
        net[pair.sell] += flow;
        net[pair.buy] -= (1.0 - epsilon) * flow;
    }
    net.iter()
        .zip(volume)
        .all(|(net, volume)| *net >= -BALANCE_TOLERANCE_RELATIVE * volume)
}

/// Solves one formulation; flows are clamped into their bounds.
fn solve_as(
    formulation: Formulation,
    volume: &[f64],
    pairs: &[PairFlowBounds],
    epsilon: f64,
) -> Result<Vec<f64>, LpError> {
    let scale = pairs.iter().map(|pair| pair.upper).fold(0.0f64, f64::max);
    if pairs.is_empty() || scale <= 0.0 {
        return Ok(vec![0.0; pairs.len()]);
    }
    let mut problem = Problem::new(OptimizationDirection::Maximize);
    let mut rows: Vec<Vec<(microlp::Variable, f64)>> = vec![Vec::new(); volume.len()];
    // The solver's variable is `flow / unit`; a row's coefficient for it is `unit / row scale`.
    let mut units = Vec::with_capacity(pairs.len());
    for pair in pairs {
        debug_assert!(pair.lower <= pair.upper, "lower bound above upper bound");
        if pair.upper <= 0.0 {
            units.push(None);
            continue;
        }
        let (unit, sell_row, buy_row) = match formulation {
            Formulation::Plain => (scale, scale, scale),
            Formulation::PerAsset => (pair.upper, volume[pair.sell], volume[pair.buy]),
        };
        let lower = (pair.lower / unit).clamp(0.0, pair.upper / unit);
        let variable = problem.add_var(unit / scale, (lower, pair.upper / unit));
        rows[pair.sell].push((variable, unit / sell_row));
        rows[pair.buy].push((variable, -(1.0 - epsilon) * unit / buy_row));
        units.push(Some((variable, unit)));
    }
    for row in rows.iter().filter(|row| !row.is_empty()) {
        problem.add_constraint(row, ComparisonOp::Ge, 0.0);
    }
    let outcome = problem.solve().map_err(|error| match error {
        microlp::Error::Infeasible => LpError::Infeasible,
        other => LpError::Solver(other.to_string()),
    })?;
    let solution = outcome
        .into_solution()
        .map_err(|_| LpError::Solver("interrupted before a solution".to_string()))?;
    Ok(units
        .iter()
        .zip(pairs)
        .map(|(unit, pair)| match unit {
            Some((variable, unit)) => {
                (solution.var_value(*variable) * unit).clamp(pair.lower, pair.upper)
            }
            None => 0.0,
        })
        .collect())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The bounds of one pair (shared with the max-flow tests).
    pub(crate) fn pair(sell: usize, buy: usize, lower: f64, upper: f64) -> PairFlowBounds {
        PairFlowBounds {
            sell,
            buy,
            lower,
            upper,
        }
    }

    #[test]
    fn two_asset_circulation_takes_the_smaller_side() {
        let flows = solve(2, &[pair(0, 1, 0.0, 10.0), pair(1, 0, 0.0, 4.0)], 0.0).unwrap();
        assert!(
            (flows[0] - 4.0).abs() < 1e-6 && (flows[1] - 4.0).abs() < 1e-6,
            "{flows:?}"
        );
    }

    #[test]
    fn commission_lets_sellers_receive_less() {
        let epsilon = 0.01;
        let flows = solve(2, &[pair(0, 1, 0.0, 10.0), pair(1, 0, 0.0, 4.0)], epsilon).unwrap();
        // asset 1: 4 sold >= 0.99 * y01  =>  y01 <= 4 / 0.99
        assert!((flows[0] - 4.0 / 0.99).abs() < 1e-6, "{flows:?}");
    }

    #[test]
    fn lower_bounds_that_cannot_balance_are_infeasible() {
        let result = solve(2, &[pair(0, 1, 5.0, 10.0), pair(1, 0, 0.0, 4.0)], 0.0);
        assert_eq!(result, Err(LpError::Infeasible));
    }

    #[test]
    fn one_direction_only_trades_nothing() {
        let flows = solve(3, &[pair(0, 1, 0.0, 10.0), pair(1, 2, 0.0, 3.0)], 0.0).unwrap();
        assert!(flows.iter().all(|flow| flow.abs() < 1e-9), "{flows:?}");
    }

    /// A thin asset whose row is off by a millionth of its own volume is not balanced, even when
    /// that is 10^-13 of the largest flow: the plain formulation's answer must be refused then.
    #[test]
    fn an_imbalance_small_against_the_book_but_large_for_a_thin_asset_is_refused() {
        let pairs = [
            pair(0, 1, 0.0, 1.0),
            pair(1, 0, 0.0, 1.0),
            pair(2, 3, 0.0, 1e-7),
            pair(3, 2, 0.0, 1e-7),
        ];
        let volume = volumes(4, &pairs);
        let exact = [1.0, 1.0, 1e-7, 1e-7];
        assert!(balanced(&volume, &pairs, &exact, 0.0));
        let thin_short = [1.0, 1.0, 1e-7, 1e-7 * (1.0 + 1e-6)];
        assert!(!balanced(&volume, &pairs, &thin_short, 0.0));
    }

    /// Valuations over twelve decades: whichever formulation answers, every asset balances to
    /// its own volume and both formulations agree on the total flow of each asset.
    #[test]
    fn books_spanning_twelve_decades_balance_every_asset() {
        let mut pairs = Vec::new();
        for asset in 0..6usize {
            let size = 10f64.powi(6 - 2 * asset as i32);
            let next = (asset + 1) % 6;
            pairs.push(pair(asset, next, 0.25 * size, size));
            pairs.push(pair(next, asset, 0.0, 0.75 * size));
        }
        let volume = volumes(6, &pairs);
        let flows = solve(6, &pairs, 1.0 / 65536.0).unwrap();
        assert!(
            balanced(&volume, &pairs, &flows, 1.0 / 65536.0),
            "{flows:?}"
        );
        let per_asset = solve_as(Formulation::PerAsset, &volume, &pairs, 1.0 / 65536.0).unwrap();
        for (plain, scaled) in flows.iter().zip(&per_asset) {
            assert!(
                (plain - scaled).abs() <= 1e-9 * scaled.abs().max(1e-6),
                "{flows:?} {per_asset:?}"
            );
        }
    }

    #[test]
    fn three_cycle_carries_its_bottleneck() {
        let pairs = [
            pair(0, 1, 0.0, 9.0),
            pair(1, 2, 0.0, 2.0),
            pair(2, 0, 0.0, 7.0),
        ];
        let flows = solve(3, &pairs, 0.0).unwrap();
        assert!(
            flows.iter().all(|flow| (flow - 2.0).abs() < 1e-6),
            "{flows:?}"
        );
    }
}
