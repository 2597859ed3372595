//! Release buffer (DBO §4.1.2 batching and pacing, §5.1, App. D).
//!
//! One per participant. Market-data points arrive in order, tagged with their batch; a batch is
//! delivered whole once its last point has arrived, and consecutive deliveries are at least δ
//! apart: `release = max(arrival of the last point, previous release + δ)`. Delivering a batch sets
//! the delivery clock to ⟨last point of the batch, 0⟩. A retransmitted point (App. D) is handed to
//! the participant at once but never moves the clock. Trades are stamped with the clock at their
//! submission time, heartbeats with the clock at their scheduled time (every τ), and both leave on
//! one stream with one sequence counter, so the stream's keys are strictly increasing.
//!
//! The buffer never reads a clock: the caller passes `now_ns` and must call [`ReleaseBuffer::on_tick`]
//! at [`ReleaseBuffer::next_wakeup_ns`] (deliveries and heartbeats are stamped with their scheduled
//! time, not with the time of the call).

use std::collections::VecDeque;

use serde::Serialize;

use crate::clock::{DeliveryClock, OrderKey, ParticipantId, PointId};
use crate::error::GatewayError;

/// Release-buffer parameters (all times in ns).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReleaseConfig {
    /// δ: the horizon; minimum gap between two batch deliveries.
    pub delta_ns: u64,
    /// τ: heartbeat period.
    pub tau_ns: u64,
    /// Pacing on (the paper) or off (only for showing Corollary 1's counter-example).
    pub pacing: bool,
    /// Complete batches waiting for their release slot.
    pub pending_batches_max: usize,
    /// Points in the batch being assembled.
    pub batch_points_max: usize,
}

impl ReleaseConfig {
    pub fn new(delta_ns: u64, tau_ns: u64) -> Self {
        Self {
            delta_ns,
            tau_ns,
            pacing: true,
            pending_batches_max: 65_536,
            batch_points_max: 65_536,
        }
    }
}

/// One market-data point as it arrives from the exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MarketPoint {
    /// Point id, strictly increasing in generation order, starting at 1.
    pub id: PointId,
    /// Batch number, non-decreasing in generation order.
    pub batch: u64,
    /// The exchange marks the last point of each batch.
    pub last_in_batch: bool,
    /// Re-sent over the slow path after a loss (App. D): delivered, never advances the clock.
    pub retransmission: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum UplinkKind {
    Heartbeat,
    Trade { trade_id: u64 },
}

/// A message on the participant's one ordered uplink stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct UplinkMessage {
    pub participant: ParticipantId,
    pub seq: u64,
    pub clock: DeliveryClock,
    /// When the release buffer sent it (its own time base; informative only).
    pub sent_ns: u64,
    pub kind: UplinkKind,
}

impl UplinkMessage {
    pub fn key(&self) -> OrderKey {
        OrderKey {
            clock: self.clock,
            participant: self.participant,
            seq: self.seq,
        }
    }
}

/// What the caller must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReleaseAction {
    /// Hand these points to the participant at `at_ns` (a whole batch).
    DeliverBatch {
        at_ns: u64,
        batch: u64,
        points: Vec<PointId>,
    },
    /// Hand a retransmitted point to the participant; the clock did not move.
    DeliverRetransmission { at_ns: u64, point: PointId },
    /// Send this message to the ordering buffer.
    Send(UplinkMessage),
}

#[derive(Clone, Debug)]
struct ReadyBatch {
    batch: u64,
    points: Vec<PointId>,
    release_ns: u64,
}

#[derive(Clone, Debug)]
pub struct ReleaseBuffer {
    participant: ParticipantId,
    config: ReleaseConfig,
    open: Option<(u64, Vec<PointId>)>,
    ready: VecDeque<ReadyBatch>,
    /// Release time of the last batch scheduled (delivered or queued).
    last_release_ns: Option<u64>,
    clock_point: PointId,
    clock_since_ns: u64,
    highest_point: PointId,
    seq_next: u64,
    heartbeat_next_ns: u64,
    last_now_ns: u64,
    /// No message is stamped below this: the clock the gateway last saw from this participant,
    /// possibly from another process (see [`Self::continue_after`]).
    clock_floor: DeliveryClock,
}

impl ReleaseBuffer {
    pub fn new(
        participant: ParticipantId,
        config: ReleaseConfig,
        start_ns: u64,
    ) -> Result<Self, GatewayError> {
        if config.delta_ns == 0 {
            return Err(GatewayError::InvalidConfig("delta_ns must be positive"));
        }
        if config.tau_ns == 0 {
            return Err(GatewayError::InvalidConfig("tau_ns must be positive"));
        }
        if config.pending_batches_max == 0 || config.batch_points_max == 0 {
            return Err(GatewayError::InvalidConfig(
                "release buffer limits must be positive",
            ));
        }
        Ok(Self {
            participant,
            config,
            open: None,
            ready: VecDeque::new(),
            last_release_ns: None,
            clock_point: 0,
            clock_since_ns: start_ns,
            highest_point: 0,
            seq_next: 0,
            heartbeat_next_ns: start_ns,
            last_now_ns: start_ns,
            clock_floor: DeliveryClock::default(),
        })
    }

    /// Goes on after `last_seq` and `last_clock`, the last sequence number and delivery clock
    /// the gateway received from this participant (its Welcome says so): a new process of a
    /// participant the gateway heard from before would otherwise start at sequence 0 and clock
    /// point 0 again, and every message until it passed the old ones would be refused as out of
    /// order. Neither ever goes back.
    ///
    /// The clock is a floor, not a reset: a new process that is handed the same block the old
    /// one had (the gateway's tip, when no block came since) measures its elapsed time from its
    /// own delivery, so it would stamp a trade answering at once *below* the old process's last
    /// heartbeat. Stamped at the floor instead, the trade orders after everything the old
    /// process sent, which is where it truly is (later in time), never earlier.
    pub fn continue_after(&mut self, last_seq: u64, last_clock: DeliveryClock) {
        self.seq_next = self.seq_next.max(last_seq.saturating_add(1));
        self.clock_floor = self.clock_floor.max(last_clock);
    }

    pub fn participant(&self) -> ParticipantId {
        self.participant
    }

    /// The delivery clock at `now_ns`, counting only deliveries already made (call `on_tick`
    /// first), and never below the clock the gateway last saw ([`Self::continue_after`]).
    pub fn clock_at(&self, now_ns: u64) -> DeliveryClock {
        let measured =
            DeliveryClock::new(self.clock_point, now_ns.saturating_sub(self.clock_since_ns));
        measured.max(self.clock_floor)
    }

    /// When the caller must call [`Self::on_tick`] next.
    pub fn next_wakeup_ns(&self) -> u64 {
        match self.ready.front() {
            Some(b) => b.release_ns.min(self.heartbeat_next_ns),
            None => self.heartbeat_next_ns,
        }
    }

    /// Complete batches waiting for their release slot (the backlog of Fig. 7).
    pub fn backlog_batches(&self) -> usize {
        self.ready.len()
    }

    /// Deliver every batch and send every heartbeat due by `now_ns`, in time order.
    pub fn on_tick(&mut self, now_ns: u64) -> Result<Vec<ReleaseAction>, GatewayError> {
        self.enter(now_ns)?;
        let mut actions = Vec::new();
        self.advance(now_ns, &mut actions);
        Ok(actions)
    }

    /// A point arrived from the exchange at `now_ns`.
    pub fn on_point(
        &mut self,
        now_ns: u64,
        point: MarketPoint,
    ) -> Result<Vec<ReleaseAction>, GatewayError> {
        self.enter(now_ns)?;
        if let Some((open_batch, _)) = &self.open {
            if point.batch < *open_batch && !point.retransmission && point.id > self.highest_point {
                return Err(GatewayError::BatchOutOfOrder {
                    point: point.id,
                    batch: point.batch,
                    open_batch: *open_batch,
                });
            }
        }
        if !point.retransmission
            && point.id > self.highest_point
            && self.ready.len() >= self.config.pending_batches_max
        {
            return Err(GatewayError::QueueFull {
                queue: "release buffer batches",
                len_max: self.config.pending_batches_max,
            });
        }
        let mut actions = Vec::new();
        self.advance(now_ns, &mut actions);
        if point.retransmission || point.id <= self.highest_point {
            // App. D: a re-sent (or duplicate) point is handed over but never advances the clock.
            actions.push(ReleaseAction::DeliverRetransmission {
                at_ns: now_ns,
                point: point.id,
            });
            return Ok(actions);
        }
        self.highest_point = point.id;
        if let Some((open_batch, _)) = &self.open {
            if *open_batch != point.batch {
                // The open batch's last point was lost: the next batch proves it complete.
                self.close_open_batch(now_ns);
            }
        }
        let (_, points) = self.open.get_or_insert_with(|| (point.batch, Vec::new()));
        if points.len() >= self.config.batch_points_max {
            return Err(GatewayError::QueueFull {
                queue: "release buffer open batch",
                len_max: self.config.batch_points_max,
            });
        }
        points.push(point.id);
        if point.last_in_batch {
            self.close_open_batch(now_ns);
        }
        self.advance(now_ns, &mut actions);
        Ok(actions)
    }

    /// The participant submitted a trade at `now_ns`: stamp it with the delivery clock and send it.
    pub fn on_trade(
        &mut self,
        now_ns: u64,
        trade_id: u64,
    ) -> Result<Vec<ReleaseAction>, GatewayError> {
        self.enter(now_ns)?;
        let mut actions = Vec::new();
        self.advance(now_ns, &mut actions);
        let msg = self.message(now_ns, UplinkKind::Trade { trade_id });
        actions.push(ReleaseAction::Send(msg));
        Ok(actions)
    }

    fn enter(&mut self, now_ns: u64) -> Result<(), GatewayError> {
        if now_ns < self.last_now_ns {
            return Err(GatewayError::TimeWentBackwards {
                now_ns,
                last_ns: self.last_now_ns,
            });
        }
        self.last_now_ns = now_ns;
        Ok(())
    }

    fn close_open_batch(&mut self, arrival_ns: u64) {
        let Some((batch, points)) = self.open.take() else {
            return;
        };
        let release_ns = match (self.config.pacing, self.last_release_ns) {
            (true, Some(prev)) => arrival_ns.max(prev.saturating_add(self.config.delta_ns)),
            _ => arrival_ns,
        };
        debug_assert!(self.last_release_ns.is_none_or(|prev| release_ns >= prev));
        self.last_release_ns = Some(release_ns);
        self.ready.push_back(ReadyBatch {
            batch,
            points,
            release_ns,
        });
    }

    fn advance(&mut self, now_ns: u64, actions: &mut Vec<ReleaseAction>) {
        loop {
            let batch_due = self
                .ready
                .front()
                .map(|b| b.release_ns)
                .filter(|&t| t <= now_ns);
            let heartbeat_due = Some(self.heartbeat_next_ns).filter(|&t| t <= now_ns);
            match (batch_due, heartbeat_due) {
                // A delivery and a heartbeat at the same instant: deliver first, so the heartbeat
                // carries the clock as of that instant.
                (Some(b), Some(h)) if b <= h => self.deliver_front(actions),
                (Some(_), None) => self.deliver_front(actions),
                (_, Some(h)) => {
                    let msg = self.message(h, UplinkKind::Heartbeat);
                    actions.push(ReleaseAction::Send(msg));
                    self.heartbeat_next_ns = h.saturating_add(self.config.tau_ns);
                }
                (None, None) => break,
            }
        }
    }

    fn deliver_front(&mut self, actions: &mut Vec<ReleaseAction>) {
        let Some(batch) = self.ready.pop_front() else {
            return;
        };
        let Some(&last) = batch.points.last() else {
            return;
        };
        debug_assert!(last > self.clock_point, "a delivery must advance the clock");
        self.clock_point = last;
        self.clock_since_ns = batch.release_ns;
        actions.push(ReleaseAction::DeliverBatch {
            at_ns: batch.release_ns,
            batch: batch.batch,
            points: batch.points,
        });
    }

    fn message(&mut self, at_ns: u64, kind: UplinkKind) -> UplinkMessage {
        let seq = self.seq_next;
        self.seq_next += 1;
        UplinkMessage {
            participant: self.participant,
            seq,
            clock: self.clock_at(at_ns),
            sent_ns: at_ns,
            kind,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(id: u64, batch: u64, last: bool) -> MarketPoint {
        MarketPoint {
            id,
            batch,
            last_in_batch: last,
            retransmission: false,
        }
    }

    fn deliveries(actions: &[ReleaseAction]) -> Vec<(u64, Vec<u64>)> {
        actions
            .iter()
            .filter_map(|a| match a {
                ReleaseAction::DeliverBatch { at_ns, points, .. } => Some((*at_ns, points.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_batch_is_delivered_whole_when_its_last_point_arrives() {
        let mut rb = ReleaseBuffer::new(0, ReleaseConfig::new(20, 1_000_000), 0).unwrap();
        rb.on_tick(0).unwrap();
        assert!(deliveries(&rb.on_point(5, point(1, 0, false)).unwrap()).is_empty());
        let d = deliveries(&rb.on_point(9, point(2, 0, true)).unwrap());
        assert_eq!(d, vec![(9, vec![1, 2])]);
        assert_eq!(rb.clock_at(15), DeliveryClock::new(2, 6));
    }

    /// Trigger (issue 28 item 6): a second `walras gateway participant` process for one
    /// participant started its sequence numbers at 0 again; the gateway, which had heard 299,
    /// refused every message as out of order. The Welcome's last number now continues them.
    #[test]
    fn a_new_buffer_continues_after_the_gateways_last_sequence_number() {
        let mut rb = ReleaseBuffer::new(0, ReleaseConfig::new(20, 1_000_000), 0).unwrap();
        rb.continue_after(299, DeliveryClock::default());
        let sent = |actions: Vec<ReleaseAction>| -> Vec<u64> {
            actions
                .iter()
                .filter_map(|action| match action {
                    ReleaseAction::Send(message) => Some(message.seq),
                    _ => None,
                })
                .collect()
        };
        // A heartbeat is due first, then the trade.
        assert_eq!(sent(rb.on_trade(1, 7).unwrap()), vec![300, 301]);
        rb.continue_after(5, DeliveryClock::default());
        assert_eq!(sent(rb.on_trade(2, 8).unwrap()), vec![302], "never back");
    }

    /// Trigger (CI of stop 53, `two_participant_processes_trade_through_a_gateway_and_see_their_fills`):
    /// a second process for participant 0 was handed the gateway's tip, block 2, the block the
    /// first process had last seen, and answered it 780 µs later; the first process's last
    /// heartbeat had said ⟨2, more than that⟩, so the gateway refused the trade as a clock going
    /// back. A new buffer now stamps nothing below the clock the gateway last saw.
    #[test]
    fn a_new_buffer_stamps_nothing_below_the_clock_the_gateway_last_saw() {
        let mut rb = ReleaseBuffer::new(0, ReleaseConfig::new(20, 1_000), 0).unwrap();
        let seen = DeliveryClock::new(2, 5_000_000);
        rb.continue_after(40, seen);
        let stamps = |actions: Vec<ReleaseAction>| -> Vec<OrderKey> {
            actions
                .iter()
                .filter_map(|action| match action {
                    ReleaseAction::Send(message) => Some(message.key()),
                    _ => None,
                })
                .collect()
        };
        // Before any block: heartbeats at the floor, after the gateway's last key.
        let mut keys = stamps(rb.on_tick(2_500).unwrap());
        rb.on_point(3_000, point(2, 2, true)).unwrap();
        let trade = stamps(rb.on_trade(3_780, 1).unwrap());
        assert_eq!(trade.last().map(|key| key.clock), Some(seen), "the trade");
        keys.extend(trade);
        let last_seen = OrderKey {
            clock: seen,
            participant: 0,
            seq: 40,
        };
        assert!(keys.len() >= 3);
        assert!(keys.iter().all(|key| *key > last_seen), "{keys:?}");
        assert!(keys.windows(2).all(|pair| pair[0] < pair[1]), "{keys:?}");
        // Past the floor, the buffer's own clock again.
        assert_eq!(rb.clock_at(5_003_001), DeliveryClock::new(2, 5_000_001));
    }

    #[test]
    fn consecutive_batches_are_released_at_least_delta_apart() {
        let mut rb = ReleaseBuffer::new(0, ReleaseConfig::new(20, 1_000_000), 0).unwrap();
        rb.on_tick(0).unwrap();
        rb.on_point(10, point(1, 0, true)).unwrap();
        assert!(deliveries(&rb.on_point(12, point(2, 1, true)).unwrap()).is_empty());
        assert_eq!(rb.next_wakeup_ns(), 30);
        assert_eq!(deliveries(&rb.on_tick(30).unwrap()), vec![(30, vec![2])]);
    }

    #[test]
    fn a_retransmitted_point_never_advances_the_clock() {
        let mut rb = ReleaseBuffer::new(0, ReleaseConfig::new(20, 1_000_000), 0).unwrap();
        rb.on_tick(0).unwrap();
        rb.on_point(10, point(3, 0, true)).unwrap();
        let before = rb.clock_at(50);
        let a = rb
            .on_point(
                50,
                MarketPoint {
                    id: 2,
                    batch: 0,
                    last_in_batch: true,
                    retransmission: true,
                },
            )
            .unwrap();
        assert_eq!(
            a,
            vec![ReleaseAction::DeliverRetransmission {
                at_ns: 50,
                point: 2
            }]
        );
        let b = rb
            .on_point(
                50,
                MarketPoint {
                    id: 7,
                    batch: 9,
                    last_in_batch: true,
                    retransmission: true,
                },
            )
            .unwrap();
        assert_eq!(
            b,
            vec![ReleaseAction::DeliverRetransmission {
                at_ns: 50,
                point: 7
            }]
        );
        assert_eq!(rb.clock_at(50), before);
    }

    #[test]
    fn heartbeats_leave_every_tau_on_the_same_stream_as_trades() {
        let mut rb = ReleaseBuffer::new(4, ReleaseConfig::new(20, 10), 0).unwrap();
        let mut keys = Vec::new();
        for a in rb
            .on_tick(25)
            .unwrap()
            .into_iter()
            .chain(rb.on_trade(27, 99).unwrap())
        {
            if let ReleaseAction::Send(m) = a {
                keys.push((m.sent_ns, m.key()));
            }
        }
        let times: Vec<u64> = keys.iter().map(|k| k.0).collect();
        assert_eq!(times, vec![0, 10, 20, 27]);
        assert!(keys.windows(2).all(|w| w[0].1 < w[1].1));
    }

    #[test]
    fn a_lost_last_point_is_closed_by_the_first_point_of_the_next_batch() {
        let mut rb = ReleaseBuffer::new(0, ReleaseConfig::new(20, 1_000_000), 0).unwrap();
        rb.on_tick(0).unwrap();
        rb.on_point(5, point(1, 0, false)).unwrap();
        // Point 2 (the last of batch 0) was lost; point 3 opens batch 1.
        let d = deliveries(&rb.on_point(9, point(3, 1, false)).unwrap());
        assert_eq!(d, vec![(9, vec![1])]);
        assert_eq!(rb.clock_at(9), DeliveryClock::new(1, 0));
    }

    #[test]
    fn a_full_release_queue_is_a_typed_error() {
        let mut config = ReleaseConfig::new(1_000, 1_000_000);
        config.pending_batches_max = 1;
        let mut rb = ReleaseBuffer::new(0, config, 0).unwrap();
        rb.on_tick(0).unwrap();
        rb.on_point(1, point(1, 0, true)).unwrap(); // delivered at once
        rb.on_point(2, point(2, 1, true)).unwrap(); // waits for its slot
        let err = rb.on_point(3, point(3, 2, true)).unwrap_err();
        assert!(matches!(err, GatewayError::QueueFull { len_max: 1, .. }));
        assert_eq!(rb.backlog_batches(), 1);
    }

    #[test]
    fn time_going_backwards_is_an_error_and_changes_nothing() {
        let mut rb = ReleaseBuffer::new(0, ReleaseConfig::new(20, 10), 100).unwrap();
        assert!(matches!(
            rb.on_trade(50, 1),
            Err(GatewayError::TimeWentBackwards { .. })
        ));
        assert_eq!(rb.next_wakeup_ns(), 100);
    }
}
