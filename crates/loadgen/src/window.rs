//! Sequence-number accounting for one account, so the load generator never signs a transaction
//! the node must refuse for being too far ahead.
//!
//! The node accepts sequence numbers in `(last, last + 64]`, where `last` is the highest one a
//! committed transaction used; it only moves when a transaction is *accepted* in a block.
//! Sequences handed out but never used (rejected at admission, dropped in a block) leave gaps,
//! which are legal but still count against the window. So the rule here is on the span, not
//! on a count: the next sequence stays within [`WINDOW_USE`] of the last committed one. That
//! also bounds the account's outstanding transactions by [`WINDOW_USE`], and leaves 16 numbers
//! of slack for transactions of the account that someone else sends.
//!
//! Once everything sent from the account is resolved (committed, dropped or rejected), the
//! unused numbers above the committed one are free again and the account rewinds to them —
//! otherwise enough rejections (rate limiting, a full mempool) would strand it forever.

/// How far ahead of the last committed sequence the load generator signs (the node allows 64).
pub const WINDOW_USE: u64 = 48;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SequenceWindow {
    /// Highest sequence used by a transaction accepted in a block.
    committed: u64,
    /// Highest sequence that may be in use by a transaction whose fate is unknown: pending
    /// from before this run, or sent in a request that failed in transit.
    unavailable: u64,
    /// What the next transaction gets.
    next: u64,
    /// Sent and not yet resolved.
    outstanding: u32,
}

impl SequenceWindow {
    /// The window of an account as `GET /v1/accounts/{id}` describes it.
    pub fn new(last_sequence: u64, next_sequence: u64) -> SequenceWindow {
        let unavailable = next_sequence.saturating_sub(1).max(last_sequence);
        SequenceWindow {
            committed: last_sequence,
            unavailable,
            next: unavailable + 1,
            outstanding: 0,
        }
    }

    pub fn has_room(&self) -> bool {
        self.next <= self.committed + WINDOW_USE
    }

    pub fn outstanding(&self) -> u32 {
        self.outstanding
    }

    /// What [`SequenceWindow::take`] would hand out next.
    pub fn peek(&self) -> u64 {
        self.next
    }

    /// Hands out the next sequence number; the caller checked [`SequenceWindow::has_room`].
    pub fn take(&mut self) -> u64 {
        assert!(self.has_room(), "sequence window exhausted");
        let sequence = self.next;
        self.next += 1;
        self.outstanding += 1;
        sequence
    }

    /// A block accepted a transaction of this account (ours or anyone's) with `sequence`; the
    /// node answering `replayed` for `sequence` says the same.
    pub fn committed(&mut self, sequence: u64) {
        self.committed = self.committed.max(sequence);
        self.next = self.next.max(self.committed + 1);
    }

    /// `sequence` may be taken by a transaction we cannot see (a `duplicate` answer, or a
    /// request that failed in transit): never hand it out again.
    pub fn unavailable(&mut self, sequence: u64) {
        self.unavailable = self.unavailable.max(sequence);
        self.next = self.next.max(self.unavailable + 1);
    }

    /// `sequence` was refused at admission for want of room (`mempool_full`, `rate_limited`):
    /// the node did not use it. When it is the last number handed out, the next transaction
    /// gets it again, so refusals leave no gap that holds the window until everything else
    /// resolves (under overload most of what is sent is refused, and the gaps would otherwise
    /// fill the window and stop the account sending). Callers pass a request's refusals
    /// highest first, so a refused tail of several rewinds entirely.
    pub fn refused(&mut self, sequence: u64) {
        let unused_above = self.committed.max(self.unavailable);
        if sequence + 1 == self.next && sequence > unused_above {
            self.next = sequence;
        }
        self.resolved();
    }

    /// One of our transactions is resolved: in a block, or refused at admission.
    pub fn resolved(&mut self) {
        debug_assert!(self.outstanding > 0, "resolved more than was sent");
        self.outstanding = self.outstanding.saturating_sub(1);
        if self.outstanding == 0 {
            self.next = self.committed.max(self.unavailable) + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_signs_beyond_the_window_and_frees_room_on_commit() {
        let mut window = SequenceWindow::new(10, 11);
        let taken: Vec<u64> = std::iter::from_fn(|| window.has_room().then(|| window.take()))
            .take(100)
            .collect();
        assert_eq!(taken, (11..=10 + WINDOW_USE).collect::<Vec<_>>());
        assert_eq!(window.outstanding() as u64, WINDOW_USE);
        // The first five commit: five more numbers become usable.
        for sequence in 11..=15 {
            window.committed(sequence);
            window.resolved();
        }
        let more: Vec<u64> = std::iter::from_fn(|| window.has_room().then(|| window.take()))
            .take(100)
            .collect();
        assert_eq!(
            more,
            (11 + WINDOW_USE..=15 + WINDOW_USE).collect::<Vec<_>>()
        );
    }

    #[test]
    fn gaps_count_against_the_window_until_everything_resolves() {
        let mut window = SequenceWindow::new(0, 1);
        for _ in 0..WINDOW_USE {
            window.take();
        }
        // All but the last are rejected at admission: the gaps still hold the window...
        for _ in 1..WINDOW_USE {
            window.resolved();
        }
        assert!(!window.has_room());
        // ...until the last one resolves too (dropped in a block): then it rewinds.
        window.resolved();
        assert!(window.has_room());
        assert_eq!(window.take(), 1);
    }

    #[test]
    fn a_refused_tail_is_handed_out_again_and_a_refused_middle_is_not() {
        let mut window = SequenceWindow::new(0, 1);
        let taken: Vec<u64> = (0..5).map(|_| window.take()).collect();
        assert_eq!(taken, vec![1, 2, 3, 4, 5]);
        // 2 and 4 are admitted; 5 is refused (the tail), then 3 (a middle: 4 is above it).
        window.refused(5);
        window.refused(3);
        assert_eq!(window.peek(), 5, "the tail rewinds, the middle does not");
        assert_eq!(window.take(), 5);
        // 5 refused again: back to it once more.
        window.refused(5);
        assert_eq!(window.take(), 5);
        // A number someone else may hold is never rewound to.
        window.unavailable(5);
        window.refused(5);
        assert_eq!(window.peek(), 6);
    }

    #[test]
    fn pending_and_unknown_sequences_are_never_reused() {
        // Someone else has 1..=4 pending when the run starts.
        let mut window = SequenceWindow::new(0, 5);
        assert_eq!(window.take(), 5);
        window.resolved();
        assert_eq!(window.take(), 5);
        // A request carrying 5 failed in transit: it may yet be admitted.
        window.unavailable(5);
        window.resolved();
        assert_eq!(window.take(), 6);
        // A block accepts someone else's 30: the window moves up with it.
        window.committed(30);
        window.resolved();
        assert_eq!(window.take(), 31);
        assert!(window.has_room());
    }
}
