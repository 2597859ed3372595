//! Valuations of one book (paper §2.4). Floating point on purpose: these prices are advisory
//! (a tâtonnement start, a band check), never consensus state, and the book they read is exact.
//! Each function takes the book's sides best first as `(price, qty)` pairs.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Most steps a depth VWAP may take (`depth / step`): a named limit on caller input.
pub const DEPTH_STEPS_MAX: u64 = 10_000_000;
/// Trades kept per window.
pub const TRADES_PER_WINDOW_MAX: usize = 100_000;

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "method")]
pub enum Method {
    Mid,
    WeightedMid,
    /// Paper §2.4.3: the mean over q = step, 2·step, …, depth of the average price to buy q,
    /// and likewise to sell q; the valuation is the mean of the two.
    DepthVwap {
        depth: f64,
        step: f64,
    },
    /// The average price to buy, and to sell, `quote` units of quote currency; their mean.
    NotionalDepth {
        quote: f64,
    },
    /// Depth VWAP over the book's top `levels` levels (the paper's "market depth"): depth is the
    /// thinner side's quantity in those levels, taken in `steps` equal steps; `naive` selects the
    /// paper's O(steps × levels) evaluation instead of the closed form (benchmarks only).
    DepthVwapLevels {
        levels: usize,
        steps: u64,
        naive: bool,
    },
}

impl Method {
    pub fn name(&self) -> String {
        match self {
            Method::Mid => "mid".into(),
            Method::WeightedMid => "weighted-mid".into(),
            Method::DepthVwap { depth, step } => format!("depth-vwap(depth={depth},step={step})"),
            Method::NotionalDepth { quote } => format!("notional-depth(quote={quote})"),
            Method::DepthVwapLevels {
                levels,
                steps,
                naive,
            } => {
                format!(
                    "depth-vwap-levels(levels={levels},steps={steps}{})",
                    if *naive { ",naive" } else { "" }
                )
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum ValueError {
    #[error("the {0} side is empty")]
    EmptySide(String),
    #[error("the {side} side holds {available} but {wanted} was asked")]
    InsufficientDepth {
        side: String,
        wanted: f64,
        available: f64,
    },
    #[error("bad valuation parameters: {0}")]
    BadParams(String),
}

fn top(side: &[(f64, f64)], name: &str) -> Result<(f64, f64), ValueError> {
    side.first()
        .copied()
        .ok_or_else(|| ValueError::EmptySide(name.into()))
}

pub fn mid(bids: &[(f64, f64)], asks: &[(f64, f64)]) -> Result<f64, ValueError> {
    let (pb, _) = top(bids, "bid")?;
    let (pa, _) = top(asks, "ask")?;
    Ok((pb + pa) / 2.0)
}

/// (Qb·Pa + Qa·Pb) / (Qb + Qa). The paper prints Qb·Qa as the denominator, which is not a
/// weighted average (its units are not a price); this is the formula its reference [4] means.
pub fn weighted_mid(bids: &[(f64, f64)], asks: &[(f64, f64)]) -> Result<f64, ValueError> {
    let (pb, qb) = top(bids, "bid")?;
    let (pa, qa) = top(asks, "ask")?;
    Ok((qb * pa + qa * pb) / (qb + qa))
}

fn steps(depth: f64, step: f64) -> Result<u64, ValueError> {
    if !(depth.is_finite() && step.is_finite() && depth > 0.0 && step > 0.0) {
        return Err(ValueError::BadParams(format!(
            "depth {depth} and step {step} must be positive"
        )));
    }
    let n = (depth / step * (1.0 + 1e-12)).floor();
    if n < 1.0 || n > DEPTH_STEPS_MAX as f64 {
        return Err(ValueError::BadParams(format!(
            "depth/step = {n} outside 1..={DEPTH_STEPS_MAX}"
        )));
    }
    Ok(n as u64)
}

/// Average price to fill `qty` walking `side` (the naive reference's inner loop).
fn fill_average(side: &[(f64, f64)], qty: f64, name: &str) -> Result<f64, ValueError> {
    let (mut remaining, mut cost) = (qty, 0.0);
    for &(p, v) in side {
        let take = remaining.min(v);
        cost += take * p;
        remaining -= take;
        if remaining <= qty * 1e-12 {
            return Ok(cost / qty);
        }
    }
    let available: f64 = side.iter().map(|l| l.1).sum();
    Err(ValueError::InsufficientDepth {
        side: name.into(),
        wanted: qty,
        available,
    })
}

/// The paper's definition, literally: O(depth/step × levels).
pub fn depth_vwap_naive(
    bids: &[(f64, f64)],
    asks: &[(f64, f64)],
    depth: f64,
    step: f64,
) -> Result<f64, ValueError> {
    let n = steps(depth, step)?;
    let (mut buy, mut sell) = (0.0, 0.0);
    for k in 1..=n {
        let q = k as f64 * step;
        buy += fill_average(asks, q, "ask")?;
        sell += fill_average(bids, q, "bid")?;
    }
    Ok((buy / n as f64 + sell / n as f64) / 2.0)
}

/// H(b) - H(a) for 0 ≤ a ≤ b, accurate to a few ulps of the result.
fn harmonic_diff(a: u64, b: u64) -> f64 {
    const DIRECT_MAX: u64 = 64;
    if b - a <= DIRECT_MAX || a < DIRECT_MAX {
        let split = if b - a <= DIRECT_MAX { b } else { DIRECT_MAX };
        let direct: f64 = (a + 1..=split).rev().map(|k| 1.0 / k as f64).sum();
        return direct
            + if split < b {
                harmonic_diff(split, b)
            } else {
                0.0
            };
    }
    // Euler–Maclaurin: H(n) = ln n + γ + 1/2n − 1/12n² + 1/120n⁴ − 1/252n⁶ + …, differenced term by term.
    let (fa, fb) = (a as f64, b as f64);
    let tail = |n: f64| {
        let n2 = n * n;
        1.0 / (2.0 * n) - 1.0 / (12.0 * n2) + 1.0 / (120.0 * n2 * n2) - 1.0 / (252.0 * n2 * n2 * n2)
    };
    ((fb - fa) / fa).ln_1p() + (tail(fb) - tail(fa))
}

/// Sum over k = 1..=n of the average price to fill k·step on one side, in O(levels):
/// on level i the cost is linear, C(q) = C₀ + p·(q − Q₀), so the average is p + (C₀ − p·Q₀)/q and
/// its sum over the k that fall on the level is count·p + (C₀ − p·Q₀)/step · (H(hi) − H(lo−1)).
fn side_average_sum(side: &[(f64, f64)], n: u64, step: f64, name: &str) -> Result<f64, ValueError> {
    let (mut cum_qty, mut cum_cost, mut sum) = (0.0f64, 0.0f64, 0.0f64);
    let mut done: u64 = 0; // k values already summed
    for &(p, v) in side {
        let next_qty = cum_qty + v;
        let hi = ((next_qty / step) * (1.0 + 1e-15)).floor().min(n as f64) as u64;
        if hi > done {
            let count = (hi - done) as f64;
            let offset = cum_cost - p * cum_qty;
            sum += count * p + offset / step * harmonic_diff(done, hi);
            done = hi;
        }
        cum_qty = next_qty;
        cum_cost += p * v;
        if done == n {
            return Ok(sum);
        }
    }
    Err(ValueError::InsufficientDepth {
        side: name.into(),
        wanted: n as f64 * step,
        available: cum_qty,
    })
}

/// Depth VWAP in closed form, O(levels); equal to `depth_vwap_naive` to rounding.
pub fn depth_vwap(
    bids: &[(f64, f64)],
    asks: &[(f64, f64)],
    depth: f64,
    step: f64,
) -> Result<f64, ValueError> {
    let n = steps(depth, step)?;
    let buy = side_average_sum(asks, n, step, "ask")?;
    let sell = side_average_sum(bids, n, step, "bid")?;
    Ok((buy / n as f64 + sell / n as f64) / 2.0)
}

/// Average price to trade `quote` units of quote currency against one side.
fn notional_average(side: &[(f64, f64)], quote: f64, name: &str) -> Result<f64, ValueError> {
    let (mut remaining, mut units) = (quote, 0.0);
    for &(p, v) in side {
        let notional = p * v;
        if notional >= remaining {
            units += remaining / p;
            return Ok(quote / units);
        }
        units += v;
        remaining -= notional;
    }
    Err(ValueError::InsufficientDepth {
        side: name.into(),
        wanted: quote,
        available: quote - remaining,
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct NotionalDepth {
    pub buy_average: f64,
    pub sell_average: f64,
    pub price: f64,
}

pub fn notional_depth(
    bids: &[(f64, f64)],
    asks: &[(f64, f64)],
    quote: f64,
) -> Result<NotionalDepth, ValueError> {
    if !(quote.is_finite() && quote > 0.0) {
        return Err(ValueError::BadParams(format!(
            "quote {quote} must be positive"
        )));
    }
    let buy_average = notional_average(asks, quote, "ask")?;
    let sell_average = notional_average(bids, quote, "bid")?;
    Ok(NotionalDepth {
        buy_average,
        sell_average,
        price: (buy_average + sell_average) / 2.0,
    })
}

pub fn value(bids: &[(f64, f64)], asks: &[(f64, f64)], method: &Method) -> Result<f64, ValueError> {
    match *method {
        Method::Mid => mid(bids, asks),
        Method::WeightedMid => weighted_mid(bids, asks),
        Method::DepthVwap { depth, step } => depth_vwap(bids, asks, depth, step),
        Method::NotionalDepth { quote } => notional_depth(bids, asks, quote).map(|d| d.price),
        Method::DepthVwapLevels {
            levels,
            steps,
            naive,
        } => {
            let (b, a) = (
                &bids[..levels.min(bids.len())],
                &asks[..levels.min(asks.len())],
            );
            let depth = b
                .iter()
                .map(|l| l.1)
                .sum::<f64>()
                .min(a.iter().map(|l| l.1).sum::<f64>());
            let step = depth / steps.max(1) as f64;
            if naive {
                depth_vwap_naive(b, a, depth, step)
            } else {
                depth_vwap(b, a, depth, step)
            }
        }
    }
}

/// Quote notional resting within `band` (a fraction, 0.01 = 1 %) of `reference` on the thinner side:
/// the liquidity weight of a venue in aggregation.
pub fn band_liquidity(bids: &[(f64, f64)], asks: &[(f64, f64)], reference: f64, band: f64) -> f64 {
    let bid_floor = reference * (1.0 - band);
    let ask_cap = reference * (1.0 + band);
    let bid: f64 = bids
        .iter()
        .take_while(|l| l.0 >= bid_floor)
        .map(|l| l.0 * l.1)
        .sum();
    let ask: f64 = asks
        .iter()
        .take_while(|l| l.0 <= ask_cap)
        .map(|l| l.0 * l.1)
        .sum();
    bid.min(ask)
}

/// Trade VWAP over a sliding window of receive times.
#[derive(Clone, Debug, Default)]
pub struct TradeWindow {
    window_ns: u64,
    trades: VecDeque<(u64, f64, f64)>,
}

impl TradeWindow {
    pub fn new(window_ns: u64) -> TradeWindow {
        TradeWindow {
            window_ns,
            trades: VecDeque::new(),
        }
    }
    pub fn push(&mut self, at_ns: u64, price: f64, qty: f64) {
        if self.trades.len() >= TRADES_PER_WINDOW_MAX {
            self.trades.pop_front();
        }
        self.trades.push_back((at_ns, price, qty));
    }
    /// Σ price·qty / Σ qty over trades received in (now − window, now]; `None` with no trades.
    pub fn vwap(&mut self, now_ns: u64) -> Option<f64> {
        let start = now_ns.saturating_sub(self.window_ns);
        while self
            .trades
            .front()
            .is_some_and(|t| t.0 <= start && self.window_ns <= now_ns)
        {
            self.trades.pop_front();
        }
        let (pv, v) = self
            .trades
            .iter()
            .filter(|t| t.0 <= now_ns)
            .fold((0.0, 0.0), |(pv, v), t| (pv + t.1 * t.2, v + t.2));
        (v > 0.0).then(|| pv / v)
    }
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LevelsError {
    #[error("level {0:?} is not PRICE:QTY")]
    Shape(String),
    #[error("level {text:?}: {source}")]
    Decimal {
        text: String,
        source: crate::decimal::DecError,
    },
    #[error("level {0:?}: price and quantity must be positive")]
    NotPositive(String),
    #[error("more than {LEVELS_TEXT_MAX} levels")]
    TooMany,
}

/// Most levels `parse_levels` accepts.
pub const LEVELS_TEXT_MAX: usize = 100_000;

/// Parses `P:Q,P:Q,...` (the `walras oracle value --bids/--asks` form) into exact levels, sorted
/// best first (`descending` for bids); a repeated price adds up.
pub fn parse_levels(
    text: &str,
    descending: bool,
) -> Result<Vec<(crate::decimal::Dec, crate::decimal::Dec)>, LevelsError> {
    use crate::decimal::Dec;
    let mut side: std::collections::BTreeMap<Dec, Dec> = std::collections::BTreeMap::new();
    for (i, item) in text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .enumerate()
    {
        if i >= LEVELS_TEXT_MAX {
            return Err(LevelsError::TooMany);
        }
        let (p, q) = item
            .split_once(':')
            .ok_or_else(|| LevelsError::Shape(item.to_string()))?;
        let parse = |t: &str| {
            Dec::parse(t.trim()).map_err(|source| LevelsError::Decimal {
                text: item.to_string(),
                source,
            })
        };
        let (p, q) = (parse(p)?, parse(q)?);
        if !p.is_positive() || !q.is_positive() {
            return Err(LevelsError::NotPositive(item.to_string()));
        }
        let total = side
            .get(&p)
            .copied()
            .unwrap_or(Dec::ZERO)
            .checked_add(q)
            .ok_or_else(|| LevelsError::NotPositive(item.to_string()))?;
        side.insert(p, total);
    }
    let mut levels: Vec<(Dec, Dec)> = side.into_iter().collect();
    if descending {
        levels.reverse();
    }
    Ok(levels)
}

/// One book valued for an analyst (`walras oracle value`): the result of `method` plus the
/// other standard views, each `None` where the book cannot give it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BookValuation {
    pub method: String,
    pub price: Option<f64>,
    pub error: Option<String>,
    pub mid: Option<f64>,
    pub weighted_mid: Option<f64>,
    pub crossed: bool,
}

/// Values one book given as `P:Q,...` texts.
pub fn value_book_text(
    bids: &str,
    asks: &str,
    method: &Method,
) -> Result<BookValuation, LevelsError> {
    let to_f64 = |v: Vec<(crate::decimal::Dec, crate::decimal::Dec)>| {
        v.into_iter()
            .map(|(p, q)| (p.to_f64(), q.to_f64()))
            .collect::<Vec<_>>()
    };
    let b = to_f64(parse_levels(bids, true)?);
    let a = to_f64(parse_levels(asks, false)?);
    let crossed = matches!((b.first(), a.first()), (Some(x), Some(y)) if x.0 >= y.0);
    let result = value(&b, &a, method);
    Ok(BookValuation {
        method: method.name(),
        price: result.as_ref().ok().copied(),
        error: result.err().map(|e| e.to_string()),
        mid: mid(&b, &a).ok(),
        weighted_mid: weighted_mid(&b, &a).ok(),
        crossed,
    })
}
