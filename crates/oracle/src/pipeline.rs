//! The parallel pipeline (paper §2.5): records are normalised and routed on the caller's thread,
//! instruments are partitioned by asset across worker threads (so every venue of one asset, its
//! valuations and its live aggregate stay on one core, the paper's static assignment), and a
//! collector publishes one deterministic aggregate per publication tick.
//!
//! Overload policy: queues are bounded and the router blocks when one is full; book messages are
//! never dropped (a dropped delta is a corrupt book). Work is shed at valuation instead: a worker
//! drains its queue in batches and values each instrument once per batch, on its newest book
//! (conflation to the newest book per instrument). Because a tick is valued on the book as of
//! the tick, the published sequence does not depend on how much was conflated, so it is
//! bit-identical for any thread count.

use crate::aggregate::{
    aggregate_all, aggregate_asset, AggregateConfig, InstrumentQuote, PriceStatus, PublishedPrice,
};
use crate::book::{Book, BookAction, Health, HealthLimits, KrakenSpec, ResyncReason};
use crate::event::{BookMessage, Event, Protocol, Trade};
use crate::feed::{parse_symbol, venue_protocol, Record, RecordKind, KRAKEN_DEPTH};
use crate::normalize::normalize;
use crate::value::{band_liquidity, value, Method, TradeWindow, ValueError};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// Most levels per side converted for a valuation.
pub const VALUATION_LEVELS_MAX: usize = 5_000;
/// Most queued items a worker takes in one batch.
pub const BATCH_MAX: usize = 1_024;
/// Parse errors kept verbatim in the report.
pub const ERRORS_KEPT_MAX: usize = 20;
/// Most worker threads.
pub const THREADS_MAX: usize = 256;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OracleConfig {
    pub method: Method,
    pub health: HealthLimits,
    pub aggregate: AggregateConfig,
    pub publish_interval_ns: u64,
    /// Liquidity weight: quote notional within this fraction of the valuation, thinner side.
    pub liquidity_band: f64,
    /// Kraken book subscription depth (the truncation depth).
    pub kraken_depth: usize,
    pub trade_window_ns: u64,
    /// Items per worker queue.
    pub queue_capacity: usize,
}

impl Default for OracleConfig {
    fn default() -> Self {
        OracleConfig {
            method: Method::NotionalDepth { quote: 10_000.0 },
            health: HealthLimits::default(),
            aggregate: AggregateConfig::default(),
            publish_interval_ns: 100_000_000,
            liquidity_band: 0.01,
            kraken_depth: KRAKEN_DEPTH,
            trade_window_ns: 60_000_000_000,
            queue_capacity: 4_096,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct InstrumentKey {
    pub venue: String,
    pub symbol: String,
}

impl std::fmt::Display for InstrumentKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.venue, self.symbol)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstrumentInfo {
    pub key: InstrumentKey,
    pub protocol: Protocol,
    pub base: String,
    pub quote: String,
    pub kraken: Option<KrakenSpec>,
}

/// What the router hands a partition.
#[derive(Clone, Debug, PartialEq)]
pub enum Routed {
    Book {
        info: InstrumentInfo,
        msg: BookMessage,
    },
    Trade {
        info: InstrumentInfo,
        trade: Trade,
    },
    Resync {
        info: InstrumentInfo,
        reason: ResyncReason,
    },
}

impl Routed {
    pub fn info(&self) -> &InstrumentInfo {
        match self {
            Routed::Book { info, .. }
            | Routed::Trade { info, .. }
            | Routed::Resync { info, .. } => info,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("unknown venue {0:?}: its name must start with a protocol name")]
    UnknownVenue(String),
    #[error("{venue}: {source}")]
    Normalize {
        venue: String,
        source: crate::normalize::NormError,
    },
    #[error("{venue}: cannot split symbol {symbol:?} into base and quote")]
    UnknownSymbol { venue: String, symbol: String },
    #[error("{venue}: REST path {path:?} names no symbol")]
    BadRestPath { venue: String, path: String },
}

/// Normalises records and applies the connection-level rules (Coinbase `sequence_num`,
/// disconnects), turning them into per-instrument work. Single-threaded and deterministic.
pub struct Router {
    kraken_depth: usize,
    conn_seq: BTreeMap<(String, u32), u64>,
    venue_instruments: BTreeMap<String, BTreeMap<InstrumentKey, InstrumentInfo>>,
    kraken_precision: BTreeMap<(String, String), (u32, u32)>,
    pub connection_gaps: u64,
}

fn rest_symbol(path: &str) -> Option<&str> {
    // Binance `/api/v3/depth?symbol=X&limit=N`; Bitstamp `/api/v2/order_book/{pair}/`.
    if let Some((_, query)) = path.split_once('?') {
        return query.split('&').find_map(|kv| kv.strip_prefix("symbol="));
    }
    path.trim_end_matches('/')
        .rsplit('/')
        .next()
        .filter(|s| !s.is_empty())
}

impl Router {
    /// `kraken_depth`: the Kraken book subscription depth, which is also the truncation depth.
    pub fn new(kraken_depth: usize) -> Router {
        Router {
            kraken_depth: kraken_depth.max(1),
            conn_seq: BTreeMap::new(),
            venue_instruments: BTreeMap::new(),
            kraken_precision: BTreeMap::new(),
            connection_gaps: 0,
        }
    }

    fn info(
        &mut self,
        venue: &str,
        protocol: Protocol,
        symbol: &str,
    ) -> Result<InstrumentInfo, RouteError> {
        let key = InstrumentKey {
            venue: venue.to_string(),
            symbol: symbol.to_string(),
        };
        if let Some(info) = self.venue_instruments.get(venue).and_then(|m| m.get(&key)) {
            return Ok(info.clone());
        }
        let (base, quote) = parse_symbol(symbol).ok_or_else(|| RouteError::UnknownSymbol {
            venue: venue.into(),
            symbol: symbol.into(),
        })?;
        Ok(self.add_instrument(key, protocol, base, quote))
    }

    /// Records an instrument (with its Kraken checksum spec, for Kraken) and returns it.
    fn add_instrument(
        &mut self,
        key: InstrumentKey,
        protocol: Protocol,
        base: String,
        quote: String,
    ) -> InstrumentInfo {
        let kraken = (protocol == Protocol::Kraken).then(|| {
            let (price_decimals, qty_decimals) = self
                .kraken_precision
                .get(&(key.venue.clone(), key.symbol.clone()))
                .copied()
                .unwrap_or((8, 8));
            KrakenSpec {
                depth: self.kraken_depth,
                price_decimals,
                qty_decimals,
            }
        });
        let info = InstrumentInfo {
            key: key.clone(),
            protocol,
            base,
            quote,
            kraken,
        };
        self.venue_instruments
            .entry(key.venue.clone())
            .or_default()
            .insert(key, info.clone());
        info
    }

    /// Registers an instrument's base and quote from venue metadata, overriding the symbol split.
    pub fn register(
        &mut self,
        venue: &str,
        symbol: &str,
        base: &str,
        quote: &str,
    ) -> Result<(), RouteError> {
        let protocol =
            venue_protocol(venue).ok_or_else(|| RouteError::UnknownVenue(venue.to_string()))?;
        let key = InstrumentKey {
            venue: venue.to_string(),
            symbol: symbol.to_string(),
        };
        self.add_instrument(key, protocol, base.to_string(), quote.to_string());
        Ok(())
    }

    /// Routes one record.
    pub fn route(&mut self, record: &Record) -> Result<Vec<Routed>, RouteError> {
        let venue = record.venue.as_str();
        let protocol =
            venue_protocol(venue).ok_or_else(|| RouteError::UnknownVenue(venue.to_string()))?;
        if record.kind == RecordKind::Disconnect {
            self.conn_seq.remove(&(venue.to_string(), record.conn));
            return Ok(self.resync_venue(venue, ResyncReason::Disconnected));
        }
        let rest = match (record.kind, &record.path) {
            (RecordKind::Rest, Some(path)) => {
                Some(rest_symbol(path).ok_or_else(|| RouteError::BadRestPath {
                    venue: venue.into(),
                    path: path.clone(),
                })?)
            }
            (RecordKind::Rest, None) => {
                return Err(RouteError::BadRestPath {
                    venue: venue.into(),
                    path: String::new(),
                })
            }
            _ => None,
        };
        let normalized =
            normalize(protocol, record.payload.as_bytes(), rest).map_err(|source| {
                RouteError::Normalize {
                    venue: venue.to_string(),
                    source,
                }
            })?;
        let mut out = Vec::new();
        if let Some(seq) = normalized.connection_seq {
            let conn = (venue.to_string(), record.conn);
            match self.conn_seq.get(&conn).copied() {
                Some(last) if seq <= last => return Ok(out), // a repeat or a late message: already handled
                Some(last) if seq != last + 1 => {
                    self.connection_gaps += 1;
                    self.conn_seq.insert(conn, seq);
                    out.extend(self.resync_venue(
                        venue,
                        ResyncReason::ConnectionGap {
                            expected: last + 1,
                            got: seq,
                        },
                    ));
                }
                _ => {
                    self.conn_seq.insert(conn, seq);
                }
            }
        }
        for event in normalized.events {
            match event {
                Event::Book(msg) => {
                    let info = self.info(venue, protocol, &msg.symbol)?;
                    out.push(Routed::Book { info, msg });
                }
                Event::Trade(trade) => {
                    let info = self.info(venue, protocol, &trade.symbol)?;
                    out.push(Routed::Trade { info, trade });
                }
                Event::PairPrecision {
                    symbol,
                    price_decimals,
                    qty_decimals,
                } => {
                    self.kraken_precision
                        .insert((venue.to_string(), symbol), (price_decimals, qty_decimals));
                }
            }
        }
        Ok(out)
    }

    fn resync_venue(&self, venue: &str, reason: ResyncReason) -> Vec<Routed> {
        self.venue_instruments
            .get(venue)
            .map(|m| {
                m.values()
                    .map(|info| Routed::Resync {
                        info: info.clone(),
                        reason: reason.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

struct InstrumentState {
    info: InstrumentInfo,
    book: Book,
    trades: TradeWindow,
    price: Option<f64>,
    liquidity: f64,
    value_error: Option<String>,
    /// The last valuation failed for want of depth: the book is `Thin` for this method.
    thin: bool,
    resyncs: u64,
}

/// The book's bid–ask spread in basis points of its mid; `None` with an empty side.
fn spread_bps(book: &Book) -> Option<f64> {
    let (bid, ask) = (book.best_bid()?.to_f64(), book.best_ask()?.to_f64());
    let mid = (bid + ask) / 2.0;
    (mid > 0.0).then(|| (ask - bid) / mid * 1e4)
}

/// One worker's instruments: books, valuations, conflation. Pure and single-threaded; the
/// threaded pipeline and the tests drive it the same way.
pub struct Partition {
    cfg: OracleConfig,
    instruments: BTreeMap<InstrumentKey, InstrumentState>,
    dirty: BTreeSet<InstrumentKey>,
    pub valuations: u64,
    pub events: u64,
    pub resyncs: BTreeMap<String, u64>,
}

fn reason_name(r: &ResyncReason) -> String {
    serde_json::to_value(r)
        .ok()
        .and_then(|v| v.get("reason").and_then(|x| x.as_str()).map(String::from))
        .unwrap_or_default()
}

impl Partition {
    pub fn new(cfg: OracleConfig) -> Partition {
        Partition {
            cfg,
            instruments: BTreeMap::new(),
            dirty: BTreeSet::new(),
            valuations: 0,
            events: 0,
            resyncs: BTreeMap::new(),
        }
    }

    fn state(&mut self, info: &InstrumentInfo) -> &mut InstrumentState {
        let window = self.cfg.trade_window_ns;
        self.instruments
            .entry(info.key.clone())
            .or_insert_with(|| InstrumentState {
                info: info.clone(),
                book: Book::new(info.protocol, info.kraken),
                trades: TradeWindow::new(window),
                price: None,
                liquidity: 0.0,
                value_error: None,
                thin: false,
                resyncs: 0,
            })
    }

    /// Applies one routed item received at `now_ns`; the instrument becomes dirty.
    pub fn apply(&mut self, item: &Routed, now_ns: u64) {
        self.events += 1;
        let key = item.info().key.clone();
        let action = match item {
            Routed::Book { info, msg } => self.state(info).book.apply(msg, now_ns),
            Routed::Trade { info, trade } => {
                self.state(info)
                    .trades
                    .push(now_ns, trade.price.to_f64(), trade.qty.to_f64());
                BookAction::None
            }
            Routed::Resync { info, reason } => self.state(info).book.resync(reason.clone()),
        };
        if let BookAction::Resync(reason) = action {
            *self.resyncs.entry(reason_name(&reason)).or_default() += 1;
            if let Some(s) = self.instruments.get_mut(&key) {
                s.resyncs += 1;
            }
        }
        self.dirty.insert(key);
    }

    /// Values every dirty instrument once, on its newest book; returns how many were valued.
    pub fn value_dirty(&mut self) -> Vec<InstrumentKey> {
        let dirty: Vec<InstrumentKey> = std::mem::take(&mut self.dirty).into_iter().collect();
        for key in &dirty {
            let Some(s) = self.instruments.get_mut(key) else {
                continue;
            };
            self.valuations += 1;
            // A book that is not synced or is crossed is never valued.
            if !s.book.is_synced() || s.book.is_crossed() {
                s.price = None;
                s.liquidity = 0.0;
                s.value_error = Some(if s.book.is_synced() {
                    "crossed".into()
                } else {
                    "not synced".into()
                });
                continue;
            }
            let bids: Vec<(f64, f64)> = s
                .book
                .bids()
                .take(VALUATION_LEVELS_MAX)
                .map(|(p, q)| (p.to_f64(), q.to_f64()))
                .collect();
            let asks: Vec<(f64, f64)> = s
                .book
                .asks()
                .take(VALUATION_LEVELS_MAX)
                .map(|(p, q)| (p.to_f64(), q.to_f64()))
                .collect();
            match value(&bids, &asks, &self.cfg.method) {
                Ok(p) => {
                    s.price = Some(p);
                    s.liquidity = band_liquidity(&bids, &asks, p, self.cfg.liquidity_band);
                    s.value_error = None;
                    s.thin = false;
                }
                Err(e) => {
                    s.price = None;
                    s.liquidity = 0.0;
                    s.thin = matches!(
                        e,
                        ValueError::InsufficientDepth { .. } | ValueError::EmptySide(_)
                    );
                    s.value_error = Some(e.to_string());
                }
            }
        }
        dirty
    }

    /// Every instrument's quote at `now_ns`, by key. Health is judged now; a price is shown only
    /// for a `Synced` book.
    pub fn quotes(&self, now_ns: u64) -> Vec<InstrumentQuote> {
        self.instruments
            .values()
            .map(|s| self.quote(s, now_ns))
            .collect()
    }

    fn quote(&self, s: &InstrumentState, now_ns: u64) -> InstrumentQuote {
        let mut health = s.book.health(now_ns, &self.cfg.health);
        if health.is_good() && s.price.is_none() && s.thin {
            health = Health::Thin;
        }
        let good = health.is_good();
        InstrumentQuote {
            venue: s.info.key.venue.clone(),
            symbol: s.info.key.symbol.clone(),
            base: s.info.base.clone(),
            quote: s.info.quote.clone(),
            health,
            price: if good { s.price } else { None },
            liquidity: if good { s.liquidity } else { 0.0 },
            last_update_ns: s.book.last_update_ns(),
            value_error: s.value_error.clone(),
            spread_bps: if good { spread_bps(&s.book) } else { None },
        }
    }

    /// Quotes of one asset's instruments (all on this partition).
    pub fn asset_quotes(&self, asset: &str, now_ns: u64) -> Vec<InstrumentQuote> {
        self.instruments
            .values()
            .filter(|s| s.info.base == asset)
            .map(|s| self.quote(s, now_ns))
            .collect()
    }

    /// The book of one instrument, for inspection.
    pub fn book(&self, key: &InstrumentKey) -> Option<&Book> {
        self.instruments.get(key).map(|s| &s.book)
    }

    pub fn trade_vwap(&mut self, key: &InstrumentKey, now_ns: u64) -> Option<f64> {
        self.instruments
            .get_mut(key)
            .and_then(|s| s.trades.vwap(now_ns))
    }

    /// Instruments whose book is not synced, with their health at `now_ns`, and per-instrument resync counts.
    pub fn book_report(&self, now_ns: u64) -> Vec<(InstrumentKey, Health, u64)> {
        self.instruments
            .values()
            .map(|s| {
                (
                    s.info.key.clone(),
                    s.book.health(now_ns, &self.cfg.health),
                    s.resyncs,
                )
            })
            .collect()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub count: u64,
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

impl Percentiles {
    fn of(h: &Histogram<u64>) -> Percentiles {
        Percentiles {
            count: h.len(),
            p50: h.value_at_quantile(0.5),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyReport {
    pub event_to_valuation_us: Percentiles,
    pub event_to_aggregate_us: Percentiles,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BookSummary {
    pub instruments: usize,
    pub resyncs: BTreeMap<String, u64>,
    /// Instruments that resynced at least once and are synced at the end.
    pub recovered: usize,
    /// Instruments not synced at the end, with their health.
    pub unrecovered: Vec<String>,
    /// Venue prices used by an aggregate while their book was not `Synced` (must be 0).
    pub unhealthy_books_used: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplayReport {
    pub threads: usize,
    pub records: usize,
    pub events: u64,
    pub parse_errors: u64,
    pub errors: Vec<String>,
    pub ticks: u64,
    /// SHA-256 over the JSON of every tick's published prices, in order.
    pub digest: String,
    pub elapsed_ms: f64,
    pub events_per_s: f64,
    pub valuations: u64,
    pub latency: LatencyReport,
    pub status_counts: BTreeMap<String, u64>,
    pub books: BookSummary,
    /// The last tick's prices.
    pub prices: Vec<PublishedPrice>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplayOptions {
    pub threads: usize,
    /// `None`: as fast as possible; `Some(s)`: paced at `s` × recorded time.
    pub speed: Option<f64>,
}

enum WorkItem {
    Event {
        item: Box<Routed>,
        recv_ns: u64,
        sent: Instant,
    },
    Tick {
        index: u64,
        now_ns: u64,
    },
    Stop {
        now_ns: u64,
    },
}

struct TickResult {
    index: u64,
    now_ns: u64,
    quotes: Vec<InstrumentQuote>,
}

struct WorkerDone {
    partition_events: u64,
    valuations: u64,
    resyncs: BTreeMap<String, u64>,
    books: Vec<(InstrumentKey, Health, u64)>,
    to_valuation: Histogram<u64>,
    to_aggregate: Histogram<u64>,
}

fn histogram() -> Histogram<u64> {
    // 1 µs to 100 s at 3 significant digits; the bounds are constants, so this cannot fail.
    Histogram::new_with_bounds(1, 100_000_000, 3)
        .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable!()))
}

fn micros(d: Duration) -> u64 {
    (d.as_micros() as u64).max(1)
}

type Rates = Arc<RwLock<BTreeMap<String, f64>>>;

fn worker(
    cfg: OracleConfig,
    rx: crossbeam_channel::Receiver<WorkItem>,
    tx: crossbeam_channel::Sender<TickResult>,
    rates: Rates,
) -> WorkerDone {
    let mut part = Partition::new(cfg.clone());
    let mut to_valuation = histogram();
    let mut to_aggregate = histogram();
    let method = cfg.method.name();
    let mut pending: Vec<(InstrumentKey, Instant)> = Vec::new();
    let mut last_ns = 0u64;
    let mut batch: Vec<WorkItem> = Vec::with_capacity(BATCH_MAX);
    // Values the dirty instruments (conflated), then the live aggregate of each touched asset.
    let mut flush =
        |part: &mut Partition, pending: &mut Vec<(InstrumentKey, Instant)>, now_ns: u64| {
            if pending.is_empty() {
                return;
            }
            let valued = part.value_dirty();
            let valued_at = Instant::now();
            for (_, sent) in pending.iter() {
                let _ = to_valuation.record(micros(valued_at.duration_since(*sent)));
            }
            let assets: BTreeSet<String> = valued
                .iter()
                .filter_map(|k| part.instruments.get(k).map(|s| s.info.base.clone()))
                .collect();
            let live_rates = rates.read().map(|r| r.clone()).unwrap_or_default();
            let mut done_at: BTreeMap<String, Instant> = BTreeMap::new();
            for asset in assets {
                let quotes = part.asset_quotes(&asset, now_ns);
                let _ = aggregate_asset(
                    &asset,
                    &quotes,
                    &live_rates,
                    now_ns,
                    &cfg.aggregate,
                    &method,
                );
                done_at.insert(asset, Instant::now());
            }
            for (key, sent) in pending.drain(..) {
                let asset = part
                    .instruments
                    .get(&key)
                    .map(|s| s.info.base.clone())
                    .unwrap_or_default();
                if let Some(at) = done_at.get(&asset) {
                    let _ = to_aggregate.record(micros(at.duration_since(sent)));
                }
            }
        };
    while let Ok(first) = rx.recv() {
        batch.push(first);
        while batch.len() < BATCH_MAX {
            match rx.try_recv() {
                Ok(item) => batch.push(item),
                Err(_) => break,
            }
        }
        let mut stop = false;
        for item in batch.drain(..) {
            match item {
                WorkItem::Event {
                    item,
                    recv_ns,
                    sent,
                } => {
                    part.apply(&item, recv_ns);
                    pending.push((item.info().key.clone(), sent));
                    last_ns = recv_ns;
                }
                WorkItem::Tick { index, now_ns } => {
                    flush(&mut part, &mut pending, last_ns);
                    let quotes = part.quotes(now_ns);
                    if tx
                        .send(TickResult {
                            index,
                            now_ns,
                            quotes,
                        })
                        .is_err()
                    {
                        stop = true;
                    }
                }
                WorkItem::Stop { now_ns } => {
                    flush(&mut part, &mut pending, now_ns);
                    stop = true;
                }
            }
        }
        flush(&mut part, &mut pending, last_ns);
        if stop {
            break;
        }
    }
    WorkerDone {
        partition_events: part.events,
        valuations: part.valuations,
        resyncs: part.resyncs.clone(),
        books: part.book_report(last_ns),
        to_valuation,
        to_aggregate,
    }
}

struct CollectorDone {
    ticks: u64,
    digest: String,
    status_counts: BTreeMap<String, u64>,
    unhealthy_used: u64,
    last: Vec<PublishedPrice>,
}

fn collector(
    cfg: OracleConfig,
    threads: usize,
    rx: crossbeam_channel::Receiver<TickResult>,
    rates: Rates,
) -> CollectorDone {
    let method = cfg.method.name();
    let mut waiting: BTreeMap<u64, (u64, usize, Vec<InstrumentQuote>)> = BTreeMap::new();
    let mut hasher = Sha256::new();
    let mut done = CollectorDone {
        ticks: 0,
        digest: String::new(),
        status_counts: BTreeMap::new(),
        unhealthy_used: 0,
        last: Vec::new(),
    };
    while let Ok(r) = rx.recv() {
        let entry = waiting.entry(r.index).or_insert((r.now_ns, 0, Vec::new()));
        entry.1 += 1;
        entry.2.extend(r.quotes);
        // Ticks complete in order: each worker sends its ticks in order.
        while let Some(first) = waiting.first_entry() {
            if first.get().1 < threads {
                break;
            }
            let (now_ns, _, mut quotes) = first.remove();
            quotes.sort_by(|a, b| (&a.venue, &a.symbol).cmp(&(&b.venue, &b.symbol)));
            let published = aggregate_all(&quotes, now_ns, &cfg.aggregate, &method);
            let health: BTreeMap<(&str, &str), &Health> = quotes
                .iter()
                .map(|q| ((q.venue.as_str(), q.symbol.as_str()), &q.health))
                .collect();
            let mut new_rates = BTreeMap::new();
            for p in &published {
                *done
                    .status_counts
                    .entry(format!("{:?}", p.status).to_lowercase())
                    .or_default() += 1;
                for u in &p.venues_used {
                    if health
                        .get(&(u.venue.as_str(), u.symbol.as_str()))
                        .is_none_or(|h| !h.is_good())
                    {
                        done.unhealthy_used += 1;
                    }
                }
                if let (Some(price), PriceStatus::Ok) = (p.price, p.status) {
                    new_rates.insert(p.asset.clone(), price);
                }
            }
            if let Ok(mut r) = rates.write() {
                *r = new_rates;
            }
            hasher.update(serde_json::to_vec(&published).unwrap_or_default());
            done.ticks += 1;
            done.last = published;
        }
    }
    done.digest = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    done
}

/// Replays recorded records through the pipeline on `options.threads` workers.
pub fn replay(records: &[Record], cfg: &OracleConfig, options: ReplayOptions) -> ReplayReport {
    let threads = options.threads.clamp(1, THREADS_MAX);
    let rates: Rates = Arc::new(RwLock::new(BTreeMap::new()));
    let started = Instant::now();
    let (result_tx, result_rx) = crossbeam_channel::bounded::<TickResult>(threads * 4);
    let mut report = ReplayReport {
        threads,
        records: records.len(),
        ..ReplayReport::default()
    };
    let (workers_done, collected) = std::thread::scope(|scope| {
        let mut senders = Vec::with_capacity(threads);
        let mut handles = Vec::with_capacity(threads);
        for _ in 0..threads {
            let (tx, rx) = crossbeam_channel::bounded::<WorkItem>(cfg.queue_capacity.max(1));
            senders.push(tx);
            let (cfg, result_tx, rates) = (cfg.clone(), result_tx.clone(), rates.clone());
            handles.push(scope.spawn(move || worker(cfg, rx, result_tx, rates)));
        }
        drop(result_tx);
        let collector_handle = {
            let (cfg, rates) = (cfg.clone(), rates.clone());
            scope.spawn(move || collector(cfg, threads, result_rx, rates))
        };
        let mut router = Router::new(cfg.kraken_depth);
        let mut owner: BTreeMap<String, usize> = BTreeMap::new();
        let interval = cfg.publish_interval_ns.max(1);
        let mut next_tick = records
            .first()
            .map_or(0, |r| (r.recv_ns / interval + 1) * interval);
        let mut tick_index = 0u64;
        let mut last_ns = 0u64;
        let send_tick = |tick_index: &mut u64, now_ns: u64| {
            for tx in &senders {
                let _ = tx.send(WorkItem::Tick {
                    index: *tick_index,
                    now_ns,
                });
            }
            *tick_index += 1;
        };
        for record in records {
            if let Some(speed) = options.speed.filter(|s| *s > 0.0) {
                let due = started + Duration::from_nanos((record.recv_ns as f64 / speed) as u64);
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
            }
            while record.recv_ns >= next_tick {
                send_tick(&mut tick_index, next_tick);
                next_tick += interval;
            }
            last_ns = last_ns.max(record.recv_ns);
            match router.route(record) {
                Ok(items) => {
                    for item in items {
                        let n = owner.len();
                        let w = *owner.entry(item.info().base.clone()).or_insert(n % threads);
                        report.events += 1;
                        let _ = senders[w].send(WorkItem::Event {
                            item: Box::new(item),
                            recv_ns: record.recv_ns,
                            sent: Instant::now(),
                        });
                    }
                }
                Err(e) => {
                    report.parse_errors += 1;
                    if report.errors.len() < ERRORS_KEPT_MAX {
                        report.errors.push(e.to_string());
                    }
                }
            }
        }
        send_tick(
            &mut tick_index,
            last_ns.max(next_tick.saturating_sub(interval)),
        );
        for tx in &senders {
            let _ = tx.send(WorkItem::Stop { now_ns: last_ns });
        }
        drop(senders);
        let done: Vec<Option<WorkerDone>> = handles.into_iter().map(|h| h.join().ok()).collect();
        (done, collector_handle.join().ok())
    });
    let elapsed = started.elapsed();
    let mut to_valuation = histogram();
    let mut to_aggregate = histogram();
    let mut books: Vec<(InstrumentKey, Health, u64)> = Vec::new();
    for w in workers_done.into_iter().flatten() {
        let _ = to_valuation.add(&w.to_valuation);
        let _ = to_aggregate.add(&w.to_aggregate);
        report.valuations += w.valuations;
        for (k, v) in w.resyncs {
            *report.books.resyncs.entry(k).or_default() += v;
        }
        books.extend(w.books);
        debug_assert!(w.partition_events <= report.events);
    }
    books.sort();
    report.books.instruments = books.len();
    report.books.recovered = books
        .iter()
        .filter(|b| b.2 > 0 && b.1 == Health::Synced)
        .count();
    report.books.unrecovered = books
        .iter()
        .filter(|b| matches!(b.1, Health::Resyncing(_)))
        .map(|b| format!("{} {}", b.0, crate::aggregate::health_text(&b.1)))
        .collect();
    if let Some(c) = collected {
        report.ticks = c.ticks;
        report.digest = c.digest;
        report.status_counts = c.status_counts;
        report.books.unhealthy_books_used = c.unhealthy_used;
        report.prices = c.last;
    }
    report.elapsed_ms = elapsed.as_secs_f64() * 1e3;
    report.events_per_s = report.events as f64 / elapsed.as_secs_f64().max(1e-9);
    report.latency = LatencyReport {
        event_to_valuation_us: Percentiles::of(&to_valuation),
        event_to_aggregate_us: Percentiles::of(&to_aggregate),
    };
    report
}
