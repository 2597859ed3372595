//! Fixed-point prices, valuations and fractions.
//!
//! # Representation
//!
//! [`Price`] is an unsigned Q64.64 number: `raw / 2^64`, stored in a `u128`. Its resolution is
//! 2^-64 ≈ 5.4e-20, so a limit price of 10^-9 still carries 11 significant decimal digits and one
//! of 10^9 carries 29; the contract asks for at least 8 over 10^-9..10^9 (the reference C++
//! implementation, with 24 fractional bits, resolves 10^-9 to zero digits). Accepted limit prices
//! span [`Price::MIN_LIMIT`]..=[`Price::MAX_LIMIT`] (10^-10..10^12); at 10^-10 one unit in the last
//! place is 5.4e-10 of the value, so 9 significant digits survive everywhere in that range.
//!
//! Decimal input is converted exactly and rounded *up* to the next representable value: an offer's
//! stored limit is never below the one its owner wrote, so "trades only at or above the limit" holds
//! for the written decimal too.
//!
//! [`Valuation`] is a positive `u64`; only ratios of valuations matter. The exchange rate of selling
//! S for B is `floor(p_S * 2^64 / p_B)` as a [`Price`] (rounded down: in the auctioneer's favour).
//! Clearing normalises valuations so the largest is about 2^62, which keeps about 18 significant
//! digits for the most valuable asset and 6 for one 10^12 times cheaper.
//!
//! [`Fraction`] is a Q0.64 number in [0, 1), used for the commission ε and the smoothing width μ.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Why a decimal string is not an acceptable price or fraction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PriceError {
    /// Not a decimal number (optionally with an exponent, like `1.5e-3`).
    Malformed(String),
    /// Zero or negative.
    NotPositive(String),
    /// Outside the accepted range.
    OutOfRange {
        text: String,
        min: String,
        max: String,
    },
}

impl fmt::Display for PriceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PriceError::Malformed(text) => write!(f, "'{text}' is not a decimal number"),
            PriceError::NotPositive(text) => write!(f, "'{text}' must be positive"),
            PriceError::OutOfRange { text, min, max } => {
                write!(f, "'{text}' is outside the accepted range {min}..={max}")
            }
        }
    }
}

impl std::error::Error for PriceError {}

/// `1e-10`, `1e12`, `2.5e-7`: a bound for a message, in at most 6 significant digits, so that
/// messages follow the constants.
fn short_decimal(value: f64) -> String {
    let text = format!("{value:.5e}");
    match text.split_once('e') {
        Some((mantissa, exponent)) => {
            let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
            format!("{mantissa}e{exponent}")
        }
        None => text,
    }
}

/// A limit price or exchange rate: units of the bought asset per unit of the sold asset, Q64.64.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Price(pub u128);

impl Price {
    pub const FRAC_BITS: u32 = 64;
    pub const ONE: Price = Price(1u128 << 64);
    /// 10^-10, rounded up.
    pub const MIN_LIMIT: Price = Price(1_844_674_408);
    /// 10^12.
    pub const MAX_LIMIT: Price = Price(1_000_000_000_000u128 << 64);

    /// Parses a decimal limit price (`"1.25"`, `"0.000000001"`, `"3e-7"`), rounding up, and checks
    /// it lies in [`Price::MIN_LIMIT`]..=[`Price::MAX_LIMIT`].
    pub fn parse_limit(text: &str) -> Result<Price, PriceError> {
        let out_of_range = || PriceError::OutOfRange {
            text: text.to_string(),
            min: short_decimal(Price::MIN_LIMIT.to_f64()),
            max: short_decimal(Price::MAX_LIMIT.to_f64()),
        };
        // A number too large even for Q64.64 is out of the limit range too: say that range.
        let price = parse_q64(text, Rounding::Up).map_err(|error| match error {
            PriceError::OutOfRange { .. } => out_of_range(),
            other => other,
        })?;
        if price.0 == 0 && !text_is_positive(text) {
            return Err(PriceError::NotPositive(text.to_string()));
        }
        if price < Price::MIN_LIMIT || price > Price::MAX_LIMIT {
            return Err(out_of_range());
        }
        Ok(price)
    }

    /// The price as a float, for heuristics and display only.
    pub fn to_f64(self) -> f64 {
        self.0 as f64 / 18_446_744_073_709_551_616.0
    }

    /// The nearest price to a positive float (for generators and tests, never for state).
    pub fn from_f64(value: f64) -> Price {
        assert!(
            value.is_finite() && value >= 0.0,
            "price from invalid float {value}"
        );
        Price((value * 18_446_744_073_709_551_616.0).round() as u128)
    }

    /// `floor(self * (1 - fraction))`, exact.
    pub fn discounted_floor(self, fraction: Fraction) -> Price {
        Price(self.0 - crate::mul_shr64_ceil(self.0, fraction.0))
    }

    /// `floor(amount * self)`, exact; `None` if the result exceeds `u64`.
    pub fn times_amount_floor(self, amount: u64) -> Option<u64> {
        u64::try_from(crate::mul_shr64_floor(self.0, amount)).ok()
    }

    /// Formats the price as a plain decimal with `significant` significant digits (rounded to
    /// nearest). Used by generators; parsing the text back rounds up to a nearby price.
    pub fn to_decimal_string(self, significant: u32) -> String {
        format_significant(self.to_f64(), significant)
    }

    /// The shortest truncated decimal that parses back (rounding up) to exactly this price.
    ///
    /// Digits of `raw / 2^64` are produced one at a time; after k fractional digits the value
    /// left over is `rest / (2^64 * 10^k)`, and the truncation parses back to `raw` exactly when
    /// that is below one unit in the last place, i.e. `rest < 10^k`. At most 20 digits are needed.
    pub fn to_exact_decimal(self) -> String {
        let mut text = (self.0 >> 64).to_string();
        let mut rest = self.0 as u64 as u128;
        if rest == 0 {
            return text;
        }
        text.push('.');
        let mut ten_to_k: u128 = 1;
        while rest >= ten_to_k {
            let shifted = rest * 10;
            text.push(char::from(b'0' + (shifted >> 64) as u8));
            rest = shifted & (u64::MAX as u128);
            ten_to_k *= 10;
        }
        text
    }
}

impl fmt::Display for Price {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", format_significant(self.to_f64(), 12))
    }
}

/// A clearing valuation of one asset. Positive; only ratios between valuations are meaningful.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Valuation(pub u64);

impl Valuation {
    /// The largest raw valuation clearing produces; leaves headroom below `u64::MAX`.
    pub const NORMALIZED_MAX: u64 = 1 << 62;

    /// The exchange rate of selling `self` for `buy`: `floor(self * 2^64 / buy)`.
    ///
    /// Panics if `buy` is zero; valuations are positive by construction.
    #[inline]
    pub fn rate_to(self, buy: Valuation) -> Price {
        assert!(buy.0 > 0, "valuations are positive");
        Price(((self.0 as u128) << 64) / buy.0 as u128)
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
        let value = parse_q64(text, Rounding::Nearest)?;
        if value.0 >= 1u128 << 64 {
            return Err(PriceError::OutOfRange {
                text: text.to_string(),
                min: "0".to_string(),
                max: "less than 1".to_string(),
            });
        }
        Ok(Fraction(value.0 as u64))
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

/// Significant decimal digits kept from the input; more cannot change a Q64.64 value by more than
/// one unit in the last place at the sizes accepted.
const MAX_MANTISSA_DIGITS: usize = 36;

fn text_is_positive(text: &str) -> bool {
    text.bytes().any(|b| (b'1'..=b'9').contains(&b))
}

/// Exact decimal → Q64.64 conversion. Accepts `digits[.digits][e[+-]digits]`; no sign.
fn parse_q64(text: &str, rounding: Rounding) -> Result<Price, PriceError> {
    let malformed = || PriceError::Malformed(text.to_string());
    let trimmed = text.trim();
    if trimmed.starts_with('-') {
        return if text_is_positive(trimmed) {
            Err(PriceError::NotPositive(text.to_string()))
        } else {
            Ok(Price(0))
        };
    }
    let (number, exponent) = match trimmed.find(['e', 'E']) {
        Some(at) => {
            let exponent: i32 = trimmed[at + 1..].parse().map_err(|_| malformed())?;
            (&trimmed[..at], exponent)
        }
        None => (trimmed, 0),
    };
    let (integer_part, fraction_part) = match number.find('.') {
        Some(at) => (&number[..at], &number[at + 1..]),
        None => (number, ""),
    };
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (integer_part.is_empty() && fraction_part.is_empty())
        || !all_digits(integer_part)
        || !all_digits(fraction_part)
        || !(-400..=400).contains(&exponent)
    {
        return Err(malformed());
    }
    // mantissa * 10^(scale) with scale = exponent - fraction digits
    let mut mantissa: u128 = 0;
    let mut scale: i32 = exponent - fraction_part.len() as i32;
    let mut digits_kept = 0usize;
    let mut dropped_nonzero = false;
    for byte in integer_part.bytes().chain(fraction_part.bytes()) {
        let digit = (byte - b'0') as u128;
        if digits_kept == 0 && digit == 0 {
            continue; // leading zeros carry no information
        }
        if digits_kept < MAX_MANTISSA_DIGITS {
            mantissa = mantissa * 10 + digit;
            digits_kept += 1;
        } else {
            // Past the kept digits: account for the position, remember inexactness.
            scale += 1;
            dropped_nonzero |= digit != 0;
        }
    }
    let too_large = || PriceError::OutOfRange {
        text: text.to_string(),
        min: "0".to_string(),
        max: "2^64".to_string(),
    };
    if mantissa == 0 {
        return Ok(Price(0));
    }
    if scale >= 0 {
        // Integer value: mantissa * 10^scale must stay below 2^64.
        let mut value = mantissa;
        for _ in 0..scale {
            value = value.checked_mul(10).ok_or_else(too_large)?;
        }
        if value >= 1u128 << 64 {
            return Err(too_large());
        }
        return Ok(Price(value << 64));
    }
    // value = mantissa / 10^(-scale); if the divisor does not fit, the value is below 2^-64 * 10.
    let divisor_exponent = (-scale) as u32;
    if divisor_exponent > 38 {
        let nonzero = mantissa > 0;
        return Ok(Price(if rounding == Rounding::Up && nonzero {
            1
        } else {
            0
        }));
    }
    let divisor = 10u128.pow(divisor_exponent);
    let integer = mantissa / divisor;
    if integer >= 1u128 << 64 {
        return Err(too_large());
    }
    let (fraction_bits, remainder_nonzero, half_or_more) =
        divide_fraction_bits(mantissa % divisor, divisor);
    let inexact = remainder_nonzero || dropped_nonzero;
    let mut raw = (integer << 64) | fraction_bits as u128;
    match rounding {
        Rounding::Up if inexact => raw += 1,
        Rounding::Nearest if half_or_more => raw += 1,
        _ => {}
    }
    Ok(Price(raw))
}

/// The 64 bits of `remainder / divisor` (remainder < divisor), plus whether anything remained and
/// whether the remainder was at least half a unit in the last place.
fn divide_fraction_bits(remainder: u128, divisor: u128) -> (u64, bool, bool) {
    if divisor <= u64::MAX as u128 {
        let shifted = remainder << 64; // remainder < 2^64
        let bits = shifted / divisor;
        let rest = shifted % divisor;
        return (bits as u64, rest != 0, rest * 2 >= divisor);
    }
    // Long division, one bit at a time; remainder < divisor < 2^127 so the shift cannot overflow.
    let mut rest = remainder;
    let mut bits: u64 = 0;
    for _ in 0..64 {
        rest <<= 1;
        bits <<= 1;
        if rest >= divisor {
            rest -= divisor;
            bits |= 1;
        }
    }
    let half_or_more = rest >= divisor - rest;
    (bits, rest != 0, half_or_more)
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

    #[test]
    fn parses_exact_values() {
        assert_eq!(Price::parse_limit("1").unwrap(), Price::ONE);
        assert_eq!(Price::parse_limit("2.5").unwrap(), Price(5u128 << 63));
        assert_eq!(Price::parse_limit("0.25").unwrap(), Price(1u128 << 62));
        assert_eq!(Price::parse_limit("25e-2").unwrap(), Price(1u128 << 62));
        assert_eq!(
            Price::parse_limit("1000000000000").unwrap(),
            Price::MAX_LIMIT
        );
    }

    #[test]
    fn rounds_limit_up() {
        // 0.1 is not representable; the stored limit must not be below the written one.
        let price = Price::parse_limit("0.1").unwrap();
        assert!(price.0 * 10 >= 1u128 << 64);
        assert!((price.0 - 1) * 10 < 1u128 << 64);
    }

    #[test]
    fn rejects_bad_text() {
        for text in ["", ".", "abc", "1.2.3", "1e", "--1", "1,5", "0x10", "1e999"] {
            assert!(Price::parse_limit(text).is_err(), "{text:?} accepted");
        }
        assert!(matches!(
            Price::parse_limit("0"),
            Err(PriceError::NotPositive(_))
        ));
        assert!(matches!(
            Price::parse_limit("0.000"),
            Err(PriceError::NotPositive(_))
        ));
        assert!(matches!(
            Price::parse_limit("-3"),
            Err(PriceError::NotPositive(_))
        ));
        assert!(matches!(
            Price::parse_limit("1e13"),
            Err(PriceError::OutOfRange { .. })
        ));
        assert!(matches!(
            Price::parse_limit("1e-11"),
            Err(PriceError::OutOfRange { .. })
        ));
    }

    #[test]
    fn keeps_eight_significant_digits_across_the_range() {
        for exponent in -10..=11 {
            let text = format!("1.2345678e{exponent}");
            let price = Price::parse_limit(&text).unwrap();
            let expected = 1.2345678 * 10f64.powi(exponent);
            let relative_error = (price.to_f64() - expected).abs() / expected;
            assert!(
                relative_error < 1e-9,
                "{text}: relative error {relative_error}"
            );
            // and 1.2345679e.. is a different price
            let next = Price::parse_limit(&format!("1.2345679e{exponent}")).unwrap();
            assert!(next > price);
        }
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
        assert!(Fraction::parse("-0.1").is_err());
    }

    #[test]
    fn rate_rounds_down() {
        let rate = Valuation(3).rate_to(Valuation(7));
        assert!(rate.0 * 7 <= 3u128 << 64);
        assert!((rate.0 + 1) * 7 > 3u128 << 64);
    }

    proptest! {
        #[test]
        fn decimal_round_trip_is_close(value in 1e-10f64..1e12) {
            let text = Price::from_f64(value).to_decimal_string(12);
            let parsed = Price::parse_limit(&text).unwrap();
            let relative = (parsed.to_f64() - value).abs() / value;
            prop_assert!(relative < 1e-11, "{} -> {} ({})", value, text, relative);
        }

        #[test]
        fn exact_decimal_round_trips(raw in 1u128..(1u128 << 104)) {
            let text = Price(raw).to_exact_decimal();
            prop_assert_eq!(parse_q64(&text, Rounding::Up).unwrap(), Price(raw), "{}", text);
        }

        #[test]
        fn parse_never_panics(text in "\\PC{0,40}") {
            let _ = Price::parse_limit(&text);
            let _ = Fraction::parse(&text);
        }

        #[test]
        fn discount_matches_exact_product(raw in any::<u64>(), fraction in any::<u64>()) {
            // For raw < 2^64 the exact product raw * (2^64 - f) fits in u128.
            let exact = (raw as u128 * ((1u128 << 64) - fraction as u128)) >> 64;
            prop_assert_eq!(Price(raw as u128).discounted_floor(Fraction(fraction)).0, exact);
        }
    }
}
