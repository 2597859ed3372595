//! Decimal parsing of limit prices and fractions on arbitrary text: an error or a value, never a
//! panic; and an accepted limit price is never below the written decimal (re-parsing its exact
//! decimal expansion gives it back).
#![no_main]

use libfuzzer_sys::fuzz_target;
use walras_types::{Fraction, Price};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = Fraction::parse(text);
    if let Ok(price) = Price::parse_limit(text) {
        assert_eq!(Price::parse_limit(&price.to_exact_decimal()).ok(), Some(price));
    }
});
