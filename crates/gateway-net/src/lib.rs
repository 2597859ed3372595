//! `walras-gateway-net`: the `walras gateway` process around the pure DBO core
//! ([`walras_gateway`]), see `docs/gateway.md`.
//!
//! The modules are private; what callers need is re-exported here, under one path.
//!
//! - `frame`: the participant protocol (length-prefixed frames over TCP, read by `tokio_util`'s
//!   codec; decoding never panics);
//! - `transport`: the same frames over TCP or WebSocket (one binary message per frame);
//! - `verify`: each trade's signature checked (the engine's rule) before the ordering buffer;
//! - `config`, `error`: the gateway's settings and why it stops;
//! - `boot`: [`start`] checks the configuration, binds the listeners and spawns the tasks, and
//!   [`Gateway`] is the handle to a running one;
//! - `actor`: the core task that owns all state: the ordering buffer in cut mode, seals,
//!   publication; `journal`: its record of seals and stragglers;
//! - `connection`: accept loops, the handshake, and each connection's frame I/O;
//! - `node_link`: the signed loopback link to a node run with `--block-source gateway`;
//! - `client`: the participant's client library, which runs the participant's release buffer;
//! - `participants`: the participants file (participant number → Ed25519 key for the Hello);
//! - `metrics`: stragglers, late trades, queue overflows and more, on `/metrics`.

#![warn(unreachable_pub)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod actor;
mod boot;
mod client;
mod config;
mod connection;
mod error;
mod frame;
mod journal;
mod metrics;
mod node_link;
mod participants;
mod transport;
mod verify;

pub use actor::REPLAY_BLOCKS_MAX;
pub use boot::{start, Gateway};
pub use client::{ClientConfig, ClientError, ClientEvent, Participant, SentTrade};
pub use config::{CutMode, GatewayConfig, PARTICIPANTS_MAX};
pub use error::GatewayNetError;
pub use journal::{ParticipantEvent, SealRecord};
pub use node_link::NodeLinkError;
pub use participants::{parse_participant_keys, ParticipantsFileError};
// The protocol types a client sees in `ClientEvent` (defined in `walras_gateway`), so that a
// participant needs only this crate.
pub use walras_gateway::{BlockData, NoticeCode, OwnResult, RefusalCode};
