//! Property tests: generation never panics and always round-trips through the offers CSV.

use proptest::prelude::*;
use walras_sim::{generate_offers, OfferModel, OfferWorkload};
use walras_types::offers_csv::{read_offers, write_offers};
use walras_types::{Price, MAX_AMOUNT};

fn model() -> impl Strategy<Value = OfferModel> {
    prop::sample::select(OfferModel::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn generation_never_panics(
        assets in 2usize..=64, offers in 0usize..500, seed in any::<u64>(), model in model()
    ) {
        let generated = generate_offers(&OfferWorkload { assets, offers, seed, model, market: Default::default() });
        prop_assert_eq!(generated.offers.len(), offers);
        let mut totals = vec![0u64; assets];
        for (index, offer) in generated.offers.iter().enumerate() {
            prop_assert_eq!(offer.id.0, index as u64);
            prop_assert!(offer.sell != offer.buy && (offer.buy.0 as usize) < assets);
            prop_assert!(offer.amount > 0);
            prop_assert!(offer.min_price >= Price::MIN_LIMIT && offer.min_price <= Price::MAX_LIMIT);
            let total = &mut totals[offer.sell.0 as usize];
            *total = total.checked_add(offer.amount).filter(|t| *t <= MAX_AMOUNT).unwrap();
        }
    }

    #[test]
    fn offers_round_trip_through_csv(
        assets in 2usize..=20, offers in 0usize..200, seed in any::<u64>(), model in model()
    ) {
        let generated = generate_offers(&OfferWorkload { assets, offers, seed, model, market: Default::default() });
        let mut csv = Vec::new();
        write_offers(&mut csv, &generated.offers).unwrap();
        let read = read_offers(csv.as_slice(), assets).unwrap();
        prop_assert_eq!(read, generated.offers);
    }
}
