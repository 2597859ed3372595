//! A whole checkpoint body (`walras_engine::ExchangeState::decode_checkpoint`, format `/3`)
//! on arbitrary bytes, sealed so that the checksum passes and the decoder behind it is what
//! runs: a state or an error, never a panic; a state that loads conserves every asset. The
//! first byte picks the thread count (1-4: the format decodes account chunks and books in
//! parallel).
#![no_main]

use libfuzzer_sys::fuzz_target;
use walras_engine::seal_checkpoint;
use walras_engine::ExchangeState;

const MAGIC: &[u8] = b"walras-checkpoint/3";

fuzz_target!(|data: &[u8]| {
    let Some((&threads, body)) = data.split_first() else {
        return;
    };
    let mut bytes = Vec::with_capacity(MAGIC.len() + 32 + body.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&[0; 32]);
    bytes.extend_from_slice(body);
    seal_checkpoint(&mut bytes);
    let threads = usize::from(threads % 4) + 1;
    if let Ok(state) = ExchangeState::decode_checkpoint(&bytes, threads) {
        assert!(state.conserves());
    }
});
