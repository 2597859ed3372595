//! One worker's instruments: books, valuations, conflation to the newest book per instrument.
//! Pure and single-threaded; the live oracle, the threaded replay and the tests drive it the same
//! way.

use crate::aggregate::InstrumentQuote;
use crate::book::{Book, BookAction, Health, ResyncReason};
use crate::config::OracleConfig;
use crate::router::{InstrumentInfo, InstrumentKey, Routed};
use crate::value::{band_liquidity, value, TradeWindow, ValueError};
use std::collections::{BTreeMap, BTreeSet};

/// Most levels per side converted for a valuation.
pub const VALUATION_LEVELS_MAX: usize = 5_000;

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

/// Values a book that passed its venue's rule; the only place a book's levels become a price.
fn value_book(s: &mut InstrumentState, cfg: &OracleConfig) {
    assert!(
        s.book.is_synced() && !s.book.is_crossed(),
        "{}: a book that failed its venue's rule or is crossed must never be valued",
        s.info.key
    );
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
    match value(&bids, &asks, &cfg.method) {
        Ok(p) => {
            s.price = Some(p);
            s.liquidity = band_liquidity(&bids, &asks, p, cfg.liquidity_band);
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

/// The other half of the rule: a book not synced or crossed keeps no price from before.
fn refuse_valuation(s: &mut InstrumentState) {
    s.price = None;
    s.liquidity = 0.0;
    s.value_error = Some(if s.book.is_synced() {
        "crossed".into()
    } else {
        "not synced".into()
    });
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
            // A book that failed its venue's rule (resyncing) or is crossed is never valued.
            if s.book.is_synced() && !s.book.is_crossed() {
                value_book(s, &self.cfg);
            } else {
                refuse_valuation(s);
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
        // The valuation rule's other half, where prices leave the partition: a price is shown
        // only for a book that passed its venue's rule.
        debug_assert!(
            !good || s.book.is_synced(),
            "{}: healthy but not synced",
            s.info.key
        );
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

    /// The base asset of one instrument of this partition.
    pub fn base_of(&self, key: &InstrumentKey) -> Option<&str> {
        self.instruments.get(key).map(|s| s.info.base.as_str())
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
