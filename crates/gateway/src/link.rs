//! The loopback link between `walras gateway` and a node run with `--block-source gateway`:
//! the sealed batch the gateway sends (`POST /v1/gateway/seal`) and the node's reply once the
//! block is committed. Pure byte codecs (no I/O), shared by both processes so that they cannot
//! disagree; decoding outside input never panics and accepts exactly what encoding produces.
//!
//! Authentication is by the caller: the gateway signs [`seal_signing_message`] of the body with
//! its Ed25519 key and the node checks it against the key in its configuration. The body names
//! the height it is for, and the node accepts only its next height, so a replayed body is refused.
//!
//! Layout (all integers big-endian):
//! - request: `b"WGS2"`, height `u64`, the gateway's counters ([`GatewayStats`]: participants
//!   configured `u32`, connected `u32`, stragglers now `u32`, late trades total `u64`, queue-full
//!   refusals total `u64`, this seal's delay after the previous publication in µs `u64`), count
//!   `u32`, then per transaction a `u16` length and the canonical `SignedTransaction` encoding
//!   (decoded by the node, not here). (`WGS1`, without the counters, is refused as bad magic.)
//! - reply: `b"WGR2"`, height `u64`, block hash `[32]`, state root `[32]`, valuations count
//!   `u16` then `u128` each, transactions `u32`, dropped count `u32` then per drop the index `u32`
//!   and the reason's name (`u8` length, ASCII), then the block's market data
//!   ([`crate::market::MarketData`]): traded pairs `u32` then per pair sell `u16`, buy `u16`, sold
//!   `u64`; a depth-truncated flag `u8`; pairs with depth `u32` then per pair sell, buy, resting
//!   offers `u64`, levels `u8` then per level limit price `u128`, amount `u64`, offers `u32`.

use crate::market::MarketData;
use thiserror::Error;
use walras_types::codec::{self, count_within, Reader, Writer};

const SEAL_MAGIC: &[u8; 4] = b"WGS2";
const REPLY_MAGIC: &[u8; 4] = b"WGR2";
/// Domain separation of the gateway's signature over a sealed batch.
pub const SEAL_SIGNING_DOMAIN: &[u8] = b"walras-gateway-seal-v1\0";
/// The HTTP header carrying the hex signature of the body.
pub const SEAL_SIGNATURE_HEADER: &str = "x-walras-gateway-signature";
/// Largest transaction encoding the link carries (the largest transaction is well under 1 KiB).
pub const TRANSACTION_BYTES_MAX: usize = 4096;
/// Most transactions in one sealed batch.
pub const SEAL_TRANSACTIONS_MAX: usize = 1 << 20;
/// Most valuations in a reply (assets are `u16`).
pub const VALUATIONS_MAX: usize = u16::MAX as usize;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LinkDecodeError {
    /// Wrong magic (not a link message of this version), truncated, trailing bytes, a count
    /// over the link's limits, a drop reason name that is not ASCII.
    #[error("gateway link message: {0}")]
    Codec(#[from] codec::DecodeError),
}

/// The gateway's counters, sent with every sealed batch so that the node can show them (its
/// `GET /v1/gateway`) without reaching the gateway's own `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GatewayStats {
    /// Participants in the gateway's participants file.
    pub participants_configured: u32,
    /// Participants connected now.
    pub participants_connected: u32,
    /// Participants the gateway does not wait for now (round trip or silence over the threshold).
    pub stragglers: u32,
    /// Trades that arrived below an already sealed boundary, since the gateway started.
    pub late_trades_total: u64,
    /// Trades refused because the ordering buffer was full, since the gateway started.
    pub queue_full_total: u64,
    /// How long after the previous block's publication this block was sealed, in µs.
    pub last_seal_delay_us: u64,
}

/// A block the gateway sealed: the transactions of block `height`, in the order to execute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedBatch {
    pub height: u64,
    /// The gateway's counters at the seal.
    pub stats: GatewayStats,
    /// Canonical `SignedTransaction` encodings (the node decodes them).
    pub transactions: Vec<Vec<u8>>,
}

/// What the node answers once the sealed block is committed (durable).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealReply {
    pub height: u64,
    pub block_hash: [u8; 32],
    pub state_root: [u8; 32],
    pub valuations: Vec<u128>,
    pub transactions: u32,
    /// (index in the block, reason name) of every transaction the block filter dropped.
    pub dropped: Vec<(u32, String)>,
    /// Per-pair amounts and book depth at this height, for the participants' feed.
    pub market: MarketData,
}

/// The bytes the gateway signs (and the node verifies) for a request body.
pub fn seal_signing_message(body: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(SEAL_SIGNING_DOMAIN.len() + body.len());
    message.extend_from_slice(SEAL_SIGNING_DOMAIN);
    message.extend_from_slice(body);
    message
}

impl SealedBatch {
    /// Encodes; `None` if a transaction or the count is over the link's limits.
    pub fn encode(&self) -> Option<Vec<u8>> {
        if self.transactions.len() > SEAL_TRANSACTIONS_MAX {
            return None;
        }
        let mut out = Vec::with_capacity(16 + self.transactions.len() * 200);
        out.put_bytes(SEAL_MAGIC);
        out.put_u64(self.height);
        let stats = &self.stats;
        out.put_u32(stats.participants_configured);
        out.put_u32(stats.participants_connected);
        out.put_u32(stats.stragglers);
        out.put_u64(stats.late_trades_total);
        out.put_u64(stats.queue_full_total);
        out.put_u64(stats.last_seal_delay_us);
        out.put_u32(self.transactions.len() as u32);
        for tx in &self.transactions {
            if tx.len() > TRANSACTION_BYTES_MAX {
                return None;
            }
            out.put_u16(tx.len() as u16);
            out.put_bytes(tx);
        }
        Some(out)
    }

    pub fn decode(bytes: &[u8]) -> Result<SealedBatch, LinkDecodeError> {
        let mut r = Reader::new(bytes);
        r.magic(SEAL_MAGIC, "WGS2")?;
        let height = r.u64()?;
        let stats = GatewayStats {
            participants_configured: r.u32()?,
            participants_connected: r.u32()?,
            stragglers: r.u32()?,
            late_trades_total: r.u64()?,
            queue_full_total: r.u64()?,
            last_seal_delay_us: r.u64()?,
        };
        let count = count_within(r.u32()?.into(), SEAL_TRANSACTIONS_MAX, "transactions")?;
        // Each transaction needs at least its 2-byte length.
        let transactions = r.list(count as u64, 2, |r| {
            let len = count_within(r.u16()?.into(), TRANSACTION_BYTES_MAX, "transaction bytes")?;
            Ok::<_, codec::DecodeError>(r.take(len)?.to_vec())
        })?;
        r.finish()?;
        Ok(SealedBatch {
            height,
            stats,
            transactions,
        })
    }
}

impl SealReply {
    /// Encodes; `None` if over the link's limits (more than [`VALUATIONS_MAX`] valuations, a
    /// reason name longer than 255 bytes or not ASCII).
    pub fn encode(&self) -> Option<Vec<u8>> {
        if self.valuations.len() > VALUATIONS_MAX {
            return None;
        }
        let mut out = Vec::with_capacity(90 + 16 * self.valuations.len() + 24 * self.dropped.len());
        out.put_bytes(REPLY_MAGIC);
        out.put_u64(self.height);
        out.put_bytes(&self.block_hash);
        out.put_bytes(&self.state_root);
        out.put_u16(self.valuations.len() as u16);
        for &v in &self.valuations {
            out.put_u128(v);
        }
        out.put_u32(self.transactions);
        out.put_u32(u32::try_from(self.dropped.len()).ok()?);
        for (index, reason) in &self.dropped {
            if reason.len() > 255 || !reason.is_ascii() {
                return None;
            }
            out.put_u32(*index);
            out.put_u8(reason.len() as u8);
            out.put_bytes(reason.as_bytes());
        }
        self.market.encode_into(&mut out)?;
        Some(out)
    }

    pub fn decode(bytes: &[u8]) -> Result<SealReply, LinkDecodeError> {
        let mut r = Reader::new(bytes);
        r.magic(REPLY_MAGIC, "WGR2")?;
        let height = r.u64()?;
        let block_hash = r.array()?;
        let state_root = r.array()?;
        let count = r.u16()?;
        let valuations = r.list(count.into(), 16, Reader::u128)?;
        let transactions = r.u32()?;
        let dropped_count = r.u32()?;
        let dropped = r.list(dropped_count.into(), 5, |r| {
            let index = r.u32()?;
            let len = usize::from(r.u8()?);
            Ok::<_, codec::DecodeError>((index, r.ascii(len, "a drop reason name")?.to_string()))
        })?;
        let market = MarketData::decode(&mut r)?;
        r.finish()?;
        Ok(SealReply {
            height,
            block_hash,
            state_root,
            valuations,
            transactions,
            dropped,
            market,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reply() -> SealReply {
        SealReply {
            height: 7,
            block_hash: [3; 32],
            state_root: [4; 32],
            valuations: vec![1 << 100, 5],
            transactions: 3,
            dropped: vec![(1, "replayed".into())],
            market: MarketData {
                trades: vec![crate::market::PairAmount {
                    sell: 1,
                    buy: 0,
                    sold: 9,
                }],
                depth: Vec::new(),
                depth_truncated: true,
            },
        }
    }

    fn stats() -> GatewayStats {
        GatewayStats {
            participants_configured: 8,
            participants_connected: 7,
            stragglers: 1,
            late_trades_total: 2,
            queue_full_total: 3,
            last_seal_delay_us: 55_000,
        }
    }

    #[test]
    fn both_messages_round_trip() {
        let batch = SealedBatch {
            height: 9,
            stats: stats(),
            transactions: vec![vec![1, 2, 3], vec![]],
        };
        assert_eq!(
            SealedBatch::decode(&batch.encode().unwrap()).unwrap(),
            batch
        );
        let reply = reply();
        assert_eq!(SealReply::decode(&reply.encode().unwrap()).unwrap(), reply);
    }

    #[test]
    fn a_truncated_or_extended_body_is_refused() {
        let bytes = reply().encode().unwrap();
        for cut in 0..bytes.len() {
            assert!(SealReply::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            SealReply::decode(&longer),
            Err(LinkDecodeError::Codec(codec::DecodeError::TrailingBytes {
                extra: 1
            }))
        );
    }

    /// The layouts of the module documentation, byte for byte (written out by hand).
    #[test]
    fn encodings_are_the_documented_layouts() {
        let batch = SealedBatch {
            height: 9,
            stats: stats(),
            transactions: vec![vec![1, 2, 3], vec![]],
        };
        assert_eq!(
            hex(&batch.encode().unwrap()),
            concat!(
                "57475332",
                "0000000000000009",
                "00000008",
                "00000007",
                "00000001",
                "0000000000000002",
                "0000000000000003",
                "000000000000d6d8",
                "00000002",
                "0003010203",
                "0000"
            )
        );
        // The version without counters is refused, not misread.
        let mut old = b"WGS1".to_vec();
        old.extend_from_slice(&hex_bytes("00000000000000090000000200030102030000"));
        assert!(matches!(
            SealedBatch::decode(&old),
            Err(LinkDecodeError::Codec(codec::DecodeError::BadMagic { .. }))
        ));
        assert_eq!(hex(&reply().encode().unwrap()), "5747523200000000000000070303030303030303030303030303030303030303030303030303030303030303040404040404040404040404040404040404040404040404040404040404040400020000001000000000000000000000000000000000000000000000000000000005000000030000000100000001087265706c61796564000000010001000000000000000000090100000000");
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|byte| format!("{byte:02x}")).collect()
    }

    fn hex_bytes(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    proptest! {
        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = SealedBatch::decode(&bytes);
            let _ = SealReply::decode(&bytes);
            let mut prefixed = SEAL_MAGIC.to_vec();
            prefixed.extend_from_slice(&bytes);
            if let Ok(batch) = SealedBatch::decode(&prefixed) {
                prop_assert_eq!(batch.encode().unwrap(), prefixed.clone());
            }
            let mut prefixed = REPLY_MAGIC.to_vec();
            prefixed.extend_from_slice(&bytes);
            if let Ok(reply) = SealReply::decode(&prefixed) {
                prop_assert_eq!(reply.encode().unwrap(), prefixed);
            }
        }
    }
}
