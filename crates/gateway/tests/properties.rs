//! Property tests of the DBO invariants (issue 13 acceptance), over random inputs:
//! - simulator runs with random latency schedules (random walk, spikes up to 1000×, lost
//!   heartbeats): LRTF holds for every competing pair, each participant's trades keep their
//!   submission order (Eq. 4), the run is reproducible, and sharded ordering gives the same order;
//! - release buffers with random batch arrivals: delaying a trade never lowers its clock;
//! - ordering buffers fed random ordered streams with stragglers: forwarded keys never decrease
//!   except for trades flagged late, nothing is lost, identical inputs give identical outputs, and
//!   the sharded buffer forwards exactly what one buffer forwards;
//! - in cut mode, the sharded buffer's `seal` gives exactly one buffer's outcomes (blocks, spills,
//!   late flags, refusals), with queue limits and small blocks.
//!
//! Case count: `PROPTEST_CASES` (default 256 so `cargo test` stays fast); the acceptance runs use
//! `PROPTEST_CASES=10000` (see docs/gateway.md for the measured time).

use proptest::prelude::*;
use walras_gateway::sim::{run_traced, LatencyModel, Scheme, SimConfig, SyntheticLatency};
use walras_gateway::{
    DeliveryClock, ForwardedTrade, MarketPoint, OrderingBuffer, OrderingConfig, OrderingEvent,
    ReleaseAction, ReleaseBuffer, ReleaseConfig, SealOutcome, ShardedOrderingBuffer, UplinkKind,
    UplinkMessage,
};

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A small, hostile DBO run: 2–5 participants, 1–3 ms of data, spikes up to 1000×.
fn hostile_run() -> impl Strategy<Value = SimConfig> {
    (
        2u32..=5,
        1u64..=3,
        any::<u64>(),
        1u64..=1000,
        0u32..=20_000,
        0u32..=300_000,
        0u64..=20_000,
        1u64..=40,
    )
        .prop_map(
            |(
                participants,
                millis,
                seed,
                spike_factor_max,
                spike_per_million,
                loss,
                walk_step_ns,
                base_max_us,
            )| {
                let mut config =
                    SimConfig::new(Scheme::Dbo, participants, millis as f64 / 1_000.0, seed);
                config.heartbeat_loss_per_million = loss;
                config.latency = LatencyModel::Synthetic(SyntheticLatency {
                    base_min_us: 1,
                    base_max_us,
                    step_us: 10,
                    walk_step_ns,
                    walk_max_us: 30,
                    spike_per_million,
                    spike_factor_max,
                    spike_duration_us: 50,
                    scripted: Vec::new(),
                });
                config.record_trace = true;
                config
            },
        )
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn lrtf_holds_for_every_competing_pair_under_random_latency(config in hostile_run()) {
        let (report, _) = run_traced(&config).unwrap();
        prop_assert_eq!(report.lrtf_violations, 0);
        prop_assert_eq!(report.fairness, 1.0);
        prop_assert_eq!(report.late_trades, 0);
    }

    #[test]
    fn each_participants_trades_keep_their_submission_order(config in hostile_run()) {
        let (_, trace) = run_traced(&config).unwrap();
        for p in 0..config.participants {
            let mut mine: Vec<_> = trace.trades.iter().filter(|t| t.participant == p).collect();
            mine.sort_by_key(|t| (t.submitted_ns, t.key));
            for w in mine.windows(2) {
                if w[0].submitted_ns < w[1].submitted_ns {
                    prop_assert!(w[0].order < w[1].order, "{:?} then {:?}", w[0], w[1]);
                    prop_assert!(w[0].key < w[1].key);
                }
            }
        }
    }

    #[test]
    fn identical_simulator_inputs_give_identical_outputs(config in hostile_run()) {
        prop_assert_eq!(run_traced(&config).unwrap(), run_traced(&config).unwrap());
    }

    #[test]
    fn sharded_ordering_gives_the_same_order_as_one_buffer_in_the_simulator(config in hostile_run(), shards in 2u32..=4) {
        let single = run_traced(&config).unwrap();
        let sharded = run_traced(&SimConfig { ordering_shards: shards, ..config }).unwrap();
        prop_assert_eq!(single, sharded);
    }
}

/// Batches as (gap before arrival ns, points in batch).
fn batch_schedule() -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0u64..200, 1u64..4), 0..20)
}

/// Feed the schedule to a fresh release buffer up to `until_ns`, then submit a trade then.
fn clock_of_trade_at(
    schedule: &[(u64, u64)],
    delta_ns: u64,
    pacing: bool,
    until_ns: u64,
) -> DeliveryClock {
    let mut config = ReleaseConfig::new(delta_ns, 1_000_000_000);
    config.pacing = pacing;
    let mut rb = ReleaseBuffer::new(0, config, 0).unwrap();
    let (mut t, mut id) = (0u64, 0u64);
    for (batch, &(gap, points)) in schedule.iter().enumerate() {
        t += gap;
        if t > until_ns {
            break;
        }
        for i in 0..points {
            id += 1;
            let mp = MarketPoint {
                id,
                batch: batch as u64,
                last_in_batch: i + 1 == points,
                retransmission: false,
            };
            rb.on_point(t, mp).unwrap();
        }
    }
    let actions = rb.on_trade(until_ns, 1).unwrap();
    match actions.last() {
        Some(ReleaseAction::Send(m)) => m.clock,
        other => panic!("trade not sent: {other:?}"),
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn delaying_a_trade_never_lowers_its_key(
        schedule in batch_schedule(), delta_ns in 1u64..100, pacing in any::<bool>(),
        submit_ns in 0u64..3_000, delay_ns in 0u64..500,
    ) {
        let early = clock_of_trade_at(&schedule, delta_ns, pacing, submit_ns);
        let late = clock_of_trade_at(&schedule, delta_ns, pacing, submit_ns + delay_ns);
        prop_assert!(early <= late, "{early:?} > {late:?}");
    }
}

/// Per participant: (is trade, point bump, elapsed step, arrival gap).
type Stream = Vec<(bool, u64, u64, u64)>;

fn streams() -> impl Strategy<Value = Vec<Stream>> {
    prop::collection::vec(
        prop::collection::vec((any::<bool>(), 0u64..3, 0u64..40, 0u64..60), 0..30),
        2..6,
    )
}

/// Turn random per-participant streams into one arrival-ordered list of (arrival ns, message).
fn messages(streams: &[Stream]) -> Vec<(u64, UplinkMessage)> {
    let mut all = Vec::new();
    let mut trade_id = 0;
    for (p, stream) in streams.iter().enumerate() {
        let (mut point, mut elapsed, mut arrival) = (0u64, 0u64, 0u64);
        for (seq, &(is_trade, bump, step, gap)) in stream.iter().enumerate() {
            if bump > 0 {
                point += bump;
                elapsed = step;
            } else {
                elapsed += step;
            }
            arrival += gap;
            let kind = if is_trade {
                trade_id += 1;
                UplinkKind::Trade { trade_id }
            } else {
                UplinkKind::Heartbeat
            };
            let msg = UplinkMessage {
                participant: p as u32,
                seq: seq as u64,
                clock: DeliveryClock::new(point, elapsed),
                sent_ns: 0,
                kind,
            };
            all.push((arrival, msg));
        }
        // Finally every participant moves far ahead, so every trade must come out.
        let kind = UplinkKind::Heartbeat;
        let msg = UplinkMessage {
            participant: p as u32,
            seq: stream.len() as u64,
            clock: DeliveryClock::new(1 << 40, 0),
            sent_ns: 0,
            kind,
        };
        all.push((1 << 20, msg));
    }
    all.sort_by_key(|(t, m)| (*t, m.participant, m.seq));
    all
}

fn forwards(events: Vec<OrderingEvent>, out: &mut Vec<ForwardedTrade>) {
    out.extend(events.into_iter().filter_map(|e| match e {
        OrderingEvent::Forward(f) => Some(f),
        _ => None,
    }));
}

fn ordering_config(threshold: Option<u64>) -> OrderingConfig {
    OrderingConfig {
        straggler_threshold_ns: threshold,
        ..OrderingConfig::default()
    }
}

fn run_single(
    n: usize,
    msgs: &[(u64, UplinkMessage)],
    threshold: Option<u64>,
) -> Vec<ForwardedTrade> {
    let mut ob = OrderingBuffer::new(ordering_config(threshold), 0..n as u32, 0).unwrap();
    for k in 0..200 {
        ob.note_point_generated(k, k * 10);
    }
    let mut out = Vec::new();
    for (t, m) in msgs {
        forwards(ob.on_tick(*t).unwrap(), &mut out);
        forwards(ob.on_message(*t, m).unwrap(), &mut out);
    }
    forwards(ob.on_tick(u64::MAX / 2).unwrap(), &mut out);
    out
}

fn run_sharded(
    n: usize,
    msgs: &[(u64, UplinkMessage)],
    threshold: Option<u64>,
    shards: usize,
) -> Vec<ForwardedTrade> {
    let mut ob =
        ShardedOrderingBuffer::new(ordering_config(threshold), 0..n as u32, shards, 0).unwrap();
    for k in 0..200 {
        ob.note_point_generated(k, k * 10);
    }
    let mut out = Vec::new();
    for (t, m) in msgs {
        forwards(ob.on_tick(*t).unwrap(), &mut out);
        forwards(ob.on_message(*t, m).unwrap(), &mut out);
    }
    forwards(ob.on_tick(u64::MAX / 2).unwrap(), &mut out);
    out
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn forwarded_keys_never_decrease_except_flagged_late_ones(streams in streams(), threshold in prop::option::of(0u64..400)) {
        let msgs = messages(&streams);
        let out = run_single(streams.len(), &msgs, threshold);
        let trades = msgs.iter().filter(|(_, m)| matches!(m.kind, UplinkKind::Trade { .. })).count();
        prop_assert_eq!(out.len(), trades, "every trade is forwarded exactly once");
        let mut highest = None;
        for f in &out {
            match highest {
                Some(h) if f.late => prop_assert!(f.key < h),
                Some(h) => prop_assert!(f.key > h, "{:?} after {:?} without a late flag", f.key, h),
                None => prop_assert!(!f.late),
            }
            if !f.late {
                highest = Some(f.key);
            }
        }
        if threshold.is_none() {
            prop_assert!(out.iter().all(|f| !f.late), "without stragglers nothing is late");
        }
    }

    #[test]
    fn identical_ordering_inputs_give_identical_outputs(streams in streams(), threshold in prop::option::of(0u64..400)) {
        let msgs = messages(&streams);
        prop_assert_eq!(run_single(streams.len(), &msgs, threshold), run_single(streams.len(), &msgs, threshold));
    }

    #[test]
    fn sharded_ordering_buffers_forward_exactly_what_one_buffer_forwards(
        streams in streams(), threshold in prop::option::of(0u64..400), shards in 1usize..5,
    ) {
        let msgs = messages(&streams);
        prop_assert_eq!(run_single(streams.len(), &msgs, threshold), run_sharded(streams.len(), &msgs, threshold, shards));
    }
}

/// What one step of a cut-mode run answered (the same type for both buffers).
#[derive(Debug, PartialEq)]
enum CutStep {
    Message(Result<Vec<OrderingEvent>, walras_gateway::GatewayError>),
    Seal(Result<SealOutcome, walras_gateway::GatewayError>),
}

/// Seal attempts: after every `every`-th message, boundary ⟨next height, window⟩.
#[derive(Clone, Debug)]
struct CutPlan {
    every: usize,
    window: u64,
    block_trades_max: usize,
    queue_len_max: usize,
    threshold: Option<u64>,
}

fn cut_plan() -> impl Strategy<Value = CutPlan> {
    (
        1usize..6,
        0u64..40,
        1usize..6,
        prop_oneof![Just(1usize << 20), 1usize..12],
        prop::option::of(0u64..400),
    )
        .prop_map(
            |(every, window, block_trades_max, queue_len_max, threshold)| CutPlan {
                every,
                window,
                block_trades_max,
                queue_len_max,
                threshold,
            },
        )
}

trait CutBuffer {
    fn message(&mut self, now: u64, m: &UplinkMessage) -> CutStep;
    fn seal(&mut self, now: u64, n: u64, window: u64, max: usize) -> CutStep;
}

impl CutBuffer for OrderingBuffer {
    fn message(&mut self, now: u64, m: &UplinkMessage) -> CutStep {
        CutStep::Message(self.on_message_for_cut(now, m))
    }
    fn seal(&mut self, now: u64, n: u64, window: u64, max: usize) -> CutStep {
        CutStep::Seal(OrderingBuffer::seal(self, now, n, window, max))
    }
}

impl CutBuffer for ShardedOrderingBuffer {
    fn message(&mut self, now: u64, m: &UplinkMessage) -> CutStep {
        CutStep::Message(self.on_message_for_cut(now, m))
    }
    fn seal(&mut self, now: u64, n: u64, window: u64, max: usize) -> CutStep {
        CutStep::Seal(ShardedOrderingBuffer::seal(self, now, n, window, max))
    }
}

fn run_cut(
    buffer: &mut dyn CutBuffer,
    msgs: &[(u64, UplinkMessage)],
    plan: &CutPlan,
) -> Vec<CutStep> {
    let mut steps = Vec::new();
    let mut height = 0;
    let mut seal = |buffer: &mut dyn CutBuffer, now: u64, steps: &mut Vec<CutStep>| {
        let step = buffer.seal(now, height, plan.window, plan.block_trades_max);
        if matches!(step, CutStep::Seal(Ok(SealOutcome::Sealed { .. }))) {
            height += 1;
        }
        steps.push(step);
    };
    for (i, (t, m)) in msgs.iter().enumerate() {
        steps.push(buffer.message(*t, m));
        if i % plan.every == 0 {
            seal(buffer, *t, &mut steps);
        }
    }
    // Every participant ends far ahead: enough seals to empty the queue (points stay under 61).
    for k in 0..100 {
        seal(buffer, (1 << 21) + k, &mut steps);
    }
    steps
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_sharded_buffer_seals_exactly_what_one_buffer_seals(
        streams in streams(), plan in cut_plan(), shards in 1usize..5,
    ) {
        let msgs = messages(&streams);
        let n = streams.len() as u32;
        let config = OrderingConfig {
            straggler_threshold_ns: plan.threshold,
            queue_len_max: plan.queue_len_max,
            ..OrderingConfig::default()
        };
        let mut single = OrderingBuffer::new(config.clone(), 0..n, 0).unwrap();
        let mut sharded = ShardedOrderingBuffer::new(config, 0..n, shards, 0).unwrap();
        for k in 0..200 {
            single.note_point_generated(k, k * 10);
            sharded.note_point_generated(k, k * 10);
        }
        let one = run_cut(&mut single, &msgs, &plan);
        let many = run_cut(&mut sharded, &msgs, &plan);
        prop_assert_eq!(&one, &many);
        // The run is not vacuous: it sealed blocks with trades in them.
        let sealed = one.iter().filter(|s| matches!(s, CutStep::Seal(Ok(SealOutcome::Sealed { trades, .. })) if !trades.is_empty())).count();
        let trades = msgs.iter().filter(|(_, m)| matches!(m.kind, UplinkKind::Trade { .. })).count();
        prop_assert!(trades == 0 || sealed > 0, "no block with trades in {:?}", one);
    }
}

/// Corollary 1: without pacing, two batches can reach one participant less than δ apart while
/// reaching another far apart, and a faster answer is then ordered second. A seeded search over
/// jittery networks must find such a counter-example; the same networks with pacing have none.
#[test]
fn with_pacing_off_a_counter_example_to_lrtf_is_found() {
    let mut found = 0;
    for seed in 0..40 {
        let mut config = SimConfig::new(Scheme::Dbo, 4, 0.002, seed);
        config.point_interval_us = 10;
        config.latency = LatencyModel::Synthetic(SyntheticLatency {
            base_min_us: 5,
            base_max_us: 40,
            step_us: 5,
            walk_step_ns: 4_000,
            walk_max_us: 40,
            spike_factor_max: 1,
            ..SyntheticLatency::default()
        });
        let paced = walras_gateway::sim::run(&config).unwrap();
        assert_eq!(
            paced.lrtf_violations, 0,
            "seed {seed}: pacing on must be fair"
        );
        config.pacing = false;
        found += walras_gateway::sim::run(&config).unwrap().lrtf_violations;
    }
    assert!(found > 0, "no counter-example found with pacing off");
}

/// One step of a hostile participant mix in cut mode: a message from participant `p` with
/// `point` (possibly beyond the published height), or a seal, or a publication.
#[derive(Clone, Debug)]
enum HostileStep {
    Message {
        p: u32,
        trade: bool,
        point_ahead: u64,
        elapsed: u64,
    },
    Seal {
        block_trades_max: usize,
    },
    Publish,
}

fn hostile_steps() -> impl Strategy<Value = Vec<HostileStep>> {
    let step = prop_oneof![
        8 => (0u32..4, any::<bool>(), prop_oneof![4 => Just(0u64), 1 => 0u64..3, 1 => Just(1u64 << 50)], 0u64..2_000)
            .prop_map(|(p, trade, point_ahead, elapsed)| HostileStep::Message { p, trade, point_ahead, elapsed }),
        1 => (1usize..6).prop_map(|block_trades_max| HostileStep::Seal { block_trades_max }),
        1 => Just(HostileStep::Publish),
    ];
    prop::collection::vec(step, 1..300)
}

proptest! {
    #![proptest_config(config())]

    /// Issue 26, item 4: whatever participants send (clocks far beyond the published height,
    /// floods), no participant ever holds more than its share, the shares add up to the queue,
    /// and no queued trade carries a clock above the published height (so each can seal).
    #[test]
    fn no_participant_exceeds_its_share_and_no_impossible_clock_is_buffered(steps in hostile_steps(), share in 1usize..6) {
        let config = OrderingConfig {
            queue_len_max: 12,
            participant_queue_max: share,
            clock_point_slack: Some(0),
            straggler_threshold_ns: Some(5_000),
            ..OrderingConfig::default()
        };
        let mut ob = OrderingBuffer::new(config, 0..4, 0).unwrap();
        let mut height = 1u64;
        ob.note_point_generated(height, 0);
        let mut now = 0u64;
        let mut seqs = [0u64; 4];
        let mut clocks = [DeliveryClock::default(); 4];
        let mut next_trade = 0u64;
        let mut window = 0u64;
        for step in steps {
            now += 100;
            match step {
                HostileStep::Message { p, trade, point_ahead, elapsed } => {
                    let clock = DeliveryClock::new(height.saturating_add(point_ahead), elapsed)
                        .max(clocks[p as usize]);
                    let kind = if trade { next_trade += 1; UplinkKind::Trade { trade_id: next_trade } } else { UplinkKind::Heartbeat };
                    let m = UplinkMessage { participant: p, seq: seqs[p as usize], clock, sent_ns: 0, kind };
                    let before = ob.queue_len();
                    match ob.on_message_for_cut(now, &m) {
                        Ok(_) => {
                            seqs[p as usize] += 1;
                            clocks[p as usize] = clock;
                            prop_assert!(clock.point <= height);
                        }
                        Err(walras_gateway::GatewayError::ClockAhead { .. }) => {
                            prop_assert!(clock.point > height);
                            prop_assert_eq!(ob.queue_len(), before);
                        }
                        Err(walras_gateway::GatewayError::ShareFull { participant, .. }) => {
                            prop_assert_eq!(participant, p);
                            prop_assert_eq!(ob.queued_by(p), share);
                        }
                        Err(walras_gateway::GatewayError::QueueFull { .. }) => {
                            prop_assert_eq!(ob.queue_len(), 12);
                        }
                        Err(other) => prop_assert!(false, "unexpected refusal {other}"),
                    }
                }
                HostileStep::Seal { block_trades_max } => {
                    window += 1;
                    let _ = ob.seal(now, height, window, block_trades_max).unwrap();
                }
                HostileStep::Publish => {
                    height += 1;
                    window = 0;
                    ob.note_point_generated(height, now);
                }
            }
            let mut total = 0;
            for p in 0..4 {
                prop_assert!(ob.queued_by(p) <= share, "participant {} holds {} > {}", p, ob.queued_by(p), share);
                total += ob.queued_by(p);
            }
            prop_assert_eq!(total, ob.queue_len());
            prop_assert!(ob.queued_keys().all(|k| k.clock.point <= height));
        }
    }
}
