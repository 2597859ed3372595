//! Demand queries (SPEEDEX §5.1, appendices C.2 and G).
//!
//! At valuations `p`, an offer selling S for B with limit `l` faces the rate `r = p_S / p_B`. With
//! smoothing width μ it sells all of its amount when `l < (1 − μ) r`, nothing when `l > r`, and the
//! fraction `(r − l) / (μ r)` in between. Summed over a pair's offers that is
//!
//! ```text
//! A(lo) + (r · (A(hi) − A(lo)) − (AL(hi) − AL(lo))) / (μ r)
//! ```
//!
//! where `lo` counts offers with `l < (1 − μ) r`, `hi` those with `l ≤ r`, `A` is the prefix sum of
//! amounts and `AL` of amount × limit. Each query finds `lo` and `hi` per pair by galloping from
//! the previous query's answer: late in tâtonnement prices move little, so the search usually
//! touches one or two cache lines per pair.
//!
//! Everything is reported in *value* (amount × valuation), the unit tâtonnement normalises by.

use crate::book::{CurvePoint, OrderBooks};

/// Per-query outputs and the search hints carried between queries of one tâtonnement instance.
#[derive(Clone, Debug)]
pub struct DemandWorkspace {
    hint_low: Vec<u32>,
    hint_high: Vec<u32>,
    /// Per asset: value of the asset sold to the auctioneer.
    pub sold_value: Vec<f64>,
    /// Per asset: value of the asset bought from the auctioneer (before commission).
    pub bought_value: Vec<f64>,
    /// Per non-empty pair: value of offers that must trade in full (limit < (1 − μ) r).
    pub pair_lower_value: Vec<f64>,
    /// Per non-empty pair: value of offers that may trade (limit ≤ r).
    pub pair_upper_value: Vec<f64>,
    inverse_prices: Vec<f64>,
}

impl DemandWorkspace {
    pub fn new(books: &OrderBooks) -> DemandWorkspace {
        let pairs = books.pairs().len();
        DemandWorkspace {
            hint_low: books
                .pairs()
                .iter()
                .map(|pair| (pair.len() / 2) as u32)
                .collect(),
            hint_high: books
                .pairs()
                .iter()
                .map(|pair| (pair.len() / 2) as u32)
                .collect(),
            sold_value: vec![0.0; books.assets()],
            bought_value: vec![0.0; books.assets()],
            pair_lower_value: vec![0.0; pairs],
            pair_upper_value: vec![0.0; pairs],
            inverse_prices: vec![0.0; books.assets()],
        }
    }
}

/// Computes smoothed demand at `prices` (positive, finite) into `workspace`.
pub fn query(books: &OrderBooks, prices: &[f64], mu: f64, workspace: &mut DemandWorkspace) {
    debug_assert_eq!(prices.len(), books.assets());
    workspace.sold_value.fill(0.0);
    workspace.bought_value.fill(0.0);
    for (inverse, price) in workspace.inverse_prices.iter_mut().zip(prices) {
        *inverse = 1.0 / price;
    }
    let band_start = 1.0 - mu;
    for (index, pair) in books.pairs().iter().enumerate() {
        let points = books.points(pair);
        let sell_price = prices[pair.sell as usize];
        let rate = sell_price * workspace.inverse_prices[pair.buy as usize];
        let high = partition_from_hint(points, workspace.hint_high[index], |limit| limit <= rate);
        let threshold = rate * band_start;
        let low = if mu > 0.0 {
            partition_from_hint(
                points,
                workspace.hint_low[index].min(high as u32),
                |limit| limit < threshold,
            )
        } else {
            high
        };
        workspace.hint_high[index] = high as u32;
        workspace.hint_low[index] = low as u32;
        let (low_point, high_point) = (&points[low], &points[high]);
        let band_amount = high_point.cum_amount - low_point.cum_amount;
        let partial = if band_amount > 0.0 {
            let band_amount_limit = high_point.cum_amount_limit - low_point.cum_amount_limit;
            ((rate * band_amount - band_amount_limit) / (rate * mu)).clamp(0.0, band_amount)
        } else {
            0.0
        };
        let value = (low_point.cum_amount + partial) * sell_price;
        workspace.sold_value[pair.sell as usize] += value;
        workspace.bought_value[pair.buy as usize] += value;
        workspace.pair_lower_value[index] = low_point.cum_amount * sell_price;
        workspace.pair_upper_value[index] = high_point.cum_amount * sell_price;
    }
}

/// The first index whose limit fails `below` (a predicate true on a prefix), searching outward
/// from `hint`. The last point is a sentinel with limit `+inf`, for which `below` is false.
#[inline]
fn partition_from_hint(points: &[CurvePoint], hint: u32, below: impl Fn(f64) -> bool) -> usize {
    let last = points.len() - 1;
    let start = (hint as usize).min(last);
    let (low, high) = if below(points[start].limit) {
        // The answer lies right of start: double the stride until a point fails.
        let mut known_below = start;
        let mut stride = 1;
        loop {
            let probe = start + stride;
            if probe >= last {
                break (known_below + 1, last);
            }
            if !below(points[probe].limit) {
                break (known_below + 1, probe);
            }
            known_below = probe;
            stride *= 2;
        }
    } else {
        // The answer is at or left of start.
        let mut known_failing = start;
        let mut stride = 1;
        loop {
            if stride > start {
                break (0, known_failing);
            }
            let probe = start - stride;
            if below(points[probe].limit) {
                break (probe + 1, known_failing);
            }
            known_failing = probe;
            stride *= 2;
        }
    };
    low + points[low..high].partition_point(|point| below(point.limit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use walras_types::{AccountId, AssetId, Offer, OfferId, Price};

    fn points_with(limits: &[f64]) -> Vec<CurvePoint> {
        let mut points: Vec<CurvePoint> = limits
            .iter()
            .map(|&limit| CurvePoint {
                limit,
                cum_amount: 0.0,
                cum_amount_limit: 0.0,
            })
            .collect();
        points.push(CurvePoint {
            limit: f64::INFINITY,
            cum_amount: 0.0,
            cum_amount_limit: 0.0,
        });
        points
    }

    proptest! {
        #[test]
        fn galloping_matches_binary_search(
            mut limits in proptest::collection::vec(0.0f64..10.0, 0..200),
            hint in 0u32..300,
            rate in -1.0f64..11.0,
        ) {
            limits.sort_by(f64::total_cmp);
            let points = points_with(&limits);
            let expected = limits.partition_point(|limit| *limit <= rate);
            prop_assert_eq!(partition_from_hint(&points, hint, |limit| limit <= rate), expected);
            let expected_strict = limits.partition_point(|limit| *limit < rate);
            prop_assert_eq!(partition_from_hint(&points, hint, |limit| limit < rate), expected_strict);
        }
    }

    /// The closed form must equal the per-offer definition of smoothed demand.
    #[test]
    fn smoothed_demand_matches_per_offer_sum() {
        let limits = [0.90, 0.95, 0.999, 1.0, 1.0005, 1.001, 1.2];
        let offers: Vec<Offer> = limits
            .iter()
            .enumerate()
            .map(|(index, limit)| Offer {
                id: OfferId(index as u64),
                account: AccountId(0),
                sell: AssetId(0),
                buy: AssetId(1),
                amount: 1000 + index as u64,
                min_price: Price::from_f64(*limit),
            })
            .collect();
        let books = OrderBooks::build(offers.clone(), 2, 1).unwrap();
        let mu = 0.002;
        for rate in [0.5, 0.9995, 1.0, 1.0007, 1.0011, 1.3] {
            let mut workspace = DemandWorkspace::new(&books);
            query(&books, &[rate, 1.0], mu, &mut workspace);
            let expected: f64 = offers
                .iter()
                .map(|offer| {
                    let limit = offer.min_price.to_f64();
                    let fraction = if limit < (1.0 - mu) * rate {
                        1.0
                    } else if limit <= rate {
                        (rate - limit) / (mu * rate)
                    } else {
                        0.0
                    };
                    fraction * offer.amount as f64 * rate
                })
                .sum();
            let sold = workspace.sold_value[0];
            assert!(
                (sold - expected).abs() <= 1e-9 * expected.max(1.0),
                "{rate}: {sold} vs {expected}"
            );
            assert_eq!(workspace.bought_value[1], sold);
        }
    }
}
