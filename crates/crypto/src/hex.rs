//! Lowercase hex for digests, keys and signatures: the `hex` crate, with errors that name the
//! value and the position of the first bad digit.

use std::fmt;

use crate::error::DecodeError;

/// Writes `bytes` as lowercase hex, through a buffer on the stack: `hex::encode` collects
/// its digits one `char` at a time into a new `String`, about a tenth of the samples of a
/// refused transaction in a batch answer (each result carries its hash) in the test profile.
pub(crate) fn write(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    const CHUNK_BYTES: usize = 64;
    let mut digits = [0u8; 2 * CHUNK_BYTES];
    for chunk in bytes.chunks(CHUNK_BYTES) {
        let out = &mut digits[..2 * chunk.len()];
        hex::encode_to_slice(chunk, out).map_err(|_| fmt::Error)?;
        f.write_str(std::str::from_utf8(out).map_err(|_| fmt::Error)?)?;
    }
    Ok(())
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

    /// Displays its bytes through [`write`].
    struct Shown<'a>(&'a [u8]);

    impl fmt::Display for Shown<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write(f, self.0)
        }
    }

    proptest::proptest! {
        /// The buffered writer says what `hex::encode` says, across chunk boundaries too.
        #[test]
        fn written_hex_is_the_hex_crates_encoding(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            proptest::prop_assert_eq!(Shown(&bytes).to_string(), hex::encode(&bytes));
        }
    }
}
