//! Length-prefixed frames: a 4-byte big-endian length, then that many bytes. A length above the
//! limit is refused before anything is allocated; a frame must arrive whole within a timeout once
//! its first byte has; a write must finish within a timeout.

use std::io;
use std::time::Duration;

use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest frame accepted: a request carries at most 16 input certificates of at most a few
/// hundred votes each; 4 MiB leaves room for committees of a few hundred validators.
pub const FRAME_BYTES_MAX: usize = 4 << 20;
/// How long the rest of a frame may take once its first byte has arrived.
pub const FRAME_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long writing one frame may take (a peer that does not read is dropped).
pub const FRAME_WRITE_TIMEOUT: Duration = Duration::from_secs(10);

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

/// Reads one frame. Waits without limit for its first byte (idle connections are allowed; the
/// caller bounds idleness), then at most `FRAME_READ_TIMEOUT` for the rest.
pub async fn read_frame<R: AsyncRead + Unpin>(reader: &mut R) -> Result<Vec<u8>, FrameError> {
    let mut first = [0u8; 1];
    if reader.read(&mut first).await? == 0 {
        return Err(FrameError::Closed);
    }
    tokio::time::timeout(FRAME_READ_TIMEOUT, async {
        let mut rest = [0u8; 3];
        reader.read_exact(&mut rest).await?;
        let length = u32::from_be_bytes([first[0], rest[0], rest[1], rest[2]]) as usize;
        if length > FRAME_BYTES_MAX {
            return Err(FrameError::TooLarge { bytes: length });
        }
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
        writer.write_all(&(body.len() as u32).to_be_bytes()).await?;
        writer.write_all(body).await?;
        writer.flush().await
    })
    .await
    .map_err(|_| FrameError::WriteTimeout(FRAME_WRITE_TIMEOUT))??;
    Ok(())
}

/// Appends `body` as one frame to `out` (for writers that send several frames in one write).
pub fn push_frame(out: &mut Vec<u8>, body: &[u8]) -> Result<(), FrameError> {
    if body.len() > FRAME_BYTES_MAX {
        return Err(FrameError::TooLarge { bytes: body.len() });
    }
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
    Ok(())
}

/// Writes bytes already framed by [`push_frame`] within `FRAME_WRITE_TIMEOUT`.
pub async fn write_framed<W: AsyncWrite + Unpin>(
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
