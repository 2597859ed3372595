//! `walras-gateway-net`: the `walras gateway` process around the pure DBO core
//! ([`walras_gateway`]), see `docs/gateway.md`.
//!
//! - [`frame`]: the participant protocol (length-prefixed frames over TCP; decoding never panics);
//! - [`transport`]: the same frames over TCP or WebSocket (one binary message per frame);
//! - [`verify`]: each trade's signature checked (the engine's rule) before the ordering buffer;
//! - [`server`]: the gateway: connections, the ordering buffer in cut mode, seals, publication;
//! - [`node_link`]: the signed loopback link to a node run with `--block-source gateway`;
//! - [`client`]: the participant's client library, which runs the participant's release buffer;
//! - [`participants`]: the participants file (participant number → Ed25519 key for the Hello);
//! - [`metrics`]: stragglers, late trades, queue overflows and more, on `/metrics`.

pub mod client;
pub mod frame;
pub mod metrics;
pub mod node_link;
pub mod participants;
pub mod server;
pub mod transport;
pub mod verify;

pub use client::{ClientConfig, ClientError, ClientEvent, Participant, SentTrade};
pub use participants::{parse_participant_keys, ParticipantsFileError};
pub use server::{
    start, CutMode, Gateway, GatewayConfig, GatewayNetError, SealRecord, PARTICIPANTS_MAX,
};
