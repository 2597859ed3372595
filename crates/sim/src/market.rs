//! The `market` offer model: books shaped like a real exchange's.
//!
//! Real resting offers sit on *both* sides of the market price, a fraction of a percent away, so
//! near the clearing rate about half of every pair's volume is out of the money and demand is
//! steep exactly where tâtonnement has to work. The other models put most offers deep in the
//! money; this one does not:
//!
//! - valuations are static and log-uniform (stratified, like `wide`) over
//!   `10^-decades ..= 10^decades` ([`MarketShape::valuation_decades`], 0..=6);
//! - every offer's limit is `v_sell / v_buy × exp(σ·Z)`, `Z` standard normal, σ =
//!   [`MarketShape::spread_ppm`] / 10^6: symmetric, so a pair is quoted on both sides of its rate;
//! - pairs are uniform over ordered pairs, or ([`PairChoice::PowerLaw`]) drawn in proportion to
//!   per-asset weights `1 / (rank + 1)^1.2` in shuffled rank order, which leaves thin assets;
//! - offer values follow a Pareto law (exponent [`VALUE_TAIL_EXPONENT`], capped at
//!   [`VALUE_SPAN`] times the smallest): a few large offers, many small ones.
//!
//! Limits are clamped into the generator's price range; amounts are fixed by the shared builder
//! (one value scale for all assets).

use crate::offers::{Builder, GeneratedOffers, OfferWorkload};
use crate::rng::{Rng, WeightedIndex};
pub use crate::shape::{
    MarketShape, PairChoice, SPREAD_PPM_MAX, SPREAD_PPM_MIN, VALUATION_DECADES_MAX,
};

/// Per-asset volume weights `1 / (rank + 1)^VOLUME_EXPONENT` for power-law pair choice.
const VOLUME_EXPONENT: f64 = 1.2;
/// Pareto tail exponent of offer values.
pub const VALUE_TAIL_EXPONENT: f64 = 1.5;
/// Largest offer value over the smallest.
pub const VALUE_SPAN: f64 = 1000.0;
const STREAM_MARKET_VALUATIONS: u64 = 11;
const STREAM_MARKET_TRADES: u64 = 12;
const STREAM_MARKET_NOISE: u64 = 13;

/// Generates a `market` workload (see the module docs).
pub(crate) fn market(workload: &OfferWorkload) -> GeneratedOffers {
    let shape = workload.market;
    let n = workload.assets;
    let valuations = stratified_valuations(n, shape.valuation_decades, workload.seed);
    let mut trade_rng = Rng::with_stream(workload.seed, STREAM_MARKET_TRADES);
    let mut noise_rng = Rng::with_stream(workload.seed, STREAM_MARKET_NOISE);
    let weights = match shape.pairs {
        PairChoice::Uniform => vec![1.0; n],
        PairChoice::PowerLaw => {
            let mut weights: Vec<f64> = (0..n)
                .map(|rank| ((rank + 1) as f64).powf(-VOLUME_EXPONENT))
                .collect();
            trade_rng.shuffle(&mut weights);
            weights
        }
    };
    let volume = WeightedIndex::new(weights);
    let sigma = shape.spread_ppm as f64 / 1e6;
    let mut builder = Builder::new(workload);
    while builder.len() < workload.offers {
        let sell = volume.sample(&mut trade_rng);
        let buy = volume.sample_excluding(&mut trade_rng, sell);
        let value = pareto_value(&mut trade_rng);
        let ratio = valuations[sell] / valuations[buy];
        let limit = ratio * (sigma * noise_rng.normal()).exp();
        builder.push_with_limit(sell, buy, value, limit, &valuations);
    }
    GeneratedOffers {
        offers: builder.finish(),
        valuations,
    }
}

/// Asset `i` gets a random point of its own slice of the log range, slices in random order.
fn stratified_valuations(n: usize, decades: u8, seed: u64) -> Vec<f64> {
    let mut rng = Rng::with_stream(seed, STREAM_MARKET_VALUATIONS);
    let mut slices: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut slices);
    let span = 2.0 * decades as f64;
    slices
        .iter()
        .map(|&slice| {
            let position = (slice as f64 + rng.uniform_f64()) / n as f64;
            10f64.powf(-(decades as f64) + span * position)
        })
        .collect()
}

/// Pareto(`VALUE_TAIL_EXPONENT`) on [0.1, 0.1 × `VALUE_SPAN`] (relative to the value scale).
fn pareto_value(rng: &mut Rng) -> f64 {
    let u = rng.uniform_f64();
    let value = 0.1 * (1.0 - u).powf(-1.0 / VALUE_TAIL_EXPONENT);
    value.min(0.1 * VALUE_SPAN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::generate_offers;
    use crate::offers::OfferModel;

    fn workload(shape: MarketShape, assets: usize, offers: usize, seed: u64) -> OfferWorkload {
        OfferWorkload {
            assets,
            offers,
            seed,
            model: OfferModel::Market,
            market: shape,
        }
    }

    /// The point of the model: about half of the volume sits out of the money at the valuations,
    /// and limits spread around the ratio by the asked-for width.
    #[test]
    fn books_straddle_the_valuation_ratio_by_the_spread() {
        for spread_ppm in [500, 10_000, 20_000] {
            let shape = MarketShape {
                spread_ppm,
                ..MarketShape::default()
            };
            let generated = generate_offers(&workload(shape, 20, 20_000, 3));
            let v = &generated.valuations;
            let (mut out_of_money, mut squares) = (0usize, 0.0f64);
            for offer in &generated.offers {
                let ratio = v[offer.sell.0 as usize] / v[offer.buy.0 as usize];
                let log_distance = (offer.min_price.to_f64() / ratio).ln();
                out_of_money += (log_distance > 0.0) as usize;
                squares += log_distance * log_distance;
            }
            let share = out_of_money as f64 / generated.offers.len() as f64;
            let sigma = (squares / generated.offers.len() as f64).sqrt();
            assert!((0.47..=0.53).contains(&share), "{spread_ppm}: {share}");
            let asked = spread_ppm as f64 / 1e6;
            assert!(
                (sigma / asked - 1.0).abs() < 0.05,
                "{spread_ppm}: σ {sigma}"
            );
        }
    }

    #[test]
    fn power_law_pairs_leave_thin_assets() {
        let shape = MarketShape {
            pairs: PairChoice::PowerLaw,
            ..MarketShape::default()
        };
        let generated = generate_offers(&workload(shape, 50, 50_000, 9));
        let mut sold = vec![0usize; 50];
        for offer in &generated.offers {
            sold[offer.sell.0 as usize] += 1;
        }
        sold.sort_unstable();
        assert!(sold[49] > 20 * sold[0].max(1), "{sold:?}");
    }

    #[test]
    fn valuations_span_the_asked_decades() {
        let shape = MarketShape {
            valuation_decades: 6,
            ..MarketShape::default()
        };
        let generated = generate_offers(&workload(shape, 50, 1_000, 1));
        let (low, high) = generated
            .valuations
            .iter()
            .fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
        assert!(
            low >= 1e-6 && high <= 1e6 && high / low > 1e11,
            "{low} {high}"
        );
    }

    #[test]
    fn shapes_outside_the_accepted_ranges_are_refused() {
        for shape in [
            MarketShape {
                spread_ppm: 50,
                ..MarketShape::default()
            },
            MarketShape {
                spread_ppm: 200_000,
                ..MarketShape::default()
            },
            MarketShape {
                valuation_decades: 7,
                ..MarketShape::default()
            },
        ] {
            assert!(workload(shape, 5, 10, 1).validate().is_err(), "{shape:?}");
        }
    }
}
