//! Keys as strings of 4-bit nibbles, most significant first: nibble order is byte order, so the
//! trie's child order is key order.

use std::cmp::Ordering;

/// Nibble `index` of `bytes` (0 = high half of byte 0).
pub(crate) fn nibble(bytes: &[u8], index: usize) -> u8 {
    let byte = bytes[index / 2];
    if index & 1 == 0 {
        byte >> 4
    } else {
        byte & 0x0f
    }
}

/// How many leading nibbles `a` and `b` share (both the same length).
pub(crate) fn common_prefix_nibbles(a: &[u8], b: &[u8]) -> usize {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        None => 2 * a.len().min(b.len()),
        Some(byte) => 2 * byte + usize::from((a[byte] ^ b[byte]) & 0xf0 == 0),
    }
}

/// Bytes that hold `nibbles` nibbles.
pub(crate) fn prefix_bytes(nibbles: usize) -> usize {
    nibbles.div_ceil(2)
}

/// `bytes` cut to its first `nibbles` nibbles, the rest zero: the canonical form of a prefix.
pub(crate) fn truncated<const KEY_BYTES: usize>(
    bytes: &[u8; KEY_BYTES],
    nibbles: usize,
) -> [u8; KEY_BYTES] {
    let mut out = [0u8; KEY_BYTES];
    let whole_bytes = nibbles / 2;
    out[..whole_bytes].copy_from_slice(&bytes[..whole_bytes]);
    if nibbles % 2 == 1 {
        out[whole_bytes] = bytes[whole_bytes] & 0xf0;
    }
    out
}

/// Compares the first `nibbles` nibbles of `a` and `b`.
pub(crate) fn compare_prefix(a: &[u8], b: &[u8], nibbles: usize) -> Ordering {
    let whole_bytes = nibbles / 2;
    let whole = a[..whole_bytes].cmp(&b[..whole_bytes]);
    if whole != Ordering::Equal || nibbles & 1 == 0 {
        return whole;
    }
    (a[whole_bytes] >> 4).cmp(&(b[whole_bytes] >> 4))
}

/// The nibbles whose bits are set in `bitmap`, ascending.
pub(crate) fn bitmap_nibbles(bitmap: u16) -> impl Iterator<Item = u8> {
    (0u8..16).filter(move |nibble| bitmap & (1 << nibble) != 0)
}

/// Position of `nibble`'s child among the children listed by `bitmap` (whether or not present).
pub(crate) fn child_position(bitmap: u16, nibble: u8) -> usize {
    (bitmap & ((1u16 << nibble) - 1)).count_ones() as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nibbles_and_common_prefixes() {
        let a = [0x12, 0x34];
        assert_eq!((nibble(&a, 0), nibble(&a, 1), nibble(&a, 3)), (1, 2, 4));
        assert_eq!(common_prefix_nibbles(&a, &[0x12, 0x35]), 3);
        assert_eq!(common_prefix_nibbles(&a, &[0x12, 0x44]), 2);
        assert_eq!(common_prefix_nibbles(&a, &[0x22, 0x34]), 0);
        assert_eq!(common_prefix_nibbles(&a, &a), 4);
        assert_eq!(truncated(&a, 3), [0x12, 0x30]);
        assert_eq!(compare_prefix(&a, &[0x12, 0x3f], 3), Ordering::Equal);
        assert_eq!(compare_prefix(&a, &[0x12, 0x3f], 4), Ordering::Less);
        assert_eq!(child_position(0b1011, 3), 2);
        assert_eq!(
            bitmap_nibbles(0b1000_0000_0000_0101).collect::<Vec<_>>(),
            vec![0, 2, 15]
        );
    }
}
