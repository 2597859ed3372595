//! Generation speed: `cargo test --release -p walras-sim --test timing -- --ignored --nocapture`.

use std::time::Instant;
use walras_sim::{generate_offers, OfferModel, OfferWorkload};

#[test]
#[ignore = "timing; run in release mode"]
fn one_million_offers_fifty_assets() {
    for model in OfferModel::ALL {
        let workload = OfferWorkload {
            assets: 50,
            offers: 1_000_000,
            seed: 1,
            model,
            market: Default::default(),
        };
        let start = Instant::now();
        let generated = generate_offers(&workload);
        let elapsed = start.elapsed();
        assert_eq!(generated.offers.len(), 1_000_000);
        let min = generated
            .offers
            .iter()
            .map(|offer| offer.amount)
            .min()
            .unwrap();
        let max = generated
            .offers
            .iter()
            .map(|offer| offer.amount)
            .max()
            .unwrap();
        println!(
            "{model:>7}: {:>7.1} ms (amounts {min}..={max})",
            elapsed.as_secs_f64() * 1e3
        );
    }
}
