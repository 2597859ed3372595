//! The process layer of Walras fast payments (issue 14), after FastPay's network layer: the
//! pure core `walras-payments` decides, this crate moves bytes and makes effects durable.
//!
//! - [`frame`]: length-prefixed frames over TCP with a size limit and read/write timeouts;
//! - [`wire`]: the typed request/response codec (built on `walras_payments::codec`); decoding
//!   outside bytes never panics and refuses with a typed error;
//! - [`config`]: the committee, genesis and validator configuration files (JSON);
//! - [`validator`]: the validator process: S shard threads, each the only owner of its spent set,
//!   fed by a channel; effects of a group of requests committed in one LMDB transaction before
//!   any of their replies leaves;
//! - [`client`]: the committee client: one multiplexed connection per validator, broadcast, and
//!   and `certify`, which counts votes by the core's one quorum rule (`QuorumCollector`).
//!
//! The invariant: no reply leaves a validator before the effects it depends on are durable, and
//! no shard thread ever sends anything to another shard (counted in [`wire::ShardStats`]).

pub mod client;
pub mod config;
pub mod file;
pub mod frame;
pub mod validator;
pub mod wallet;
pub mod wire;
