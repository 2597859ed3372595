//! Exact wide multiplication: a `u128` fixed-point value times a 64-bit integer or fraction.
//!
//! The product needs 192 bits; shifted right by 64 or more it fits back into 128 bits. These
//! helpers are the only place where that split is written: prices (Q48.80) times amounts shift
//! by [`crate::Price::FRAC_BITS`], prices times Q0.64 fractions by 64.

const LOW_MASK: u128 = u64::MAX as u128;

/// `floor(a * b / 2^shift)` and whether the division left a remainder, for `shift` in 64..128.
#[inline]
fn mul_shr(a: u128, b: u64, shift: u32) -> (u128, bool) {
    debug_assert!((64..128).contains(&shift));
    let b = b as u128;
    // a * b = high * 2^64 + low, with high, low < 2^128 because each factor of them is < 2^64.
    let high = (a >> 64) * b;
    let low = (a & LOW_MASK) * b;
    // sum < 2^128: high ≤ (2^64 − 1)^2 and low >> 64 < 2^64. a * b = sum * 2^64 + (low & mask).
    let sum = high + (low >> 64);
    let extra = shift - 64;
    let remainder = (sum & ((1u128 << extra) - 1)) != 0 || (low & LOW_MASK) != 0;
    (sum >> extra, remainder)
}

/// `floor(a * b / 2^shift)`, exact, for `shift` in 64..128.
#[inline]
pub fn mul_shr_floor(a: u128, b: u64, shift: u32) -> u128 {
    mul_shr(a, b, shift).0
}

/// `ceil(a * b / 2^shift)`, exact, for `shift` in 64..128.
#[inline]
pub fn mul_shr_ceil(a: u128, b: u64, shift: u32) -> u128 {
    let (floor, remainder) = mul_shr(a, b, shift);
    floor + remainder as u128 // floor < 2^128 − 1 since shift ≥ 64 and a * b < 2^192
}

#[cfg(test)]
mod tests {
    use super::*;
    use ethnum::U256;
    use proptest::prelude::*;

    /// The same quotient by 256-bit arithmetic.
    fn reference(a: u128, b: u64, shift: u32) -> (u128, bool) {
        let product = U256::from(a) * U256::from(b);
        let remainder = product & ((U256::ONE << shift) - U256::ONE);
        ((product >> shift).as_u128(), remainder != U256::ZERO)
    }

    proptest! {
        #[test]
        fn floor_and_ceil_match_256_bit_arithmetic(
            a in any::<u128>(), b in any::<u64>(), shift in 64u32..128,
        ) {
            let (expected, inexact) = reference(a, b, shift);
            prop_assert_eq!(mul_shr_floor(a, b, shift), expected);
            prop_assert_eq!(mul_shr_ceil(a, b, shift), expected + inexact as u128);
        }
    }

    #[test]
    fn extremes() {
        assert_eq!(
            mul_shr_floor(u128::MAX, u64::MAX, 64),
            u128::MAX - (1u128 << 64)
        );
        assert_eq!(mul_shr_floor(1 << 64, 5, 64), 5);
        assert_eq!(mul_shr_floor(1 << 80, 5, 80), 5);
        assert_eq!(mul_shr_ceil(1, 1, 80), 1);
        assert_eq!(mul_shr_floor(1, 1, 64), 0);
        assert_eq!(mul_shr_ceil(u128::MAX, u64::MAX, 127), (1 << 65) - 2);
    }
}
