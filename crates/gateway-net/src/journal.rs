//! What the gateway saw, kept for tests and operators: every seal and every straggler change.

/// One sealed block, as the gateway saw it (for tests and operators).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealRecord {
    /// The block sealed (N+1).
    pub height: u64,
    /// Nanoseconds (gateway time) when block N was published.
    pub previous_published_ns: u64,
    /// When block N+1 was sealed.
    pub sealed_ns: u64,
    pub trades: usize,
    pub late: usize,
    pub spilled: usize,
}

/// Straggler changes, as the gateway saw them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParticipantEvent {
    Straggler { participant: u32, at_ns: u64 },
    Rejoined { participant: u32, at_ns: u64 },
}

#[derive(Default)]
pub(crate) struct Journal {
    pub(crate) seals: Vec<SealRecord>,
    pub(crate) events: Vec<ParticipantEvent>,
}
