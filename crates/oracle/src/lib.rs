//! Walras valuation oracle: a pure core (paper: `parallel-asset-valuation.txt`; design and
//! departures from the paper: `docs/oracle.md`).
//!
//! The modules are private; every item a caller needs is re-exported here, under one path.
//!
//! - `decimal`: exact prices and sizes (never `f64` in book state).
//! - `event`, `normalize`: Binance, Coinbase Advanced Trade, Kraken v2, OKX v5 and Bitstamp v2
//!   wire formats to typed events or typed errors.
//! - `book`: one book per instrument with its venue's integrity rule and a health state.
//! - `value`: mid, weighted mid, depth VWAP (naive and closed form), notional depth, trade VWAP.
//! - `aggregate`: venue prices to one published price per asset.
//! - `config`: the oracle's settings ([`OracleConfig`]).
//! - `router`: records to per-instrument work, with the connection-level rules.
//! - `partition`: one worker's instruments: books, valuations, conflation.
//! - `replay`: the threaded replay of a recorded feed, partitioned by asset across threads,
//!   deterministic for any thread count; `latency`: its latency figures.
//! - `live`: the single-threaded form a process drives (records in one at a time, prices on
//!   demand) and a recorded feed replayed in a loop; it uses the router and partitions directly.
//! - `asset_map`: exchange asset ids ↔ oracle assets, units per token, venue symbols.
//! - `record`: the recorded-feed format; `venues`: venue and instrument names; `generator`: a
//!   fault-injecting feed generator with the venues' truth.
//!
//! Time is always passed in (`*_ns` receive times); nothing here reads the clock except the
//! replay's latency histograms and paced replay, and nothing here does I/O except
//! [`read_jsonl`] and [`write_jsonl`] on the reader or writer they are given.

// A core crate: a panic here takes down the node that embeds it, so every fallible step is
// handled (tests may unwrap).
#![cfg_attr(not(test), deny(clippy::unwrap_used))]
#![warn(unreachable_pub)]

mod aggregate;
mod asset_map;
mod book;
mod config;
mod decimal;
mod event;
mod generator;
mod latency;
mod live;
mod normalize;
mod partition;
mod record;
mod replay;
mod router;
mod value;
mod venues;

pub use aggregate::{
    aggregate_all, aggregate_asset, health_text, weighted_median, AggregateConfig, ExcludedVenue,
    InstrumentQuote, PriceStatus, PublishedPrice, UsedVenue, AGREE_BPS_MIN_DEFAULT,
};
pub use asset_map::{AssetEntry, AssetMap, AssetMapError, ASSETS_MAX};
pub use book::{
    kraken_checksum, kraken_checksum_text, okx_checksum_text, Book, BookAction, Health,
    HealthLimits, KrakenSpec, ResyncReason, BINANCE_BUFFER_MAX, KRAKEN_CHECKSUM_LEVELS,
    LEVELS_PER_SIDE_MAX, OKX_CHECKSUM_LEVELS,
};
pub use config::OracleConfig;
pub use decimal::{Dec, DecError, SCALE_DIGITS, TEXT_LEN_MAX};
pub use event::{
    BookKind, BookMessage, Event, Level, Normalized, OkxChecksum, Protocol, Sequencing, Side, Trade,
};
pub use generator::{
    generate_feed, generate_feed_with_truth, FaultCounts, FeedConfig, GeneratedFeed, TruthPoint,
    TRUTH_LEVELS,
};
pub use latency::{LatencyReport, Percentiles};
pub use live::{HealthCounts, LiveOracle, LoopedFeed, Publication, VenueHealth, LOOP_GAP_NS};
pub use normalize::{
    normalize, NormError, LEVELS_PER_MESSAGE_MAX, PAYLOAD_BYTES_MAX, SYMBOL_LEN_MAX,
};
pub use partition::{Partition, VALUATION_LEVELS_MAX};
pub use record::{read_jsonl, write_jsonl, FeedError, Record, RecordKind, RECORD_BYTES_MAX};
pub use replay::{
    replay, BookSummary, ReplayOptions, ReplayReport, BATCH_MAX, ERRORS_KEPT_MAX, THREADS_MAX,
};
pub use router::{InstrumentInfo, InstrumentKey, RouteError, Routed, Router};
pub use value::{
    band_liquidity, depth_vwap, depth_vwap_naive, mid, notional_depth, parse_levels, value,
    value_book_text, weighted_mid, BookValuation, LevelsError, Method, NotionalDepth, TradeWindow,
    ValueError, DEPTH_STEPS_MAX, LEVELS_TEXT_MAX, TRADES_PER_WINDOW_MAX,
};
pub use venues::{
    default_assets, default_venues, parse_symbol, symbol_for, venue_protocol, venue_quote,
    KNOWN_QUOTES, KRAKEN_DEPTH,
};
