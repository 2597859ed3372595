//! What one offer of dust in the money costs a settlement (issue 32): every block's bounds call
//! [`PayoutTerms::sale`] once for each offer at or below its pair's rate, and an offer too small
//! to be paid its limit in whole units never leaves. Times `sale` for amounts of 1, 2 and 10
//! units at limits just below the rate (1 to 1,000 ppm), at rates below and above 1, against
//! an offer of 1,000,000 units that sells in full.
//!
//! `cargo run --release -p walras-clearing --example dust_sale -- [CALLS]` (default 2000000)
//!
//! Prints nanoseconds per call, the median of 5 rounds, per case.

use std::hint::black_box;
use std::time::Instant;
use walras_clearing::PayoutTerms;
use walras_types::{Fraction, Price};

fn main() {
    let calls: u64 = match std::env::args().nth(1) {
        None => 2_000_000,
        Some(text) => text.parse().unwrap_or_else(|_| {
            eprintln!("CALLS must be a positive integer, got {text:?}");
            std::process::exit(2)
        }),
    };
    let epsilon = Fraction::power_of_two(15);
    println!("rate      amount    ns/call (median of 5; limits 1–1000 ppm below the rate)");
    for rate_text in ["0.98", "1.37"] {
        let rate = Price::parse_limit(rate_text).expect("a rate");
        let terms = PayoutTerms::new(rate, epsilon);
        // 64 limits spread over 1–1000 ppm below the rate.
        let limits: Vec<Price> = (0..64u128)
            .map(|k| Price(rate.0 - rate.0 / 1_000_000 * (1 + k * 999 / 63)))
            .collect();
        for amount in [1u64, 2, 10, 1_000_000] {
            let mut rounds: Vec<f64> = (0..5)
                .map(|_| {
                    let started = Instant::now();
                    let mut sold = 0u64;
                    for call in 0..calls {
                        let limit = limits[(call % 64) as usize];
                        sold += terms.sale(black_box(limit), black_box(amount)).sold;
                    }
                    black_box(sold);
                    started.elapsed().as_nanos() as f64 / calls as f64
                })
                .collect();
            rounds.sort_by(f64::total_cmp);
            let capacity = terms.sale(limits[0], amount).sold;
            println!(
                "{rate_text:<9} {amount:<9} {:.1}   (capacity at 1 ppm below: {capacity})",
                rounds[2]
            );
        }
    }
}
