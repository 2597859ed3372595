//! Sealing a block (`seal(N, W)` in cut mode, or the timer's cut), sending it to the node,
//! and, once the node answered that it is durable, publishing it to every participant; a
//! participant that reconnects is caught up from the blocks kept for replay.

use super::{forget_queued, Core, CoreInput, InFlight, DOWNLINK_QUEUE_MAX, REPLAY_BLOCKS_MAX};
use crate::config::CutMode;
use crate::error::GatewayNetError;
use crate::frame::{BlockData, Downlink, NoticeCode, OwnResult};
use crate::journal::SealRecord;
use std::collections::BTreeMap;
use std::sync::Arc;
use walras_gateway::{GatewayStats, OrderingEvent, SealOutcome, SealReply};

impl Core {
    /// Seals block N+1 if it is due and nothing is in flight, and sends it to the node.
    pub(super) fn try_seal(&mut self) -> Result<(), GatewayNetError> {
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
    pub(super) fn publish(&mut self, reply: SealReply) {
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
    pub(super) fn catch_up(&self, participant: u32, last_height: Option<u64>) -> Vec<Downlink> {
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
    pub(super) fn cut_off(&mut self, participant: u32) {
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
