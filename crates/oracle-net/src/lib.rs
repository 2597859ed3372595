//! Walras oracle connectors: the input/output layer of `walras-oracle`.
//!
//! The modules are private; what callers need is re-exported here, under one path.
//!
//! - `backoff`: exponential reconnect delays with seeded jitter (pure, time as values).
//! - `venue`: each venue's subscribe, resubscribe, heartbeat and REST snapshot requests, from
//!   the venues' public documentation (the same wire formats the core's normalisers read).
//! - `connector`: one task per venue: connect, subscribe, heartbeat, hand every text frame to
//!   the core as a [`Record`](walras_oracle::Record) stamped with its receive time,
//!   reconnect with backoff (a disconnect record first), refetch snapshots or resubscribe
//!   when the core says a book must resync.
//! - `live`: the driver: connectors → [`LiveOracle`](walras_oracle::LiveOracle) →
//!   publications, with resync requests flowing back.
//! - `mock`: a loopback mock venue serving a generated feed per venue (WebSocket and REST),
//!   closing connections where the feed injects disconnects.
//!
//! - `tls`: trust anchors for `wss://` and `https://` venues (Mozilla's roots compiled in,
//!   plus operator-given CAs).

#![warn(unreachable_pub)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod backoff;
mod connector;
mod live;
mod mock;
mod tls;
mod venue;

pub use backoff::Backoff;
pub use connector::{
    http_client, spawn, Clock, Connector, ConnectorConfig, ConnectorStats, Endpoint, EndpointError,
};
pub use live::{run_live, LiveOptions, LiveSummary};
pub use mock::MockVenue;
pub use tls::{TlsClient, TlsError};
pub use venue::{heartbeat_text, rest_snapshot_path, resubscribe_messages, subscribe_messages};
