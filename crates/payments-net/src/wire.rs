//! The wire messages between clients and validators, one per frame.
//!
//! Request: `id: u64`, `tag: u8`, then
//! - `0` pay: `shard: u32`, a payment request (`walras_payments::encode_request`);
//! - `1` holder-of: `shard: u32`, `input: [u8; 32]`: which signed payment holds this input;
//! - `2` stats: the validator's per-shard counters;
//! - `3` withdrawal vote: a certificate (`walras_payments::encode_certificate`): the validator checks it
//!   and signs the output's vote message with its BLS key, for the exchange bridge.
//!
//! Response: the request's `id: u64`, `tag: u8`, then
//! - `0` votes (`walras_payments::encode_votes`); `1` conflict (`encode_conflict`);
//! - `2` error: `code: u16`, `message: u32 length + UTF-8` (at most `ERROR_MESSAGE_BYTES_MAX`),
//!   and for code `6` (overloaded) one more field, `retry_after_ms: u32`;
//! - `3` holder: `0` or `1` then a signed payment; `4` stats: `count: u32`, then per shard seven
//!   `u64` counters; `5` BLS vote: `validator: u16`, `signature: [u8; 96]`.
//!
//! Every decoder is total: any byte string gives a value or a [`WireError`], never a panic
//! (property test `tests/wire.rs`, fuzz target `payments_wire`). Trailing bytes are refused.

use thiserror::Error;
use walras_crypto::Hash;
use walras_payments::{
    decode_certificate, decode_conflict_prefix, decode_request_prefix,
    decode_signed_payment_prefix, decode_votes_prefix, encode_certificate, encode_conflict,
    encode_request, encode_signed_payment, encode_votes, CodecError,
};
use walras_payments::{
    Certificate, Conflict, OutputId, PaymentRequest, PaymentVotes, RequestError, SignedPayment,
};
use walras_types::codec::DecodeError;

/// Longest error message carried in a reply.
pub(crate) const ERROR_MESSAGE_BYTES_MAX: usize = 4096;
/// Most shards a stats reply may list.
pub(crate) const STATS_SHARDS_MAX: usize = 1024;

/// Why bytes are not a wire message.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum WireError {
    #[error("the message ends early (in {0})")]
    Truncated(&'static str),
    #[error("unknown {what} tag {tag}")]
    UnknownTag { what: &'static str, tag: u8 },
    #[error("{0} bytes after the message")]
    Trailing(usize),
    #[error("{what}: {count} is over the limit")]
    TooMany { what: &'static str, count: usize },
    #[error("the error message is not UTF-8")]
    NotUtf8,
    #[error("payment bytes: {0}")]
    Codec(#[from] CodecError),
}

/// A client's request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Pay {
        shard: u32,
        request: PaymentRequest,
    },
    HolderOf {
        shard: u32,
        input: OutputId,
    },
    Stats,
    /// A BLS vote on a certified output, for a withdrawal certificate (the exchange bridge).
    WithdrawalVote {
        certificate: Certificate,
    },
}

/// What kind of refusal an error reply is; stable numbers on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// The bytes were not a request (the connection is closed after this reply).
    Malformed,
    /// The shard number is not one of this validator's shards.
    UnknownShard,
    /// The payment was refused by the validator shard (the message says why; nothing changed).
    Refused,
    /// The validator could not make the effects durable; nothing was promised.
    Unavailable,
    /// The validator holds its cap of connections (overall or from this client's address);
    /// the connection is closed after this reply. Retry later or close idle connections.
    TooManyConnections,
    /// The shard's queue (or this connection's share of requests in flight) is full: the
    /// request was refused before any check, so nothing changed and the same request may be
    /// sent again after `retry_after_ms` (the validator's estimate of when its queue drains).
    Overloaded { retry_after_ms: u32 },
    /// A code this build does not know (a newer peer).
    Other(u16),
}

impl ErrorCode {
    fn to_u16(self) -> u16 {
        match self {
            ErrorCode::Malformed => 1,
            ErrorCode::UnknownShard => 2,
            ErrorCode::Refused => 3,
            ErrorCode::Unavailable => 4,
            ErrorCode::TooManyConnections => 5,
            ErrorCode::Overloaded { .. } => OVERLOADED_CODE,
            ErrorCode::Other(code) => code,
        }
    }

    /// The code of `code` on the wire; [`ErrorCode::Overloaded`]'s retry hint is read after
    /// the message.
    fn from_u16(code: u16) -> ErrorCode {
        match code {
            1 => ErrorCode::Malformed,
            2 => ErrorCode::UnknownShard,
            3 => ErrorCode::Refused,
            4 => ErrorCode::Unavailable,
            5 => ErrorCode::TooManyConnections,
            OVERLOADED_CODE => ErrorCode::Overloaded { retry_after_ms: 0 },
            other => ErrorCode::Other(other),
        }
    }
}

/// The wire number of [`ErrorCode::Overloaded`].
const OVERLOADED_CODE: u16 = 6;

/// A typed refusal: a code a program can act on and a message a person can.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{code:?}: {message}")]
pub struct ErrorReply {
    pub code: ErrorCode,
    pub message: String,
}

impl ErrorReply {
    /// The reply for a payment the shard refused.
    pub fn refused(error: &RequestError) -> ErrorReply {
        ErrorReply {
            code: ErrorCode::Refused,
            message: error.to_string(),
        }
    }
}

/// One shard's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShardStats {
    /// Payment requests handled.
    pub requests: u64,
    /// Replies carrying votes.
    pub votes: u64,
    /// Conflict replies.
    pub conflicts: u64,
    /// Refused requests (typed errors).
    pub refused: u64,
    /// Inputs in the spent set.
    pub spent: u64,
    /// LMDB transactions committed (one per group of requests).
    pub commits: u64,
    /// Messages this shard sent to or received from another shard. The design has none (input
    /// certificates travel with the payment); the counter is what the loopback test checks.
    pub cross_shard_messages: u64,
}

/// A validator's reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    Votes(PaymentVotes),
    Conflict(Conflict),
    Error(ErrorReply),
    Holder(Option<SignedPayment>),
    Stats(Vec<ShardStats>),
    /// A validator's BLS signature on an output's vote message.
    BlsVote {
        validator: u16,
        signature: [u8; 96],
    },
}

/// Reads through the exchange's one reader ([`walras_types::codec::Reader`]); this wrapper
/// names the field each read is for, and hands the rest to the payments decoders of a prefix.
struct Reader<'a>(walras_types::codec::Reader<'a>);

/// A read of the field `what` that failed.
fn field_error(what: &'static str) -> impl Fn(DecodeError) -> WireError {
    move |error| match error {
        DecodeError::TrailingBytes { extra } => WireError::Trailing(extra),
        DecodeError::BadTag { what, tag } => WireError::UnknownTag { what, tag },
        // The reads used here (`take` and the integers) only fail as `Truncated`.
        DecodeError::Truncated { .. }
        | DecodeError::CountOverMax { .. }
        | DecodeError::BadText { .. }
        | DecodeError::BadMagic { .. } => WireError::Truncated(what),
    }
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Reader(walras_types::codec::Reader::new(bytes))
    }
    fn take(&mut self, count: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        self.0.take(count).map_err(field_error(what))
    }
    fn u8(&mut self, what: &'static str) -> Result<u8, WireError> {
        self.0.u8().map_err(field_error(what))
    }
    fn u16(&mut self, what: &'static str) -> Result<u16, WireError> {
        self.0.u16().map_err(field_error(what))
    }
    fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        self.0.u32().map_err(field_error(what))
    }
    fn u64(&mut self, what: &'static str) -> Result<u64, WireError> {
        self.0.u64().map_err(field_error(what))
    }
    /// A value the payments codec decodes from the front of the rest; reading goes on after it.
    fn prefix<T>(
        &mut self,
        decode: impl FnOnce(&'a [u8]) -> Result<(T, &'a [u8]), CodecError>,
    ) -> Result<T, WireError> {
        let (value, rest) = decode(self.0.rest())?;
        self.0 = walras_types::codec::Reader::new(rest);
        Ok(value)
    }
    fn finish(self) -> Result<(), WireError> {
        self.0.finish().map_err(field_error("the end"))
    }
}

/// Bytes of request `id`.
pub fn encode_request_message(id: u64, request: &Request) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(256);
    bytes.extend_from_slice(&id.to_be_bytes());
    match request {
        Request::Pay { shard, request } => {
            bytes.push(0);
            bytes.extend_from_slice(&shard.to_be_bytes());
            encode_request(request, &mut bytes);
        }
        Request::HolderOf { shard, input } => {
            bytes.push(1);
            bytes.extend_from_slice(&shard.to_be_bytes());
            bytes.extend_from_slice(input.0.as_bytes());
        }
        Request::Stats => bytes.push(2),
        Request::WithdrawalVote { certificate } => {
            bytes.push(3);
            encode_certificate(certificate, &mut bytes);
        }
    }
    bytes
}

/// The request id at the front of `bytes`, if there are 8 bytes (to answer a malformed request
/// with its own id).
pub(crate) fn request_id_of(bytes: &[u8]) -> Option<u64> {
    let head: [u8; 8] = bytes.get(..8)?.try_into().ok()?;
    Some(u64::from_be_bytes(head))
}

/// Decodes a request message: its id and the request.
pub fn decode_request_message(bytes: &[u8]) -> Result<(u64, Request), WireError> {
    let mut reader = Reader::new(bytes);
    let id = reader.u64("request id")?;
    let request = match reader.u8("request tag")? {
        0 => {
            let shard = reader.u32("shard")?;
            let request = reader.prefix(decode_request_prefix)?;
            Request::Pay { shard, request }
        }
        1 => {
            let shard = reader.u32("shard")?;
            let mut input = [0u8; 32];
            input.copy_from_slice(reader.take(32, "input id")?);
            Request::HolderOf {
                shard,
                input: OutputId(Hash(input)),
            }
        }
        2 => Request::Stats,
        3 => {
            let certificate = decode_certificate(reader.0.rest())?;
            Request::WithdrawalVote { certificate }
        }
        tag => {
            return Err(WireError::UnknownTag {
                what: "request",
                tag,
            })
        }
    };
    reader.finish()?;
    Ok((id, request))
}

/// Bytes of the response to request `id`.
pub fn encode_response_message(id: u64, response: &Response) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(256);
    bytes.extend_from_slice(&id.to_be_bytes());
    match response {
        Response::Votes(votes) => {
            bytes.push(0);
            encode_votes(votes, &mut bytes);
        }
        Response::Conflict(conflict) => {
            bytes.push(1);
            encode_conflict(conflict, &mut bytes);
        }
        Response::Error(error) => {
            bytes.push(2);
            bytes.extend_from_slice(&error.code.to_u16().to_be_bytes());
            // Cut long messages at a character boundary so the reply always decodes.
            let mut end = error.message.len().min(ERROR_MESSAGE_BYTES_MAX);
            while !error.message.is_char_boundary(end) {
                end -= 1;
            }
            let message = &error.message.as_bytes()[..end];
            bytes.extend_from_slice(&(message.len() as u32).to_be_bytes());
            bytes.extend_from_slice(message);
            if let ErrorCode::Overloaded { retry_after_ms } = error.code {
                bytes.extend_from_slice(&retry_after_ms.to_be_bytes());
            }
        }
        Response::Holder(holder) => {
            bytes.push(3);
            match holder {
                None => bytes.push(0),
                Some(signed) => {
                    bytes.push(1);
                    encode_signed_payment(signed, &mut bytes);
                }
            }
        }
        Response::BlsVote {
            validator,
            signature,
        } => {
            bytes.push(5);
            bytes.extend_from_slice(&validator.to_be_bytes());
            bytes.extend_from_slice(signature);
        }
        Response::Stats(shards) => {
            bytes.push(4);
            bytes.extend_from_slice(&(shards.len() as u32).to_be_bytes());
            for shard in shards {
                for value in [
                    shard.requests,
                    shard.votes,
                    shard.conflicts,
                    shard.refused,
                    shard.spent,
                    shard.commits,
                    shard.cross_shard_messages,
                ] {
                    bytes.extend_from_slice(&value.to_be_bytes());
                }
            }
        }
    }
    bytes
}

/// Decodes a response message: the id of the request it answers and the response.
pub fn decode_response_message(bytes: &[u8]) -> Result<(u64, Response), WireError> {
    let mut reader = Reader::new(bytes);
    let id = reader.u64("request id")?;
    let response = match reader.u8("response tag")? {
        0 => {
            let votes = reader.prefix(decode_votes_prefix)?;
            Response::Votes(votes)
        }
        1 => {
            let conflict = reader.prefix(decode_conflict_prefix)?;
            Response::Conflict(conflict)
        }
        2 => {
            let mut code = ErrorCode::from_u16(reader.u16("error code")?);
            let length = reader.u32("message length")? as usize;
            if length > ERROR_MESSAGE_BYTES_MAX {
                return Err(WireError::TooMany {
                    what: "error message bytes",
                    count: length,
                });
            }
            let message = std::str::from_utf8(reader.take(length, "error message")?)
                .map_err(|_| WireError::NotUtf8)?
                .to_string();
            if let ErrorCode::Overloaded { retry_after_ms } = &mut code {
                *retry_after_ms = reader.u32("retry hint")?;
            }
            Response::Error(ErrorReply { code, message })
        }
        3 => match reader.u8("holder flag")? {
            0 => Response::Holder(None),
            1 => {
                let signed = reader.prefix(decode_signed_payment_prefix)?;
                Response::Holder(Some(signed))
            }
            tag => {
                return Err(WireError::UnknownTag {
                    what: "holder flag",
                    tag,
                })
            }
        },
        4 => {
            let count = reader.u32("shard count")? as usize;
            if count > STATS_SHARDS_MAX {
                return Err(WireError::TooMany {
                    what: "shards",
                    count,
                });
            }
            let mut shards = Vec::with_capacity(count);
            for _ in 0..count {
                shards.push(ShardStats {
                    requests: reader.u64("stats")?,
                    votes: reader.u64("stats")?,
                    conflicts: reader.u64("stats")?,
                    refused: reader.u64("stats")?,
                    spent: reader.u64("stats")?,
                    commits: reader.u64("stats")?,
                    cross_shard_messages: reader.u64("stats")?,
                });
            }
            Response::Stats(shards)
        }
        5 => {
            let validator = reader.u16("validator")?;
            let mut signature = [0u8; 96];
            signature.copy_from_slice(reader.take(96, "BLS signature")?);
            Response::BlsVote {
                validator,
                signature,
            }
        }
        tag => {
            return Err(WireError::UnknownTag {
                what: "response",
                tag,
            })
        }
    };
    reader.finish()?;
    Ok((id, response))
}
