//! The participant protocol: length-prefixed frames over TCP, as pure encode/decode (no I/O, so
//! the fuzz targets reach it without an async runtime; `walras-gateway-net` reads and writes the
//! frames on sockets).
//!
//! A frame is a `u32` big-endian payload length then the payload; the payload is a tag byte and
//! the message's fields, integers big-endian. Uplink frames are at most [`UPLINK_FRAME_MAX`] bytes,
//! downlink frames at most [`DOWNLINK_FRAME_MAX`]; a longer announced length closes the connection
//! before anything is buffered. Decoding never panics: every read is bounds-checked and returns a
//! typed [`FrameError`], and a decoded message re-encodes to the same bytes.
//!
//! Uplink (participant → gateway), each trade and heartbeat carrying the delivery clock its
//! release buffer (in the client library) stamped it with:
//! - `1` Hello: protocol version `u16`, participant `u32`, then (versions 2 to 5) the last block
//!   height the participant received `u64` (`u64::MAX`: none; the gateway replays the blocks
//!   after it that it still holds) and the participant's Ed25519 signature `[64]` over
//!   [`hello_signing_message`] of the gateway's Challenge (version 3: the last height is under
//!   the signature too, so nobody between participant and gateway can change what is replayed;
//!   version 4: the same Hello, with notice codes 8–13 in the downlink; version 5: notice code
//!   14 too; any other version is
//!   refused with [`RefusalCode::Version`]);
//! - `2` Heartbeat: seq `u64`, clock point `u64`, clock elapsed ns `u64`;
//! - `3` Trade: seq, point, elapsed, then the canonical `SignedTransaction` encoding (rest of frame).
//!
//! Downlink (gateway → participant):
//! - `1` Welcome: participant `u32`, current height `u64`, last accepted seq `u64` (`u64::MAX`: none),
//!   then the delivery clock of that message: point `u64`, elapsed `u64` (zeros when none, and in
//!   the timer cut, which orders by arrival); a new process of the participant stamps nothing
//!   below it;
//! - `2` Block: height `u64`, block hash `[32]`, state root `[32]`, valuations (`u16` count, `u128`
//!   each), then the participant's own results in that block (`u32` count; seq `u64`, dropped
//!   reason (`u8` length, ASCII; empty = accepted)), then the block's market data
//!   ([`crate::market`]: per-pair amounts sold, book depth at this height);
//! - `3` Notice: seq `u64` (`u64::MAX`: not about one message), code `u8` ([`NoticeCode`]), text
//!   (`u16` length, UTF-8);
//! - `4` Refused: code `u8` ([`RefusalCode`]), text (`u16` length, UTF-8); the gateway closes
//!   the connection after it;
//! - `5` Challenge: the gateway's public key `[32]`, a fresh random nonce `[32]`: the first frame
//!   on every connection, answered by the Hello.
//!
//! Authentication: the gateway holds each participant's Ed25519 public key; a Hello is accepted
//! only with a valid signature over this connection's nonce, so a participant cannot connect as
//! another (and take its place in the ordering buffer, its results, its heartbeats), and a
//! recorded Hello is useless on any other connection.

use crate::market::MarketData;
use crate::DeliveryClock;
use std::sync::Arc;
use thiserror::Error;
use walras_types::codec::{self, Reader, Writer};

/// The protocol version a Hello must carry (6: the Welcome carries the last clock seen, which
/// a version-5 client could not decode; 5: notice code 14, `InsufficientBalance`, which a
/// version-4 client could not decode; 4: notice codes 8–13, refusals of impossible
/// clocks, full shares, duplicates, replays and busy checks, which a version-3 client could not
/// decode; 3: signed Hellos answering a Challenge, the last height received under the
/// signature; 2 signed the same without the last height). The Hello's signing domain is
/// unchanged since 3: what is signed did not change.
pub const PROTOCOL_VERSION: u16 = 6;
/// Domain separation of a participant's signature over a Challenge.
pub const HELLO_SIGNING_DOMAIN: &[u8] = b"walras-gateway-hello-v3\0";

/// The bytes a participant signs to answer a Challenge: the domain, the gateway's public key
/// (a challenge relayed from another gateway does not verify here), the nonce, the participant
/// number claimed and the last block height it received (`u64::MAX`: none), as the Hello
/// carries it: changing the height in flight (to make the gateway replay fewer blocks, or
/// more) breaks the signature.
pub fn hello_signing_message(
    gateway_key: &[u8; 32],
    nonce: &[u8; 32],
    participant: u32,
    last_height: Option<u64>,
) -> Vec<u8> {
    let mut message = Vec::with_capacity(HELLO_SIGNING_DOMAIN.len() + 76);
    message.extend_from_slice(HELLO_SIGNING_DOMAIN);
    message.extend_from_slice(gateway_key);
    message.extend_from_slice(nonce);
    message.extend_from_slice(&participant.to_be_bytes());
    message.extend_from_slice(&last_height.unwrap_or(NONE_SEQ).to_be_bytes());
    message
}
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
    /// Truncated, trailing bytes, an unknown message tag or notice code, text not in its
    /// encoding.
    #[error("frame {0}")]
    Codec(#[from] codec::DecodeError),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Uplink {
    Hello {
        version: u16,
        participant: u32,
        /// Version 2's fields; `None` in a version-1 Hello (which the gateway refuses, naming
        /// the version).
        signed: Option<SignedHello>,
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

/// What a version-2 Hello adds to the version and the participant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignedHello {
    /// The last block the participant received (on a reconnect), so the gateway can replay the
    /// ones it missed.
    pub last_height: Option<u64>,
    /// The participant's signature over [`hello_signing_message`].
    pub signature: [u8; 64],
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
    /// Per-pair amounts and book depth at this height (shared: the gateway sends one block to
    /// every participant).
    pub market: Arc<MarketData>,
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
    /// The trade's signature does not verify with its source account's key (the one acceptance
    /// rule, `walras_crypto::signature_accepted`): it was not taken.
    BadSignature = 6,
    /// The trade's source account does not exist at the node's tip: it was not taken.
    UnknownSource = 7,
    /// The message's clock names a point (block) above the published height: impossible, so
    /// it was not taken (nor counted as a heartbeat).
    ClockAhead = 8,
    /// The participant holds its share of the ordering buffer: the trade was not taken; send
    /// it again once a block has taken some of its trades.
    ShareFull = 9,
    /// A transaction with the same source and sequence number waits for a block already (a
    /// copy, or another transaction reusing the number): it was not taken.
    Duplicate = 10,
    /// The sequence number was used by a committed transaction (the node's `replayed`): it was
    /// not taken.
    Replayed = 11,
    /// The sequence number is beyond the account's window (the node's
    /// `sequence_out_of_window`): it was not taken.
    SequenceOutOfWindow = 12,
    /// The gateway could not check the trade now (the node was busy, or the connection used its
    /// lookups of unknown accounts): it was not taken; send it again.
    Busy = 13,
    /// The trade debits more of an asset than its source holds, as the gateway read the
    /// account from the node at the last published block (the node's `insufficient_balance`;
    /// the text says how much is available and asked): it was not taken.
    InsufficientBalance = 14,
}

/// Why the gateway refused a connection (the `Refused` frame's code; the text says more).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalCode {
    /// The Hello's protocol version is not [`PROTOCOL_VERSION`].
    Version = 1,
    /// The Hello claims a participant number the gateway does not serve.
    UnknownParticipant = 2,
    /// The Hello's signature is missing, malformed, or does not verify (over this connection's
    /// Challenge, the participant number and the last height) with the participant's key.
    BadSignature = 3,
    /// The first frame was not a Hello, or not a frame at all.
    NotAHello = 4,
    /// No Hello within the handshake timeout.
    Timeout = 5,
    /// The participant is already connected on another connection.
    AlreadyConnected = 6,
    /// The gateway could not serve the connection (it could not draw a challenge).
    Unavailable = 7,
}

impl RefusalCode {
    fn from_u8(code: u8) -> Result<RefusalCode, FrameError> {
        Ok(match code {
            1 => RefusalCode::Version,
            2 => RefusalCode::UnknownParticipant,
            3 => RefusalCode::BadSignature,
            4 => RefusalCode::NotAHello,
            5 => RefusalCode::Timeout,
            6 => RefusalCode::AlreadyConnected,
            7 => RefusalCode::Unavailable,
            tag => return Err(bad_tag("refusal code", tag)),
        })
    }
}

impl NoticeCode {
    fn from_u8(code: u8) -> Result<NoticeCode, FrameError> {
        Ok(match code {
            1 => NoticeCode::Late,
            2 => NoticeCode::QueueFull,
            3 => NoticeCode::Refused,
            4 => NoticeCode::Straggler,
            5 => NoticeCode::Rejoined,
            6 => NoticeCode::BadSignature,
            7 => NoticeCode::UnknownSource,
            8 => NoticeCode::ClockAhead,
            9 => NoticeCode::ShareFull,
            10 => NoticeCode::Duplicate,
            11 => NoticeCode::Replayed,
            12 => NoticeCode::SequenceOutOfWindow,
            13 => NoticeCode::Busy,
            14 => NoticeCode::InsufficientBalance,
            tag => return Err(bad_tag("notice code", tag)),
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Downlink {
    Welcome {
        participant: u32,
        height: u64,
        last_seq: Option<u64>,
        /// The delivery clock of the message numbered `last_seq` (zero when none, and in the
        /// timer cut): a new process of the participant stamps nothing below it.
        last_clock: DeliveryClock,
    },
    Block(BlockData),
    Notice {
        seq: Option<u64>,
        code: NoticeCode,
        text: String,
    },
    Refused {
        code: RefusalCode,
        text: String,
    },
    Challenge {
        gateway_key: [u8; 32],
        nonce: [u8; 32],
    },
}

fn put_text(out: &mut Vec<u8>, text: &str) {
    // Texts are ours and short; cut at a character boundary rather than fail.
    let mut end = text.len().min(u16::MAX as usize);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    out.put_u16(end as u16);
    out.put_bytes(&text.as_bytes()[..end]);
}

fn put_clock(out: &mut Vec<u8>, seq: u64, clock: DeliveryClock) {
    out.put_u64(seq);
    out.put_u64(clock.point);
    out.put_u64(clock.elapsed_ns);
}

impl Uplink {
    /// The payload (without the length prefix).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32);
        match self {
            Uplink::Hello {
                version,
                participant,
                signed,
            } => {
                out.put_u8(1);
                out.put_u16(*version);
                out.put_u32(*participant);
                if let Some(signed) = signed {
                    out.put_u64(signed.last_height.unwrap_or(NONE_SEQ));
                    out.put_bytes(&signed.signature);
                }
            }
            Uplink::Heartbeat { seq, clock } => {
                out.put_u8(2);
                put_clock(&mut out, *seq, *clock);
            }
            Uplink::Trade {
                seq,
                clock,
                transaction,
            } => {
                out.put_u8(3);
                put_clock(&mut out, *seq, *clock);
                out.put_bytes(transaction);
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
        let message = match r.u8().map_err(|_| FrameError::Empty)? {
            1 => {
                let version = r.u16()?;
                let participant = r.u32()?;
                // Version 1 ended here; anything after the participant is version 2's part.
                let signed = if r.is_empty() {
                    None
                } else {
                    Some(SignedHello {
                        last_height: Some(r.u64()?).filter(|&h| h != NONE_SEQ),
                        signature: r.array()?,
                    })
                };
                Uplink::Hello {
                    version,
                    participant,
                    signed,
                }
            }
            2 => {
                let (seq, clock) = read_clock(&mut r)?;
                Uplink::Heartbeat { seq, clock }
            }
            3 => {
                let (seq, clock) = read_clock(&mut r)?;
                let transaction = r.rest().to_vec();
                Uplink::Trade {
                    seq,
                    clock,
                    transaction,
                }
            }
            tag => return Err(bad_tag("message", tag)),
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
                last_clock,
            } => {
                out.put_u8(1);
                out.put_u32(*participant);
                out.put_u64(*height);
                out.put_u64(last_seq.unwrap_or(NONE_SEQ));
                out.put_u64(last_clock.point);
                out.put_u64(last_clock.elapsed_ns);
            }
            Downlink::Block(block) => {
                out.put_u8(2);
                out.put_u64(block.height);
                out.put_bytes(&block.block_hash);
                out.put_bytes(&block.state_root);
                let valuations = &block.valuations[..block.valuations.len().min(u16::MAX as usize)];
                out.put_u16(valuations.len() as u16);
                for &v in valuations {
                    out.put_u128(v);
                }
                out.put_u32(block.own.len() as u32);
                for own in &block.own {
                    out.put_u64(own.seq);
                    let reason = own.dropped.as_deref().unwrap_or("");
                    let len = reason.len().min(255);
                    out.put_u8(len as u8);
                    out.put_bytes(&reason.as_bytes()[..len]);
                }
                if block.market.encode_into(&mut out).is_none() {
                    // Over the feed's limits (the node caps before replying): send no market
                    // data rather than a frame the participant cannot decode.
                    let _ = MarketData::default().encode_into(&mut out);
                }
            }
            Downlink::Notice { seq, code, text } => {
                out.put_u8(3);
                out.put_u64(seq.unwrap_or(NONE_SEQ));
                out.put_u8(*code as u8);
                put_text(&mut out, text);
            }
            Downlink::Refused { code, text } => {
                out.put_u8(4);
                out.put_u8(*code as u8);
                put_text(&mut out, text);
            }
            Downlink::Challenge { gateway_key, nonce } => {
                out.put_u8(5);
                out.put_bytes(gateway_key);
                out.put_bytes(nonce);
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
        let message = match r.u8().map_err(|_| FrameError::Empty)? {
            1 => Downlink::Welcome {
                participant: r.u32()?,
                height: r.u64()?,
                last_seq: Some(r.u64()?).filter(|&s| s != NONE_SEQ),
                last_clock: DeliveryClock::new(r.u64()?, r.u64()?),
            },
            2 => {
                let height = r.u64()?;
                let block_hash = r.array()?;
                let state_root = r.array()?;
                let count = r.u16()?;
                let valuations = r.list(count.into(), 16, Reader::u128)?;
                let own_count = r.u32()?;
                let own = r.list(own_count.into(), 9, |r| {
                    let seq = r.u64()?;
                    let len = usize::from(r.u8()?);
                    let reason = r.ascii(len, "reason")?;
                    Ok::<_, codec::DecodeError>(OwnResult {
                        seq,
                        dropped: Some(reason.to_string()).filter(|r| !r.is_empty()),
                    })
                })?;
                let market = Arc::new(MarketData::decode(&mut r)?);
                Downlink::Block(BlockData {
                    height,
                    block_hash,
                    state_root,
                    valuations,
                    own,
                    market,
                })
            }
            3 => Downlink::Notice {
                seq: Some(r.u64()?).filter(|&s| s != NONE_SEQ),
                code: NoticeCode::from_u8(r.u8()?)?,
                text: read_text(&mut r, "notice text")?,
            },
            4 => Downlink::Refused {
                code: RefusalCode::from_u8(r.u8()?)?,
                text: read_text(&mut r, "refusal text")?,
            },
            5 => Downlink::Challenge {
                gateway_key: r.array()?,
                nonce: r.array()?,
            },
            tag => return Err(bad_tag("message", tag)),
        };
        r.finish()?;
        Ok(message)
    }
}

/// Prefixes a payload with its length.
pub fn framed(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + payload.len());
    out.put_u32(payload.len() as u32);
    out.put_bytes(payload);
    out
}

fn bad_tag(what: &'static str, tag: u8) -> FrameError {
    FrameError::Codec(codec::DecodeError::BadTag { what, tag })
}

fn read_clock(r: &mut Reader<'_>) -> Result<(u64, DeliveryClock), FrameError> {
    let seq = r.u64()?;
    let point = r.u64()?;
    let elapsed_ns = r.u64()?;
    Ok((seq, DeliveryClock::new(point, elapsed_ns)))
}

fn read_text(r: &mut Reader<'_>, what: &'static str) -> Result<String, FrameError> {
    let len = usize::from(r.u16()?);
    Ok(r.utf8(len, what)?.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::market::{DepthLevel, PairAmount, PairDepth};
    use proptest::prelude::*;

    fn samples() -> (Vec<Uplink>, Vec<Downlink>) {
        let clock = DeliveryClock::new(7, 1_500_000);
        let up = vec![
            Uplink::Hello {
                version: 1,
                participant: 3,
                signed: None,
            },
            Uplink::Hello {
                version: PROTOCOL_VERSION,
                participant: 3,
                signed: Some(SignedHello {
                    last_height: Some(17),
                    signature: [0xab; 64],
                }),
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
                last_clock: DeliveryClock::default(),
            },
            Downlink::Welcome {
                participant: 3,
                height: 12,
                last_seq: Some(40),
                last_clock: DeliveryClock::new(12, 7_000),
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
                market: Arc::new(MarketData {
                    trades: vec![PairAmount {
                        sell: 0,
                        buy: 1,
                        sold: 500,
                    }],
                    depth: vec![PairDepth {
                        sell: 1,
                        buy: 0,
                        offers: 3,
                        levels: vec![DepthLevel {
                            min_price: 1 << 80,
                            amount: 20,
                            offers: 2,
                        }],
                    }],
                    depth_truncated: false,
                }),
            }),
            Downlink::Notice {
                seq: Some(5),
                code: NoticeCode::Late,
                text: "late".into(),
            },
            Downlink::Refused {
                code: RefusalCode::AlreadyConnected,
                text: "participant 3 is already connected".into(),
            },
            Downlink::Challenge {
                gateway_key: [4; 32],
                nonce: [5; 32],
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
                // A signed Hello cut right after the participant is a (version-1) Hello.
                if cut == 7
                    && matches!(
                        m,
                        Uplink::Hello {
                            signed: Some(_),
                            ..
                        }
                    )
                {
                    continue;
                }
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

    /// The layouts of the module documentation, byte for byte (written out by hand).
    #[test]
    fn encodings_are_the_documented_layouts() {
        let hex =
            |bytes: Vec<u8>| -> String { bytes.iter().map(|byte| format!("{byte:02x}")).collect() };
        let (up, down) = samples();
        let up: Vec<String> = up.iter().map(|m| hex(m.encode())).collect();
        let down: Vec<String> = down.iter().map(|m| hex(m.encode())).collect();
        let golden_up = [
            "01000100000003",
            "010006000000030000000000000011abababababababababababababababababababababababababababababababababababababababababababababababababababababababababababababababab",
            "0200000000000000040000000000000007000000000016e360",
            "0300000000000000050000000000000007000000000016e360090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909090909",
        ];
        let golden_down = [
            "0100000003000000000000000cffffffffffffffff00000000000000000000000000000000",
            "0100000003000000000000000c0000000000000028000000000000000c0000000000001b58",
            concat!(
                "0200000000000000080101010101010101010101010101010101010101010101010101010101010101020202020202020202020202020202020202020202020202020202020202020200020000000004000000000000000000000000000000000000000000000000000003000000020000000000000005000000000000000006087265706c61796564",
                "000000010000000100000000000001f400000000010001000000000000000000030100000000000100000000000000000000000000000000001400000002"
            ),
            "0300000000000000050100046c617465",
            "040600227061727469636970616e74203320697320616c726561647920636f6e6e6563746564",
            "0504040404040404040404040404040404040404040404040404040404040404040505050505050505050505050505050505050505050505050505050505050505",
        ];
        assert_eq!(up, golden_up);
        assert_eq!(down, golden_down);
        assert_eq!(hex(framed(&[7, 8])), "000000020708");
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
            for tag in 1u8..=5 {
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
