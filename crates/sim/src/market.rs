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

/// Per-asset volume weights `1 / (rank + 1)^VOLUME_EXPONENT` for power-law pair choice.
const VOLUME_EXPONENT: f64 = 1.2;
/// Pareto tail exponent of offer values.
pub const VALUE_TAIL_EXPONENT: f64 = 1.5;
/// Largest offer value over the smallest.
pub const VALUE_SPAN: f64 = 1000.0;
/// Most decades valuations may spread on either side of 1.
pub const VALUATION_DECADES_MAX: u8 = 6;
/// Accepted noise widths, in parts per million of the rate: 0.01% ..= 10%.
pub const SPREAD_PPM_MIN: u32 = 100;
pub const SPREAD_PPM_MAX: u32 = 100_000;

const STREAM_MARKET_VALUATIONS: u64 = 11;
const STREAM_MARKET_TRADES: u64 = 12;
const STREAM_MARKET_NOISE: u64 = 13;

/// How the `market` model picks each offer's pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PairChoice {
    /// Every ordered pair equally likely.
    #[default]
    Uniform,
    /// Assets weighted by a power law: a few deep markets, many thin assets.
    PowerLaw,
}

impl PairChoice {
    pub const ALL: [PairChoice; 2] = [PairChoice::Uniform, PairChoice::PowerLaw];

    pub fn name(self) -> &'static str {
        match self {
            PairChoice::Uniform => "uniform",
            PairChoice::PowerLaw => "power-law",
        }
    }
}

impl std::str::FromStr for PairChoice {
    type Err = String;

    fn from_str(text: &str) -> Result<PairChoice, String> {
        PairChoice::ALL
            .into_iter()
            .find(|choice| choice.name() == text)
            .ok_or_else(|| format!("unknown pair choice '{text}' (expected uniform or power-law)"))
    }
}

/// The `market` model's shape; the other models ignore it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MarketShape {
    /// Standard deviation of the log distance of a limit from the valuation ratio, in ppm.
    pub spread_ppm: u32,
    pub pairs: PairChoice,
    /// Valuations spread over `10^-d ..= 10^d`.
    pub valuation_decades: u8,
}

impl Default for MarketShape {
    fn default() -> MarketShape {
        MarketShape {
            spread_ppm: 10_000,
            pairs: PairChoice::Uniform,
            valuation_decades: 2,
        }
    }
}

impl MarketShape {
    pub fn validate(&self) -> Result<(), String> {
        if !(SPREAD_PPM_MIN..=SPREAD_PPM_MAX).contains(&self.spread_ppm) {
            return Err(format!(
                "spread must be {}%..={}% (got {}%)",
                SPREAD_PPM_MIN as f64 / 1e4,
                SPREAD_PPM_MAX as f64 / 1e4,
                self.spread_ppm as f64 / 1e4
            ));
        }
        if self.valuation_decades > VALUATION_DECADES_MAX {
            return Err(format!(
                "valuation decades must be 0..={VALUATION_DECADES_MAX} (got {})",
                self.valuation_decades
            ));
        }
        Ok(())
    }
}

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
