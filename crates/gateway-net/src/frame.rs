//! The participant protocol's frames on sockets: the codec itself is [`walras_gateway::frame`]
//! (pure, fuzzed); this module adds reading one length-prefixed frame from an async stream.

pub use walras_gateway::frame::*;

/// Reads one frame's payload; `Ok(None)` on a clean end of stream before a frame starts.
pub async fn read_frame<R: tokio::io::AsyncRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    use tokio::io::AsyncReadExt;
    let mut len = [0u8; 4];
    match reader.read_exact(&mut len).await {
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(error) => return Err(error),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            FrameError::TooLarge { len, max },
        ));
    }
    let mut payload = vec![0u8; len];
    reader.read_exact(&mut payload).await?;
    Ok(Some(payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oversized_frame_is_refused_before_it_is_read() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut bytes: &[u8] = &[0xff, 0xff, 0xff, 0xff, 1, 2, 3];
        let error = rt
            .block_on(read_frame(&mut bytes, UPLINK_FRAME_MAX))
            .unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
        let mut empty: &[u8] = &[];
        assert_eq!(rt.block_on(read_frame(&mut empty, 10)).unwrap(), None);
    }
}
