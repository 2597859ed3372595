//! Length-prefixed frames: a 4-byte big-endian length, then that many bytes. A length above the
//! limit is refused before anything is allocated; a frame must arrive whole within a timeout once
//! its first byte has; a write must finish within a timeout.

use std::io;
use std::time::Duration;

use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
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

/// Reads one frame. Waits without limit for its first byte (idle connections are allowed; the
/// caller bounds idleness), then at most `FRAME_READ_TIMEOUT` for the rest.
pub async fn read_frame<R: AsyncRead + Unpin>(reader: &mut R) -> Result<Vec<u8>, FrameError> {
    let mut first = [0u8; 1];
    if reader.read(&mut first).await? == 0 {
        return Err(FrameError::Closed);
    }
    tokio::time::timeout(FRAME_READ_TIMEOUT, async {
        let mut prefix = [first[0], 0, 0, 0];
        reader.read_exact(&mut prefix[1..]).await?;
        let length = frame_length(&prefix)?;
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body).await?;
        Ok(body)
    })
    .await
    .map_err(|_| FrameError::ReadTimeout(FRAME_READ_TIMEOUT))?
    .map_err(|error| match error {
        FrameError::Io(io) if io.kind() == io::ErrorKind::UnexpectedEof => FrameError::Closed,
        other => other,
    })
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
        let mut stream = framed.as_slice();
        assert_eq!(read_frame(&mut stream).await.unwrap(), b"first");
        assert_eq!(read_frame(&mut stream).await.unwrap(), b"second");
        assert!(matches!(
            read_frame(&mut stream).await,
            Err(FrameError::Closed)
        ));
    }
}
