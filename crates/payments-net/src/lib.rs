//! The process layer of Walras fast payments (issue 14), after FastPay's network layer: the
//! pure core `walras-payments` decides, this crate moves bytes and makes effects durable.
//!
//! - `frame`: length-prefixed frames over TCP with a size limit and read/write timeouts;
//! - `wire`: the typed request/response codec (built on `walras_payments`' canonical codec); decoding
//!   outside bytes never panics and refuses with a typed error;
//! - `config`: the committee, genesis and validator configuration files (JSON);
//! - `validator`: the validator process: S shard threads, each the only owner of its spent set,
//!   fed by a channel; effects of a group of requests committed in one LMDB transaction before
//!   any of their replies leaves;
//! - `client`: the committee client: one multiplexed connection per validator, broadcast, and
//!   `certify`, which counts votes by the core's one quorum rule (`QuorumCollector`);
//! - `load`: an open loop of pre-signed payments at a fixed rate (the bench's core);
//! - `window`: the client's adaptive in-flight window per connection (pure, time passed in).
//!
//! The invariant: no reply leaves a validator before the effects it depends on are durable, and
//! no shard thread ever sends anything to another shard (counted in [`ShardStats`]).
//!
//! Modules are private; what callers need is re-exported here, one path per item.

#![warn(unreachable_pub)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod client;
mod config;
mod file;
mod frame;
mod load;
mod validator;
mod wallet;
mod window;
mod wire;

pub use client::{
    broadcast_payment, certify, certify_replies, CertifyError, CommitteeClient, ConnectionWindow,
    HoldBack, NetError, QuorumRound, ValidatorReply, CLIENT_IN_FLIGHT_MAX, CONNECT_TIMEOUT,
    REQUEST_TIMEOUT,
};
pub use config::{
    key_hex, member_with_bls, parse_key, parse_scheme, parse_seed, write_json, CommitteeConfig,
    CommitteeFile, ExchangeGenesisError, Fault, FieldError, GenesisFile, GenesisOutputFile,
    MemberFile, ValidatorFile, MERKLE_BATCH_LEAVES_DEFAULT,
};
pub use file::write_private_durable;
pub use frame::{write_frame, FrameError, FrameReader, FRAME_BYTES_MAX};
pub use load::{run_open_loop, LoadReport, Offer, OpenLoop, WindowReport, LATE_GRACE};
pub use validator::{
    start_from_file, ConnectionPolicy, DepositAdmitter, Faults, LoadProbe, Validator,
    ValidatorError, ValidatorSetup,
};
pub use wallet::{Wallet, WalletError};
pub use window::{
    Window, WindowConfig, WINDOW_INTERVAL, WINDOW_MIN_LATENCY_MEMORY, WINDOW_TARGET_FLOOR,
};
pub use wire::{
    decode_request_message, decode_response_message, encode_request_message,
    encode_response_message, ErrorCode, ErrorReply, Request, Response, ShardStats,
};
