//! Exact decimal prices and sizes: an `i128` count of 10^-18 units.
//!
//! Hand-written rather than `rust_decimal` because the book needs only exact parse, compare,
//! add/subtract and fixed-precision formatting (the Kraken checksum); a fixed scale makes `Ord`
//! and `Eq` structural, so a price is a `BTreeMap` key with no normalisation step. Nothing here
//! goes through `f64`; `to_f64` exists only for the advisory valuations.

use std::fmt;

/// Fractional digits carried exactly.
pub const SCALE_DIGITS: u32 = 18;
const SCALE: i128 = 1_000_000_000_000_000_000;
/// Longest decimal text accepted (digits, sign, point, exponent): a named limit on outside input.
pub const TEXT_LEN_MAX: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Dec(i128);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecError {
    #[error("empty decimal")]
    Empty,
    #[error("decimal text longer than {TEXT_LEN_MAX} characters")]
    TooLong,
    #[error("invalid character in decimal {0:?}")]
    Invalid(String),
    #[error("decimal {0:?} has more than 18 significant fractional digits")]
    TooPrecise(String),
    #[error("decimal {0:?} out of range")]
    Overflow(String),
}

impl Dec {
    pub const ZERO: Dec = Dec(0);

    pub fn from_units(units: i128) -> Dec {
        Dec(units)
    }
    pub fn units(self) -> i128 {
        self.0
    }
    pub fn from_int(n: i64) -> Dec {
        Dec(n as i128 * SCALE)
    }
    /// `mantissa · 10^-decimals`, exact; `None` when it does not fit.
    pub fn from_scaled(mantissa: i64, decimals: u32) -> Option<Dec> {
        if decimals > SCALE_DIGITS {
            return None;
        }
        let factor = 10i128.checked_pow(SCALE_DIGITS - decimals)?;
        (mantissa as i128).checked_mul(factor).map(Dec)
    }
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
    pub fn is_positive(self) -> bool {
        self.0 > 0
    }
    pub fn checked_add(self, o: Dec) -> Option<Dec> {
        self.0.checked_add(o.0).map(Dec)
    }
    pub fn checked_sub(self, o: Dec) -> Option<Dec> {
        self.0.checked_sub(o.0).map(Dec)
    }
    /// Advisory only: valuations may be floating point, book state never is.
    pub fn to_f64(self) -> f64 {
        let int = (self.0 / SCALE) as f64;
        let frac = (self.0 % SCALE) as f64 / SCALE as f64;
        int + frac
    }

    /// Parses `-?digits(.digits)?([eE][+-]?digits)?` exactly.
    pub fn parse(text: &str) -> Result<Dec, DecError> {
        if text.is_empty() {
            return Err(DecError::Empty);
        }
        if text.len() > TEXT_LEN_MAX {
            return Err(DecError::TooLong);
        }
        let invalid = || DecError::Invalid(text.to_string());
        let (negative, body) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (mantissa_text, exponent) = match body.find(['e', 'E']) {
            Some(at) => {
                let exp: i32 = body[at + 1..].parse().map_err(|_| invalid())?;
                (&body[..at], exp)
            }
            None => (body, 0),
        };
        let (int_part, frac_part) = match mantissa_text.split_once('.') {
            Some((i, f)) => (i, f),
            None => (mantissa_text, ""),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(invalid());
        }
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if !all_digits(int_part) || !all_digits(frac_part) {
            return Err(invalid());
        }
        // digits · 10^(exponent - frac_len), then scaled by 10^18.
        let mut digits: i128 = 0;
        let overflow = || DecError::Overflow(text.to_string());
        for b in int_part.bytes().chain(frac_part.bytes()) {
            digits = digits
                .checked_mul(10)
                .and_then(|d| d.checked_add((b - b'0') as i128))
                .ok_or_else(overflow)?;
        }
        let shift = SCALE_DIGITS as i64 + exponent as i64 - frac_part.len() as i64;
        let units = if shift >= 0 {
            let factor = 10i128.checked_pow(u32::try_from(shift).map_err(|_| overflow())?);
            if digits == 0 {
                0
            } else {
                factor
                    .and_then(|f| digits.checked_mul(f))
                    .ok_or_else(overflow)?
            }
        } else {
            let down = u32::try_from(-shift).map_err(|_| overflow())?;
            match 10i128.checked_pow(down) {
                Some(f) if digits % f == 0 => digits / f,
                None if digits == 0 => 0,
                _ => return Err(DecError::TooPrecise(text.to_string())),
            }
        };
        Ok(Dec(if negative { -units } else { units }))
    }

    /// The value with exactly `decimals` fractional digits (truncating any further digits),
    /// as venues print them: `"0.56660"` for 0.5666 at five decimals.
    pub fn format_fixed(self, decimals: u32) -> String {
        let decimals = decimals.min(SCALE_DIGITS);
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        let int = abs / SCALE as u128;
        let frac = abs % SCALE as u128;
        if decimals == 0 {
            return format!("{sign}{int}");
        }
        let frac_digits = frac / 10u128.pow(SCALE_DIGITS - decimals);
        format!(
            "{sign}{int}.{frac_digits:0width$}",
            width = decimals as usize
        )
    }
}

impl fmt::Display for Dec {
    /// Shortest exact form: no trailing fractional zeros.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let full = self.format_fixed(SCALE_DIGITS);
        let trimmed = if full.contains('.') {
            full.trim_end_matches('0').trim_end_matches('.')
        } else {
            &full
        };
        f.write_str(trimmed)
    }
}

impl std::str::FromStr for Dec {
    type Err = DecError;
    fn from_str(s: &str) -> Result<Dec, DecError> {
        Dec::parse(s)
    }
}

impl serde::Serialize for Dec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> serde::Deserialize<'de> for Dec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Dec, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Dec::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn venue_texts_parse_exactly_and_print_back() {
        for (text, shown) in [
            ("0.0024", "0.0024"),
            ("431.00000000", "431"),
            ("1e-05", "0.00001"),
            ("-12.5", "-12.5"),
            ("0", "0"),
            ("36945.47", "36945.47"),
        ] {
            assert_eq!(Dec::parse(text).unwrap().to_string(), shown, "{text}");
        }
        assert_eq!(
            Dec::parse("0.1")
                .unwrap()
                .checked_add(Dec::parse("0.2").unwrap()),
            Dec::parse("0.3").ok()
        );
    }

    #[test]
    fn malformed_or_over_precise_text_is_an_error() {
        for bad in [
            "",
            ".",
            "1.2.3",
            "abc",
            "1e",
            "0.0000000000000000001",
            "1e40",
            "--1",
        ] {
            assert!(Dec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn fixed_formatting_pads_to_the_instrument_precision() {
        assert_eq!(Dec::parse("0.5666").unwrap().format_fixed(5), "0.56660");
        assert_eq!(
            Dec::parse("4831.75496356").unwrap().format_fixed(8),
            "4831.75496356"
        );
        assert_eq!(Dec::parse("7").unwrap().format_fixed(0), "7");
    }
}
