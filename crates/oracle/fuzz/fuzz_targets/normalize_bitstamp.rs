#![no_main]
use libfuzzer_sys::fuzz_target;
use walras_oracle::Protocol;

fuzz_target!(|data: &[u8]| {
    let _ = walras_oracle::normalize(Protocol::Bitstamp, data, None);
});
