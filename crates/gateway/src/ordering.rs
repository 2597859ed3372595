//! Ordering buffer (DBO §4.1.3, §5.2), stragglers (§4.2.1), block cuts, and sharding (§5.2 "Scaling").
//!
//! Every uplink message of participant i carries a key (clock, i, seq) larger than all of i's
//! earlier messages, and i's messages arrive in order. So the key of the last message heard from i
//! is i's *watermark*: every trade of i with a smaller key has been received. A trade can be
//! forwarded once its key is ≤ the minimum watermark over non-stragglers (the *horizon*): then no
//! trade with a smaller key can still arrive from them.
//!
//! Stragglers: a participant whose round-trip estimate (arrival − generation of the clock's point −
//! elapsed) exceeds the threshold, or that has been silent longer than the threshold, stops holding
//! the horizon back. When a message with a small enough round trip arrives it rejoins. A trade whose
//! key is below a key already forwarded is forwarded at once and flagged `late`; it is never slipped
//! in silently.
//!
//! Cut mode ([`OrderingBuffer::seal`]): instead of streaming, block N+1 takes every queued trade
//! whose clock is below ⟨N, W⟩, once every non-straggler's watermark clock has reached ⟨N, W⟩.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::clock::{DeliveryClock, OrderKey, ParticipantId, PointId};
use crate::error::GatewayError;
use crate::release::{UplinkKind, UplinkMessage};

/// Ordering-buffer parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderingConfig {
    /// Round-trip or silence beyond this makes a participant a straggler; `None` waits forever.
    pub straggler_threshold_ns: Option<u64>,
    /// Trades held in the priority queue.
    pub queue_len_max: usize,
    /// Generation times remembered for round-trip estimates.
    pub points_tracked_max: usize,
    /// Trades one participant may hold in the queue (its share; `queue_len_max` or more: no
    /// share beyond the whole queue). Over it, that participant's trade is refused
    /// ([`GatewayError::ShareFull`]) and nobody else's.
    pub participant_queue_max: usize,
    /// `Some(slack)`: a message whose clock names a point above the latest one noted
    /// ([`OrderingBuffer::note_point_generated`]; before any, 0) plus `slack` is refused
    /// ([`GatewayError::ClockAhead`]): no release buffer can have delivered it. In cut mode the
    /// points are block heights and a participant can only have seen the published height, so
    /// the gateway uses `Some(0)`. `None` (the default): not checked, for callers that do not
    /// note every point before it can be delivered (the simulator's participants cannot lie).
    pub clock_point_slack: Option<u64>,
}

impl Default for OrderingConfig {
    fn default() -> Self {
        Self {
            straggler_threshold_ns: None,
            queue_len_max: 1 << 20,
            points_tracked_max: 1 << 16,
            participant_queue_max: usize::MAX,
            clock_point_slack: None,
        }
    }
}

/// How far trades may be forwarded: `Nothing` < `Upto(key)` < `Everything`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Horizon {
    /// Some non-straggler has not been heard from yet.
    Nothing,
    /// Keys ≤ this one are safe.
    Upto(OrderKey),
    /// Every participant is a straggler.
    Everything,
}

impl Horizon {
    fn admits(&self, key: &OrderKey) -> bool {
        match self {
            Horizon::Nothing => false,
            Horizon::Upto(h) => key <= h,
            Horizon::Everything => true,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ForwardedTrade {
    pub key: OrderKey,
    pub trade_id: u64,
    /// Arrived after a larger key had been forwarded (or, in cut mode, after its cut was sealed).
    pub late: bool,
    pub forwarded_ns: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum StragglerReason {
    RoundTrip { rtt_ns: u64 },
    Silence { silent_ns: u64 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum OrderingEvent {
    Forward(ForwardedTrade),
    StragglerDetected {
        participant: ParticipantId,
        at_ns: u64,
        reason: StragglerReason,
    },
    StragglerRejoined {
        participant: ParticipantId,
        at_ns: u64,
    },
}

/// The result of [`OrderingBuffer::seal`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SealOutcome {
    /// Some non-straggler's watermark is still below the boundary.
    Pending,
    /// The block's trades in key order; `spilled` trades below the boundary wait for the next cut.
    Sealed {
        trades: Vec<ForwardedTrade>,
        spilled: usize,
    },
}

#[derive(Clone, Debug)]
struct ParticipantState {
    watermark: Option<OrderKey>,
    last_seq: Option<u64>,
    last_heard_ns: u64,
    straggler: bool,
    /// Trades of this participant in the queue (bounded by `participant_queue_max`).
    queued: usize,
}

/// Participant bookkeeping and the priority queue, shared by the single and the sharded buffer.
#[derive(Clone, Debug)]
pub struct OrderingBuffer {
    config: OrderingConfig,
    participants: BTreeMap<ParticipantId, ParticipantState>,
    queue: BTreeMap<OrderKey, (u64, bool)>,
    last_forwarded: Option<OrderKey>,
    sealed_boundary: Option<DeliveryClock>,
    /// Cut mode: the largest key sealed so far (what a seal's postcondition checks against).
    sealed_key_max: Option<OrderKey>,
    point_generated_ns: BTreeMap<PointId, u64>,
    /// The highest point noted (the published height in cut mode).
    latest_point: Option<PointId>,
    last_now_ns: u64,
}

impl OrderingBuffer {
    pub fn new(
        config: OrderingConfig,
        participants: impl IntoIterator<Item = ParticipantId>,
        start_ns: u64,
    ) -> Result<Self, GatewayError> {
        if config.queue_len_max == 0 {
            return Err(GatewayError::InvalidConfig(
                "queue_len_max must be positive",
            ));
        }
        let participants: BTreeMap<_, _> = participants
            .into_iter()
            .map(|p| {
                (
                    p,
                    ParticipantState {
                        watermark: None,
                        last_seq: None,
                        last_heard_ns: start_ns,
                        straggler: false,
                        queued: 0,
                    },
                )
            })
            .collect();
        Ok(Self {
            config,
            participants,
            queue: BTreeMap::new(),
            last_forwarded: None,
            sealed_boundary: None,
            sealed_key_max: None,
            point_generated_ns: BTreeMap::new(),
            latest_point: None,
            last_now_ns: start_ns,
        })
    }

    /// The exchange generated `point` at `generated_ns` (used for round-trip estimates and,
    /// under `clock_point_slack`, as the bound on the points clocks may name).
    pub fn note_point_generated(&mut self, point: PointId, generated_ns: u64) {
        self.latest_point = self.latest_point.max(Some(point));
        self.point_generated_ns.insert(point, generated_ns);
        while self.point_generated_ns.len() > self.config.points_tracked_max {
            self.point_generated_ns.pop_first();
        }
    }

    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    /// Trades of `participant` in the queue (its share is `participant_queue_max`).
    pub fn queued_by(&self, participant: ParticipantId) -> usize {
        self.participants.get(&participant).map_or(0, |s| s.queued)
    }

    /// The keys of the queued trades, in key order (for checks of the buffer's invariants).
    pub fn queued_keys(&self) -> impl Iterator<Item = &OrderKey> + '_ {
        self.queue.keys()
    }

    /// Queues an accepted trade, counting it against its participant's share.
    fn enqueue(&mut self, key: OrderKey, trade_id: u64, late: bool) {
        if let Some(state) = self.participants.get_mut(&key.participant) {
            state.queued += 1;
        }
        self.queue.insert(key, (trade_id, late));
    }

    /// Takes a trade out of the queue, giving its place back to its participant's share.
    fn dequeue(&mut self, key: &OrderKey) -> Option<(u64, bool)> {
        let removed = self.queue.remove(key)?;
        if let Some(state) = self.participants.get_mut(&key.participant) {
            state.queued = state.queued.saturating_sub(1);
        }
        Some(removed)
    }

    pub fn is_straggler(&self, participant: ParticipantId) -> bool {
        self.participants
            .get(&participant)
            .is_some_and(|s| s.straggler)
    }

    pub fn watermark(&self, participant: ParticipantId) -> Option<OrderKey> {
        self.participants
            .get(&participant)
            .and_then(|s| s.watermark)
    }

    /// The minimum watermark over non-stragglers.
    pub fn horizon(&self) -> Horizon {
        let mut horizon = Horizon::Everything;
        for state in self.participants.values().filter(|s| !s.straggler) {
            let h = state.watermark.map_or(Horizon::Nothing, Horizon::Upto);
            horizon = horizon.min(h);
        }
        horizon
    }

    /// Streaming mode: a message arrived at `now_ns`. Returns forwards (in order) and straggler changes.
    pub fn on_message(
        &mut self,
        now_ns: u64,
        msg: &UplinkMessage,
    ) -> Result<Vec<OrderingEvent>, GatewayError> {
        let mut events = Vec::new();
        if let Some((key, trade_id)) = self.accept(now_ns, msg, 0, &mut events)? {
            let late = LateCheck {
                last_forwarded: self.last_forwarded,
                now_ns,
            };
            if late.forward_if_late(key, trade_id, &mut events) {
                self.enqueue(key, trade_id, false);
            }
        }
        self.forward_ready(now_ns, &mut events);
        Ok(events)
    }

    /// Streaming mode: time passed (silence detection), forward what became safe.
    pub fn on_tick(&mut self, now_ns: u64) -> Result<Vec<OrderingEvent>, GatewayError> {
        let mut events = Vec::new();
        self.check_silence(now_ns, &mut events)?;
        self.forward_ready(now_ns, &mut events);
        Ok(events)
    }

    /// Cut mode: a message arrived; trades are queued (flagged late when below a sealed boundary).
    pub fn on_message_for_cut(
        &mut self,
        now_ns: u64,
        msg: &UplinkMessage,
    ) -> Result<Vec<OrderingEvent>, GatewayError> {
        let mut events = Vec::new();
        if let Some((key, trade_id)) = self.accept(now_ns, msg, 0, &mut events)? {
            let late = self.sealed_boundary.is_some_and(|b| key.clock < b);
            self.enqueue(key, trade_id, late);
        }
        Ok(events)
    }

    /// Cut mode: try to seal block N+1 with boundary ⟨n, window_ns⟩ (at most `block_trades_max` trades).
    pub fn seal(
        &mut self,
        now_ns: u64,
        n: PointId,
        window_ns: u64,
        block_trades_max: usize,
    ) -> Result<SealOutcome, GatewayError> {
        let boundary = next_boundary(self.sealed_boundary, n, window_ns)?;
        let mut ignored = Vec::new();
        self.check_silence(now_ns, &mut ignored)?;
        if !self.passed(boundary) {
            return Ok(SealOutcome::Pending);
        }
        let below: Vec<OrderKey> = self
            .queue
            .range(..)
            .take_while(|(k, _)| k.clock < boundary)
            .map(|(k, _)| *k)
            .collect();
        let sealed = take_sealed(&below, block_trades_max, now_ns, |key| {
            let (trade_id, late) = self.dequeue(key)?;
            Some((*key, trade_id, late))
        });
        self.sealed_key_max = sealed_postcondition(&sealed, boundary, self.sealed_key_max);
        self.sealed_boundary = Some(boundary);
        Ok(sealed)
    }

    /// Whether every participant that is not a straggler has passed `boundary`.
    fn passed(&self, boundary: DeliveryClock) -> bool {
        self.participants
            .values()
            .filter(|s| !s.straggler)
            .all(|s| s.watermark.is_some_and(|w| w.clock >= boundary))
    }

    /// Validate and record a message; returns the trade it carries, if any. Changes nothing on error.
    /// `queued_elsewhere`: trades other shards hold, counted against the queue limit (cut mode of
    /// the sharded buffer, whose limit is over all shards like one buffer's).
    fn accept(
        &mut self,
        now_ns: u64,
        msg: &UplinkMessage,
        queued_elsewhere: usize,
        events: &mut Vec<OrderingEvent>,
    ) -> Result<Option<(OrderKey, u64)>, GatewayError> {
        if now_ns < self.last_now_ns {
            return Err(GatewayError::TimeWentBackwards {
                now_ns,
                last_ns: self.last_now_ns,
            });
        }
        let state = self
            .participants
            .get(&msg.participant)
            .ok_or(GatewayError::UnknownParticipant(msg.participant))?;
        if let Some(last_seq) = state.last_seq {
            if msg.seq <= last_seq {
                return Err(GatewayError::SequenceOutOfOrder {
                    participant: msg.participant,
                    seq: msg.seq,
                    last_seq,
                });
            }
        }
        if state.watermark.is_some_and(|w| msg.clock < w.clock) {
            return Err(GatewayError::ClockWentBackwards {
                participant: msg.participant,
            });
        }
        if let Some(slack) = self.config.clock_point_slack {
            let latest = self.latest_point.unwrap_or(0);
            if msg.clock.point > latest.saturating_add(slack) {
                return Err(GatewayError::ClockAhead {
                    participant: msg.participant,
                    point: msg.clock.point,
                    latest,
                    slack,
                });
            }
        }
        let is_trade = matches!(msg.kind, UplinkKind::Trade { .. });
        if is_trade && state.queued >= self.config.participant_queue_max {
            return Err(GatewayError::ShareFull {
                participant: msg.participant,
                share_max: self.config.participant_queue_max,
            });
        }
        if is_trade && self.queue.len() + queued_elsewhere >= self.config.queue_len_max {
            return Err(GatewayError::QueueFull {
                queue: "ordering buffer",
                len_max: self.config.queue_len_max,
            });
        }
        self.last_now_ns = now_ns;
        let rtt_ns = self.point_generated_ns.get(&msg.clock.point).map(|&g| {
            now_ns
                .saturating_sub(g)
                .saturating_sub(msg.clock.elapsed_ns)
        });
        let threshold = self.config.straggler_threshold_ns;
        let key = msg.key();
        let Some(state) = self.participants.get_mut(&msg.participant) else {
            return Err(GatewayError::UnknownParticipant(msg.participant));
        };
        debug_assert!(
            state.watermark.is_none_or(|w| key > w),
            "a participant's keys must increase"
        );
        state.watermark = Some(key);
        state.last_seq = Some(msg.seq);
        state.last_heard_ns = now_ns;
        if let Some(threshold) = threshold {
            let slow = rtt_ns.is_some_and(|r| r > threshold);
            if slow && !state.straggler {
                state.straggler = true;
                let reason = StragglerReason::RoundTrip {
                    rtt_ns: rtt_ns.unwrap_or(0),
                };
                events.push(OrderingEvent::StragglerDetected {
                    participant: msg.participant,
                    at_ns: now_ns,
                    reason,
                });
            } else if !slow && state.straggler {
                state.straggler = false;
                events.push(OrderingEvent::StragglerRejoined {
                    participant: msg.participant,
                    at_ns: now_ns,
                });
            }
        }
        Ok(match msg.kind {
            UplinkKind::Trade { trade_id } => Some((key, trade_id)),
            UplinkKind::Heartbeat => None,
        })
    }

    fn check_silence(
        &mut self,
        now_ns: u64,
        events: &mut Vec<OrderingEvent>,
    ) -> Result<(), GatewayError> {
        if now_ns < self.last_now_ns {
            return Err(GatewayError::TimeWentBackwards {
                now_ns,
                last_ns: self.last_now_ns,
            });
        }
        self.last_now_ns = now_ns;
        let Some(threshold) = self.config.straggler_threshold_ns else {
            return Ok(());
        };
        for (&participant, state) in self.participants.iter_mut().filter(|(_, s)| !s.straggler) {
            let silent_ns = now_ns.saturating_sub(state.last_heard_ns);
            if silent_ns > threshold {
                state.straggler = true;
                let reason = StragglerReason::Silence { silent_ns };
                events.push(OrderingEvent::StragglerDetected {
                    participant,
                    at_ns: now_ns,
                    reason,
                });
            }
        }
        Ok(())
    }

    /// Remove and return, in key order, the queued trades the current horizon admits.
    fn take_admitted(&mut self, horizon: Horizon) -> Vec<(OrderKey, u64)> {
        let mut out = Vec::new();
        while let Some(&key) = self.queue.keys().next() {
            if !horizon.admits(&key) {
                break;
            }
            if let Some((trade_id, _)) = self.dequeue(&key) {
                out.push((key, trade_id));
            }
        }
        out
    }

    fn forward_ready(&mut self, now_ns: u64, events: &mut Vec<OrderingEvent>) {
        let horizon = self.horizon();
        for (key, trade_id) in self.take_admitted(horizon) {
            let trade = ForwardedTrade {
                key,
                trade_id,
                late: false,
                forwarded_ns: now_ns,
            };
            assert_forward_order(self.last_forwarded, &trade);
            self.last_forwarded = Some(key);
            events.push(OrderingEvent::Forward(trade));
        }
    }
}

/// Ordering buffers sharded by participant, with a master merge (§5.2 "Scaling").
///
/// Each shard keeps its participants' watermarks and queue and hands the master every trade its
/// own horizon admits; the master forwards in key order what the minimum of the shards' horizons
/// admits, and flags as late any trade below its last forwarded key (it tells the shards that bar).
/// The forwarded sequence is the same as one [`OrderingBuffer`] over all participants would give,
/// because the global horizon is the minimum of the shard horizons.
#[derive(Clone, Debug)]
pub struct ShardedOrderingBuffer {
    shards: Vec<OrderingBuffer>,
    shard_of: BTreeMap<ParticipantId, usize>,
    master: BTreeMap<OrderKey, u64>,
    master_len_max: usize,
    last_forwarded: Option<OrderKey>,
    /// Cut mode: the last sealed boundary and the latest time seen, over all shards (one
    /// buffer's checks, so that the sharded cut refuses exactly what one buffer refuses).
    sealed_boundary: Option<DeliveryClock>,
    /// The largest key sealed so far (what a seal's postcondition checks against).
    sealed_key_max: Option<OrderKey>,
    last_now_ns: u64,
}

impl ShardedOrderingBuffer {
    pub fn new(
        config: OrderingConfig,
        participants: impl IntoIterator<Item = ParticipantId>,
        shard_count: usize,
        start_ns: u64,
    ) -> Result<Self, GatewayError> {
        if shard_count == 0 {
            return Err(GatewayError::InvalidConfig("shard_count must be positive"));
        }
        let mut sorted: Vec<ParticipantId> = participants.into_iter().collect();
        sorted.sort_unstable();
        sorted.dedup();
        let shard_of: BTreeMap<_, _> = sorted
            .iter()
            .enumerate()
            .map(|(i, &p)| (p, i % shard_count))
            .collect();
        let shards = (0..shard_count)
            .map(|s| {
                OrderingBuffer::new(
                    config.clone(),
                    shard_of.iter().filter(|(_, &t)| t == s).map(|(&p, _)| p),
                    start_ns,
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            shards,
            shard_of,
            master: BTreeMap::new(),
            master_len_max: config.queue_len_max,
            last_forwarded: None,
            sealed_boundary: None,
            sealed_key_max: None,
            last_now_ns: start_ns,
        })
    }

    pub fn note_point_generated(&mut self, point: PointId, generated_ns: u64) {
        for shard in &mut self.shards {
            shard.note_point_generated(point, generated_ns);
        }
    }

    pub fn on_message(
        &mut self,
        now_ns: u64,
        msg: &UplinkMessage,
    ) -> Result<Vec<OrderingEvent>, GatewayError> {
        let &s = self
            .shard_of
            .get(&msg.participant)
            .ok_or(GatewayError::UnknownParticipant(msg.participant))?;
        if matches!(msg.kind, UplinkKind::Trade { .. }) && self.master.len() >= self.master_len_max
        {
            return Err(GatewayError::QueueFull {
                queue: "ordering master",
                len_max: self.master_len_max,
            });
        }
        let mut events = Vec::new();
        let shard = &mut self.shards[s];
        if let Some((key, trade_id)) = shard.accept(now_ns, msg, 0, &mut events)? {
            let late = LateCheck {
                last_forwarded: self.last_forwarded,
                now_ns,
            };
            if late.forward_if_late(key, trade_id, &mut events) {
                shard.enqueue(key, trade_id, false);
            }
        }
        self.merge(now_ns, &mut events);
        Ok(events)
    }

    pub fn on_tick(&mut self, now_ns: u64) -> Result<Vec<OrderingEvent>, GatewayError> {
        let mut events = Vec::new();
        for shard in &mut self.shards {
            shard.check_silence(now_ns, &mut events)?;
        }
        self.merge(now_ns, &mut events);
        Ok(events)
    }

    fn check_time(&mut self, now_ns: u64) -> Result<(), GatewayError> {
        if now_ns < self.last_now_ns {
            return Err(GatewayError::TimeWentBackwards {
                now_ns,
                last_ns: self.last_now_ns,
            });
        }
        Ok(())
    }

    /// Cut mode: a message arrived; its shard validates it and queues a trade (flagged late when
    /// below a sealed boundary). The queue limit is over all shards together.
    pub fn on_message_for_cut(
        &mut self,
        now_ns: u64,
        msg: &UplinkMessage,
    ) -> Result<Vec<OrderingEvent>, GatewayError> {
        self.check_time(now_ns)?;
        let &s = self
            .shard_of
            .get(&msg.participant)
            .ok_or(GatewayError::UnknownParticipant(msg.participant))?;
        let elsewhere: usize = self
            .shards
            .iter()
            .enumerate()
            .filter(|(t, _)| *t != s)
            .map(|(_, shard)| shard.queue.len())
            .sum();
        let mut events = Vec::new();
        let shard = &mut self.shards[s];
        if let Some((key, trade_id)) = shard.accept(now_ns, msg, elsewhere, &mut events)? {
            let late = self.sealed_boundary.is_some_and(|b| key.clock < b);
            shard.enqueue(key, trade_id, late);
        }
        self.last_now_ns = now_ns;
        Ok(events)
    }

    /// Cut mode: [`OrderingBuffer::seal`] over the shards. The boundary is passed once every
    /// shard's non-stragglers have passed it; the block is the merge, in key order, of every
    /// shard's trades below it (at most `block_trades_max`; the rest stay in their shards and go
    /// first into the next cut). Same outcome as one buffer over all participants.
    pub fn seal(
        &mut self,
        now_ns: u64,
        n: PointId,
        window_ns: u64,
        block_trades_max: usize,
    ) -> Result<SealOutcome, GatewayError> {
        let boundary = next_boundary(self.sealed_boundary, n, window_ns)?;
        self.check_time(now_ns)?;
        let mut ignored = Vec::new();
        for shard in &mut self.shards {
            shard.check_silence(now_ns, &mut ignored)?;
        }
        self.last_now_ns = now_ns;
        if !self.shards.iter().all(|shard| shard.passed(boundary)) {
            return Ok(SealOutcome::Pending);
        }
        let mut below: Vec<(OrderKey, usize)> = Vec::new();
        for (s, shard) in self.shards.iter().enumerate() {
            below.extend(
                shard
                    .queue
                    .keys()
                    .take_while(|k| k.clock < boundary)
                    .map(|k| (*k, s)),
            );
        }
        below.sort_unstable();
        let sealed = take_sealed(&below, block_trades_max, now_ns, |(key, s)| {
            let (trade_id, late) = self.shards[*s].dequeue(key)?;
            Some((*key, trade_id, late))
        });
        self.sealed_key_max = sealed_postcondition(&sealed, boundary, self.sealed_key_max);
        self.sealed_boundary = Some(boundary);
        for shard in &mut self.shards {
            shard.sealed_boundary = Some(boundary);
        }
        Ok(sealed)
    }

    fn merge(&mut self, now_ns: u64, events: &mut Vec<OrderingEvent>) {
        let mut global = Horizon::Everything;
        for shard in &mut self.shards {
            let h = shard.horizon();
            global = global.min(h);
            for (key, trade_id) in shard.take_admitted(h) {
                self.master.insert(key, trade_id);
            }
        }
        while let Some(entry) = self.master.first_entry() {
            if !global.admits(entry.key()) {
                break;
            }
            let (key, trade_id) = entry.remove_entry();
            let trade = ForwardedTrade {
                key,
                trade_id,
                late: false,
                forwarded_ns: now_ns,
            };
            assert_forward_order(self.last_forwarded, &trade);
            self.last_forwarded = Some(key);
            events.push(OrderingEvent::Forward(trade));
        }
    }
}

/// Where an accepted trade goes: a trade below the last forwarded key is forwarded at once,
/// flagged late (never silently reordered); any other waits in the queue for its turn.
struct LateCheck {
    last_forwarded: Option<OrderKey>,
    now_ns: u64,
}

impl LateCheck {
    /// Forwards the trade, flagged late, if it is below the last forwarded key; otherwise
    /// returns `true`: the caller queues it.
    fn forward_if_late(
        &self,
        key: OrderKey,
        trade_id: u64,
        events: &mut Vec<OrderingEvent>,
    ) -> bool {
        if self.last_forwarded.is_some_and(|forwarded| key < forwarded) {
            let trade = ForwardedTrade {
                key,
                trade_id,
                late: true,
                forwarded_ns: self.now_ns,
            };
            assert_forward_order(self.last_forwarded, &trade);
            events.push(OrderingEvent::Forward(trade));
            false
        } else {
            true
        }
    }
}

/// The forwarding invariant, checked where a key is forwarded (streaming mode): a trade forwarded
/// in order is above every key forwarded before it, and one below is forwarded only flagged late.
fn assert_forward_order(last_forwarded: Option<OrderKey>, trade: &ForwardedTrade) {
    if trade.late {
        debug_assert!(
            last_forwarded.is_some_and(|lf| trade.key < lf),
            "a trade flagged late must be below the last forwarded key: {:?} vs {last_forwarded:?}",
            trade.key
        );
    } else {
        debug_assert!(
            last_forwarded.is_none_or(|lf| trade.key > lf),
            "forwarded keys never decrease except trades flagged late: {:?} after {last_forwarded:?}",
            trade.key
        );
    }
}

/// A seal's postcondition (cut mode): the block's keys rise, all lie below its boundary, and a
/// trade not flagged late is above every key sealed into an earlier block (what is sealed is
/// taken in key order, and a trade that arrives below a sealed boundary is flagged late).
/// Returns the largest key sealed so far.
fn sealed_postcondition(
    outcome: &SealOutcome,
    boundary: DeliveryClock,
    sealed_key_max: Option<OrderKey>,
) -> Option<OrderKey> {
    let SealOutcome::Sealed { trades, .. } = outcome else {
        return sealed_key_max;
    };
    debug_assert!(trades.windows(2).all(|w| w[0].key < w[1].key));
    debug_assert!(trades.iter().all(|t| t.key.clock < boundary));
    debug_assert!(
        trades
            .iter()
            .all(|t| t.late || sealed_key_max.is_none_or(|max| t.key > max)),
        "a sealed key not flagged late is at or below one sealed earlier ({sealed_key_max:?})"
    );
    sealed_key_max.max(trades.last().map(|t| t.key))
}

/// The boundary ⟨n, window_ns⟩ of the next cut, refused unless it is past the last sealed one.
fn next_boundary(
    sealed: Option<DeliveryClock>,
    n: PointId,
    window_ns: u64,
) -> Result<DeliveryClock, GatewayError> {
    let boundary = DeliveryClock::new(n, window_ns);
    if sealed.is_some_and(|b| boundary <= b) {
        return Err(GatewayError::CutNotAdvancing {
            point: n,
            window_ns,
        });
    }
    Ok(boundary)
}

/// The sealed block: the first `block_trades_max` of `below` (in key order), each removed from
/// its queue by `remove`; the rest are spilled into the next cut. One buffer and the sharded
/// buffer seal through this, so that they cannot differ in what a block holds.
fn take_sealed<T>(
    below: &[T],
    block_trades_max: usize,
    now_ns: u64,
    mut remove: impl FnMut(&T) -> Option<(OrderKey, u64, bool)>,
) -> SealOutcome {
    let mut trades = Vec::with_capacity(below.len().min(block_trades_max));
    for item in below.iter().take(block_trades_max) {
        if let Some((key, trade_id, late)) = remove(item) {
            trades.push(ForwardedTrade {
                key,
                trade_id,
                late,
                forwarded_ns: now_ns,
            });
        }
    }
    SealOutcome::Sealed {
        spilled: below.len() - trades.len(),
        trades,
    }
}
