//! Venue wire formats to normalised events: bytes in, typed events or a typed error out.
//!
//! Written from each venue's public documentation (field names as documented):
//! - Binance spot: `<symbol>@depth` diff depth (`e`=`depthUpdate`, `U`, `u`, `b`, `a`), `<symbol>@trade`
//!   (`e`=`trade`, `p`, `q`, `m`), both bare or wrapped in a combined stream `{"stream","data"}`, and
//!   the REST snapshot `GET /api/v3/depth` (`lastUpdateId`, `bids`, `asks`), which names no symbol:
//!   the caller passes it from the request.
//! - Coinbase Advanced Trade: channel `l2_data` (events of `type` snapshot/update with `updates`
//!   of `side` bid/offer, `price_level`, `new_quantity`), `market_trades`, and the message-level
//!   `sequence_num`; `heartbeats` and `subscriptions` carry only the sequence number.
//! - Kraken v2: channel `instrument` (`pairs[]` with `price_precision`, `qty_precision`), channel `book` (`type` snapshot/update, `data[]` with `bids`/`asks` of `{price, qty}`
//!   JSON numbers and `checksum`), channel `trade`. Numbers are read from their JSON text
//!   (`RawValue`), never through `f64`.
//! - OKX v5: `arg.channel` = `books` (`action` snapshot/update, `data[]` with `asks`/`bids` of
//!   `[px, sz, "0", orders]`, `prevSeqId`, `seqId`, `checksum` kept with the level texts), `trades` (`px`, `sz`, `side`).
//! - Bitstamp v2: channels `order_book_<pair>` (full top-100 snapshot per message),
//!   `diff_order_book_<pair>` and `live_trades_<pair>` (`price_str`, `amount_str`, `type` 0 buy / 1 sell).
//!
//! Anything the venue sends that is not market data (subscription acks, heartbeats, status) is
//! `Ok` with no events, so that a connector never mistakes it for a fault.

use crate::decimal::{Dec, DecError};
use crate::event::{
    BookKind, BookMessage, Event, Level, Normalized, OkxChecksum, Protocol, Sequencing, Side, Trade,
};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// Largest payload accepted, bytes.
pub const PAYLOAD_BYTES_MAX: usize = 4 << 20;
/// Most levels per side in one message.
pub const LEVELS_PER_MESSAGE_MAX: usize = 10_000;
/// Longest symbol accepted.
pub const SYMBOL_LEN_MAX: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NormError {
    #[error("payload of {0} bytes exceeds the {PAYLOAD_BYTES_MAX}-byte limit")]
    TooLarge(usize),
    #[error("malformed {venue} message: {detail}")]
    Malformed { venue: &'static str, detail: String },
    #[error("bad decimal in {venue} message: {source}")]
    Decimal {
        venue: &'static str,
        source: DecError,
    },
    #[error("{venue} message has {count} levels, more than {LEVELS_PER_MESSAGE_MAX}")]
    TooManyLevels { venue: &'static str, count: usize },
    #[error("{venue} symbol {symbol:?} is empty or longer than {SYMBOL_LEN_MAX}")]
    BadSymbol { venue: &'static str, symbol: String },
    #[error("{venue} {field} has unexpected value {value:?}")]
    Unexpected {
        venue: &'static str,
        field: &'static str,
        value: String,
    },
}

/// Normalises one payload. `rest_symbol` is `Some` only for a REST order-book snapshot
/// (Binance's names no symbol in its body).
pub fn normalize(
    protocol: Protocol,
    payload: &[u8],
    rest_symbol: Option<&str>,
) -> Result<Normalized, NormError> {
    if payload.len() > PAYLOAD_BYTES_MAX {
        return Err(NormError::TooLarge(payload.len()));
    }
    match protocol {
        Protocol::Binance => match rest_symbol {
            Some(symbol) => binance_snapshot(payload, symbol),
            None => binance_ws(payload),
        },
        Protocol::Coinbase => coinbase(payload),
        Protocol::Kraken => kraken(payload),
        Protocol::Okx => okx(payload),
        Protocol::Bitstamp => match rest_symbol {
            Some(symbol) => bitstamp_rest(payload, symbol),
            None => bitstamp(payload),
        },
    }
}

fn malformed(venue: &'static str, e: impl ToString) -> NormError {
    NormError::Malformed {
        venue,
        detail: e.to_string(),
    }
}

fn dec(venue: &'static str, text: &str) -> Result<Dec, NormError> {
    Dec::parse(text).map_err(|source| NormError::Decimal { venue, source })
}

fn symbol(venue: &'static str, s: &str) -> Result<String, NormError> {
    if s.is_empty() || s.len() > SYMBOL_LEN_MAX {
        return Err(NormError::BadSymbol {
            venue,
            symbol: s.chars().take(SYMBOL_LEN_MAX + 1).collect(),
        });
    }
    Ok(s.to_string())
}

fn check_count(venue: &'static str, count: usize) -> Result<(), NormError> {
    if count > LEVELS_PER_MESSAGE_MAX {
        return Err(NormError::TooManyLevels { venue, count });
    }
    Ok(())
}

/// Levels as `[[price, qty, ...], ...]` string arrays (Binance, OKX, Bitstamp).
fn string_levels(venue: &'static str, rows: &[Vec<Cow<'_, str>>]) -> Result<Vec<Level>, NormError> {
    check_count(venue, rows.len())?;
    rows.iter()
        .map(|row| match row.as_slice() {
            [p, q, ..] => Ok(Level {
                price: dec(venue, p)?,
                qty: dec(venue, q)?,
            }),
            _ => Err(malformed(venue, "level with fewer than 2 fields")),
        })
        .collect()
}

fn check_levels(venue: &'static str, levels: &[Level], kind: &BookKind) -> Result<(), NormError> {
    for l in levels {
        let zero_ok = *kind == BookKind::Delta;
        if !l.price.is_positive() || l.qty.units() < 0 || (!zero_ok && l.qty.is_zero()) {
            return Err(NormError::Unexpected {
                venue,
                field: "level",
                value: format!("{}@{}", l.qty, l.price),
            });
        }
    }
    Ok(())
}

fn book(
    venue: &'static str,
    symbol_text: &str,
    kind: BookKind,
    bids: Vec<Level>,
    asks: Vec<Level>,
    sequencing: Sequencing,
) -> Result<Event, NormError> {
    check_levels(venue, &bids, &kind)?;
    check_levels(venue, &asks, &kind)?;
    Ok(Event::Book(BookMessage {
        symbol: symbol(venue, symbol_text)?,
        kind,
        bids,
        asks,
        sequencing,
        okx_checksum: None,
    }))
}

// ---------------------------------------------------------------- Binance

#[derive(Deserialize)]
struct BinanceEnvelope<'a> {
    #[serde(borrow)]
    data: &'a RawValue,
}

#[derive(Deserialize)]
struct BinanceTag<'a> {
    #[serde(borrow, default)]
    e: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct BinanceDepth<'a> {
    #[serde(borrow)]
    s: Cow<'a, str>,
    #[serde(rename = "U")]
    first: u64,
    u: u64,
    #[serde(borrow)]
    b: Vec<Vec<Cow<'a, str>>>,
    #[serde(borrow)]
    a: Vec<Vec<Cow<'a, str>>>,
}

#[derive(Deserialize)]
struct BinanceTrade<'a> {
    #[serde(borrow)]
    s: Cow<'a, str>,
    #[serde(borrow)]
    p: Cow<'a, str>,
    #[serde(borrow)]
    q: Cow<'a, str>,
    /// Is the buyer the maker? Then the taker sold.
    m: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BinanceSnapshot<'a> {
    last_update_id: u64,
    #[serde(borrow)]
    bids: Vec<Vec<Cow<'a, str>>>,
    #[serde(borrow)]
    asks: Vec<Vec<Cow<'a, str>>>,
}

const BINANCE: &str = "binance";

fn binance_ws(payload: &[u8]) -> Result<Normalized, NormError> {
    let raw: &RawValue = serde_json::from_slice(payload).map_err(|e| malformed(BINANCE, e))?;
    let inner = match serde_json::from_str::<BinanceEnvelope>(raw.get()) {
        Ok(env) => env.data.get(),
        Err(_) => raw.get(),
    };
    let tag: BinanceTag = serde_json::from_str(inner).map_err(|e| malformed(BINANCE, e))?;
    let events = match tag.e.as_deref() {
        Some("depthUpdate") => {
            let d: BinanceDepth = serde_json::from_str(inner).map_err(|e| malformed(BINANCE, e))?;
            if d.first > d.u {
                return Err(NormError::Unexpected {
                    venue: BINANCE,
                    field: "U",
                    value: format!("{} > u {}", d.first, d.u),
                });
            }
            let bids = string_levels(BINANCE, &d.b)?;
            let asks = string_levels(BINANCE, &d.a)?;
            let seq = Sequencing::BinanceDiff {
                first_update_id: d.first,
                final_update_id: d.u,
            };
            vec![book(BINANCE, &d.s, BookKind::Delta, bids, asks, seq)?]
        }
        Some("trade") => {
            let t: BinanceTrade = serde_json::from_str(inner).map_err(|e| malformed(BINANCE, e))?;
            let taker = Some(if t.m { Side::Ask } else { Side::Bid });
            vec![Event::Trade(Trade {
                symbol: symbol(BINANCE, &t.s)?,
                price: dec(BINANCE, &t.p)?,
                qty: dec(BINANCE, &t.q)?,
                taker,
            })]
        }
        // Subscription results (`{"result":null,"id":1}`) and other streams.
        _ => Vec::new(),
    };
    Ok(Normalized {
        connection_seq: None,
        events,
    })
}

fn binance_snapshot(payload: &[u8], symbol_text: &str) -> Result<Normalized, NormError> {
    let s: BinanceSnapshot = serde_json::from_slice(payload).map_err(|e| malformed(BINANCE, e))?;
    let bids = string_levels(BINANCE, &s.bids)?;
    let asks = string_levels(BINANCE, &s.asks)?;
    let seq = Sequencing::BinanceSnapshot {
        last_update_id: s.last_update_id,
    };
    Ok(Normalized {
        connection_seq: None,
        events: vec![book(
            BINANCE,
            &symbol_text.to_ascii_uppercase(),
            BookKind::Snapshot,
            bids,
            asks,
            seq,
        )?],
    })
}

// ---------------------------------------------------------------- Coinbase

const COINBASE: &str = "coinbase";

#[derive(Deserialize)]
struct CoinbaseMessage<'a> {
    #[serde(borrow)]
    channel: Cow<'a, str>,
    sequence_num: u64,
    #[serde(borrow, default)]
    events: Vec<CoinbaseEvent<'a>>,
}

#[derive(Deserialize)]
struct CoinbaseEvent<'a> {
    #[serde(borrow, rename = "type", default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    product_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    updates: Vec<CoinbaseUpdate<'a>>,
    #[serde(borrow, default)]
    trades: Vec<CoinbaseTrade<'a>>,
}

#[derive(Deserialize)]
struct CoinbaseUpdate<'a> {
    #[serde(borrow)]
    side: Cow<'a, str>,
    #[serde(borrow)]
    price_level: Cow<'a, str>,
    #[serde(borrow)]
    new_quantity: Cow<'a, str>,
}

#[derive(Deserialize)]
struct CoinbaseTrade<'a> {
    #[serde(borrow)]
    product_id: Cow<'a, str>,
    #[serde(borrow)]
    price: Cow<'a, str>,
    #[serde(borrow)]
    size: Cow<'a, str>,
}

fn coinbase(payload: &[u8]) -> Result<Normalized, NormError> {
    let m: CoinbaseMessage = serde_json::from_slice(payload).map_err(|e| malformed(COINBASE, e))?;
    let mut events = Vec::new();
    match m.channel.as_ref() {
        "l2_data" => {
            for ev in &m.events {
                let kind = match ev.kind.as_deref() {
                    Some("snapshot") => BookKind::Snapshot,
                    Some("update") => BookKind::Delta,
                    other => {
                        return Err(NormError::Unexpected {
                            venue: COINBASE,
                            field: "type",
                            value: format!("{other:?}"),
                        })
                    }
                };
                check_count(COINBASE, ev.updates.len())?;
                let (mut bids, mut asks) = (Vec::new(), Vec::new());
                for u in &ev.updates {
                    let level = Level {
                        price: dec(COINBASE, &u.price_level)?,
                        qty: dec(COINBASE, &u.new_quantity)?,
                    };
                    match u.side.as_ref() {
                        "bid" => bids.push(level),
                        "offer" | "ask" => asks.push(level),
                        other => {
                            return Err(NormError::Unexpected {
                                venue: COINBASE,
                                field: "side",
                                value: other.to_string(),
                            })
                        }
                    }
                }
                let product = ev.product_id.as_deref().unwrap_or("");
                events.push(book(
                    COINBASE,
                    product,
                    kind,
                    bids,
                    asks,
                    Sequencing::Connection,
                )?);
            }
        }
        "market_trades" => {
            for ev in &m.events {
                check_count(COINBASE, ev.trades.len())?;
                for t in &ev.trades {
                    events.push(Event::Trade(Trade {
                        symbol: symbol(COINBASE, &t.product_id)?,
                        price: dec(COINBASE, &t.price)?,
                        qty: dec(COINBASE, &t.size)?,
                        taker: None,
                    }));
                }
            }
        }
        _ => {}
    }
    Ok(Normalized {
        connection_seq: Some(m.sequence_num),
        events,
    })
}

// ---------------------------------------------------------------- Kraken v2

const KRAKEN: &str = "kraken";

#[derive(Deserialize)]
struct KrakenMessage<'a> {
    #[serde(borrow, default)]
    channel: Option<Cow<'a, str>>,
    #[serde(borrow, rename = "type", default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct KrakenBook<'a> {
    #[serde(borrow)]
    symbol: Cow<'a, str>,
    #[serde(borrow, default)]
    bids: Vec<KrakenLevel<'a>>,
    #[serde(borrow, default)]
    asks: Vec<KrakenLevel<'a>>,
    checksum: u32,
}

#[derive(Deserialize)]
struct KrakenLevel<'a> {
    #[serde(borrow)]
    price: &'a RawValue,
    #[serde(borrow)]
    qty: &'a RawValue,
}

#[derive(Deserialize)]
struct KrakenTrade<'a> {
    #[serde(borrow)]
    symbol: Cow<'a, str>,
    #[serde(borrow)]
    side: Cow<'a, str>,
    #[serde(borrow)]
    price: &'a RawValue,
    #[serde(borrow)]
    qty: &'a RawValue,
}

#[derive(Deserialize)]
struct KrakenInstruments<'a> {
    #[serde(borrow, default)]
    pairs: Vec<KrakenPair<'a>>,
}

#[derive(Deserialize)]
struct KrakenPair<'a> {
    #[serde(borrow)]
    symbol: Cow<'a, str>,
    price_precision: u32,
    qty_precision: u32,
}

/// A JSON number's own text (or a quoted decimal), parsed exactly.
fn raw_dec(venue: &'static str, raw: &RawValue) -> Result<Dec, NormError> {
    let text = raw.get().trim_matches('"');
    dec(venue, text)
}

fn kraken_levels(levels: &[KrakenLevel<'_>]) -> Result<Vec<Level>, NormError> {
    check_count(KRAKEN, levels.len())?;
    levels
        .iter()
        .map(|l| {
            Ok(Level {
                price: raw_dec(KRAKEN, l.price)?,
                qty: raw_dec(KRAKEN, l.qty)?,
            })
        })
        .collect()
}

fn kraken(payload: &[u8]) -> Result<Normalized, NormError> {
    let m: KrakenMessage = serde_json::from_slice(payload).map_err(|e| malformed(KRAKEN, e))?;
    let mut events = Vec::new();
    let data = match m.data {
        Some(d) => d.get(),
        None => return Ok(Normalized::default()),
    };
    match m.channel.as_deref() {
        Some("book") => {
            let kind = match m.kind.as_deref() {
                Some("snapshot") => BookKind::Snapshot,
                Some("update") => BookKind::Delta,
                other => {
                    return Err(NormError::Unexpected {
                        venue: KRAKEN,
                        field: "type",
                        value: format!("{other:?}"),
                    })
                }
            };
            let books: Vec<KrakenBook> =
                serde_json::from_str(data).map_err(|e| malformed(KRAKEN, e))?;
            for b in &books {
                let seq = Sequencing::KrakenChecksum {
                    checksum: b.checksum,
                };
                events.push(book(
                    KRAKEN,
                    &b.symbol,
                    kind.clone(),
                    kraken_levels(&b.bids)?,
                    kraken_levels(&b.asks)?,
                    seq,
                )?);
            }
        }
        Some("instrument") => {
            let info: KrakenInstruments =
                serde_json::from_str(data).map_err(|e| malformed(KRAKEN, e))?;
            check_count(KRAKEN, info.pairs.len())?;
            for p in &info.pairs {
                if p.price_precision > crate::decimal::SCALE_DIGITS
                    || p.qty_precision > crate::decimal::SCALE_DIGITS
                {
                    return Err(NormError::Unexpected {
                        venue: KRAKEN,
                        field: "precision",
                        value: format!("{}/{}", p.price_precision, p.qty_precision),
                    });
                }
                events.push(Event::PairPrecision {
                    symbol: symbol(KRAKEN, &p.symbol)?,
                    price_decimals: p.price_precision,
                    qty_decimals: p.qty_precision,
                });
            }
        }
        Some("trade") => {
            let trades: Vec<KrakenTrade> =
                serde_json::from_str(data).map_err(|e| malformed(KRAKEN, e))?;
            check_count(KRAKEN, trades.len())?;
            for t in &trades {
                let taker = taker_side(t.side.as_ref());
                events.push(Event::Trade(Trade {
                    symbol: symbol(KRAKEN, &t.symbol)?,
                    price: raw_dec(KRAKEN, t.price)?,
                    qty: raw_dec(KRAKEN, t.qty)?,
                    taker,
                }));
            }
        }
        _ => {}
    }
    Ok(Normalized {
        connection_seq: None,
        events,
    })
}

// ---------------------------------------------------------------- OKX v5

const OKX: &str = "okx";

#[derive(Deserialize)]
struct OkxMessage<'a> {
    #[serde(borrow, default)]
    arg: Option<OkxArg<'a>>,
    #[serde(borrow, default)]
    action: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OkxArg<'a> {
    #[serde(borrow)]
    channel: Cow<'a, str>,
    #[serde(borrow, default)]
    inst_id: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OkxBook<'a> {
    #[serde(borrow, default)]
    asks: Vec<Vec<Cow<'a, str>>>,
    #[serde(borrow, default)]
    bids: Vec<Vec<Cow<'a, str>>>,
    prev_seq_id: i64,
    seq_id: i64,
    #[serde(default)]
    checksum: Option<i32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OkxTrade<'a> {
    #[serde(borrow)]
    inst_id: Cow<'a, str>,
    #[serde(borrow)]
    px: Cow<'a, str>,
    #[serde(borrow)]
    sz: Cow<'a, str>,
    #[serde(borrow)]
    side: Cow<'a, str>,
}

fn okx(payload: &[u8]) -> Result<Normalized, NormError> {
    if payload == b"pong" {
        return Ok(Normalized::default());
    }
    let m: OkxMessage = serde_json::from_slice(payload).map_err(|e| malformed(OKX, e))?;
    let (arg, data) = match (m.arg, m.data) {
        (Some(a), Some(d)) => (a, d.get()),
        // `{"event":"subscribe",...}`, errors and notices carry no data.
        _ => return Ok(Normalized::default()),
    };
    let mut events = Vec::new();
    match arg.channel.as_ref() {
        "books" | "books5" | "books-l2-tbt" | "books50-l2-tbt" => {
            let kind = match m.action.as_deref() {
                Some("snapshot") | None => BookKind::Snapshot,
                Some("update") => BookKind::Delta,
                Some(other) => {
                    return Err(NormError::Unexpected {
                        venue: OKX,
                        field: "action",
                        value: other.to_string(),
                    })
                }
            };
            let inst = arg.inst_id.as_deref().unwrap_or("");
            let books: Vec<OkxBook> = serde_json::from_str(data).map_err(|e| malformed(OKX, e))?;
            for b in &books {
                let seq = Sequencing::OkxSeq {
                    prev_seq_id: b.prev_seq_id,
                    seq_id: b.seq_id,
                };
                let mut event = book(
                    OKX,
                    inst,
                    kind.clone(),
                    string_levels(OKX, &b.bids)?,
                    string_levels(OKX, &b.asks)?,
                    seq,
                )?;
                if let (Event::Book(msg), Some(checksum)) = (&mut event, b.checksum) {
                    let texts = |rows: &[Vec<Cow<'_, str>>]| -> Vec<(String, String)> {
                        rows.iter()
                            .map(|r| (r[0].to_string(), r[1].to_string()))
                            .collect()
                    };
                    // `string_levels` accepted every row, so each has at least two fields.
                    msg.okx_checksum = Some(OkxChecksum {
                        checksum,
                        bids: texts(&b.bids),
                        asks: texts(&b.asks),
                    });
                }
                events.push(event);
            }
        }
        "trades" | "trades-all" => {
            let trades: Vec<OkxTrade> =
                serde_json::from_str(data).map_err(|e| malformed(OKX, e))?;
            check_count(OKX, trades.len())?;
            for t in &trades {
                let taker = taker_side(t.side.as_ref());
                events.push(Event::Trade(Trade {
                    symbol: symbol(OKX, &t.inst_id)?,
                    price: dec(OKX, &t.px)?,
                    qty: dec(OKX, &t.sz)?,
                    taker,
                }));
            }
        }
        _ => {}
    }
    Ok(Normalized {
        connection_seq: None,
        events,
    })
}

// ---------------------------------------------------------------- Bitstamp v2

const BITSTAMP: &str = "bitstamp";

#[derive(Deserialize)]
struct BitstampMessage<'a> {
    #[serde(borrow)]
    event: Cow<'a, str>,
    #[serde(borrow, default)]
    channel: Cow<'a, str>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct BitstampBook<'a> {
    #[serde(borrow)]
    microtimestamp: Cow<'a, str>,
    #[serde(borrow, default)]
    bids: Vec<Vec<Cow<'a, str>>>,
    #[serde(borrow, default)]
    asks: Vec<Vec<Cow<'a, str>>>,
}

#[derive(Deserialize)]
struct BitstampTrade<'a> {
    #[serde(borrow)]
    price_str: Cow<'a, str>,
    #[serde(borrow)]
    amount_str: Cow<'a, str>,
    #[serde(rename = "type")]
    kind: u8,
}

fn bitstamp_micros(text: &str) -> Result<u64, NormError> {
    text.parse::<u64>().map_err(|_| NormError::Unexpected {
        venue: BITSTAMP,
        field: "microtimestamp",
        value: text.to_string(),
    })
}

fn bitstamp(payload: &[u8]) -> Result<Normalized, NormError> {
    let m: BitstampMessage = serde_json::from_slice(payload).map_err(|e| malformed(BITSTAMP, e))?;
    let data = match m.data {
        Some(d) => d.get(),
        None => return Ok(Normalized::default()),
    };
    let mut events = Vec::new();
    let channel = m.channel.as_ref();
    if m.event == "data" {
        let (kind, pair) = if let Some(pair) = channel.strip_prefix("diff_order_book_") {
            (BookKind::Delta, pair)
        } else if let Some(pair) = channel.strip_prefix("order_book_") {
            (BookKind::Snapshot, pair)
        } else {
            return Ok(Normalized::default());
        };
        let b: BitstampBook = serde_json::from_str(data).map_err(|e| malformed(BITSTAMP, e))?;
        let seq = Sequencing::BitstampTime {
            micros: bitstamp_micros(&b.microtimestamp)?,
        };
        events.push(book(
            BITSTAMP,
            pair,
            kind,
            string_levels(BITSTAMP, &b.bids)?,
            string_levels(BITSTAMP, &b.asks)?,
            seq,
        )?);
    } else if m.event == "trade" {
        if let Some(pair) = channel.strip_prefix("live_trades_") {
            let t: BitstampTrade =
                serde_json::from_str(data).map_err(|e| malformed(BITSTAMP, e))?;
            let taker = match t.kind {
                0 => Some(Side::Bid),
                1 => Some(Side::Ask),
                _ => None,
            };
            events.push(Event::Trade(Trade {
                symbol: symbol(BITSTAMP, pair)?,
                price: dec(BITSTAMP, &t.price_str)?,
                qty: dec(BITSTAMP, &t.amount_str)?,
                taker,
            }));
        }
    }
    Ok(Normalized {
        connection_seq: None,
        events,
    })
}

/// Bitstamp REST `GET /api/v2/order_book/{pair}/`: `microtimestamp`, `bids`, `asks`.
fn bitstamp_rest(payload: &[u8], pair: &str) -> Result<Normalized, NormError> {
    let b: BitstampBook = serde_json::from_slice(payload).map_err(|e| malformed(BITSTAMP, e))?;
    let seq = Sequencing::BitstampTime {
        micros: bitstamp_micros(&b.microtimestamp)?,
    };
    let ev = book(
        BITSTAMP,
        pair,
        BookKind::Snapshot,
        string_levels(BITSTAMP, &b.bids)?,
        string_levels(BITSTAMP, &b.asks)?,
        seq,
    )?;
    Ok(Normalized {
        connection_seq: None,
        events: vec![ev],
    })
}

/// The taker's side of a trade as venues spell it (`buy`/`sell`); `None` when not given.
fn taker_side(side: &str) -> Option<Side> {
    match side {
        "buy" => Some(Side::Bid),
        "sell" => Some(Side::Ask),
        _ => None,
    }
}
