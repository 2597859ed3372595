//! The checkpoint's market record (`walras_engine::MarketPrices::decode`) on arbitrary bytes:
//! an error or a value, never a panic; what decodes re-encodes to the bytes it read. (Whole
//! checkpoints are behind a checksum that arbitrary bytes never pass, so the section is fuzzed
//! on its own.) The first byte picks the asset count, the next eight the state's height.
#![no_main]

use libfuzzer_sys::fuzz_target;
use walras_engine::MarketPrices;
use walras_types::codec::Reader;

fuzz_target!(|data: &[u8]| {
    let Some((&assets, rest)) = data.split_first() else {
        return;
    };
    let Some((height, body)) = rest.split_first_chunk::<8>() else {
        return;
    };
    let assets = usize::from(assets).max(1);
    let height = u64::from_be_bytes(*height);
    let mut reader = Reader::new(body);
    if let Ok(record) = MarketPrices::decode(&mut reader, assets, height) {
        let read = reader.offset();
        let mut encoded = Vec::new();
        record.encode(&mut encoded);
        assert_eq!(encoded, &body[..read]);
    }
});
