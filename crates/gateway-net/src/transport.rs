//! The two transports participants can use, carrying the same frames (see [`crate::frame`]):
//!
//! - **TCP** (`--listen`): each frame is a `u32` big-endian length then the payload;
//! - **WebSocket** (`--listen-ws`, client addresses `ws://HOST:PORT`): each frame's payload is one
//!   binary message (the message carries the length, so there is no prefix). Text messages are
//!   refused; pings are answered by the WebSocket layer; a close ends the connection.
//!
//! Both end in the same handshake, buffers and limits: a message longer than the frame limit is
//! refused before it is buffered (the WebSocket layer is configured with the same limit, so an
//! oversized message never reaches memory whole), and reading never panics on outside bytes.

use crate::frame::{framed, FrameDecoder};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use std::io;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;
use tokio_util::codec::FramedRead;

type Ws = WebSocketStream<TcpStream>;

/// The WebSocket layer's limits for messages read with frame limit `max`: one frame per
/// message, so no message (and no WebSocket frame of one) may exceed it.
pub(crate) fn ws_config(max: usize) -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(max))
        .max_frame_size(Some(max))
}

/// The reading half of a participant connection.
pub(crate) enum FrameReader {
    Tcp(FramedRead<OwnedReadHalf, FrameDecoder>),
    Ws(SplitStream<Ws>),
}

/// The writing half of a participant connection.
pub(crate) enum FrameWriter {
    Tcp(OwnedWriteHalf),
    Ws(SplitSink<Ws, Message>),
}

/// Splits a TCP stream into frame halves.
pub(crate) fn tcp(stream: TcpStream) -> (FrameReader, FrameWriter) {
    let (reader, writer) = stream.into_split();
    // The limit is set again by each `FrameReader::next`; this one only has to be valid.
    let frames = FramedRead::new(reader, FrameDecoder::new(crate::frame::UPLINK_FRAME_MAX));
    (FrameReader::Tcp(frames), FrameWriter::Tcp(writer))
}

/// Splits an accepted (or connected) WebSocket into frame halves.
pub(crate) fn ws(stream: Ws) -> (FrameReader, FrameWriter) {
    let (writer, reader) = stream.split();
    (FrameReader::Ws(reader), FrameWriter::Ws(writer))
}

fn invalid(text: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, text)
}

impl FrameReader {
    /// The next frame's payload, at most `max` bytes; `Ok(None)` when the peer ended the
    /// connection cleanly; an error for anything that is not a frame (then close).
    pub(crate) async fn next(&mut self, max: usize) -> io::Result<Option<Vec<u8>>> {
        match self {
            FrameReader::Tcp(frames) => {
                frames.decoder_mut().set_max(max);
                // FramedRead keeps a partly read frame across calls, so a caller may time this
                // out and call again without losing bytes.
                match frames.next().await {
                    None => Ok(None),
                    Some(frame) => frame.map(|payload| Some(payload.to_vec())),
                }
            }
            FrameReader::Ws(reader) => loop {
                let message = match reader.next().await {
                    None => return Ok(None),
                    Some(Err(WsError::Io(error))) => return Err(error),
                    Some(Err(WsError::ConnectionClosed | WsError::AlreadyClosed)) => {
                        return Ok(None)
                    }
                    // Over the size limit, a protocol violation, bad UTF-8...: not a frame.
                    Some(Err(error)) => return Err(invalid(format!("websocket: {error}"))),
                    Some(Ok(message)) => message,
                };
                match message {
                    Message::Binary(payload) => {
                        if payload.len() > max {
                            return Err(invalid(format!(
                                "a message of {} bytes exceeds the limit of {max}",
                                payload.len()
                            )));
                        }
                        return Ok(Some(payload.to_vec()));
                    }
                    // Answered by the WebSocket layer (on the next write or flush).
                    Message::Ping(_) | Message::Pong(_) => continue,
                    Message::Close(_) => return Ok(None),
                    Message::Text(_) | Message::Frame(_) => {
                        return Err(invalid(
                            "frames travel as binary WebSocket messages, not text".into(),
                        ))
                    }
                }
            },
        }
    }
}

impl FrameWriter {
    /// Sends one frame's payload (with its length prefix on TCP).
    pub(crate) async fn send(&mut self, payload: &[u8]) -> io::Result<()> {
        match self {
            FrameWriter::Tcp(writer) => writer.write_all(&framed(payload)).await,
            FrameWriter::Ws(writer) => writer
                .send(Message::binary(payload.to_vec()))
                .await
                .map_err(|error| io::Error::other(format!("websocket: {error}"))),
        }
    }

    /// Ends the connection (a TCP shutdown, or a WebSocket close).
    pub(crate) async fn close(&mut self) {
        match self {
            FrameWriter::Tcp(writer) => {
                let _ = writer.shutdown().await;
            }
            FrameWriter::Ws(writer) => {
                let _ = writer.close().await;
            }
        }
    }
}
