//! CometBFT proposals (what other validators send to ProcessProposal and FinalizeBlock) on
//! arbitrary bytes: an error or a block, never a panic; a decoded proposal re-encodes to the
//! same entries (single transactions and bundles alike); one entry alone (what CheckTx reads)
//! decodes or fails without a panic, and a decoded bundle re-encodes to itself. Input: height (8 bytes, big-endian), then entries, each a u16 length and
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
    if let Ok((block, counts)) = proposal::decode_with_entries(&txs, height) {
        let mut carried = block.transactions.as_slice();
        let mut entries: Vec<Bytes> = Vec::with_capacity(counts.len());
        for (entry, count) in txs[1..].iter().zip(&counts) {
            let (these, rest) = carried.split_at(*count);
            carried = rest;
            entries.push(if proposal::is_bundle(entry) {
                proposal::encode_bundle(these)
            } else {
                Bytes::from(these[0].encode())
            });
        }
        assert!(carried.is_empty());
        assert_eq!(proposal::encode(&block.header, &entries), txs);
    }
    for entry in txs.iter().take(2) {
        if let Ok(transactions) = proposal::decode_entry(entry) {
            if proposal::is_bundle(entry) {
                assert_eq!(proposal::encode_bundle(&transactions), entry);
            }
        }
    }
    if let Ok(header) = BlockHeader::decode(data) {
        assert_eq!(header.encode(), data);
    }
});
