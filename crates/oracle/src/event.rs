//! Normalised market data: what every venue's wire format becomes.

use crate::decimal::Dec;
use serde::{Deserialize, Serialize};

/// The five wire formats the oracle reads. Several venues may speak one protocol
/// (Binance and Binance US both speak `Binance`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Binance,
    Coinbase,
    Kraken,
    Okx,
    Bitstamp,
}

impl Protocol {
    pub const ALL: [Protocol; 5] = [
        Protocol::Binance,
        Protocol::Coinbase,
        Protocol::Kraken,
        Protocol::Okx,
        Protocol::Bitstamp,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Binance => "binance",
            Protocol::Coinbase => "coinbase",
            Protocol::Kraken => "kraken",
            Protocol::Okx => "okx",
            Protocol::Bitstamp => "bitstamp",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Bid,
    Ask,
}

/// One price level: `qty == 0` in a delta removes the level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Level {
    pub price: Dec,
    pub qty: Dec,
}

/// The sequencing a venue attaches to one book message; the book's integrity rule reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Sequencing {
    /// Binance REST snapshot `lastUpdateId`.
    BinanceSnapshot { last_update_id: u64 },
    /// Binance diff depth: first (`U`) and final (`u`) update ids in the event.
    BinanceDiff {
        first_update_id: u64,
        final_update_id: u64,
    },
    /// Kraken v2: CRC32 of the top 10 levels after this message.
    KrakenChecksum { checksum: u32 },
    /// OKX v5: `prevSeqId` (-1 on a snapshot) and `seqId`.
    OkxSeq { prev_seq_id: i64, seq_id: i64 },
    /// Bitstamp: `microtimestamp` of the message.
    BitstampTime { micros: u64 },
    /// Coinbase sequences whole messages per connection (`sequence_num`), not books.
    Connection,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BookKind {
    /// Replaces the whole book.
    Snapshot,
    /// Changes the listed levels.
    Delta,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BookMessage {
    pub symbol: String,
    pub kind: BookKind,
    pub bids: Vec<Level>,
    pub asks: Vec<Level>,
    pub sequencing: Sequencing,
    /// OKX only: the message's checksum and its levels' price and size texts as sent, which the
    /// checksum is computed over (`"8476.98"` and `"8476.980"` are the same price, not the same text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub okx_checksum: Option<OkxChecksum>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OkxChecksum {
    pub checksum: i32,
    /// (price text, size text), aligned with `bids` and `asks`.
    pub bids: Vec<(String, String)>,
    pub asks: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trade {
    pub symbol: String,
    pub price: Dec,
    pub qty: Dec,
    /// The aggressor's side when the venue says it.
    pub taker: Option<Side>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    Book(BookMessage),
    Trade(Trade),
    /// Kraken v2 `instrument` channel: the precisions its book checksum is printed at.
    PairPrecision {
        symbol: String,
        price_decimals: u32,
        qty_decimals: u32,
    },
}

/// One wire message after normalisation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Normalized {
    /// Coinbase `sequence_num`: per connection, every channel, +1 per message.
    pub connection_seq: Option<u64>,
    pub events: Vec<Event>,
}
