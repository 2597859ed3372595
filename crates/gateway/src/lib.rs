//! `walras-gateway`: the fair-access gateway after DBO (Gupta et al., SIGCOMM 2023).
//!
//! A pure core: no sockets, no clock reads, no threads. Time comes in as integer nanoseconds and
//! every handler returns what should happen (deliver a batch, send a heartbeat, forward a trade)
//! instead of doing it. The pieces, with the paper's sections:
//!
//! - `clock`: the delivery clock ⟨last delivered point, elapsed ns⟩ (Eq. 5) and the total order
//!   key used everywhere (clock, then participant, then sequence).
//! - `release`: the per-participant release buffer (§4.1.2, §5.1): whole batches, paced ≥ δ apart,
//!   heartbeats every τ, trades and heartbeats on one ordered uplink stream.
//! - `ordering`: the ordering buffer (§4.1.3, §5.2): watermarks, straggler handling (§4.2.1),
//!   late-trade flagging, bounded queue, block cuts `seal(N, W)`; [`ShardedOrderingBuffer`]
//!   is the sharded variant with a master merge.
//! - `frame`: the participant protocol's frames (Challenge, signed Hello, trades, heartbeats,
//!   blocks, notices): encode and decode, never panicking on outside bytes.
//! - `link`: the gateway → node link's sealed batches and replies.
//! - `market`: a block's market data (per-pair amounts, book depth at that height) for the feed.
//! - [`sim`]: a deterministic discrete-event simulator (§6.4) that drives the same state machines and
//!   compares `direct`, `dbo`, `max-rtt` (Theorem 3) and `cloudex`.
//!
//! See `docs/gateway.md` for the mapping to the paper and the departures from it.

// A core crate: a panic here takes down the node that embeds it, so every fallible step is
// handled (tests may unwrap).
#![cfg_attr(not(test), deny(clippy::unwrap_used))]
#![warn(unreachable_pub)]

mod clock;
mod error;
mod frame;
mod link;
mod market;
mod ordering;
mod release;
// The simulator keeps its own namespace: its `run`, `Scheme` and limits (`PARTICIPANTS_MAX`, ...)
// are the simulator's, and at the crate root they would read as the gateway's.
pub mod sim;

pub use clock::{DeliveryClock, OrderKey, ParticipantId, PointId};
pub use error::GatewayError;
pub use frame::{
    framed, hello_signing_message, BlockData, Downlink, FrameError, NoticeCode, OwnResult,
    RefusalCode, SignedHello, Uplink, DOWNLINK_FRAME_MAX, HELLO_SIGNING_DOMAIN, PROTOCOL_VERSION,
    UPLINK_FRAME_MAX,
};
pub use link::{
    seal_signing_message, GatewayStats, LinkDecodeError, SealReply, SealedBatch,
    SEAL_SIGNATURE_HEADER, SEAL_SIGNING_DOMAIN, SEAL_TRANSACTIONS_MAX, TRANSACTION_BYTES_MAX,
    VALUATIONS_MAX,
};
pub use market::{
    DepthLevel, MarketData, PairAmount, PairDepth, DEPTH_LEVELS_MAX, MARKET_PAIRS_MAX,
};
pub use ordering::{
    ForwardedTrade, Horizon, OrderingBuffer, OrderingConfig, OrderingEvent, SealOutcome,
    ShardedOrderingBuffer, StragglerReason,
};
pub use release::{
    MarketPoint, ReleaseAction, ReleaseBuffer, ReleaseConfig, UplinkKind, UplinkMessage,
};
