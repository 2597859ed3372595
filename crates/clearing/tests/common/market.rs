//! Books of the `market` model (both sides of every quoted pair), for the test files that
//! generate them.

use crate::common::Market;
use proptest::prelude::*;
use walras_sim::{generate_offers, MarketShape, OfferModel, OfferWorkload, PairChoice};

pub(crate) fn market_books(
    assets: usize,
    offers: usize,
    seed: u64,
    spread_ppm: u32,
    pairs: PairChoice,
    valuation_decades: u8,
) -> Market {
    let workload = OfferWorkload {
        assets,
        offers,
        seed,
        model: OfferModel::Market,
        market: MarketShape {
            spread_ppm,
            pairs,
            valuation_decades,
        },
    };
    Market {
        assets,
        offers: generate_offers(&workload).offers,
    }
}

pub(crate) fn pair_choice() -> impl Strategy<Value = PairChoice> {
    prop_oneof![Just(PairChoice::Uniform), Just(PairChoice::PowerLaw)]
}
