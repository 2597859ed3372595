//! Participant frames and gateway-link messages from arbitrary bytes: decoding never panics, and
//! whatever decodes re-encodes to the same bytes (one encoding per message).
#![no_main]

use libfuzzer_sys::fuzz_target;
use walras_gateway::{Downlink, Uplink};
use walras_gateway::{SealReply, SealedBatch};

fuzz_target!(|bytes: &[u8]| {
    if let Ok(message) = Uplink::decode(bytes) {
        assert_eq!(message.encode(), bytes);
    }
    if let Ok(message) = Downlink::decode(bytes) {
        assert_eq!(message.encode(), bytes);
    }
    if let Ok(batch) = SealedBatch::decode(bytes) {
        assert_eq!(batch.encode().as_deref(), Some(bytes));
    }
    if let Ok(reply) = SealReply::decode(bytes) {
        assert_eq!(reply.encode().as_deref(), Some(bytes));
    }
});
