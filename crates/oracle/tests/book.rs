//! Books and their integrity rules. A property test drives random update sequences through the
//! book builder and compares it, level by level, with a naive reference book (a sorted Vec with
//! linear search); hand-built sequences show that each venue's rule fails when it is broken (a
//! gap, a bad checksum, a missing truncation, a stale snapshot) and that the resync path
//! recovers on the next good snapshot.

use proptest::prelude::*;
use walras_oracle::Dec;
use walras_oracle::Record;
use walras_oracle::{
    kraken_checksum, Book, BookAction, Health, HealthLimits, KrakenSpec, ResyncReason,
};
use walras_oracle::{BookKind, BookMessage, Level, Protocol, Sequencing};
use walras_oracle::{OracleConfig, Partition, Routed, Router};

fn d(n: i64) -> Dec {
    Dec::from_scaled(n, 2).unwrap()
}
fn lv(p: i64, q: i64) -> Level {
    Level {
        price: d(p),
        qty: d(q),
    }
}
fn msg(kind: BookKind, bids: Vec<Level>, asks: Vec<Level>, sequencing: Sequencing) -> BookMessage {
    BookMessage {
        symbol: "X".into(),
        kind,
        bids,
        asks,
        sequencing,
        okx_checksum: None,
    }
}
fn binance_diff(first: u64, last: u64, bids: Vec<Level>) -> BookMessage {
    msg(
        BookKind::Delta,
        bids,
        vec![],
        Sequencing::BinanceDiff {
            first_update_id: first,
            final_update_id: last,
        },
    )
}
fn binance_snapshot(id: u64) -> BookMessage {
    msg(
        BookKind::Snapshot,
        vec![lv(100, 1)],
        vec![lv(101, 1)],
        Sequencing::BinanceSnapshot { last_update_id: id },
    )
}

/// The reference: a side as a Vec of (price, qty), kept sorted best first by linear insertion.
fn naive_apply(side: &mut Vec<(Dec, Dec)>, levels: &[Level], descending: bool) {
    for l in levels {
        if let Some(i) = side.iter().position(|x| x.0 == l.price) {
            side.remove(i);
        }
        if !l.qty.is_zero() {
            let at = side
                .iter()
                .position(|x| {
                    if descending {
                        x.0 < l.price
                    } else {
                        x.0 > l.price
                    }
                })
                .unwrap_or(side.len());
            side.insert(at, (l.price, l.qty));
        }
    }
}

fn levels() -> impl Strategy<Value = Vec<Level>> {
    prop::collection::vec((1i64..60, 0i64..4), 0..6)
        .prop_map(|v| v.into_iter().map(|(p, q)| lv(p, q)).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn random_update_sequences_equal_a_naive_reference_book(
        snapshot in (levels(), levels()),
        updates in prop::collection::vec((levels(), levels()), 0..60),
    ) {
        let snap_bids: Vec<Level> = snapshot.0.into_iter().filter(|l| !l.qty.is_zero()).collect();
        let snap_asks: Vec<Level> = snapshot.1.into_iter().filter(|l| !l.qty.is_zero()).collect();
        let mut book = Book::new(Protocol::Binance, None);
        let mut reference_bids = Vec::new();
        let mut reference_asks = Vec::new();
        naive_apply(&mut reference_bids, &snap_bids, true);
        naive_apply(&mut reference_asks, &snap_asks, false);
        prop_assert_eq!(book.apply(&msg(BookKind::Snapshot, snap_bids, snap_asks, Sequencing::BinanceSnapshot { last_update_id: 10 }), 1), BookAction::None);
        let mut id = 10;
        for (bids, asks) in updates {
            naive_apply(&mut reference_bids, &bids, true);
            naive_apply(&mut reference_asks, &asks, false);
            let m = msg(BookKind::Delta, bids, asks, Sequencing::BinanceDiff { first_update_id: id + 1, final_update_id: id + 2 });
            id += 2;
            prop_assert_eq!(book.apply(&m, 2), BookAction::None);
            prop_assert_eq!(book.bids().collect::<Vec<_>>(), reference_bids.clone());
            prop_assert_eq!(book.asks().collect::<Vec<_>>(), reference_asks.clone());
        }
    }
}

#[test]
fn binance_chaining_fails_on_a_gap_and_the_next_snapshot_recovers() {
    let mut book = Book::new(Protocol::Binance, None);
    assert_eq!(
        book.apply(&binance_diff(5, 12, vec![lv(99, 2)]), 0),
        BookAction::None,
        "buffered before the snapshot"
    );
    assert_eq!(book.apply(&binance_snapshot(10), 0), BookAction::None);
    assert!(book.is_synced(), "diff 5..12 bridges snapshot 10");
    assert_eq!(book.bids().next(), Some((d(100), d(1))));
    assert_eq!(
        book.apply(&binance_diff(13, 14, vec![]), 0),
        BookAction::None
    );
    let action = book.apply(&binance_diff(16, 17, vec![]), 0);
    assert_eq!(
        action,
        BookAction::Resync(ResyncReason::Gap {
            expected: 15,
            got: 16
        })
    );
    assert!(
        !book.is_synced() && book.bids().next().is_none(),
        "a gapped book is cleared"
    );
    assert!(matches!(
        book.health(0, &HealthLimits::default()),
        Health::Resyncing(_)
    ));
    assert_eq!(
        book.apply(&binance_diff(18, 19, vec![lv(98, 3)]), 0),
        BookAction::None
    );
    assert_eq!(book.apply(&binance_snapshot(17), 0), BookAction::None);
    assert!(
        book.is_synced(),
        "the buffered 18..19 chains onto snapshot 17"
    );
    assert_eq!(
        book.bids().collect::<Vec<_>>(),
        vec![(d(100), d(1)), (d(98), d(3))]
    );
}

#[test]
fn binance_rejects_a_snapshot_older_than_the_first_buffered_diff() {
    let mut book = Book::new(Protocol::Binance, None);
    book.apply(&binance_diff(20, 25, vec![]), 0);
    let action = book.apply(&binance_snapshot(10), 0);
    assert!(
        matches!(
            action,
            BookAction::Resync(ResyncReason::SnapshotTooOld { .. })
        ),
        "{action:?}"
    );
    assert!(!book.is_synced());
    assert_eq!(book.apply(&binance_snapshot(22), 0), BookAction::None);
    assert!(book.is_synced());
}

fn record(venue: &str, payload: &str) -> Record {
    Record {
        recv_ns: 1,
        venue: venue.into(),
        conn: 0,
        kind: walras_oracle::RecordKind::Ws,
        path: None,
        payload: payload.into(),
    }
}

fn coinbase(seq: u64, kind: &str, price: &str) -> String {
    format!(
        r#"{{"channel":"l2_data","sequence_num":{seq},"events":[{{"type":"{kind}","product_id":"BTC-USD","updates":[{{"side":"bid","price_level":"{price}","new_quantity":"1"}},{{"side":"offer","price_level":"30000","new_quantity":"1"}}]}}]}}"#
    )
}

#[test]
fn coinbase_connection_sequence_gap_resyncs_every_book_on_the_connection() {
    let mut router = Router::new(10);
    let mut part = Partition::new(OracleConfig::default());
    let key = walras_oracle::InstrumentKey {
        venue: "coinbase".into(),
        symbol: "BTC-USD".into(),
    };
    for (seq, kind, price) in [
        (0, "snapshot", "29999"),
        (1, "update", "29998"),
        (1, "update", "29998"),
    ] {
        for item in router
            .route(&record("coinbase", &coinbase(seq, kind, price)))
            .unwrap()
        {
            part.apply(&item, 1);
        }
    }
    assert!(
        part.book(&key).unwrap().is_synced(),
        "a repeated sequence number is a duplicate, not a gap"
    );
    let items = router
        .route(&record("coinbase", &coinbase(3, "update", "29997")))
        .unwrap();
    assert!(
        matches!(
            &items[0],
            Routed::Resync {
                reason: ResyncReason::ConnectionGap {
                    expected: 2,
                    got: 3
                },
                ..
            }
        ),
        "{items:?}"
    );
    for item in &items {
        part.apply(item, 1);
    }
    assert!(!part.book(&key).unwrap().is_synced());
    for item in router
        .route(&record("coinbase", &coinbase(4, "snapshot", "29990")))
        .unwrap()
    {
        part.apply(&item, 1);
    }
    assert!(
        part.book(&key).unwrap().is_synced(),
        "a new snapshot recovers"
    );
}

fn kraken_msg(kind: BookKind, bids: Vec<Level>, asks: Vec<Level>, checksum: u32) -> BookMessage {
    msg(kind, bids, asks, Sequencing::KrakenChecksum { checksum })
}

fn checksum_of(bids: &[(i64, i64)], asks: &[(i64, i64)]) -> u32 {
    kraken_checksum(
        bids.iter().map(|(p, q)| (d(*p), d(*q))),
        asks.iter().map(|(p, q)| (d(*p), d(*q))),
        2,
        2,
    )
}

/// (price in cents, qty in cents), best first.
type Levels = Vec<(i64, i64)>;

const SPEC: KrakenSpec = KrakenSpec {
    depth: 10,
    price_decimals: 2,
    qty_decimals: 2,
};

/// A depth-10 Kraken book with bids 100..91 and asks 101..110.
fn kraken_book() -> (Book, Levels, Levels) {
    let bids: Vec<(i64, i64)> = (0..10).map(|i| (10_000 - 100 * i, 100)).collect();
    let asks: Vec<(i64, i64)> = (0..10).map(|i| (10_100 + 100 * i, 100)).collect();
    let mut book = Book::new(Protocol::Kraken, Some(SPEC));
    let snap = kraken_msg(
        BookKind::Snapshot,
        bids.iter().map(|(p, q)| lv(*p, *q)).collect(),
        asks.iter().map(|(p, q)| lv(*p, *q)).collect(),
        checksum_of(&bids, &asks),
    );
    assert_eq!(book.apply(&snap, 0), BookAction::None);
    (book, bids, asks)
}

#[test]
fn kraken_rejects_a_bad_checksum_and_recovers_on_resubscribe() {
    let (mut book, bids, asks) = kraken_book();
    assert!(book.is_synced());
    let good = checksum_of(&bids, &asks);
    let action = book.apply(&kraken_msg(BookKind::Delta, vec![], vec![], good ^ 1), 0);
    assert!(matches!(
        action,
        BookAction::Resync(ResyncReason::ChecksumMismatch { .. })
    ));
    assert!(!book.is_synced() && book.asks().next().is_none());
    let snap = kraken_msg(
        BookKind::Snapshot,
        bids.iter().map(|(p, q)| lv(*p, *q)).collect(),
        asks.iter().map(|(p, q)| lv(*p, *q)).collect(),
        good,
    );
    assert_eq!(book.apply(&snap, 0), BookAction::None);
    assert!(book.is_synced());
}

/// Kraken sends no deletion for a level pushed out of the subscribed depth. A client that does not
/// truncate keeps it; when the venue later deletes it unseen and a top level goes, the venue sends
/// the new 10th level, and the untruncated book's top 10 (holding the stale level) fails the checksum.
fn truncation_scenario(skip_truncation: bool) -> BookAction {
    let (mut book, mut bids, asks) = kraken_book();
    book.skip_truncation = skip_truncation;
    // A better bid at 100.50 pushes 91.00 out of the top 10 (venue view: 100.50, 100..92).
    bids.insert(0, (10_050, 100));
    bids.pop();
    let a = book.apply(
        &kraken_msg(
            BookKind::Delta,
            vec![lv(10_050, 100)],
            vec![],
            checksum_of(&bids, &asks),
        ),
        0,
    );
    assert_eq!(a, BookAction::None);
    // Bid 100.50 is deleted: the venue sends it with qty 0 and, as 91.00 was meanwhile deleted on the
    // venue (outside the window, so unseen), sends 90.00 as the new 10th level.
    bids.remove(0);
    bids.push((9_000, 100));
    book.apply(
        &kraken_msg(
            BookKind::Delta,
            vec![lv(10_050, 0), lv(9_000, 100)],
            vec![],
            checksum_of(&bids, &asks),
        ),
        0,
    )
}

#[test]
fn kraken_checksum_catches_a_book_that_misses_truncation() {
    assert_eq!(
        truncation_scenario(false),
        BookAction::None,
        "the truncating book stays synced"
    );
    assert!(matches!(
        truncation_scenario(true),
        BookAction::Resync(ResyncReason::ChecksumMismatch { .. })
    ));
}

fn okx(prev: i64, seq: i64, kind: BookKind) -> BookMessage {
    msg(
        kind,
        vec![lv(100, 1)],
        vec![lv(101, 1)],
        Sequencing::OkxSeq {
            prev_seq_id: prev,
            seq_id: seq,
        },
    )
}

#[test]
fn okx_prev_seq_id_chaining_fails_on_a_gap_and_ignores_repeats() {
    let mut book = Book::new(Protocol::Okx, None);
    assert_eq!(
        book.apply(&okx(-1, 10, BookKind::Snapshot), 0),
        BookAction::None
    );
    assert_eq!(
        book.apply(&okx(10, 12, BookKind::Delta), 0),
        BookAction::None
    );
    assert_eq!(
        book.apply(&okx(12, 12, BookKind::Delta), 0),
        BookAction::None,
        "no-change heartbeat"
    );
    assert_eq!(
        book.apply(&okx(10, 12, BookKind::Delta), 0),
        BookAction::None,
        "a repeat is ignored"
    );
    assert!(book.is_synced());
    assert_eq!(
        book.apply(&okx(13, 15, BookKind::Delta), 0),
        BookAction::Resync(ResyncReason::Gap {
            expected: 12,
            got: 13
        })
    );
    assert!(!book.is_synced());
    assert_eq!(
        book.apply(&okx(15, 16, BookKind::Delta), 0),
        BookAction::None,
        "updates wait for a snapshot"
    );
    assert!(!book.is_synced());
    book.apply(&okx(-1, 20, BookKind::Snapshot), 0);
    assert!(book.is_synced());
}

#[test]
fn bitstamp_snapshots_replace_the_book_and_an_older_one_is_ignored() {
    let mut book = Book::new(Protocol::Bitstamp, None);
    let snap = |micros, bid| {
        msg(
            BookKind::Snapshot,
            vec![lv(bid, 1)],
            vec![lv(200, 1)],
            Sequencing::BitstampTime { micros },
        )
    };
    book.apply(&snap(10, 100), 0);
    book.apply(&snap(20, 150), 0);
    assert_eq!(
        book.bids().collect::<Vec<_>>(),
        vec![(d(150), d(1))],
        "replaced whole, not merged"
    );
    book.apply(&snap(15, 120), 0);
    assert_eq!(
        book.bids().collect::<Vec<_>>(),
        vec![(d(150), d(1))],
        "an older snapshot does not go back in time"
    );
}

#[test]
fn health_reports_crossed_stale_and_thin_books() {
    let limits = HealthLimits {
        stale_after_ns: 1_000,
        levels_per_side_min: 2,
    };
    let mut book = Book::new(Protocol::Coinbase, None);
    assert!(matches!(
        book.health(0, &limits),
        Health::Resyncing(ResyncReason::AwaitingSnapshot)
    ));
    book.apply(
        &msg(
            BookKind::Snapshot,
            vec![lv(100, 1), lv(99, 1)],
            vec![lv(101, 1), lv(102, 1)],
            Sequencing::Connection,
        ),
        0,
    );
    assert_eq!(book.health(500, &limits), Health::Synced);
    assert_eq!(book.health(5_000, &limits), Health::Stale);
    book.apply(
        &msg(
            BookKind::Delta,
            vec![],
            vec![lv(102, 0)],
            Sequencing::Connection,
        ),
        5_000,
    );
    assert_eq!(book.health(5_000, &limits), Health::Thin);
    book.apply(
        &msg(
            BookKind::Delta,
            vec![lv(101, 1)],
            vec![],
            Sequencing::Connection,
        ),
        5_000,
    );
    assert_eq!(book.health(5_000, &limits), Health::Crossed);
}

#[test]
fn okx_checksum_is_verified_over_the_texts_as_sent() {
    use walras_oracle::okx_checksum_text;
    use walras_oracle::OkxChecksum;
    let texts = (
        vec![("1.00".to_string(), "1".to_string())],
        vec![("1.01".to_string(), "1".to_string())],
    );
    let good = crc32fast::hash(okx_checksum_text(&texts.0, &texts.1).as_bytes()) as i32;
    let make = |checksum: i32| {
        let mut m = okx(-1, 10, BookKind::Snapshot);
        m.okx_checksum = Some(OkxChecksum {
            checksum,
            bids: texts.0.clone(),
            asks: texts.1.clone(),
        });
        m
    };
    let mut book = Book::new(Protocol::Okx, None);
    assert_eq!(book.apply(&make(good), 0), BookAction::None);
    assert!(book.is_synced());
    let action = book.apply(&make(good ^ 1), 0);
    assert!(
        matches!(
            action,
            BookAction::Resync(ResyncReason::ChecksumMismatch { .. })
        ),
        "{action:?}"
    );
    assert!(!book.is_synced());
}
