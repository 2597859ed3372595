//! Length-prefixed frames: a 4-byte big-endian length, then that many bytes. A length above the
//! limit is refused from its prefix, before the body is buffered; a frame, once begun, must
//! arrive whole within a timeout; a write must finish within a timeout. Frames are read by
//! `tokio_util`'s [`LengthDelimitedCodec`] ([`FrameReader`]), as the gateway's are.

use std::io;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio_util::codec::{Decoder, FramedRead, LengthDelimitedCodec, LengthDelimitedCodecError};
use walras_types::codec::{Reader, Writer};

/// Largest frame accepted: a request carries at most 16 input certificates of at most a few
/// hundred votes each; 4 MiB leaves room for committees of a few hundred validators.
pub const FRAME_BYTES_MAX: usize = 4 << 20;
/// How long the rest of a frame may take once its first byte has arrived.
pub(crate) const FRAME_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long writing one frame may take (a peer that does not read is dropped).
pub(crate) const FRAME_WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a frame could not be read or written.
#[derive(Debug, Error)]
pub enum FrameError {
    #[error("the peer closed the connection")]
    Closed,
    #[error("frame of {bytes} bytes is over the limit of {max} bytes", max = FRAME_BYTES_MAX)]
    TooLarge { bytes: usize },
    #[error("the frame did not arrive within {0:?}")]
    ReadTimeout(Duration),
    #[error("the frame could not be written within {0:?}")]
    WriteTimeout(Duration),
    #[error("connection error: {0}")]
    Io(#[from] io::Error),
}

/// The body length a frame's 4-byte prefix announces (read through the exchange's one codec),
/// refused above [`FRAME_BYTES_MAX`] before anything is allocated for it.
pub(crate) fn frame_length(prefix: &[u8; 4]) -> Result<usize, FrameError> {
    let length = Reader::new(prefix)
        .u32()
        .map_err(|error| FrameError::Io(io::Error::new(io::ErrorKind::InvalidData, error)))?;
    let length = length as usize;
    if length > FRAME_BYTES_MAX {
        return Err(FrameError::TooLarge { bytes: length });
    }
    Ok(length)
}

/// The length-delimited codec, with an end inside a frame reported as `UnexpectedEof` (the
/// codec's own is an untyped "bytes remaining on stream").
struct FrameCodec(LengthDelimitedCodec);

impl Decoder for FrameCodec {
    type Item = BytesMut;
    type Error = io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> io::Result<Option<BytesMut>> {
        self.0.decode(src)
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> io::Result<Option<BytesMut>> {
        match self.0.decode(src)? {
            Some(frame) => Ok(Some(frame)),
            None if src.is_empty() => Ok(None),
            None => Err(io::ErrorKind::UnexpectedEof.into()),
        }
    }
}

/// The frames of one connection's byte stream.
pub struct FrameReader<R> {
    frames: FramedRead<R, FrameCodec>,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub fn new(reader: R) -> FrameReader<R> {
        let codec = LengthDelimitedCodec::builder()
            .length_field_length(4)
            .big_endian()
            .max_frame_length(FRAME_BYTES_MAX)
            .new_codec();
        FrameReader {
            frames: FramedRead::new(reader, FrameCodec(codec)),
        }
    }

    /// The next frame's body. Waits without limit while no frame has begun (idle connections
    /// are allowed; the caller bounds idleness); once one has, it must be whole by the end of
    /// the next [`FRAME_READ_TIMEOUT`] window (so within one to two of them), else
    /// `ReadTimeout`. A stream that ends, between frames or inside one, is `Closed`.
    pub async fn next(&mut self) -> Result<Bytes, FrameError> {
        let mut begun = false;
        loop {
            // Cancel-safe: a frame read in part stays in the codec's buffer.
            match tokio::time::timeout(FRAME_READ_TIMEOUT, self.frames.next()).await {
                Ok(Some(Ok(body))) => return Ok(body.freeze()),
                Ok(Some(Err(error))) => return Err(self.typed(error)),
                Ok(None) => return Err(FrameError::Closed),
                Err(_) if begun => return Err(FrameError::ReadTimeout(FRAME_READ_TIMEOUT)),
                Err(_) => begun = !self.frames.read_buffer().is_empty(),
            }
        }
    }

    /// The codec's errors as [`FrameError`]s: "frame size too big" is refused before the
    /// prefix is consumed, so the length is read from the buffer's front; an end inside a
    /// frame is `Closed`, as a peer that went away.
    fn typed(&self, error: io::Error) -> FrameError {
        if error
            .get_ref()
            .is_some_and(|inner| inner.is::<LengthDelimitedCodecError>())
        {
            let prefix: Option<[u8; 4]> = self
                .frames
                .read_buffer()
                .get(..4)
                .and_then(|front| front.try_into().ok());
            if let Some(Err(too_large)) = prefix.map(|prefix| frame_length(&prefix)) {
                return too_large;
            }
        }
        match error.kind() {
            io::ErrorKind::UnexpectedEof => FrameError::Closed,
            _ => FrameError::Io(error),
        }
    }
}

/// Writes one frame within `FRAME_WRITE_TIMEOUT`.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    writer: &mut W,
    body: &[u8],
) -> Result<(), FrameError> {
    if body.len() > FRAME_BYTES_MAX {
        return Err(FrameError::TooLarge { bytes: body.len() });
    }
    tokio::time::timeout(FRAME_WRITE_TIMEOUT, async {
        let mut prefix = Vec::with_capacity(4);
        prefix.put_u32(body.len() as u32);
        writer.write_all(&prefix).await?;
        writer.write_all(body).await?;
        writer.flush().await
    })
    .await
    .map_err(|_| FrameError::WriteTimeout(FRAME_WRITE_TIMEOUT))??;
    Ok(())
}

/// Appends `body` as one frame to `out` (for writers that send several frames in one write).
pub(crate) fn push_frame(out: &mut Vec<u8>, body: &[u8]) -> Result<(), FrameError> {
    if body.len() > FRAME_BYTES_MAX {
        return Err(FrameError::TooLarge { bytes: body.len() });
    }
    out.put_u32(body.len() as u32);
    out.put_bytes(body);
    Ok(())
}

/// Writes bytes already framed by [`push_frame`] within `FRAME_WRITE_TIMEOUT`.
pub(crate) async fn write_framed<W: AsyncWrite + Unpin>(
    writer: &mut W,
    framed: &[u8],
) -> Result<(), FrameError> {
    tokio::time::timeout(FRAME_WRITE_TIMEOUT, async {
        writer.write_all(framed).await?;
        writer.flush().await
    })
    .await
    .map_err(|_| FrameError::WriteTimeout(FRAME_WRITE_TIMEOUT))??;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout: a big-endian `u32` length, then the body; the prefix reads back.
    #[test]
    fn a_frame_is_its_big_endian_length_then_its_body() {
        let mut out = Vec::new();
        push_frame(&mut out, b"abc").unwrap();
        push_frame(&mut out, &[]).unwrap();
        assert_eq!(out, [0, 0, 0, 3, b'a', b'b', b'c', 0, 0, 0, 0]);
        assert_eq!(frame_length(&[0, 0, 0, 3]).unwrap(), 3);
        assert_eq!(frame_length(&[0, 1, 2, 3]).unwrap(), 0x0001_0203);
    }

    #[test]
    fn a_length_over_the_limit_is_refused_from_its_prefix() {
        let at_limit = (FRAME_BYTES_MAX as u32).to_be_bytes();
        assert_eq!(frame_length(&at_limit).unwrap(), FRAME_BYTES_MAX);
        let over = (FRAME_BYTES_MAX as u32 + 1).to_be_bytes();
        assert!(matches!(
            frame_length(&over),
            Err(FrameError::TooLarge { bytes }) if bytes == FRAME_BYTES_MAX + 1
        ));
        assert!(matches!(
            push_frame(&mut Vec::new(), &vec![0; FRAME_BYTES_MAX + 1]),
            Err(FrameError::TooLarge { .. })
        ));
    }

    /// Bytes in, frames out, over a real async stream: the prefix read and the body.
    #[tokio::test]
    async fn frames_read_back_from_a_stream() {
        let mut framed = Vec::new();
        push_frame(&mut framed, b"first").unwrap();
        push_frame(&mut framed, b"second").unwrap();
        let mut frames = FrameReader::new(framed.as_slice());
        assert_eq!(frames.next().await.unwrap(), &b"first"[..]);
        assert_eq!(frames.next().await.unwrap(), &b"second"[..]);
        assert!(matches!(frames.next().await, Err(FrameError::Closed)));
    }

    /// A frame begun and then stalled is a `ReadTimeout` (after one or two windows of
    /// `FRAME_READ_TIMEOUT`); a connection with no frame begun waits without limit.
    #[tokio::test(start_paused = true)]
    async fn a_stalled_frame_times_out_and_an_idle_connection_does_not() {
        let (mut peer, ours) = tokio::io::duplex(64);
        let mut frames = FrameReader::new(ours);
        let idle = tokio::time::timeout(FRAME_READ_TIMEOUT * 5, frames.next()).await;
        assert!(idle.is_err(), "an idle connection is still waiting");
        peer.write_all(&[0, 0, 0, 9, b'x']).await.unwrap();
        let started = tokio::time::Instant::now();
        assert!(matches!(
            frames.next().await,
            Err(FrameError::ReadTimeout(_))
        ));
        assert!(started.elapsed() <= FRAME_READ_TIMEOUT * 2);
    }
}
