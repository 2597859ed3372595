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
//! binary-searches the pair's pivots. It then counts inside one block (see [`crate::book`]). A
//! query runs in two passes — locate every pair's blocks (prefetching them), then finish — so the
//! cache misses of different pairs overlap. On a pool, each thread takes consecutive pairs
//! through both passes, and the per-asset totals are summed afterwards in pair order on the
//! calling thread, so the floats do not depend on the thread count ([`query_on`]).
//!
//! Everything is reported in *value* (amount × valuation), the unit tâtonnement normalises by.

use crate::book::{OrderBooks, PairBook, PrefixSums, BLOCK_OFFERS};
use crate::grid::SupplyGrid;
use walras_par::prefetch::prefetch;
use walras_par::ThreadPool;

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
    /// Per non-empty pair: smoothed value sold (exact queries only).
    pair_value: Vec<f64>,
    inverse_prices: Vec<f64>,
    /// Per non-empty pair: the rate of the current query.
    rates: Vec<f64>,
}

impl DemandWorkspace {
    /// The rate `p_sell / p_buy` of pair `index` at the last exact query.
    pub fn rate(&self, index: usize) -> f64 {
        self.rates[index]
    }

    /// The smoothed value sold on pair `index` at the last exact query.
    pub fn pair_flow_value(&self, index: usize) -> f64 {
        self.pair_value[index]
    }

    pub fn new(books: &OrderBooks) -> DemandWorkspace {
        let pairs = books.pairs().len();
        DemandWorkspace {
            hint_low: vec![SearchHint::default(); pairs],
            hint_high: vec![SearchHint::default(); pairs],
            sold_value: vec![0.0; books.assets()],
            bought_value: vec![0.0; books.assets()],
            pair_lower_value: vec![0.0; pairs],
            pair_upper_value: vec![0.0; pairs],
            pair_value: vec![0.0; pairs],
            inverse_prices: vec![0.0; books.assets()],
            rates: vec![0.0; pairs],
        }
    }
}

/// Computes smoothed demand at `prices` (positive, finite) into `workspace`.
pub fn query(books: &OrderBooks, prices: &[f64], mu: f64, workspace: &mut DemandWorkspace) {
    query_on(books, prices, mu, workspace, None);
}

/// [`query`] with the pairs spread over `pool`'s threads (`None`: the calling thread). Each
/// pair's figures are computed alone, and the per-asset totals are then summed on the calling
/// thread in pair order, as one thread sums them: the result is the same, bit for bit, for any
/// pool.
pub(crate) fn query_on(
    books: &OrderBooks,
    prices: &[f64],
    mu: f64,
    workspace: &mut DemandWorkspace,
    pool: Option<&ThreadPool>,
) {
    let threads = pool.map_or(1, ThreadPool::current_num_threads);
    debug_assert_eq!(prices.len(), books.assets());
    for (inverse, price) in workspace.inverse_prices.iter_mut().zip(prices) {
        *inverse = 1.0 / price;
    }
    let pairs = books.pairs().len();
    let pieces = if pairs < PARALLEL_PAIRS_MIN {
        1
    } else {
        threads.clamp(1, pairs)
    };
    let piece_len = pairs.div_ceil(pieces).max(1);
    let inverse_prices = &workspace.inverse_prices;
    let mut slots = Vec::with_capacity(pieces);
    let mut rest = PairSlots {
        first: 0,
        hint_low: &mut workspace.hint_low,
        hint_high: &mut workspace.hint_high,
        rates: &mut workspace.rates,
        value: &mut workspace.pair_value,
        lower_value: &mut workspace.pair_lower_value,
        upper_value: &mut workspace.pair_upper_value,
    };
    while rest.rates.len() > piece_len {
        let (piece, tail) = rest.split_at(piece_len);
        slots.push(piece);
        rest = tail;
    }
    slots.push(rest);
    walras_par::run_each_on(pool, slots, |mut piece| {
        locate_all(books, prices, inverse_prices, mu, &mut piece);
        finish_all(books, prices, inverse_prices, mu, &mut piece);
    });
    workspace.sold_value.fill(0.0);
    workspace.bought_value.fill(0.0);
    for (pair, value) in books.pairs().iter().zip(&workspace.pair_value) {
        workspace.sold_value[pair.sell as usize] += value;
        workspace.bought_value[pair.buy as usize] += value;
    }
}

/// Below this many pairs a query runs on the calling thread: a pair costs about 0.1 µs, less
/// than handing work to another thread.
const PARALLEL_PAIRS_MIN: usize = 512;

/// One piece of a query: consecutive pairs from `first`, and their slots of the workspace's
/// per-pair arrays.
struct PairSlots<'w> {
    first: usize,
    hint_low: &'w mut [SearchHint],
    hint_high: &'w mut [SearchHint],
    rates: &'w mut [f64],
    value: &'w mut [f64],
    lower_value: &'w mut [f64],
    upper_value: &'w mut [f64],
}

impl<'w> PairSlots<'w> {
    /// The first `len` pairs and the rest.
    fn split_at(self, len: usize) -> (PairSlots<'w>, PairSlots<'w>) {
        let (hint_low, hint_low_rest) = self.hint_low.split_at_mut(len);
        let (hint_high, hint_high_rest) = self.hint_high.split_at_mut(len);
        let (rates, rates_rest) = self.rates.split_at_mut(len);
        let (value, value_rest) = self.value.split_at_mut(len);
        let (lower_value, lower_rest) = self.lower_value.split_at_mut(len);
        let (upper_value, upper_rest) = self.upper_value.split_at_mut(len);
        (
            PairSlots {
                first: self.first,
                hint_low,
                hint_high,
                rates,
                value,
                lower_value,
                upper_value,
            },
            PairSlots {
                first: self.first + len,
                hint_low: hint_low_rest,
                hint_high: hint_high_rest,
                rates: rates_rest,
                value: value_rest,
                lower_value: lower_rest,
                upper_value: upper_rest,
            },
        )
    }

    /// The piece's pairs of `books`.
    fn pairs<'b>(&self, books: &'b OrderBooks) -> &'b [PairBook] {
        &books.pairs()[self.first..self.first + self.rates.len()]
    }
}

/// First pass: per pair, the rate and the block each search ends in, found from the small pivot
/// arrays (read in pair order, so they stream through the cache); the lines the second pass will
/// read are requested meanwhile, so their latencies overlap across pairs instead of adding up.
fn locate_all(
    books: &OrderBooks,
    prices: &[f64],
    inverse_prices: &[f64],
    mu: f64,
    piece: &mut PairSlots<'_>,
) {
    let band_start = 1.0 - mu;
    for (index, pair) in piece.pairs(books).iter().enumerate() {
        let rate = prices[pair.sell as usize] * inverse_prices[pair.buy as usize];
        piece.rates[index] = rate;
        // Limits are stored as f32; compare in f32 (the rounding is as harmless, see book.rs).
        let (rate_f32, threshold_f32) = search_thresholds(rate, band_start);
        locate(books, pair, &mut piece.hint_high[index], |limit| {
            limit <= rate_f32
        });
        if mu > 0.0 {
            locate(books, pair, &mut piece.hint_low[index], |limit| {
                limit < threshold_f32
            });
        }
    }
}

/// Second pass: per pair, the prefix sums at both searches' answers and the smoothed demand.
fn finish_all(
    books: &OrderBooks,
    prices: &[f64],
    inverse_prices: &[f64],
    mu: f64,
    piece: &mut PairSlots<'_>,
) {
    let band_start = 1.0 - mu;
    let inverse_mu = if mu > 0.0 { 1.0 / mu } else { 0.0 };
    for (index, pair) in piece.pairs(books).iter().enumerate() {
        let rate = piece.rates[index];
        let (rate_f32, threshold_f32) = search_thresholds(rate, band_start);
        let high = finish(books, pair, &mut piece.hint_high[index], |limit| {
            limit <= rate_f32
        });
        let low = if mu > 0.0 {
            finish(books, pair, &mut piece.hint_low[index], |limit| {
                limit < threshold_f32
            })
        } else {
            high
        };
        let (sell, buy) = (pair.sell as usize, pair.buy as usize);
        let sell_price = prices[sell];
        // 1/r = p_buy / p_sell: no division here.
        let inverse_rate = prices[buy] * inverse_prices[sell];
        let value = smoothed_supply(low, high, inverse_rate, inverse_mu) * sell_price;
        piece.value[index] = value;
        piece.lower_value[index] = low.amount * sell_price;
        piece.upper_value[index] = high.amount * sell_price;
    }
}

/// Relative margin of the float searches: limits are stored as `f32` and rates rounded to `f32`,
/// each off by up to 2^-24 of its value, and the settlement decides on exact prices.
const SEARCH_MARGIN: f64 = 1.0 / (1u64 << 21) as f64;

/// The `f32` thresholds the searches compare limits with: `hi` (may trade) just below the rate,
/// `lo` (must trade) just above `(1 − μ)` times it. Both err on the side that makes the
/// convergence test stricter than the exact settlement's bounds: an offer the floats call "may
/// trade" may trade exactly, and one they call "need not trade" need not trade exactly, so the
/// max-flow test never passes on a float rounding that the exact LP then refuses (issue 10: a
/// 100-asset thin book converged in the race on one offer within 2^-24 of its rate, and its
/// settlement's LP with lower bounds was infeasible).
#[inline]
fn search_thresholds(rate: f64, band_start: f64) -> (f32, f32) {
    let rate_f32 = (rate * (1.0 - SEARCH_MARGIN)) as f32;
    let threshold_f32 = (rate * band_start * (1.0 + SEARCH_MARGIN)) as f32;
    (rate_f32, threshold_f32)
}

/// Smoothed supply from the prefix sums at `lo` and `hi`: everything below the band, and the
/// band's offers in proportion to how far the rate clears them.
#[inline]
fn smoothed_supply(low: PrefixSums, high: PrefixSums, inverse_rate: f64, inverse_mu: f64) -> f64 {
    let band_amount = high.amount - low.amount;
    if band_amount <= 0.0 {
        return low.amount;
    }
    let band_amount_limit = high.amount_limit - low.amount_limit;
    let partial = (band_amount - band_amount_limit * inverse_rate) * inverse_mu;
    low.amount + partial.clamp(0.0, band_amount)
}

/// Smoothed demand at `prices` read from the supply `grid` (see [`crate::grid`]): what
/// tâtonnement's steps use. A pair whose rate falls outside its table is searched exactly. Pair
/// bounds are not computed: use [`query`] for those.
pub fn query_grid(
    books: &OrderBooks,
    grid: &SupplyGrid,
    prices: &[f64],
    workspace: &mut DemandWorkspace,
) {
    debug_assert_eq!(prices.len(), books.assets());
    workspace.sold_value.fill(0.0);
    workspace.bought_value.fill(0.0);
    for (inverse, price) in workspace.inverse_prices.iter_mut().zip(prices) {
        *inverse = 1.0 / price;
    }
    let pairs = books.pairs();
    let rate_of = |index: usize, inverse_prices: &[f64]| {
        let pair = &pairs[index];
        prices[pair.sell as usize] * inverse_prices[pair.buy as usize]
    };
    // Pairs come sorted by sell asset: sum its sales locally rather than through memory.
    let mut selling = pairs.first().map_or(0, |pair| pair.sell as usize);
    let mut sold = 0.0;
    for (index, pair) in pairs.iter().enumerate() {
        if index + GRID_PREFETCH_DISTANCE < pairs.len() {
            let ahead = index + GRID_PREFETCH_DISTANCE;
            let address = grid.address(ahead, rate_of(ahead, &workspace.inverse_prices));
            prefetch(address as *const i8);
        }
        let rate = rate_of(index, &workspace.inverse_prices);
        let supply = match grid.supply(books, index, rate) {
            Some(supply) => supply,
            None => exact_pair_supply(books, pair, index, rate, grid.mu_f64(), workspace),
        };
        let value = supply * prices[pair.sell as usize];
        if pair.sell as usize != selling {
            workspace.sold_value[selling] += sold;
            (selling, sold) = (pair.sell as usize, 0.0);
        }
        sold += value;
        workspace.bought_value[pair.buy as usize] += value;
    }
    if !pairs.is_empty() {
        workspace.sold_value[selling] += sold;
    }
}

/// Pairs ahead whose table entries are requested before they are read.
const GRID_PREFETCH_DISTANCE: usize = 8;

/// Smoothed supply of one pair by exact search (the grid's fallback).
fn exact_pair_supply(
    books: &OrderBooks,
    pair: &PairBook,
    index: usize,
    rate: f64,
    mu: f64,
    workspace: &mut DemandWorkspace,
) -> f64 {
    let (rate_f32, threshold_f32) = search_thresholds(rate, 1.0 - mu);
    let high_hint = &mut workspace.hint_high[index];
    locate(books, pair, high_hint, |limit| limit <= rate_f32);
    let high = finish(books, pair, high_hint, |limit| limit <= rate_f32);
    let low_hint = &mut workspace.hint_low[index];
    locate(books, pair, low_hint, |limit| limit < threshold_f32);
    let low = finish(books, pair, low_hint, |limit| limit < threshold_f32);
    smoothed_supply(low, high, 1.0 / rate, 1.0 / mu)
}

/// Amount of the pair's offers whose limit is at most `rate` (floats, for slope estimates): a
/// binary search of the pivots and a count inside one block, without hints.
pub(crate) fn amount_at_or_below(books: &OrderBooks, pair: &PairBook, rate: f64) -> f64 {
    let rate = rate as f32;
    sums_passing(books, pair, |limit| limit <= rate).amount
}

/// Smoothed amount sold on one pair at `rate` (the same rule as [`query`]), searched without
/// hints: for the few pairs a cut crosses (see [`crate::cut`]).
pub(crate) fn pair_smoothed_amount(books: &OrderBooks, pair: &PairBook, rate: f64, mu: f64) -> f64 {
    let (rate_f32, threshold_f32) = search_thresholds(rate, 1.0 - mu);
    let high = sums_passing(books, pair, |limit| limit <= rate_f32);
    if mu <= 0.0 {
        return high.amount;
    }
    let low = sums_passing(books, pair, |limit| limit < threshold_f32);
    smoothed_supply(low, high, 1.0 / rate, 1.0 / mu)
}

/// Prefix sums of the offers passing `below` (a prefix of the canonical order).
fn sums_passing(books: &OrderBooks, pair: &PairBook, below: impl Fn(f32) -> bool) -> PrefixSums {
    let chunks = books
        .chunk_first_limits(pair)
        .partition_point(|limit| below(*limit));
    if chunks == 0 {
        return PrefixSums::default();
    }
    // The chunk's first limit passed, so its first block's does: at least one block passes.
    let blocks = books
        .chunk_pivots(pair, chunks - 1)
        .partition_point(|limit| below(*limit));
    let block = &books.chunk_blocks(pair, chunks - 1)[blocks - 1];
    let slots = block
        .limits
        .iter()
        .map(|limit| below(*limit) as usize)
        .sum::<usize>();
    books.sums_through(pair, chunks - 1, blocks - 1, slots.max(1) - 1)
}

/// Where a search ended: `chunks` chunk first limits passed, then `blocks` pivots of the last
/// of those chunks, then `slots` offers of the last of those blocks, giving prefix sums `sums`.
/// Zero chunks means no offer passed; zero blocks or slots, not yet searched there.
#[derive(Clone, Copy, Debug, Default)]
struct SearchHint {
    chunks: u32,
    blocks: u32,
    slots: u32,
    sums: PrefixSums,
}

/// Moves `hint` to the chunk and block where the offers passing `below` end (a prefix of the
/// canonical order), checking the previous ones first, and prefetches what [`finish`] will
/// read.
#[inline]
fn locate(books: &OrderBooks, pair: &PairBook, hint: &mut SearchHint, below: impl Fn(f32) -> bool) {
    let firsts = books.chunk_first_limits(pair);
    let hinted = (hint.chunks as usize).min(firsts.len());
    let chunk_holds = (hinted == 0 || below(firsts[hinted - 1]))
        && (hinted == firsts.len() || !below(firsts[hinted]));
    if !chunk_holds {
        hint.chunks = firsts.partition_point(|limit| below(*limit)) as u32;
        hint.blocks = 0;
        hint.slots = 0;
    }
    if hint.chunks == 0 {
        return;
    }
    let chunk = hint.chunks as usize - 1;
    let pivots = books.chunk_pivots(pair, chunk);
    let hinted = (hint.blocks as usize).min(pivots.len());
    let block_holds = hinted > 0
        && below(pivots[hinted - 1])
        && (hinted == pivots.len() || !below(pivots[hinted]));
    if !block_holds {
        hint.blocks = pivots.partition_point(|limit| below(*limit)) as u32;
        hint.slots = 0;
    }
    // The block's limits and the running sums at the previous answer: prefetching more of
    // the block measured slower (it evicts what the other pairs prefetched).
    let block = &books.chunk_blocks(pair, chunk)[hint.blocks as usize - 1];
    let guess = (hint.slots as usize).clamp(1, BLOCK_OFFERS) - 1;
    prefetch(block.limits.as_ptr() as *const i8);
    prefetch(&block.through[guess] as *const PrefixSums as *const i8);
}

/// The prefix sums over the offers passing `below`, in the block [`locate`] chose; reuses the
/// previous answer when the same offer is still the last to pass.
#[inline]
fn finish(
    books: &OrderBooks,
    pair: &PairBook,
    hint: &mut SearchHint,
    below: impl Fn(f32) -> bool,
) -> PrefixSums {
    if hint.chunks == 0 {
        hint.sums = PrefixSums::default();
        return hint.sums;
    }
    let (chunk_index, block_index) = (hint.chunks as usize - 1, hint.blocks as usize - 1);
    let block = &books.chunk_blocks(pair, chunk_index)[block_index];
    let slots = hint.slots as usize;
    if (1..=BLOCK_OFFERS).contains(&slots)
        && below(block.limits[slots - 1])
        && (slots == BLOCK_OFFERS || !below(block.limits[slots]))
    {
        return hint.sums;
    }
    let slots = block
        .limits
        .iter()
        .map(|limit| below(*limit) as usize)
        .sum::<usize>();
    hint.slots = slots as u32;
    // The pivot passed, so at least one slot does.
    hint.sums = books.sums_through(pair, chunk_index, block_index, slots.max(1) - 1);
    hint.sums
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;
    use walras_types::{AccountId, AssetId, Offer, OfferId, Price};

    fn search(
        books: &OrderBooks,
        pair: &PairBook,
        hint: &mut SearchHint,
        below: impl Fn(f32) -> bool + Copy,
    ) -> PrefixSums {
        locate(books, pair, hint, below);
        finish(books, pair, hint, below)
    }

    /// Offers selling asset 0 for asset 1 at `limits`, the i-th of amount `amount(i)`.
    pub(crate) fn offers_with(limits: &[f64], amount: impl Fn(usize) -> u64) -> Vec<Offer> {
        limits
            .iter()
            .enumerate()
            .map(|(index, limit)| Offer {
                id: OfferId(index as u64),
                account: AccountId(0),
                sell: AssetId(0),
                buy: AssetId(1),
                amount: amount(index),
                min_price: Price::from_f64(*limit),
            })
            .collect()
    }

    /// Smoothed supply (units of the sold asset) by its definition, offer by offer.
    pub(crate) fn supply_by_definition(offers: &[Offer], rate: f64, mu: f64) -> f64 {
        offers
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
                fraction * offer.amount as f64
            })
            .sum()
    }

    proptest! {
        /// Whatever the previous query and however the pair is cut into chunks, a search returns
        /// the same sums as a linear scan.
        #[test]
        fn block_search_matches_linear_scan(
            limits in proptest::collection::vec(0.01f64..10.0, 1..200),
            previous_rate in 0.0f64..11.0,
            rate in 0.0f64..11.0,
            mean_choice in 0usize..4,
        ) {
            let offers = offers_with(&limits, |index| 1 + index as u64 % 5);
            let mean = [1, 3, 16, crate::book::CHUNK_OFFERS_MEAN][mean_choice];
            let books = OrderBooks::build_with_chunk_mean(offers.clone(), 2, 1, mean).unwrap();
            let pair = books.pairs()[0];
            for strict in [false, true] {
                let (rate, previous_rate) = (rate as f32, previous_rate as f32);
                let passes = |limit: f32| if strict { limit < rate } else { limit <= rate };
                // Hints only ever come from an earlier search, here at another rate.
                let mut hint = SearchHint::default();
                let previous = |limit: f32| if strict { limit < previous_rate } else { limit <= previous_rate };
                search(&books, &pair, &mut hint, previous);
                let sums = search(&books, &pair, &mut hint, passes);
                // A second search from the updated hint must agree (the cached path).
                prop_assert_eq!(search(&books, &pair, &mut hint, passes), sums);
                // The unhinted search (slopes, cuts) reads the same sums.
                prop_assert_eq!(sums_passing(&books, &pair, passes), sums);
                let (amount, amount_limit) = books
                    .offers(&pair)
                    // Classified by the limit as the book stores it (f32), summed exactly.
                    .filter(|offer| passes(offer.min_price.to_f64() as f32))
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
        let offers = offers_with(&limits, |index| 1000 + index as u64);
        let books = OrderBooks::build(offers.clone(), 2, 1).unwrap();
        let mu = 0.002;
        for rate in [0.5, 0.9995, 1.0, 1.0007, 1.0011, 1.3] {
            let mut workspace = DemandWorkspace::new(&books);
            query(&books, &[rate, 1.0], mu, &mut workspace);
            let expected = supply_by_definition(&offers, rate, mu) * rate;
            let sold = workspace.sold_value[0];
            assert!(
                (sold - expected).abs() <= 1e-9 * expected.max(1.0),
                "{rate}: {sold} vs {expected}"
            );
            assert_eq!(workspace.bought_value[1], sold);
        }
    }
}
