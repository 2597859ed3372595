//! Cut repair: what clearing does when no tâtonnement instance converged (issue 10, thin books).
//!
//! Why: on thin books (a few offers per pair, many assets, power-law pair choice) the smoothed
//! demand is flat almost everywhere and steep inside a few μ-bands. Tâtonnement and the damped
//! Newton steps read local slopes, and there are none to read: they stall with a handful of
//! assets out of balance while the rest already clears.
//!
//! The convergence test itself says what is wrong. When the clearing LP is infeasible, the
//! max-flow test ([`crate::flow::infeasible_cut`]) returns a set `S` of assets whose mandatory
//! payouts exceed what it can receive: `S` is over-demanded. Scaling every valuation in `S` by
//! the same factor `t > 1` leaves the rates inside `S` and outside it unchanged, raises every rate
//! selling `S` for the rest (more of `S` offered) and lowers every rate buying `S` with the rest
//! (less of `S` demanded), so the smoothed value flowing into `S` across the cut minus the value
//! flowing out is a decreasing function of `t` (gross substitutes). The repair finds its root by
//! bisection in `ln t` (reading only the pairs the cut crosses), moves `S` there — which makes the
//! cut's own constraint hold, since lower bound ≤ smoothed flow ≤ upper bound on every pair — and
//! asks the max-flow test again. This is an ascending auction on sets: the same idea as the
//! price-raising step of combinatorial market-equilibrium algorithms, driven by SPEEDEX's own
//! feasibility test (appendix C.3) instead of by a gradient.
//!
//! Every step is deterministic (no clock decides a price); the work is bounded by
//! [`CUT_STEPS_MAX`] and the budget's deadline, read between steps on the caller's clock, and
//! the caller keeps the result only if it converged.

use crate::book::OrderBooks;
use crate::demand::{self, DemandWorkspace};
use crate::flow;
use crate::lp::PairFlowBounds;
use crate::tatonnement::normalize;
use crate::{Budget, Clock};

/// Cut steps at most per repair.
pub(crate) const CUT_STEPS_MAX: u32 = 400;
/// Bisection on `ln t` stops once the bracket is narrower than this fraction of μ: finer than
/// the smoothing resolves, coarse enough to take about a dozen halvings.
const BRACKET_MU_FRACTION: f64 = 1.0 / 64.0;
/// Largest factor one cut step may scale a set by; the bracket doubles `ln t` up to it.
const FACTOR_LOG_MAX: f64 = 30.0;

/// What one repair did.
#[derive(Clone, Debug)]
pub(crate) struct Repair {
    /// Valuations at the end (geometric mean 1).
    pub prices: Vec<f64>,
    /// Whether the LP with lower bounds is feasible there (convergence).
    pub converged: bool,
    /// Cut steps taken.
    pub steps: u32,
    /// Full demand queries made.
    pub queries: u64,
}

/// Repairs cuts from `prices` until the LP with μ's lower bounds is feasible, no cut can be
/// moved, [`CUT_STEPS_MAX`] steps were taken or the budget's deadline passed on `clock`.
pub(crate) fn repair(
    books: &OrderBooks,
    prices: &[f64],
    mu: f64,
    epsilon: f64,
    budget: Budget,
    clock: &dyn Clock,
) -> Repair {
    let mut prices = prices.to_vec();
    normalize(&mut prices);
    let mut workspace = DemandWorkspace::new(books);
    let mut bounds = Vec::with_capacity(books.pairs().len());
    let mut repair = Repair {
        prices: Vec::new(),
        converged: false,
        steps: 0,
        queries: 0,
    };
    loop {
        demand::query(books, &prices, mu, &mut workspace);
        repair.queries += 1;
        fill_bounds(books, &workspace, &mut bounds);
        let Some(cut) = flow::infeasible_cut(books.assets(), &bounds, epsilon) else {
            repair.converged = true;
            break;
        };
        if repair.steps >= CUT_STEPS_MAX || budget.expired(clock) {
            break;
        }
        let Some(log_factor) = balancing_log_factor(books, &prices, &cut, mu) else {
            break;
        };
        for (price, inside) in prices.iter_mut().zip(&cut) {
            if *inside {
                *price *= log_factor.exp();
            }
        }
        normalize(&mut prices);
        repair.steps += 1;
    }
    repair.prices = prices;
    repair
}

fn fill_bounds(books: &OrderBooks, workspace: &DemandWorkspace, bounds: &mut Vec<PairFlowBounds>) {
    bounds.clear();
    for (index, pair) in books.pairs().iter().enumerate() {
        bounds.push(PairFlowBounds {
            sell: pair.sell as usize,
            buy: pair.buy as usize,
            lower: workspace.pair_lower_value[index],
            upper: workspace.pair_upper_value[index],
        });
    }
}

/// `ln t` at which the smoothed value crossing the cut balances when every valuation in `cut`
/// is multiplied by `t`; `None` when the cut has no crossing pair that `t` can move or no
/// balance exists within [`FACTOR_LOG_MAX`].
fn balancing_log_factor(books: &OrderBooks, prices: &[f64], cut: &[bool], mu: f64) -> Option<f64> {
    let crossing: Vec<usize> = books
        .pairs()
        .iter()
        .enumerate()
        .filter(|(_, pair)| cut[pair.sell as usize] != cut[pair.buy as usize])
        .map(|(index, _)| index)
        .collect();
    if crossing.is_empty() {
        return None;
    }
    // Net value flowing into the cut (its assets paid out) at factor e^x: decreasing in x.
    let net_inflow = |log_factor: f64| -> f64 {
        let factor = log_factor.exp();
        crossing
            .iter()
            .map(|&index| {
                let pair = &books.pairs()[index];
                let (sell, buy) = (pair.sell as usize, pair.buy as usize);
                let sell_inside = cut[sell];
                let sell_price = prices[sell] * if sell_inside { factor } else { 1.0 };
                let buy_price = prices[buy] * if sell_inside { 1.0 } else { factor };
                let value = demand::pair_smoothed_amount(books, pair, sell_price / buy_price, mu)
                    * sell_price;
                if sell_inside {
                    -value
                } else {
                    value
                }
            })
            .sum()
    };
    if net_inflow(0.0) <= 0.0 {
        // Already balanced in smoothed terms: the infeasibility is below the smoothing's
        // resolution (commission rounding); moving would not help.
        return None;
    }
    let mut high = mu.max(1e-6);
    while net_inflow(high) > 0.0 {
        high *= 2.0;
        if high > FACTOR_LOG_MAX {
            return None;
        }
    }
    let mut low = 0.0;
    let width_min = mu.max(1e-6) * BRACKET_MU_FRACTION;
    while high - low > width_min {
        let middle = 0.5 * (low + high);
        if net_inflow(middle) > 0.0 {
            low = middle;
        } else {
            high = middle;
        }
    }
    Some(high)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SystemClock;
    use walras_types::{AccountId, AssetId, Offer, OfferId, Price};

    fn offer(id: u64, sell: u16, buy: u16, amount: u64, limit: f64) -> Offer {
        Offer {
            id: OfferId(id),
            account: AccountId(id),
            sell: AssetId(sell),
            buy: AssetId(buy),
            amount,
            min_price: Price::from_f64(limit),
        }
    }

    /// Repairs two-asset books from valuations 1:1 (μ = 2^-10, ε = 2^-15), with no deadline.
    fn repair_from_even_prices(offers: Vec<Offer>) -> Repair {
        let books = OrderBooks::build(offers, 2, 1).expect("valid books");
        let budget = Budget::iterations(u64::MAX);
        repair(
            &books,
            &[1.0, 1.0],
            1.0 / 1024.0,
            1.0 / 32768.0,
            budget,
            &SystemClock,
        )
    }

    /// Two assets, one offer each way, crossing between rates 1.9 and 2 of asset 0 in asset 1.
    /// At valuations 1:1 the offer selling asset 1 must trade in full while the one selling
    /// asset 0 may not trade: asset 0 is over-demanded, and raising it must land where the LP
    /// is feasible.
    #[test]
    fn one_cut_step_balances_a_two_asset_market() {
        let offers = vec![
            offer(0, 0, 1, 1_000, 1.9), // sells asset 0 at ≥ 1.9 of asset 1
            offer(1, 1, 0, 2_000, 0.5), // sells asset 1 at ≥ 0.5 of asset 0
        ];
        let repair = repair_from_even_prices(offers);
        assert!(repair.converged, "{repair:?}");
        let rate = repair.prices[0] / repair.prices[1];
        assert!((1.9..=2.0).contains(&rate), "rate {rate}");
    }

    #[test]
    fn a_feasible_start_takes_no_step() {
        let offers = vec![offer(0, 0, 1, 1_000, 3.0), offer(1, 1, 0, 1_000, 3.0)];
        let repair = repair_from_even_prices(offers);
        assert!(repair.converged);
        assert_eq!(repair.steps, 0);
        assert_eq!(repair.prices, vec![1.0, 1.0]);
    }
}
