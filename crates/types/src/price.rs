//! Fixed-point prices, valuations and fractions.
//!
//! # Prices
//!
//! [`Price`] is an unsigned Q48.80 number: `raw / 2^80`, stored in a `u128` (48 integer bits,
//! 80 fractional bits). One unit in the last place (ulp) is 2^-80 ≈ 8.3e-25.
//!
//! Accepted limit prices are the decimals from 10^-12 to 10^12 inclusive
//! ([`Price::MIN_LIMIT_TEXT`]..=[`Price::MAX_LIMIT_TEXT`]). The range is symmetric: a decimal `r`
//! is accepted exactly when `1/r` is, so a pair that trades near 10^11 can be quoted in both
//! directions. The check is made on the exact decimal the owner wrote, before any rounding.
//!
//! Resolution over that range (relative size of one ulp):
//!
//! | value   | ulp / value | significant digits kept |
//! |---------|-------------|-------------------------|
//! | 10^-12  | 8.3e-13     | 12                      |
//! | 1       | 8.3e-25     | 24                      |
//! | 10^12   | 8.3e-37     | 36                      |
//!
//! so at least 12 significant decimal digits survive everywhere in the accepted range; the
//! contract asks for 9. The integer part leaves headroom to 2^48 ≈ 2.8e14 for exchange rates
//! (below).
//!
//! Decimal input is converted exactly (digit strings of up to [`MAX_SIGNIFICANT_DIGITS`]
//! significant digits, 256-bit intermediates) and a limit is rounded *up* to the next
//! representable value: an offer's stored limit is never below the one its owner wrote, so
//! "trades only at or above the limit" holds for the written decimal too. Conversely
//! [`Price::to_exact_decimal`] writes the shortest decimal that parses back to the same raw value,
//! and every raw value in [`Price::MIN_LIMIT`]..=[`Price::MAX_LIMIT`] writes a decimal inside the
//! accepted range.
//!
//! # Valuations and exchange rates
//!
//! [`Valuation`] is a positive `u128`; only ratios of valuations matter. Clearing normalises
//! valuations so the largest is [`Valuation::NORMALIZED_MAX`] = 2^126 ≈ 8.5e37. An asset `k` times
//! cheaper than the most valuable one is held as about `8.5e37 / k`, so it keeps
//! `log10(8.5e37 / k)` significant digits: 13 digits at `k` = 10^24 (valuations spanning
//! 10^-12..10^12), and at least 9 digits for every `k` up to 8.5e28.
//!
//! The exchange rate of selling S for B is `floor(p_S · 2^80 / p_B)` as a [`Price`], computed
//! exactly with a 256-bit intermediate ([`Valuation::rate_to`]). Its error is below one ulp, so a
//! rate keeps the digits of the table above (relative error under 8.3e-13 for any rate at or
//! above 10^-12, the smallest limit it is ever compared with). A rate of 2^48 or more does not fit
//! and saturates at [`Price::MAX_RATE`] (2^48 − 2^-80); that happens only when `p_S / p_B` is
//! above 2.8e14, where every offer of the pair (limits at most 10^12) is in the money at both the
//! true and the saturated rate, even after the μ discount for any μ below 0.99.
//!
//! # Why the roundings are safe
//!
//! Every rounding favours the auctioneer, so conservation never depends on a rounding going the
//! right way:
//! - limits are parsed rounding up (an offer never trades below what its owner wrote);
//! - rates are rounded down, and saturate downwards (an offer is paid at most its valuation
//!   ratio);
//! - the commission and μ discounts ([`Price::discounted_floor`]) and payouts
//!   ([`Price::mul_amount_floor`]) are floored.
//!
//! # Fractions
//!
//! [`Fraction`] is a Q0.64 number in [0, 1), used for the commission ε and the smoothing width μ.

use ethnum::U256;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Decimals with more significant digits than this are refused (nobody writes a price with 50
/// digits; the limit keeps every conversion exact within 256 bits). The shortest exact decimal
/// of any `u128` price has at most 40.
pub const MAX_SIGNIFICANT_DIGITS: usize = 50;

/// Why a decimal string is not an acceptable price or fraction.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PriceError {
    /// Not a decimal number (optionally with an exponent, like `1.5e-3`).
    #[error("'{0}' is not a decimal number")]
    Malformed(String),
    /// Zero or negative.
    #[error("'{0}' must be positive")]
    NotPositive(String),
    /// More significant digits than [`MAX_SIGNIFICANT_DIGITS`].
    #[error("'{0}' has more than {max} significant digits", max = MAX_SIGNIFICANT_DIGITS)]
    TooManyDigits(String),
    /// Outside the accepted range.
    #[error("'{text}' is outside the accepted range {min}..={max}")]
    OutOfRange {
        text: String,
        min: String,
        max: String,
    },
}

/// A limit price or exchange rate: units of the bought asset per unit of the sold asset, Q48.80.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Price(pub u128);

impl Price {
    pub const FRAC_BITS: u32 = 80;
    pub const ONE: Price = Price(1u128 << Price::FRAC_BITS);
    /// The smallest accepted limit price, as written in messages.
    pub const MIN_LIMIT_TEXT: &'static str = "1e-12";
    /// The largest accepted limit price, as written in messages.
    pub const MAX_LIMIT_TEXT: &'static str = "1e12";
    /// The accepted range, as written in messages: `1e-12..=1e12`.
    pub const LIMIT_RANGE_TEXT: &'static str = "1e-12..=1e12";
    /// 10^-12, rounded up: `ceil(2^80 / 10^12)`.
    pub const MIN_LIMIT: Price = Price(1_208_925_819_615);
    /// 10^12, exactly.
    pub const MAX_LIMIT: Price = Price(1_000_000_000_000u128 << Price::FRAC_BITS);
    /// The largest price, 2^48 − 2^-80: where exchange rates saturate.
    pub const MAX_RATE: Price = Price(u128::MAX);

    /// Parses a decimal limit price (`"1.25"`, `"0.000000001"`, `"3e-7"`), checks that it lies in
    /// 10^-12..=10^12 exactly, and rounds it up to the next representable price.
    pub fn parse_limit(text: &str) -> Result<Price, PriceError> {
        let decimal = Decimal::parse(text)?;
        if decimal.mantissa == U256::ZERO {
            return Err(PriceError::NotPositive(text.to_string()));
        }
        if !decimal.is_accepted_limit() {
            return Err(PriceError::OutOfRange {
                text: text.to_string(),
                min: Price::MIN_LIMIT_TEXT.to_string(),
                max: Price::MAX_LIMIT_TEXT.to_string(),
            });
        }
        let raw = decimal
            .to_fixed(Price::FRAC_BITS, Rounding::Up)
            .expect("a decimal at most 10^12 fits Q48.80");
        Ok(Price(raw))
    }

    /// Whether the raw value lies in [`Price::MIN_LIMIT`]..=[`Price::MAX_LIMIT`], the values a
    /// parsed limit can take: what the codecs accept for an offer's limit.
    pub fn is_valid_limit(self) -> bool {
        (Price::MIN_LIMIT..=Price::MAX_LIMIT).contains(&self)
    }

    /// The price as a float, for heuristics and display only.
    pub fn to_f64(self) -> f64 {
        self.0 as f64 / TWO_TO_FRAC_BITS
    }

    /// The nearest price to a positive float (for generators and tests, never for state).
    /// Values of 2^48 or more saturate at [`Price::MAX_RATE`].
    pub fn from_f64(value: f64) -> Price {
        assert!(
            value.is_finite() && value >= 0.0,
            "price from invalid float {value}"
        );
        Price((value * TWO_TO_FRAC_BITS).round() as u128)
    }

    /// The accepted limit price nearest to a float, which may be anything (not finite or not
    /// positive gives [`Price::MIN_LIMIT`]). For generators: the result always passes
    /// [`Price::is_valid_limit`].
    pub fn nearest_limit(value: f64) -> Price {
        if !value.is_finite() || value <= 0.0 {
            return Price::MIN_LIMIT;
        }
        let clamped = value.clamp(Price::MIN_LIMIT.to_f64(), Price::MAX_LIMIT.to_f64());
        Price::from_f64(clamped).clamp(Price::MIN_LIMIT, Price::MAX_LIMIT)
    }

    /// `floor(self * (1 - fraction))`, exact.
    pub fn discounted_floor(self, fraction: Fraction) -> Price {
        Price(self.0 - crate::fixed::mul_shr_ceil(self.0, fraction.0, 64))
    }

    /// `floor(self * amount)`, exact. Below 2^112, so sums of up to 2^16 of them fit `u128`.
    #[inline]
    pub fn mul_amount_floor(self, amount: u64) -> u128 {
        crate::fixed::mul_shr_floor(self.0, amount, Price::FRAC_BITS)
    }

    /// `ceil(self * amount)`, exact.
    #[inline]
    pub fn mul_amount_ceil(self, amount: u64) -> u128 {
        crate::fixed::mul_shr_ceil(self.0, amount, Price::FRAC_BITS)
    }

    /// `floor(self * amount)`, exact; `None` if the result exceeds `u64`.
    pub fn times_amount_floor(self, amount: u64) -> Option<u64> {
        u64::try_from(self.mul_amount_floor(amount)).ok()
    }

    /// `floor(amount / self)`, exact: the most whole units that `amount` buys at this price.
    /// Saturates at `u128::MAX` (only for prices below 2^-64); `None` for a zero price.
    pub fn divide_amount_floor(self, amount: u64) -> Option<u128> {
        if self.0 == 0 {
            return None;
        }
        let quotient = (U256::from(amount) << Price::FRAC_BITS) / U256::from(self.0);
        Some(u128::try_from(quotient).unwrap_or(u128::MAX))
    }

    /// Whether `self · other ≤ 1` exactly: two offers on opposite sides of a pair, each with its
    /// own limit, can trade with each other.
    pub fn product_at_most_one(self, other: Price) -> bool {
        U256::from(self.0) * U256::from(other.0) <= U256::ONE << (2 * Price::FRAC_BITS)
    }

    /// Formats the price as a plain decimal with `significant` significant digits (rounded to
    /// nearest). Used by generators; parsing the text back rounds up to a nearby price.
    pub fn to_decimal_string(self, significant: u32) -> String {
        format_significant(self.to_f64(), significant)
    }

    /// The shortest truncated decimal that parses back (rounding up) to exactly this price.
    ///
    /// Digits of `raw / 2^80` are produced one at a time; after k fractional digits the value
    /// left over is `rest / (2^80 * 10^k)`, and the truncation parses back to `raw` exactly when
    /// that is below one unit in the last place, i.e. `rest < 10^k`. At most 25 fractional digits
    /// are needed (`rest < 2^80 < 10^25`).
    pub fn to_exact_decimal(self) -> String {
        let mut text = (self.0 >> Price::FRAC_BITS).to_string();
        let mut rest = self.0 & FRAC_MASK;
        if rest == 0 {
            return text;
        }
        text.push('.');
        let mut ten_to_k: u128 = 1;
        while rest >= ten_to_k {
            let shifted = rest * 10; // < 2^84
            text.push(char::from(b'0' + (shifted >> Price::FRAC_BITS) as u8));
            rest = shifted & FRAC_MASK;
            ten_to_k *= 10;
        }
        text
    }
}

/// 2^80 as a float, exactly.
const TWO_TO_FRAC_BITS: f64 = (1u128 << Price::FRAC_BITS) as f64;
/// The fractional bits of a raw price.
const FRAC_MASK: u128 = (1u128 << Price::FRAC_BITS) - 1;

impl fmt::Display for Price {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", format_significant(self.to_f64(), 12))
    }
}

/// A clearing valuation of one asset. Positive; only ratios between valuations are meaningful.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Valuation(pub u128);

impl Valuation {
    /// The largest raw valuation clearing produces (2^126); leaves headroom below `u128::MAX`.
    pub const NORMALIZED_MAX: u128 = 1 << 126;

    /// The exchange rate of selling `self` for `buy`: `floor(self * 2^80 / buy)`, exact, or
    /// [`Price::MAX_RATE`] if that is 2^128 or more (see the module docs).
    ///
    /// Panics if `buy` is zero; valuations are positive by construction.
    #[inline]
    pub fn rate_to(self, buy: Valuation) -> Price {
        assert!(buy.0 > 0, "valuations are positive");
        let rate = (U256::from(self.0) << Price::FRAC_BITS) / U256::from(buy.0);
        Price(u128::try_from(rate).unwrap_or(Price::MAX_RATE.0))
    }
}

/// A number in [0, 1), Q0.64: the commission ε, the smoothing width μ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Fraction(pub u64);

impl Fraction {
    pub const ZERO: Fraction = Fraction(0);

    /// 2^-exponent, for exponent in 1..=63.
    pub fn power_of_two(exponent: u32) -> Fraction {
        assert!(
            (1..=63).contains(&exponent),
            "2^-{exponent} is not a Q0.64 fraction"
        );
        Fraction(1u64 << (64 - exponent))
    }

    /// Parses a decimal in [0, 1), rounding to nearest.
    pub fn parse(text: &str) -> Result<Fraction, PriceError> {
        let decimal = Decimal::parse(text)?;
        let out_of_range = || PriceError::OutOfRange {
            text: text.to_string(),
            min: "0".to_string(),
            max: "less than 1".to_string(),
        };
        let raw = decimal
            .to_fixed(64, Rounding::Nearest)
            .ok_or_else(out_of_range)?;
        u64::try_from(raw).map(Fraction).map_err(|_| out_of_range())
    }

    pub fn to_f64(self) -> f64 {
        self.0 as f64 / 18_446_744_073_709_551_616.0
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Rounding {
    Up,
    Nearest,
}

/// A non-negative decimal exactly: `mantissa · 10^exponent`, the mantissa without trailing
/// zeros (so equal values have equal forms) and of at most [`MAX_SIGNIFICANT_DIGITS`] digits.
#[derive(Debug, PartialEq, Eq)]
struct Decimal {
    mantissa: U256,
    /// Number of decimal digits of `mantissa` (0 for zero).
    digits: i32,
    exponent: i32,
}

/// Exponents beyond this are refused as malformed; no accepted value needs them.
const MAX_EXPONENT: i32 = 400;

impl Decimal {
    /// Accepts `digits[.digits][e[+-]digits]`, surrounding spaces ignored. A leading `-` is
    /// refused as not positive unless the number is zero (then it is zero).
    fn parse(text: &str) -> Result<Decimal, PriceError> {
        let malformed = || PriceError::Malformed(text.to_string());
        let trimmed = text.trim();
        let (negative, unsigned) = match trimmed.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, trimmed),
        };
        let (number, exponent) = match unsigned.find(['e', 'E']) {
            Some(at) => {
                let exponent: i32 = unsigned[at + 1..].parse().map_err(|_| malformed())?;
                (&unsigned[..at], exponent)
            }
            None => (unsigned, 0),
        };
        let (integer_part, fraction_part) = match number.find('.') {
            Some(at) => (&number[..at], &number[at + 1..]),
            None => (number, ""),
        };
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if (integer_part.is_empty() && fraction_part.is_empty())
            || !all_digits(integer_part)
            || !all_digits(fraction_part)
            || !(-MAX_EXPONENT..=MAX_EXPONENT).contains(&exponent)
        {
            return Err(malformed());
        }
        let digits: Vec<u8> = integer_part.bytes().chain(fraction_part.bytes()).collect();
        let Some(first) = digits.iter().position(|&d| d != b'0') else {
            return Ok(Decimal {
                mantissa: U256::ZERO,
                digits: 0,
                exponent: 0,
            });
        };
        if negative {
            return Err(PriceError::NotPositive(text.to_string()));
        }
        let last = digits.iter().rposition(|&d| d != b'0').unwrap_or(first);
        let significant = &digits[first..=last];
        if significant.len() > MAX_SIGNIFICANT_DIGITS {
            return Err(PriceError::TooManyDigits(text.to_string()));
        }
        let mantissa = significant.iter().fold(U256::ZERO, |value, digit| {
            value * U256::from(10u8) + U256::from(digit - b'0')
        });
        // Trailing zeros dropped from the digits move the exponent up by one each.
        let trailing_zeros = (digits.len() - 1 - last) as i32;
        Ok(Decimal {
            mantissa,
            digits: significant.len() as i32,
            exponent: exponent - fraction_part.len() as i32 + trailing_zeros,
        })
    }

    /// Whether 10^-12 ≤ value ≤ 10^12, exactly (the value is positive). With `m` of `n` digits
    /// and no trailing zeros, value ∈ [10^(n−1+e), 10^(n+e)), and it equals 10^12 only if m = 1.
    fn is_accepted_limit(&self) -> bool {
        let magnitude = self.digits - 1 + self.exponent;
        (-12..12).contains(&magnitude) || (magnitude == 12 && self.mantissa == U256::ONE)
    }

    /// `value · 2^frac_bits` rounded as asked, or `None` if it does not fit a `u128`.
    fn to_fixed(&self, frac_bits: u32, rounding: Rounding) -> Option<u128> {
        if self.mantissa == U256::ZERO {
            return Some(0);
        }
        if self.exponent >= 0 {
            let mut integer = self.mantissa;
            for _ in 0..self.exponent {
                integer = integer.checked_mul(U256::from(10u8))?;
            }
            if integer >= U256::ONE << (128 - frac_bits) {
                return None;
            }
            return Some((integer << frac_bits).as_u128());
        }
        let divisor_exponent = (-self.exponent) as u32;
        // mantissa < 10^50 and 2^frac_bits ≤ 2^80 < 10^25, so the scaled value is below 10^75:
        // past 10^76 the quotient is 0 and below one half.
        if divisor_exponent > 76 {
            return Some((rounding == Rounding::Up) as u128);
        }
        let divisor = U256::from(10u8).pow(divisor_exponent); // ≤ 10^76 < 2^256
        let numerator = self.mantissa << frac_bits; // < 2^167 · 2^80
        let (quotient, remainder) = (numerator / divisor, numerator % divisor);
        let round_up = match rounding {
            Rounding::Up => remainder != U256::ZERO,
            Rounding::Nearest => remainder >= divisor - remainder,
        };
        u128::try_from(quotient + U256::from(round_up as u8)).ok()
    }
}

/// Plain (no exponent) decimal with `significant` significant digits.
fn format_significant(value: f64, significant: u32) -> String {
    if value == 0.0 {
        return "0".to_string();
    }
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = (significant as i32 - 1 - magnitude).max(0) as usize;
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn price_of(text: &str) -> Price {
        Price::parse_limit(text).unwrap_or_else(|error| panic!("{text}: {error}"))
    }

    /// `2^FRAC_BITS`, exactly, as a 256-bit integer.
    fn one_256() -> U256 {
        U256::ONE << Price::FRAC_BITS
    }

    #[test]
    fn parses_exact_values() {
        assert_eq!(price_of("1"), Price::ONE);
        assert_eq!(price_of("2.5"), Price(5u128 << (Price::FRAC_BITS - 1)));
        assert_eq!(price_of("0.25"), Price(1u128 << (Price::FRAC_BITS - 2)));
        assert_eq!(price_of("25e-2"), Price(1u128 << (Price::FRAC_BITS - 2)));
        assert_eq!(price_of("2500000e-7"), price_of("0.25"));
        assert_eq!(price_of(" 1.50 "), price_of("1.5"));
        assert_eq!(price_of("1000000000000"), Price::MAX_LIMIT);
        assert_eq!(price_of("1e12"), Price::MAX_LIMIT);
    }

    #[test]
    fn rounds_limit_up() {
        // 0.1 is not representable; the stored limit must not be below the written one.
        let price = price_of("0.1");
        assert!(price.0 * 10 >= Price::ONE.0);
        assert!((price.0 - 1) * 10 < Price::ONE.0);
    }

    #[test]
    fn the_range_constants_agree_with_each_other_and_with_the_messages() {
        assert_eq!(
            Price::LIMIT_RANGE_TEXT,
            format!("{}..={}", Price::MIN_LIMIT_TEXT, Price::MAX_LIMIT_TEXT)
        );
        assert_eq!(price_of(Price::MIN_LIMIT_TEXT), Price::MIN_LIMIT);
        assert_eq!(price_of(Price::MAX_LIMIT_TEXT), Price::MAX_LIMIT);
        // MIN_LIMIT is 10^-12 rounded up: one ulp less is below 10^-12.
        let ten_to_12 = U256::from(1_000_000_000_000u64);
        assert!(U256::from(Price::MIN_LIMIT.0) * ten_to_12 >= one_256());
        assert!(U256::from(Price::MIN_LIMIT.0 - 1) * ten_to_12 < one_256());
        let message = Price::parse_limit("2e12").unwrap_err().to_string();
        assert!(message.contains(Price::LIMIT_RANGE_TEXT), "{message}");
    }

    /// The failing example: a limit of 6.8e-12 (valuations spread over 10^±6) was
    /// refused when the range started at 1e-10.
    #[test]
    fn limits_down_to_one_e_minus_twelve_are_accepted() {
        let price = price_of("6.79756164e-12");
        assert!(price.is_valid_limit());
        let relative = (price.to_f64() / 6.79756164e-12 - 1.0).abs();
        assert!(relative < 2e-13, "relative error {relative}");
        for text in [
            "1e-12",
            "0.000000000001",
            "1.0e-12",
            "1e12",
            "999999999999.999999",
        ] {
            assert!(price_of(text).is_valid_limit(), "{text}");
        }
    }

    #[test]
    fn the_range_edges_are_exact() {
        for text in [
            "9.99999999999999999999999999999e-13",
            "0.000000000000999999999999999999",
            "1000000000000.00000000000000000000000000001",
            "1.000000000000000000000000000001e12",
            "1e13",
            "1e-13",
        ] {
            assert!(
                matches!(Price::parse_limit(text), Err(PriceError::OutOfRange { .. })),
                "{text} accepted"
            );
        }
    }

    #[test]
    fn rejects_bad_text() {
        for text in [
            "", ".", "abc", "1.2.3", "1e", "--1", "1,5", "0x10", "1e999", "-", "e5", "+1",
        ] {
            assert!(Price::parse_limit(text).is_err(), "{text:?} accepted");
        }
        for text in ["0", "0.000", "-3", "-0", "0e5"] {
            assert!(
                matches!(Price::parse_limit(text), Err(PriceError::NotPositive(_))),
                "{text:?}"
            );
        }
    }

    /// Trigger: a 36-digit mantissa with an exponent below -38 (here 1e35 · 1e-39 = 1e-4). The
    /// parser used to treat any divisor above 10^38 as "the value is below one ulp" and refused
    /// the limit as out of range.
    #[test]
    fn a_long_mantissa_with_a_large_negative_exponent_keeps_its_value() {
        let text = format!("1{}e-39", "0".repeat(35));
        assert_eq!(Price::parse_limit(&text), Ok(price_of("0.0001")));
    }

    /// Trigger: a limit written with more significant digits than the parser kept (36), just
    /// above a representable price. The digits past the 36th were only remembered as "inexact"
    /// and the value rounded up from the truncated digits, which could land one ulp *below* the
    /// written limit (here 1e11 + 2^-64 + 10^-86 became exactly 1e11 + 2^-64 in Q64.64). Such
    /// text is now refused rather than rounded in the owner's disfavour.
    #[test]
    fn limits_with_more_digits_than_the_parser_keeps_are_refused() {
        // 2^-64 = 5421010862427522170037264004349708557128906250 · 10^-64, exactly.
        let text = "100000000000.\
                    0000000000000000000542101086242752217003726400434970855712890625\
                    0000000000000000000001";
        let error = Price::parse_limit(text).unwrap_err();
        assert!(error.to_string().contains("significant digits"), "{error}");
    }

    #[test]
    fn fractions() {
        assert_eq!(Fraction::parse("0.5").unwrap(), Fraction(1 << 63));
        assert_eq!(
            Fraction::parse("0.000030517578125").unwrap(),
            Fraction::power_of_two(15)
        );
        assert_eq!(Fraction::parse("0").unwrap(), Fraction::ZERO);
        assert!(Fraction::parse("1").is_err());
        assert!(Fraction::parse("0.99999999999999999999999").is_err()); // rounds to 1
        assert!(Fraction::parse("-0.1").is_err());
        assert!(Fraction::parse("1e30").is_err());
    }

    #[test]
    fn rate_rounds_down() {
        let rate = Valuation(3).rate_to(Valuation(7));
        assert!(rate.0 * 7 <= 3 * Price::ONE.0);
        assert!((rate.0 + 1) * 7 > 3 * Price::ONE.0);
    }

    #[test]
    fn rates_saturate_below_the_true_value() {
        let top = Valuation(Valuation::NORMALIZED_MAX);
        assert_eq!(top.rate_to(Valuation(1)), Price::MAX_RATE);
        assert_eq!(Valuation(1 << 48).rate_to(Valuation(1)), Price::MAX_RATE);
        assert_eq!(
            Valuation((1 << 48) - 1).rate_to(Valuation(1)),
            Price(((1 << 48) - 1) << Price::FRAC_BITS)
        );
        assert_eq!(Valuation(1).rate_to(top), Price(0));
        // Saturated rates are above every limit even after a large μ discount.
        assert!(Price::MAX_RATE.discounted_floor(Fraction(u64::MAX / 100 * 99)) > Price::MAX_LIMIT);
    }

    #[test]
    fn crossing_is_exact_at_reciprocals() {
        assert!(Price::ONE.product_at_most_one(Price::ONE));
        assert!(!Price(Price::ONE.0 + 1).product_at_most_one(Price::ONE));
        assert!(
            Price::MAX_LIMIT.product_at_most_one(price_of("1e-12"))
                == (Price::MIN_LIMIT.0 * 1_000_000_000_000 <= Price::ONE.0)
        );
        assert!(!Price::MAX_RATE.product_at_most_one(Price::MAX_RATE));
    }

    /// A decimal `2^i · 5^j · 10^k` and its exact reciprocal `5^i · 2^j · 10^(-i-j-k)`.
    fn reciprocal_pair(i: u32, j: u32, k: i32) -> (String, String) {
        let a = 2u128.pow(i) * 5u128.pow(j);
        let b = 5u128.pow(i) * 2u128.pow(j);
        (
            format!("{a}e{k}"),
            format!("{b}e{}", -(i as i32) - j as i32 - k),
        )
    }

    #[test]
    fn the_range_is_symmetric_at_its_edges() {
        let cases = [
            ("1e-12", "1e12", true),
            ("1.6e-12", "6.25e11", true),
            ("8e-13", "1.25e12", false),
            ("5e-13", "2e12", false),
            ("0.5e12", "2e-12", true),
        ];
        for (r, reciprocal, accepted) in cases {
            assert_eq!(Price::parse_limit(r).is_ok(), accepted, "{r}");
            assert_eq!(
                Price::parse_limit(reciprocal).is_ok(),
                accepted,
                "{reciprocal}"
            );
        }
    }

    /// `(sell · 2^80) / buy` must floor exactly: `rate · buy ≤ sell · 2^80 < (rate + 1) · buy`.
    fn assert_exact_rate(sell: u128, buy: u128) -> Result<(), TestCaseError> {
        let rate = Valuation(sell).rate_to(Valuation(buy));
        let scaled = U256::from(sell) << Price::FRAC_BITS;
        if rate == Price::MAX_RATE {
            prop_assert!(U256::from(rate.0) * U256::from(buy) <= scaled);
        } else {
            prop_assert!(U256::from(rate.0) * U256::from(buy) <= scaled);
            prop_assert!((U256::from(rate.0) + 1) * U256::from(buy) > scaled);
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn formatted_prices_parse_back_closely_over_the_whole_range(log10 in -12.0f64..12.0) {
            let value = 10f64.powf(log10);
            let text = Price::nearest_limit(value).to_decimal_string(12);
            let parsed = Price::parse_limit(&text).unwrap();
            let relative = (parsed.to_f64() - value).abs() / value;
            prop_assert!(relative < 1e-11, "{} -> {} ({})", value, text, relative);
        }

        #[test]
        fn parse_then_exact_format_round_trips_over_the_whole_range(
            mantissa in 1u64..10_000_000_000_000, exponent in -25i32..=0,
        ) {
            let text = format!("{mantissa}e{exponent}");
            if let Ok(price) = Price::parse_limit(&text) {
                let exact = price.to_exact_decimal();
                prop_assert_eq!(Price::parse_limit(&exact), Ok(price), "{} -> {}", text, exact);
            }
        }

        #[test]
        fn exact_decimal_round_trips(raw in any::<u128>()) {
            let text = Price(raw).to_exact_decimal();
            let decimal = Decimal::parse(&text).unwrap();
            prop_assert_eq!(decimal.to_fixed(Price::FRAC_BITS, Rounding::Up), Some(raw), "{}", text);
        }

        #[test]
        fn every_valid_limit_writes_an_accepted_decimal(
            raw in prop_oneof![
                Price::MIN_LIMIT.0..=Price::MAX_LIMIT.0,
                Price::MIN_LIMIT.0..Price::MIN_LIMIT.0 + 1_000_000,
                Price::MAX_LIMIT.0 - 1_000_000..=Price::MAX_LIMIT.0,
            ],
        ) {
            let text = Price(raw).to_exact_decimal();
            prop_assert_eq!(Price::parse_limit(&text), Ok(Price(raw)), "{}", text);
        }

        #[test]
        fn nine_significant_digits_survive_at_both_ends(
            mantissa in 100_000_000u64..999_999_999, exponent in prop_oneof![-20i32..=-18, 0..=3],
        ) {
            // mantissa · 10^exponent with 9 digits: 1e-12..1e-9 and 1e8..1e12.
            let text = format!("{mantissa}e{exponent}");
            let next = format!("{}e{exponent}", mantissa + 1);
            let (price, next_price) = (price_of(&text), price_of(&next));
            prop_assert!(price < next_price, "{} and {} collide", text, next);
            // The stored value is within one ulp above the written one: 9 digits read back.
            let written = mantissa as f64 * 10f64.powi(exponent);
            let relative = (price.to_f64() - written) / written;
            prop_assert!((0.0..1e-12).contains(&relative) || relative.abs() < 1e-15, "{}: {}", text, relative);
            let shown = format!("{:.8e}", price.to_f64());
            let digits: String = shown.split('e').next().unwrap().replace('.', "");
            prop_assert_eq!(digits, mantissa.to_string(), "{} shown as {}", text, shown);
        }

        #[test]
        fn a_decimal_is_accepted_exactly_when_its_reciprocal_is(
            i in 0u32..=25, j in 0u32..=25, k in -40i32..=20,
        ) {
            let (r, reciprocal) = reciprocal_pair(i, j, k);
            prop_assert_eq!(
                Price::parse_limit(&r).is_ok(),
                Price::parse_limit(&reciprocal).is_ok(),
                "{} and {}", r, reciprocal
            );
        }

        #[test]
        fn rates_are_exact_floors_at_extreme_valuation_ratios(
            buy in 1u128..=Valuation::NORMALIZED_MAX,
            ratio_log10 in -24.0f64..24.0,
            jitter in -1000i64..=1000,
        ) {
            let sell = ((buy as f64 * 10f64.powf(ratio_log10)) as i128)
                .saturating_add(jitter as i128)
                .clamp(1, Valuation::NORMALIZED_MAX as i128) as u128;
            assert_exact_rate(sell, buy)?;
            assert_exact_rate(buy, sell)?;
        }

        #[test]
        fn rates_are_exact_floors(sell in 1u128.., buy in 1u128..) {
            assert_exact_rate(sell, buy)?;
        }

        #[test]
        fn parse_never_panics(text in "\\PC{0,40}") {
            let _ = Price::parse_limit(&text);
            let _ = Fraction::parse(&text);
        }

        #[test]
        fn numeric_text_never_panics(text in "-?[0-9]{0,60}(\\.[0-9]{0,60})?(e-?[0-9]{1,3})?") {
            let _ = Price::parse_limit(&text);
            let _ = Fraction::parse(&text);
        }

        #[test]
        fn discount_matches_exact_product(raw in any::<u128>(), fraction in any::<u64>()) {
            let kept = U256::from(raw) * (U256::ONE << 64u32) - U256::from(raw) * U256::from(fraction);
            prop_assert_eq!(Price(raw).discounted_floor(Fraction(fraction)).0, (kept >> 64u32).as_u128());
        }

        #[test]
        fn division_and_crossing_match_256_bit_arithmetic(
            raw in 1u128.., other in any::<u128>(), amount in any::<u64>(),
        ) {
            let quotient = (U256::from(amount) << Price::FRAC_BITS) / U256::from(raw);
            let expected = u128::try_from(quotient).unwrap_or(u128::MAX);
            prop_assert_eq!(Price(raw).divide_amount_floor(amount), Some(expected));
            let product = U256::from(raw) * U256::from(other);
            prop_assert_eq!(
                Price(raw).product_at_most_one(Price(other)),
                product <= one_256() * one_256()
            );
        }
    }
}
