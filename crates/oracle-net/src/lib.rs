//! Walras oracle connectors: the input/output layer of `walras-oracle`.
//!
//! - [`backoff`]: exponential reconnect delays with seeded jitter (pure, time as values).
//! - [`venue`]: each venue's subscribe, resubscribe, heartbeat and REST snapshot requests, from
//!   the venues' public documentation (the same wire formats the core's normalisers read).
//! - [`connector`]: one task per venue: connect, subscribe, heartbeat, hand every text frame to
//!   the core as a [`Record`](walras_oracle::feed::Record) stamped with its receive time,
//!   reconnect with backoff (a disconnect record first), refetch snapshots or resubscribe
//!   when the core says a book must resync.
//! - [`live`]: the driver: connectors → [`LiveOracle`](walras_oracle::live::LiveOracle) →
//!   publications, with resync requests flowing back.
//! - [`mock`]: a loopback mock venue serving a generated feed per venue (WebSocket and REST),
//!   closing connections where the feed injects disconnects.
//!
//! - [`tls`]: trust anchors for `wss://` and `https://` venues (Mozilla's roots compiled in,
//!   plus operator-given CAs).

pub mod backoff;
pub mod connector;
pub mod live;
pub mod mock;
pub mod tls;
pub mod venue;
