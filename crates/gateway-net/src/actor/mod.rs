//! The gateway's core task: one actor owns every piece of state (the [`OrderingBuffer`], the
//! queued transactions, the connections' downlink senders, the tip); connection tasks only read
//! and write frames and hand decoded messages to it, stamped with their arrival time.
//!
//! The cycle, for block N published at `t_N`: the core tries `seal(now, N, W, block_trades_max)`
//! on every message and every millisecond; once it seals, it sends block N+1's transactions to the
//! node (signed), waits for the node's answer (the block is durable), then publishes block N+1 to
//! every connected participant (header facts, valuations, and each participant's own results) in
//! one frame each, and notes `t_{N+1}` for round-trip estimates. Sealing and publication are in
//! `publish`; this file holds the state and the handling of each input.

mod publish;

use crate::config::{CutMode, GatewayConfig};
use crate::error::GatewayNetError;
use crate::frame::{BlockData, Downlink, NoticeCode, OwnResult, Uplink};
use crate::journal::{Journal, ParticipantEvent};
use crate::metrics::GatewayMetrics;
use crate::node_link::{NodeLink, NodeLinkError};
use crate::verify::{self, AccountCache, Checked, Refusal};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use walras_gateway::SealReply;
use walras_gateway::{
    GatewayError, OrderingBuffer, OrderingConfig, OrderingEvent, UplinkKind, UplinkMessage,
};

pub(crate) enum CoreInput {
    Connected {
        participant: u32,
        conn: u64,
        /// The last block the participant received before (its Hello says).
        last_height: Option<u64>,
        downlink: mpsc::Sender<Downlink>,
        answer: oneshot::Sender<bool>,
    },
    Disconnected {
        participant: u32,
        conn: u64,
    },
    Message {
        participant: u32,
        conn: u64,
        at_ns: u64,
        message: Uplink,
        /// For a trade, the connection task's part of the check ([`TradeChecker::check`]): its
        /// transaction decoded with the signature's verdict, or why it was refused (it still
        /// proves the participant's clock, but its transaction is not taken).
        trade: Option<Result<Box<Checked>, Refusal>>,
    },
    Committed(Result<SealReply, NodeLinkError>),
}

/// A sealed block on its way to the node.
struct InFlight {
    height: u64,
    sealed_ns: u64,
    /// (participant, seq) of each transaction, in block order.
    members: Vec<(u32, u64)>,
    /// (source, sequence) of each transaction and whether it creates an account, in block order.
    slots: Vec<((u64, u64), bool)>,
}

/// A trade waiting for a block.
struct QueuedTrade {
    participant: u32,
    seq: u64,
    transaction: Vec<u8>,
    /// (source account, sequence number): one waits at a time.
    slot: (u64, u64),
    creates_account: bool,
}

impl QueuedTrade {
    fn new(participant: u32, seq: u64, transaction: Vec<u8>, checked: &Checked) -> QueuedTrade {
        let inner = &checked.signed.transaction;
        QueuedTrade {
            participant,
            seq,
            transaction,
            slot: (inner.source.0, inner.sequence),
            creates_account: matches!(
                inner.operation,
                walras_types::Operation::CreateAccount { .. }
            ),
        }
    }
}

/// One of `participant`'s queued trades left the queue.
fn forget_queued(queued_by: &mut BTreeMap<u32, usize>, participant: u32) {
    if let Some(held) = queued_by.get_mut(&participant) {
        *held -= 1;
        if *held == 0 {
            queued_by.remove(&participant);
        }
    }
}

/// What the core shares with the rest of the process.
pub(crate) struct CoreLinks {
    pub(crate) node: Arc<NodeLink>,
    pub(crate) accounts: Arc<AccountCache>,
    pub(crate) metrics: Arc<GatewayMetrics>,
    pub(crate) journal: Arc<Mutex<Journal>>,
    pub(crate) inputs: mpsc::Sender<CoreInput>,
}

pub(crate) struct Core {
    ordering: OrderingBuffer,
    config: GatewayConfig,
    node: Arc<NodeLink>,
    started: Instant,
    /// Trades waiting for a block, by trade id.
    queued: BTreeMap<u64, QueuedTrade>,
    /// How many of `queued` each participant holds (only participants holding some): timer
    /// mode's per-participant share (cut mode's is the ordering buffer's).
    queued_by: BTreeMap<u32, usize>,
    /// (source, sequence) of every trade queued or in the block on its way to the node: the
    /// mempool's rule, one transaction per slot.
    waiting: BTreeSet<(u64, u64)>,
    /// Account views as of the last published block (shared with the connection tasks).
    accounts: Arc<AccountCache>,
    /// Timer mode: trade ids in arrival order.
    arrival_order: Vec<u64>,
    next_trade_id: u64,
    connections: BTreeMap<u32, (u64, mpsc::Sender<Downlink>)>,
    last_seq: BTreeMap<u32, u64>,
    tip: BlockData,
    /// The last [`REPLAY_BLOCKS_MAX`] published blocks (own results left empty) with every
    /// participant's own results in each: what a reconnecting participant missed.
    history: VecDeque<(BlockData, BTreeMap<u32, Vec<OwnResult>>)>,
    published_ns: u64,
    in_flight: Option<InFlight>,
    metrics: Arc<GatewayMetrics>,
    journal: Arc<Mutex<Journal>>,
    inputs: mpsc::Sender<CoreInput>,
}

/// Downlink frames queued for one participant; a participant that falls this far behind is cut
/// off (its connection closed, counted in `walras_gateway_participants_cut_off_total`).
pub(crate) const DOWNLINK_QUEUE_MAX: usize = 65_536;

/// Blocks the gateway keeps for replay to participants that reconnect.
pub const REPLAY_BLOCKS_MAX: usize = 256;

/// How often the core retries a pending seal (silence detection, timer cuts).
const TICK: Duration = Duration::from_millis(1);

/// How long a stop waits for the node's answer to a batch already sent (the link retries busy
/// answers with at most a second between tries, so this covers several).
pub(crate) const STOP_DRAIN_MAX: Duration = Duration::from_secs(10);

impl Core {
    /// The core at the node's tip `tip`, its clock started at `started`.
    pub(crate) fn new(
        config: GatewayConfig,
        tip: u64,
        started: Instant,
        links: CoreLinks,
    ) -> Result<Core, GatewayError> {
        let mut ordering = OrderingBuffer::new(
            OrderingConfig {
                straggler_threshold_ns: Some(config.straggler_threshold.as_nanos() as u64),
                queue_len_max: config.queue_len_max,
                participant_queue_max: config.share_max(),
                // Points are block heights: nobody can have received a block above the tip.
                clock_point_slack: Some(0),
                ..OrderingConfig::default()
            },
            0..config.participants(),
            0,
        )?;
        ordering.note_point_generated(tip, 0);
        links.metrics.height.set(tip as i64);
        let CoreLinks {
            node,
            accounts,
            metrics,
            journal,
            inputs,
        } = links;
        Ok(Core {
            ordering,
            config,
            node,
            started,
            queued: BTreeMap::new(),
            queued_by: BTreeMap::new(),
            waiting: BTreeSet::new(),
            accounts,
            arrival_order: Vec::new(),
            next_trade_id: 0,
            connections: BTreeMap::new(),
            last_seq: BTreeMap::new(),
            history: VecDeque::new(),
            tip: BlockData {
                height: tip,
                block_hash: [0; 32],
                state_root: [0; 32],
                valuations: Vec::new(),
                own: Vec::new(),
                market: Arc::default(),
            },
            published_ns: 0,
            in_flight: None,
            metrics,
            journal,
            inputs,
        })
    }

    fn now_ns(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    pub(crate) async fn run(
        &mut self,
        mut inputs: mpsc::Receiver<CoreInput>,
        mut stop: oneshot::Receiver<()>,
    ) -> Result<(), GatewayNetError> {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = &mut stop => return self.drain(&mut inputs).await,
                input = inputs.recv() => {
                    let Some(input) = input else { return Ok(()) };
                    self.handle(input)?;
                }
                _ = tick.tick() => {}
            }
            self.try_seal()?;
        }
    }

    /// On stop: seals nothing more, but waits (at most [`STOP_DRAIN_MAX`]) for the node's answer
    /// to a batch already sent, so that when the gateway has stopped, the node's height is
    /// final and every sealed batch's answer was published. Without it the batch's request
    /// went on after the stop and the node committed one more block a moment later.
    async fn drain(
        &mut self,
        inputs: &mut mpsc::Receiver<CoreInput>,
    ) -> Result<(), GatewayNetError> {
        let deadline = tokio::time::Instant::now() + STOP_DRAIN_MAX;
        while let Some(height) = self.in_flight.as_ref().map(|f| f.height) {
            match tokio::time::timeout_at(deadline, inputs.recv()).await {
                Ok(Some(input)) => self.handle(input)?,
                Ok(None) => return Ok(()),
                Err(_) => {
                    tracing::warn!(
                        "stopped without the node's answer to block {height} after {} s; \
                         the node may still commit it (a restarted gateway reads its height)",
                        STOP_DRAIN_MAX.as_secs()
                    );
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn handle(&mut self, input: CoreInput) -> Result<(), GatewayNetError> {
        match input {
            CoreInput::Connected {
                participant,
                conn,
                last_height,
                downlink,
                answer,
            } => {
                let taken = self
                    .connections
                    .get(&participant)
                    .is_some_and(|(_, sender)| !sender.is_closed());
                if taken {
                    let _ = answer.send(false);
                    return Ok(());
                }
                let welcome = Downlink::Welcome {
                    participant,
                    height: self.tip.height,
                    last_seq: self.last_seq.get(&participant).copied(),
                    // The ordering buffer's watermark is the key of the last message it took
                    // from this participant (none in the timer cut, which ignores clocks).
                    last_clock: self
                        .ordering
                        .watermark(participant)
                        .map(|key| key.clock)
                        .unwrap_or_default(),
                };
                let _ = downlink.try_send(welcome);
                for frame in self.catch_up(participant, last_height) {
                    let _ = downlink.try_send(frame);
                }
                self.connections.insert(participant, (conn, downlink));
                self.metrics
                    .participants_connected
                    .set(self.connections.len() as i64);
                let _ = answer.send(true);
            }
            CoreInput::Disconnected { participant, conn } => {
                if self
                    .connections
                    .get(&participant)
                    .is_some_and(|(c, _)| *c == conn)
                {
                    self.connections.remove(&participant);
                    self.metrics
                        .participants_connected
                        .set(self.connections.len() as i64);
                }
            }
            CoreInput::Message {
                participant,
                conn,
                at_ns,
                message,
                trade,
            } => {
                let current = self
                    .connections
                    .get(&participant)
                    .is_some_and(|(c, _)| *c == conn);
                if current {
                    self.on_uplink(participant, at_ns, message, trade)?;
                }
            }
            CoreInput::Committed(result) => {
                let reply = result?;
                self.publish(reply);
            }
        }
        Ok(())
    }

    fn notify(&mut self, participant: u32, seq: Option<u64>, code: NoticeCode, text: String) {
        if let Some((_, sender)) = self.connections.get(&participant) {
            if sender
                .try_send(Downlink::Notice { seq, code, text })
                .is_err()
            {
                // A participant that does not read its downlink is cut off rather than buffered.
                self.cut_off(participant);
            }
        }
    }

    /// Counts a refused trade by its code and tells its participant.
    fn refuse_trade(&mut self, participant: u32, seq: u64, (code, text): Refusal) {
        let counter = match code {
            NoticeCode::BadSignature => &self.metrics.bad_signatures_total,
            NoticeCode::UnknownSource => &self.metrics.unknown_sources_total,
            NoticeCode::Duplicate => &self.metrics.duplicates_total,
            NoticeCode::Replayed => &self.metrics.replays_total,
            NoticeCode::SequenceOutOfWindow => &self.metrics.sequence_window_total,
            NoticeCode::Busy => &self.metrics.busy_total,
            _ => &self.metrics.refused_messages_total,
        };
        counter.inc();
        self.notify(participant, Some(seq), code, text);
    }

    /// Queues an accepted trade's transaction under `trade_id` (timer mode: in arrival order).
    fn take_trade(&mut self, trade_id: u64, trade: QueuedTrade) {
        self.next_trade_id = self.next_trade_id.max(trade_id + 1);
        self.waiting.insert(trade.slot);
        *self.queued_by.entry(trade.participant).or_default() += 1;
        self.queued.insert(trade_id, trade);
        if let CutMode::Timer { .. } = self.config.cut {
            self.arrival_order.push(trade_id);
        }
    }

    fn on_uplink(
        &mut self,
        participant: u32,
        at_ns: u64,
        message: Uplink,
        trade: Option<Result<Box<Checked>, Refusal>>,
    ) -> Result<(), GatewayNetError> {
        let (seq, clock, transaction) = match message {
            Uplink::Hello { .. } => {
                self.metrics.refused_messages_total.inc();
                self.notify(
                    participant,
                    None,
                    NoticeCode::Refused,
                    "a second Hello on one connection".into(),
                );
                return Ok(());
            }
            Uplink::Heartbeat { seq, clock } => {
                self.metrics.heartbeats_received_total.inc();
                (seq, clock, None)
            }
            Uplink::Trade {
                seq,
                clock,
                transaction,
            } => {
                self.metrics.trades_received_total.inc();
                let checked = trade.unwrap_or_else(|| {
                    Err((NoticeCode::Refused, "the trade was not checked".into()))
                });
                // The node's admission rule against the last published block's account view,
                // then one transaction per (source, sequence) waiting.
                let admitted = checked.and_then(|checked| {
                    let source = checked.signed.transaction.source.0;
                    let state = self.accounts.state(source);
                    verify::admit(&checked, state, &self.waiting).map(|()| checked)
                });
                match admitted {
                    Ok(checked) => (
                        seq,
                        clock,
                        Some(QueuedTrade::new(participant, seq, transaction, &checked)),
                    ),
                    Err(refusal) => {
                        // It still proves the participant's clock: count it as a heartbeat.
                        self.refuse_trade(participant, seq, refusal);
                        (seq, clock, None)
                    }
                }
            }
        };
        if let CutMode::Timer { .. } = self.config.cut {
            if self.last_seq.get(&participant).is_some_and(|&l| seq <= l) {
                self.metrics.refused_messages_total.inc();
                self.notify(
                    participant,
                    Some(seq),
                    NoticeCode::Refused,
                    "sequence numbers must increase".into(),
                );
                return Ok(());
            }
            self.last_seq.insert(participant, seq);
            if let Some(trade) = transaction {
                // The same bounds as the ordering buffer's in cut mode, refused the same way:
                // a share per participant and a total.
                let held = self.queued_by.get(&participant).copied().unwrap_or(0);
                let share_max = self.config.share_max();
                if held >= share_max {
                    let error = GatewayError::ShareFull {
                        participant,
                        share_max,
                    };
                    self.refuse_message(participant, seq, error);
                } else if self.queued.len() >= self.config.queue_len_max {
                    let error = GatewayError::QueueFull {
                        queue: "timer",
                        len_max: self.config.queue_len_max,
                    };
                    self.refuse_message(participant, seq, error);
                } else {
                    self.take_trade(self.next_trade_id, trade);
                }
            }
            return Ok(());
        }
        let trade_id = self.next_trade_id;
        let kind = match transaction {
            Some(_) => UplinkKind::Trade { trade_id },
            None => UplinkKind::Heartbeat,
        };
        let msg = UplinkMessage {
            participant,
            seq,
            clock,
            sent_ns: 0,
            kind,
        };
        match self.ordering.on_message_for_cut(at_ns, &msg) {
            Ok(events) => {
                self.last_seq.insert(participant, seq);
                if let Some(trade) = transaction {
                    self.take_trade(trade_id, trade);
                }
                self.on_events(events);
            }
            Err(GatewayError::TimeWentBackwards { .. }) => {
                // Arrival stamps are taken before the message crosses the channel, so two
                // connections can hand them over out of order by a few microseconds: feed the
                // core the later of the two (the message did arrive by then).
                let now = self.now_ns();
                return self.on_uplink_at_now(participant, now, msg, transaction);
            }
            Err(error) => self.refuse_message(participant, seq, error),
        }
        Ok(())
    }

    /// Counts a message the ordering buffer refused and tells its participant, by reason.
    fn refuse_message(&mut self, participant: u32, seq: u64, error: GatewayError) {
        match error {
            GatewayError::ClockAhead { point, latest, .. } => {
                self.metrics.clock_ahead_total.inc();
                self.notify(
                    participant,
                    Some(seq),
                    NoticeCode::ClockAhead,
                    format!(
                        "the clock names block {point}, but the last block published is \
                         {latest}: refused (stamp messages with the clock of a delivered block)"
                    ),
                );
            }
            GatewayError::ShareFull { share_max, .. } => {
                self.metrics.share_full_total.inc();
                self.notify(
                    participant,
                    Some(seq),
                    NoticeCode::ShareFull,
                    format!(
                        "you hold your share of {share_max} trades in the ordering buffer; send \
                         it again once a block has taken some"
                    ),
                );
            }
            GatewayError::QueueFull { len_max, .. } => {
                self.metrics.queue_overflows_total.inc();
                self.notify(
                    participant,
                    Some(seq),
                    NoticeCode::QueueFull,
                    format!(
                        "the ordering buffer holds its limit of {len_max} trades; send it again"
                    ),
                );
            }
            error => {
                self.metrics.refused_messages_total.inc();
                self.notify(
                    participant,
                    Some(seq),
                    NoticeCode::Refused,
                    error.to_string(),
                );
            }
        }
    }

    fn on_uplink_at_now(
        &mut self,
        participant: u32,
        now_ns: u64,
        msg: UplinkMessage,
        transaction: Option<QueuedTrade>,
    ) -> Result<(), GatewayNetError> {
        match self.ordering.on_message_for_cut(now_ns, &msg) {
            Ok(events) => {
                self.last_seq.insert(participant, msg.seq);
                if let (Some(trade), UplinkKind::Trade { trade_id }) = (transaction, msg.kind) {
                    self.take_trade(trade_id, trade);
                }
                self.on_events(events);
            }
            Err(error) => self.refuse_message(participant, msg.seq, error),
        }
        Ok(())
    }

    fn on_events(&mut self, events: Vec<OrderingEvent>) {
        for event in events {
            match event {
                OrderingEvent::StragglerDetected {
                    participant,
                    at_ns,
                    reason,
                } => {
                    self.metrics.stragglers_detected_total.inc();
                    self.metrics.stragglers.inc();
                    self.journal_push(ParticipantEvent::Straggler { participant, at_ns });
                    tracing::info!("participant {participant} is a straggler: {reason:?}");
                    self.notify(
                        participant,
                        None,
                        NoticeCode::Straggler,
                        format!(
                            "the gateway no longer waits for you ({reason:?}); trades may be late"
                        ),
                    );
                }
                OrderingEvent::StragglerRejoined { participant, at_ns } => {
                    self.metrics.straggler_rejoins_total.inc();
                    self.metrics.stragglers.dec();
                    self.journal_push(ParticipantEvent::Rejoined { participant, at_ns });
                    tracing::info!("participant {participant} rejoined");
                    self.notify(
                        participant,
                        None,
                        NoticeCode::Rejoined,
                        "the gateway waits for you again".into(),
                    );
                }
                OrderingEvent::Forward(_) => {}
            }
        }
    }

    fn journal_push(&self, event: ParticipantEvent) {
        self.journal
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .events
            .push(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Timer mode's share counts: a participant leaves the map when its last queued trade
    /// leaves the queue, and one participant's trades never touch another's count.
    #[test]
    fn queued_counts_follow_each_participants_trades() {
        let mut queued_by: BTreeMap<u32, usize> = BTreeMap::new();
        for participant in [1, 1, 2] {
            *queued_by.entry(participant).or_default() += 1;
        }
        forget_queued(&mut queued_by, 1);
        assert_eq!(queued_by.get(&1), Some(&1));
        assert_eq!(queued_by.get(&2), Some(&1));
        forget_queued(&mut queued_by, 1);
        assert_eq!(
            queued_by.get(&1),
            None,
            "a participant holding none is forgotten"
        );
        forget_queued(&mut queued_by, 3);
        assert_eq!(queued_by.len(), 1, "an unknown participant changes nothing");
    }
}
