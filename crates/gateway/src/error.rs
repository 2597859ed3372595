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
