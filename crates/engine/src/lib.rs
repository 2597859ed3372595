//! The exchange: state, transactions' effects, deterministic filtering, parallel block
//! execution, block headers and the follower's exact check of a proposer's clearing.
//!
//! - [`state::ExchangeState`]: accounts, open offers, burns, and the state root.
//! - [`admission`]: the one rule deciding whether a transaction alone may take effect.
//! - [`filter`]: which transactions of a block take effect (SPEEDEX §8, appendix I).
//! - [`execute`]: proposing ([`ExchangeState::propose`]) and applying
//!   ([`ExchangeState::apply`]) blocks, in phases sharded over threads.
//! - [`block`]: blocks, headers, their encodings and hashes.
//! - [`orderbook`]: the serial price-time-priority exchange SPEEDEX is compared against.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod account;
pub mod account_view;
pub mod admission;
pub mod block;
pub mod bridge;
mod carried;
pub mod checkpoint;
pub mod drop_reason;
pub mod execute;
pub mod explain;
pub mod filter;
pub mod market;
pub mod orderbook;
mod parallel;
pub mod resting;
pub mod state;

pub use account::Account;
pub use account_view::AccountView;
pub use block::{Block, BlockHeader, PairTrade};
pub use bridge::{BridgeError, PaymentsBridge};
pub use checkpoint::{CheckpointError, LoadTimings};
pub use execute::{
    BlockOutcome, CheckedBlock, ClearingReport, EngineConfig, EngineError, OfferFill, PhaseTimings,
};
pub use filter::DropReason;
pub use market::{AssetMarket, LastTrade, MarketPrices};
pub use orderbook::{Fill, OrderbookBlockStats, OrderbookExchange};
pub use state::ExchangeState;
