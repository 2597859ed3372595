//! The one reader and writer of Walras's binary encodings: transactions, the genesis, blocks
//! and checkpoints (engine), trie proofs, the gateway link and the gateway's frames all read
//! through [`Reader`] and write through [`Writer`].
//!
//! Integers are big-endian and fixed-width; there are no varints, so an encoding is canonical
//! as long as each format refuses trailing bytes ([`Reader::finish`]) and its own impossible
//! values. The reader never panics: reading past the end is [`DecodeError::Truncated`], and
//! [`Reader::capacity`] (used by [`Reader::list`]) bounds a reservation by what the input can
//! hold rather than by what a count field claims.
//!
//! Each format keeps its own error type for what only it knows (a bad signature version, an
//! unsorted trade list) and wraps [`DecodeError`] for what every format shares.

use thiserror::Error;

/// Why bytes do not decode, for the reasons every binary format shares.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The input ends inside a field.
    #[error("ends early: {needed} bytes needed at byte {offset}, {available} left")]
    Truncated {
        offset: usize,
        needed: usize,
        available: usize,
    },
    /// The value is complete but more bytes follow it.
    #[error("{extra} bytes after the end")]
    TrailingBytes { extra: usize },
    /// A tag byte (which variant follows) names no variant.
    #[error("unknown {what} tag {tag:#04x}")]
    BadTag { what: &'static str, tag: u8 },
    /// A count field is over the format's named limit.
    #[error("{count} {what}: over the limit of {max}")]
    CountOverMax {
        what: &'static str,
        count: u64,
        max: u64,
    },
    /// A text field is not in the encoding its format says (ASCII or UTF-8).
    #[error("{what} is not valid {encoding} text")]
    BadText {
        what: &'static str,
        encoding: &'static str,
    },
    /// The input does not start with the format's magic bytes.
    #[error("does not start with {expected}: not this format, or another version of it")]
    BadMagic { expected: &'static str },
}

/// A bounds-checked cursor over untrusted bytes: every read either returns the value and
/// advances, or returns a [`DecodeError`] and leaves the input as it was.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0 }
    }

    /// How many bytes have been read.
    pub fn offset(&self) -> usize {
        self.at
    }

    /// How many bytes are left.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The next `count` bytes.
    pub fn take(&mut self, count: usize) -> Result<&'a [u8], DecodeError> {
        self.ensure(count)?;
        let slice = &self.bytes[self.at..self.at + count];
        self.at += count;
        Ok(slice)
    }

    /// Everything left (possibly nothing).
    pub fn rest(&mut self) -> &'a [u8] {
        let rest = &self.bytes[self.at..];
        self.at = self.bytes.len();
        rest
    }

    /// Refuses unless `count` more bytes are left; reads nothing.
    pub fn ensure(&self, count: usize) -> Result<(), DecodeError> {
        let available = self.remaining();
        if count > available {
            return Err(DecodeError::Truncated {
                offset: self.at,
                needed: count,
                available,
            });
        }
        Ok(())
    }

    /// Refuses unless `count` items of `item_bytes` each are left; reads nothing. For
    /// fixed-size items, before reserving room for them.
    pub fn ensure_items(&self, count: usize, item_bytes: usize) -> Result<(), DecodeError> {
        self.ensure(count.saturating_mul(item_bytes))
    }

    /// How many items to reserve for a claimed `count` of items that take at least
    /// `item_bytes_min` bytes each: never more than the rest of the input can hold.
    pub fn capacity(&self, count: u64, item_bytes_min: usize) -> usize {
        let holdable = self.remaining() / item_bytes_min.max(1);
        usize::try_from(count).map_or(holdable, |count| count.min(holdable))
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut array = [0u8; N];
        array.copy_from_slice(self.take(N)?);
        Ok(array)
    }

    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        self.array().map(u8::from_be_bytes)
    }

    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        self.array().map(u16::from_be_bytes)
    }

    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        self.array().map(u32::from_be_bytes)
    }

    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        self.array().map(u64::from_be_bytes)
    }

    pub fn u128(&mut self) -> Result<u128, DecodeError> {
        self.array().map(u128::from_be_bytes)
    }

    /// Reads `magic.len()` bytes and refuses them unless they are `magic` (`name` is how the
    /// error shows it).
    pub fn magic(&mut self, magic: &[u8], name: &'static str) -> Result<(), DecodeError> {
        if !self.bytes[self.at..].starts_with(magic) {
            return Err(DecodeError::BadMagic { expected: name });
        }
        self.at += magic.len();
        Ok(())
    }

    /// `count` items, each read by `read`; reserves room for no more items than the rest of the
    /// input can hold at `item_bytes_min` bytes each.
    pub fn list<T, E: From<DecodeError>>(
        &mut self,
        count: u64,
        item_bytes_min: usize,
        mut read: impl FnMut(&mut Self) -> Result<T, E>,
    ) -> Result<Vec<T>, E> {
        let mut items = Vec::with_capacity(self.capacity(count, item_bytes_min));
        for _ in 0..count {
            items.push(read(self)?);
        }
        Ok(items)
    }

    /// The next `len` bytes as ASCII text (`what` names the field in the error).
    pub fn ascii(&mut self, len: usize, what: &'static str) -> Result<&'a str, DecodeError> {
        self.text(len, what, "ASCII", |bytes| {
            bytes
                .is_ascii()
                .then(|| std::str::from_utf8(bytes).ok())
                .flatten()
        })
    }

    /// The next `len` bytes as UTF-8 text (`what` names the field in the error).
    pub fn utf8(&mut self, len: usize, what: &'static str) -> Result<&'a str, DecodeError> {
        self.text(len, what, "UTF-8", |bytes| std::str::from_utf8(bytes).ok())
    }

    fn text(
        &mut self,
        len: usize,
        what: &'static str,
        encoding: &'static str,
        check: impl Fn(&'a [u8]) -> Option<&'a str>,
    ) -> Result<&'a str, DecodeError> {
        self.ensure(len)?;
        let text = check(&self.bytes[self.at..self.at + len])
            .ok_or(DecodeError::BadText { what, encoding })?;
        self.at += len;
        Ok(text)
    }

    /// Succeeds only if everything was read.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            extra => Err(DecodeError::TrailingBytes { extra }),
        }
    }
}

/// `count` as a `usize` if it is at most `max` (a format's named limit for `what`).
pub fn count_within(count: u64, max: usize, what: &'static str) -> Result<usize, DecodeError> {
    match usize::try_from(count) {
        Ok(within) if within <= max => Ok(within),
        _ => Err(DecodeError::CountOverMax {
            what,
            count,
            max: max as u64,
        }),
    }
}

/// Big-endian appends, the mirror of [`Reader`].
pub trait Writer {
    fn put_bytes(&mut self, bytes: &[u8]);

    fn put_u8(&mut self, value: u8) {
        self.put_bytes(&[value]);
    }

    fn put_u16(&mut self, value: u16) {
        self.put_bytes(&value.to_be_bytes());
    }

    fn put_u32(&mut self, value: u32) {
        self.put_bytes(&value.to_be_bytes());
    }

    fn put_u64(&mut self, value: u64) {
        self.put_bytes(&value.to_be_bytes());
    }

    fn put_u128(&mut self, value: u128) {
        self.put_bytes(&value.to_be_bytes());
    }
}

impl Writer for Vec<u8> {
    fn put_bytes(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn integers_are_big_endian_and_round_trip() {
        let mut out = Vec::new();
        out.put_u8(0xab);
        out.put_u16(0x0102);
        out.put_u32(0x0304_0506);
        out.put_u64(0x0708_090a_0b0c_0d0e);
        out.put_u128(1 << 120 | 0x0f);
        out.put_bytes(b"end");
        let mut golden = vec![0xab, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 1];
        golden.extend_from_slice(&[0; 14]);
        golden.push(0x0f);
        golden.extend_from_slice(b"end");
        assert_eq!(out, golden);

        let mut reader = Reader::new(&out);
        assert_eq!(reader.u8(), Ok(0xab));
        assert_eq!(reader.u16(), Ok(0x0102));
        assert_eq!(reader.u32(), Ok(0x0304_0506));
        assert_eq!(reader.u64(), Ok(0x0708_090a_0b0c_0d0e));
        assert_eq!(reader.u128(), Ok(1 << 120 | 0x0f));
        assert_eq!(reader.offset(), 31);
        assert_eq!(
            reader.finish(),
            Err(DecodeError::TrailingBytes { extra: 3 })
        );
        assert_eq!(reader.rest(), b"end");
        assert!(reader.is_empty());
        assert_eq!(reader.finish(), Ok(()));
    }

    #[test]
    fn a_short_read_is_an_error_and_reads_nothing() {
        let mut reader = Reader::new(&[1, 2, 3]);
        assert_eq!(reader.u8(), Ok(1));
        assert_eq!(
            reader.u32(),
            Err(DecodeError::Truncated {
                offset: 1,
                needed: 4,
                available: 2
            })
        );
        assert_eq!(reader.offset(), 1);
        assert_eq!(reader.u16(), Ok(0x0203));
        assert_eq!(
            reader.ensure_items(usize::MAX, 2),
            Err(DecodeError::Truncated {
                offset: 3,
                needed: usize::MAX,
                available: 0
            })
        );
    }

    #[test]
    fn magic_counts_and_capacity() {
        let mut reader = Reader::new(b"WGS1rest");
        assert_eq!(
            reader.clone().magic(b"WGR1", "WGR1"),
            Err(DecodeError::BadMagic { expected: "WGR1" })
        );
        assert_eq!(reader.magic(b"WGS1", "WGS1"), Ok(()));
        assert_eq!(reader.capacity(u64::MAX, 2), 2);
        assert_eq!(reader.capacity(1, 2), 1);
        assert_eq!(reader.capacity(9, 0), 4);
        assert_eq!(count_within(7, 7, "things"), Ok(7));
        assert_eq!(
            count_within(8, 7, "things"),
            Err(DecodeError::CountOverMax {
                what: "things",
                count: 8,
                max: 7
            })
        );
        assert_eq!(
            count_within(8, 7, "things").unwrap_err().to_string(),
            "8 things: over the limit of 7"
        );
    }

    #[test]
    fn lists_and_texts() {
        let mut reader = Reader::new(&[0, 1, 0, 2, b'o', b'k', 0xff]);
        assert_eq!(reader.list(2, 2, Reader::u16), Ok(vec![1, 2]));
        assert_eq!(
            reader.clone().utf8(3, "name").map(|_| ()),
            Err(DecodeError::BadText {
                what: "name",
                encoding: "UTF-8"
            })
        );
        assert_eq!(
            reader.clone().ascii(3, "name").map(|_| ()),
            Err(DecodeError::BadText {
                what: "name",
                encoding: "ASCII"
            })
        );
        assert_eq!(reader.utf8(2, "name"), Ok("ok"));
        assert_eq!(
            reader.list(u64::MAX, 1, Reader::u8),
            Err(DecodeError::Truncated {
                offset: 7,
                needed: 1,
                available: 0
            })
        );
        let mut reader = Reader::new("é".as_bytes());
        assert_eq!(
            reader.clone().ascii(2, "name").map(|_| ()),
            Err(DecodeError::BadText {
                what: "name",
                encoding: "ASCII"
            })
        );
        assert_eq!(reader.utf8(2, "name"), Ok("é"));
    }

    proptest! {
        #[test]
        fn reads_never_panic_and_never_pass_the_end(
            bytes in proptest::collection::vec(any::<u8>(), 0..64),
            reads in proptest::collection::vec(0u8..8, 0..32),
        ) {
            let mut reader = Reader::new(&bytes);
            for read in reads {
                let before = reader.offset();
                let advanced = match read {
                    0 => reader.u8().map(|_| 1),
                    1 => reader.u16().map(|_| 2),
                    2 => reader.u32().map(|_| 4),
                    3 => reader.u64().map(|_| 8),
                    4 => reader.u128().map(|_| 16),
                    5 => reader.take(3).map(<[u8]>::len),
                    6 => reader.array::<32>().map(|array| array.len()),
                    _ => reader.magic(b"ab", "ab").map(|()| 2),
                };
                match advanced {
                    Ok(count) => prop_assert_eq!(reader.offset(), before + count),
                    Err(_) => prop_assert_eq!(reader.offset(), before),
                }
                prop_assert!(reader.offset() <= bytes.len());
            }
        }
    }
}
