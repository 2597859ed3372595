//! The gateway tests' own reader of the participant protocol's TCP frames (shared by
//! `gateway_loopback.rs` and `gateway_soak.rs` through `#[path]`).

/// Reads one length-prefixed frame: the test's own reader, written from the protocol's
/// description independently of the gateway's codec; `None` at a clean end of stream.
pub(crate) async fn read_frame(
    reader: &mut (impl tokio::io::AsyncRead + Unpin),
    max: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    use tokio::io::AsyncReadExt;
    let mut prefix = [0u8; 4];
    match reader.read_exact(&mut prefix).await {
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(error) => return Err(error),
    }
    let len = u32::from_be_bytes(prefix) as usize;
    if len > max {
        return Err(std::io::Error::other(format!(
            "a frame of {len} bytes (limit {max})"
        )));
    }
    let mut payload = vec![0u8; len];
    reader.read_exact(&mut payload).await?;
    Ok(Some(payload))
}
