//! The asset map: which oracle asset each exchange asset is, how many exchange units make one
//! whole token, and (for live connectors) which venue instruments quote it.
//!
//! The file is TOML, one `[[asset]]` table per exchange asset:
//!
//! ```toml
//! # Prices are published in this currency (the oracle's numeraire). Optional, default "USD".
//! numeraire = "USD"
//!
//! [[asset]]
//! id = 0                  # the exchange's asset id (u16)
//! symbol = "BTC"          # the oracle's asset name (the base of the venue instruments)
//! units = 100000000       # exchange units per whole token (satoshis per BTC)
//! # Optional: the instrument each venue quotes it by (what a live connector subscribes to).
//! venues = { binance = "BTCUSDT", coinbase = "BTC-USD", kraken = "BTC/USD" }
//! ```
//!
//! A malformed file is refused with the line of the first problem: an operator fixes a map by
//! line, and a map that silently skipped an asset would leave that asset's band check and warm
//! start without a reference.

use crate::feed::{default_assets, default_venues, symbol_for, venue_protocol, venue_quote};
use std::collections::BTreeMap;

/// Most assets a map may name (the exchange's asset ids are `u16`).
pub const ASSETS_MAX: usize = 1 << 16;

/// One exchange asset's entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssetEntry {
    /// The exchange asset id.
    pub id: u16,
    /// The oracle's asset name (upper case), e.g. `BTC`.
    pub symbol: String,
    /// Exchange units per whole token (at least 1).
    pub units: u128,
    /// Venue name → the venue's instrument symbol for this asset (may be empty).
    pub venues: BTreeMap<String, String>,
}

/// Exchange assets ↔ oracle assets, ordered by exchange asset id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssetMap {
    pub numeraire: String,
    entries: Vec<AssetEntry>,
}

/// Why an asset map file was refused; `line` is 1-based.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssetMapError {
    #[error("asset map line {line}: not valid TOML: {message}")]
    Syntax { line: usize, message: String },
    #[error("asset map line {line}: {message}")]
    Invalid { line: usize, message: String },
    #[error("asset map: no [[asset]] entries (one per exchange asset is needed)")]
    Empty,
}

/// The 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

impl AssetMap {
    /// A map from entries, checked as a file is (unique ids and symbols, units ≥ 1).
    pub fn new(numeraire: &str, mut entries: Vec<AssetEntry>) -> Result<AssetMap, AssetMapError> {
        if entries.is_empty() {
            return Err(AssetMapError::Empty);
        }
        entries.sort_by_key(|e| e.id);
        for pair in entries.windows(2) {
            if pair[0].id == pair[1].id {
                return Err(AssetMapError::Invalid {
                    line: 0,
                    message: format!("asset id {} appears twice", pair[0].id),
                });
            }
        }
        let mut symbols = BTreeMap::new();
        for e in &entries {
            if e.units == 0 {
                return Err(AssetMapError::Invalid {
                    line: 0,
                    message: format!("asset {}: units must be at least 1", e.id),
                });
            }
            if let Some(other) = symbols.insert(e.symbol.clone(), e.id) {
                return Err(AssetMapError::Invalid {
                    line: 0,
                    message: format!(
                        "symbol {} names both asset {other} and asset {}",
                        e.symbol, e.id
                    ),
                });
            }
        }
        Ok(AssetMap {
            numeraire: numeraire.to_ascii_uppercase(),
            entries,
        })
    }

    /// Parses the TOML form (see the module documentation).
    pub fn parse(text: &str) -> Result<AssetMap, AssetMapError> {
        let doc = toml_edit::ImDocument::parse(text).map_err(|e| AssetMapError::Syntax {
            line: e.span().map_or(1, |s| line_of(text, s.start)),
            message: e.message().trim().to_string(),
        })?;
        let invalid =
            |span: Option<std::ops::Range<usize>>, message: String| AssetMapError::Invalid {
                line: span.map_or(1, |s| line_of(text, s.start)),
                message,
            };
        let mut numeraire = "USD".to_string();
        let mut tables = Vec::new();
        for (key, item) in doc.iter() {
            let span = doc.key(key).and_then(|k| k.span());
            match key {
                "numeraire" => {
                    numeraire = item
                        .as_str()
                        .filter(|s| is_symbol(s))
                        .ok_or_else(|| {
                            invalid(
                                item.span().or(span.clone()),
                                "numeraire must be a currency symbol such as \"USD\"".into(),
                            )
                        })?
                        .to_ascii_uppercase();
                }
                "asset" => {
                    let array = item.as_array_of_tables().ok_or_else(|| {
                        invalid(
                            span.clone(),
                            "`asset` must be an array of tables: write each as [[asset]]".into(),
                        )
                    })?;
                    tables.extend(array.iter());
                }
                other => {
                    return Err(invalid(
                        span,
                        format!("unknown key {other:?} (expected `numeraire` or [[asset]] tables)"),
                    ))
                }
            }
        }
        let mut entries: Vec<(AssetEntry, Option<std::ops::Range<usize>>)> = Vec::new();
        for table in tables {
            let at = table.span();
            let mut id = None;
            let mut symbol = None;
            let mut units = None;
            let mut venues = BTreeMap::new();
            for (key, item) in table.iter() {
                let span = item
                    .span()
                    .or_else(|| table.key(key).and_then(|k| k.span()))
                    .or(at.clone());
                match key {
                    "id" => {
                        let value = item
                            .as_integer()
                            .and_then(|v| u16::try_from(v).ok())
                            .ok_or_else(|| {
                                invalid(span, "id must be an integer from 0 to 65535".into())
                            })?;
                        id = Some(value);
                    }
                    "symbol" => {
                        let value = item.as_str().filter(|s| is_symbol(s)).ok_or_else(|| {
                            invalid(
                                span,
                                "symbol must be 1 to 16 letters or digits, such as \"BTC\"".into(),
                            )
                        })?;
                        symbol = Some(value.to_ascii_uppercase());
                    }
                    "units" => {
                        let value = item.as_integer().filter(|v| *v >= 1).ok_or_else(|| {
                            invalid(
                                span,
                                "units (exchange units per whole token) must be an integer of \
                                 at least 1"
                                    .into(),
                            )
                        })?;
                        units = Some(value as u128);
                    }
                    "venues" => {
                        let table = item.as_inline_table().ok_or_else(|| {
                            invalid(
                                span.clone(),
                                "venues must be an inline table such as { binance = \"BTCUSDT\" }"
                                    .into(),
                            )
                        })?;
                        for (venue, value) in table.iter() {
                            let vspan = value.span().or(span.clone());
                            if venue_protocol(venue).is_none() {
                                return Err(invalid(
                                    vspan,
                                    format!(
                                        "venue {venue:?} is not binance, coinbase, kraken, okx or \
                                         bitstamp (optionally with a suffix such as binance-2)"
                                    ),
                                ));
                            }
                            let symbol =
                                value.as_str().filter(|s| !s.is_empty()).ok_or_else(|| {
                                    invalid(
                                        vspan,
                                        format!(
                                            "venue {venue}: the symbol must be a non-empty string"
                                        ),
                                    )
                                })?;
                            venues.insert(venue.to_string(), symbol.to_string());
                        }
                    }
                    other => {
                        return Err(invalid(
                            span,
                            format!(
                                "unknown key {other:?} in [[asset]] (expected id, symbol, units, \
                                 venues)"
                            ),
                        ))
                    }
                }
            }
            let missing = |field: &str| invalid(at.clone(), format!("[[asset]] without `{field}`"));
            let entry = AssetEntry {
                id: id.ok_or_else(|| missing("id"))?,
                symbol: symbol.ok_or_else(|| missing("symbol"))?,
                units: units.ok_or_else(|| missing("units"))?,
                venues,
            };
            if let Some((_, first)) = entries.iter().find(|(e, _)| e.id == entry.id) {
                return Err(invalid(
                    at,
                    format!(
                        "asset id {} appears twice (first at line {})",
                        entry.id,
                        first.clone().map_or(1, |s| line_of(text, s.start))
                    ),
                ));
            }
            if let Some((e, first)) = entries.iter().find(|(e, _)| e.symbol == entry.symbol) {
                return Err(invalid(
                    at,
                    format!(
                        "symbol {} already names asset {} (line {})",
                        entry.symbol,
                        e.id,
                        first.clone().map_or(1, |s| line_of(text, s.start))
                    ),
                ));
            }
            entries.push((entry, at));
        }
        AssetMap::new(&numeraire, entries.into_iter().map(|(e, _)| e).collect())
    }

    /// The map a development genesis of `assets` assets gets: asset `i` is the generator's
    /// `i`-th asset (`feed::default_assets`, the names `walras gen feed` writes), one unit per
    /// token (development amounts are abstract), quoted on the five default venues.
    pub fn default_for(assets: u16) -> AssetMap {
        let names = default_assets(usize::from(assets));
        let venues = default_venues(5);
        let entries = names
            .iter()
            .enumerate()
            .map(|(i, name)| AssetEntry {
                id: i as u16,
                symbol: name.clone(),
                units: 1,
                venues: venues
                    .iter()
                    .filter_map(|v| {
                        let protocol = venue_protocol(v)?;
                        Some((v.clone(), symbol_for(protocol, name, venue_quote(protocol))))
                    })
                    .collect(),
            })
            .collect();
        AssetMap {
            numeraire: "USD".into(),
            entries,
        }
    }

    /// Entries by ascending exchange asset id.
    pub fn entries(&self) -> &[AssetEntry] {
        &self.entries
    }

    pub fn by_id(&self, id: u16) -> Option<&AssetEntry> {
        self.entries
            .binary_search_by_key(&id, |e| e.id)
            .ok()
            .map(|i| &self.entries[i])
    }

    pub fn by_symbol(&self, symbol: &str) -> Option<&AssetEntry> {
        self.entries.iter().find(|e| e.symbol == symbol)
    }

    /// Whether every exchange asset `0..assets` has an entry (what a warm start needs).
    pub fn covers(&self, assets: u16) -> bool {
        (0..assets).all(|id| self.by_id(id).is_some())
    }
}

fn is_symbol(s: &str) -> bool {
    (1..=16).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"numeraire = "usd"

[[asset]]
id = 1
symbol = "ETH"
units = 1000000000000000000

[[asset]]
id = 0
symbol = "btc"
units = 100000000
venues = { binance = "BTCUSDT", kraken = "BTC/USD" }
"#;

    #[test]
    fn a_good_map_parses_sorted_by_id() {
        let map = AssetMap::parse(GOOD).unwrap();
        assert_eq!(map.numeraire, "USD");
        let ids: Vec<u16> = map.entries().iter().map(|e| e.id).collect();
        assert_eq!(ids, [0, 1]);
        let btc = map.by_id(0).unwrap();
        assert_eq!(btc.symbol, "BTC");
        assert_eq!(btc.units, 100_000_000);
        assert_eq!(btc.venues["kraken"], "BTC/USD");
        assert_eq!(
            map.by_symbol("ETH").unwrap().units,
            1_000_000_000_000_000_000
        );
        assert!(map.covers(2));
        assert!(!map.covers(3));
    }

    fn error_line(text: &str) -> (usize, String) {
        match AssetMap::parse(text).unwrap_err() {
            AssetMapError::Syntax { line, message } | AssetMapError::Invalid { line, message } => {
                (line, message)
            }
            AssetMapError::Empty => (0, "empty".into()),
        }
    }

    #[test]
    fn each_mistake_names_its_line() {
        let cases: [(&str, usize, &str); 9] = [
            ("[[asset]]\nid = 0\nsymbol = \"BTC\"\nunits = 0\n", 4, "units"),
            ("[[asset]]\nid = 70000\nsymbol = \"BTC\"\nunits = 1\n", 2, "id must be"),
            ("[[asset]]\nid = 0\nsymbol = \"B-C\"\nunits = 1\n", 3, "symbol must"),
            ("[[asset]]\nid = 0\nsymbol = \"BTC\"\nunits = 1\ncolour = 3\n", 5, "unknown key"),
            ("[[asset]]\nid = 0\nunits = 1\n", 1, "without `symbol`"),
            (
                "[[asset]]\nid = 0\nsymbol = \"BTC\"\nunits = 1\n\n[[asset]]\nid = 0\nsymbol = \"ETH\"\nunits = 1\n",
                6,
                "appears twice (first at line 1)",
            ),
            (
                "[[asset]]\nid = 0\nsymbol = \"BTC\"\nunits = 1\nvenues = { ftx = \"BTC-USD\" }\n",
                5,
                "not binance",
            ),
            ("[[asset]]\nid = 0\nsymbol = \"BTC\"\nunits = = 1\n", 4, "not valid TOML"),
            ("numeraire = 5\n[[asset]]\nid = 0\nsymbol = \"BTC\"\nunits = 1\n", 1, "numeraire"),
        ];
        for (text, line, needle) in cases {
            let (got_line, message) = error_line(text);
            let shown = AssetMap::parse(text).unwrap_err().to_string();
            assert_eq!(got_line, line, "{text:?}: {shown}");
            assert!(
                shown.contains(needle) || message.contains(needle),
                "{text:?}: {shown}"
            );
        }
        assert_eq!(AssetMap::parse("").unwrap_err(), AssetMapError::Empty);
    }

    #[test]
    fn the_dev_default_names_the_generated_assets_on_the_five_venues() {
        let map = AssetMap::default_for(3);
        let symbols: Vec<&str> = map.entries().iter().map(|e| e.symbol.as_str()).collect();
        assert_eq!(symbols, ["BTC", "ETH", "LINK"]);
        let eth = map.by_id(1).unwrap();
        assert_eq!(eth.units, 1);
        assert_eq!(eth.venues["binance"], "ETHUSDT");
        assert_eq!(eth.venues["coinbase"], "ETH-USD");
        assert_eq!(eth.venues["kraken"], "ETH/USD");
        assert_eq!(eth.venues["okx"], "ETH-USDT");
        assert_eq!(eth.venues["bitstamp"], "ethusd");
        // The default round-trips through the checks a file gets.
        assert_eq!(AssetMap::new("USD", map.entries().to_vec()).unwrap(), map);
    }
}
