//! Lowercase hex for digests, keys and signatures: the `hex` crate, with errors that name the
//! value and the position of the first bad digit.

use std::fmt;

use crate::error::DecodeError;

/// Writes `bytes` as lowercase hex.
pub(crate) fn write(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    f.write_str(&hex::encode(bytes))
}

/// Parses exactly `N` bytes of hex (either case); `what` names the value in errors.
pub(crate) fn decode_array<const N: usize>(
    what: &'static str,
    text: &str,
) -> Result<[u8; N], DecodeError> {
    if text.len() != 2 * N {
        return Err(DecodeError::WrongHexLength {
            what,
            expected: 2 * N,
            actual: text.len(),
        });
    }
    let mut out = [0u8; N];
    hex::decode_to_slice(text, &mut out).map_err(|error| match error {
        hex::FromHexError::InvalidHexCharacter { index, .. } => DecodeError::NotHex {
            what,
            position: index,
        },
        // The length was checked above.
        hex::FromHexError::OddLength | hex::FromHexError::InvalidStringLength => {
            DecodeError::WrongHexLength {
                what,
                expected: 2 * N,
                actual: text.len(),
            }
        }
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_digit_is_reported_at_its_position_and_a_bad_length_as_such() {
        assert_eq!(decode_array::<2>("key", "0aFf"), Ok([0x0a, 0xff]));
        assert_eq!(
            decode_array::<2>("key", "0a-f"),
            Err(DecodeError::NotHex {
                what: "key",
                position: 2
            })
        );
        assert_eq!(
            decode_array::<2>("key", "0af"),
            Err(DecodeError::WrongHexLength {
                what: "key",
                expected: 4,
                actual: 3
            })
        );
        // A multi-byte character: a length in bytes, refused without a panic.
        assert!(decode_array::<2>("key", "0aé").is_err());
    }
}
