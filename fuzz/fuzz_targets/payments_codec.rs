//! The payments wire values (`walras_payments`' codec, which `walras-payments-net` frames):
//! arbitrary bytes never panic, and whatever decodes re-encodes to the same bytes. The framing
//! and message tags of `walras-payments-net` are property-tested there (`tests/wire.rs`); this
//! target stays free of tokio, as the fuzz crate must.
#![no_main]

use libfuzzer_sys::fuzz_target;
use walras_payments::{
    certificate_bytes, decode_certificate, decode_conflict_prefix, decode_effect, decode_request,
    decode_votes_prefix, encode_conflict, encode_effect, encode_votes, request_bytes,
};

fuzz_target!(|bytes: &[u8]| {
    if let Ok(request) = decode_request(bytes) {
        assert_eq!(request_bytes(&request), bytes);
    }
    if let Ok(certificate) = decode_certificate(bytes) {
        assert_eq!(certificate_bytes(&certificate), bytes);
    }
    if let Ok(effect) = decode_effect(bytes) {
        assert_eq!(encode_effect(&effect), bytes);
    }
    if let Ok((votes, rest)) = decode_votes_prefix(bytes) {
        let mut encoded = Vec::new();
        encode_votes(&votes, &mut encoded);
        assert_eq!(&bytes[..bytes.len() - rest.len()], &encoded[..]);
    }
    if let Ok((conflict, rest)) = decode_conflict_prefix(bytes) {
        let mut encoded = Vec::new();
        encode_conflict(&conflict, &mut encoded);
        assert_eq!(&bytes[..bytes.len() - rest.len()], &encoded[..]);
    }
});
