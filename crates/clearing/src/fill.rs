//! What one offer sells and receives at its pair's rate: the single rule every path uses
//! (settlement, a follower checking a header, execution, the explanation tracer).
//!
//! At a pair whose exchange rate is `r` (a Q48.80 [`Price`]) an offer selling `s` units receives
//! `floor(s · P)`, with the payout rate `P = floor(r · (1 − ε))`. Its limit promise is made on
//! those integers: `received ≥ s · limit · (1 − ε)`, exactly. With `ε = e / 2^64` (a
//! [`Fraction`]) and `limit = l / 2^80` that is
//!
//! ```text
//! received · 2^144 ≥ s · l · (2^64 − e)          (256-bit integers, no rounding)
//! ```
//!
//! The floors can break it for a small `s` even when `r ≥ limit`: 50 units at a limit of 0.0095
//! get `floor(0.475…) = 0`. [`PayoutTerms::sale`] therefore sells the largest amount up to what is
//! asked whose rounded payout still meets the limit, and the offer keeps the rest:
//!
//! - the whole amount when it meets the limit (every offer not near its limit or not tiny);
//! - otherwise, with `L' = limit · (1 − ε)`, every `s` in `[ceil(k / P), floor(k / L')]` is paid
//!   at least `k ≥ s · L'`; payout levels `k` are searched downward from `floor(wanted · P)`
//!   ([`SEARCH_STEPS`] of them; when `P ≥ 1` amounts are searched downward instead, as they are
//!   the finer grain). The first hit is the exact largest amount;
//! - when the search ends without a hit after covering every level (or amount) down to 1, no
//!   amount meets the limit and the sale is 0;
//! - when it ends without a hit otherwise, the largest multiple of the smallest amount that meets
//!   the limit (the denominator of the simplest fraction in `[L', P]`, found by continued
//!   fractions): multiples of a fraction in `[L', P]` stay in it, so this meets the limit and is
//!   less than that smallest amount below the exact largest.
//!
//! So an offer trades exactly when some amount up to what it holds meets its limit, and an offer
//! too small to trade at its limit does not trade.
//!
//! What a fill leaves is dust when no part of it can be paid its limit in whole units at the
//! rate and it is worth at most [`DUST_PAYOUT_UNITS_MAX`] units of the bought asset there: an
//! offer whose limit sits within a hair of the rate sells all but a unit or two, and that rest
//! could stay in the money for good, walked by every later settlement and shown at the top of
//! its book. [`PayoutTerms::returned_rest`] closes such an offer and returns the rest to its
//! account. A larger rest that cannot sell at this rate (an offer at the money) stays: a rate a
//! hair higher sells it.

use ethnum::U256;
use walras_types::{Fraction, Price};

/// Payout levels (or amounts, when the payout rate is at least 1) searched below the whole
/// amount before falling back to multiples of the smallest amount that meets the limit.
pub(crate) const SEARCH_STEPS: u64 = 64;

/// The most a fill's rest may be worth at the rate (`floor(rest · payout rate)`, in units of
/// the bought asset) and still be dust, returned to its account when it cannot sell there.
/// A rest worth `V` units can be kept from trading only by rates within about `1 / V` of its
/// limit, so 15 units covers the rests of one or two units that near-limit fills leave without
/// closing an offer at the money.
pub const DUST_PAYOUT_UNITS_MAX: u128 = 15;

/// The terms every offer of one pair trades on in one settlement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PayoutTerms {
    rate: Price,
    payout_rate: Price,
    epsilon: Fraction,
}

/// What one offer sells and receives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sale {
    pub sold: u64,
    /// `floor(sold · payout rate)`.
    pub received: u128,
}

impl Sale {
    pub const NONE: Sale = Sale {
        sold: 0,
        received: 0,
    };
}

impl PayoutTerms {
    /// The terms at exchange rate `rate` with commission `epsilon`.
    pub fn new(rate: Price, epsilon: Fraction) -> PayoutTerms {
        PayoutTerms {
            rate,
            payout_rate: rate.discounted_floor(epsilon),
            epsilon,
        }
    }

    pub fn rate(&self) -> Price {
        self.rate
    }

    /// `floor(rate · (1 − ε))`.
    pub fn payout_rate(&self) -> Price {
        self.payout_rate
    }

    pub fn epsilon(&self) -> Fraction {
        self.epsilon
    }

    /// What selling `sold` pays: `floor(sold · payout rate)`.
    pub fn payout(&self, sold: u64) -> u128 {
        self.payout_rate.mul_amount_floor(sold)
    }

    /// Whether receiving `received` for `sold` meets `limit` after the commission, exactly:
    /// `received · 2^144 ≥ sold · limit_raw · (2^64 − ε_raw)`.
    pub fn meets_limit(&self, limit: Price, sold: u64, received: u128) -> bool {
        // sold · limit < 2^64 · 2^48: any payout of 2^112 or more meets every limit (and would
        // overflow the shift below).
        if received >> 112 != 0 {
            return true;
        }
        let kept = (1u128 << 64) - u128::from(self.epsilon.0); // ≤ 2^64
                                                               // sold · kept < 2^128; one 128 × 128 multiplication in 256 bits (the hot path: every
                                                               // offer in the money is checked once).
        let owed = U256::from(u128::from(sold) * kept) * U256::from(limit.0);
        U256::from(received) << 144u32 >= owed
    }

    /// THE rule: what an offer with `limit` sells and receives when asked to sell at most
    /// `wanted`. Nothing above the rate; otherwise the largest amount (see the module docs for
    /// when it is the near-largest) whose payout meets the limit exactly.
    pub fn sale(&self, limit: Price, wanted: u64) -> Sale {
        if wanted == 0 || limit > self.rate {
            return Sale::NONE;
        }
        let sold = if self.meets_limit(limit, wanted, self.payout(wanted)) {
            wanted
        } else {
            self.largest_meeting_limit(limit, wanted)
        };
        let sale = Sale {
            sold,
            received: self.payout(sold),
        };
        debug_assert!(self.meets_limit(limit, sale.sold, sale.received));
        sale
    }

    /// THE rest rule: what an offer holding `amount` with `limit`, that sold `sold` at these
    /// terms, gets back as its offer closes. The rest `amount − sold` is returned when the
    /// offer sold something, the rest can sell nothing at these terms ([`PayoutTerms::sale`]
    /// sells none of it) and it is worth at most [`DUST_PAYOUT_UNITS_MAX`] units of the bought
    /// asset at the rate; otherwise 0, and the rest stays on the book.
    ///
    /// An offer that sold nothing keeps all it holds. So a returned rest is always smaller
    /// than what the offer sold: `sold` met the limit, and the rest is below the smallest
    /// amount that does. Panics (a bug in the caller) when `sold` is a sale that did not meet
    /// the limit and the rest is not below it: every fill a settlement, a follower or the
    /// tracer makes meets its limit, and settlement checks that as a postcondition.
    pub fn returned_rest(&self, limit: Price, amount: u64, sold: u64) -> u64 {
        if sold == 0 || sold >= amount {
            return 0;
        }
        let rest = amount - sold;
        if self.payout(rest) > DUST_PAYOUT_UNITS_MAX || self.sale(limit, rest).sold > 0 {
            return 0;
        }
        assert!(
            rest < sold,
            "a returned rest ({rest}) is below the {sold} the offer sold at its limit"
        );
        rest
    }

    /// The largest `s < wanted` meeting `limit` (near-largest after a fruitless search); 0 if
    /// none does. `limit` is positive here (a zero limit is met by every amount).
    fn largest_meeting_limit(&self, limit: Price, wanted: u64) -> u64 {
        let p = self.payout_rate.0;
        if p == 0 {
            return 0; // every payout is 0 and the limit is positive
        }
        // L' · 2^144, with L' = limit · (1 − ε).
        let owed_rate =
            U256::from(limit.0) * U256::from((1u128 << 64) - u128::from(self.epsilon.0));
        // `exhaustive`: the search covered every payout level from 1 (or every amount from 1),
        // so finding nothing proves that no amount up to `wanted` meets the limit. Dust (an
        // offer of a few units near its limit) ends here instead of in the continued fractions
        // below, 10–40 times dearer (examples/dust_sale.rs).
        let (found, exhaustive) = if p < Price::ONE.0 {
            (
                self.search_payout_levels(owed_rate, wanted),
                self.payout(wanted) <= u128::from(SEARCH_STEPS),
            )
        } else {
            let found = (wanted.saturating_sub(SEARCH_STEPS)..wanted)
                .rev()
                .take_while(|s| *s > 0)
                .find(|s| self.meets_limit(limit, *s, self.payout(*s)));
            (found, wanted <= SEARCH_STEPS + 1)
        };
        if let Some(sold) = found {
            return sold;
        }
        if exhaustive {
            return 0;
        }
        match smallest_amount(owed_rate, p) {
            Some(smallest) if smallest <= U256::from(wanted) => {
                let smallest = smallest.as_u64(); // ≤ wanted
                wanted / smallest * smallest
            }
            _ => 0,
        }
    }

    /// Payout levels `k` from `floor(wanted · P)` down: the first with an amount `s ≤ wanted`
    /// in `[ceil(k / P), floor(k / L')]` gives the largest such `s`.
    fn search_payout_levels(&self, owed_rate: U256, wanted: u64) -> Option<u64> {
        let p = U256::from(self.payout_rate.0);
        let top = self.payout(wanted); // < 2^64 since P < 1
        let bottom = top.saturating_sub(u128::from(SEARCH_STEPS) - 1).max(1);
        (bottom..=top).rev().find_map(|level| {
            let level = U256::from(level);
            let most = ((level << 144u32) / owed_rate).min(U256::from(wanted));
            let least = ((level << Price::FRAC_BITS) + p - 1) / p;
            (least <= most).then(|| most.as_u64())
        })
    }
}

/// The smallest amount `s` with some `k / s` in `[L', P]` (`L' = owed_rate / 2^144`,
/// `P = payout_rate / 2^80`), i.e. the smallest positive amount meeting the limit; `None` when
/// `L' > P`.
fn smallest_amount(owed_rate: U256, payout_rate: u128) -> Option<U256> {
    let (a, b) = (owed_rate, U256::ONE << 144u32);
    let (c, d) = (U256::from(payout_rate), U256::ONE << Price::FRAC_BITS);
    if a * d > c * b {
        return None; // a < 2^192, d = 2^80; c < 2^128, b = 2^144: both products fit
    }
    Some(simplest_fraction(a, b, c, d).1)
}

/// The simplest fraction `(numerator, denominator)` in the closed interval `[a/b, c/d]`
/// (`0 ≤ a/b ≤ c/d`, `b, d > 0`): the one with the smallest denominator (and numerator).
/// Continued fractions: each level strictly lowers both denominators, so the depth is that of
/// Euclid's algorithm on them (under 300 for 2^144).
fn simplest_fraction(a: U256, b: U256, c: U256, d: U256) -> (U256, U256) {
    let whole = a / b;
    if whole * b == a {
        return (whole, U256::ONE);
    }
    if (whole + 1) * d <= c {
        return (whole + 1, U256::ONE);
    }
    // Both ends lie in (whole, whole + 1): x = whole + 1/y with y in [d/(c − whole·d), b/(a − whole·b)].
    let (numerator, denominator) = simplest_fraction(d, c - whole * d, b, a - whole * b);
    (whole * numerator + denominator, numerator)
}

/// Why a pair's amount cannot be shared among its offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnmetLimit {
    /// Position of the offer (in the walk) where the amount ends.
    pub offer_index: usize,
    /// What it would have to sell.
    pub sold: u64,
}

/// How a pair's amount is shared among its offers, walked in canonical order: each offer sells
/// what [`PayoutTerms::sale`] allows of its whole amount (its capacity) while the amount lasts;
/// the offer where it ends sells the rest, which must itself meet its limit.
#[derive(Clone, Copy, Debug)]
pub struct FillWalk {
    terms: PayoutTerms,
    left: u64,
    offers: usize,
}

impl FillWalk {
    pub fn new(terms: PayoutTerms, total: u64) -> FillWalk {
        FillWalk {
            terms,
            left: total,
            offers: 0,
        }
    }

    /// What the next offer (`limit`, holding `amount`) sells and receives.
    pub fn next(&mut self, limit: Price, amount: u64) -> Result<Sale, UnmetLimit> {
        if self.left == 0 {
            self.offers += 1;
            return Ok(Sale::NONE);
        }
        let capacity = self.terms.sale(limit, amount);
        self.next_of_capacity(limit, capacity)
    }

    /// The same when the offer's capacity, `terms.sale(limit, amount)`, is already known (a
    /// settlement computes every capacity once, for its bounds).
    pub fn next_of_capacity(&mut self, limit: Price, capacity: Sale) -> Result<Sale, UnmetLimit> {
        let index = self.offers;
        self.offers += 1;
        if self.left == 0 {
            return Ok(Sale::NONE);
        }
        if capacity.sold <= self.left {
            self.left -= capacity.sold;
            return Ok(capacity);
        }
        let rest = Sale {
            sold: self.left,
            received: self.terms.payout(self.left),
        };
        if !self.terms.meets_limit(limit, rest.sold, rest.received) {
            return Err(UnmetLimit {
                offer_index: index,
                sold: rest.sold,
            });
        }
        self.left = 0;
        Ok(rest)
    }

    /// What is still to be sold.
    pub fn left(&self) -> u64 {
        self.left
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn terms(rate: &str, epsilon: Fraction) -> PayoutTerms {
        PayoutTerms::new(Price::parse_limit(rate).unwrap(), epsilon)
    }

    /// Every amount up to `wanted` meeting the limit, by brute force.
    fn largest_by_brute_force(terms: &PayoutTerms, limit: Price, wanted: u64) -> u64 {
        (1..=wanted)
            .rev()
            .find(|s| terms.meets_limit(limit, *s, terms.payout(*s)))
            .unwrap_or(0)
    }

    /// Trigger: 50 units at a limit of 0.0095 traded at a rate a little above it were paid
    /// `floor(50 · 0.0095…) = 0`.
    #[test]
    fn fifty_units_at_a_limit_of_0_0095_do_not_trade_for_nothing() {
        let limit = Price::parse_limit("0.0095").unwrap();
        let terms = terms("0.00951", Fraction::power_of_two(15));
        let sale = terms.sale(limit, 50);
        assert_eq!(sale, Sale::NONE, "50 units cannot be paid 0.475 or more");
    }

    #[test]
    fn the_meets_limit_inequality_is_exact_at_its_edge() {
        // limit 1/2, ε = 0: 2 units owe exactly 1.
        let half = Price(Price::ONE.0 / 2);
        let terms = PayoutTerms::new(Price::ONE, Fraction::ZERO);
        assert!(terms.meets_limit(half, 2, 1));
        assert!(!terms.meets_limit(half, 3, 1));
        assert!(terms.meets_limit(Price(0), 5, 0));
    }

    #[test]
    fn simplest_fractions_match_a_brute_force_search() {
        for (a, b, c, d) in [
            (1u32, 3, 1, 2),
            (2, 7, 3, 10),
            (5, 1, 11, 2),
            (3, 8, 3, 8),
            (0, 1, 1, 9),
        ] {
            let (n, m) = simplest_fraction(a.into(), b.into(), c.into(), d.into());
            let denominator = (1u32..100)
                .find(|s| {
                    let least = (a * s).div_ceil(b);
                    least * d <= c * s
                })
                .unwrap();
            assert_eq!(m, U256::from(denominator), "[{a}/{b}, {c}/{d}]");
            assert!(
                n * U256::from(b) >= U256::from(a) * m && n * U256::from(d) <= U256::from(c) * m
            );
        }
    }

    proptest! {
        /// The sale meets the limit exactly, never exceeds what is asked, is the exact largest
        /// when the search finds it, and otherwise within the smallest meeting amount of it.
        #[test]
        fn a_sale_is_the_largest_amount_meeting_the_limit(
            rate_raw in (Price::ONE.0 / 2000)..(Price::ONE.0 * 3),
            below_ppm in 0u128..2000,
            wanted in 1u64..3000,
            epsilon_shift in 8u32..40,
        ) {
            let terms = PayoutTerms::new(Price(rate_raw), Fraction::power_of_two(epsilon_shift));
            let limit = Price(rate_raw - rate_raw / 1_000_000 * below_ppm);
            let sale = terms.sale(limit, wanted);
            prop_assert!(sale.sold <= wanted);
            prop_assert_eq!(sale.received, terms.payout(sale.sold));
            prop_assert!(terms.meets_limit(limit, sale.sold, sale.received));
            let best = largest_by_brute_force(&terms, limit, wanted);
            prop_assert!(sale.sold <= best);
            prop_assert_eq!(sale.sold > 0, best > 0, "trades exactly when some amount meets");
            if sale.sold < best {
                let (owed, p) = (
                    U256::from(limit.0) * U256::from((1u128 << 64) - u128::from(terms.epsilon.0)),
                    terms.payout_rate.0,
                );
                let smallest = smallest_amount(owed, p).unwrap().as_u64();
                prop_assert!(best - sale.sold < smallest);
            }
        }

        /// The rest rule returns all of a fill's rest or none of it; what it returns is dust
        /// (no part of it sells at the rate, worth at most the dust bound there) and less than
        /// what the offer sold; what it keeps on the book can sell at the rate or is worth more
        /// than the bound. Fills are drawn as the fill rule makes them: an offer's capacity, or
        /// the part of it where a pair's amount ends that meets the limit.
        #[test]
        fn the_rest_rule_returns_only_dust_and_less_than_was_sold(
            rate_raw in (Price::ONE.0 / 2000)..(Price::ONE.0 * 3),
            below_ppm in 0u128..2000,
            amount in 1u64..5000,
            left in 1u64..5000,
            epsilon_shift in 8u32..40,
        ) {
            let terms = PayoutTerms::new(Price(rate_raw), Fraction::power_of_two(epsilon_shift));
            let limit = Price(rate_raw - rate_raw / 1_000_000 * below_ppm);
            let mut walk = FillWalk::new(terms, left);
            let Ok(sale) = walk.next(limit, amount) else {
                return Ok(()); // the pair's amount cannot end inside this offer
            };
            let returned = terms.returned_rest(limit, amount, sale.sold);
            let rest = amount - sale.sold;
            prop_assert!(returned == 0 || returned == rest);
            let dust = terms.sale(limit, rest).sold == 0
                && terms.payout(rest) <= DUST_PAYOUT_UNITS_MAX;
            prop_assert_eq!(returned > 0, sale.sold > 0 && rest > 0 && dust);
            if returned > 0 {
                prop_assert!(returned < sale.sold);
            }
        }
    }

    /// Small amounts near their limit, where the search often covers every payout level (or
    /// amount) down to 1 and its miss alone decides that nothing sells: an offer sells nothing
    /// exactly when no amount up to its own meets its limit (brute force), and never more than
    /// the largest that does. Rates below and above 1, limits from the rate to 2,000 ppm below.
    #[test]
    fn dust_sales_match_a_brute_force_search() {
        let mut zero = 0;
        for rate_text in [
            "0.0101", "0.37", "0.98", "0.999999", "1", "1.37", "3.5", "250",
        ] {
            let rate = Price::parse_limit(rate_text).unwrap();
            for epsilon_shift in [10, 15, 30] {
                let terms = PayoutTerms::new(rate, Fraction::power_of_two(epsilon_shift));
                for below_ppm in [0u128, 1, 3, 10, 40, 200, 2000] {
                    let limit = Price(rate.0 - rate.0 / 1_000_000 * below_ppm);
                    for wanted in 1..=200u64 {
                        let sale = terms.sale(limit, wanted);
                        let best = largest_by_brute_force(&terms, limit, wanted);
                        let case = format!(
                            "rate {rate_text}, 2^-{epsilon_shift}, {below_ppm} ppm, {wanted}"
                        );
                        assert_eq!(sale.sold == 0, best == 0, "{case}");
                        assert!(sale.sold <= best, "{case}");
                        assert!(terms.meets_limit(limit, sale.sold, sale.received), "{case}");
                        zero += usize::from(sale.sold == 0);
                    }
                }
            }
        }
        assert!(zero > 1_000, "the grid reaches the exhaustive miss: {zero}");
    }

    /// A near-limit fill's rest of one unit at a rate below 1 is returned; a large rest that
    /// cannot sell at the rate only because the offer is at the money stays on the book.
    #[test]
    fn a_unit_rest_is_returned_and_a_rest_at_the_money_is_kept() {
        let epsilon = Fraction::power_of_two(15);
        let rate = Price::parse_limit("0.98").unwrap();
        let terms = PayoutTerms::new(rate, epsilon);
        // 1 unit pays floor(0.98 · (1 − ε)) = 0: it can never meet a positive limit here.
        assert_eq!(terms.payout(1), 0);
        let limit = Price::parse_limit("0.97").unwrap();
        assert_eq!(terms.sale(limit, 999).sold, 999);
        assert_eq!(terms.returned_rest(limit, 1_000, 999), 1);
        assert_eq!(
            terms.returned_rest(limit, 1, 0),
            0,
            "an offer that sold nothing"
        );
        assert_eq!(terms.returned_rest(limit, 1_000, 1_000), 0, "nothing left");
        // At the money (limit = rate): no amount below 2^15 is paid its limit in whole units.
        let rest = 5_000;
        assert_eq!(terms.sale(rate, rest).sold, 0);
        assert!(terms.payout(rest) > DUST_PAYOUT_UNITS_MAX);
        assert_eq!(terms.returned_rest(rate, 2 * rest, rest), 0);
    }
}
