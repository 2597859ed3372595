//! Typed errors of the gateway core.

use crate::clock::ParticipantId;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GatewayError {
    #[error("time went backwards: event at {now_ns} ns after one at {last_ns} ns")]
    TimeWentBackwards { now_ns: u64, last_ns: u64 },
    #[error(
        "queue full: {queue} holds its limit of {len_max} entries; retry later or raise the limit"
    )]
    QueueFull { queue: &'static str, len_max: usize },
    #[error("unknown participant {0}: register it with the ordering buffer first")]
    UnknownParticipant(ParticipantId),
    #[error("participant {participant} sent sequence {seq} after {last_seq}: uplink messages must arrive in order")]
    SequenceOutOfOrder {
        participant: ParticipantId,
        seq: u64,
        last_seq: u64,
    },
    #[error("participant {participant} sent a delivery clock older than its previous message: delivery clocks never go back")]
    ClockWentBackwards { participant: ParticipantId },
    /// The clock names a point nobody can have been delivered yet (in cut mode: a block above
    /// the published height): the message is refused and changes nothing.
    #[error("participant {participant} sent a delivery clock at point {point}, but the latest point published is {latest} (slack {slack}): no participant can have received it; stamp messages with the clock of a delivered point")]
    ClockAhead {
        participant: ParticipantId,
        point: u64,
        latest: u64,
        slack: u64,
    },
    /// The participant already holds its share of the ordering buffer; others are unaffected.
    #[error("participant {participant} holds its share of {share_max} queued trades in the ordering buffer; send again once a block has taken some")]
    ShareFull {
        participant: ParticipantId,
        share_max: usize,
    },
    #[error("invalid configuration: {0}")]
    InvalidConfig(&'static str),
    #[error("cut boundary ⟨{point}, {window_ns} ns⟩ is not after the last sealed boundary")]
    CutNotAdvancing { point: u64, window_ns: u64 },
    #[error("point {point} belongs to batch {batch}, before the open batch {open_batch}")]
    BatchOutOfOrder {
        point: u64,
        batch: u64,
        open_batch: u64,
    },
}
