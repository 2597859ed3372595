//! The offers CSV reader on arbitrary bytes: an error or valid offers, never a panic; and valid
//! offers always book and clear without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::time::Duration;
use walras_clearing::{clear, ClearingParams, OrderBooks};
use walras_types::offers_csv::read_offers;

fuzz_target!(|data: &[u8]| {
    let Some((&asset_byte, body)) = data.split_first() else { return };
    let assets = 2 + (asset_byte % 8) as usize;
    let mut input = b"offer_id,account,sell,buy,amount,min_price\n".to_vec();
    input.extend_from_slice(body);
    let Ok(offers) = read_offers(input.as_slice(), assets) else { return };
    let books = OrderBooks::build(offers, assets, 1).expect("offers the reader accepted must book");
    let params = ClearingParams {
        timeout: Duration::from_secs(5),
        max_iterations: 50,
        ..ClearingParams::default()
    };
    clear(&books, &params).expect("valid books clear");
});
