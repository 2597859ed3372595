//! Measures (1) µs per depth-VWAP valuation, naive (the paper's definition) against the closed
//! form, at market depths 1, 5, 10, 100, 1000 levels per side; (2) fixed-work replay throughput:
//! the same generated feed (venues × assets, `levels` deep) replayed at 1 and 2 worker threads,
//! events/s and speed-up, per depth, with the naive method (the paper's workload).
//!
//! `cargo run --release -p walras-oracle --example oracle_bench -- [venues] [assets] [seconds]`

use std::time::Instant;
use walras_oracle::{default_assets, default_venues, generate_feed, FeedConfig};
use walras_oracle::{depth_vwap, depth_vwap_naive, Method};
use walras_oracle::{replay, OracleConfig, ReplayOptions};

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let venues = args.first().copied().unwrap_or(12);
    let assets = args.get(1).copied().unwrap_or(40);
    let seconds = args.get(2).copied().unwrap_or(2) as u64;
    println!("## µs per valuation (depth VWAP over the whole book, steps = levels)");
    println!("| depth (levels/side) | naive µs | closed form µs | ratio |");
    println!("|---|---|---|---|");
    for levels in [1usize, 5, 10, 100, 1000] {
        let bids: Vec<(f64, f64)> = (0..levels)
            .map(|i| (100.0 - 0.01 * i as f64, 1.0 + (i % 7) as f64))
            .collect();
        let asks: Vec<(f64, f64)> = (0..levels)
            .map(|i| (100.01 + 0.01 * i as f64, 1.0 + (i % 5) as f64))
            .collect();
        let depth = bids
            .iter()
            .map(|l| l.1)
            .sum::<f64>()
            .min(asks.iter().map(|l| l.1).sum::<f64>());
        let step = depth / levels as f64;
        let time = |f: &dyn Fn() -> f64| {
            let reps = (2_000_000 / (levels * levels).max(1)).clamp(20, 200_000);
            let start = Instant::now();
            let mut acc = 0.0;
            for _ in 0..reps {
                acc += f();
            }
            assert!(acc.is_finite());
            start.elapsed().as_secs_f64() * 1e6 / reps as f64
        };
        let naive = time(&|| {
            depth_vwap_naive(std::hint::black_box(&bids), &asks, depth, step).unwrap_or(0.0)
        });
        let closed =
            time(&|| depth_vwap(std::hint::black_box(&bids), &asks, depth, step).unwrap_or(0.0));
        println!(
            "| {levels} | {naive:.3} | {closed:.3} | {:.1} |",
            naive / closed
        );
    }
    println!();
    println!("## fixed-work replay: {venues} venues × {assets} assets, {seconds} s of feed at 10 updates/s per instrument, naive depth VWAP");
    println!("| depth | events | 1 thread events/s | 2 threads events/s | speed-up | digests equal | p99 event→aggregate µs (2 threads) |");
    println!("|---|---|---|---|---|---|---|");
    for levels in [1usize, 5, 10, 100, 1000] {
        let feed = generate_feed(&FeedConfig {
            venues: default_venues(venues),
            assets: default_assets(assets),
            seconds,
            seed: 42,
            faults: 0.0,
            updates_per_second: 10,
            levels,
            trades_per_second: 0.0,
            usd_prices: Vec::new(),
        });
        let cfg = OracleConfig {
            method: Method::DepthVwapLevels {
                levels,
                steps: levels as u64,
                naive: true,
            },
            queue_capacity: 1 << 16,
            ..OracleConfig::default()
        };
        let one = replay(
            &feed,
            &cfg,
            ReplayOptions {
                threads: 1,
                speed: None,
            },
        );
        let two = replay(
            &feed,
            &cfg,
            ReplayOptions {
                threads: 2,
                speed: None,
            },
        );
        println!(
            "| {levels} | {} | {:.0} | {:.0} | {:.2} | {} | {} |",
            one.events,
            one.events_per_s,
            two.events_per_s,
            two.events_per_s / one.events_per_s,
            one.digest == two.digest,
            two.latency.event_to_aggregate_us.p99
        );
    }
    println!();
    println!("## paced replay, depth 10, closed form, 2 threads: p99 event→aggregate latency by offered rate");
    println!(
        "| speed × recorded | offered events/s | p50 µs | p99 µs | p999 µs | under 1 ms at p99 |"
    );
    println!("|---|---|---|---|---|---|");
    let feed = generate_feed(&FeedConfig {
        venues: default_venues(venues),
        assets: default_assets(assets),
        seconds,
        seed: 7,
        faults: 0.0,
        updates_per_second: 10,
        levels: 10,
        trades_per_second: 0.0,
        usd_prices: Vec::new(),
    });
    let cfg = OracleConfig {
        method: Method::DepthVwapLevels {
            levels: 10,
            steps: 10,
            naive: false,
        },
        ..OracleConfig::default()
    };
    let span_s = feed
        .last()
        .map_or(1.0, |r| r.recv_ns as f64 / 1e9)
        .max(1e-3);
    for speed in [1.0, 2.0, 5.0, 10.0, 20.0, 50.0] {
        let r = replay(
            &feed,
            &cfg,
            ReplayOptions {
                threads: 2,
                speed: Some(speed),
            },
        );
        let l = &r.latency.event_to_aggregate_us;
        println!(
            "| {speed} | {:.0} | {} | {} | {} | {} |",
            r.events as f64 / span_s * speed,
            l.p50,
            l.p99,
            l.p999,
            l.p99 < 1_000
        );
    }
}
