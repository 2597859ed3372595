//! Random bytes, and valid venue payloads with random bytes spliced in, never panic any normaliser:
//! each returns events or a typed error. (The cargo-fuzz targets in `fuzz/` run the same entry
//! points without a case limit.)

use proptest::prelude::*;
use walras_oracle::normalize;
use walras_oracle::Protocol;

const SAMPLES: [(Protocol, &str); 6] = [
    (
        Protocol::Binance,
        r#"{"stream":"x@depth","data":{"e":"depthUpdate","E":1,"s":"BNBBTC","U":157,"u":160,"b":[["0.0024","10"]],"a":[["0.0026","100"]]}}"#,
    ),
    (
        Protocol::Coinbase,
        r#"{"channel":"l2_data","sequence_num":0,"events":[{"type":"update","product_id":"BTC-USD","updates":[{"side":"bid","price_level":"21921.73","new_quantity":"0.06"}]}]}"#,
    ),
    (
        Protocol::Kraken,
        r#"{"channel":"book","type":"update","data":[{"symbol":"MATIC/USD","bids":[{"price":0.5666,"qty":4831.75496356}],"asks":[],"checksum":2439117997}]}"#,
    ),
    (
        Protocol::Okx,
        r#"{"arg":{"channel":"books","instId":"BTC-USDT"},"action":"update","data":[{"asks":[["8476.98","415","0","13"]],"bids":[],"prevSeqId":1,"seqId":2}]}"#,
    ),
    (
        Protocol::Bitstamp,
        r#"{"data":{"microtimestamp":"1643643384592311","bids":[["36945.47","0.04"]],"asks":[]},"channel":"order_book_btcusd","event":"data"}"#,
    ),
    (
        Protocol::Kraken,
        r#"{"channel":"instrument","type":"snapshot","data":{"pairs":[{"symbol":"BTC/USD","price_precision":1,"qty_precision":8}]}}"#,
    ),
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn random_bytes_never_panic_a_normaliser(bytes in prop::collection::vec(any::<u8>(), 0..300), p in 0usize..5, rest in any::<bool>()) {
        let protocol = Protocol::ALL[p];
        let _ = normalize(protocol, &bytes, rest.then_some("BTCUSDT"));
    }

    #[test]
    fn mutated_venue_payloads_never_panic_a_normaliser(
        which in 0usize..SAMPLES.len(),
        at in any::<prop::sample::Index>(),
        cut in any::<prop::sample::Index>(),
        insert in prop::collection::vec(prop::sample::select(b"0123456789.-eE\"[]{},:x ".to_vec()), 0..8),
    ) {
        let (protocol, text) = SAMPLES[which];
        let bytes = text.as_bytes();
        let i = at.index(bytes.len());
        let j = i + cut.index(bytes.len() - i + 1).min(4);
        let mut mutated = bytes[..i].to_vec();
        mutated.extend_from_slice(&insert);
        mutated.extend_from_slice(&bytes[j..]);
        let _ = normalize(protocol, &mutated, None);
    }
}

#[test]
fn every_sample_payload_is_valid() {
    for (protocol, text) in SAMPLES {
        assert!(
            !normalize(protocol, text.as_bytes(), None)
                .unwrap()
                .events
                .is_empty(),
            "{text}"
        );
    }
}
