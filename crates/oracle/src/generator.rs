//! A deterministic feed generator: each venue's real wire format with injected faults (gaps,
//! duplicates, reorders, crossed books, bad checksums, disconnects), plus the venue's true book
//! for tests.
//!
//! The pseudo-random generator is `rand_xoshiro::SplitMix64`, a named algorithm whose output is
//! fixed: a generated feed must be the same bytes for the same seed forever, which a crate's
//! unspecified algorithm (such as `rand`'s `StdRng`) does not promise.

use crate::decimal::Dec;
use crate::event::Protocol;
use crate::record::{Record, RecordKind};
use crate::venues::{
    default_assets, default_venues, symbol_for, venue_protocol, venue_quote, KRAKEN_DEPTH,
};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Levels of the true book kept in a `TruthPoint` per side.
pub const TRUTH_LEVELS: usize = 5;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FeedConfig {
    pub venues: Vec<String>,
    pub assets: Vec<String>,
    pub seconds: u64,
    pub seed: u64,
    /// Fraction of book messages that carry a fault (0.01 = 1 %).
    pub faults: f64,
    /// Book messages per instrument per second.
    pub updates_per_second: u32,
    /// Levels per side of each true book.
    pub levels: usize,
    /// Trades per instrument per second (on average).
    pub trades_per_second: f64,
    /// The true USD price of each of `assets` at the start, in order; an asset beyond the
    /// list (all of them when it is empty) gets a seeded random price, log-uniform in
    /// [0.01, 50 000]. Given to make a feed agree with a chain's prices (see docs/oracle.md).
    pub usd_prices: Vec<f64>,
}

impl Default for FeedConfig {
    fn default() -> Self {
        FeedConfig {
            venues: default_venues(5),
            assets: default_assets(4),
            seconds: 5,
            seed: 1,
            faults: 0.0,
            updates_per_second: 10,
            levels: 20,
            trades_per_second: 1.0,
            usd_prices: Vec::new(),
        }
    }
}

/// The venue's own book after the message in the same-index record (book messages only).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TruthPoint {
    pub venue: String,
    pub symbol: String,
    /// Per instrument, +1 per generated book message; a duplicate repeats it.
    pub version: u64,
    /// Best first, at most `TRUTH_LEVELS` each.
    pub bids: Vec<(Dec, Dec)>,
    pub asks: Vec<(Dec, Dec)>,
}

/// Counts of injected faults by kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultCounts {
    pub gaps: u64,
    pub duplicates: u64,
    pub reorders: u64,
    pub crossed: u64,
    pub bad_checksums: u64,
    pub disconnects: u64,
}

pub struct GeneratedFeed {
    pub records: Vec<Record>,
    /// Aligned with `records`.
    pub truth: Vec<Option<TruthPoint>>,
    pub faults: FaultCounts,
}

/// The generator's draws from the seeded SplitMix64 stream (`rand_xoshiro`'s, the same algorithm
/// the feed format was first written with, so a seed's feed keeps its bytes).
pub(crate) trait Draws {
    /// Uniform in [0, 1): the top 53 bits of one draw.
    fn unit(&mut self) -> f64;
    /// One draw modulo `n` (0 when `n` is 0); the small modulo bias is part of the format.
    fn below(&mut self, n: u64) -> u64;
}

impl Draws for SplitMix64 {
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
}

/// Every book and trade message of every venue: `generate_feed_with_truth(cfg).records`.
pub fn generate_feed(cfg: &FeedConfig) -> Vec<Record> {
    generate_feed_with_truth(cfg).records
}

const QTY_DECIMALS: u32 = 8;
/// The connector's snapshot arrives this long after the fault: after the next message, which is
/// what reveals the fault to the book's rule.
const RECOVERY_DELAY_NS: u64 = 50_000_000;
const RECONNECT_DELAY_NS: u64 = 100_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    Gap,
    Duplicate,
    Reorder,
    Crossed,
    BadChecksum,
    Disconnect,
}

/// Bids and asks as (price ticks, qty units), best first.
type BookView = (Vec<(i64, i64)>, Vec<(i64, i64)>);

struct SimInstrument {
    venue: usize,
    protocol: Protocol,
    symbol: String,
    base: String,
    quote: String,
    price_decimals: u32,
    basis: f64,
    bids: BTreeMap<i64, i64>,
    asks: BTreeMap<i64, i64>,
    /// Binance last update id, OKX seqId.
    seq: u64,
    version: u64,
    crossing_bid: Option<i64>,
    recover_at: Option<u64>,
}

struct SimVenue {
    name: String,
    protocol: Protocol,
    conn: u32,
    conn_seq: u64,
    down_until: Option<u64>,
}

struct Out {
    /// (deliver time, emission order, record, truth)
    items: Vec<(u64, u64, Record, Option<TruthPoint>)>,
}

impl Out {
    fn push(&mut self, at: u64, record: Record, truth: Option<TruthPoint>) {
        let order = self.items.len() as u64;
        self.items.push((at, order, record, truth));
    }
}

fn price_dec(ticks: i64, decimals: u32) -> Dec {
    Dec::from_scaled(ticks, decimals).unwrap_or(Dec::ZERO)
}

fn qty_dec(mantissa: i64) -> Dec {
    Dec::from_scaled(mantissa, QTY_DECIMALS).unwrap_or(Dec::ZERO)
}

impl SimInstrument {
    fn top(&self, n: usize) -> BookView {
        let bids = self
            .bids
            .iter()
            .rev()
            .take(n)
            .map(|(p, q)| (*p, *q))
            .collect();
        let asks = self.asks.iter().take(n).map(|(p, q)| (*p, *q)).collect();
        (bids, asks)
    }

    fn truth(&self, venue: &str) -> TruthPoint {
        let (b, a) = self.top(TRUTH_LEVELS);
        let conv = |v: Vec<(i64, i64)>| {
            v.into_iter()
                .map(|(p, q)| (price_dec(p, self.price_decimals), qty_dec(q)))
                .collect()
        };
        TruthPoint {
            venue: venue.to_string(),
            symbol: self.symbol.clone(),
            version: self.version,
            bids: conv(b),
            asks: conv(a),
        }
    }

    fn kraken_checksum(&self) -> u32 {
        let (b, a) = self.top(KRAKEN_DEPTH);
        let d = self.price_decimals;
        crate::book::kraken_checksum(
            b.into_iter().map(|(p, q)| (price_dec(p, d), qty_dec(q))),
            a.into_iter().map(|(p, q)| (price_dec(p, d), qty_dec(q))),
            d,
            QTY_DECIMALS,
        )
    }

    /// Moves the book toward `mid_ticks` and jiggles a level; returns changed levels (qty 0 = removed).
    fn step(
        &mut self,
        mid_ticks: i64,
        levels: usize,
        rng: &mut SplitMix64,
        notional_qty: i64,
    ) -> (BTreeMap<i64, i64>, BTreeMap<i64, i64>) {
        let mut bid_changes = BTreeMap::new();
        let mut ask_changes = BTreeMap::new();
        if let Some(p) = self.crossing_bid.take() {
            if self.bids.remove(&p).is_some() {
                bid_changes.insert(p, 0);
            }
        }
        let lo = mid_ticks - levels as i64;
        let hi = mid_ticks + levels as i64;
        let stale_bids: Vec<i64> = self
            .bids
            .keys()
            .copied()
            .filter(|p| *p >= mid_ticks || *p < lo)
            .collect();
        for p in stale_bids {
            self.bids.remove(&p);
            bid_changes.insert(p, 0);
        }
        let stale_asks: Vec<i64> = self
            .asks
            .keys()
            .copied()
            .filter(|p| *p <= mid_ticks || *p > hi)
            .collect();
        for p in stale_asks {
            self.asks.remove(&p);
            ask_changes.insert(p, 0);
        }
        let qty = |rng: &mut SplitMix64| {
            (notional_qty / 2 + rng.below(notional_qty.max(1) as u64) as i64).max(1)
        };
        for i in 1..=levels as i64 {
            if let std::collections::btree_map::Entry::Vacant(e) = self.bids.entry(mid_ticks - i) {
                let q = qty(rng);
                e.insert(q);
                bid_changes.insert(mid_ticks - i, q);
            }
            if let std::collections::btree_map::Entry::Vacant(e) = self.asks.entry(mid_ticks + i) {
                let q = qty(rng);
                e.insert(q);
                ask_changes.insert(mid_ticks + i, q);
            }
        }
        // One resting level changes size.
        let i = 1 + rng.below(levels.min(6) as u64) as i64;
        let q = qty(rng);
        if rng.below(2) == 0 {
            self.bids.insert(mid_ticks - i, q);
            bid_changes.insert(mid_ticks - i, q);
        } else {
            self.asks.insert(mid_ticks + i, q);
            ask_changes.insert(mid_ticks + i, q);
        }
        (bid_changes, ask_changes)
    }
}

fn levels_json(levels: &[(i64, i64)], decimals: u32, style: Protocol) -> String {
    let items: Vec<String> = levels
        .iter()
        .map(|(p, q)| {
            let (p, q) = (
                price_dec(*p, decimals).format_fixed(decimals),
                qty_dec(*q).format_fixed(QTY_DECIMALS),
            );
            match style {
                Protocol::Kraken => format!("{{\"price\":{p},\"qty\":{q}}}"),
                Protocol::Okx => format!("[\"{p}\",\"{q}\",\"0\",\"1\"]"),
                _ => format!("[\"{p}\",\"{q}\"]"),
            }
        })
        .collect();
    format!("[{}]", items.join(","))
}

fn iso_time(t_ns: u64) -> String {
    let s = t_ns / 1_000_000_000;
    format!(
        "2026-01-01T{:02}:{:02}:{:02}.{:06}Z",
        (s / 3600) % 24,
        (s / 60) % 60,
        s % 60,
        (t_ns / 1000) % 1_000_000
    )
}

/// Generates the feed. Deterministic in `cfg`.
/// The venues of `cfg` whose names say their wire format (others are skipped).
fn sim_venues(cfg: &FeedConfig) -> Vec<SimVenue> {
    cfg.venues
        .iter()
        .filter_map(|v| {
            venue_protocol(v).map(|p| SimVenue {
                name: v.clone(),
                protocol: p,
                conn: 0,
                conn_seq: 0,
                down_until: None,
            })
        })
        .collect()
}

/// The true USD prices at the start: the given ones, else log-uniform in [0.01, 50 000];
/// stablecoins near 1.
fn true_usd_prices(cfg: &FeedConfig, rng: &mut SplitMix64) -> BTreeMap<String, f64> {
    let mut usd: BTreeMap<String, f64> = BTreeMap::new();
    for (index, a) in cfg.assets.iter().enumerate() {
        // Drawn even when given, so that a given price changes no other draw of the seed.
        let drawn = 10f64.powf(-2.0 + 6.7 * rng.unit());
        let given = cfg.usd_prices.get(index).copied();
        usd.insert(a.clone(), given.unwrap_or(drawn));
    }
    usd.insert("USDT".into(), 1.0 + (rng.unit() - 0.5) * 0.002);
    usd.insert("USDC".into(), 1.0 + (rng.unit() - 0.5) * 0.002);
    usd
}

/// Every venue's instruments: each asset against the venue's quote, and its stablecoin pairs.
fn sim_instruments(
    cfg: &FeedConfig,
    venues: &[SimVenue],
    usd: &BTreeMap<String, f64>,
    rng: &mut SplitMix64,
) -> Vec<SimInstrument> {
    let mut instruments: Vec<SimInstrument> = Vec::new();
    for (vi, v) in venues.iter().enumerate() {
        let quote = venue_quote(v.protocol);
        let mut pairs: Vec<(String, String)> = cfg
            .assets
            .iter()
            .map(|a| (a.clone(), quote.to_string()))
            .collect();
        if quote == "USD" {
            pairs.push(("USDT".into(), "USD".into()));
            pairs.push(("USDC".into(), "USD".into()));
        } else {
            pairs.push(("USDC".into(), quote.into()));
        }
        for (base, quote) in pairs {
            let price = usd[&base];
            let price_decimals = (4 - price.log10().floor() as i32).clamp(0, 8) as u32;
            instruments.push(SimInstrument {
                venue: vi,
                protocol: v.protocol,
                symbol: symbol_for(v.protocol, &base, &quote),
                base,
                quote,
                price_decimals,
                basis: (rng.unit() - 0.5) * 0.0006,
                bids: BTreeMap::new(),
                asks: BTreeMap::new(),
                seq: 1000 + rng.below(1000),
                version: 0,
                crossing_bid: None,
                recover_at: None,
            });
        }
    }
    instruments
}

/// Kraken publishes pair precisions on its `instrument` channel; the replay reads them there.
fn push_kraken_instruments(
    cfg: &FeedConfig,
    venues: &[SimVenue],
    instruments: &[SimInstrument],
    out: &mut Out,
) {
    for v in venues.iter().filter(|v| v.protocol == Protocol::Kraken) {
        let pairs: Vec<String> = instruments
            .iter()
            .filter(|i| cfg.venues.get(i.venue) == Some(&v.name))
            .map(|i| {
                format!(
                    "{{\"symbol\":\"{}\",\"price_precision\":{},\"qty_precision\":{QTY_DECIMALS}}}",
                    i.symbol, i.price_decimals
                )
            })
            .collect();
        let payload = format!("{{\"channel\":\"instrument\",\"type\":\"snapshot\",\"data\":{{\"assets\":[],\"pairs\":[{}]}}}}", pairs.join(","));
        out.push(
            0,
            Record {
                recv_ns: 0,
                venue: v.name.clone(),
                conn: v.conn,
                kind: RecordKind::Ws,
                path: None,
                payload,
            },
            None,
        );
    }
}

pub fn generate_feed_with_truth(cfg: &FeedConfig) -> GeneratedFeed {
    let mut rng = SplitMix64::seed_from_u64(cfg.seed);
    let mut venues = sim_venues(cfg);
    let mut usd = true_usd_prices(cfg, &mut rng);
    let mut instruments = sim_instruments(cfg, &venues, &usd, &mut rng);
    let mut out = Out { items: Vec::new() };
    let mut faults = FaultCounts::default();
    let ups = cfg.updates_per_second.max(1) as u64;
    let dt = 1_000_000_000 / ups;
    let steps = cfg.seconds * ups;
    let slot_ns = (dt / (instruments.len() as u64 + 1)).max(1);
    push_kraken_instruments(cfg, &venues, &instruments, &mut out);
    let mut pending: Vec<(usize, u64)> = Vec::new();
    for step in 0..steps {
        // Prices move: a small random walk per asset.
        for p in usd.values_mut() {
            *p *= 1.0 + (rng.unit() - 0.5) * 4e-4;
        }
        for p in ["USDT", "USDC"] {
            if let Some(x) = usd.get_mut(p) {
                *x = 1.0 + (*x - 1.0) * 0.99;
            }
        }
        for (ii, inst) in instruments.iter_mut().enumerate() {
            let t = step * dt + (ii as u64 + 1) * slot_ns;
            let venue = &mut venues[inst.venue];
            if let Some(until) = venue.down_until {
                if t < until {
                    continue;
                }
                venue.down_until = None;
                venue.conn += 1;
                venue.conn_seq = 0;
            }
            let quote_usd = if inst.quote == "USD" {
                1.0
            } else {
                usd[&inst.quote]
            };
            let mid = usd[&inst.base] / quote_usd * (1.0 + inst.basis);
            let mid_ticks = (mid * 10f64.powi(inst.price_decimals as i32)).round() as i64;
            let notional_qty = ((2_000.0 / mid.max(1e-9)) * 10f64.powi(QTY_DECIMALS as i32))
                .clamp(1.0, 1e15) as i64;
            let first = step == 0;
            let old_view = inst.top(KRAKEN_DEPTH);
            let (bid_ch, ask_ch) = inst.step(
                mid_ticks.max(cfg.levels as i64 + 2),
                cfg.levels.max(2),
                &mut rng,
                notional_qty,
            );
            let recover = first || inst.recover_at.is_some_and(|r| r <= t);
            let mut fault = None;
            // Faults hit updates only: a snapshot is the recovery, and a WebSocket (TCP) stream never
            // delivers a snapshot after a later update of its own connection.
            // No fault in the last second, so that every book can recover before the feed ends.
            let quiet_tail = t + 1_000_000_000 >= cfg.seconds * 1_000_000_000;
            if !recover && !quiet_tail && rng.unit() < cfg.faults {
                let options: &[Fault] = match inst.protocol {
                    Protocol::Kraken | Protocol::Okx => &[
                        Fault::Gap,
                        Fault::Duplicate,
                        Fault::Reorder,
                        Fault::Crossed,
                        Fault::BadChecksum,
                        Fault::Disconnect,
                    ],
                    _ => &[
                        Fault::Gap,
                        Fault::Duplicate,
                        Fault::Reorder,
                        Fault::Crossed,
                        Fault::Disconnect,
                    ],
                };
                fault = Some(options[rng.below(options.len() as u64) as usize]);
            }
            let (mut bid_ch, ask_ch) = (bid_ch, ask_ch);
            if fault == Some(Fault::Crossed) {
                if let Some((&best_ask, _)) = inst.asks.iter().next() {
                    let q = notional_qty.max(1);
                    inst.bids.insert(best_ask, q);
                    bid_ch.insert(best_ask, q);
                    inst.crossing_bid = Some(best_ask);
                    faults.crossed += 1;
                }
            }
            if recover {
                inst.recover_at = None;
            }
            emit(
                &mut out,
                venue,
                inst,
                t,
                dt,
                recover,
                &bid_ch,
                &ask_ch,
                fault,
                &old_view,
                &mut faults,
                &mut rng,
                cfg.trades_per_second,
            );
            if fault == Some(Fault::Disconnect) {
                let name = venue.name.clone();
                venue.down_until = Some(t + RECONNECT_DELAY_NS);
                let rec = Record {
                    recv_ns: t + 1,
                    venue: name,
                    conn: venue.conn,
                    kind: RecordKind::Disconnect,
                    path: None,
                    payload: String::new(),
                };
                out.push(t + 1, rec, None);
                faults.disconnects += 1;
            }
            let needs_recovery = matches!(
                fault,
                Some(Fault::Gap | Fault::Reorder | Fault::BadChecksum | Fault::Disconnect)
            );
            if needs_recovery && inst.protocol != Protocol::Bitstamp {
                let delay = if fault == Some(Fault::Disconnect) {
                    RECONNECT_DELAY_NS
                } else {
                    2 * dt + RECOVERY_DELAY_NS
                };
                let at = t + delay;
                let whole_connection =
                    inst.protocol == Protocol::Coinbase || fault == Some(Fault::Disconnect);
                let vi = inst.venue;
                if !whole_connection {
                    inst.recover_at.get_or_insert(at);
                } else {
                    pending.push((vi, at));
                }
            }
        }
        // Connection-wide recoveries (Coinbase gaps, disconnects) apply to every instrument of the venue.
        for (vi, at) in pending.drain(..) {
            for inst in instruments.iter_mut().filter(|i| i.venue == vi) {
                inst.recover_at = Some(inst.recover_at.map_or(at, |r| r.min(at)));
            }
        }
    }
    out.items.sort_by_key(|(t, order, _, _)| (*t, *order));
    let mut records = Vec::with_capacity(out.items.len());
    let mut truth = Vec::with_capacity(out.items.len());
    for (t, _, mut r, tp) in out.items {
        r.recv_ns = t;
        records.push(r);
        truth.push(tp);
    }
    GeneratedFeed {
        records,
        truth,
        faults,
    }
}

#[allow(clippy::too_many_arguments)]
fn emit(
    out: &mut Out,
    venue: &mut SimVenue,
    inst: &mut SimInstrument,
    t: u64,
    dt: u64,
    snapshot: bool,
    bid_ch: &BTreeMap<i64, i64>,
    ask_ch: &BTreeMap<i64, i64>,
    fault: Option<Fault>,
    old_view: &BookView,
    faults: &mut FaultCounts,
    rng: &mut SplitMix64,
    trades_per_second: f64,
) {
    let d = inst.price_decimals;
    let sym = inst.symbol.clone();
    let rec = |conn: u32, kind: RecordKind, path: Option<String>, payload: String| Record {
        recv_ns: t,
        venue: venue.name.clone(),
        conn,
        kind,
        path,
        payload,
    };
    let changes = |m: &BTreeMap<i64, i64>, desc: bool| -> Vec<(i64, i64)> {
        let mut v: Vec<(i64, i64)> = m.iter().map(|(p, q)| (*p, *q)).collect();
        if desc {
            v.reverse();
        }
        v
    };
    let full = |inst: &SimInstrument, n: usize| inst.top(n);
    let mut messages: Vec<Record> = Vec::new();
    match inst.protocol {
        Protocol::Binance => {
            if snapshot {
                let (b, a) = full(inst, usize::MAX);
                let payload = format!(
                    "{{\"lastUpdateId\":{},\"bids\":{},\"asks\":{}}}",
                    inst.seq,
                    levels_json(&b, d, Protocol::Binance),
                    levels_json(&a, d, Protocol::Binance)
                );
                messages.push(rec(
                    venue.conn,
                    RecordKind::Rest,
                    Some(format!("/api/v3/depth?symbol={sym}&limit=1000")),
                    payload,
                ));
            } else {
                let n = (bid_ch.len() + ask_ch.len()).max(1) as u64;
                let first = inst.seq + 1;
                inst.seq += n;
                let payload = format!(
                    "{{\"stream\":\"{}@depth@100ms\",\"data\":{{\"e\":\"depthUpdate\",\"E\":{},\"s\":\"{sym}\",\"U\":{first},\"u\":{},\"b\":{},\"a\":{}}}}}",
                    sym.to_ascii_lowercase(),
                    t / 1_000_000,
                    inst.seq,
                    levels_json(&changes(bid_ch, true), d, Protocol::Binance),
                    levels_json(&changes(ask_ch, false), d, Protocol::Binance)
                );
                messages.push(rec(venue.conn, RecordKind::Ws, None, payload));
            }
        }
        Protocol::Coinbase => {
            let (kind, b, a) = if snapshot {
                let (b, a) = full(inst, usize::MAX);
                ("snapshot", b, a)
            } else {
                ("update", changes(bid_ch, true), changes(ask_ch, false))
            };
            let mut ups: Vec<String> = Vec::new();
            for (side, levels) in [("bid", &b), ("offer", &a)] {
                for (p, q) in levels.iter() {
                    ups.push(format!(
                        "{{\"side\":\"{side}\",\"event_time\":\"{}\",\"price_level\":\"{}\",\"new_quantity\":\"{}\"}}",
                        iso_time(t),
                        price_dec(*p, d).format_fixed(d),
                        qty_dec(*q).format_fixed(QTY_DECIMALS)
                    ));
                }
            }
            let payload = format!(
                "{{\"channel\":\"l2_data\",\"client_id\":\"\",\"timestamp\":\"{}\",\"sequence_num\":{},\"events\":[{{\"type\":\"{kind}\",\"product_id\":\"{sym}\",\"updates\":[{}]}}]}}",
                iso_time(t),
                venue.conn_seq,
                ups.join(",")
            );
            venue.conn_seq += 1;
            messages.push(rec(venue.conn, RecordKind::Ws, None, payload));
        }
        Protocol::Kraken => {
            let mut checksum = inst.kraken_checksum();
            if fault == Some(Fault::BadChecksum) {
                checksum ^= 0x5a5a_0001;
                faults.bad_checksums += 1;
            }
            let (b, a, kind) = if snapshot {
                let (b, a) = full(inst, KRAKEN_DEPTH);
                (b, a, "snapshot")
            } else {
                // Levels new or changed inside the subscribed window are sent; a level that left it
                // is sent with qty 0 only when deleted from the book: one pushed out by a better level
                // is not (the client truncates), as Kraken documents.
                let (vb, va) = full(inst, KRAKEN_DEPTH);
                let window =
                    |new: &[(i64, i64)], old: &[(i64, i64)], full_side: &BTreeMap<i64, i64>| {
                        let mut v: Vec<(i64, i64)> =
                            new.iter().filter(|l| !old.contains(l)).copied().collect();
                        for l in old {
                            if !new.iter().any(|x| x.0 == l.0) && !full_side.contains_key(&l.0) {
                                v.push((l.0, 0));
                            }
                        }
                        v
                    };
                (
                    window(&vb, &old_view.0, &inst.bids),
                    window(&va, &old_view.1, &inst.asks),
                    "update",
                )
            };
            let payload = format!(
                "{{\"channel\":\"book\",\"type\":\"{kind}\",\"data\":[{{\"symbol\":\"{sym}\",\"bids\":{},\"asks\":{},\"checksum\":{checksum},\"timestamp\":\"{}\"}}]}}",
                levels_json(&b, d, Protocol::Kraken),
                levels_json(&a, d, Protocol::Kraken),
                iso_time(t)
            );
            messages.push(rec(venue.conn, RecordKind::Ws, None, payload));
        }
        Protocol::Okx => {
            let prev = if snapshot { -1 } else { inst.seq as i64 };
            inst.seq += 1 + rng.below(3);
            let (b, a, action) = if snapshot {
                let (b, a) = full(inst, 400);
                (b, a, "snapshot")
            } else {
                (changes(bid_ch, true), changes(ask_ch, false), "update")
            };
            let texts = |levels: Vec<(i64, i64)>| -> Vec<(String, String)> {
                levels
                    .into_iter()
                    .map(|(p, q)| {
                        (
                            price_dec(p, d).format_fixed(d),
                            qty_dec(q).format_fixed(QTY_DECIMALS),
                        )
                    })
                    .collect()
            };
            let (tb, ta) = full(inst, crate::book::OKX_CHECKSUM_LEVELS);
            let mut checksum =
                crc32fast::hash(crate::book::okx_checksum_text(&texts(tb), &texts(ta)).as_bytes())
                    as i32;
            if fault == Some(Fault::BadChecksum) {
                checksum ^= 0x0101;
                faults.bad_checksums += 1;
            }
            let payload = format!(
                "{{\"arg\":{{\"channel\":\"books\",\"instId\":\"{sym}\"}},\"action\":\"{action}\",\"data\":[{{\"asks\":{},\"bids\":{},\"ts\":\"{}\",\"checksum\":{checksum},\"prevSeqId\":{prev},\"seqId\":{}}}]}}",
                levels_json(&a, d, Protocol::Okx),
                levels_json(&b, d, Protocol::Okx),
                t / 1_000_000,
                inst.seq
            );
            messages.push(rec(venue.conn, RecordKind::Ws, None, payload));
        }
        Protocol::Bitstamp => {
            let (b, a) = full(inst, 100);
            let payload = format!(
                "{{\"data\":{{\"timestamp\":\"{}\",\"microtimestamp\":\"{}\",\"bids\":{},\"asks\":{}}},\"channel\":\"order_book_{sym}\",\"event\":\"data\"}}",
                t / 1_000_000_000,
                t / 1000,
                levels_json(&b, d, Protocol::Bitstamp),
                levels_json(&a, d, Protocol::Bitstamp)
            );
            messages.push(rec(venue.conn, RecordKind::Ws, None, payload));
        }
    }
    inst.version += 1;
    let truth = inst.truth(&venue.name);
    for m in messages {
        match fault {
            Some(Fault::Gap) => {
                faults.gaps += 1;
            }
            Some(Fault::Duplicate) => {
                faults.duplicates += 1;
                out.push(t, m.clone(), Some(truth.clone()));
                out.push(t + 1, m, Some(truth.clone()));
            }
            Some(Fault::Reorder) => {
                faults.reorders += 1;
                out.push(t + dt + 1, m, Some(truth.clone()));
            }
            _ => out.push(t, m, Some(truth.clone())),
        }
    }
    // Trades: a Poisson-ish draw per step.
    if rng.unit() < trades_per_second * dt as f64 / 1e9 {
        let (b, a) = inst.top(1);
        if let (Some(bb), Some(ba)) = (b.first(), a.first()) {
            let buy = rng.below(2) == 0;
            let (p, q) = if buy {
                (ba.0, ba.1.min(1 + rng.below(ba.1.max(1) as u64) as i64))
            } else {
                (bb.0, bb.1.min(1 + rng.below(bb.1.max(1) as u64) as i64))
            };
            let (ps, qs) = (
                price_dec(p, d).format_fixed(d),
                qty_dec(q).format_fixed(QTY_DECIMALS),
            );
            let payload = match inst.protocol {
                Protocol::Binance => format!(
                    "{{\"stream\":\"{}@trade\",\"data\":{{\"e\":\"trade\",\"E\":{},\"s\":\"{sym}\",\"t\":{},\"p\":\"{ps}\",\"q\":\"{qs}\",\"T\":{},\"m\":{},\"M\":true}}}}",
                    sym.to_ascii_lowercase(), t / 1_000_000, inst.version, t / 1_000_000, !buy
                ),
                Protocol::Coinbase => {
                    let s = format!(
                        "{{\"channel\":\"market_trades\",\"client_id\":\"\",\"timestamp\":\"{}\",\"sequence_num\":{},\"events\":[{{\"type\":\"update\",\"trades\":[{{\"trade_id\":\"{}\",\"product_id\":\"{sym}\",\"price\":\"{ps}\",\"size\":\"{qs}\",\"side\":\"{}\",\"time\":\"{}\"}}]}}]}}",
                        iso_time(t), venue.conn_seq, inst.version, if buy { "BUY" } else { "SELL" }, iso_time(t)
                    );
                    venue.conn_seq += 1;
                    s
                }
                Protocol::Kraken => format!(
                    "{{\"channel\":\"trade\",\"type\":\"update\",\"data\":[{{\"symbol\":\"{sym}\",\"side\":\"{}\",\"price\":{ps},\"qty\":{qs},\"ord_type\":\"market\",\"trade_id\":{},\"timestamp\":\"{}\"}}]}}",
                    if buy { "buy" } else { "sell" }, inst.version, iso_time(t)
                ),
                Protocol::Okx => format!(
                    "{{\"arg\":{{\"channel\":\"trades\",\"instId\":\"{sym}\"}},\"data\":[{{\"instId\":\"{sym}\",\"tradeId\":\"{}\",\"px\":\"{ps}\",\"sz\":\"{qs}\",\"side\":\"{}\",\"ts\":\"{}\",\"count\":\"1\"}}]}}",
                    inst.version, if buy { "buy" } else { "sell" }, t / 1_000_000
                ),
                Protocol::Bitstamp => format!(
                    "{{\"data\":{{\"id\":{},\"timestamp\":\"{}\",\"amount\":{qs},\"amount_str\":\"{qs}\",\"price\":{ps},\"price_str\":\"{ps}\",\"type\":{},\"microtimestamp\":\"{}\",\"buy_order_id\":1,\"sell_order_id\":2}},\"channel\":\"live_trades_{sym}\",\"event\":\"trade\"}}",
                    inst.version, t / 1_000_000_000, if buy { 0 } else { 1 }, t / 1000
                ),
            };
            out.push(t + 2, rec(venue.conn, RecordKind::Ws, None, payload), None);
        }
    }
}
