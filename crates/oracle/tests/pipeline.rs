//! The pipeline's pieces: the overload policy (conflation to the newest book per instrument:
//! many updates, one valuation, of the final book), and aggregation (stablecoin legs priced by
//! the oracle, never assumed 1; unhealthy and unpriced venues excluded with reasons; outliers
//! rejected; a minimum venue count; a liquidity-weighted median).

use std::collections::BTreeMap;
use walras_oracle::Dec;
use walras_oracle::{
    aggregate_all, aggregate_asset, weighted_median, AggregateConfig, InstrumentQuote, PriceStatus,
};
use walras_oracle::{mid, Method};
use walras_oracle::{BookKind, BookMessage, Level, Protocol, Sequencing};
use walras_oracle::{Health, ResyncReason};
use walras_oracle::{InstrumentInfo, InstrumentKey, OracleConfig, Partition, Routed};

fn info() -> InstrumentInfo {
    InstrumentInfo {
        key: InstrumentKey {
            venue: "okx".into(),
            symbol: "BTC-USDT".into(),
        },
        protocol: Protocol::Okx,
        base: "BTC".into(),
        quote: "USDT".into(),
        kraken: None,
    }
}

fn okx(prev: i64, seq: i64, bid: i64, ask: i64, kind: BookKind) -> Routed {
    let lv = |p: i64, q: i64| Level {
        price: Dec::from_int(p),
        qty: Dec::from_int(q),
    };
    // Each update moves the market up by one: the old levels go, new ones come.
    let (bids, asks) = match kind {
        BookKind::Snapshot => (vec![lv(bid, 1)], vec![lv(ask, 1)]),
        BookKind::Delta => (
            vec![lv(bid - 1, 0), lv(bid, 1)],
            vec![lv(ask - 1, 0), lv(ask, 1)],
        ),
    };
    Routed::Book {
        info: info(),
        msg: BookMessage {
            symbol: "BTC-USDT".into(),
            kind,
            bids,
            asks,
            sequencing: Sequencing::OkxSeq {
                prev_seq_id: prev,
                seq_id: seq,
            },
            okx_checksum: None,
        },
    }
}

#[test]
fn a_burst_of_updates_is_conflated_into_one_valuation_of_the_newest_book() {
    let cfg = OracleConfig {
        method: Method::Mid,
        ..OracleConfig::default()
    };
    let mut part = Partition::new(cfg);
    part.apply(&okx(-1, 1, 100, 102, BookKind::Snapshot), 1);
    for i in 1..1000 {
        part.apply(
            &okx(i, i + 1, 100 + i, 102 + i, BookKind::Delta),
            1 + i as u64,
        );
    }
    let valued = part.value_dirty();
    assert_eq!(valued.len(), 1, "one instrument, one valuation");
    assert_eq!(part.valuations, 1);
    assert_eq!(part.events, 1000);
    let book = part.book(&info().key).unwrap();
    let bids: Vec<(f64, f64)> = book.bids().map(|(p, q)| (p.to_f64(), q.to_f64())).collect();
    let asks: Vec<(f64, f64)> = book.asks().map(|(p, q)| (p.to_f64(), q.to_f64())).collect();
    let quotes = part.quotes(1000);
    assert_eq!(
        quotes[0].price,
        Some(mid(&bids, &asks).unwrap()),
        "valued on the final book"
    );
    assert!(part.value_dirty().is_empty(), "nothing new, nothing valued");
}

#[test]
fn a_resyncing_book_is_never_priced() {
    let mut part = Partition::new(OracleConfig {
        method: Method::Mid,
        ..OracleConfig::default()
    });
    part.apply(&okx(-1, 1, 100, 102, BookKind::Snapshot), 1);
    part.apply(
        &Routed::Resync {
            info: info(),
            reason: ResyncReason::Disconnected,
        },
        2,
    );
    part.value_dirty();
    let q = &part.quotes(3)[0];
    assert!(matches!(
        q.health,
        Health::Resyncing(ResyncReason::Disconnected)
    ));
    assert_eq!(q.price, None);
}

fn quote(
    venue: &str,
    base: &str,
    quote_ccy: &str,
    price: f64,
    liquidity: f64,
    health: Health,
) -> InstrumentQuote {
    InstrumentQuote {
        venue: venue.into(),
        symbol: format!("{base}-{quote_ccy}"),
        base: base.into(),
        quote: quote_ccy.into(),
        health,
        price: Some(price),
        liquidity,
        last_update_ns: 0,
        value_error: None,
        spread_bps: Some(1.0),
    }
}

#[test]
fn venue_prices_are_converted_through_the_oracles_own_stablecoin_price() {
    let quotes = vec![
        quote("a", "USDT", "USD", 0.99, 1e6, Health::Synced),
        quote("b", "USDT", "USD", 0.99, 1e6, Health::Synced),
        quote("c", "USDT", "USD", 0.99, 1e6, Health::Synced),
        quote("a", "BTC", "USDT", 100.0, 1e6, Health::Synced),
        quote("b", "BTC", "USDT", 100.0, 1e6, Health::Synced),
        quote("c", "BTC", "USD", 99.0, 1e6, Health::Synced),
    ];
    let out = aggregate_all(&quotes, 0, &AggregateConfig::default(), "mid");
    let btc = out.iter().find(|p| p.asset == "BTC").unwrap();
    assert_eq!(btc.status, PriceStatus::Ok);
    assert!(
        (btc.price.unwrap() - 99.0).abs() < 1e-9,
        "100 USDT at 0.99 USD is 99 USD, not 100: {:?}",
        btc.price
    );
    assert!(btc.dispersion_bps < 1e-6);
}

#[test]
fn unhealthy_unpriced_and_outlying_venues_are_excluded_with_reasons() {
    let cfg = AggregateConfig::default();
    let quotes = vec![
        quote("a", "ETH", "USD", 2000.0, 5e5, Health::Synced),
        quote("b", "ETH", "USD", 2001.0, 5e5, Health::Synced),
        quote("c", "ETH", "USD", 2002.0, 5e5, Health::Synced),
        quote("d", "ETH", "USD", 2500.0, 5e6, Health::Synced),
        quote("e", "ETH", "USD", 1000.0, 5e5, Health::Crossed),
        quote("f", "ETH", "USDC", 2000.0, 5e5, Health::Synced),
    ];
    let p = aggregate_asset("ETH", &quotes, &BTreeMap::new(), 0, &cfg, "mid");
    let reason = |v: &str| {
        p.venues_excluded
            .iter()
            .find(|e| e.venue == v)
            .map(|e| e.reason.clone())
            .unwrap_or_default()
    };
    assert!(
        reason("d").starts_with("outlier"),
        "{:?}",
        p.venues_excluded
    );
    assert!(reason("e").contains("crossed"));
    assert!(reason("f").contains("quote leg USDC unpriced"));
    assert_eq!(p.venues_used.len(), 3);
    assert_eq!(p.price, Some(2001.0));
    assert_eq!(p.status, PriceStatus::Ok);
}

/// Trigger: three venues, one quoting +0.45% (inside the 50 bps outlier floor) with a
/// thousand times the others' depth. The published price was exactly the liar's mid with status
/// `ok`; the two honest venues alone said `insufficient_venues`.
#[test]
fn one_venue_quoting_apart_with_fake_depth_neither_sets_the_price_nor_counts() {
    let quotes = vec![
        quote("honest-a", "BTC", "USD", 100.00, 1e6, Health::Synced),
        quote("honest-b", "BTC", "USD", 100.02, 1e6, Health::Synced),
        quote("liar", "BTC", "USD", 100.45, 1e9, Health::Synced),
    ];
    let p = aggregate_asset(
        "BTC",
        &quotes,
        &BTreeMap::new(),
        0,
        &AggregateConfig::default(),
        "mid",
    );
    assert_eq!(p.status, PriceStatus::InsufficientVenues, "{p:?}");
    assert!(p.price.unwrap() <= 100.02, "{:?}", p.price);
    let liar = p.venues_excluded.iter().find(|e| e.venue == "liar");
    assert!(
        liar.is_some_and(|e| e.reason.starts_with("uncorroborated")),
        "{:?}",
        p.venues_excluded
    );
}

/// A venue close enough to agree still cannot set the price with depth alone: its weight is
/// capped at half the other venues' together.
#[test]
fn a_venue_that_agrees_cannot_outweigh_the_others_together() {
    let quotes = vec![
        quote("a", "BTC", "USD", 100.00, 1e6, Health::Synced),
        quote("b", "BTC", "USD", 100.03, 1e6, Health::Synced),
        quote("c", "BTC", "USD", 100.04, 1e6, Health::Synced),
        quote("deep", "BTC", "USD", 99.96, 1e12, Health::Synced),
    ];
    let p = aggregate_asset(
        "BTC",
        &quotes,
        &BTreeMap::new(),
        0,
        &AggregateConfig::default(),
        "mid",
    );
    assert_eq!(p.status, PriceStatus::Ok);
    assert_ne!(p.price, Some(99.96), "{p:?}");
    let total: f64 = p.venues_used.iter().map(|v| v.weight).sum();
    for venue in &p.venues_used {
        assert!(venue.weight * 3.0 <= total * (1.0 + 1e-12), "{p:?}");
    }
}

proptest::proptest! {
    /// Whatever one venue quotes (anywhere within ±0.5%) and whatever depth it shows, the
    /// published price lies within the honest venues' prices, and `ok` needs three honest
    /// venues or the liar within `agree_bps_min` of one of them.
    #[test]
    fn one_venue_alone_never_moves_the_price_outside_the_honest_ones(
        honest in proptest::collection::vec((-4i32..=4, 1u32..1_000), 2..6),
        liar_bps in -50i32..=50,
        liar_depth_log in 0u32..12,
    ) {
        let mut quotes: Vec<InstrumentQuote> = honest
            .iter()
            .enumerate()
            .map(|(n, (bps, depth))| {
                quote(&format!("h{n}"), "BTC", "USD", 100.0 * (1.0 + f64::from(*bps) / 1e4),
                      f64::from(*depth) * 1e3, Health::Synced)
            })
            .collect();
        let liar_price = 100.0 * (1.0 + f64::from(liar_bps) / 1e4);
        quotes.push(quote("liar", "BTC", "USD", liar_price, 10f64.powi(liar_depth_log as i32 + 3), Health::Synced));
        let cfg = AggregateConfig::default();
        let p = aggregate_asset("BTC", &quotes, &BTreeMap::new(), 0, &cfg, "mid");
        let low = quotes[..honest.len()].iter().filter_map(|q| q.price).fold(f64::MAX, f64::min);
        let high = quotes[..honest.len()].iter().filter_map(|q| q.price).fold(f64::MIN, f64::max);
        let price = p.price.expect("honest venues agree: there is a price");
        proptest::prop_assert!(low <= price && price <= high, "{} not in [{}, {}]: {:?}", price, low, high, p);
        let liar_agrees = quotes[..honest.len()].iter().any(|q| {
            (liar_price - q.price.unwrap()).abs() / q.price.unwrap() * 1e4 <= cfg.agree_bps_min
        });
        if p.status == PriceStatus::Ok {
            proptest::prop_assert!(honest.len() >= 3 || liar_agrees, "{:?}", p);
        }
    }
}

#[test]
fn too_few_venues_is_a_status_not_a_silent_price() {
    let quotes = vec![
        quote("a", "SOL", "USD", 20.0, 1e5, Health::Synced),
        quote("b", "SOL", "USD", 20.1, 1e5, Health::Stale),
    ];
    let p = aggregate_asset(
        "SOL",
        &quotes,
        &BTreeMap::new(),
        0,
        &AggregateConfig::default(),
        "mid",
    );
    assert_eq!(p.status, PriceStatus::InsufficientVenues);
    let none = aggregate_asset(
        "SOL",
        &quotes[1..],
        &BTreeMap::new(),
        0,
        &AggregateConfig::default(),
        "mid",
    );
    assert_eq!((none.status, none.price), (PriceStatus::Unavailable, None));
}

#[test]
fn the_weighted_median_follows_the_weight() {
    assert_eq!(
        weighted_median(&[(1.0, 1.0), (2.0, 1.0), (3.0, 5.0)]),
        Some(3.0)
    );
    assert_eq!(
        weighted_median(&[(1.0, 3.0), (2.0, 1.0), (3.0, 1.0)]),
        Some(1.0)
    );
    assert_eq!(weighted_median(&[]), None);
}

#[test]
fn every_generated_symbol_splits_back_into_its_base_and_quote() {
    // Regression: with BUSD among the known quotes, Bitstamp's `bnbusd` split as BN/BUSD.
    use walras_oracle::{default_assets, parse_symbol, symbol_for, venue_quote};
    for protocol in Protocol::ALL {
        let quote_ccy = venue_quote(protocol);
        for base in default_assets(40)
            .iter()
            .map(String::as_str)
            .chain(["USDT", "USDC"])
        {
            let symbol = symbol_for(protocol, base, quote_ccy);
            assert_eq!(
                parse_symbol(&symbol),
                Some((base.to_string(), quote_ccy.to_string())),
                "{symbol}"
            );
        }
    }
}

#[test]
fn a_registered_instrument_overrides_the_symbol_split() {
    use walras_oracle::Router;
    use walras_oracle::{Record, RecordKind};
    let mut router = Router::new(10);
    router
        .register("bitstamp", "bnbbusd", "BNB", "BUSD")
        .unwrap();
    let payload = r#"{"data":{"microtimestamp":"1","bids":[["1","1"]],"asks":[["2","1"]]},"channel":"order_book_bnbbusd","event":"data"}"#;
    let record = Record {
        recv_ns: 1,
        venue: "bitstamp".into(),
        conn: 0,
        kind: RecordKind::Ws,
        path: None,
        payload: payload.into(),
    };
    let items = router.route(&record).unwrap();
    assert_eq!(
        (
            items[0].info().base.as_str(),
            items[0].info().quote.as_str()
        ),
        ("BNB", "BUSD")
    );
    assert!(router.register("nasdaq", "X", "X", "USD").is_err());
}
