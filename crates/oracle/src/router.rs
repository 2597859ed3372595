//! Routing: records are normalised and the connection-level rules applied (Coinbase
//! `sequence_num`, disconnects), giving per-instrument work for a [`Partition`](crate::partition::Partition).
//! Single-threaded and deterministic; the live oracle and the threaded replay route the same way.

use crate::book::{KrakenSpec, ResyncReason};
use crate::event::{BookMessage, Event, Protocol, Trade};
use crate::normalize::normalize;
use crate::record::{Record, RecordKind};
use crate::venues::{parse_symbol, venue_protocol};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
