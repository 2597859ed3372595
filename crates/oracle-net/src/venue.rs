//! What each venue is sent: subscriptions, resubscriptions, heartbeats and REST snapshot paths,
//! from the venues' public documentation.
//!
//! - Binance spot: `{"method":"SUBSCRIBE","params":["btcusdt@depth@100ms","btcusdt@trade"],"id":1}`
//!   on the combined-stream endpoint (`/stream`, frames `{"stream":..,"data":..}`); books from
//!   `GET /api/v3/depth?symbol=BTCUSDT&limit=1000`. Binance pings; the client answers pongs
//!   (tungstenite does), and we ping too to detect a dead connection.
//! - Coinbase Advanced Trade: `{"type":"subscribe","product_ids":[..],"channel":"level2"}`, the
//!   same for `market_trades` and `heartbeats` (which keeps the per-connection `sequence_num`
//!   moving on quiet books).
//! - Kraken v2: `{"method":"subscribe","params":{"channel":"book","symbol":[..],"depth":10}}`,
//!   `instrument` (price and size precisions for the checksum) and `trade`;
//!   `{"method":"ping"}` as the heartbeat.
//! - OKX v5: `{"op":"subscribe","args":[{"channel":"books","instId":"BTC-USDT"},..]}` and
//!   `trades`; the text `ping` every < 30 s (OKX closes quiet connections), answered `pong`.
//! - Bitstamp v2: `{"event":"bts:subscribe","data":{"channel":"order_book_btcusd"}}` and
//!   `live_trades_btcusd`; `{"event":"bts:heartbeat"}`.

use serde_json::json;
use walras_oracle::Protocol;

/// The messages that subscribe a new connection to `symbols` (books and trades).
pub fn subscribe_messages(
    protocol: Protocol,
    symbols: &[String],
    kraken_depth: usize,
) -> Vec<String> {
    subscriptions(protocol, symbols, kraken_depth, true)
}

/// The messages that make the venue send a fresh snapshot of one book: unsubscribe then
/// subscribe again (Binance books come from REST instead: see [`rest_snapshot_path`]).
pub fn resubscribe_messages(protocol: Protocol, symbol: &str, kraken_depth: usize) -> Vec<String> {
    if protocol == Protocol::Binance {
        return Vec::new();
    }
    let symbols = [symbol.to_string()];
    let mut out = subscriptions(protocol, &symbols, kraken_depth, false);
    out.extend(subscriptions(protocol, &symbols, kraken_depth, true));
    out
}

fn subscriptions(
    protocol: Protocol,
    symbols: &[String],
    kraken_depth: usize,
    subscribe: bool,
) -> Vec<String> {
    match protocol {
        Protocol::Binance => {
            let streams: Vec<String> = symbols
                .iter()
                .flat_map(|s| {
                    let s = s.to_ascii_lowercase();
                    [format!("{s}@depth@100ms"), format!("{s}@trade")]
                })
                .collect();
            let method = if subscribe {
                "SUBSCRIBE"
            } else {
                "UNSUBSCRIBE"
            };
            vec![json!({"method": method, "params": streams, "id": 1}).to_string()]
        }
        Protocol::Coinbase => {
            let kind = if subscribe {
                "subscribe"
            } else {
                "unsubscribe"
            };
            ["level2", "market_trades", "heartbeats"]
                .iter()
                .map(|channel| {
                    json!({"type": kind, "product_ids": symbols, "channel": channel}).to_string()
                })
                .collect()
        }
        Protocol::Kraken => {
            let method = if subscribe {
                "subscribe"
            } else {
                "unsubscribe"
            };
            let mut out = Vec::new();
            if subscribe {
                out.push(
                    json!({"method": "subscribe", "params": {"channel": "instrument"}}).to_string(),
                );
            }
            out.push(
                json!({"method": method, "params": {"channel": "book", "symbol": symbols, "depth": kraken_depth}})
                    .to_string(),
            );
            out.push(
                json!({"method": method, "params": {"channel": "trade", "symbol": symbols}})
                    .to_string(),
            );
            out
        }
        Protocol::Okx => {
            let op = if subscribe {
                "subscribe"
            } else {
                "unsubscribe"
            };
            let args: Vec<serde_json::Value> = symbols
                .iter()
                .flat_map(|s| {
                    [
                        json!({"channel": "books", "instId": s}),
                        json!({"channel": "trades", "instId": s}),
                    ]
                })
                .collect();
            vec![json!({"op": op, "args": args}).to_string()]
        }
        Protocol::Bitstamp => {
            let event = if subscribe {
                "bts:subscribe"
            } else {
                "bts:unsubscribe"
            };
            symbols
                .iter()
                .flat_map(|s| {
                    let s = s.to_ascii_lowercase();
                    [format!("order_book_{s}"), format!("live_trades_{s}")]
                })
                .map(|channel| json!({"event": event, "data": {"channel": channel}}).to_string())
                .collect()
        }
    }
}

/// The REST path of a book snapshot, for venues whose books start from one (Binance).
pub fn rest_snapshot_path(protocol: Protocol, symbol: &str) -> Option<String> {
    (protocol == Protocol::Binance).then(|| format!("/api/v3/depth?symbol={symbol}&limit=1000"))
}

/// The application-level heartbeat a venue expects, if any (`None`: a WebSocket ping frame).
pub fn heartbeat_text(protocol: Protocol) -> Option<&'static str> {
    match protocol {
        Protocol::Okx => Some("ping"),
        Protocol::Kraken => Some(r#"{"method":"ping"}"#),
        Protocol::Bitstamp => Some(r#"{"event":"bts:heartbeat"}"#),
        Protocol::Binance | Protocol::Coinbase => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(messages: &[String]) -> Vec<serde_json::Value> {
        messages
            .iter()
            .map(|m| serde_json::from_str(m).expect("JSON"))
            .collect()
    }

    #[test]
    fn each_venue_subscribes_books_and_trades_as_documented() {
        let symbols = |s: &str| vec![s.to_string()];
        let binance = parsed(&subscribe_messages(
            Protocol::Binance,
            &symbols("BTCUSDT"),
            10,
        ));
        assert_eq!(
            binance[0]["params"],
            json!(["btcusdt@depth@100ms", "btcusdt@trade"])
        );
        let coinbase = parsed(&subscribe_messages(
            Protocol::Coinbase,
            &symbols("BTC-USD"),
            10,
        ));
        let channels: Vec<&str> = coinbase
            .iter()
            .map(|m| m["channel"].as_str().unwrap())
            .collect();
        assert_eq!(channels, ["level2", "market_trades", "heartbeats"]);
        let kraken = parsed(&subscribe_messages(
            Protocol::Kraken,
            &symbols("BTC/USD"),
            10,
        ));
        assert_eq!(kraken[1]["params"]["channel"], "book");
        assert_eq!(kraken[1]["params"]["depth"], 10);
        let okx = parsed(&subscribe_messages(Protocol::Okx, &symbols("BTC-USDT"), 10));
        assert_eq!(
            okx[0]["args"][0],
            json!({"channel": "books", "instId": "BTC-USDT"})
        );
        let bitstamp = parsed(&subscribe_messages(
            Protocol::Bitstamp,
            &symbols("btcusd"),
            10,
        ));
        assert_eq!(bitstamp[0]["data"]["channel"], "order_book_btcusd");
        // A resubscription is an unsubscribe then a subscribe; Binance refetches by REST.
        let again = parsed(&resubscribe_messages(Protocol::Okx, "BTC-USDT", 10));
        assert_eq!(
            (again[0]["op"].as_str(), again[1]["op"].as_str()),
            (Some("unsubscribe"), Some("subscribe"))
        );
        assert!(resubscribe_messages(Protocol::Binance, "BTCUSDT", 10).is_empty());
        assert_eq!(
            rest_snapshot_path(Protocol::Binance, "BTCUSDT").as_deref(),
            Some("/api/v3/depth?symbol=BTCUSDT&limit=1000")
        );
    }
}
