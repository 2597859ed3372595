//! Parsers of the numbers commands take as text (asset counts, fractions, thread counts), with
//! messages that say the accepted range. Shared by every command-line tool.

use crate::{Fraction, MAX_ASSETS};

/// An asset count in 2..=MAX_ASSETS.
pub fn asset_count(text: &str) -> Result<usize, String> {
    let count: usize = text
        .parse()
        .map_err(|_| format!("'{text}' is not a whole number"))?;
    if !(2..=MAX_ASSETS).contains(&count) {
        return Err(format!(
            "{count} is out of range: use 2..={MAX_ASSETS} assets"
        ));
    }
    Ok(count)
}

/// A fraction in [0, 1): a decimal (`0.001`) or a power of two (`2^-10`).
pub fn fraction(text: &str) -> Result<Fraction, String> {
    if let Some(exponent) = text.strip_prefix("2^-") {
        let exponent: u32 = exponent
            .parse()
            .map_err(|_| format!("'{text}': expected 2^-K with K in 1..=63"))?;
        if !(1..=63).contains(&exponent) {
            return Err(format!("'{text}': expected 2^-K with K in 1..=63"));
        }
        return Ok(Fraction::power_of_two(exponent));
    }
    Fraction::parse(text).map_err(|error| error.to_string())
}

/// A thread count of at least 1.
pub fn thread_count(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(count) if (1..=1024).contains(&count) => Ok(count),
        _ => Err(format!("'{text}' is not a thread count in 1..=1024")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fractions_both_ways() {
        assert_eq!(fraction("2^-15").unwrap(), Fraction::power_of_two(15));
        assert_eq!(
            fraction("0.0009765625").unwrap(),
            Fraction::power_of_two(10)
        );
        assert!(fraction("2^-0").is_err());
        assert!(fraction("1.5").is_err());
        assert!(asset_count("1").is_err());
        assert!(asset_count("50").is_ok());
        assert!(thread_count("0").is_err());
    }
}
