//! The JSON form of a submitted transaction (`POST /v1/transactions`), on arbitrary bytes: an
//! error or a transaction, never a panic; what parses converts back to JSON that parses to the
//! same transaction (the conversion loses nothing).
#![no_main]

use libfuzzer_sys::fuzz_target;
use walras_api::wire::TransactionJson;
use walras_api::{transaction_from_json, transaction_to_json};

fuzz_target!(|data: &[u8]| {
    let Ok(json) = serde_json::from_slice::<TransactionJson>(data) else {
        return;
    };
    if let Ok(signed) = transaction_from_json(&json) {
        let again = transaction_from_json(&transaction_to_json(&signed));
        assert_eq!(again, Ok(signed));
    }
});
