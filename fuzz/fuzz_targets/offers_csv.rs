//! The offers CSV reader on arbitrary bytes: an error or valid offers, never a panic; and valid
//! offers always book and clear without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use walras_clearing::{clear, Budget, ClearingParams, OrderBooks, Resources, SupplyGrid};
use walras_types::offers_csv::read_offers;

fuzz_target!(|data: &[u8]| {
    let Some((&asset_byte, body)) = data.split_first() else { return };
    let assets = 2 + (asset_byte % 8) as usize;
    let mut input = b"offer_id,account,sell,buy,amount,min_price\n".to_vec();
    input.extend_from_slice(body);
    let Ok(offers) = read_offers(input.as_slice(), assets) else { return };
    let books = OrderBooks::build(offers, assets, 1).expect("offers the reader accepted must book");
    let params = ClearingParams::default();
    let grid = SupplyGrid::for_mu(&books, params.mu);
    // An iteration budget, no clock: every run of an input does the same work.
    let resources = Resources::serial(Budget::iterations(50));
    clear(&books, grid.as_ref(), &params, resources).expect("valid books clear");
});
