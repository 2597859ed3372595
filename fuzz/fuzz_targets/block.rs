//! Block, transaction-list and genesis decoding on arbitrary bytes: an error or a value, never a
//! panic; whatever decodes re-encodes to the same bytes (the encodings are canonical).
#![no_main]

use libfuzzer_sys::fuzz_target;
use walras_engine::Block;
use walras_types::genesis::Genesis;
use walras_types::SignedTransaction;

fuzz_target!(|data: &[u8]| {
    if let Ok(block) = Block::decode(data) {
        assert_eq!(block.encode(), data);
    }
    if let Ok(list) = SignedTransaction::decode_list(data) {
        assert_eq!(SignedTransaction::encode_list(&list), data);
    }
    if let Ok(genesis) = Genesis::decode(data) {
        assert_eq!(genesis.encode(), data);
    }
});
