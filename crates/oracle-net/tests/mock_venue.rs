//! Connectors against the loopback mock venue serving a generated feed with injected faults
//! (gaps, duplicates, reorders, crossed levels, bad checksums, disconnects): every connection
//! the mock drops is re-established, every book recovers (or would be reported), no unhealthy
//! book is ever used, and every asset ends with a healthy price.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use walras_oracle::OracleConfig;
use walras_oracle::Publication;
use walras_oracle::{
    default_assets, default_venues, generate_feed, symbol_for, venue_protocol, venue_quote,
    FeedConfig, RecordKind,
};
use walras_oracle_net::ConnectorConfig;
use walras_oracle_net::MockVenue;
use walras_oracle_net::{run_live, LiveOptions};

#[test]
fn connectors_recover_from_every_injected_fault_and_never_use_an_unhealthy_book() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let venues = default_venues(5);
        let assets = default_assets(3);
        let records = generate_feed(&FeedConfig {
            venues: venues.clone(),
            assets: assets.clone(),
            seconds: 8,
            seed: 11,
            faults: 0.05,
            ..FeedConfig::default()
        });
        let mut injected: BTreeMap<String, u64> = BTreeMap::new();
        for r in records.iter().filter(|r| r.kind == RecordKind::Disconnect) {
            *injected.entry(r.venue.clone()).or_default() += 1;
        }
        assert!(
            injected.values().sum::<u64>() > 0,
            "the feed must inject disconnects for this test to mean anything"
        );
        // Binance's symbols as its REST snapshots name them (stablecoin books included).
        let binance_symbols: BTreeSet<String> = records
            .iter()
            .filter_map(|r| r.path.as_deref())
            .filter_map(|p| p.split("symbol=").nth(1))
            .map(|s| s.split('&').next().unwrap_or(s).to_string())
            .collect();
        let mock = MockVenue::start(records, 4.0).await.unwrap();
        let endpoints = venues
            .iter()
            .map(|venue| {
                let protocol = venue_protocol(venue).unwrap();
                let symbols = if venue == "binance" {
                    binance_symbols.iter().cloned().collect()
                } else {
                    assets
                        .iter()
                        .map(|a| symbol_for(protocol, a, venue_quote(protocol)))
                        .collect()
                };
                mock.endpoint(venue, symbols)
            })
            .collect();
        let options = LiveOptions {
            endpoints,
            connector: ConnectorConfig {
                heartbeat_every: Duration::from_millis(500),
                idle_timeout: Duration::from_secs(5),
                backoff_initial: Duration::from_millis(20),
                backoff_max: Duration::from_millis(200),
                seed: 3,
                ..ConnectorConfig::default()
            },
            oracle: OracleConfig::default(),
            publish_every: Duration::from_millis(100),
            resync_after: Duration::from_millis(300),
        };
        let (stop_tx, stop_rx) = watch::channel(false);
        let mock = std::sync::Arc::new(mock);
        let watcher = {
            let (mock, venues) = (mock.clone(), venues.clone());
            tokio::spawn(async move {
                let deadline = Instant::now() + Duration::from_secs(60);
                loop {
                    let mut all = true;
                    for venue in &venues {
                        all &= mock.finished(venue);
                    }
                    if all || Instant::now() > deadline {
                        break all;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        let stopper = {
            let stop_tx = stop_tx.clone();
            tokio::spawn(async move {
                let finished = watcher.await.unwrap_or(false);
                // Give the last snapshots time to arrive and be published.
                tokio::time::sleep(Duration::from_millis(800)).await;
                let _ = stop_tx.send(true);
                finished
            })
        };
        let mut last: Option<Publication> = None;
        let mut unhealthy_seen = 0;
        let summary = run_live(
            options,
            |publication, _| {
                unhealthy_seen += publication
                    .venues
                    .iter()
                    .map(|v| v.counts.resyncing + v.counts.crossed)
                    .sum::<u64>();
                last = Some(publication.clone());
            },
            stop_rx,
        )
        .await
        .unwrap();
        assert!(
            stopper.await.unwrap(),
            "the mock served every venue's whole feed"
        );

        assert_eq!(summary.unhealthy_used, 0, "{summary:?}");
        assert_eq!(summary.parse_errors, 0, "{summary:?}");
        assert!(
            unhealthy_seen > 0,
            "faults made books unhealthy along the way"
        );
        for (venue, disconnects) in &injected {
            let (connections, closed) = mock.connections(venue);
            assert_eq!(closed, *disconnects, "{venue}");
            assert!(
                connections > *disconnects,
                "{venue}: reconnected after each drop"
            );
            assert!(
                summary.venues[venue].0 > *disconnects,
                "{venue}: {summary:?}"
            );
        }
        // Binance books started from REST snapshots, and books that stayed resyncing were
        // asked for again (Binance: a REST refetch; the others: a resubscription).
        assert!(
            summary.venues["binance"].2 >= binance_symbols.len() as u64,
            "{summary:?}"
        );
        assert!(summary.resync_requests > 0, "{summary:?}");

        let last = last.expect("publications");
        for venue in &last.venues {
            let c = venue.counts;
            assert_eq!(
                (c.resyncing, c.crossed),
                (0, 0),
                "{}: every book recovered by the end ({c:?})",
                venue.venue
            );
        }
        for asset in &assets {
            assert!(
                last.healthy_price(asset).is_some(),
                "{asset}: {:?}",
                last.prices
            );
        }
        // The connectors subscribed as each venue documents.
        let sent = |venue: &str| mock.received(venue).join("\n");
        assert!(sent("binance").contains("btcusdt@depth@100ms"));
        assert!(sent("coinbase").contains("\"level2\""));
        assert!(sent("kraken").contains("\"book\""));
        assert!(sent("okx").contains("\"books\""));
        assert!(sent("bitstamp").contains("order_book_btcusd"));
        eprintln!("{summary:?}");
    });
}
