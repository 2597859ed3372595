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
//!
//! Entries are computed when first read, not when the table is built (issue 32): tâtonnement
//! reads a few cells per pair near its prices, while a table spans up to
//! [`MAX_POINTS_PER_PAIR`] points, and filling all of them every batch cost more than clearing
//! once books grew to hundreds of thousands of offers near the price. An entry is the smoothed
//! supply at its grid point from the books' prefix sums (two searches), a function of the books
//! and the point alone, so threads racing to fill one write the same bits and the table reads
//! the same whatever order its cells were filled in.

use crate::book::{OrderBooks, PairBook, PrefixSums};
use std::sync::atomic::{AtomicU32, Ordering};
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

/// An entry not computed yet (a NaN no finite supply converts to).
const UNSET: u32 = u32::MAX;

/// Tabulated smoothed supply (units of the sold asset) of every non-empty pair of one
/// [`OrderBooks`]: read it with those books only.
#[derive(Debug)]
pub struct SupplyGrid {
    /// The smoothing width the table is for, exactly (what [`crate::clear`] checks).
    mu_exact: Fraction,
    mu: f64,
    shift: u32,
    /// 2^-shift.
    inverse_cell: f64,
    tables: Vec<PairTable>,
    /// Supply at each grid point, as `f32` bits (16 per cache line: the rounding is far
    /// below the interpolation error), [`UNSET`] until first read.
    values: Vec<AtomicU32>,
    /// Offers in the books the table is for (a check that it is read with them).
    offers: usize,
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
        SupplyGrid::for_mu_reusing(books, mu, threads, Vec::new())
    }

    /// [`Self::for_mu_on`], the table's entries held in `values`, the allocation of an earlier
    /// table ([`Self::into_values`]; what it holds is not read). Where limits spread widely a
    /// table is up to [`MAX_POINTS_PER_PAIR`] entries a pair, and allocating it afresh every
    /// block paid for its pages' faults and zeroing again each time (at 3M resting offers,
    /// planning took ~1.1 ms a block more on the 2-core VM, issue 32).
    pub fn for_mu_reusing(
        books: &OrderBooks,
        mu: Fraction,
        threads: usize,
        values: Vec<AtomicU32>,
    ) -> Option<SupplyGrid> {
        (mu != Fraction::ZERO).then(|| SupplyGrid::build_on(books, mu, threads, values))
    }

    /// The table's allocation, for the next table ([`Self::for_mu_reusing`]).
    pub fn into_values(self) -> Vec<AtomicU32> {
        self.values
    }

    /// Tabulates every pair of `books` for smoothing width `mu` (> 0).
    #[cfg(test)]
    fn build(books: &OrderBooks, mu_exact: Fraction) -> SupplyGrid {
        SupplyGrid::build_on(books, mu_exact, 1, Vec::new())
    }

    fn build_on(
        books: &OrderBooks,
        mu_exact: Fraction,
        threads: usize,
        mut values: Vec<AtomicU32>,
    ) -> SupplyGrid {
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
            offers: books.offer_count(),
        };
        let indexes: Vec<usize> = (0..books.pairs().len()).collect();
        let tables = walras_par::map_in_order(&indexes, threads, 64, |index| {
            grid.pair_table(books, &books.pairs()[*index], *index)
        });
        let mut points = 0u32;
        for mut table in tables {
            table.values_start = points;
            points += table.points;
            grid.tables.push(table);
        }
        values.clear();
        values.resize_with(points as usize, || AtomicU32::new(UNSET));
        grid.values = values;
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

    /// Smoothed supply of pair `index` of `books` (the books the table was built for) at
    /// `rate`, or `None` outside the pair's table.
    #[inline]
    pub fn supply(&self, books: &OrderBooks, index: usize, rate: f64) -> Option<f64> {
        debug_assert_eq!(
            books.offer_count(),
            self.offers,
            "a table read with other books"
        );
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
        let low = self.value(books, index, at, key);
        let high = self.value(books, index, at + 1, key + 1);
        Some(low + (high - low) * weight)
    }

    /// Entry `at` of the table, grid point `key` of pair `index`: read, or computed and kept.
    #[inline]
    fn value(&self, books: &OrderBooks, index: usize, at: usize, key: u64) -> f64 {
        let bits = self.values[at].load(Ordering::Relaxed);
        if bits != UNSET {
            return f32::from_bits(bits) as f64;
        }
        let rate = f64::from_bits(key << self.shift);
        let value = supply_at(books, &books.pairs()[index], rate, self.mu) as f32;
        // Any thread computing this entry computes these bits: no ordering needed.
        self.values[at].store(value.to_bits(), Ordering::Relaxed);
        value as f64
    }

    /// Prefetch hint: the address a query of pair `index` at `rate` will read.
    #[inline]
    pub fn address(&self, index: usize, rate: f64) -> *const f32 {
        let table = &self.tables[index];
        let offset = ((rate.to_bits() >> self.shift).wrapping_sub(table.first_key))
            .min(table.points.saturating_sub(1) as u64);
        self.values
            .as_ptr()
            .wrapping_add(table.values_start as usize + offset as usize) as *const f32
    }

    /// One pair's table (`values_start` is set where its values are placed): its window
    /// around the median limit, from three offers and the pair's total.
    fn pair_table(&self, books: &OrderBooks, pair: &PairBook, index: usize) -> PairTable {
        let chunks = books.chunks(pair);
        let last = &chunks[chunks.len() - 1];
        let lowest = chunks[0].limits()[0];
        let median = books.offer_at(pair, pair.len() / 2).min_price.to_f64();
        let highest = last.limits()[last.limits().len() - 1] / (1.0 - self.mu);
        let half = MAX_POINTS_PER_PAIR / 2;
        let key = |rate: f64| rate.to_bits() >> self.shift;
        let first_key = key(lowest).max(key(median).saturating_sub(half));
        let last_key = (key(highest) + 1).min(key(median) + half);
        PairTable {
            nothing_below_key: key(lowest),
            // Grid point key(highest) + 1 exceeds highest = l_max / (1 − μ), and so does any
            // rate with a larger key: every offer is below (1 − μ) · rate.
            everything_from_key: key(highest) + 1,
            total: books.pair_totals(index).amount,
            first_key,
            points: (last_key - first_key + 1) as u32,
            values_start: 0,
        }
    }
}

/// Float sums of the pair's offers whose limit (as `f64`) passes `passes`, a prefix of the
/// canonical order: the last chunk whose first limit passes, then inside it.
fn sums_where(books: &OrderBooks, pair: &PairBook, passes: impl Fn(f64) -> bool) -> PrefixSums {
    let chunks = books
        .chunk_first_limits_f64(pair)
        .partition_point(|limit| passes(*limit));
    if chunks == 0 {
        return PrefixSums::default();
    }
    let within = books.chunks(pair)[chunks - 1]
        .limits()
        .partition_point(|limit| passes(*limit));
    books.sums_through_offer(pair, chunks - 1, within)
}

/// Smoothed supply of one pair at `rate`, in units of the sold asset.
fn supply_at(books: &OrderBooks, pair: &PairBook, rate: f64, mu: f64) -> f64 {
    let threshold = rate * (1.0 - mu);
    let high = sums_where(books, pair, |limit| limit <= rate);
    let low = sums_where(books, pair, |limit| limit < threshold);
    let band_amount = high.amount - low.amount;
    let band_amount_limit = high.amount_limit - low.amount_limit;
    let partial = if band_amount > 0.0 {
        ((rate * band_amount - band_amount_limit) / (rate * mu)).clamp(0.0, band_amount)
    } else {
        0.0
    };
    low.amount + partial
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
            if let Some(supply) = grid.supply(&books, 0, rate) {
                let exact = supply_by_definition(&offers, rate, mu);
                                // Per kink inside one cell the error is at most amount / (4 · points per μ); a cell
                // here holds a few kinks at most.
                prop_assert!((supply - exact).abs() <= 0.5 * largest + 1e-6 * exact,
                    "rate {}: table {} exact {}", rate, supply, exact);
            }
        }
    }

    /// Tabulating pairs on several threads gives the table one thread gives, and its entries
    /// read the same whatever order they were first read in (each is computed when first read).
    #[test]
    fn the_table_is_the_same_for_any_thread_count_and_reading_order() {
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
        let rates: Vec<f64> = (0..400).map(|i| 0.4 + i as f64 * 0.004).collect();
        let forward: Vec<Option<f64>> = rates
            .iter()
            .map(|rate| one.supply(&books, 0, *rate))
            .collect();
        let backward: Vec<Option<f64>> = rates
            .iter()
            .rev()
            .map(|rate| two.supply(&books, 0, *rate))
            .collect();
        assert!(forward.iter().filter(|supply| supply.is_some()).count() > 300);
        assert!(
            forward.iter().eq(backward.iter().rev()),
            "entries depend on reading order"
        );
        assert_eq!(format!("{one:?}"), format!("{two:?}"));
    }

    /// A table built in another table's allocation, after that one computed entries, is the
    /// table built afresh: every entry starts unset, whatever the allocation held.
    #[test]
    fn a_table_built_in_a_used_allocation_is_the_table_built_afresh() {
        let mu = Fraction::power_of_two(10);
        let wide = book_of(&[0.5, 1.0, 3.0, 7.0]);
        let old = SupplyGrid::for_mu(&wide, mu).unwrap();
        let rates: Vec<f64> = (0..200).map(|i| 0.4 + i as f64 * 0.04).collect();
        let read = |grid: &SupplyGrid, books: &OrderBooks| -> Vec<Option<f64>> {
            rates
                .iter()
                .map(|rate| grid.supply(books, 0, *rate))
                .collect()
        };
        read(&old, &wide);
        let values = old.into_values();
        assert!(values.iter().any(|v| v.load(Ordering::Relaxed) != UNSET));
        // Whatever it holds: every entry an answer (of other books).
        for value in &values {
            value.store(1.0f32.to_bits(), Ordering::Relaxed);
        }
        let allocation = values.as_ptr();
        let narrow = book_of(&[1.0, 1.001, 1.002]);
        let reused = SupplyGrid::for_mu_reusing(&narrow, mu, 1, values).unwrap();
        assert!(reused.values.len() < 100);
        assert_eq!(reused.values.as_ptr(), allocation, "the allocation is kept");
        let fresh = SupplyGrid::for_mu(&narrow, mu).unwrap();
        // Equal before any entry is computed (every one unset), the same answers, and equal
        // again once reading has filled the entries it reached.
        assert_eq!(format!("{reused:?}"), format!("{fresh:?}"));
        assert_eq!(read(&reused, &narrow), read(&fresh, &narrow));
        assert_eq!(format!("{reused:?}"), format!("{fresh:?}"));
    }

    fn book_of(limits: &[f64]) -> OrderBooks {
        OrderBooks::build(offers_with(limits, |_| 10), 2, 1).unwrap()
    }

    #[test]
    fn extremes_are_exact_and_far_rates_have_no_answer() {
        let mu = 2f64.powi(-10);
        let books = book_of(&[1.0]);
        let grid = SupplyGrid::build(&books, Fraction::power_of_two(10));
        assert_eq!(
            grid.supply(&books, 0, 0.5),
            Some(0.0),
            "below every limit nothing is supplied"
        );
        assert_eq!(
            grid.supply(&books, 0, 2.0),
            Some(10.0),
            "far above, everything is"
        );
        let at = grid.supply(&books, 0, 1.0005).unwrap();
        assert!((at - 10.0 * 0.0005 / mu / 1.0005).abs() < 0.2, "{at}");
        // Limits 1 and 100: the table covers about ±2× around the median (100); a rate of 10
        // is inside the pair's range but outside its table.
        let books = book_of(&[1.0, 100.0]);
        let grid = SupplyGrid::build(&books, Fraction::power_of_two(10));
        assert_eq!(grid.supply(&books, 0, 10.0), None);
        assert!(grid.supply(&books, 0, 100.02).is_some());
    }

    /// Regression: a rate whose key is exactly one below the table's first key made
    /// `offset + 1` overflow (a panic with overflow checks, which killed a node's block
    /// producer under the load generator; a read of the wrong table's value without them).
    #[test]
    fn a_rate_one_cell_below_the_table_has_no_answer() {
        let books = book_of(&[1.0, 100.0]);
        let grid = SupplyGrid::build(&books, Fraction::power_of_two(10));
        let table = grid.tables[0];
        assert!(
            table.first_key > table.nothing_below_key,
            "the table starts above the lowest limit"
        );
        let just_below = f64::from_bits((table.first_key - 1) << grid.shift);
        assert_eq!(grid.supply(&books, 0, just_below), None);
        let first = f64::from_bits(table.first_key << grid.shift);
        assert!(grid.supply(&books, 0, first).is_some());
    }
}
