//! The gateway's core task: one actor owns every piece of state (the [`OrderingBuffer`], the
//! queued transactions, the connections' downlink senders, the tip); connection tasks only read
//! and write frames and hand decoded messages to it, stamped with their arrival time.
//!
//! The cycle, for block N published at `t_N`: the core tries `seal(now, N, W, block_trades_max)`
//! on every message and every millisecond; once it seals, it sends block N+1's transactions to the
//! node (signed), waits for the node's answer (the block is durable), then publishes block N+1 to
//! every connected participant (header facts, valuations, and each participant's own results) in
//! one frame each, and notes `t_{N+1}` for round-trip estimates.

use crate::config::{CutMode, GatewayConfig};
use crate::error::GatewayNetError;
use crate::frame::{BlockData, Downlink, NoticeCode, OwnResult, Uplink};
use crate::journal::{Journal, ParticipantEvent, SealRecord};
use crate::metrics::GatewayMetrics;
use crate::node_link::{NodeLink, NodeLinkError};
use crate::verify::{self, AccountCache, Checked, Refusal};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use walras_gateway::{
    GatewayError, OrderingBuffer, OrderingConfig, OrderingEvent, SealOutcome, UplinkKind,
    UplinkMessage,
};
use walras_gateway::{GatewayStats, SealReply};

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
                _ = &mut stop => return Ok(()),
                input = inputs.recv() => {
                    let Some(input) = input else { return Ok(()) };
                    self.handle(input)?;
                }
                _ = tick.tick() => {}
            }
            self.try_seal()?;
        }
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

    /// Seals block N+1 if it is due and nothing is in flight, and sends it to the node.
    fn try_seal(&mut self) -> Result<(), GatewayNetError> {
        if self.in_flight.is_some() {
            return Ok(());
        }
        let now = self.now_ns();
        let n = self.tip.height;
        let (ids, late, spilled): (Vec<u64>, Vec<bool>, usize) = match self.config.cut {
            CutMode::Dbo => {
                // Never seal N+1 sooner than W after N's publication. Non-stragglers cannot pass
                // ⟨N, W⟩ sooner anyway; without this floor, a gateway whose participants are all
                // stragglers (Horizon::Everything) would seal on every tick, publish blocks far
                // faster than the release buffers deliver them (δ = W apart), and the growing
                // backlog would keep every participant a straggler for good.
                if now < self.published_ns + self.config.window.as_nanos() as u64 {
                    return Ok(());
                }
                // Silence detection runs inside `seal`; report what it found.
                let before: Vec<bool> = (0..self.config.participants())
                    .map(|p| self.ordering.is_straggler(p))
                    .collect();
                let outcome = self.ordering.seal(
                    now,
                    n,
                    self.config.window.as_nanos() as u64,
                    self.config.block_trades_max,
                );
                for (p, was) in before.into_iter().enumerate() {
                    let p = p as u32;
                    if !was && self.ordering.is_straggler(p) {
                        self.on_events(vec![OrderingEvent::StragglerDetected {
                            participant: p,
                            at_ns: now,
                            reason: walras_gateway::StragglerReason::Silence {
                                silent_ns: self.config.straggler_threshold.as_nanos() as u64,
                            },
                        }]);
                    }
                }
                match outcome? {
                    SealOutcome::Pending => return Ok(()),
                    SealOutcome::Sealed { trades, spilled } => (
                        trades.iter().map(|t| t.trade_id).collect(),
                        trades.iter().map(|t| t.late).collect(),
                        spilled,
                    ),
                }
            }
            CutMode::Timer { interval } => {
                if now < self.published_ns + interval.as_nanos() as u64 {
                    return Ok(());
                }
                let take = self.arrival_order.len().min(self.config.block_trades_max);
                let ids: Vec<u64> = self.arrival_order.drain(..take).collect();
                let late = vec![false; ids.len()];
                (ids, late, self.arrival_order.len())
            }
        };
        let mut members = Vec::with_capacity(ids.len());
        let mut slots = Vec::with_capacity(ids.len());
        let mut transactions = Vec::with_capacity(ids.len());
        let mut late_count = 0;
        for (id, late) in ids.iter().zip(late) {
            let Some(trade) = self.queued.remove(id) else {
                continue;
            };
            forget_queued(&mut self.queued_by, trade.participant);
            let (participant, seq, transaction) = (trade.participant, trade.seq, trade.transaction);
            slots.push((trade.slot, trade.creates_account));
            if late {
                late_count += 1;
                self.metrics.late_trades_total.inc();
                self.notify(
                    participant,
                    Some(seq),
                    NoticeCode::Late,
                    format!(
                        "arrived after its block was sealed; it goes into block {}",
                        n + 1
                    ),
                );
            }
            members.push((participant, seq));
            transactions.push(transaction);
        }
        self.metrics.trades_spilled_last.set(spilled as i64);
        self.journal
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .seals
            .push(SealRecord {
                height: n + 1,
                previous_published_ns: self.published_ns,
                sealed_ns: now,
                trades: members.len(),
                late: late_count,
                spilled,
            });
        let delay_us = (now - self.published_ns.min(now)) / 1_000;
        self.metrics.seal_wait_micros_last.set(delay_us as i64);
        let stats = GatewayStats {
            participants_configured: self.config.participants(),
            participants_connected: self.connections.len() as u32,
            stragglers: self.metrics.stragglers.get().max(0) as u32,
            late_trades_total: self.metrics.late_trades_total.get(),
            queue_full_total: self.metrics.queue_overflows_total.get(),
            last_seal_delay_us: delay_us,
        };
        self.in_flight = Some(InFlight {
            height: n + 1,
            sealed_ns: now,
            members,
            slots,
        });
        let node = self.node.clone();
        let inputs = self.inputs.clone();
        tokio::spawn(async move {
            let result = node.commit(n + 1, stats, transactions).await;
            let _ = inputs.send(CoreInput::Committed(result)).await;
        });
        Ok(())
    }

    /// The node committed block N+1: publish it to every participant, with its own results.
    fn publish(&mut self, reply: SealReply) {
        let Some(in_flight) = self.in_flight.take() else {
            return;
        };
        let now = self.now_ns();
        debug_assert_eq!(reply.height, in_flight.height);
        let dropped: BTreeMap<u32, &str> = reply
            .dropped
            .iter()
            .map(|(index, reason)| (*index, reason.as_str()))
            .collect();
        let mut own: BTreeMap<u32, Vec<OwnResult>> = BTreeMap::new();
        for (index, (participant, seq)) in in_flight.members.iter().enumerate() {
            own.entry(*participant).or_default().push(OwnResult {
                seq: *seq,
                dropped: dropped.get(&(index as u32)).map(|r| r.to_string()),
            });
        }
        self.tip = BlockData {
            height: reply.height,
            block_hash: reply.block_hash,
            state_root: reply.state_root,
            valuations: reply.valuations,
            own: Vec::new(),
            market: Arc::new(reply.market),
        };
        self.published_ns = now;
        // The account views move with the block before anything else is checked: its accepted
        // transactions' sequence numbers are used now, and its slots wait no more.
        let mut accepted = Vec::with_capacity(in_flight.slots.len());
        let mut creates_accounts = false;
        for (index, (slot, creates)) in in_flight.slots.iter().enumerate() {
            self.waiting.remove(slot);
            if !dropped.contains_key(&(index as u32)) {
                accepted.push(*slot);
                creates_accounts |= *creates;
            }
        }
        self.accounts
            .note_block(reply.height, &accepted, creates_accounts);
        let retries = self.node.seal_retries();
        self.metrics
            .node_retries_total
            .inc_by(retries.saturating_sub(self.metrics.node_retries_total.get()));
        self.ordering.note_point_generated(reply.height, now);
        self.metrics.blocks_sealed_total.inc();
        self.metrics
            .trades_sealed_total
            .inc_by(in_flight.members.len() as u64);
        self.metrics.height.set(reply.height as i64);
        tracing::debug!(
            "block {} published {} µs after its seal",
            reply.height,
            (now - in_flight.sealed_ns.min(now)) / 1_000
        );
        if self.history.len() == REPLAY_BLOCKS_MAX {
            self.history.pop_front();
        }
        self.history.push_back((self.tip.clone(), own.clone()));
        let participants: Vec<u32> = self.connections.keys().copied().collect();
        for participant in participants {
            let block = BlockData {
                own: own.remove(&participant).unwrap_or_default(),
                ..self.tip.clone()
            };
            self.metrics
                .own_results_sent_total
                .inc_by(block.own.len() as u64);
            let full = self
                .connections
                .get(&participant)
                .is_some_and(|(_, sender)| {
                    sender
                        .try_send(Downlink::Block(block))
                        .inspect_err(|e| tracing::warn!("participant {participant}: downlink {e}"))
                        .is_err()
                });
            if full {
                self.cut_off(participant);
            }
        }
        if !own.is_empty() {
            let left: Vec<(u32, usize)> = own.iter().map(|(p, v)| (*p, v.len())).collect();
            tracing::debug!(
                "block {}: own results of participants not connected: {left:?}; connected: {:?}",
                reply.height,
                self.connections.keys().collect::<Vec<_>>()
            );
        }
        self.metrics
            .participants_connected
            .set(self.connections.len() as i64);
    }
}

impl Core {
    /// What a participant connecting after block `last_height` is sent: every block it missed
    /// that the history still holds, with its own results in each; if it missed more than that
    /// (or says nothing), a Notice saying so and the tip block.
    fn catch_up(&self, participant: u32, last_height: Option<u64>) -> Vec<Downlink> {
        let missed: Vec<Downlink> = match last_height {
            Some(last) => self
                .history
                .iter()
                .filter(|(block, _)| block.height > last)
                .map(|(block, own)| {
                    Downlink::Block(BlockData {
                        own: own.get(&participant).cloned().unwrap_or_default(),
                        ..block.clone()
                    })
                })
                .collect(),
            None => Vec::new(),
        };
        let oldest = self.history.front().map(|(block, _)| block.height);
        let complete = match (last_height, oldest) {
            (Some(last), Some(oldest)) => last + 1 >= oldest,
            (Some(last), None) => last >= self.tip.height,
            (None, _) => false,
        };
        if complete {
            return missed;
        }
        let mut frames = Vec::new();
        if let Some(last) = last_height.filter(|last| *last < self.tip.height) {
            frames.push(Downlink::Notice {
                seq: None,
                code: NoticeCode::Refused,
                text: format!(
                    "blocks {}..{} are no longer held for replay (the gateway keeps the last \
                     {REPLAY_BLOCKS_MAX}); here is the tip",
                    last + 1,
                    oldest.unwrap_or(self.tip.height)
                ),
            });
        }
        frames.push(Downlink::Block(BlockData {
            own: Vec::new(),
            ..self.tip.clone()
        }));
        frames
    }

    /// Drops a participant whose downlink queue is full; its connection task then closes.
    fn cut_off(&mut self, participant: u32) {
        if self.connections.remove(&participant).is_some() {
            self.metrics.participants_cut_off_total.inc();
            self.metrics
                .participants_connected
                .set(self.connections.len() as i64);
            tracing::warn!(
                "participant {participant} fell {DOWNLINK_QUEUE_MAX} frames behind: disconnected"
            );
        }
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
