//! Walras fast payments (the Accept paper, `papers/accept-payments.txt`), the pure core.
//!
//! Validators certify UTXO payments without ordering unrelated payments: a payment is final once
//! its payee holds a certificate of `2f + 1` distinct validator votes on the output. Everything
//! here is pure: no sockets, no disk, no clock, no threads. Handlers return the effects to make
//! durable and the replies to send (FastPay's authority style); the I/O layer carries them out.
//!
//! Modules are private; what callers need is re-exported here, one path per item. The public
//! modules are [`bls`] and [`bridge`] (the exchange's bridge names their items by those paths).
//!
//! - `model`: outputs, payments, ids, limits, the committee and shard assignment;
//! - `cert`: vote messages, the `naive`, `merkle` and `bls` signature schemes, the cache of
//!   verified Merkle roots and BLS keys, certificate checks and the exchange's
//!   [`verify_withdrawal`];
//! - `validator`: one shard of one validator ([`ValidatorShard`]);
//! - `quorum`: the one quorum rule for a payment's votes ([`QuorumCollector`]), used by the
//!   wallet and the network client alike;
//! - `client`: the wallet state machine ([`Client`]);
//! - `codec`: canonical bytes of the durable effects and wire values ([`encode_effect`], ...);
//! - `durable` (feature `lmdb`): the effect log in LMDB ([`EffectLog`]), the only disk I/O here;
//! - [`bls`]: BLS12-381 keys, votes and aggregate certificates with proof of possession;
//! - [`bridge`]: the exchange bridge's certificate-checking interface, the only part of this
//!   crate `walras-engine` uses.
//!
//! See `docs/payments.md` for the mapping to the paper and to FastPay.

#![warn(unreachable_pub)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod bls;
pub mod bridge;
mod cert;
mod client;
mod codec;
#[cfg(feature = "lmdb")]
mod durable;
mod error;
mod ids;
mod model;
mod quorum;
mod validator;

pub use cert::{
    bls_aggregate_verifies, merkle_root_from_proof, payment_vote_messages, sign_votes,
    verify_certificate, verify_payment_votes, verify_vote, verify_withdrawal, Certificate,
    RootCache, Scheme, Vote, VoteSignature, VoteSigner, Withdrawal, ROOT_CACHE_ENTRIES_MAX,
    VOTE_OVERHEAD_BYTES,
};
pub use client::{Client, ClientEffect, Coin, StuckReason};
pub use codec::{
    certificate_bytes, decode_certificate, decode_conflict_prefix, decode_effect, decode_request,
    decode_request_prefix, decode_signed_payment_prefix, decode_votes_prefix, encode_certificate,
    encode_conflict, encode_effect, encode_request, encode_signed_payment, encode_votes,
    request_bytes, CodecError, CERTIFICATE_VOTES_MAX, MERKLE_SIBLINGS_MAX,
};
#[cfg(feature = "lmdb")]
pub use durable::{DurableError, EffectLog, EFFECT_LOG_MAP_SIZE_BYTES};
pub use error::{CertError, ClientError, RequestError, VoteFault};
pub use model::{
    deposit_output_id, domain, genesis_output_id, output_id, vote_message, withdrawal_owner,
    BlsMember, ChainId, Committee, DepositOutput, Epoch, Input, Output, OutputId, Payment,
    PaymentId, SignedPayment, ValidatorIndex, PAYMENT_INPUTS_MAX, PAYMENT_OUTPUTS_MAX,
};
pub use quorum::{Absence, QuorumCollector, QuorumFailure, Step, Verdict};
pub use validator::{
    ClientSignatures, Conflict, Effect, Outcome, PaymentRequest, PaymentVotes, Reply,
    ValidatorShard,
};
