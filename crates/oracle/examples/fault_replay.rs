//! Replays a generated 12-venue × 40-asset feed with 1 % faults at 1 and 2 threads and prints the
//! book summary, the injected faults and whether the digests agree.
//! `cargo run --release -p walras-oracle --example fault_replay -- [seconds] [seed]`
use walras_oracle::{default_assets, default_venues, generate_feed_with_truth, FeedConfig};
use walras_oracle::{replay, OracleConfig, ReplayOptions};

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let cfg = FeedConfig {
        venues: default_venues(12),
        assets: default_assets(40),
        seconds: args.first().copied().unwrap_or(10),
        seed: args.get(1).copied().unwrap_or(1),
        faults: 0.01,
        ..FeedConfig::default()
    };
    let feed = generate_feed_with_truth(&cfg);
    let oracle = OracleConfig::default();
    let one = replay(
        &feed.records,
        &oracle,
        ReplayOptions {
            threads: 1,
            speed: None,
        },
    );
    let two = replay(
        &feed.records,
        &oracle,
        ReplayOptions {
            threads: 2,
            speed: None,
        },
    );
    println!("records {} faults {:?}", feed.records.len(), feed.faults);
    println!(
        "books {}",
        serde_json::to_string(&one.books).unwrap_or_default()
    );
    println!(
        "status {:?} ticks {} parse_errors {}",
        one.status_counts, one.ticks, one.parse_errors
    );
    for p in one
        .prices
        .iter()
        .filter(|p| p.status != walras_oracle::PriceStatus::Ok)
    {
        println!(
            "not ok at the end: {} {:?} excluded {:?}",
            p.asset,
            p.status,
            p.venues_excluded.iter().take(3).collect::<Vec<_>>()
        );
    }
    println!(
        "digest 1 thread {} 2 threads {} equal {}",
        one.digest,
        two.digest,
        one.digest == two.digest
    );
}
