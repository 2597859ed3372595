//! A lookup table of each pair's smoothed supply, for tâtonnement's many demand queries.
//!
//! A query over the sorted books (App. G) needs two dependent searches per pair, and at a million
//! offers their cache misses dominate. But smoothed supply `S(r)` (see [`crate::demand`]) is a
//! continuous, piecewise-smooth function of the rate, and μ fixes its scale: it has a kink only
//! where `r` meets a limit `l` or `l / (1 − μ)`. So, per pair and once per clearing, `S` is
//! tabulated at rates spaced [`GRID_POINTS_PER_MU`] times finer than μ and interpolated linearly
//! between them; the interpolation error is bounded by a small fraction of one offer's amount
//! per kink between two grid points.
//!
//! Grid points are the positive floats whose low `shift` mantissa bits are zero, so the grid
//! index of a rate is `r.to_bits() >> shift` — no logarithm — and the interpolation weight is the
//! low bits: within one binade a float's value is linear in its mantissa. A query reads two
//! adjacent entries of one pair's table: one cache line, at an address computed from the rate
//! alone, so the loads of all pairs overlap. Each pair's table covers a window around its median
//! limit ([`MAX_POINTS_PER_PAIR`] entries at most); a rate outside it is answered by an exact
//! search instead.
//!
//! Only tâtonnement's steps use the table. The convergence check and settlement use the exact
//! structures.

use crate::book::{Chunk, OrderBooks, PairBook, PrefixSums};
use std::sync::Arc;
use walras_types::Fraction;

/// Grid points per relative width μ. Coarser tables cover wider windows in the same memory; the
/// interpolation error, at most about an eighth of one offer's amount per kink in a cell, only
/// perturbs tâtonnement's steps (convergence is judged on exact demand).
pub(crate) const GRID_POINTS_PER_MU: f64 = 2.0;
/// Table entries per pair at most: a window of about ±2× around the median limit at μ = 2^-10.
pub(crate) const MAX_POINTS_PER_PAIR: u64 = 4096;

/// Per non-empty pair: the window of grid indices covered and where its values start.
#[derive(Clone, Copy, Debug)]
struct PairTable {
    /// Rates with a smaller key are below every limit: nothing is supplied.
    nothing_below_key: u64,
    /// Rates with this key or more clear every limit by the band: everything is supplied.
    everything_from_key: u64,
    total: f64,
    first_key: u64,
    /// Entries in the table; a query needs keys in `first_key .. first_key + points - 1`.
    points: u32,
    values_start: u32,
}

/// Tabulated smoothed supply (units of the sold asset) of every non-empty pair.
#[derive(Clone, Debug)]
pub struct SupplyGrid {
    /// The smoothing width the table is for, exactly (what [`crate::clear`] checks).
    mu_exact: Fraction,
    mu: f64,
    shift: u32,
    /// 2^-shift.
    inverse_cell: f64,
    tables: Vec<PairTable>,
    /// Supply at each grid point; f32 (16 per cache line): its rounding is far below the
    /// interpolation error.
    values: Vec<f32>,
}

impl SupplyGrid {
    /// The table for smoothing width `mu`, or `None` for μ = 0 (no smoothing, nothing to
    /// tabulate). Built beside the books, not inside them: one table per (books, μ).
    pub fn for_mu(books: &OrderBooks, mu: Fraction) -> Option<SupplyGrid> {
        SupplyGrid::for_mu_on(books, mu, 1)
    }

    /// [`Self::for_mu`], the pairs tabulated on up to `threads` threads (each pair's table
    /// depends on its offers alone: the same table for any thread count).
    pub fn for_mu_on(books: &OrderBooks, mu: Fraction, threads: usize) -> Option<SupplyGrid> {
        (mu != Fraction::ZERO).then(|| SupplyGrid::build_on(books, mu, threads))
    }

    /// Tabulates every pair of `books` for smoothing width `mu` (> 0).
    #[cfg(test)]
    fn build(books: &OrderBooks, mu_exact: Fraction) -> SupplyGrid {
        SupplyGrid::build_on(books, mu_exact, 1)
    }

    fn build_on(books: &OrderBooks, mu_exact: Fraction, threads: usize) -> SupplyGrid {
        let mu = mu_exact.to_f64();
        assert!(
            mu > 0.0 && mu < 1.0,
            "a supply grid needs a smoothing width in (0, 1)"
        );
        let shift = grid_shift(mu);
        let inverse_cell = 1.0 / (1u64 << shift) as f64;
        let mut grid = SupplyGrid {
            mu_exact,
            mu,
            shift,
            inverse_cell,
            tables: Vec::new(),
            values: Vec::new(),
        };
        // Each chunk keeps its limits as f64 (no conversion per batch), and the sweep reads
        // prefix sums as the exact search does, skipping whole chunks between grid points.
        let indexes: Vec<usize> = (0..books.pairs().len()).collect();
        let tables = walras_par::map_in_order(&indexes, threads, 2, |index| {
            grid.pair_table(books, &books.pairs()[*index], *index)
        });
        let points = tables.iter().map(|(_, values)| values.len()).sum();
        grid.values.reserve_exact(points);
        for (mut table, values) in tables {
            table.values_start = grid.values.len() as u32;
            grid.tables.push(table);
            grid.values.extend(values);
        }
        grid
    }

    /// The smoothing width the table was built for.
    pub fn mu(&self) -> Fraction {
        self.mu_exact
    }

    /// The same as a float, for the arithmetic of queries.
    pub(crate) fn mu_f64(&self) -> f64 {
        self.mu
    }

    /// Pairs tabulated: every non-empty pair of the books it was built from.
    pub fn pairs(&self) -> usize {
        self.tables.len()
    }

    /// Smoothed supply of pair `index` at `rate`, or `None` outside the pair's table.
    #[inline]
    pub fn supply(&self, index: usize, rate: f64) -> Option<f64> {
        let table = &self.tables[index];
        let bits = rate.to_bits();
        let key = bits >> self.shift;
        if key < table.nothing_below_key {
            return Some(0.0);
        }
        if key >= table.everything_from_key {
            return Some(table.total);
        }
        let offset = key.wrapping_sub(table.first_key);
        // Compared without adding 1: a key just below first_key wraps to u64::MAX.
        if offset >= u64::from(table.points).saturating_sub(1) {
            return None; // also catches keys below first_key (the subtraction wraps)
        }
        let at = table.values_start as usize + offset as usize;
        // Through i64: one instruction on x86-64, where u64 → f64 takes several.
        let weight = (bits & ((1u64 << self.shift) - 1)) as i64 as f64 * self.inverse_cell;
        let (low, high) = (self.values[at] as f64, self.values[at + 1] as f64);
        Some(low + (high - low) * weight)
    }

    /// Prefetch hint: the address a query of pair `index` at `rate` will read.
    #[inline]
    pub fn address(&self, index: usize, rate: f64) -> *const f32 {
        let table = &self.tables[index];
        let offset = ((rate.to_bits() >> self.shift).wrapping_sub(table.first_key))
            .min(table.points.saturating_sub(1) as u64);
        self.values
            .as_ptr()
            .wrapping_add(table.values_start as usize + offset as usize)
    }

    /// One pair's table and its values (`values_start` is set where the values are placed).
    /// Costs O(points · log chunk + chunks), not O(offers).
    fn pair_table(
        &self,
        books: &OrderBooks,
        pair: &PairBook,
        index: usize,
    ) -> (PairTable, Vec<f32>) {
        let chunks = books.chunks(pair);
        let last = &chunks[chunks.len() - 1];
        let lowest = chunks[0].limits()[0];
        let median = books.offer_at(pair, pair.len() / 2).min_price.to_f64();
        let highest = last.limits()[last.limits().len() - 1] / (1.0 - self.mu);
        let half = MAX_POINTS_PER_PAIR / 2;
        let key = |rate: f64| rate.to_bits() >> self.shift;
        let first_key = key(lowest).max(key(median).saturating_sub(half));
        let last_key = (key(highest) + 1).min(key(median) + half);
        let points = last_key - first_key + 1;
        let table = PairTable {
            nothing_below_key: key(lowest),
            // Grid point key(highest) + 1 exceeds highest = l_max / (1 − μ), and so does any
            // rate with a larger key: every offer is below (1 − μ) · rate.
            everything_from_key: key(highest) + 1,
            total: books.pair_totals(index).amount,
            first_key,
            points: points as u32,
            values_start: 0,
        };
        let mut sweep = SupplySweep::new(books, pair, self.mu);
        let values = (first_key..=last_key)
            .map(|grid_key| sweep.supply_at(f64::from_bits(grid_key << self.shift)) as f32)
            .collect();
        (table, values)
    }
}

/// How many of a pair's offers pass a threshold that only grows: all of the chunks before
/// `chunk`, and the first `within` offers of it (zero only while nothing passes).
#[derive(Clone, Copy, Debug, Default)]
struct Cursor {
    chunk: usize,
    within: usize,
}

impl Cursor {
    /// Moves on to the offers passing `passes` (which only ever passes more than before).
    fn advance(&mut self, chunks: &[Arc<Chunk>], passes: impl Fn(f64) -> bool) {
        while self.chunk + 1 < chunks.len() && passes(chunks[self.chunk + 1].limits()[0]) {
            self.chunk += 1;
            self.within = 0;
        }
        let limits = chunks[self.chunk].limits();
        self.within += limits[self.within..].partition_point(|limit| passes(*limit));
    }

    fn sums(&self, books: &OrderBooks, pair: &PairBook) -> PrefixSums {
        if self.within == 0 {
            return PrefixSums::default();
        }
        books.sums_through_offer(pair, self.chunk, self.within)
    }
}

/// Smoothed supply of one pair at increasing rates, by two cursors over its chunks.
struct SupplySweep<'a> {
    books: &'a OrderBooks,
    pair: &'a PairBook,
    mu: f64,
    high: Cursor,
    low: Cursor,
}

impl<'a> SupplySweep<'a> {
    fn new(books: &'a OrderBooks, pair: &'a PairBook, mu: f64) -> SupplySweep<'a> {
        SupplySweep {
            books,
            pair,
            mu,
            high: Cursor::default(),
            low: Cursor::default(),
        }
    }

    /// `rate` must not decrease between calls.
    fn supply_at(&mut self, rate: f64) -> f64 {
        let threshold = rate * (1.0 - self.mu);
        let chunks = self.books.chunks(self.pair);
        self.high.advance(chunks, |limit| limit <= rate);
        self.low.advance(chunks, |limit| limit < threshold);
        let high = self.high.sums(self.books, self.pair);
        let low = self.low.sums(self.books, self.pair);
        let band_amount = high.amount - low.amount;
        let band_amount_limit = high.amount_limit - low.amount_limit;
        let partial = if band_amount > 0.0 {
            ((rate * band_amount - band_amount_limit) / (rate * self.mu)).clamp(0.0, band_amount)
        } else {
            0.0
        };
        low.amount + partial
    }
}

/// Low mantissa bits dropped so that grid points are about μ / [`GRID_POINTS_PER_MU`] apart.
fn grid_shift(mu: f64) -> u32 {
    let spacing_bits = (GRID_POINTS_PER_MU / mu).log2().ceil() as i64;
    52 - spacing_bits.clamp(4, 40) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demand::tests::{offers_with, supply_by_definition};
    use proptest::prelude::*;

    proptest! {
        /// Interpolation error stays within a small fraction of the largest single offer.
        #[test]
        fn table_tracks_exact_supply(
            rows in proptest::collection::vec((0.9f64..1.1, 1u64..1_000_000), 1..300),
            rate in 0.85f64..1.2,
            mean in prop_oneof![Just(1u32), Just(7), Just(crate::book::CHUNK_OFFERS_MEAN)],
        ) {
            let limits: Vec<f64> = rows.iter().map(|(limit, _)| *limit).collect();
            let offers = offers_with(&limits, |index| rows[index].1);
            let mu = 2f64.powi(-10);
            let books = OrderBooks::build_with_chunk_mean(offers.clone(), 2, 1, mean).unwrap();
            let grid = SupplyGrid::build(&books, Fraction::power_of_two(10));
            let largest = rows.iter().map(|(_, amount)| *amount as f64).fold(0.0, f64::max);
            if let Some(supply) = grid.supply(0, rate) {
                let exact = supply_by_definition(&offers, rate, mu);
                                // Per kink inside one cell the error is at most amount / (4 · points per μ); a cell
                // here holds a few kinks at most.
                prop_assert!((supply - exact).abs() <= 0.5 * largest + 1e-6 * exact,
                    "rate {}: table {} exact {}", rate, supply, exact);
            }
        }
    }

    /// Tabulating pairs on several threads gives the table one thread gives.
    #[test]
    fn the_table_is_the_same_for_any_thread_count() {
        let limits: Vec<f64> = (0..5_000).map(|i| 0.5 + (i % 113) as f64 / 97.0).collect();
        let mut offers = offers_with(&limits, |index| 1 + index as u64 % 37);
        for (index, offer) in offers.iter_mut().enumerate() {
            if index % 2 == 1 {
                std::mem::swap(&mut offer.sell, &mut offer.buy);
            }
        }
        let books = OrderBooks::build(offers, 2, 1).unwrap();
        let one = SupplyGrid::for_mu_on(&books, Fraction::power_of_two(10), 1).unwrap();
        let two = SupplyGrid::for_mu_on(&books, Fraction::power_of_two(10), 2).unwrap();
        assert_eq!(one.pairs(), 2);
        assert_eq!(format!("{one:?}"), format!("{two:?}"));
    }

    fn book_of(limits: &[f64]) -> OrderBooks {
        OrderBooks::build(offers_with(limits, |_| 10), 2, 1).unwrap()
    }

    #[test]
    fn extremes_are_exact_and_far_rates_have_no_answer() {
        let mu = 2f64.powi(-10);
        let grid = SupplyGrid::build(&book_of(&[1.0]), Fraction::power_of_two(10));
        assert_eq!(
            grid.supply(0, 0.5),
            Some(0.0),
            "below every limit nothing is supplied"
        );
        assert_eq!(grid.supply(0, 2.0), Some(10.0), "far above, everything is");
        let at = grid.supply(0, 1.0005).unwrap();
        assert!((at - 10.0 * 0.0005 / mu / 1.0005).abs() < 0.2, "{at}");
        // Limits 1 and 100: the table covers about ±2× around the median (100); a rate of 10
        // is inside the pair's range but outside its table.
        let grid = SupplyGrid::build(&book_of(&[1.0, 100.0]), Fraction::power_of_two(10));
        assert_eq!(grid.supply(0, 10.0), None);
        assert!(grid.supply(0, 100.02).is_some());
    }

    /// Regression: a rate whose key is exactly one below the table's first key made
    /// `offset + 1` overflow (a panic with overflow checks, which killed a node's block
    /// producer under the load generator; a read of the wrong table's value without them).
    #[test]
    fn a_rate_one_cell_below_the_table_has_no_answer() {
        let grid = SupplyGrid::build(&book_of(&[1.0, 100.0]), Fraction::power_of_two(10));
        let table = grid.tables[0];
        assert!(
            table.first_key > table.nothing_below_key,
            "the table starts above the lowest limit"
        );
        let just_below = f64::from_bits((table.first_key - 1) << grid.shift);
        assert_eq!(grid.supply(0, just_below), None);
        let first = f64::from_bits(table.first_key << grid.shift);
        assert!(grid.supply(0, first).is_some());
    }
}
