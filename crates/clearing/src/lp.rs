//! The linear program of SPEEDEX appendix D, solved with microlp.
//!
//! Variables are value flows `y[S→B] = p_S · x[S→B]`. Maximise `Σ y` subject to
//! `lower ≤ y ≤ upper` per pair and, per asset A, `Σ_B y[A→B] ≥ (1 − ε) Σ_B y[B→A]`: the auctioneer
//! receives at least what it pays out less the commission. With ε = 0 this is a maximum
//! circulation.
//!
//! The solver works in floating point within an absolute tolerance, so values are scaled to make
//! the largest upper bound 1, and the answer is clamped into the bounds. Exactness is not this
//! module's job: [`crate::settle`] turns the flows into integer amounts and enforces conservation
//! exactly.

use microlp::{ComparisonOp, OptimizationDirection, Problem};

/// Bounds on one pair's value flow.
#[derive(Clone, Copy, Debug)]
pub struct PairFlowBounds {
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

/// Solves the LP; returns one flow per entry of `pairs`, within its bounds.
///
/// Scaling: each pair's flow is solved as the fraction `t = y / upper` of its upper bound, and each
/// asset's conservation row is divided by the asset's volume (the upper bounds of its pairs). The
/// solver's tolerance is absolute, so without this an asset whose flows are 10^-6 of the largest
/// (valuations spanning decades, thin assets) would be balanced only to within 10^-3 of its own
/// volume: far beyond ε, which the exact settlement then repairs below the μ lower bounds.
pub fn solve(assets: usize, pairs: &[PairFlowBounds], epsilon: f64) -> Result<Vec<f64>, LpError> {
    let scale = pairs.iter().map(|pair| pair.upper).fold(0.0f64, f64::max);
    if pairs.is_empty() || scale <= 0.0 {
        return Ok(vec![0.0; pairs.len()]);
    }
    let mut volume = vec![0.0f64; assets];
    for pair in pairs {
        volume[pair.sell] += pair.upper;
        volume[pair.buy] += pair.upper;
    }
    let mut problem = Problem::new(OptimizationDirection::Maximize);
    let mut rows: Vec<Vec<(microlp::Variable, f64)>> = vec![Vec::new(); assets];
    let mut variables = Vec::with_capacity(pairs.len());
    for pair in pairs {
        debug_assert!(pair.lower <= pair.upper, "lower bound above upper bound");
        if pair.upper <= 0.0 {
            variables.push(None);
            continue;
        }
        let lower = (pair.lower / pair.upper).clamp(0.0, 1.0);
        let variable = problem.add_var(pair.upper / scale, (lower, 1.0));
        rows[pair.sell].push((variable, pair.upper / volume[pair.sell]));
        rows[pair.buy].push((variable, -(1.0 - epsilon) * pair.upper / volume[pair.buy]));
        variables.push(Some(variable));
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
    Ok(variables
        .iter()
        .zip(pairs)
        .map(|(variable, pair)| match variable {
            Some(variable) => {
                (solution.var_value(*variable) * pair.upper).clamp(pair.lower, pair.upper)
            }
            None => 0.0,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(sell: usize, buy: usize, lower: f64, upper: f64) -> PairFlowBounds {
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
