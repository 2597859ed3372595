//! Checks the ordering buffer and the block cut on small, hand-built message sequences: the
//! forwarding rule (key ≤ minimum watermark of non-stragglers), straggler detection by silence and
//! by round trip and rejoining, late flagging, the typed `QueueFull`, and `seal(N, W)`: which trades
//! a block holds, when it may be sealed, the bound a silent participant puts on that wait, and the
//! spill of an over-full block in key order.

use walras_gateway::{
    DeliveryClock, GatewayError, OrderingBuffer, OrderingConfig, OrderingEvent, SealOutcome,
    UplinkKind, UplinkMessage,
};

fn msg(
    participant: u32,
    seq: u64,
    point: u64,
    elapsed_ns: u64,
    trade: Option<u64>,
) -> UplinkMessage {
    let kind = trade.map_or(UplinkKind::Heartbeat, |trade_id| UplinkKind::Trade {
        trade_id,
    });
    UplinkMessage {
        participant,
        seq,
        clock: DeliveryClock::new(point, elapsed_ns),
        sent_ns: 0,
        kind,
    }
}

fn forwarded(events: &[OrderingEvent]) -> Vec<(u64, bool)> {
    events
        .iter()
        .filter_map(|e| match e {
            OrderingEvent::Forward(f) => Some((f.trade_id, f.late)),
            _ => None,
        })
        .collect()
}

fn buffer(threshold_ns: Option<u64>, n: u32) -> OrderingBuffer {
    let config = OrderingConfig {
        straggler_threshold_ns: threshold_ns,
        ..OrderingConfig::default()
    };
    OrderingBuffer::new(config, 0..n, 0).unwrap()
}

#[test]
fn a_trade_waits_until_every_participant_has_passed_its_key() {
    let mut ob = buffer(None, 2);
    assert!(forwarded(&ob.on_message(10, &msg(0, 0, 1, 5, Some(7))).unwrap()).is_empty());
    assert!(forwarded(&ob.on_message(11, &msg(1, 0, 1, 4, None)).unwrap()).is_empty());
    assert_eq!(
        forwarded(&ob.on_message(12, &msg(1, 1, 1, 6, None)).unwrap()),
        vec![(7, false)]
    );
}

#[test]
fn a_faster_response_that_arrives_later_is_still_forwarded_first() {
    let mut ob = buffer(None, 2);
    ob.on_message(10, &msg(0, 0, 1, 9, Some(1))).unwrap();
    let events = ob.on_message(30, &msg(1, 0, 1, 3, Some(2))).unwrap();
    assert_eq!(
        forwarded(&events),
        vec![(2, false)],
        "its own watermark and participant 0's admit it"
    );
    let events = ob.on_message(31, &msg(1, 1, 2, 0, None)).unwrap();
    assert_eq!(forwarded(&events), vec![(1, false)]);
}

#[test]
fn a_silent_participant_becomes_a_straggler_and_its_late_trade_is_flagged() {
    let mut ob = buffer(Some(100), 2);
    ob.on_message(10, &msg(0, 0, 1, 50, Some(1))).unwrap();
    assert!(forwarded(&ob.on_tick(100).unwrap()).is_empty());
    let events = ob.on_tick(101).unwrap();
    assert!(events
        .iter()
        .any(|e| matches!(e, OrderingEvent::StragglerDetected { participant: 1, .. })));
    assert_eq!(forwarded(&events), vec![(1, false)]);
    // The straggler comes back with a trade below what was already forwarded, and rejoins.
    let events = ob.on_message(150, &msg(1, 0, 1, 10, Some(2))).unwrap();
    assert_eq!(forwarded(&events), vec![(2, true)]);
    assert!(events
        .iter()
        .any(|e| matches!(e, OrderingEvent::StragglerRejoined { participant: 1, .. })));
    assert!(!ob.is_straggler(1));
}

#[test]
fn a_long_round_trip_makes_a_straggler_and_a_short_one_brings_it_back() {
    let mut ob = buffer(Some(100), 2);
    ob.note_point_generated(1, 0);
    ob.note_point_generated(2, 1_000);
    ob.on_message(500, &msg(1, 0, 1, 10, None)).unwrap();
    assert!(ob.is_straggler(1));
    ob.on_message(1_050, &msg(1, 1, 2, 10, None)).unwrap();
    assert!(!ob.is_straggler(1));
}

#[test]
fn a_full_queue_is_a_typed_error_and_changes_nothing() {
    let config = OrderingConfig {
        queue_len_max: 1,
        ..OrderingConfig::default()
    };
    let mut ob = OrderingBuffer::new(config, 0..2, 0).unwrap();
    ob.on_message(1, &msg(0, 0, 1, 1, Some(1))).unwrap();
    let err = ob.on_message(2, &msg(0, 1, 1, 2, Some(2))).unwrap_err();
    assert!(matches!(err, GatewayError::QueueFull { len_max: 1, .. }));
    assert_eq!(ob.queue_len(), 1);
    assert_eq!(
        ob.watermark(0).map(|k| k.seq),
        Some(0),
        "the refused trade did not move the watermark"
    );
}

#[test]
fn out_of_order_and_unknown_messages_are_refused() {
    let mut ob = buffer(None, 1);
    ob.on_message(1, &msg(0, 5, 1, 1, None)).unwrap();
    assert!(matches!(
        ob.on_message(2, &msg(0, 5, 1, 2, None)),
        Err(GatewayError::SequenceOutOfOrder { .. })
    ));
    assert!(matches!(
        ob.on_message(2, &msg(9, 0, 1, 2, None)),
        Err(GatewayError::UnknownParticipant(9))
    ));
    assert!(matches!(
        ob.on_message(0, &msg(0, 6, 1, 2, None)),
        Err(GatewayError::TimeWentBackwards { .. })
    ));
}

const W: u64 = 1_000;

#[test]
fn block_n_plus_1_holds_exactly_the_trades_below_n_w_once_every_watermark_passed_it() {
    let mut ob = buffer(None, 2);
    ob.on_message_for_cut(10, &msg(0, 0, 5, 999, Some(1)))
        .unwrap();
    ob.on_message_for_cut(11, &msg(1, 0, 5, 1_000, Some(2)))
        .unwrap();
    let err = ob
        .on_message_for_cut(12, &msg(0, 1, 4, 9_999, Some(3)))
        .unwrap_err();
    assert_eq!(err, GatewayError::ClockWentBackwards { participant: 0 });
    ob.on_message_for_cut(12, &msg(0, 1, 5, 1_200, None))
        .unwrap();
    // Participant 1's watermark is exactly ⟨5, W⟩: passed, so the cut can seal.
    match ob.seal(20, 5, W, 100).unwrap() {
        SealOutcome::Sealed { trades, spilled } => {
            assert_eq!(
                trades.iter().map(|t| t.trade_id).collect::<Vec<_>>(),
                vec![1]
            );
            assert_eq!(spilled, 0);
        }
        SealOutcome::Pending => panic!("should seal"),
    }
    assert_eq!(
        ob.queue_len(),
        1,
        "the trade at ⟨5, W⟩ waits for the next block"
    );
}

#[test]
fn a_seal_is_pending_until_a_slow_participant_passes_the_boundary() {
    let mut ob = buffer(None, 2);
    ob.on_message_for_cut(10, &msg(0, 0, 5, 2_000, None))
        .unwrap();
    ob.on_message_for_cut(10, &msg(1, 0, 5, 300, None)).unwrap();
    assert_eq!(ob.seal(20, 5, W, 100).unwrap(), SealOutcome::Pending);
    ob.on_message_for_cut(30, &msg(1, 1, 5, 800, Some(9)))
        .unwrap();
    assert_eq!(ob.seal(31, 5, W, 100).unwrap(), SealOutcome::Pending);
    ob.on_message_for_cut(40, &msg(1, 2, 6, 0, None)).unwrap();
    assert!(
        matches!(ob.seal(41, 5, W, 100).unwrap(), SealOutcome::Sealed { ref trades, .. } if trades.len() == 1)
    );
}

#[test]
fn a_silent_participant_delays_a_seal_by_at_most_the_straggler_threshold() {
    let threshold_ns = 5_000;
    let mut ob = buffer(Some(threshold_ns), 2);
    ob.on_message_for_cut(100, &msg(0, 0, 5, 2_000, Some(1)))
        .unwrap();
    assert_eq!(
        ob.seal(threshold_ns, 5, W, 100).unwrap(),
        SealOutcome::Pending
    );
    assert!(matches!(
        ob.seal(threshold_ns + 1, 5, W, 100).unwrap(),
        SealOutcome::Sealed { .. }
    ));
}

#[test]
fn an_over_full_block_spills_in_key_order_to_the_next_cut() {
    let mut ob = buffer(None, 1);
    for (seq, elapsed) in [10u64, 20, 30, 40, 50].into_iter().enumerate() {
        ob.on_message_for_cut(1, &msg(0, seq as u64, 5, elapsed, Some(seq as u64)))
            .unwrap();
    }
    ob.on_message_for_cut(2, &msg(0, 5, 6, 10, None)).unwrap();
    let SealOutcome::Sealed { trades, spilled } = ob.seal(3, 5, W, 2).unwrap() else {
        panic!("should seal")
    };
    assert_eq!(
        (
            trades.iter().map(|t| t.trade_id).collect::<Vec<_>>(),
            spilled
        ),
        (vec![0, 1], 3)
    );
    ob.on_message_for_cut(4, &msg(0, 6, 7, 0, None)).unwrap();
    let SealOutcome::Sealed { trades, spilled } = ob.seal(5, 6, W, 10).unwrap() else {
        panic!("should seal")
    };
    assert_eq!(
        (
            trades.iter().map(|t| t.trade_id).collect::<Vec<_>>(),
            spilled
        ),
        (vec![2, 3, 4], 0)
    );
    assert!(
        trades.iter().all(|t| !t.late),
        "spilled trades were on time"
    );
}

#[test]
fn a_trade_below_a_sealed_boundary_is_flagged_late_in_the_next_block() {
    let mut ob = buffer(Some(100), 2);
    ob.on_message_for_cut(10, &msg(0, 0, 5, 2_000, None))
        .unwrap();
    let SealOutcome::Sealed { trades, .. } = ob.seal(200, 5, W, 10).unwrap() else {
        panic!("straggler cut loose")
    };
    assert!(trades.is_empty());
    ob.on_message_for_cut(210, &msg(1, 0, 5, 10, Some(4)))
        .unwrap();
    ob.on_message_for_cut(211, &msg(0, 1, 6, 2_000, None))
        .unwrap();
    ob.on_message_for_cut(211, &msg(1, 1, 7, 0, None)).unwrap();
    let SealOutcome::Sealed { trades, .. } = ob.seal(212, 6, W, 10).unwrap() else {
        panic!("should seal")
    };
    assert_eq!(
        trades
            .iter()
            .map(|t| (t.trade_id, t.late))
            .collect::<Vec<_>>(),
        vec![(4, true)]
    );
    assert!(matches!(
        ob.seal(213, 6, W, 10),
        Err(GatewayError::CutNotAdvancing { .. })
    ));
}

/// Issue 26, item 4. Trigger: one participant sends trades stamped with clock point 10^15
/// while the published height is 3; before the fix each was queued (1,050,000 copies filled the
/// shared buffer with trades that could never seal). Now a clock naming a point above the
/// published height is refused with a typed reason and changes nothing.
#[test]
fn a_trade_stamped_beyond_the_published_height_is_refused_and_changes_nothing() {
    let config = OrderingConfig {
        clock_point_slack: Some(0),
        ..OrderingConfig::default()
    };
    let mut ob = OrderingBuffer::new(config, 0..2, 0).unwrap();
    ob.note_point_generated(3, 0);
    let err = ob
        .on_message_for_cut(10, &msg(0, 0, 1_000_000_000_000_000, 0, Some(1)))
        .unwrap_err();
    assert_eq!(
        err,
        GatewayError::ClockAhead {
            participant: 0,
            point: 1_000_000_000_000_000,
            latest: 3,
            slack: 0
        }
    );
    assert_eq!(ob.queue_len(), 0);
    assert_eq!(ob.watermark(0), None, "the refused message moved nothing");
    // A heartbeat just as impossible is refused too; one at the published height is taken.
    assert!(matches!(
        ob.on_message_for_cut(11, &msg(0, 1, 4, 0, None)),
        Err(GatewayError::ClockAhead { point: 4, .. })
    ));
    ob.on_message_for_cut(12, &msg(0, 2, 3, 5, Some(2)))
        .unwrap();
    assert_eq!(ob.queue_len(), 1);
    // Once block 4 is published, point 4 is possible.
    ob.note_point_generated(4, 100);
    ob.on_message_for_cut(13, &msg(0, 3, 4, 0, None)).unwrap();
}

/// Issue 26, item 4. Trigger: one participant sends more trades than the buffer holds; before
/// the fix it took every place (limit 1,048,576) and everyone else got `QueueFull`. Now each
/// participant has a share: over it, only that participant is refused (`ShareFull`).
#[test]
fn one_participant_filling_its_share_leaves_room_for_everyone_else() {
    let config = OrderingConfig {
        queue_len_max: 8,
        participant_queue_max: 4,
        clock_point_slack: Some(0),
        ..OrderingConfig::default()
    };
    let mut ob = OrderingBuffer::new(config, 0..2, 0).unwrap();
    ob.note_point_generated(1, 0);
    for seq in 0..4 {
        ob.on_message_for_cut(seq + 1, &msg(0, seq, 1, seq, Some(seq)))
            .unwrap();
    }
    let err = ob
        .on_message_for_cut(10, &msg(0, 4, 1, 10, Some(4)))
        .unwrap_err();
    assert_eq!(
        err,
        GatewayError::ShareFull {
            participant: 0,
            share_max: 4
        }
    );
    assert_eq!(ob.queued_by(0), 4);
    for seq in 0..4 {
        ob.on_message_for_cut(20 + seq, &msg(1, seq, 1, seq, Some(100 + seq)))
            .unwrap();
    }
    assert_eq!(ob.queued_by(1), 4);
    // A seal gives the places back: participant 0 may queue again.
    ob.on_message_for_cut(30, &msg(0, 5, 2, 0, None))
        .unwrap_err();
    ob.note_point_generated(2, 25);
    ob.on_message_for_cut(31, &msg(0, 5, 2, 0, None)).unwrap();
    ob.on_message_for_cut(32, &msg(1, 4, 2, 0, None)).unwrap();
    assert!(matches!(
        ob.seal(33, 1, 1_000, 100).unwrap(),
        SealOutcome::Sealed { ref trades, .. } if trades.len() == 8
    ));
    assert_eq!(
        (ob.queued_by(0), ob.queued_by(1), ob.queue_len()),
        (0, 0, 0)
    );
    ob.on_message_for_cut(34, &msg(0, 6, 2, 1, Some(5)))
        .unwrap();
    assert_eq!(ob.queued_by(0), 1);
}
