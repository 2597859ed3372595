//! Venue and instrument names: which wire format a venue speaks, the development venues and
//! assets, and how each venue spells an instrument (and how to split one back).

use crate::event::Protocol;

/// Kraken book subscription depth the generator and the replay both use.
pub const KRAKEN_DEPTH: usize = 10;

/// Venue name to wire format: by name prefix (`binance`, `binance-2`, `okx-eu`, ...).
pub fn venue_protocol(venue: &str) -> Option<Protocol> {
    Protocol::ALL
        .into_iter()
        .find(|p| venue.starts_with(p.name()))
}

/// `n` venue names cycling through the five protocols: binance, coinbase, kraken, okx, bitstamp, binance-2, ...
pub fn default_venues(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let p = Protocol::ALL[i % 5].name();
            if i < 5 {
                p.to_string()
            } else {
                format!("{p}-{}", i / 5 + 1)
            }
        })
        .collect()
}

/// The paper's 40 assets (less its stablecoins, which the oracle prices itself), then `A41`, `A42`...
pub fn default_assets(n: usize) -> Vec<String> {
    const PAPER: [&str; 36] = [
        "BTC", "ETH", "LINK", "SOL", "XRP", "DOT", "DOGE", "ADA", "BNB", "LUNA", "SHIB", "WBTC",
        "NEAR", "TRX", "CRO", "MATIC", "LTC", "APE", "FTT", "LEO", "ATOM", "XLM", "ALGO", "XMR",
        "ETC", "UNI", "VET", "FIL", "ICP", "HBAR", "EGLD", "XTZ", "THETA", "SAND", "GRT", "AXS",
    ];
    (0..n)
        .map(|i| {
            PAPER
                .get(i)
                .map(|s| s.to_string())
                .unwrap_or_else(|| format!("A{}", i + 1))
        })
        .collect()
}

/// The quote currency a protocol's generated books use for ordinary assets.
pub fn venue_quote(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::Binance | Protocol::Okx => "USDT",
        Protocol::Coinbase | Protocol::Kraken | Protocol::Bitstamp => "USD",
    }
}

pub fn symbol_for(protocol: Protocol, base: &str, quote: &str) -> String {
    match protocol {
        Protocol::Binance => format!("{base}{quote}"),
        Protocol::Coinbase | Protocol::Okx => format!("{base}-{quote}"),
        Protocol::Kraken => format!("{base}/{quote}"),
        Protocol::Bitstamp => format!("{base}{quote}").to_ascii_lowercase(),
    }
}

/// Quote currencies recognised at the end of a separator-less symbol (Binance, Bitstamp), longest
/// first. A suffix split is ambiguous in general: with `BUSD` in this list, Bitstamp's `bnbusd` split
/// as BN/BUSD (found by the 40-asset replay), so it is left out; a live deployment should register
/// each instrument from venue metadata with `Router::register`.
pub const KNOWN_QUOTES: [&str; 5] = ["USDT", "USDC", "USD", "EUR", "BTC"];

/// `(base, quote)` of a venue symbol: split at `-`, `/` or `_`, else by a known quote suffix.
pub fn parse_symbol(symbol: &str) -> Option<(String, String)> {
    let upper = symbol.to_ascii_uppercase();
    if let Some((b, q)) = upper.split_once(['-', '/', '_']) {
        return (!b.is_empty() && !q.is_empty()).then(|| (b.to_string(), q.to_string()));
    }
    KNOWN_QUOTES
        .iter()
        .find(|q| upper.len() > q.len() && upper.ends_with(*q))
        .map(|q| (upper[..upper.len() - q.len()].to_string(), q.to_string()))
}
