//! The participant protocol: length-prefixed frames over TCP.
//!
//! A frame is a `u32` big-endian payload length then the payload; the payload is a tag byte and
//! the message's fields, integers big-endian. Uplink frames are at most [`UPLINK_FRAME_MAX`] bytes,
//! downlink frames at most [`DOWNLINK_FRAME_MAX`]; a longer announced length closes the connection
//! before anything is buffered. Decoding never panics: every read is bounds-checked and returns a
//! typed [`FrameError`], and a decoded message re-encodes to the same bytes.
//!
//! Uplink (participant → gateway), each trade and heartbeat carrying the delivery clock its
//! release buffer (in the client library) stamped it with:
//! - `1` Hello: protocol version `u16`, participant `u32`;
//! - `2` Heartbeat: seq `u64`, clock point `u64`, clock elapsed ns `u64`;
//! - `3` Trade: seq, point, elapsed, then the canonical `SignedTransaction` encoding (rest of frame).
//!
//! Downlink (gateway → participant):
//! - `1` Welcome: participant `u32`, current height `u64`, last accepted seq `u64` (`u64::MAX`: none);
//! - `2` Block: height `u64`, block hash `[32]`, state root `[32]`, valuations (`u16` count, `u128`
//!   each), then the participant's own results in that block (`u32` count; seq `u64`, dropped
//!   reason (`u8` length, ASCII; empty = accepted));
//! - `3` Notice: seq `u64` (`u64::MAX`: not about one message), code `u8` ([`NoticeCode`]), text
//!   (`u16` length, UTF-8);
//! - `4` Refused: text (`u16` length, UTF-8); the gateway closes the connection after it.

use thiserror::Error;
use walras_gateway::DeliveryClock;

/// The protocol version a Hello must carry.
pub const PROTOCOL_VERSION: u16 = 1;
/// Largest uplink payload (a trade's transaction is well under 1 KiB).
pub const UPLINK_FRAME_MAX: usize = 16 * 1024;
/// Largest downlink payload (valuations of up to 65,535 assets and one block's own results).
pub const DOWNLINK_FRAME_MAX: usize = 4 * 1024 * 1024;
const NONE_SEQ: u64 = u64::MAX;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    #[error("frame of {len} bytes exceeds the limit of {max}")]
    TooLarge { len: usize, max: usize },
    #[error("empty frame")]
    Empty,
    #[error("unknown message tag {0}")]
    UnknownTag(u8),
    #[error("the frame ends inside {0}")]
    Truncated(&'static str),
    #[error("{0} trailing bytes after the message")]
    Trailing(usize),
    #[error("{0} is not valid text")]
    BadText(&'static str),
    #[error("unknown notice code {0}")]
    UnknownNotice(u8),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Uplink {
    Hello {
        version: u16,
        participant: u32,
    },
    Heartbeat {
        seq: u64,
        clock: DeliveryClock,
    },
    Trade {
        seq: u64,
        clock: DeliveryClock,
        transaction: Vec<u8>,
    },
}

/// One of the participant's own transactions in a block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnResult {
    pub seq: u64,
    /// `None`: accepted; `Some(reason)`: dropped by the block filter.
    pub dropped: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockData {
    pub height: u64,
    pub block_hash: [u8; 32],
    pub state_root: [u8; 32],
    pub valuations: Vec<u128>,
    pub own: Vec<OwnResult>,
}

/// Why the gateway tells a participant something about its messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoticeCode {
    /// The trade arrived below a sealed boundary: it goes into the next block, flagged late.
    Late = 1,
    /// The ordering buffer is full: the trade was not taken; send it again later.
    QueueFull = 2,
    /// The message was refused (reason in the text) and changed nothing.
    Refused = 3,
    /// The gateway stopped waiting for this participant (round trip or silence).
    Straggler = 4,
    /// The participant holds seals back again.
    Rejoined = 5,
}

impl NoticeCode {
    fn from_u8(code: u8) -> Result<NoticeCode, FrameError> {
        Ok(match code {
            1 => NoticeCode::Late,
            2 => NoticeCode::QueueFull,
            3 => NoticeCode::Refused,
            4 => NoticeCode::Straggler,
            5 => NoticeCode::Rejoined,
            other => return Err(FrameError::UnknownNotice(other)),
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Downlink {
    Welcome {
        participant: u32,
        height: u64,
        last_seq: Option<u64>,
    },
    Block(BlockData),
    Notice {
        seq: Option<u64>,
        code: NoticeCode,
        text: String,
    },
    Refused {
        text: String,
    },
}

fn put_text(out: &mut Vec<u8>, text: &str) {
    // Texts are ours and short; cut at a character boundary rather than fail.
    let mut end = text.len().min(u16::MAX as usize);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    out.extend_from_slice(&(end as u16).to_be_bytes());
    out.extend_from_slice(&text.as_bytes()[..end]);
}

fn put_clock(out: &mut Vec<u8>, seq: u64, clock: DeliveryClock) {
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend_from_slice(&clock.point.to_be_bytes());
    out.extend_from_slice(&clock.elapsed_ns.to_be_bytes());
}

impl Uplink {
    /// The payload (without the length prefix).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32);
        match self {
            Uplink::Hello {
                version,
                participant,
            } => {
                out.push(1);
                out.extend_from_slice(&version.to_be_bytes());
                out.extend_from_slice(&participant.to_be_bytes());
            }
            Uplink::Heartbeat { seq, clock } => {
                out.push(2);
                put_clock(&mut out, *seq, *clock);
            }
            Uplink::Trade {
                seq,
                clock,
                transaction,
            } => {
                out.push(3);
                put_clock(&mut out, *seq, *clock);
                out.extend_from_slice(transaction);
            }
        }
        out
    }

    pub fn decode(payload: &[u8]) -> Result<Uplink, FrameError> {
        if payload.len() > UPLINK_FRAME_MAX {
            return Err(FrameError::TooLarge {
                len: payload.len(),
                max: UPLINK_FRAME_MAX,
            });
        }
        let mut r = Reader::new(payload);
        let message = match r.u8("tag").map_err(|_| FrameError::Empty)? {
            1 => Uplink::Hello {
                version: r.u16("version")?,
                participant: r.u32("participant")?,
            },
            2 => {
                let (seq, clock) = r.clock()?;
                Uplink::Heartbeat { seq, clock }
            }
            3 => {
                let (seq, clock) = r.clock()?;
                let transaction = r.rest().to_vec();
                Uplink::Trade {
                    seq,
                    clock,
                    transaction,
                }
            }
            tag => return Err(FrameError::UnknownTag(tag)),
        };
        r.finish()?;
        Ok(message)
    }
}

impl Downlink {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        match self {
            Downlink::Welcome {
                participant,
                height,
                last_seq,
            } => {
                out.push(1);
                out.extend_from_slice(&participant.to_be_bytes());
                out.extend_from_slice(&height.to_be_bytes());
                out.extend_from_slice(&last_seq.unwrap_or(NONE_SEQ).to_be_bytes());
            }
            Downlink::Block(block) => {
                out.push(2);
                out.extend_from_slice(&block.height.to_be_bytes());
                out.extend_from_slice(&block.block_hash);
                out.extend_from_slice(&block.state_root);
                let valuations = &block.valuations[..block.valuations.len().min(u16::MAX as usize)];
                out.extend_from_slice(&(valuations.len() as u16).to_be_bytes());
                for v in valuations {
                    out.extend_from_slice(&v.to_be_bytes());
                }
                out.extend_from_slice(&(block.own.len() as u32).to_be_bytes());
                for own in &block.own {
                    out.extend_from_slice(&own.seq.to_be_bytes());
                    let reason = own.dropped.as_deref().unwrap_or("");
                    let len = reason.len().min(255);
                    out.push(len as u8);
                    out.extend_from_slice(&reason.as_bytes()[..len]);
                }
            }
            Downlink::Notice { seq, code, text } => {
                out.push(3);
                out.extend_from_slice(&seq.unwrap_or(NONE_SEQ).to_be_bytes());
                out.push(*code as u8);
                put_text(&mut out, text);
            }
            Downlink::Refused { text } => {
                out.push(4);
                put_text(&mut out, text);
            }
        }
        out
    }

    pub fn decode(payload: &[u8]) -> Result<Downlink, FrameError> {
        if payload.len() > DOWNLINK_FRAME_MAX {
            return Err(FrameError::TooLarge {
                len: payload.len(),
                max: DOWNLINK_FRAME_MAX,
            });
        }
        let mut r = Reader::new(payload);
        let message = match r.u8("tag").map_err(|_| FrameError::Empty)? {
            1 => Downlink::Welcome {
                participant: r.u32("participant")?,
                height: r.u64("height")?,
                last_seq: Some(r.u64("last seq")?).filter(|&s| s != NONE_SEQ),
            },
            2 => {
                let height = r.u64("height")?;
                let block_hash = r.array32("block hash")?;
                let state_root = r.array32("state root")?;
                let count = usize::from(r.u16("valuation count")?);
                let mut valuations = Vec::with_capacity(count.min(r.remaining() / 16));
                for _ in 0..count {
                    valuations.push(u128::from_be_bytes(r.array("valuation")?));
                }
                let own_count = r.u32("result count")? as usize;
                let mut own = Vec::with_capacity(own_count.min(r.remaining() / 9));
                for _ in 0..own_count {
                    let seq = r.u64("result seq")?;
                    let len = usize::from(r.u8("reason length")?);
                    let reason = r.bytes(len, "reason")?;
                    if !reason.is_ascii() {
                        return Err(FrameError::BadText("reason"));
                    }
                    let reason = String::from_utf8_lossy(reason).into_owned();
                    own.push(OwnResult {
                        seq,
                        dropped: Some(reason).filter(|r| !r.is_empty()),
                    });
                }
                Downlink::Block(BlockData {
                    height,
                    block_hash,
                    state_root,
                    valuations,
                    own,
                })
            }
            3 => Downlink::Notice {
                seq: Some(r.u64("seq")?).filter(|&s| s != NONE_SEQ),
                code: NoticeCode::from_u8(r.u8("notice code")?)?,
                text: r.text("notice text")?,
            },
            4 => Downlink::Refused {
                text: r.text("refusal text")?,
            },
            tag => return Err(FrameError::UnknownTag(tag)),
        };
        r.finish()?;
        Ok(message)
    }
}

/// Prefixes a payload with its length.
pub fn framed(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + payload.len());
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

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

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn bytes(&mut self, len: usize, what: &'static str) -> Result<&'a [u8], FrameError> {
        if self.remaining() < len {
            return Err(FrameError::Truncated(what));
        }
        let out = &self.bytes[self.at..self.at + len];
        self.at += len;
        Ok(out)
    }

    fn rest(&mut self) -> &'a [u8] {
        let out = &self.bytes[self.at..];
        self.at = self.bytes.len();
        out
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], FrameError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N, what)?);
        Ok(out)
    }

    fn array32(&mut self, what: &'static str) -> Result<[u8; 32], FrameError> {
        self.array::<32>(what)
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, FrameError> {
        Ok(self.array::<1>(what)?[0])
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, FrameError> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, FrameError> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, FrameError> {
        Ok(u64::from_be_bytes(self.array(what)?))
    }

    fn clock(&mut self) -> Result<(u64, DeliveryClock), FrameError> {
        let seq = self.u64("seq")?;
        let point = self.u64("clock point")?;
        let elapsed_ns = self.u64("clock elapsed")?;
        Ok((seq, DeliveryClock::new(point, elapsed_ns)))
    }

    fn text(&mut self, what: &'static str) -> Result<String, FrameError> {
        let len = usize::from(self.u16(what)?);
        let bytes = self.bytes(len, what)?;
        std::str::from_utf8(bytes)
            .map(str::to_string)
            .map_err(|_| FrameError::BadText(what))
    }

    fn finish(&self) -> Result<(), FrameError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(FrameError::Trailing(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn samples() -> (Vec<Uplink>, Vec<Downlink>) {
        let clock = DeliveryClock::new(7, 1_500_000);
        let up = vec![
            Uplink::Hello {
                version: PROTOCOL_VERSION,
                participant: 3,
            },
            Uplink::Heartbeat { seq: 4, clock },
            Uplink::Trade {
                seq: 5,
                clock,
                transaction: vec![9; 120],
            },
        ];
        let down = vec![
            Downlink::Welcome {
                participant: 3,
                height: 12,
                last_seq: None,
            },
            Downlink::Welcome {
                participant: 3,
                height: 12,
                last_seq: Some(40),
            },
            Downlink::Block(BlockData {
                height: 8,
                block_hash: [1; 32],
                state_root: [2; 32],
                valuations: vec![1 << 90, 3],
                own: vec![
                    OwnResult {
                        seq: 5,
                        dropped: None,
                    },
                    OwnResult {
                        seq: 6,
                        dropped: Some("replayed".into()),
                    },
                ],
            }),
            Downlink::Notice {
                seq: Some(5),
                code: NoticeCode::Late,
                text: "late".into(),
            },
            Downlink::Refused {
                text: "participant 3 is already connected".into(),
            },
        ];
        (up, down)
    }

    #[test]
    fn every_message_round_trips_and_every_truncation_is_refused() {
        let (up, down) = samples();
        for m in up {
            let bytes = m.encode();
            assert_eq!(Uplink::decode(&bytes).unwrap(), m);
            // A trade's transaction is the rest of the frame: only cuts inside the header fail.
            let fixed = if matches!(m, Uplink::Trade { .. }) {
                25
            } else {
                bytes.len()
            };
            for cut in 0..fixed {
                assert!(Uplink::decode(&bytes[..cut]).is_err(), "{m:?} cut at {cut}");
            }
        }
        for m in down {
            let bytes = m.encode();
            assert_eq!(Downlink::decode(&bytes).unwrap(), m);
            for cut in 0..bytes.len() {
                assert!(
                    Downlink::decode(&bytes[..cut]).is_err(),
                    "{m:?} cut at {cut}"
                );
            }
        }
    }

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

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4096, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn decoding_arbitrary_bytes_never_panics_and_what_decodes_re_encodes(
            bytes in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            if let Ok(m) = Uplink::decode(&bytes) {
                prop_assert_eq!(m.encode(), bytes.clone());
            }
            if let Ok(m) = Downlink::decode(&bytes) {
                prop_assert_eq!(m.encode(), bytes.clone());
            }
            // Also with each valid tag in front, so the bodies get exercised.
            for tag in 1u8..=4 {
                let mut tagged = vec![tag];
                tagged.extend_from_slice(&bytes);
                if let Ok(m) = Uplink::decode(&tagged) {
                    prop_assert_eq!(m.encode(), tagged.clone());
                }
                if let Ok(m) = Downlink::decode(&tagged) {
                    prop_assert_eq!(m.encode(), tagged.clone());
                }
            }
        }
    }
}
