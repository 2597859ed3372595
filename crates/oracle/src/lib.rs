//! Walras valuation oracle: a pure core (paper: `parallel-asset-valuation.txt`; design and
//! departures from the paper: `docs/oracle.md`).
//!
//! - [`decimal`]: exact prices and sizes (never `f64` in book state).
//! - [`normalize`]: Binance, Coinbase Advanced Trade, Kraken v2, OKX v5 and Bitstamp v2 wire
//!   formats to typed events or typed errors.
//! - [`book`]: one book per instrument with its venue's integrity rule and a health state.
//! - [`value`]: mid, weighted mid, depth VWAP (naive and closed form), notional depth, trade VWAP.
//! - [`aggregate`]: venue prices to one published price per asset.
//! - [`pipeline`]: routing, partitioning by asset across threads, conflation, deterministic replay.
//! - [`live`]: the single-threaded form a process drives (records in one at a time, prices
//!   on demand) and a recorded feed replayed in a loop.
//! - [`asset_map`]: exchange asset ids ↔ oracle assets, units per token, venue symbols.
//! - [`feed`]: the recorded-feed format and a fault-injecting generator with the venues' truth.
//!
//! Time is always passed in (`*_ns` receive times); nothing here reads the clock except the
//! pipeline's latency histograms and paced replay, and nothing here does I/O except
//! `feed::{read_jsonl, write_jsonl}` on the reader or writer they are given.

// A core crate: a panic here takes down the node that embeds it, so every fallible step is
// handled (tests may unwrap).
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod aggregate;
pub mod asset_map;
pub mod book;
pub mod decimal;
pub mod event;
pub mod feed;
pub mod live;
pub mod normalize;
pub mod pipeline;
pub mod value;
