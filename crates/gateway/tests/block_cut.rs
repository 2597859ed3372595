//! The property the exchange needs from the gateway (issue 13): with the cut in delivery-clock
//! time, a trade that answered block N within the window W lands in block N+1 whatever its
//! latency, and one that took W or longer does not. A small event loop drives the real release
//! buffers and the ordering buffer in cut mode (`seal(N, W)`) over random downlink and uplink
//! latencies with spikes up to 1000× and random response times in [0, 2W), and checks every trade.
//! Case count: `PROPTEST_CASES` (default 256).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use proptest::prelude::*;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use walras_gateway::{
    MarketPoint, OrderingBuffer, OrderingConfig, ReleaseAction, ReleaseBuffer, ReleaseConfig,
    SealOutcome, UplinkMessage,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Publish(u64),
    Arrive(u32, u64),
    Wake(u32),
    Answer(u32, u64),
    Uplink(u32),
}

#[derive(Debug)]
struct Case {
    participants: u32,
    blocks: u64,
    window_ns: u64,
    block_interval_ns: u64,
    seed: u64,
    spike_factor_max: u64,
}

/// Latency: base in [100, 2000) ns, one send in 50 spikes by up to `spike_factor_max`.
fn latency_ns(rng: &mut ChaCha8Rng, spike_factor_max: u64) -> u64 {
    let base = 100 + rng.next_u64() % 1_900;
    if rng.next_u64() % 50 < 1 {
        base * (1 + rng.next_u64() % spike_factor_max)
    } else {
        base
    }
}

/// Runs the case; returns, per trade, (block answered, response time, block it landed in).
fn run_case(c: &Case) -> Vec<(u64, u64, u64)> {
    let mut rng = ChaCha8Rng::seed_from_u64(c.seed);
    let n = c.participants as usize;
    let tau_ns = (c.window_ns / 4).max(1);
    let mut rbs: Vec<ReleaseBuffer> = (0..c.participants)
        .map(|p| ReleaseBuffer::new(p, ReleaseConfig::new(c.window_ns, tau_ns), 0).unwrap())
        .collect();
    let mut ob = OrderingBuffer::new(OrderingConfig::default(), 0..c.participants, 0).unwrap();
    let mut heap = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |heap: &mut BinaryHeap<_>, t: u64, e: Ev| {
        seq += 1;
        heap.push(Reverse((t, seq, e)));
    };
    let (mut down_last, mut up_last) = (vec![0u64; n], vec![0u64; n]);
    let mut wake = vec![u64::MAX; n];
    let mut uplink: Vec<VecDeque<UplinkMessage>> = vec![VecDeque::new(); n];
    let mut answers: BTreeMap<u64, (u64, u64)> = BTreeMap::new(); // trade id -> (block, rt)
    let mut landed: BTreeMap<u64, u64> = BTreeMap::new(); // trade id -> block
    push(&mut heap, 0, Ev::Publish(1));
    for p in 0..c.participants {
        push(&mut heap, 0, Ev::Wake(p));
        wake[p as usize] = 0;
    }
    let mut next_seal = 1u64;
    while next_seal <= c.blocks {
        let Some(Reverse((now, _, ev))) = heap.pop() else {
            panic!("stalled")
        };
        let mut actions: Option<(u32, Vec<ReleaseAction>)> = None;
        match ev {
            Ev::Publish(b) => {
                for p in 0..c.participants {
                    let a =
                        down_last[p as usize].max(now + latency_ns(&mut rng, c.spike_factor_max));
                    down_last[p as usize] = a;
                    push(&mut heap, a, Ev::Arrive(p, b));
                }
                if b < c.blocks {
                    push(&mut heap, now + c.block_interval_ns, Ev::Publish(b + 1));
                }
            }
            Ev::Arrive(p, b) => {
                let mp = MarketPoint {
                    id: b,
                    batch: b,
                    last_in_batch: true,
                    retransmission: false,
                };
                actions = Some((p, rbs[p as usize].on_point(now, mp).unwrap()));
            }
            Ev::Wake(p) if wake[p as usize] == now => {
                actions = Some((p, rbs[p as usize].on_tick(now).unwrap()))
            }
            Ev::Wake(_) => {}
            Ev::Answer(p, b) => {
                let id = b * 1_000 + u64::from(p);
                actions = Some((p, rbs[p as usize].on_trade(now, id).unwrap()));
            }
            Ev::Uplink(p) => {
                let msg = uplink[p as usize].pop_front().unwrap();
                ob.on_message_for_cut(now, &msg).unwrap();
            }
        }
        if let Some((p, actions)) = actions {
            for action in actions {
                match action {
                    ReleaseAction::DeliverBatch { at_ns, points, .. } => {
                        for b in points {
                            let rt = rng.next_u64() % (2 * c.window_ns);
                            answers.insert(b * 1_000 + u64::from(p), (b, rt));
                            push(&mut heap, at_ns + rt, Ev::Answer(p, b));
                        }
                    }
                    ReleaseAction::Send(msg) => {
                        let a = up_last[p as usize]
                            .max(msg.sent_ns + latency_ns(&mut rng, c.spike_factor_max));
                        up_last[p as usize] = a;
                        uplink[p as usize].push_back(msg);
                        push(&mut heap, a, Ev::Uplink(p));
                    }
                    ReleaseAction::DeliverRetransmission { .. } => {}
                }
            }
            let w = rbs[p as usize].next_wakeup_ns().max(now);
            if w != wake[p as usize] {
                wake[p as usize] = w;
                push(&mut heap, w, Ev::Wake(p));
            }
        }
        while next_seal <= c.blocks {
            match ob.seal(now, next_seal, c.window_ns, usize::MAX).unwrap() {
                SealOutcome::Pending => break,
                SealOutcome::Sealed { trades, spilled } => {
                    assert_eq!(spilled, 0);
                    for t in trades {
                        assert!(!t.late);
                        landed.insert(t.trade_id, next_seal + 1);
                    }
                    next_seal += 1;
                }
            }
        }
    }
    answers
        .iter()
        .filter(|(_, &(b, _))| b <= c.blocks)
        .map(|(id, &(b, rt))| (b, rt, landed.get(id).copied().unwrap_or(u64::MAX)))
        .collect()
}

fn case() -> impl Strategy<Value = Case> {
    (
        2u32..=6,
        2u64..=6,
        500u64..=5_000,
        0u64..=3,
        any::<u64>(),
        1u64..=1_000,
    )
        .prop_map(
            |(participants, blocks, window_ns, interval_extra, seed, spike_factor_max)| Case {
                participants,
                blocks,
                window_ns,
                // Sometimes faster than W (pacing then spaces the deliveries), sometimes slower.
                block_interval_ns: window_ns / 2 + interval_extra * window_ns,
                seed,
                spike_factor_max,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(256),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_trade_answering_block_n_within_w_lands_in_block_n_plus_1_and_a_slower_one_does_not(c in case()) {
        let trades = run_case(&c);
        prop_assert!(!trades.is_empty());
        for (block, rt, landed) in trades {
            if rt < c.window_ns {
                prop_assert_eq!(landed, block + 1, "answered block {} in {} ns < W = {}", block, rt, c.window_ns);
            } else {
                prop_assert!(landed > block + 1, "answered block {} in {} ns ≥ W = {} but landed in {}", block, rt, c.window_ns, landed);
            }
        }
    }
}
