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

use crate::venues::{default_assets, default_venues, symbol_for, venue_protocol, venue_quote};
use serde::de::{Deserializer, Error as _};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ops::Range;
use toml::Spanned;

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

    /// Parses the TOML form (see the module documentation): `toml` reads the file into the
    /// typed tables below, which refuse unknown keys and wrong types with the offending span;
    /// the checks that need more than one entry (unique ids and symbols) run after.
    pub fn parse(text: &str) -> Result<AssetMap, AssetMapError> {
        let deserializer = toml::Deserializer::parse(text).map_err(|e| AssetMapError::Syntax {
            line: e.span().map_or(1, |s| line_of(text, s.start)),
            message: e.message().trim().to_string(),
        })?;
        let file = MapFile::deserialize(deserializer).map_err(|e| AssetMapError::Invalid {
            line: e.span().map_or(1, |s| line_of(text, s.start)),
            message: e.message().trim().to_string(),
        })?;
        let invalid = |span: Range<usize>, message: String| AssetMapError::Invalid {
            line: line_of(text, span.start),
            message,
        };
        let mut entries: Vec<(AssetEntry, Range<usize>)> = Vec::new();
        for table in file.asset {
            let at = table.span();
            let entry = table.into_inner().into_entry(at.clone(), &invalid)?;
            if let Some((_, first)) = entries.iter().find(|(e, _)| e.id == entry.id) {
                let first_line = line_of(text, first.start);
                return Err(invalid(
                    at,
                    format!(
                        "asset id {} appears twice (first at line {first_line})",
                        entry.id
                    ),
                ));
            }
            if let Some((e, first)) = entries.iter().find(|(e, _)| e.symbol == entry.symbol) {
                let first_line = line_of(text, first.start);
                return Err(invalid(
                    at,
                    format!(
                        "symbol {} already names asset {} (line {first_line})",
                        entry.symbol, e.id
                    ),
                ));
            }
            entries.push((entry, at));
        }
        let numeraire = file.numeraire.map_or_else(|| "USD".to_string(), |n| n.0);
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

/// The file's top level.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MapFile {
    numeraire: Option<Numeraire>,
    #[serde(default)]
    asset: Vec<Spanned<AssetTable>>,
}

/// One `[[asset]]` table; its fields check themselves as they are read, so a wrong value is
/// refused at its own line with a message that says what is expected.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AssetTable {
    // Optional so that a missing one is reported as such (the checked types would call any
    // failure to read them a wrong value).
    id: Option<AssetId>,
    symbol: Option<AssetSymbol>,
    units: Option<Units>,
    #[serde(default)]
    venues: BTreeMap<String, Spanned<String>>,
}

impl AssetTable {
    /// The entry, once each venue name is one the oracle can read and each instrument is named.
    fn into_entry(
        self,
        at: Range<usize>,
        invalid: &impl Fn(Range<usize>, String) -> AssetMapError,
    ) -> Result<AssetEntry, AssetMapError> {
        let missing = |field: &str| invalid(at.clone(), format!("[[asset]] without `{field}`"));
        let id = self.id.ok_or_else(|| missing("id"))?.0;
        let symbol = self.symbol.ok_or_else(|| missing("symbol"))?.0;
        let units = self.units.ok_or_else(|| missing("units"))?.0;
        let mut venues = BTreeMap::new();
        for (venue, instrument) in self.venues {
            let span = instrument.span();
            if venue_protocol(&venue).is_none() {
                return Err(invalid(
                    span,
                    format!(
                        "venue {venue:?} is not binance, coinbase, kraken, okx or bitstamp \
                         (optionally with a suffix such as binance-2)"
                    ),
                ));
            }
            let instrument = instrument.into_inner();
            if instrument.is_empty() {
                return Err(invalid(
                    span,
                    format!("venue {venue}: the symbol must be a non-empty string"),
                ));
            }
            venues.insert(venue, instrument);
        }
        Ok(AssetEntry {
            id,
            symbol,
            units,
            venues,
        })
    }
}

/// Reads one value of type `T` and keeps it only if `accept` maps it; otherwise the error is
/// `expected`, which `toml` places at the value's line.
fn read_checked<'de, D, T, U>(
    deserializer: D,
    accept: impl FnOnce(T) -> Option<U>,
    expected: &str,
) -> Result<U, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    let value = T::deserialize(deserializer).map_err(|_| D::Error::custom(expected))?;
    accept(value).ok_or_else(|| D::Error::custom(expected))
}

/// `numeraire`: a currency symbol, stored upper case.
struct Numeraire(String);

impl<'de> Deserialize<'de> for Numeraire {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read_checked(
            deserializer,
            |s: String| is_symbol(&s).then(|| Numeraire(s.to_ascii_uppercase())),
            "numeraire must be a currency symbol such as \"USD\"",
        )
    }
}

/// `id`: the exchange's asset id.
struct AssetId(u16);

impl<'de> Deserialize<'de> for AssetId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read_checked(
            deserializer,
            |v: i64| u16::try_from(v).ok().map(AssetId),
            "id must be an integer from 0 to 65535",
        )
    }
}

/// `symbol`: the oracle's asset name, stored upper case.
struct AssetSymbol(String);

impl<'de> Deserialize<'de> for AssetSymbol {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read_checked(
            deserializer,
            |s: String| is_symbol(&s).then(|| AssetSymbol(s.to_ascii_uppercase())),
            "symbol must be 1 to 16 letters or digits, such as \"BTC\"",
        )
    }
}

/// `units`: exchange units per whole token.
struct Units(u128);

impl<'de> Deserialize<'de> for Units {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read_checked(
            deserializer,
            |v: i64| u128::try_from(v).ok().filter(|u| *u >= 1).map(Units),
            "units (exchange units per whole token) must be an integer of at least 1",
        )
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
        let cases: [(&str, usize, &str); 11] = [
            ("[[asset]]\nid = 0\nsymbol = \"BTC\"\nunits = 0\n", 4, "units"),
            ("[[asset]]\nid = 70000\nsymbol = \"BTC\"\nunits = 1\n", 2, "id must be"),
            ("[[asset]]\nid = 0\nsymbol = \"B-C\"\nunits = 1\n", 3, "symbol must"),
            ("[[asset]]\nid = 0\nsymbol = \"BTC\"\nunits = 1\ncolour = 3\n", 5, "unknown field `colour`, expected one of `id`"),
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
            ("numerair = \"USD\"\n[[asset]]\nid = 0\n", 1, "unknown field `numerair`"),
            (
                "[[asset]]\nid = 0\nsymbol = \"BTC\"\nunits = 1\nvenues = { okx = 7 }\n",
                5,
                "expected a string",
            ),
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
