//! Admission under overload: the commit bound and the one rule that keeps the mempool within
//! it (see docs/node.md, "Admission under overload").
//!
//! The node promises that a transaction it admits is committed within `commit_bound` of its
//! admission, or dropped (counted, reason `expired`), never committed late. Two parts keep the
//! promise:
//!
//! - admission ([`Overload::pending_max`]): the mempool takes no more than it can commit within
//!   the bound at the commit rate measured over recent blocks ([`DrainEstimate`]), nor more than
//!   its capacity. What is over is refused `mempool_full` (503, `Retry-After` the expected drain
//!   time), before any signature is checked. One rule, one code: "full" means full by count or
//!   by time, whichever is less;
//! - the producer ([`Overload::expiry_cutoff`]): before it takes a block, oldest first, it drops
//!   what was admitted so long ago that its block, at the measured rate, would commit it after
//!   the bound. Nothing a proposed block contains is ever removed: shedding decides what enters
//!   the mempool and what leaves it unproposed, so a block is still a pure function of what it
//!   holds.
//!
//! Pure: no clock, no lock (the node passes instants in and keeps this under a mutex). The
//! estimate is floating point; it decides admission only, never anything committed.

use std::time::{Duration, Instant};

/// What the node does by default: every admitted transaction committed within 2 s.
pub const COMMIT_BOUND_DEFAULT: Duration = Duration::from_secs(2);
/// Of the bound, what admission plans for: the rest absorbs a rate below the estimate, the
/// transaction's own block and the granularity of blocks. At 0.75, a debug build on the
/// shared 2-core VM, 3x overloaded, measured 12.2k/s against 10.3k/s committed and shed 9% of
/// what it admitted at the producer; at 0.5 the in-process overload test still shed 6-11%.
/// Throughput does not suffer from a short queue as long as it holds a full block (the floor).
const ADMISSION_SHARE_OF_BOUND: f64 = 0.4;
/// How much slower than its estimate a block may be before an old transaction in it would
/// commit late: the producer drops by the estimate times this.
const BLOCK_TIME_MARGIN: f64 = 1.25;
/// The floor in CometBFT mode (see `admission_floor` in the crate root).
pub const REPLICATED_FLOOR: usize = 1_000;
/// Weight of the newest block in the commit-rate estimate.
const EWMA_WEIGHT_NEW: f64 = 0.25;

/// Commit throughput measured over recent blocks: an exponentially weighted moving average of
/// transactions per second of block work (from taking the block to reporting it committed;
/// in replicated mode, from one commit to the next).
///
/// Only a block that left at least its own size waiting measures the capacity: the node was
/// the limit. A block that (nearly) emptied the mempool measures what was offered, or, in
/// solo mode, a small block's rate under its fixed cost: both are lower bounds of the
/// capacity, so such a block can raise the estimate but never lower it. (Trigger: in CometBFT
/// mode at half its capacity the rate over CometBFT's cadence followed the offered load, and
/// admission refused 1,344 of 10,000 offered at 0.5x and 8,793 of 20,000 at 1x.) The floor in
/// [`Overload::pending_max`] covers the start, before a full block was measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct DrainEstimate {
    tx_per_s: Option<f64>,
    /// Whether the last block with transactions left at least its own size waiting.
    saturated: bool,
}

impl DrainEstimate {
    /// Records a block of `transactions` that took `busy` to commit, after which
    /// `left_waiting` transactions were pending. Empty blocks say nothing about the rate and
    /// are ignored.
    pub fn record_block(&mut self, transactions: usize, busy: Duration, left_waiting: usize) {
        if transactions == 0 {
            return;
        }
        let sample = transactions as f64 / busy.as_secs_f64().max(1e-6);
        self.record_rate(sample, left_waiting >= transactions);
    }

    /// Records a measured commit rate; `node_was_the_limit` when the block that ended the
    /// measurement left at least its own size waiting.
    pub fn record_rate(&mut self, sample: f64, node_was_the_limit: bool) {
        self.saturated = node_was_the_limit;
        self.tx_per_s = Some(match self.tx_per_s {
            None => sample,
            Some(old) if node_was_the_limit => old + EWMA_WEIGHT_NEW * (sample - old),
            Some(old) => old.max(sample),
        });
    }

    /// Whether the last block with transactions left at least its own size waiting (the node
    /// was the limit).
    pub fn saturated(&self) -> bool {
        self.saturated
    }

    /// Transactions per second, once a block has been measured.
    pub fn tx_per_s(&self) -> Option<f64> {
        self.tx_per_s
    }

    /// How long `transactions` take to commit at the estimated rate (zero before any block).
    pub fn time_for(&self, transactions: usize) -> Duration {
        match self.tx_per_s {
            Some(rate) => Duration::from_secs_f64(transactions as f64 / rate),
            None => Duration::ZERO,
        }
    }
}

/// The commit bound, the mempool's capacity, and the drain estimate.
#[derive(Clone, Debug)]
pub struct Overload {
    pub commit_bound: Duration,
    pub capacity: usize,
    /// Admission never refuses below this many pending for want of time: one full block.
    /// A block has a fixed cost (clearing, the state root, a synchronous commit), so the rate
    /// measured on small blocks is low; a limit below a full block keeps blocks small and the
    /// estimate low with them. Measured in process (test profile, shared 2-core VM): with a
    /// floor of 1,000 under 5,000-transaction blocks the node committed 6.4k/s at 4x overload
    /// against 17.5k/s unbounded. A node whose full block takes longer than the bound cannot
    /// keep it whatever admission does: the producer then sheds what would commit late.
    pub floor: usize,
    pub drain: DrainEstimate,
    /// Time a transaction spends in the replication pipeline when the network keeps up: in
    /// CometBFT mode one block is always being decided while the next fills, so about one
    /// commit interval of transactions is pending without waiting for capacity (the last
    /// interval between commits; zero in solo mode, where the block being executed is part of
    /// the measured work). Below saturation admission plans for the share of the bound beyond
    /// it; once a block leaves its own size waiting, the block being decided is part of the
    /// backlog the measured rate drains, and only the share applies. (Trigger: with the share
    /// alone, 1.6 s of a 4 s bound, a localnet whose commits came every ~1.2 s refused 2,020
    /// of 10,000 at half its capacity: two blocks' worth were always pending. With the
    /// pipeline added at saturation too, at 3x it admitted a third more and shed 8-17k of it.)
    pub pipeline: Duration,
}

/// Why the mempool admits no more.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Full {
    /// It holds its capacity.
    Capacity { capacity: usize },
    /// What it holds takes `drain` to commit, and more could not commit within the bound.
    Bound {
        pending: usize,
        drain: Duration,
        bound: Duration,
    },
}

impl Full {
    /// When a client should try again: when what is pending has drained (at least 1 s).
    pub fn retry_after_s(&self) -> f64 {
        match self {
            Full::Capacity { .. } => 1.0,
            Full::Bound { drain, .. } => drain.as_secs_f64().max(1.0),
        }
    }

    pub fn message(&self) -> String {
        match self {
            Full::Capacity { capacity } => {
                format!("the mempool holds {capacity} transactions; retry shortly")
            }
            Full::Bound {
                pending,
                drain,
                bound,
            } => format!(
                "the mempool holds {pending} transactions, about {} ms of commits at the \
                 measured rate; the node commits what it admits within {} ms, so it admits \
                 no more until they drain",
                drain.as_millis(),
                bound.as_millis()
            ),
        }
    }
}

impl Overload {
    pub fn new(commit_bound: Duration, capacity: usize, floor: usize) -> Overload {
        Overload {
            commit_bound,
            capacity,
            floor: floor.min(capacity),
            drain: DrainEstimate::default(),
            pipeline: Duration::ZERO,
        }
    }

    /// Most transactions the mempool may hold (waiting and in the block being built): its
    /// capacity, and what commits within the admission share of the bound, plus the
    /// pipeline, at the measured rate (not less than the floor).
    pub fn pending_max(&self) -> usize {
        match self.drain.tx_per_s() {
            None => self.capacity,
            Some(rate) => {
                let pipeline = match self.drain.saturated() {
                    true => Duration::ZERO,
                    false => self.pipeline.min(self.commit_bound / 2),
                };
                let seconds = self.commit_bound.as_secs_f64() * ADMISSION_SHARE_OF_BOUND
                    + pipeline.as_secs_f64();
                let within_bound = (rate * seconds) as usize;
                within_bound.max(self.floor).min(self.capacity)
            }
        }
    }

    /// How many more the mempool takes now that it holds `pending`, and if that is not all
    /// of `wanted`, why.
    pub fn room(&self, pending: usize, wanted: usize) -> (usize, Option<Full>) {
        self.room_within(self.pending_max(), pending, wanted)
    }

    /// [`Overload::room`] against `slack` times the limit: CometBFT's `CheckTx` of what peers
    /// gossip, which is a backstop behind the nodes' own admission, not the edge that sheds.
    pub fn room_with_slack(
        &self,
        slack: usize,
        pending: usize,
        wanted: usize,
    ) -> (usize, Option<Full>) {
        self.room_within(
            self.pending_max().saturating_mul(slack.max(1)),
            pending,
            wanted,
        )
    }

    fn room_within(&self, max: usize, pending: usize, wanted: usize) -> (usize, Option<Full>) {
        let room = max.saturating_sub(pending);
        if wanted <= room {
            return (wanted, None);
        }
        let why = if max >= self.capacity {
            Full::Capacity {
                capacity: self.capacity,
            }
        } else {
            Full::Bound {
                pending,
                drain: self.drain.time_for(pending),
                bound: self.commit_bound,
            }
        };
        (room, Some(why))
    }

    /// Transactions admitted before this instant are dropped rather than put in a block of
    /// `block_transactions` cut at `now`: at the estimated rate, with a margin, their block
    /// would commit them after the bound. Never what is younger than half the bound: when the
    /// estimate says a block takes longer than that, the rate has fallen (the machine is
    /// starved), and dropping everything waiting would only waste what was admitted. `None`
    /// when nothing need be dropped yet.
    pub fn expiry_cutoff(&self, now: Instant, block_transactions: usize) -> Option<Instant> {
        let block_time = self
            .drain
            .time_for(block_transactions)
            .mul_f64(BLOCK_TIME_MARGIN);
        let max_age = self
            .commit_bound
            .saturating_sub(block_time.min(self.commit_bound / 2));
        now.checked_sub(max_age)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(rate_tx_per_s: u32) -> Overload {
        let mut overload = Overload::new(Duration::from_secs(2), 100_000, 1_000);
        overload
            .drain
            .record_block(rate_tx_per_s as usize, Duration::from_secs(1), usize::MAX);
        overload
    }

    #[test]
    fn the_commit_rate_is_a_moving_average_of_blocks_with_transactions() {
        let mut drain = DrainEstimate::default();
        assert_eq!(drain.tx_per_s(), None);
        assert_eq!(drain.time_for(1_000), Duration::ZERO);
        drain.record_block(10_000, Duration::from_secs(1), 10_000);
        drain.record_block(0, Duration::from_secs(5), 50_000);
        assert_eq!(
            drain.tx_per_s(),
            Some(10_000.0),
            "an empty block says nothing"
        );
        drain.record_block(2_000, Duration::from_secs(1), 2_000);
        assert_eq!(drain.tx_per_s(), Some(8_000.0));
        assert_eq!(drain.time_for(4_000), Duration::from_millis(500));
    }

    /// Trigger: a 4-validator localnet offered half its capacity refused 1,344 of 10,000 (and
    /// 8,793 of 20,000 at 1x): each block's transactions over CometBFT's cadence measured the
    /// offered load, not the capacity, and admission's limit fell to what was pending.
    #[test]
    fn a_block_that_emptied_the_mempool_never_lowers_the_rate_estimate() {
        let mut drain = DrainEstimate::default();
        // Saturated: 10,000 in a block with 30,000 left waiting.
        drain.record_block(10_000, Duration::from_secs(1), 30_000);
        assert_eq!(drain.tx_per_s(), Some(10_000.0));
        // Then half the load: blocks of 1,000 a second that leave 200 waiting.
        for _ in 0..50 {
            drain.record_block(1_000, Duration::from_secs(1), 200);
        }
        assert_eq!(drain.tx_per_s(), Some(10_000.0), "the capacity stands");
        // A light block faster than the estimate raises it.
        drain.record_block(1_000, Duration::from_millis(50), 0);
        assert_eq!(drain.tx_per_s(), Some(20_000.0));
        // Saturated blocks slower than the estimate lower it (the machine got slower).
        drain.record_block(6_000, Duration::from_secs(1), 6_000);
        assert_eq!(drain.tx_per_s(), Some(16_500.0));
        // At half the capacity, admission leaves room for what a second brings.
        let mut overload = Overload::new(Duration::from_secs(4), 10_000, 1_000);
        overload.drain = drain;
        assert!(overload.room(1_000, 1_000).1.is_none());
    }

    /// Trigger: a localnet (bound 4 s, commits every ~1.2 s) offered half its capacity,
    /// 1,250/s, refused 2,020 of 10,000: admission allowed 40% of the bound at that rate
    /// (2,000) while a block in consensus and the next filling held about 2,500.
    #[test]
    fn the_block_being_decided_does_not_count_against_the_share_of_the_bound() {
        let mut overload = Overload::new(Duration::from_secs(4), 100_000, 1_000);
        overload
            .drain
            .record_block(1_500, Duration::from_millis(1_200), 0);
        assert_eq!(overload.pending_max(), 2_000, "solo: 1.6 s at 1,250/s");
        overload.pipeline = Duration::from_millis(1_200);
        assert_eq!(overload.pending_max(), 3_500, "1.6 s + 1.2 s at 1,250/s");
        assert!(overload.room(2_500, 100).1.is_none());
        // A pipeline longer than half the bound counts as half the bound.
        overload.pipeline = Duration::from_secs(10);
        assert_eq!(overload.pending_max(), 4_500);
        // Saturated (a block left its own size waiting), the block being decided is backlog.
        overload
            .drain
            .record_block(1_500, Duration::from_millis(1_200), 1_500);
        assert!(overload.drain.saturated());
        assert_eq!(overload.pending_max(), 2_000);
    }

    #[test]
    fn admission_takes_what_commits_within_the_bound_and_no_more_than_the_capacity() {
        let unmeasured = Overload::new(Duration::from_secs(2), 100_000, 1_000);
        assert_eq!(
            unmeasured.pending_max(),
            100_000,
            "no estimate yet: capacity"
        );
        // 10k/s over 0.8 s, 40% of the 2 s bound.
        let overload = measured(10_000);
        assert_eq!(overload.pending_max(), 8_000);
        assert_eq!(overload.room(7_000, 500), (500, None));
        let (room, why) = overload.room(9_000, 5_000);
        assert_eq!(room, 0);
        let Some(Full::Bound { pending, drain, .. }) = why else {
            panic!("refused by the bound: {why:?}");
        };
        assert_eq!(pending, 9_000);
        assert!(drain.abs_diff(Duration::from_millis(900)) < Duration::from_micros(1));
        assert_eq!(why.unwrap().retry_after_s(), 1.0, "at least a second");
        // A fast node is held by its capacity; a slow one never below the floor.
        assert_eq!(measured(1_000_000).pending_max(), 100_000);
        assert!(matches!(
            measured(1_000_000).room(100_000, 1).1,
            Some(Full::Capacity { capacity: 100_000 })
        ));
        assert_eq!(measured(10).pending_max(), 1_000);
    }

    #[test]
    fn the_producer_drops_what_its_block_would_commit_after_the_bound() {
        let overload = measured(10_000);
        let now = Instant::now() + Duration::from_secs(10);
        // A block of 8,000 takes 0.8 s, 1 s with the margin: older than 1 s is dropped.
        let cutoff = overload.expiry_cutoff(now, 8_000).unwrap();
        assert_eq!(now - cutoff, Duration::from_millis(1_000));
        // Trigger: a block the estimate says is too slow for the bound dropped everything
        // waiting (a starved 2-core VM at half its capacity shed 40,317 of 89,325 admitted,
        // none older than 783 ms). Only what is older than half the bound goes.
        assert_eq!(
            now - overload.expiry_cutoff(now, 100_000).unwrap(),
            Duration::from_secs(1)
        );
    }
}
