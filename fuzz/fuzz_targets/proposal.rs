//! CometBFT proposals (what other validators send to ProcessProposal and FinalizeBlock) on
//! arbitrary bytes: an error or a block, never a panic; a decoded proposal re-encodes to the
//! same entries. Input: height (8 bytes, big-endian), then entries, each a u16 length and
//! that many bytes.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use walras_engine::BlockHeader;
use walras_api::proposal;

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let height = i64::from_be_bytes(data[..8].try_into().unwrap());
    let mut rest = &data[8..];
    let mut txs = Vec::new();
    while rest.len() >= 2 {
        let length = u16::from_be_bytes([rest[0], rest[1]]) as usize;
        let end = (2 + length).min(rest.len());
        txs.push(Bytes::copy_from_slice(&rest[2..end]));
        rest = &rest[end..];
    }
    if let Ok(block) = proposal::decode(&txs, height) {
        let transactions: Vec<Bytes> = block
            .transactions
            .iter()
            .map(|signed| Bytes::from(signed.encode()))
            .collect();
        assert_eq!(proposal::encode(&block.header, &transactions), txs);
    }
    if let Ok(header) = BlockHeader::decode(data) {
        assert_eq!(header.encode(), data);
    }
});
