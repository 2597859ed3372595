//! Golden tests per venue: payloads written by hand after each venue's documented examples go
//! through the normaliser and must give exactly the expected typed events (exact decimals,
//! sides, sequencing); non-data messages give no events, and malformed ones a typed error.

use walras_oracle::Dec;
use walras_oracle::{kraken_checksum, kraken_checksum_text};
use walras_oracle::{normalize, NormError};
use walras_oracle::{BookKind, Event, Level, Protocol, Sequencing, Side};

fn d(s: &str) -> Dec {
    Dec::parse(s).unwrap()
}
fn l(p: &str, q: &str) -> Level {
    Level {
        price: d(p),
        qty: d(q),
    }
}
fn book(ev: &Event) -> &walras_oracle::BookMessage {
    match ev {
        Event::Book(b) => b,
        other => panic!("not a book message: {other:?}"),
    }
}

#[test]
fn binance_diff_depth_and_rest_snapshot_normalise_exactly() {
    let diff = br#"{"e":"depthUpdate","E":1672515782136,"s":"BNBBTC","U":157,"u":160,"b":[["0.0024","10"]],"a":[["0.0026","100"]]}"#;
    let n = normalize(Protocol::Binance, diff, None).unwrap();
    let b = book(&n.events[0]);
    assert_eq!(b.symbol, "BNBBTC");
    assert_eq!(b.kind, BookKind::Delta);
    assert_eq!(b.bids, vec![l("0.0024", "10")]);
    assert_eq!(b.asks, vec![l("0.0026", "100")]);
    assert_eq!(
        b.sequencing,
        Sequencing::BinanceDiff {
            first_update_id: 157,
            final_update_id: 160
        }
    );
    let wrapped = br#"{"stream":"bnbbtc@depth@100ms","data":{"e":"depthUpdate","E":1,"s":"BNBBTC","U":157,"u":160,"b":[["0.0024","10"]],"a":[["0.0026","100"]]}}"#;
    assert_eq!(normalize(Protocol::Binance, wrapped, None).unwrap(), n);
    let snap = br#"{"lastUpdateId":1027024,"bids":[["4.00000000","431.00000000"]],"asks":[["4.00000200","12.00000000"]]}"#;
    let n = normalize(Protocol::Binance, snap, Some("bnbbtc")).unwrap();
    let b = book(&n.events[0]);
    assert_eq!(
        (b.symbol.as_str(), &b.kind),
        ("BNBBTC", &BookKind::Snapshot)
    );
    assert_eq!(b.asks, vec![l("4.000002", "12")]);
    assert_eq!(
        b.sequencing,
        Sequencing::BinanceSnapshot {
            last_update_id: 1027024
        }
    );
    let trade = br#"{"e":"trade","E":123456789,"s":"BNBBTC","t":12345,"p":"0.001","q":"100","T":123456785,"m":true,"M":true}"#;
    match &normalize(Protocol::Binance, trade, None).unwrap().events[0] {
        Event::Trade(t) => assert_eq!(
            (t.price, t.qty, t.taker),
            (d("0.001"), d("100"), Some(Side::Ask))
        ),
        other => panic!("{other:?}"),
    }
    assert!(
        normalize(Protocol::Binance, br#"{"result":null,"id":1}"#, None)
            .unwrap()
            .events
            .is_empty()
    );
}

#[test]
fn coinbase_level2_and_market_trades_normalise_with_the_connection_sequence() {
    let msg = br#"{"channel":"l2_data","client_id":"","timestamp":"2023-02-09T20:32:50.714964855Z","sequence_num":0,"events":[{"type":"snapshot","product_id":"BTC-USD","updates":[{"side":"bid","event_time":"1970-01-01T00:00:00Z","price_level":"21921.73","new_quantity":"0.06317902"},{"side":"offer","event_time":"1970-01-01T00:00:00Z","price_level":"21921.74","new_quantity":"0.02"}]}]}"#;
    let n = normalize(Protocol::Coinbase, msg, None).unwrap();
    assert_eq!(n.connection_seq, Some(0));
    let b = book(&n.events[0]);
    assert_eq!(
        (b.symbol.as_str(), &b.kind),
        ("BTC-USD", &BookKind::Snapshot)
    );
    assert_eq!(b.bids, vec![l("21921.73", "0.06317902")]);
    assert_eq!(b.asks, vec![l("21921.74", "0.02")]);
    let trades = br#"{"channel":"market_trades","client_id":"","timestamp":"2023-02-09T20:19:35.39625135Z","sequence_num":3,"events":[{"type":"snapshot","trades":[{"trade_id":"000000000","product_id":"ETH-USD","price":"1260.01","size":"0.3","side":"BUY","time":"2019-08-14T20:42:27.265Z"}]}]}"#;
    let n = normalize(Protocol::Coinbase, trades, None).unwrap();
    assert_eq!(n.connection_seq, Some(3));
    match &n.events[0] {
        Event::Trade(t) => assert_eq!(
            (t.symbol.as_str(), t.price, t.qty),
            ("ETH-USD", d("1260.01"), d("0.3"))
        ),
        other => panic!("{other:?}"),
    }
    let hb = br#"{"channel":"heartbeats","client_id":"","timestamp":"2023-06-23T20:31:26.122969572Z","sequence_num":4,"events":[{"current_time":"2023-06-23 20:31:56.121961769 +0000 UTC m=+91717.525857105","heartbeat_counter":"3049"}]}"#;
    let n = normalize(Protocol::Coinbase, hb, None).unwrap();
    assert_eq!(
        (n.connection_seq, n.events.len()),
        (Some(4), 0),
        "a heartbeat still advances the sequence"
    );
}

#[test]
fn kraken_v2_book_numbers_are_read_exactly_and_the_checksum_text_follows_the_docs() {
    let msg = br#"{"channel":"book","type":"snapshot","data":[{"symbol":"MATIC/USD","bids":[{"price":0.5666,"qty":4831.75496356}],"asks":[{"price":0.5668,"qty":4410.79769335}],"checksum":2439117997}]}"#;
    let n = normalize(Protocol::Kraken, msg, None).unwrap();
    let b = book(&n.events[0]);
    assert_eq!(b.symbol, "MATIC/USD");
    assert_eq!(b.bids, vec![l("0.5666", "4831.75496356")]);
    assert_eq!(b.asks, vec![l("0.5668", "4410.79769335")]);
    assert_eq!(
        b.sequencing,
        Sequencing::KrakenChecksum {
            checksum: 2439117997
        }
    );
    // The documented construction: "45285.2" -> "452852", "0.00100000" -> "100000".
    let text = kraken_checksum_text(
        std::iter::empty(),
        [(d("45285.2"), d("0.001"))].into_iter(),
        1,
        8,
    );
    assert_eq!(text, "452852100000");
    assert_eq!(
        kraken_checksum(
            std::iter::empty(),
            [(d("45285.2"), d("0.001"))].into_iter(),
            1,
            8
        ),
        crc32fast::hash(b"452852100000")
    );
    assert_eq!(
        crc32fast::hash(b"123456789"),
        0xCBF4_3926,
        "CRC-32/ISO-HDLC check value"
    );
    let trade = br#"{"channel":"trade","type":"update","data":[{"symbol":"MATIC/USD","side":"sell","price":0.5117,"qty":40.0,"ord_type":"market","trade_id":4665906,"timestamp":"2023-09-25T07:49:37.708706Z"}]}"#;
    match &normalize(Protocol::Kraken, trade, None).unwrap().events[0] {
        Event::Trade(t) => assert_eq!(
            (t.price, t.qty, t.taker),
            (d("0.5117"), d("40"), Some(Side::Ask))
        ),
        other => panic!("{other:?}"),
    }
    let inst = br#"{"channel":"instrument","type":"snapshot","data":{"assets":[],"pairs":[{"symbol":"BTC/USD","price_precision":1,"qty_precision":8}]}}"#;
    assert_eq!(
        normalize(Protocol::Kraken, inst, None).unwrap().events,
        vec![Event::PairPrecision {
            symbol: "BTC/USD".into(),
            price_decimals: 1,
            qty_decimals: 8
        }]
    );
    assert!(
        normalize(Protocol::Kraken, br#"{"channel":"heartbeat"}"#, None)
            .unwrap()
            .events
            .is_empty()
    );
}

#[test]
fn okx_v5_books_carry_prev_seq_id_and_trades_parse() {
    let msg = br#"{"arg":{"channel":"books","instId":"BTC-USDT"},"action":"update","data":[{"asks":[["8476.98","415","0","13"]],"bids":[["8476.97","256","0","12"]],"ts":"1597026383085","checksum":-855196043,"prevSeqId":123456,"seqId":123457}]}"#;
    let n = normalize(Protocol::Okx, msg, None).unwrap();
    let b = book(&n.events[0]);
    assert_eq!((b.symbol.as_str(), &b.kind), ("BTC-USDT", &BookKind::Delta));
    assert_eq!(b.asks, vec![l("8476.98", "415")]);
    assert_eq!(
        b.sequencing,
        Sequencing::OkxSeq {
            prev_seq_id: 123456,
            seq_id: 123457
        }
    );
    let trade = br#"{"arg":{"channel":"trades","instId":"BTC-USDT"},"data":[{"instId":"BTC-USDT","tradeId":"130639474","px":"42219.9","sz":"0.12060306","side":"buy","ts":"1630048897897","count":"3"}]}"#;
    match &normalize(Protocol::Okx, trade, None).unwrap().events[0] {
        Event::Trade(t) => assert_eq!(
            (t.price, t.qty, t.taker),
            (d("42219.9"), d("0.12060306"), Some(Side::Bid))
        ),
        other => panic!("{other:?}"),
    }
    assert!(normalize(Protocol::Okx, br#"{"event":"subscribe","arg":{"channel":"books","instId":"BTC-USDT"},"connId":"a4d3ae55"}"#, None).unwrap().events.is_empty());
}

#[test]
fn bitstamp_order_book_diff_and_trades_normalise() {
    let msg = br#"{"data":{"timestamp":"1643643384","microtimestamp":"1643643384592311","bids":[["36945.47","0.04003000"]],"asks":[["36962.53","0.20000000"]]},"channel":"order_book_btcusd","event":"data"}"#;
    let n = normalize(Protocol::Bitstamp, msg, None).unwrap();
    let b = book(&n.events[0]);
    assert_eq!(
        (b.symbol.as_str(), &b.kind),
        ("btcusd", &BookKind::Snapshot)
    );
    assert_eq!(
        b.sequencing,
        Sequencing::BitstampTime {
            micros: 1643643384592311
        }
    );
    let diff = br#"{"data":{"timestamp":"1643643385","microtimestamp":"1643643385000001","bids":[["36945.47","0"]],"asks":[]},"channel":"diff_order_book_btcusd","event":"data"}"#;
    let n = normalize(Protocol::Bitstamp, diff, None).unwrap();
    assert_eq!(book(&n.events[0]).kind, BookKind::Delta);
    let trade = br#"{"data":{"id":219245396,"timestamp":"1643643384","amount":0.0045,"amount_str":"0.00450000","price":37910,"price_str":"37910","type":0,"microtimestamp":"1643643384000000","buy_order_id":1,"sell_order_id":2},"channel":"live_trades_btcusd","event":"trade"}"#;
    match &normalize(Protocol::Bitstamp, trade, None).unwrap().events[0] {
        Event::Trade(t) => assert_eq!(
            (t.price, t.qty, t.taker),
            (d("37910"), d("0.0045"), Some(Side::Bid))
        ),
        other => panic!("{other:?}"),
    }
    assert!(normalize(
        Protocol::Bitstamp,
        br#"{"event":"bts:subscription_succeeded","channel":"order_book_btcusd","data":{}}"#,
        None
    )
    .unwrap()
    .events
    .is_empty());
}

#[test]
fn malformed_payloads_are_typed_errors_not_panics() {
    assert!(matches!(
        normalize(Protocol::Binance, b"{", None),
        Err(NormError::Malformed { .. })
    ));
    let bad_price = br#"{"e":"depthUpdate","E":1,"s":"X","U":1,"u":2,"b":[["1.2.3","1"]],"a":[]}"#;
    assert!(matches!(
        normalize(Protocol::Binance, bad_price, None),
        Err(NormError::Decimal { .. })
    ));
    let backwards = br#"{"e":"depthUpdate","E":1,"s":"X","U":5,"u":2,"b":[],"a":[]}"#;
    assert!(matches!(
        normalize(Protocol::Binance, backwards, None),
        Err(NormError::Unexpected { .. })
    ));
    let zero_in_snapshot = br#"{"lastUpdateId":1,"bids":[["1","0"]],"asks":[]}"#;
    assert!(normalize(Protocol::Binance, zero_in_snapshot, Some("X")).is_err());
    let bad_side = br#"{"channel":"l2_data","sequence_num":1,"events":[{"type":"update","product_id":"BTC-USD","updates":[{"side":"middle","price_level":"1","new_quantity":"1"}]}]}"#;
    assert!(normalize(Protocol::Coinbase, bad_side, None).is_err());
    let float_price = br#"{"channel":"book","type":"update","data":[{"symbol":"A/USD","bids":[{"price":1e400,"qty":1}],"asks":[],"checksum":1}]}"#;
    assert!(normalize(Protocol::Kraken, float_price, None).is_err());
}

#[test]
fn okx_checksum_text_interleaves_bids_and_asks_as_sent() {
    use walras_oracle::okx_checksum_text;
    let t = |v: &[(&str, &str)]| {
        v.iter()
            .map(|(p, q)| (p.to_string(), q.to_string()))
            .collect::<Vec<_>>()
    };
    // The documented example's shape: bids 3366.1×7, 3366×6; asks 3366.8×9, 3368×8.
    let text = okx_checksum_text(
        &t(&[("3366.1", "7"), ("3366", "6")]),
        &t(&[("3366.8", "9"), ("3368", "8")]),
    );
    assert_eq!(text, "3366.1:7:3366.8:9:3366:6:3368:8");
    // A side that runs out is skipped, the other goes on.
    let text = okx_checksum_text(
        &t(&[("3366.1", "7")]),
        &t(&[("3366.8", "9"), ("3368", "8")]),
    );
    assert_eq!(text, "3366.1:7:3366.8:9:3368:8");
    let msg = br#"{"arg":{"channel":"books","instId":"BTC-USDT"},"action":"snapshot","data":[{"asks":[["3366.8","9","0","3"]],"bids":[["3366.1","7","0","3"]],"ts":"1","checksum":-1,"prevSeqId":-1,"seqId":1}]}"#;
    let n = normalize(Protocol::Okx, msg, None).unwrap();
    let c = book(&n.events[0]).okx_checksum.clone().unwrap();
    assert_eq!(
        (c.checksum, c.bids[0].0.as_str(), c.asks[0].1.as_str()),
        (-1, "3366.1", "9")
    );
}
