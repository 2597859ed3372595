//! The participant protocol's frames on sockets: the codec itself is `walras_gateway`'s
//! (pure, fuzzed); this module adds the TCP framing, a `u32` big-endian length then the payload,
//! read by `tokio_util`'s [`LengthDelimitedCodec`] behind a check that names an oversized frame.

use bytes::{Bytes, BytesMut};
use std::io;
use tokio_util::codec::{Decoder, LengthDelimitedCodec, LengthDelimitedCodecError};
pub(crate) use walras_gateway::{
    framed, hello_signing_message, BlockData, Downlink, FrameError, NoticeCode, OwnResult,
    RefusalCode, SignedHello, Uplink, DOWNLINK_FRAME_MAX, PROTOCOL_VERSION, UPLINK_FRAME_MAX,
};

/// Bytes of the length prefix.
const PREFIX_BYTES: usize = 4;

/// Splits a TCP byte stream into frame payloads of at most `max` bytes each.
///
/// Errors, each of which ends the connection: a length above `max` (refused from the prefix
/// alone, before the payload is buffered) is `InvalidData` carrying [`FrameError::TooLarge`];
/// a stream that ends inside a frame is `UnexpectedEof`. A stream that ends between frames is a
/// clean end (`None`).
pub(crate) struct FrameDecoder {
    inner: LengthDelimitedCodec,
    max: usize,
}

impl FrameDecoder {
    pub(crate) fn new(max: usize) -> FrameDecoder {
        let inner = LengthDelimitedCodec::builder()
            .length_field_length(PREFIX_BYTES)
            .big_endian()
            .max_frame_length(max)
            .new_codec();
        FrameDecoder { inner, max }
    }

    /// Changes the limit for the frames not yet started.
    pub(crate) fn set_max(&mut self, max: usize) {
        self.max = max;
        self.inner.set_max_frame_length(max);
    }

    /// The typed form of the codec's "frame size too big": the codec refuses a length before
    /// it consumes the prefix, so the prefix is still at the front of `src`.
    fn too_large(&self, src: &BytesMut, untyped: io::Error) -> io::Error {
        let prefix: Option<[u8; PREFIX_BYTES]> =
            src.get(..PREFIX_BYTES).and_then(|p| p.try_into().ok());
        match prefix {
            Some(prefix) => io::Error::new(
                io::ErrorKind::InvalidData,
                FrameError::TooLarge {
                    len: u32::from_be_bytes(prefix) as usize,
                    max: self.max,
                },
            ),
            None => untyped,
        }
    }
}

impl Decoder for FrameDecoder {
    type Item = Bytes;
    type Error = io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> io::Result<Option<Bytes>> {
        match self.inner.decode(src) {
            Ok(frame) => Ok(frame.map(BytesMut::freeze)),
            Err(error)
                if error
                    .get_ref()
                    .is_some_and(|e| e.is::<LengthDelimitedCodecError>()) =>
            {
                Err(self.too_large(src, error))
            }
            Err(error) => Err(error),
        }
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> io::Result<Option<Bytes>> {
        match self.decode(src)? {
            Some(frame) => Ok(Some(frame)),
            None if src.is_empty() => Ok(None),
            None => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "the connection ended inside a frame ({} bytes of it)",
                    src.len()
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use tokio_util::codec::FramedRead;

    fn read_all(bytes: &'static [u8], max: usize) -> Vec<io::Result<Bytes>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(FramedRead::new(bytes, FrameDecoder::new(max)).collect())
    }

    #[test]
    fn an_oversized_frame_is_refused_before_it_is_read() {
        let results = read_all(&[0xff, 0xff, 0xff, 0xff, 1, 2, 3], UPLINK_FRAME_MAX);
        let error = results[0].as_ref().unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        let typed = error.get_ref().and_then(|e| e.downcast_ref::<FrameError>());
        assert_eq!(
            typed,
            Some(&FrameError::TooLarge {
                len: u32::MAX as usize,
                max: UPLINK_FRAME_MAX
            })
        );
        assert!(read_all(&[], 10).is_empty());
    }

    /// Trigger: a payload that arrives after its prefix, whose first bytes read as a huge
    /// length; a check of the buffer's front outside the codec's state took them for a prefix.
    #[test]
    fn a_payload_that_arrives_after_its_prefix_is_never_read_as_a_length() {
        let mut decoder = FrameDecoder::new(10);
        let mut src = BytesMut::from(&[0u8, 0, 0, 5][..]);
        assert_eq!(decoder.decode(&mut src).unwrap(), None);
        src.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(decoder.decode(&mut src).unwrap(), None);
        src.extend_from_slice(&[1]);
        let frame = decoder.decode(&mut src).unwrap().unwrap();
        assert_eq!(&frame[..], &[0xff, 0xff, 0xff, 0xff, 1]);
    }

    #[test]
    fn frames_back_to_back_are_split_at_their_lengths() {
        let results = read_all(&[0, 0, 0, 2, 7, 8, 0, 0, 0, 0, 0, 0, 0, 1, 9], 10);
        let frames: Vec<Vec<u8>> = results.into_iter().map(|r| r.unwrap().to_vec()).collect();
        assert_eq!(frames, [vec![7, 8], vec![], vec![9]]);
    }

    #[test]
    fn a_stream_that_ends_inside_a_frame_is_an_unexpected_eof() {
        for cut in [&[0u8, 0][..], &[0, 0, 0, 3, 1]] {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let results: Vec<io::Result<Bytes>> =
                rt.block_on(FramedRead::new(cut, FrameDecoder::new(10)).collect());
            let kinds: Vec<_> = results
                .iter()
                .map(|r| r.as_ref().map_err(io::Error::kind).map(|_| ()))
                .collect();
            assert_eq!(kinds, [Err(io::ErrorKind::UnexpectedEof)], "{cut:?}");
        }
    }
}
