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
//! - request: `b"WGS1"`, height `u64`, count `u32`, then per transaction a `u16` length and the
//!   canonical `SignedTransaction` encoding (decoded by the node, not here);
//! - reply: `b"WGR1"`, height `u64`, block hash `[32]`, state root `[32]`, valuations count
//!   `u16` then `u128` each, transactions `u32`, dropped count `u32` then per drop the index `u32`
//!   and the reason's name (`u8` length, ASCII).

use thiserror::Error;

const SEAL_MAGIC: &[u8; 4] = b"WGS1";
const REPLY_MAGIC: &[u8; 4] = b"WGR1";
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
    #[error(
        "the body does not start with {expected:?}: not a gateway link message of this version"
    )]
    BadMagic { expected: &'static str },
    #[error("the body ends inside {0}")]
    Truncated(&'static str),
    #[error("{what}: {count} exceeds the limit of {max}")]
    TooMany {
        what: &'static str,
        count: usize,
        max: usize,
    },
    #[error("{0} trailing bytes after the message")]
    Trailing(usize),
    #[error("a drop reason name is not ASCII")]
    BadReasonName,
}

/// A block the gateway sealed: the transactions of block `height`, in the order to execute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedBatch {
    pub height: u64,
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
        out.extend_from_slice(SEAL_MAGIC);
        out.extend_from_slice(&self.height.to_be_bytes());
        out.extend_from_slice(&(self.transactions.len() as u32).to_be_bytes());
        for tx in &self.transactions {
            if tx.len() > TRANSACTION_BYTES_MAX {
                return None;
            }
            out.extend_from_slice(&(tx.len() as u16).to_be_bytes());
            out.extend_from_slice(tx);
        }
        Some(out)
    }

    pub fn decode(bytes: &[u8]) -> Result<SealedBatch, LinkDecodeError> {
        let mut r = Reader::new(bytes);
        r.magic(SEAL_MAGIC, "WGS1")?;
        let height = r.u64("height")?;
        let count = r.u32("transaction count")? as usize;
        if count > SEAL_TRANSACTIONS_MAX {
            return Err(LinkDecodeError::TooMany {
                what: "transactions",
                count,
                max: SEAL_TRANSACTIONS_MAX,
            });
        }
        // Each transaction needs at least its 2-byte length: bound the allocation by the input.
        let mut transactions = Vec::with_capacity(count.min(r.remaining() / 2));
        for _ in 0..count {
            let len = usize::from(r.u16("transaction length")?);
            if len > TRANSACTION_BYTES_MAX {
                return Err(LinkDecodeError::TooMany {
                    what: "transaction bytes",
                    count: len,
                    max: TRANSACTION_BYTES_MAX,
                });
            }
            transactions.push(r.bytes(len, "transaction")?.to_vec());
        }
        r.finish()?;
        Ok(SealedBatch {
            height,
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
        out.extend_from_slice(REPLY_MAGIC);
        out.extend_from_slice(&self.height.to_be_bytes());
        out.extend_from_slice(&self.block_hash);
        out.extend_from_slice(&self.state_root);
        out.extend_from_slice(&(self.valuations.len() as u16).to_be_bytes());
        for v in &self.valuations {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend_from_slice(&self.transactions.to_be_bytes());
        out.extend_from_slice(&u32::try_from(self.dropped.len()).ok()?.to_be_bytes());
        for (index, reason) in &self.dropped {
            if reason.len() > 255 || !reason.is_ascii() {
                return None;
            }
            out.extend_from_slice(&index.to_be_bytes());
            out.push(reason.len() as u8);
            out.extend_from_slice(reason.as_bytes());
        }
        Some(out)
    }

    pub fn decode(bytes: &[u8]) -> Result<SealReply, LinkDecodeError> {
        let mut r = Reader::new(bytes);
        r.magic(REPLY_MAGIC, "WGR1")?;
        let height = r.u64("height")?;
        let block_hash = r.array32("block hash")?;
        let state_root = r.array32("state root")?;
        let count = usize::from(r.u16("valuation count")?);
        let mut valuations = Vec::with_capacity(count.min(r.remaining() / 16));
        for _ in 0..count {
            valuations.push(r.u128("valuation")?);
        }
        let transactions = r.u32("transaction count")?;
        let dropped_count = r.u32("dropped count")? as usize;
        let mut dropped = Vec::with_capacity(dropped_count.min(r.remaining() / 5));
        for _ in 0..dropped_count {
            let index = r.u32("dropped index")?;
            let len = usize::from(r.u8("reason length")?);
            let name = r.bytes(len, "reason name")?;
            if !name.is_ascii() {
                return Err(LinkDecodeError::BadReasonName);
            }
            dropped.push((index, String::from_utf8_lossy(name).into_owned()));
        }
        r.finish()?;
        Ok(SealReply {
            height,
            block_hash,
            state_root,
            valuations,
            transactions,
            dropped,
        })
    }
}

/// A bounds-checked big-endian reader: every read either returns the bytes or a typed error.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    pub(crate) fn bytes(
        &mut self,
        len: usize,
        what: &'static str,
    ) -> Result<&'a [u8], LinkDecodeError> {
        if self.remaining() < len {
            return Err(LinkDecodeError::Truncated(what));
        }
        let out = &self.bytes[self.at..self.at + len];
        self.at += len;
        Ok(out)
    }

    fn magic(&mut self, magic: &[u8; 4], name: &'static str) -> Result<(), LinkDecodeError> {
        match self.bytes(4, "magic") {
            Ok(m) if m == magic => Ok(()),
            _ => Err(LinkDecodeError::BadMagic { expected: name }),
        }
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], LinkDecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N, what)?);
        Ok(out)
    }

    fn array32(&mut self, what: &'static str) -> Result<[u8; 32], LinkDecodeError> {
        self.array::<32>(what)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, LinkDecodeError> {
        Ok(self.array::<1>(what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, LinkDecodeError> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, LinkDecodeError> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }

    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64, LinkDecodeError> {
        Ok(u64::from_be_bytes(self.array(what)?))
    }

    fn u128(&mut self, what: &'static str) -> Result<u128, LinkDecodeError> {
        Ok(u128::from_be_bytes(self.array(what)?))
    }

    pub(crate) fn finish(&self) -> Result<(), LinkDecodeError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(LinkDecodeError::Trailing(n)),
        }
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
        }
    }

    #[test]
    fn both_messages_round_trip() {
        let batch = SealedBatch {
            height: 9,
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
            Err(LinkDecodeError::Trailing(1))
        );
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
