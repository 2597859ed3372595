//! Connector throughput over loopback: the mock venue serves a generated feed as fast as it can
//! (`speed` × recorded time), the connectors read it and one `LiveOracle` applies every record.
//! Prints records, seconds and records/s received and applied.
//!
//! `cargo run --release -p walras-oracle-net --example connector_throughput -- VENUES ASSETS SECONDS SPEED`

use std::time::{Duration, Instant};
use tokio::sync::watch;
use walras_oracle::OracleConfig;
use walras_oracle::{default_assets, default_venues, generate_feed, FeedConfig};
use walras_oracle_net::ConnectorConfig;
use walras_oracle_net::MockVenue;
use walras_oracle_net::{run_live, LiveOptions};

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numbers: VENUES ASSETS SECONDS SPEED"))
        .collect();
    let (venues, assets, seconds, speed) = match args[..] {
        [v, a, s, x] => (v as usize, a as usize, s, x as f64),
        _ => (5, 40, 10, 100.0),
    };
    let records = generate_feed(&FeedConfig {
        venues: default_venues(venues),
        assets: default_assets(assets),
        seconds,
        seed: 1,
        faults: 0.0,
        ..FeedConfig::default()
    });
    let total = records.len();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mock = std::sync::Arc::new(MockVenue::start(records.clone(), speed).await.unwrap());
        let binance: Vec<String> = records
            .iter()
            .filter_map(|r| r.path.as_deref()?.split("symbol=").nth(1))
            .map(|s| s.split('&').next().unwrap_or(s).to_string())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let endpoints = default_venues(venues)
            .iter()
            .map(|v| mock.endpoint(v, if v.starts_with("binance") { binance.clone() } else { vec!["X".into()] }))
            .collect();
        let options = LiveOptions {
            endpoints,
            connector: ConnectorConfig::default(),
            oracle: OracleConfig::default(),
            publish_every: Duration::from_millis(100),
            resync_after: Duration::from_secs(1),
        };
        let (stop_tx, stop_rx) = watch::channel(false);
        let started = Instant::now();
        let names = default_venues(venues);
        // Stop once the mock served everything and a publication saw no new record; the rate
        // is over the time to the last publication that saw new records.
        let mut last = (0u64, started.elapsed());
        let summary = run_live(
            options,
            |_, oracle| {
                if oracle.records > last.0 {
                    last = (oracle.records, started.elapsed());
                } else if names.iter().all(|v| mock.finished(v)) {
                    let _ = stop_tx.send(true);
                }
            },
            stop_rx,
        )
        .await
        .unwrap();
        let elapsed = last.1.as_secs_f64();
        let ws = records
            .iter()
            .filter(|r| r.kind == walras_oracle::RecordKind::Ws)
            .count();
        println!(
            "{venues} venues x {assets} assets, {seconds} s of feed at speed {speed}: {total} records in the feed ({ws} WebSocket frames); {} received and applied (frames + REST snapshots fetched) in {elapsed:.2} s = {:.0} records/s; parse errors {}, unhealthy books used {}",
            summary.records,
            summary.records as f64 / elapsed,
            summary.parse_errors,
            summary.unhealthy_used
        );
    });
}
