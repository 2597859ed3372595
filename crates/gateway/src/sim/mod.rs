//! Deterministic discrete-event simulator for DBO (§6.4), driving the core's state machines.
//!
//! The exchange generates a market-data point every `point_interval_us` and cuts batches of
//! (1+κ)·δ; every point triggers a speed race in which every participant answers after its own
//! response time (uniform in [`response_time_min_ns`, `response_time_max_ns`], drawn per
//! (participant, point) by a counter-based ChaCha stream so every scheme sees the same response).
//! Packets on a link never overtake each other (arrival = max(previous arrival, send + latency)).
//!
//! Schemes: `direct` (no buffers, first come first served at the exchange), `dbo` (one
//! [`ReleaseBuffer`] per participant, one [`OrderingBuffer`] or [`ShardedOrderingBuffer`]),
//! `max-rtt` (Theorem 3's bound: each trade leaves at G + RT + max_j RTT_j, fairness 1 by
//! construction) and `cloudex` (perfect clocks: data released at G + C1, trades forwarded at
//! S + C2, C1 = C2 = `threshold_us`, or later when the network overruns the threshold).
//!
//! Outputs: fairness = share of competing pairs (same trigger point, different response times)
//! ordered faster-first (§6.1), and latency L = F − G − RT (Eq. 8) in µs. Floating point appears
//! only in these statistics and in turning κ into an integer batch length, never in ordering.

pub mod latency;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::str::FromStr;

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use serde::Serialize;
use thiserror::Error;

use crate::clock::OrderKey;
use crate::error::GatewayError;
use crate::ordering::{OrderingBuffer, OrderingConfig, OrderingEvent, ShardedOrderingBuffer};
use crate::release::{
    MarketPoint, ReleaseAction, ReleaseBuffer, ReleaseConfig, UplinkKind, UplinkMessage,
};
use latency::Network;
pub use latency::{parse_trace_csv, LatencyModel, ScriptedEvent, SyntheticLatency, TraceRow};

/// Largest number of participants one run accepts.
pub const PARTICIPANTS_MAX: u32 = 1_000;
/// Longest simulated time one run accepts.
pub const SECONDS_MAX: f64 = 600.0;
/// Trades one run may generate (participants × points).
pub const TRADES_MAX: u64 = 200_000_000;
/// Simulated time after the last point within which every trade must have been forwarded.
pub const DRAIN_NS_MAX: u64 = 60_000_000_000;

#[derive(Debug, Error)]
pub enum SimError {
    #[error("invalid simulator configuration: {0}")]
    InvalidConfig(String),
    #[error("latency trace, line {line}: {reason}")]
    Trace { line: usize, reason: String },
    #[error(transparent)]
    Gateway(#[from] GatewayError),
    #[error("{pending} trades were still queued {drain_ns} ns after the last point; raise the straggler threshold or shorten the spikes")]
    DidNotDrain { pending: u64, drain_ns: u64 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Scheme {
    #[serde(rename = "direct")]
    Direct,
    #[serde(rename = "dbo")]
    Dbo,
    #[serde(rename = "max-rtt")]
    MaxRtt,
    #[serde(rename = "cloudex")]
    CloudEx,
}

impl FromStr for Scheme {
    type Err = SimError;
    fn from_str(s: &str) -> Result<Self, SimError> {
        match s {
            "direct" => Ok(Scheme::Direct),
            "dbo" => Ok(Scheme::Dbo),
            "max-rtt" => Ok(Scheme::MaxRtt),
            "cloudex" => Ok(Scheme::CloudEx),
            other => Err(SimError::InvalidConfig(format!(
                "unknown scheme {other:?}: use direct, dbo, max-rtt or cloudex"
            ))),
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scheme::Direct => "direct",
            Scheme::Dbo => "dbo",
            Scheme::MaxRtt => "max-rtt",
            Scheme::CloudEx => "cloudex",
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    pub scheme: Scheme,
    pub participants: u32,
    pub seconds: f64,
    pub seed: u64,
    /// δ, the fairness horizon.
    pub delta_us: u64,
    /// κ: batches last (1+κ)·δ.
    pub kappa: f64,
    /// τ, the heartbeat period.
    pub tau_us: u64,
    /// CloudEx one-way hold thresholds C1 = C2.
    pub threshold_us: u64,
    pub latency: LatencyModel,
    pub point_interval_us: u64,
    pub response_time_min_ns: u64,
    pub response_time_max_ns: u64,
    /// Release-buffer pacing (off only to exhibit Corollary 1).
    pub pacing: bool,
    /// Ordering-buffer straggler threshold; `None` waits for everyone.
    pub straggler_threshold_us: Option<u64>,
    /// Heartbeats lost on the uplink, per million.
    pub heartbeat_loss_per_million: u32,
    /// Ordering-buffer shards (1 = a single buffer).
    pub ordering_shards: u32,
    /// Keep per-trade and per-delivery records ([`run_traced`]).
    pub record_trace: bool,
}

impl SimConfig {
    /// The paper's parameters (δ = 20 µs, κ = 0.25, τ = 20 µs, data every 40 µs, RT 5–20 µs).
    pub fn new(scheme: Scheme, participants: u32, seconds: f64, seed: u64) -> Self {
        Self {
            scheme,
            participants,
            seconds,
            seed,
            delta_us: 20,
            kappa: 0.25,
            tau_us: 20,
            threshold_us: 50,
            latency: LatencyModel::Synthetic(SyntheticLatency::default()),
            point_interval_us: 40,
            response_time_min_ns: 5_000,
            response_time_max_ns: 19_999,
            pacing: true,
            straggler_threshold_us: None,
            heartbeat_loss_per_million: 0,
            ordering_shards: 1,
            record_trace: false,
        }
    }

    fn batch_ns(&self) -> u64 {
        // The only float in the set-up: κ from the command line becomes an integer batch length.
        ((self.delta_us * 1_000) as f64 * (1.0 + self.kappa)).round() as u64
    }

    fn validate(&self) -> Result<(), SimError> {
        let bad = |m: &str| Err(SimError::InvalidConfig(m.to_string()));
        if self.participants < 1 || self.participants > PARTICIPANTS_MAX {
            return bad("participants must be in 1..=1000");
        }
        if !self.seconds.is_finite() || self.seconds <= 0.0 || self.seconds > SECONDS_MAX {
            return bad("seconds must be in (0, 600]");
        }
        if !self.kappa.is_finite() || self.kappa < 0.0 || self.kappa > 1_000.0 {
            return bad("kappa must be in [0, 1000]");
        }
        if self.delta_us == 0 || self.tau_us == 0 || self.point_interval_us == 0 {
            return bad("delta_us, tau_us and point_interval_us must be positive");
        }
        if self.response_time_min_ns > self.response_time_max_ns {
            return bad("response_time_min_ns must not exceed response_time_max_ns");
        }
        if self.heartbeat_loss_per_million >= 1_000_000 {
            return bad("heartbeat_loss_per_million must be below 1000000");
        }
        if self.ordering_shards == 0 {
            return bad("ordering_shards must be positive");
        }
        if self.points() * u64::from(self.participants) > TRADES_MAX {
            return bad("participants × seconds is too large (more than 200 million trades)");
        }
        Ok(())
    }

    fn points(&self) -> u64 {
        let duration_ns = (self.seconds * 1e9).round() as u64;
        duration_ns.div_ceil(self.point_interval_us * 1_000).max(1)
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatencyStats {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl LatencyStats {
    /// Nearest-rank percentiles of latencies given in ns, reported in µs.
    pub fn from_ns(mut values_ns: Vec<u64>) -> Self {
        if values_ns.is_empty() {
            return Self::default();
        }
        values_ns.sort_unstable();
        let n = values_ns.len();
        let rank =
            |q: f64| values_ns[((q * n as f64).ceil() as usize).clamp(1, n) - 1] as f64 / 1_000.0;
        let sum: u128 = values_ns.iter().map(|&v| u128::from(v)).sum();
        Self {
            mean: sum as f64 / n as f64 / 1_000.0,
            p50: rank(0.50),
            p99: rank(0.99),
            p999: rank(0.999),
            max: rank(1.0),
        }
    }
}

/// What `walras sim dbo --json` prints.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimReport {
    pub fairness: f64,
    pub latency_us: LatencyStats,
    pub scheme: Scheme,
    pub participants: u32,
    pub seconds: f64,
    pub seed: u64,
    pub delta_us: u64,
    pub kappa: f64,
    pub tau_us: u64,
    pub threshold_us: u64,
    pub trades: u64,
    pub competing_pairs: u64,
    /// Competing pairs whose faster trade answered within δ and was still ordered second.
    pub lrtf_violations: u64,
    pub late_trades: u64,
    pub stragglers_detected: u64,
    pub heartbeats_lost: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TradeRecord {
    pub participant: u32,
    pub point: u64,
    pub response_time_ns: u64,
    pub generated_ns: u64,
    pub submitted_ns: u64,
    pub forwarded_ns: u64,
    /// Position in the exchange's input order.
    pub order: u64,
    pub late: bool,
    /// DBO only: the key the release buffer stamped.
    pub key: Option<OrderKey>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeliveryRecord {
    pub participant: u32,
    pub point: u64,
    pub generated_ns: u64,
    pub arrived_ns: u64,
    pub delivered_ns: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SimTrace {
    pub trades: Vec<TradeRecord>,
    pub deliveries: Vec<DeliveryRecord>,
}

/// Run one simulation and summarise it.
pub fn run(config: &SimConfig) -> Result<SimReport, SimError> {
    let mut config = config.clone();
    config.record_trace = false;
    run_traced(&config).map(|(report, _)| report)
}

/// Run one simulation; also return per-trade and per-delivery records when `record_trace` is set.
pub fn run_traced(config: &SimConfig) -> Result<(SimReport, SimTrace), SimError> {
    config.validate()?;
    let world = World::new(config)?;
    let outcome = match config.scheme {
        Scheme::Direct => world.direct(false),
        Scheme::CloudEx => world.direct(true),
        Scheme::MaxRtt => world.max_rtt(),
        Scheme::Dbo => world.dbo()?,
    };
    Ok(world.report(outcome))
}

/// Per-trade results, indexed by trade id = (point − 1) · participants + participant.
struct Outcome {
    submitted_ns: Vec<u64>,
    forwarded_ns: Vec<u64>,
    order: Vec<u64>,
    late: Vec<bool>,
    keys: Vec<Option<OrderKey>>,
    deliveries: Vec<DeliveryRecord>,
    stragglers_detected: u64,
    heartbeats_lost: u64,
}

impl Outcome {
    fn new(trades: usize) -> Self {
        Self {
            submitted_ns: vec![0; trades],
            forwarded_ns: vec![0; trades],
            order: vec![u64::MAX; trades],
            late: vec![false; trades],
            keys: vec![None; trades],
            deliveries: Vec::new(),
            stragglers_detected: 0,
            heartbeats_lost: 0,
        }
    }
}

struct World<'a> {
    config: &'a SimConfig,
    network: Network,
    n: u32,
    points: u64,
    point_interval_ns: u64,
    batch_ns: u64,
    rt_rng: ChaCha8Rng,
}

impl<'a> World<'a> {
    fn new(config: &'a SimConfig) -> Result<Self, SimError> {
        let points = config.points();
        let point_interval_ns = config.point_interval_us * 1_000;
        let batch_ns = config.batch_ns().max(1);
        let horizon_ns = points * point_interval_ns + 1_000_000;
        let network = Network::build(
            &config.latency,
            config.participants,
            horizon_ns,
            config.seed,
        )?;
        let rt_rng = ChaCha8Rng::seed_from_u64(config.seed ^ 0x7274_7274_7274_7274);
        Ok(Self {
            config,
            network,
            n: config.participants,
            points,
            point_interval_ns,
            batch_ns,
            rt_rng,
        })
    }

    fn generated_ns(&self, point: u64) -> u64 {
        (point - 1) * self.point_interval_ns
    }

    fn batch_of(&self, point: u64) -> u64 {
        self.generated_ns(point) / self.batch_ns
    }

    fn trade_id(&self, participant: u32, point: u64) -> usize {
        ((point - 1) * u64::from(self.n) + u64::from(participant)) as usize
    }

    fn trades(&self) -> usize {
        (self.points * u64::from(self.n)) as usize
    }

    /// Counter-based draw: the same (participant, point) gets the same response time in every scheme.
    fn response_time_ns(&self, participant: u32, point: u64) -> u64 {
        let mut rng = self.rt_rng.clone();
        rng.set_stream(u64::from(participant));
        rng.set_word_pos(u128::from(point) * 2);
        let span = self.config.response_time_max_ns - self.config.response_time_min_ns + 1;
        self.config.response_time_min_ns + rng.next_u64() % span
    }

    /// FIFO arrival of every point at each participant, in point order.
    fn downlink_arrivals(&self, p: u32) -> Vec<u64> {
        let mut last = 0u64;
        (1..=self.points)
            .map(|k| {
                let g = self.generated_ns(k);
                last = last.max(g + self.network.down_ns(p, g));
                last
            })
            .collect()
    }

    /// `direct` (hold = false) and `cloudex` (hold = true, perfect clocks, C1 = C2 = threshold).
    fn direct(&self, hold: bool) -> Outcome {
        let mut out = Outcome::new(self.trades());
        let c_ns = self.config.threshold_us * 1_000;
        // (forwarding time, submission time, participant, point)
        let mut arrivals: Vec<(u64, u64, u32, u64)> = Vec::with_capacity(self.trades());
        for p in 0..self.n {
            let arrived = self.downlink_arrivals(p);
            let mut sends: Vec<(u64, u64)> = (1..=self.points)
                .map(|k| {
                    let g = self.generated_ns(k);
                    let a = arrived[(k - 1) as usize];
                    let delivered = if hold { a.max(g + c_ns) } else { a };
                    if self.config.record_trace {
                        out.deliveries.push(DeliveryRecord {
                            participant: p,
                            point: k,
                            generated_ns: g,
                            arrived_ns: a,
                            delivered_ns: delivered,
                        });
                    }
                    (delivered + self.response_time_ns(p, k), k)
                })
                .collect();
            sends.sort_unstable();
            let mut last = 0u64;
            for (s, k) in sends {
                last = last.max(s + self.network.up_ns(p, s));
                let f = if hold { last.max(s + c_ns) } else { last };
                out.submitted_ns[self.trade_id(p, k)] = s;
                arrivals.push((f, if hold { s } else { 0 }, p, k));
            }
        }
        arrivals.sort_unstable();
        for (i, &(f, _, p, k)) in arrivals.iter().enumerate() {
            let id = self.trade_id(p, k);
            out.forwarded_ns[id] = f;
            out.order[id] = i as u64;
        }
        out
    }

    /// Theorem 3: trade (i, a) cannot leave before every j could have answered x within RT(i, a).
    fn max_rtt(&self) -> Outcome {
        let mut out = Outcome::new(self.trades());
        let mut ideal: Vec<(u64, u64, u32)> = Vec::with_capacity(self.trades());
        for k in 1..=self.points {
            let g = self.generated_ns(k);
            for p in 0..self.n {
                let rt = self.response_time_ns(p, k);
                let id = self.trade_id(p, k);
                out.forwarded_ns[id] = g + rt + self.max_rtt_ns(g, rt);
                out.submitted_ns[id] = g + rt;
                ideal.push((k, rt, p));
            }
        }
        ideal.sort_unstable();
        for (i, &(k, _, p)) in ideal.iter().enumerate() {
            let id = self.trade_id(p, k);
            out.order[id] = i as u64;
        }
        out
    }

    /// max_j RTT(j, x, RT) on the raw network (Eq. 10, 11).
    pub(crate) fn max_rtt_ns(&self, generated_ns: u64, rt_ns: u64) -> u64 {
        (0..self.n)
            .map(|j| {
                let down = self.network.down_ns(j, generated_ns);
                down + self.network.up_ns(j, generated_ns + down + rt_ns)
            })
            .max()
            .unwrap_or(0)
    }

    fn dbo(&self) -> Result<Outcome, SimError> {
        DboRun::new(self)?.run()
    }

    fn report(&self, outcome: Outcome) -> (SimReport, SimTrace) {
        let delta_ns = self.config.delta_us * 1_000;
        let n = self.n as usize;
        let (mut pairs, mut correct, mut lrtf_violations) = (0u64, 0u64, 0u64);
        let mut latencies = Vec::with_capacity(self.trades());
        let mut trace = SimTrace::default();
        for k in 1..=self.points {
            let g = self.generated_ns(k);
            let race: Vec<(u64, u64)> = (0..self.n)
                .map(|p| {
                    (
                        self.response_time_ns(p, k),
                        outcome.order[self.trade_id(p, k)],
                    )
                })
                .collect();
            for a in 0..n {
                for b in a + 1..n {
                    let (fast, slow) = if race[a].0 < race[b].0 {
                        (race[a], race[b])
                    } else {
                        (race[b], race[a])
                    };
                    if fast.0 == slow.0 {
                        continue;
                    }
                    pairs += 1;
                    if fast.1 < slow.1 {
                        correct += 1;
                    } else if fast.0 < delta_ns {
                        lrtf_violations += 1;
                    }
                }
            }
            for p in 0..self.n {
                let id = self.trade_id(p, k);
                let rt = race[p as usize].0;
                latencies.push(outcome.forwarded_ns[id].saturating_sub(g + rt));
                if self.config.record_trace {
                    trace.trades.push(TradeRecord {
                        participant: p,
                        point: k,
                        response_time_ns: rt,
                        generated_ns: g,
                        submitted_ns: outcome.submitted_ns[id],
                        forwarded_ns: outcome.forwarded_ns[id],
                        order: outcome.order[id],
                        late: outcome.late[id],
                        key: outcome.keys[id],
                    });
                }
            }
        }
        trace.deliveries = outcome.deliveries;
        let report = SimReport {
            fairness: if pairs == 0 {
                1.0
            } else {
                correct as f64 / pairs as f64
            },
            latency_us: LatencyStats::from_ns(latencies),
            scheme: self.config.scheme,
            participants: self.n,
            seconds: self.config.seconds,
            seed: self.config.seed,
            delta_us: self.config.delta_us,
            kappa: self.config.kappa,
            tau_us: self.config.tau_us,
            threshold_us: self.config.threshold_us,
            trades: self.trades() as u64,
            competing_pairs: pairs,
            lrtf_violations,
            late_trades: outcome.late.iter().filter(|&&l| l).count() as u64,
            stragglers_detected: outcome.stragglers_detected,
            heartbeats_lost: outcome.heartbeats_lost,
        };
        (report, trace)
    }
}

enum Sequencer {
    Single(OrderingBuffer),
    Sharded(ShardedOrderingBuffer),
}

impl Sequencer {
    fn note_point_generated(&mut self, point: u64, generated_ns: u64) {
        match self {
            Sequencer::Single(ob) => ob.note_point_generated(point, generated_ns),
            Sequencer::Sharded(ob) => ob.note_point_generated(point, generated_ns),
        }
    }

    fn on_message(
        &mut self,
        now_ns: u64,
        msg: &UplinkMessage,
    ) -> Result<Vec<OrderingEvent>, GatewayError> {
        match self {
            Sequencer::Single(ob) => ob.on_message(now_ns, msg),
            Sequencer::Sharded(ob) => ob.on_message(now_ns, msg),
        }
    }

    fn on_tick(&mut self, now_ns: u64) -> Result<Vec<OrderingEvent>, GatewayError> {
        match self {
            Sequencer::Single(ob) => ob.on_tick(now_ns),
            Sequencer::Sharded(ob) => ob.on_tick(now_ns),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Generate { point: u64 },
    PointArrive { participant: u32, point: u64 },
    RbWake { participant: u32 },
    Submit { participant: u32, point: u64 },
    UplinkArrive { participant: u32 },
    ObTick,
}

/// The `dbo` scheme: release buffers and an ordering buffer driven by an event queue.
struct DboRun<'w, 'a> {
    world: &'w World<'a>,
    queue: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
    rbs: Vec<ReleaseBuffer>,
    rb_wake_ns: Vec<u64>,
    down_last_ns: Vec<u64>,
    arrived_ns: Vec<u64>,
    up_last_ns: Vec<u64>,
    uplink: Vec<VecDeque<UplinkMessage>>,
    sequencer: Sequencer,
    loss_rng: Vec<ChaCha8Rng>,
    out: Outcome,
    forwarded: u64,
    tick_ns: Option<u64>,
}

impl<'w, 'a> DboRun<'w, 'a> {
    fn new(world: &'w World<'a>) -> Result<Self, SimError> {
        let config = world.config;
        let n = world.n;
        let mut release = ReleaseConfig::new(config.delta_us * 1_000, config.tau_us * 1_000);
        release.pacing = config.pacing;
        let rbs = (0..n)
            .map(|p| ReleaseBuffer::new(p, release.clone(), 0))
            .collect::<Result<Vec<_>, _>>()?;
        let ordering = OrderingConfig {
            straggler_threshold_ns: config.straggler_threshold_us.map(|t| t * 1_000),
            queue_len_max: world.trades().max(1),
            ..OrderingConfig::default()
        };
        let sequencer = if config.ordering_shards > 1 {
            Sequencer::Sharded(ShardedOrderingBuffer::new(
                ordering,
                0..n,
                config.ordering_shards as usize,
                0,
            )?)
        } else {
            Sequencer::Single(OrderingBuffer::new(ordering, 0..n, 0)?)
        };
        let loss_rng = (0..n)
            .map(|p| {
                let mut rng = ChaCha8Rng::seed_from_u64(config.seed ^ 0x6c6f_7373_6c6f_7373);
                rng.set_stream(u64::from(p));
                rng
            })
            .collect();
        Ok(Self {
            world,
            queue: BinaryHeap::new(),
            seq: 0,
            rbs,
            rb_wake_ns: vec![u64::MAX; n as usize],
            down_last_ns: vec![0; n as usize],
            arrived_ns: vec![0; world.trades()],
            up_last_ns: vec![0; n as usize],
            uplink: vec![VecDeque::new(); n as usize],
            sequencer,
            loss_rng,
            out: Outcome::new(world.trades()),
            forwarded: 0,
            tick_ns: config.straggler_threshold_us.map(|_| config.tau_us * 1_000),
        })
    }

    fn push(&mut self, at_ns: u64, event: Event) {
        self.seq += 1;
        self.queue.push(Reverse((at_ns, self.seq, event)));
    }

    fn run(mut self) -> Result<Outcome, SimError> {
        self.push(0, Event::Generate { point: 1 });
        for p in 0..self.world.n {
            self.reschedule_rb(p, 0);
        }
        if let Some(tick) = self.tick_ns {
            self.push(tick, Event::ObTick);
        }
        let total = self.world.trades() as u64;
        let end_ns = self.world.points * self.world.point_interval_ns;
        while self.forwarded < total {
            let Some(Reverse((now, _, event))) = self.queue.pop() else {
                // Heartbeats keep the queue busy, so an empty queue would be a simulator bug.
                return Err(SimError::DidNotDrain {
                    pending: total - self.forwarded,
                    drain_ns: 0,
                });
            };
            if now > end_ns.saturating_add(DRAIN_NS_MAX) {
                return Err(SimError::DidNotDrain {
                    pending: total - self.forwarded,
                    drain_ns: DRAIN_NS_MAX,
                });
            }
            self.handle(now, event)?;
        }
        debug_assert_eq!(self.forwarded, total);
        debug_assert!(
            self.out.order.iter().all(|&o| o < total),
            "every trade has a place in the order"
        );
        Ok(self.out)
    }

    fn handle(&mut self, now: u64, event: Event) -> Result<(), SimError> {
        match event {
            Event::Generate { point } => {
                let g = self.world.generated_ns(point);
                self.sequencer.note_point_generated(point, g);
                for p in 0..self.world.n {
                    let a = self.down_last_ns[p as usize].max(g + self.world.network.down_ns(p, g));
                    self.down_last_ns[p as usize] = a;
                    self.arrived_ns[self.world.trade_id(p, point)] = a;
                    self.push(
                        a,
                        Event::PointArrive {
                            participant: p,
                            point,
                        },
                    );
                }
                if point < self.world.points {
                    self.push(
                        self.world.generated_ns(point + 1),
                        Event::Generate { point: point + 1 },
                    );
                }
            }
            Event::PointArrive { participant, point } => {
                let batch = self.world.batch_of(point);
                let last_in_batch =
                    point == self.world.points || self.world.batch_of(point + 1) != batch;
                let mp = MarketPoint {
                    id: point,
                    batch,
                    last_in_batch,
                    retransmission: false,
                };
                let actions = self.rbs[participant as usize].on_point(now, mp)?;
                self.apply(participant, now, actions)?;
            }
            Event::RbWake { participant } => {
                if self.rb_wake_ns[participant as usize] == now {
                    self.rb_wake_ns[participant as usize] = u64::MAX;
                    let actions = self.rbs[participant as usize].on_tick(now)?;
                    self.apply(participant, now, actions)?;
                }
            }
            Event::Submit { participant, point } => {
                let id = self.world.trade_id(participant, point);
                self.out.submitted_ns[id] = now;
                let actions = self.rbs[participant as usize].on_trade(now, id as u64)?;
                self.apply(participant, now, actions)?;
            }
            Event::UplinkArrive { participant } => {
                if let Some(msg) = self.uplink[participant as usize].pop_front() {
                    let events = self.sequencer.on_message(now, &msg)?;
                    self.record(events);
                }
            }
            Event::ObTick => {
                let events = self.sequencer.on_tick(now)?;
                self.record(events);
                if let Some(tick) = self.tick_ns {
                    self.push(now + tick, Event::ObTick);
                }
            }
        }
        Ok(())
    }

    fn apply(&mut self, p: u32, now: u64, actions: Vec<ReleaseAction>) -> Result<(), SimError> {
        for action in actions {
            match action {
                ReleaseAction::DeliverBatch { at_ns, points, .. } => {
                    for point in points {
                        let rt = self.world.response_time_ns(p, point);
                        self.push(
                            at_ns + rt,
                            Event::Submit {
                                participant: p,
                                point,
                            },
                        );
                        if self.world.config.record_trace {
                            let arrived_ns = self.arrived_ns[self.world.trade_id(p, point)];
                            let generated_ns = self.world.generated_ns(point);
                            self.out.deliveries.push(DeliveryRecord {
                                participant: p,
                                point,
                                generated_ns,
                                arrived_ns,
                                delivered_ns: at_ns,
                            });
                        }
                    }
                }
                ReleaseAction::DeliverRetransmission { .. } => {}
                ReleaseAction::Send(msg) => self.send(p, msg),
            }
        }
        self.reschedule_rb(p, now);
        Ok(())
    }

    fn send(&mut self, p: u32, msg: UplinkMessage) {
        let loss = self.world.config.heartbeat_loss_per_million;
        if msg.kind == UplinkKind::Heartbeat
            && loss > 0
            && self.loss_rng[p as usize].next_u64() % 1_000_000 < u64::from(loss)
        {
            self.out.heartbeats_lost += 1;
            return;
        }
        if let UplinkKind::Trade { trade_id } = msg.kind {
            self.out.keys[trade_id as usize] = Some(msg.key());
        }
        let arrival =
            self.up_last_ns[p as usize].max(msg.sent_ns + self.world.network.up_ns(p, msg.sent_ns));
        self.up_last_ns[p as usize] = arrival;
        self.uplink[p as usize].push_back(msg);
        self.push(arrival, Event::UplinkArrive { participant: p });
    }

    fn reschedule_rb(&mut self, p: u32, now: u64) {
        let wake = self.rbs[p as usize].next_wakeup_ns().max(now);
        if wake != self.rb_wake_ns[p as usize] {
            self.rb_wake_ns[p as usize] = wake;
            self.push(wake, Event::RbWake { participant: p });
        }
    }

    fn record(&mut self, events: Vec<OrderingEvent>) {
        for event in events {
            match event {
                OrderingEvent::Forward(f) => {
                    let id = f.trade_id as usize;
                    self.out.forwarded_ns[id] = f.forwarded_ns;
                    self.out.order[id] = self.forwarded;
                    self.out.late[id] = f.late;
                    self.forwarded += 1;
                }
                OrderingEvent::StragglerDetected { .. } => self.out.stragglers_detected += 1,
                OrderingEvent::StragglerRejoined { .. } => {}
            }
        }
    }
}
