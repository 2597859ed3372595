//! Exact wide multiplication helpers for Q64.64 arithmetic.
//!
//! A Q64.64 value `a` (a `u128`) times a 64-bit integer or Q0.64 fraction `b` needs 192 bits; the
//! result shifted right by 64 always fits back into 128 bits. These two helpers are the only place
//! where that split is written.

const LOW_MASK: u128 = u64::MAX as u128;

/// `floor(a * b / 2^64)`, exact.
#[inline]
pub fn mul_shr64_floor(a: u128, b: u64) -> u128 {
    let b = b as u128;
    let high = (a >> 64) * b; // < 2^128 because a >> 64 < 2^64 and b < 2^64
    let low = (a & LOW_MASK) * b; // < 2^128
    high + (low >> 64) // cannot overflow: the exact result is below a
}

/// `ceil(a * b / 2^64)`, exact.
#[inline]
pub fn mul_shr64_ceil(a: u128, b: u64) -> u128 {
    let floor = mul_shr64_floor(a, b);
    let remainder_nonzero = ((a & LOW_MASK) * b as u128) & LOW_MASK != 0;
    floor + remainder_nonzero as u128
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reference(a: u128, b: u64) -> (u128, bool) {
        // 256-bit schoolbook on four 64-bit limbs of a and one of b.
        let limbs = [a as u64, (a >> 64) as u64];
        let p0 = limbs[0] as u128 * b as u128;
        let p1 = limbs[1] as u128 * b as u128 + (p0 >> 64);
        // value = p1 * 2^64 + (p0 & mask); shifted right by 64 = p1
        (p1, (p0 as u64) != 0)
    }

    proptest! {
        #[test]
        fn floor_and_ceil_match_schoolbook(a in any::<u128>(), b in any::<u64>()) {
            let (expected, inexact) = reference(a, b);
            prop_assert_eq!(mul_shr64_floor(a, b), expected);
            prop_assert_eq!(mul_shr64_ceil(a, b), expected + inexact as u128);
        }
    }

    #[test]
    fn extremes() {
        assert_eq!(
            mul_shr64_floor(u128::MAX, u64::MAX),
            u128::MAX - (1u128 << 64)
        );
        assert_eq!(mul_shr64_floor(1 << 64, 5), 5);
        assert_eq!(mul_shr64_ceil(1, 1), 1);
        assert_eq!(mul_shr64_floor(1, 1), 0);
    }
}
