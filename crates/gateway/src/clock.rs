//! Delivery clocks (DBO §4.1.1, Eq. 5) and the order key.
//!
//! A delivery clock is the pair ⟨last delivered point, nanoseconds elapsed since that point was
//! delivered⟩, compared lexicographically: a later point always wins, and within one point the
//! longer elapsed time is later. Point 0 means "nothing delivered yet"; real points start at 1.
//!
//! Two messages can carry equal clocks (two participants that answered the same batch after the
//! same number of nanoseconds). The total order used by the ordering buffer is therefore the key
//! ([`OrderKey`]) `(clock, participant, sequence)`, compared field by field in that order: equal
//! clocks are broken by the smaller participant id, and one participant's messages by their
//! sequence number. The order is a strict total order on keys because `(participant, sequence)` is
//! unique per message.

use serde::Serialize;

/// Index of a market-data point as numbered by the exchange (in cut mode: a block height).
pub type PointId = u64;
/// Identifier of a market participant (one release buffer each).
pub type ParticipantId = u32;

/// ⟨last delivered point, elapsed ns since its delivery⟩ (Eq. 5). Field order is the comparison order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct DeliveryClock {
    /// Last point delivered whole to the participant (0 = none yet).
    pub point: PointId,
    /// Nanoseconds since `point` was delivered, measured locally by the release buffer.
    pub elapsed_ns: u64,
}

impl DeliveryClock {
    pub const fn new(point: PointId, elapsed_ns: u64) -> Self {
        Self { point, elapsed_ns }
    }
}

/// The total order key of an uplink message: clock, then participant, then sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct OrderKey {
    pub clock: DeliveryClock,
    pub participant: ParticipantId,
    pub seq: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_point_beats_any_elapsed_time() {
        assert!(DeliveryClock::new(1, u64::MAX) < DeliveryClock::new(2, 0));
    }

    #[test]
    fn equal_clocks_are_broken_by_participant_then_sequence() {
        let c = DeliveryClock::new(3, 10);
        let a = OrderKey {
            clock: c,
            participant: 1,
            seq: 9,
        };
        let b = OrderKey {
            clock: c,
            participant: 2,
            seq: 0,
        };
        let a2 = OrderKey {
            clock: c,
            participant: 1,
            seq: 10,
        };
        assert!(a < b && a < a2 && a2 < b);
    }
}
