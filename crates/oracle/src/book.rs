//! One order book per instrument, kept honest by its venue's integrity rule.
//!
//! The rule decides `sync`: a book is `Synced` only while every message since its snapshot has
//! passed the venue's check; the first failure clears the levels, moves the book to
//! `Resyncing(reason)` and returns `BookAction::Resync` for the connector to act on (fetch a REST
//! snapshot, resubscribe). Until a new snapshot passes, the book has no levels, so a wrong book
//! cannot be served: `health` never says `Synced` for it and valuation refuses it.
//!
//! Rules (from each venue's documentation):
//! - Binance: buffer diffs until the REST snapshot; drop diffs with `u <= lastUpdateId`; the first
//!   applied diff must bridge, `U <= lastUpdateId + 1 <= u`; each later diff chains, `U == prev u + 1`.
//! - Coinbase: the connection's `sequence_num` must rise by exactly one per message (checked by the
//!   caller, which knows the connection, and applied with `resync`); each `l2_data` snapshot starts a book.
//! - Kraken v2: after each message truncate each side to the subscribed depth, then the CRC32 of the
//!   top 10 levels (asks ascending then bids descending; each price and qty printed at the pair's
//!   precision, the point removed, leading zeros removed) must equal the message's `checksum`.
//! - OKX v5: an update's `prevSeqId` must equal the previous message's `seqId` (one whose `seqId`
//!   is not above it is a repeat and is ignored); when the message carries `checksum`, the CRC32 of
//!   the top 25 levels' texts interleaved `bid:size:ask:size:...`, read as an i32, must equal it.
//! - Bitstamp: each `order_book` message replaces the book whole; a message older than the one
//!   applied (by `microtimestamp`) is ignored; diffs newer than the book apply.

use crate::decimal::Dec;
use crate::event::{BookKind, BookMessage, Level, Protocol, Sequencing};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// Diffs buffered while a Binance book waits for its snapshot.
pub const BINANCE_BUFFER_MAX: usize = 4096;
/// Levels a side may hold; a named limit on outside input.
pub const LEVELS_PER_SIDE_MAX: usize = 20_000;
/// Levels the Kraken checksum covers.
pub const KRAKEN_CHECKSUM_LEVELS: usize = 10;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum ResyncReason {
    AwaitingSnapshot,
    Gap {
        expected: i64,
        got: i64,
    },
    ConnectionGap {
        expected: u64,
        got: u64,
    },
    ChecksumMismatch {
        expected: u32,
        computed: u32,
    },
    SnapshotTooOld {
        last_update_id: u64,
        first_buffered: u64,
    },
    BufferOverflow,
    Disconnected,
    TooManyLevels,
    Crossed,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum Health {
    Synced,
    Resyncing(ResyncReason),
    Crossed,
    Stale,
    Thin,
}

impl Health {
    pub fn is_good(&self) -> bool {
        *self == Health::Synced
    }
}

/// What the caller (a connector) should do after a message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BookAction {
    None,
    /// The book was cleared; fetch a snapshot or resubscribe.
    Resync(ResyncReason),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KrakenSpec {
    /// Subscribed depth (10, 25, 100, 500, 1000): the book is truncated to it.
    pub depth: usize,
    pub price_decimals: u32,
    pub qty_decimals: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthLimits {
    /// A book with no message for this long is `Stale`.
    pub stale_after_ns: u64,
    /// Fewer levels than this on either side is `Thin`.
    pub levels_per_side_min: usize,
}

impl Default for HealthLimits {
    fn default() -> Self {
        HealthLimits {
            stale_after_ns: 5_000_000_000,
            levels_per_side_min: 1,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum SyncState {
    Synced,
    Resyncing(ResyncReason),
}

#[derive(Clone, Debug)]
pub struct Book {
    protocol: Protocol,
    kraken: Option<KrakenSpec>,
    /// Test hook: a Kraken book that skips truncation, to show the checksum catches it.
    pub skip_truncation: bool,
    bids: BTreeMap<Dec, Dec>,
    asks: BTreeMap<Dec, Dec>,
    sync: SyncState,
    /// Binance: final update id applied; OKX: last seqId; Bitstamp: last microtimestamp.
    last_id: i64,
    /// Binance: the next diff must bridge the snapshot rather than chain.
    binance_bridging: bool,
    binance_buffer: VecDeque<BookMessage>,
    okx_bid_text: BTreeMap<Dec, (String, String)>,
    okx_ask_text: BTreeMap<Dec, (String, String)>,
    last_update_ns: u64,
    updates: u64,
}

impl Book {
    pub fn new(protocol: Protocol, kraken: Option<KrakenSpec>) -> Book {
        Book {
            protocol,
            kraken,
            skip_truncation: false,
            bids: BTreeMap::new(),
            asks: BTreeMap::new(),
            sync: SyncState::Resyncing(ResyncReason::AwaitingSnapshot),
            last_id: 0,
            binance_bridging: false,
            binance_buffer: VecDeque::new(),
            okx_bid_text: BTreeMap::new(),
            okx_ask_text: BTreeMap::new(),
            last_update_ns: 0,
            updates: 0,
        }
    }

    pub fn protocol(&self) -> Protocol {
        self.protocol
    }
    pub fn is_synced(&self) -> bool {
        self.sync == SyncState::Synced
    }
    pub fn last_update_ns(&self) -> u64 {
        self.last_update_ns
    }
    pub fn updates(&self) -> u64 {
        self.updates
    }
    /// Bids best first.
    pub fn bids(&self) -> impl Iterator<Item = (Dec, Dec)> + '_ {
        self.bids.iter().rev().map(|(p, q)| (*p, *q))
    }
    /// Asks best first.
    pub fn asks(&self) -> impl Iterator<Item = (Dec, Dec)> + '_ {
        self.asks.iter().map(|(p, q)| (*p, *q))
    }
    pub fn best_bid(&self) -> Option<Dec> {
        self.bids.keys().next_back().copied()
    }
    pub fn best_ask(&self) -> Option<Dec> {
        self.asks.keys().next().copied()
    }
    pub fn is_crossed(&self) -> bool {
        matches!((self.best_bid(), self.best_ask()), (Some(b), Some(a)) if b >= a)
    }

    pub fn health(&self, now_ns: u64, limits: &HealthLimits) -> Health {
        if let SyncState::Resyncing(reason) = &self.sync {
            return Health::Resyncing(reason.clone());
        }
        if self.is_crossed() {
            return Health::Crossed;
        }
        if now_ns.saturating_sub(self.last_update_ns) > limits.stale_after_ns {
            return Health::Stale;
        }
        if self.bids.len() < limits.levels_per_side_min
            || self.asks.len() < limits.levels_per_side_min
        {
            return Health::Thin;
        }
        Health::Synced
    }

    /// Clears the book and waits for a snapshot (a connection gap or a disconnect).
    pub fn resync(&mut self, reason: ResyncReason) -> BookAction {
        self.bids.clear();
        self.asks.clear();
        self.okx_bid_text.clear();
        self.okx_ask_text.clear();
        self.binance_buffer.clear();
        self.binance_bridging = false;
        self.sync = SyncState::Resyncing(reason.clone());
        BookAction::Resync(reason)
    }

    /// Applies one message received at `now_ns`.
    pub fn apply(&mut self, msg: &BookMessage, now_ns: u64) -> BookAction {
        let action = match self.protocol {
            Protocol::Binance => self.apply_binance(msg),
            Protocol::Coinbase => self.apply_plain(msg),
            Protocol::Kraken => self.apply_kraken(msg),
            Protocol::Okx => self.apply_okx(msg),
            Protocol::Bitstamp => self.apply_bitstamp(msg),
        };
        if self.bids.len() > LEVELS_PER_SIDE_MAX || self.asks.len() > LEVELS_PER_SIDE_MAX {
            return self.resync(ResyncReason::TooManyLevels);
        }
        if self.is_synced() {
            self.last_update_ns = now_ns;
            self.updates += 1;
        }
        debug_assert!(
            self.is_synced() || (self.bids.is_empty() && self.asks.is_empty()),
            "an unsynced book holds no levels"
        );
        action
    }

    fn replace(&mut self, msg: &BookMessage) {
        self.bids.clear();
        self.asks.clear();
        self.okx_bid_text.clear();
        self.okx_ask_text.clear();
        self.apply_levels(msg);
    }

    /// OKX: keeps the texts the checksum is computed over.
    fn apply_okx_texts(&mut self, msg: &BookMessage) {
        let Some(c) = &msg.okx_checksum else { return };
        fn side(
            map: &mut BTreeMap<Dec, (String, String)>,
            levels: &[Level],
            texts: &[(String, String)],
        ) {
            for (l, t) in levels.iter().zip(texts) {
                if l.qty.is_zero() {
                    map.remove(&l.price);
                } else {
                    map.insert(l.price, t.clone());
                }
            }
        }
        side(&mut self.okx_bid_text, &msg.bids, &c.bids);
        side(&mut self.okx_ask_text, &msg.asks, &c.asks);
    }

    /// OKX checksum text over this book: `bid1px:bid1sz:ask1px:ask1sz:...`, top 25 each side.
    fn okx_text(&self) -> String {
        let text = |map: &BTreeMap<Dec, (String, String)>, p: Dec, q: Dec| {
            map.get(&p)
                .cloned()
                .unwrap_or_else(|| (p.to_string(), q.to_string()))
        };
        let bids: Vec<(String, String)> = self
            .bids()
            .take(OKX_CHECKSUM_LEVELS)
            .map(|(p, q)| text(&self.okx_bid_text, p, q))
            .collect();
        let asks: Vec<(String, String)> = self
            .asks()
            .take(OKX_CHECKSUM_LEVELS)
            .map(|(p, q)| text(&self.okx_ask_text, p, q))
            .collect();
        okx_checksum_text(&bids, &asks)
    }

    fn apply_levels(&mut self, msg: &BookMessage) {
        fn side(map: &mut BTreeMap<Dec, Dec>, levels: &[Level]) {
            for l in levels {
                if l.qty.is_zero() {
                    map.remove(&l.price);
                } else {
                    map.insert(l.price, l.qty);
                }
            }
        }
        side(&mut self.bids, &msg.bids);
        side(&mut self.asks, &msg.asks);
    }

    // Coinbase: snapshots start the book, updates apply; gaps arrive through `resync`.
    fn apply_plain(&mut self, msg: &BookMessage) -> BookAction {
        match msg.kind {
            BookKind::Snapshot => {
                self.replace(msg);
                self.sync = SyncState::Synced;
            }
            BookKind::Delta if self.is_synced() => self.apply_levels(msg),
            BookKind::Delta => {}
        }
        BookAction::None
    }

    fn apply_binance(&mut self, msg: &BookMessage) -> BookAction {
        match (msg.kind.clone(), msg.sequencing) {
            (BookKind::Snapshot, Sequencing::BinanceSnapshot { last_update_id }) => {
                self.replace(msg);
                self.last_id = last_update_id as i64;
                self.binance_bridging = true;
                self.sync = SyncState::Synced;
                let buffered: Vec<BookMessage> = self.binance_buffer.drain(..).collect();
                for (at, diff) in buffered.iter().enumerate() {
                    if let BookAction::Resync(reason) = self.binance_diff(diff) {
                        // Keep the later diffs too: the next snapshot may bridge to them.
                        self.binance_buffer
                            .extend(buffered[at + 1..].iter().cloned());
                        return BookAction::Resync(reason);
                    }
                }
                BookAction::None
            }
            (BookKind::Delta, Sequencing::BinanceDiff { .. }) if self.is_synced() => {
                self.binance_diff(msg)
            }
            (BookKind::Delta, Sequencing::BinanceDiff { .. }) => {
                if self.binance_buffer.len() >= BINANCE_BUFFER_MAX {
                    return self.resync(ResyncReason::BufferOverflow);
                }
                self.binance_buffer.push_back(msg.clone());
                BookAction::None
            }
            _ => BookAction::None,
        }
    }

    /// One diff on a synced Binance book.
    fn binance_diff(&mut self, msg: &BookMessage) -> BookAction {
        let Sequencing::BinanceDiff {
            first_update_id,
            final_update_id,
        } = msg.sequencing
        else {
            return BookAction::None;
        };
        let (first, last) = (first_update_id as i64, final_update_id as i64);
        if last <= self.last_id {
            return BookAction::None; // already in the snapshot, or a duplicate
        }
        let ok = if self.binance_bridging {
            first <= self.last_id + 1
        } else {
            first == self.last_id + 1
        };
        if !ok {
            let reason = if self.binance_bridging {
                // The snapshot predates this diff: a newer snapshot is needed.
                ResyncReason::SnapshotTooOld {
                    last_update_id: self.last_id as u64,
                    first_buffered: first_update_id,
                }
            } else {
                ResyncReason::Gap {
                    expected: self.last_id + 1,
                    got: first,
                }
            };
            let action = self.resync(reason);
            // Keep this diff: the next snapshot may bridge to it.
            self.binance_buffer.push_back(msg.clone());
            return action;
        }
        self.apply_levels(msg);
        self.last_id = last;
        self.binance_bridging = false;
        BookAction::None
    }

    fn apply_kraken(&mut self, msg: &BookMessage) -> BookAction {
        let Sequencing::KrakenChecksum { checksum } = msg.sequencing else {
            return BookAction::None;
        };
        match msg.kind {
            BookKind::Snapshot => self.replace(msg),
            BookKind::Delta if self.is_synced() => self.apply_levels(msg),
            BookKind::Delta => return BookAction::None,
        }
        let spec = self.kraken.unwrap_or(KrakenSpec {
            depth: 10,
            price_decimals: 8,
            qty_decimals: 8,
        });
        if !self.skip_truncation {
            while self.bids.len() > spec.depth {
                self.bids.pop_first();
            }
            while self.asks.len() > spec.depth {
                self.asks.pop_last();
            }
        }
        let computed = kraken_checksum(
            self.bids(),
            self.asks(),
            spec.price_decimals,
            spec.qty_decimals,
        );
        if computed != checksum {
            return self.resync(ResyncReason::ChecksumMismatch {
                expected: checksum,
                computed,
            });
        }
        self.sync = SyncState::Synced;
        BookAction::None
    }

    fn apply_okx(&mut self, msg: &BookMessage) -> BookAction {
        let Sequencing::OkxSeq {
            prev_seq_id,
            seq_id,
        } = msg.sequencing
        else {
            return BookAction::None;
        };
        match msg.kind {
            BookKind::Snapshot => {
                self.replace(msg);
                self.sync = SyncState::Synced;
            }
            BookKind::Delta if self.is_synced() => {
                if prev_seq_id != self.last_id && seq_id <= self.last_id {
                    return BookAction::None; // a repeat of a message already applied
                }
                if prev_seq_id != self.last_id {
                    return self.resync(ResyncReason::Gap {
                        expected: self.last_id,
                        got: prev_seq_id,
                    });
                }
                self.apply_levels(msg);
            }
            BookKind::Delta => return BookAction::None,
        }
        self.last_id = seq_id;
        self.apply_okx_texts(msg);
        if let Some(c) = &msg.okx_checksum {
            let computed = crc32fast::hash(self.okx_text().as_bytes());
            if computed as i32 != c.checksum {
                return self.resync(ResyncReason::ChecksumMismatch {
                    expected: c.checksum as u32,
                    computed,
                });
            }
        }
        BookAction::None
    }

    fn apply_bitstamp(&mut self, msg: &BookMessage) -> BookAction {
        let Sequencing::BitstampTime { micros } = msg.sequencing else {
            return BookAction::None;
        };
        let micros = micros.min(i64::MAX as u64) as i64;
        match msg.kind {
            BookKind::Snapshot => {
                if self.is_synced() && micros <= self.last_id {
                    return BookAction::None; // an older or repeated snapshot
                }
                self.replace(msg);
                self.sync = SyncState::Synced;
                self.last_id = micros;
            }
            BookKind::Delta if self.is_synced() && micros > self.last_id => {
                self.apply_levels(msg);
                self.last_id = micros;
            }
            BookKind::Delta => {}
        }
        BookAction::None
    }
}

/// Levels per side the OKX checksum covers.
pub const OKX_CHECKSUM_LEVELS: usize = 25;

/// The text OKX v5 hashes: the top 25 bids and asks interleaved, `bid:size:ask:size:...`, each as
/// sent; a side that runs out is skipped. The checksum is the CRC32 read as a signed 32-bit integer.
pub fn okx_checksum_text(bids: &[(String, String)], asks: &[(String, String)]) -> String {
    let mut parts: Vec<&str> = Vec::with_capacity(4 * OKX_CHECKSUM_LEVELS);
    for i in 0..OKX_CHECKSUM_LEVELS {
        if let Some((p, q)) = bids.get(i) {
            parts.push(p);
            parts.push(q);
        }
        if let Some((p, q)) = asks.get(i) {
            parts.push(p);
            parts.push(q);
        }
    }
    parts.join(":")
}

/// The text Kraken v2 hashes: the top 10 asks (ascending) then the top 10 bids (descending), each
/// price and qty printed at the pair's precision with the point and leading zeros removed.
pub fn kraken_checksum_text(
    bids: impl Iterator<Item = (Dec, Dec)>,
    asks: impl Iterator<Item = (Dec, Dec)>,
    price_decimals: u32,
    qty_decimals: u32,
) -> String {
    fn push(out: &mut String, value: Dec, decimals: u32) {
        let text = value.format_fixed(decimals).replace('.', "");
        out.push_str(text.trim_start_matches('0'));
    }
    let mut text = String::new();
    for (p, q) in asks.take(KRAKEN_CHECKSUM_LEVELS) {
        push(&mut text, p, price_decimals);
        push(&mut text, q, qty_decimals);
    }
    for (p, q) in bids.take(KRAKEN_CHECKSUM_LEVELS) {
        push(&mut text, p, price_decimals);
        push(&mut text, q, qty_decimals);
    }
    text
}

/// Kraken v2 book checksum: CRC32 (ISO-HDLC, as `crc32fast`) of `kraken_checksum_text`.
pub fn kraken_checksum(
    bids: impl Iterator<Item = (Dec, Dec)>,
    asks: impl Iterator<Item = (Dec, Dec)>,
    price_decimals: u32,
    qty_decimals: u32,
) -> u32 {
    crc32fast::hash(kraken_checksum_text(bids, asks, price_decimals, qty_decimals).as_bytes())
}
