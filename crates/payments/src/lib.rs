//! Walras fast payments (the Accept paper, `papers/accept-payments.txt`), the pure core.
//!
//! Validators certify UTXO payments without ordering unrelated payments: a payment is final once
//! its payee holds a certificate of `2f + 1` distinct validator votes on the output. Everything
//! here is pure: no sockets, no disk, no clock, no threads. Handlers return the effects to make
//! durable and the replies to send (FastPay's authority style); the I/O layer carries them out.
//!
//! - [`model`]: outputs, payments, ids, limits, the committee and shard assignment;
//! - [`cert`]: vote messages, the `naive`, `merkle` and `bls` signature schemes, the cache of
//!   verified Merkle roots and BLS keys, certificate checks and the exchange's
//!   [`verify_withdrawal`];
//! - [`validator`]: one shard of one validator ([`ValidatorShard`]);
//! - [`client`]: the wallet state machine ([`Client`]);
//! - [`codec`]: canonical bytes of the durable effects;
//! - `durable` (feature `lmdb`): the effect log in LMDB, the only disk I/O here;
//! - [`bls`]: BLS12-381 keys, votes and aggregate certificates with proof of possession;
//! - [`bridge`]: the exchange bridge's certificate-checking interface, the only part of this
//!   crate `walras-engine` uses.
//!
//! See `docs/payments.md` for the mapping to the paper and to FastPay.

pub mod bls;
pub mod bridge;
pub mod cert;
pub mod client;
pub mod codec;
#[cfg(feature = "lmdb")]
pub mod durable;
pub mod error;
pub mod ids;
pub mod model;
pub mod validator;

pub use cert::{
    bls_aggregate_verifies, merkle_root_from_proof, payment_vote_messages, sign_votes,
    verify_certificate, verify_payment_votes, verify_vote, verify_withdrawal, vote_message,
    Certificate, RootCache, Scheme, Vote, VoteSignature, VoteSigner, Withdrawal,
    ROOT_CACHE_ENTRIES_MAX,
};
pub use client::{Client, ClientEffect, Coin, StuckReason};
pub use error::{CertError, ClientError, RequestError, VoteFault};
pub use model::{
    deposit_output_id, genesis_output_id, output_id, withdrawal_owner, BlsMember, ChainId,
    Committee, DepositOutput, Epoch, Input, Output, OutputId, Payment, PaymentId, SignedPayment,
    ValidatorIndex, PAYMENT_INPUTS_MAX, PAYMENT_OUTPUTS_MAX,
};
pub use validator::{
    Conflict, Effect, Outcome, PaymentRequest, PaymentVotes, Reply, ValidatorShard,
};
