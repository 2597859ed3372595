//! Lowercase hex for digests, keys and signatures (no dependency for ~30 lines).

use std::fmt;

use crate::error::DecodeError;

/// Writes `bytes` as lowercase hex.
pub(crate) fn write(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    bytes.iter().try_for_each(|byte| write!(f, "{byte:02x}"))
}

/// Parses exactly `N` bytes of hex (either case); `what` names the value in errors.
pub(crate) fn decode_array<const N: usize>(
    what: &'static str,
    text: &str,
) -> Result<[u8; N], DecodeError> {
    let digits = text.as_bytes();
    if digits.len() != 2 * N {
        return Err(DecodeError::WrongHexLength {
            what,
            expected: 2 * N,
            actual: digits.len(),
        });
    }
    let mut out = [0u8; N];
    for (index, byte) in out.iter_mut().enumerate() {
        let high = digit_value(what, digits, 2 * index)?;
        let low = digit_value(what, digits, 2 * index + 1)?;
        *byte = (high << 4) | low;
    }
    Ok(out)
}

fn digit_value(what: &'static str, digits: &[u8], position: usize) -> Result<u8, DecodeError> {
    match digits[position] {
        digit @ b'0'..=b'9' => Ok(digit - b'0'),
        digit @ b'a'..=b'f' => Ok(digit - b'a' + 10),
        digit @ b'A'..=b'F' => Ok(digit - b'A' + 10),
        _ => Err(DecodeError::NotHex { what, position }),
    }
}
