//! Offer generation speed (criterion; was the ignored test `tests/timing.rs`):
//!
//! `cargo bench -p walras-sim --bench generation`
//! (a quick look: `cargo bench -p walras-sim --bench generation -- --quick`)
//!
//! One million offers over 50 assets, seed 1, the default market shape, for each offer model.
//! Before timing a model, one untimed run checks the count and prints the range of amounts.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use walras_sim::{generate_offers, OfferModel, OfferWorkload};

const OFFERS: usize = 1_000_000;

fn one_million_offers_fifty_assets(c: &mut Criterion) {
    let mut group = c.benchmark_group("generate 1M offers, 50 assets");
    group.throughput(Throughput::Elements(OFFERS as u64));
    group.sample_size(10);
    for model in OfferModel::ALL {
        let workload = OfferWorkload {
            assets: 50,
            offers: OFFERS,
            seed: 1,
            model,
            market: Default::default(),
        };
        let generated = generate_offers(&workload);
        assert_eq!(generated.offers.len(), OFFERS);
        let amounts = generated.offers.iter().map(|offer| offer.amount);
        let (min, max) = (amounts.clone().min(), amounts.max());
        println!("{model}: amounts {min:?}..={max:?}");
        group.bench_function(BenchmarkId::from_parameter(model), |b| {
            b.iter(|| generate_offers(&workload))
        });
    }
    group.finish();
}

criterion_group!(benches, one_million_offers_fifty_assets);
criterion_main!(benches);
