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
//! amounts and `AL` of amount × limit. Each search first tries the block the previous query of
//! the same instance ended in (two pivot loads confirm it still brackets the answer); otherwise it
//! binary-searches the pair's pivots. It then counts inside one block (see [`crate::book`]). The
//! next pairs' hinted blocks are prefetched while the current pair is computed.
//!
//! Everything is reported in *value* (amount × valuation), the unit tâtonnement normalises by.

use crate::book::{OrderBooks, PairBook, PrefixSums, BLOCK_OFFERS};

/// Per-query outputs and the search hints carried between queries of one tâtonnement instance.
#[derive(Clone, Debug)]
pub struct DemandWorkspace {
    /// Per pair: where the `lo` (resp. `hi`) search ended last time, and its sums.
    hint_low: Vec<SearchHint>,
    hint_high: Vec<SearchHint>,
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
            hint_low: vec![SearchHint::default(); pairs],
            hint_high: vec![SearchHint::default(); pairs],
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
    let pairs = books.pairs();
    for index in 0..pairs.len().min(PREFETCH_DISTANCE) {
        prefetch_pair(books, workspace, index);
    }
    for (index, pair) in pairs.iter().enumerate() {
        if index + PREFETCH_DISTANCE < pairs.len() {
            prefetch_pair(books, workspace, index + PREFETCH_DISTANCE);
        }
        let sell_price = prices[pair.sell as usize];
        let rate = sell_price * workspace.inverse_prices[pair.buy as usize];
        let high = search(books, pair, &mut workspace.hint_high[index], |limit| {
            limit <= rate
        });
        let threshold = rate * band_start;
        let low = if mu > 0.0 {
            search(books, pair, &mut workspace.hint_low[index], |limit| {
                limit < threshold
            })
        } else {
            high
        };
        let band_amount = high.amount - low.amount;
        let partial = if band_amount > 0.0 {
            let band_amount_limit = high.amount_limit - low.amount_limit;
            ((rate * band_amount - band_amount_limit) / (rate * mu)).clamp(0.0, band_amount)
        } else {
            0.0
        };
        let value = (low.amount + partial) * sell_price;
        workspace.sold_value[pair.sell as usize] += value;
        workspace.bought_value[pair.buy as usize] += value;
        workspace.pair_lower_value[index] = low.amount * sell_price;
        workspace.pair_upper_value[index] = high.amount * sell_price;
    }
}

/// Pairs ahead whose hinted blocks are requested before they are needed: the per-pair work is
/// short, so the loads of one pair overlap the arithmetic of the previous few.
const PREFETCH_DISTANCE: usize = 4;

/// Where a search ended: `blocks` pivots passed, then `slots` offers of the last of those blocks,
/// giving prefix sums `sums`. Zero blocks means no offer passed.
#[derive(Clone, Copy, Debug, Default)]
struct SearchHint {
    blocks: u32,
    slots: u32,
    sums: PrefixSums,
}

/// Finds the offers of `pair` whose limits pass `below` (a prefix of the canonical order) and
/// returns the prefix sums over them, starting from (and updating) the previous answer.
#[inline]
fn search(
    books: &OrderBooks,
    pair: &PairBook,
    hint: &mut SearchHint,
    below: impl Fn(f64) -> bool,
) -> PrefixSums {
    let pivots = books.pivot_limits(pair);
    let hinted = (hint.blocks as usize).min(pivots.len());
    let block_holds = (hinted == 0 || below(pivots[hinted - 1] as f64))
        && (hinted == pivots.len() || !below(pivots[hinted] as f64));
    if block_holds && hinted == 0 {
        *hint = SearchHint::default();
        return hint.sums;
    }
    let passing_blocks = if block_holds {
        let block = &books.blocks(pair)[hinted - 1];
        let slots = hint.slots as usize;
        // The same offer is still the last to pass: nothing to recompute.
        if (1..=BLOCK_OFFERS).contains(&slots)
            && below(block.limits[slots - 1] as f64)
            && (slots == BLOCK_OFFERS || !below(block.limits[slots] as f64))
        {
            return hint.sums;
        }
        hinted
    } else {
        pivots.partition_point(|limit| below(*limit as f64))
    };
    if passing_blocks == 0 {
        *hint = SearchHint::default();
        return hint.sums;
    }
    let block = &books.blocks(pair)[passing_blocks - 1];
    let before = books.pivot_sums(pair)[passing_blocks - 1];
    let slots = block
        .limits
        .iter()
        .map(|limit| below(*limit as f64) as usize)
        .sum::<usize>();
    let last = slots.max(1) - 1; // the pivot passed, so at least one slot does
    let through = block.through[last];
    *hint = SearchHint {
        blocks: passing_blocks as u32,
        slots: slots as u32,
        sums: PrefixSums {
            amount: before.amount + through.amount,
            amount_limit: before.amount_limit + through.amount_limit,
        },
    };
    hint.sums
}

/// Asks the cache for the pivots and block limits the pair's searches will most likely touch.
#[inline]
fn prefetch_pair(books: &OrderBooks, workspace: &DemandWorkspace, index: usize) {
    let pair = &books.pairs()[index];
    let blocks = books.blocks(pair);
    let high = &workspace.hint_high[index];
    let low = &workspace.hint_low[index];
    prefetch(
        books
            .pivot_limits(pair)
            .as_ptr()
            .wrapping_add(high.blocks.saturating_sub(1) as usize) as *const i8,
    );
    for hint in [high, low] {
        let block = (hint.blocks as usize)
            .saturating_sub(1)
            .min(blocks.len() - 1);
        let slot = (hint.slots as usize)
            .saturating_sub(1)
            .min(BLOCK_OFFERS - 1);
        prefetch(blocks[block].limits.as_ptr().wrapping_add(slot) as *const i8);
    }
}

#[inline(always)]
fn prefetch(address: *const i8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint; it never faults or reads memory architecturally.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(address);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use walras_types::{AccountId, AssetId, Offer, OfferId, Price};

    fn offers_with(limits: &[f64]) -> Vec<Offer> {
        limits
            .iter()
            .enumerate()
            .map(|(index, limit)| Offer {
                id: OfferId(index as u64),
                account: AccountId(0),
                sell: AssetId(0),
                buy: AssetId(1),
                amount: 1 + index as u64 % 5,
                min_price: Price::from_f64(*limit),
            })
            .collect()
    }

    proptest! {
        /// Whatever the previous query, a search returns the same sums as a linear scan.
        #[test]
        fn block_search_matches_linear_scan(
            limits in proptest::collection::vec(0.01f64..10.0, 1..200),
            previous_rate in 0.0f64..11.0,
            rate in 0.0f64..11.0,
        ) {
            let offers = offers_with(&limits);
            let books = OrderBooks::build(offers.clone(), 2, 1).unwrap();
            let pair = books.pairs()[0];
            for strict in [false, true] {
                let passes = |limit: f64| if strict { limit < rate } else { limit <= rate };
                // Hints only ever come from an earlier search, here at another rate.
                let mut hint = SearchHint::default();
                let previous = |limit: f64| if strict { limit < previous_rate } else { limit <= previous_rate };
                search(&books, &pair, &mut hint, previous);
                let sums = search(&books, &pair, &mut hint, passes);
                // A second search from the updated hint must agree (the cached path).
                prop_assert_eq!(search(&books, &pair, &mut hint, passes), sums);
                let (amount, amount_limit) = books
                    .offers(&pair)
                    .iter()
                    // Classified by the limit as the book stores it (f32), summed exactly.
                    .filter(|offer| passes(offer.min_price.to_f64() as f32 as f64))
                    .fold((0.0, 0.0), |(a, al), offer| {
                        let amount = offer.amount as f64;
                        (a + amount, al + amount * offer.min_price.to_f64())
                    });
                prop_assert_eq!(sums.amount, amount);
                prop_assert!((sums.amount_limit - amount_limit).abs() <= 1e-9 * amount_limit.max(1.0));
            }
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
