//! Replays of generated feeds with injected faults. Checks the property that matters most to a
//! feed handler's users: whenever a book's integrity rule says it is synced, the book equals the
//! venue's own book (the generator's truth), so a corrupted book is never served as good; that
//! every injected fault kind is detected and every book recovers or is reported; and that the
//! pipeline's output digest is identical for 1 and 2 worker threads.

use std::collections::BTreeMap;
use walras_oracle::{
    default_assets, default_venues, generate_feed_with_truth, FeedConfig, TruthPoint,
};
use walras_oracle::{replay, InstrumentKey, OracleConfig, Partition, ReplayOptions, Router};

fn faulty_feed(seed: u64) -> FeedConfig {
    FeedConfig {
        venues: default_venues(5),
        assets: default_assets(6),
        seconds: 20,
        seed,
        faults: 0.01,
        ..FeedConfig::default()
    }
}

struct Audit {
    compared: u64,
    mismatches: Vec<String>,
    resyncs: BTreeMap<String, u64>,
}

fn audit(cfg: &FeedConfig) -> Audit {
    let feed = generate_feed_with_truth(cfg);
    let mut router = Router::new(walras_oracle::KRAKEN_DEPTH);
    let mut part = Partition::new(OracleConfig::default());
    let mut latest: BTreeMap<InstrumentKey, TruthPoint> = BTreeMap::new();
    let mut audit = Audit {
        compared: 0,
        mismatches: Vec::new(),
        resyncs: BTreeMap::new(),
    };
    for (record, truth) in feed.records.iter().zip(&feed.truth) {
        let items = router.route(record).expect("generated records parse");
        for item in &items {
            part.apply(item, record.recv_ns);
        }
        let Some(tp) = truth else { continue };
        let key = InstrumentKey {
            venue: tp.venue.clone(),
            symbol: tp.symbol.clone(),
        };
        if latest.get(&key).is_none_or(|t| t.version < tp.version) {
            latest.insert(key.clone(), tp.clone());
        }
        let book = part.book(&key).expect("book exists after its message");
        if book.is_synced() {
            audit.compared += 1;
            let want = &latest[&key];
            let bids: Vec<_> = book.bids().take(want.bids.len()).collect();
            let asks: Vec<_> = book.asks().take(want.asks.len()).collect();
            if bids != want.bids || asks != want.asks {
                audit.mismatches.push(format!(
                    "{key} at {} (truth v{})",
                    record.recv_ns, want.version
                ));
            }
        }
    }
    audit.resyncs = part.resyncs.clone();
    audit
}

#[test]
fn a_synced_book_always_equals_the_venues_book_under_one_percent_faults() {
    for seed in [1, 2, 3] {
        let a = audit(&faulty_feed(seed));
        assert!(
            a.compared > 1000,
            "seed {seed}: only {} comparisons",
            a.compared
        );
        assert!(
            a.mismatches.is_empty(),
            "seed {seed}: synced books differ from the venue: {:?}",
            &a.mismatches[..a.mismatches.len().min(10)]
        );
    }
}

#[test]
fn every_injected_fault_kind_is_detected_by_some_venue_rule() {
    let mut cfg = faulty_feed(7);
    cfg.faults = 0.03;
    let feed = generate_feed_with_truth(&cfg);
    let a = audit(&cfg);
    eprintln!("faults {:?} resyncs {:?}", feed.faults, a.resyncs);
    assert!(
        feed.faults.gaps > 0
            && feed.faults.reorders > 0
            && feed.faults.bad_checksums > 0
            && feed.faults.disconnects > 0
    );
    for reason in ["gap", "checksum_mismatch", "disconnected", "connection_gap"] {
        assert!(
            a.resyncs.get(reason).copied().unwrap_or(0) > 0,
            "no {reason} resync: {:?}",
            a.resyncs
        );
    }
}

#[test]
fn replay_with_one_percent_faults_uses_no_unhealthy_book_and_every_book_recovers() {
    let feed = generate_feed_with_truth(&faulty_feed(11));
    let report = replay(
        &feed.records,
        &OracleConfig::default(),
        ReplayOptions {
            threads: 2,
            speed: None,
        },
    );
    assert_eq!(report.parse_errors, 0, "{:?}", report.errors);
    assert_eq!(report.books.unhealthy_books_used, 0);
    assert!(
        report.books.resyncs.values().sum::<u64>() > 0,
        "faults were injected but none detected"
    );
    assert!(
        report.books.unrecovered.is_empty(),
        "unrecovered books: {:?}",
        report.books.unrecovered
    );
    assert!(
        report.prices.iter().all(|p| p.price.is_some()),
        "an asset has no price at the end"
    );
}

#[test]
fn replay_output_is_identical_for_one_and_two_threads() {
    let feed = generate_feed_with_truth(&faulty_feed(5));
    let cfg = OracleConfig::default();
    let one = replay(
        &feed.records,
        &cfg,
        ReplayOptions {
            threads: 1,
            speed: None,
        },
    );
    let two = replay(
        &feed.records,
        &cfg,
        ReplayOptions {
            threads: 2,
            speed: None,
        },
    );
    let three = replay(
        &feed.records,
        &cfg,
        ReplayOptions {
            threads: 3,
            speed: None,
        },
    );
    assert!(one.ticks > 100);
    assert_eq!(one.digest, two.digest);
    assert_eq!(one.digest, three.digest);
    assert_eq!(
        serde_json::to_string(&one.prices).unwrap(),
        serde_json::to_string(&two.prices).unwrap()
    );
}

#[test]
fn a_recorded_feed_round_trips_through_json_lines() {
    let feed = walras_oracle::generate_feed(&FeedConfig {
        seconds: 1,
        faults: 0.05,
        ..FeedConfig::default()
    });
    let mut bytes = Vec::new();
    walras_oracle::write_jsonl(&feed, &mut bytes).unwrap();
    let back = walras_oracle::read_jsonl(std::io::Cursor::new(bytes)).unwrap();
    assert_eq!(back, feed);
    assert!(walras_oracle::read_jsonl(std::io::Cursor::new(b"{not json}\n".to_vec())).is_err());
}

#[test]
fn the_same_seed_generates_the_same_feed() {
    let cfg = FeedConfig {
        seconds: 2,
        faults: 0.02,
        ..FeedConfig::default()
    };
    assert_eq!(
        walras_oracle::generate_feed(&cfg),
        walras_oracle::generate_feed(&cfg)
    );
    let other = FeedConfig {
        seed: 2,
        ..cfg.clone()
    };
    assert_ne!(
        walras_oracle::generate_feed(&cfg),
        walras_oracle::generate_feed(&other)
    );
}

#[test]
fn a_one_item_queue_blocks_the_router_but_publishes_the_same_sequence() {
    // Backpressure with conflation: a full queue blocks the router (no book message is dropped);
    // the published sequence is the same as with roomy queues, whatever was conflated.
    let feed = generate_feed_with_truth(&FeedConfig {
        seconds: 5,
        ..faulty_feed(9)
    });
    let roomy = OracleConfig::default();
    let tight = OracleConfig {
        queue_capacity: 1,
        ..OracleConfig::default()
    };
    let a = replay(
        &feed.records,
        &roomy,
        ReplayOptions {
            threads: 2,
            speed: None,
        },
    );
    let b = replay(
        &feed.records,
        &tight,
        ReplayOptions {
            threads: 2,
            speed: None,
        },
    );
    assert_eq!(a.digest, b.digest);
    assert_eq!(a.events, b.events);
    assert!(b.valuations <= b.events);
}
