//! Offer workloads: synthetic limit sell offers drawn from a few market models.
//!
//! Every model follows the same recipe. Assets have hidden "true" valuations that drift between
//! batches of offers (one batch is about 1/[`BATCHES`] of the workload). An offer sells `sell` for
//! `buy` with a limit price near the current valuation ratio, `v_sell / v_buy × (1 − d)` where the
//! distance `d` is mostly positive (the offer is in the money at the valuations it was made at);
//! it is worth a random *value* and sells `value / v_sell` units. Accounts are drawn from a power
//! law over a pool of `max(offers / 4, 16)` accounts, so a few accounts make most offers.
//!
//! Amounts are integers: one global value scale, the same for every asset, makes typical amounts
//! large (10^8..10^10 units of an asset of valuation 1) while keeping each asset's total amount on
//! sale at most 2^60, well under [`MAX_AMOUNT`]. Only when some asset's total would exceed 2^60
//! (wide valuations, very many offers) is the scale lowered, for every asset alike, so that the
//! relative values of offers are the same whatever the workload size.
//!
//! The price distance is `d ~ N(3%, 2%)`: valuations keep drifting after an offer is made, and
//! with a distance of a fraction of a percent about half the offers of the early batches would be
//! out of the money at the final valuations. With this distance about two thirds of `cycles`
//! offers are in the money at the final valuations (and 93% at the valuations they were made at).

use crate::rng::{PowerLaw, Rng, WeightedIndex};
use crate::shape::{MarketShape, OfferParamsError};
use std::fmt;
use std::str::FromStr;
use walras_types::{AccountId, AssetId, Offer, OfferId, Price, MAX_AMOUNT, MAX_ASSETS};

/// How many batches a workload is created in; valuations take one random step between batches.
pub const BATCHES: usize = 20;

/// Limit prices are clamped into `[MIN_GENERATED_PRICE, MAX_GENERATED_PRICE]`: the whole accepted
/// range [`Price::MIN_LIMIT`]..=[`Price::MAX_LIMIT`] (10^-12..=10^12), so valuations spread over
/// 10^±6 are quoted without distortion. `Price::from_f64` maps both ends exactly onto the limits.
pub const MIN_GENERATED_PRICE: f64 = 1e-12;
/// See [`MIN_GENERATED_PRICE`].
pub const MAX_GENERATED_PRICE: f64 = 1e12;

/// The most any asset's offers add up to (up to rounding, at most one unit per offer): `2^60`,
/// an eighth of [`MAX_AMOUNT`].
pub const MAX_GENERATED_TOTAL: u64 = 1 << 60;

/// Value of a typical offer, in units of an asset of valuation 1, before the per-offer factor
/// (log-uniform over [0.1, 10]); lowered when an asset's total would exceed
/// [`MAX_GENERATED_TOTAL`].
const NOMINAL_VALUE: f64 = 1e9;
/// Offer values are `NOMINAL_VALUE × log-uniform(VALUE_LO, VALUE_HI)`: two decades.
const VALUE_LO: f64 = 0.1;
const VALUE_HI: f64 = 10.0;

/// The limit-price distance `d` is normal with this mean and standard deviation, clamped to
/// ±`MAX_DISTANCE`.
const DISTANCE_MEAN: f64 = 0.03;
const DISTANCE_SD: f64 = 0.02;
const MAX_DISTANCE: f64 = 0.5;

/// Accounts: a pool of `max(offers / 4, MIN_ACCOUNTS)` drawn with this power-law exponent.
const MIN_ACCOUNTS: usize = 16;
const ACCOUNT_EXPONENT: f64 = 1.2;

/// Independent random streams of one seed.
const STREAM_VALUATIONS: u64 = 1;
const STREAM_TRADES: u64 = 2;
const STREAM_PRICES: u64 = 3;
const STREAM_ACCOUNTS: u64 = 4;

/// The market model an offer workload is drawn from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OfferModel {
    /// SPEEDEX §7: trades along short cycles of assets, valuations drifting slowly.
    #[default]
    Cycles,
    /// SPEEDEX §6.2: a few assets carry most of the volume; valuations are volatile.
    SkewedVolume,
    /// Valuations spread over twelve decades; uniform pairs among assets with a direct market.
    WideValuations,
    /// Books like a real exchange's: every pair quoted on both sides of its rate with symmetric
    /// noise (see [`crate::market`]).
    Market,
}

impl OfferModel {
    /// Every model, in CLI order.
    pub const ALL: [OfferModel; 4] = [
        OfferModel::Market,
        OfferModel::Cycles,
        OfferModel::SkewedVolume,
        OfferModel::WideValuations,
    ];

    /// The model's command-line name.
    pub fn name(self) -> &'static str {
        match self {
            OfferModel::Cycles => "cycles",
            OfferModel::SkewedVolume => "skewed",
            OfferModel::WideValuations => "wide",
            OfferModel::Market => "market",
        }
    }
}

impl fmt::Display for OfferModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// A model name that is not one of [`OfferModel::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown offer model '{0}' (expected one of: {names})", names = model_names())]
pub struct UnknownModel(pub String);

/// The command-line names of [`OfferModel::ALL`], comma-separated, for [`UnknownModel`].
fn model_names() -> String {
    let names: Vec<&str> = OfferModel::ALL.iter().map(|model| model.name()).collect();
    names.join(", ")
}

impl FromStr for OfferModel {
    type Err = UnknownModel;

    fn from_str(text: &str) -> Result<OfferModel, UnknownModel> {
        OfferModel::ALL
            .into_iter()
            .find(|model| model.name() == text)
            .ok_or_else(|| UnknownModel(text.to_string()))
    }
}

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OfferWorkload {
    /// Number of assets, 2..=[`MAX_ASSETS`].
    pub assets: usize,
    /// Number of offers.
    pub offers: usize,
    pub seed: u64,
    pub model: OfferModel,
    /// The `market` model's shape (ignored by the others).
    pub market: MarketShape,
}

impl OfferWorkload {
    /// Checks the workload can be generated: `assets` must lie in 2..=[`MAX_ASSETS`].
    pub fn validate(&self) -> Result<(), OfferParamsError> {
        if !(2..=MAX_ASSETS).contains(&self.assets) {
            return Err(OfferParamsError::Assets(self.assets));
        }
        self.market.validate()
    }
}

/// A generated workload.
#[derive(Clone, Debug, PartialEq)]
pub struct GeneratedOffers {
    /// Exactly `workload.offers` offers, with ids 0..offers-1 in order.
    pub offers: Vec<Offer>,
    /// The model's final "true" valuation of each asset (those the last batch was priced at).
    pub valuations: Vec<f64>,
}

/// Asset valuations following a geometric Brownian motion, one step per batch.
struct Valuations {
    values: Vec<f64>,
    sigma: f64,
    rng: Rng,
    batch_len: usize,
    next_step_at: usize,
}

impl Valuations {
    fn new(values: Vec<f64>, sigma: f64, rng: Rng, offers: usize) -> Valuations {
        let batch_len = offers.div_ceil(BATCHES).max(1);
        Valuations {
            values,
            sigma,
            rng,
            batch_len,
            next_step_at: batch_len,
        }
    }

    /// Steps the valuations for every batch boundary passed once `created` offers exist.
    /// Returns whether they changed.
    fn advance_to(&mut self, created: usize) -> bool {
        let mut changed = false;
        while created >= self.next_step_at {
            gbm_step(&mut self.values, self.sigma, &mut self.rng);
            self.next_step_at += self.batch_len;
            changed = true;
        }
        changed
    }
}

/// One step of a geometric Brownian motion with volatility `sigma` and no drift in expectation:
/// each value is multiplied by `exp(-sigma^2 / 2 + sigma * Z)`, `Z` standard normal.
pub(crate) fn gbm_step(values: &mut [f64], sigma: f64, rng: &mut Rng) {
    let drift = -0.5 * sigma * sigma;
    for value in values {
        *value *= (drift + sigma * rng.normal()).exp();
    }
}

/// The relative distance `d` of a limit price below the valuation ratio, `limit = ratio × (1 − d)`:
/// normal with mean [`DISTANCE_MEAN`] and standard deviation [`DISTANCE_SD`], clamped to
/// ±[`MAX_DISTANCE`]. Mostly positive, so most offers are in the money when made.
pub(crate) fn limit_distance(rng: &mut Rng) -> f64 {
    (DISTANCE_MEAN + DISTANCE_SD * rng.normal()).clamp(-MAX_DISTANCE, MAX_DISTANCE)
}

/// Collects offers with float amounts, then fixes the integer amounts.
pub(crate) struct Builder {
    offers: Vec<Offer>,
    /// Amount of each offer per unit of value scale: `value / v_sell`.
    units: Vec<f64>,
    /// Sum of `units` over the offers selling each asset.
    units_per_asset: Vec<f64>,
    accounts: PowerLaw,
    account_rng: Rng,
    price_rng: Rng,
}

impl Builder {
    pub(crate) fn new(workload: &OfferWorkload) -> Builder {
        let pool = (workload.offers / 4).max(MIN_ACCOUNTS);
        Builder {
            offers: Vec::with_capacity(workload.offers),
            units: Vec::with_capacity(workload.offers),
            units_per_asset: vec![0.0; workload.assets],
            accounts: PowerLaw::new(pool, ACCOUNT_EXPONENT),
            account_rng: Rng::with_stream(workload.seed, STREAM_ACCOUNTS),
            price_rng: Rng::with_stream(workload.seed, STREAM_PRICES),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.offers.len()
    }

    /// Adds an offer selling `value / v_sell` units of `sell` for `buy`, limit price near
    /// `v_sell / v_buy`.
    fn push(&mut self, sell: usize, buy: usize, value: f64, valuations: &[f64]) {
        let distance = limit_distance(&mut self.price_rng);
        let limit = (valuations[sell] / valuations[buy] * (1.0 - distance))
            .clamp(MIN_GENERATED_PRICE, MAX_GENERATED_PRICE);
        self.push_with_limit(sell, buy, value, limit, valuations);
    }

    /// Adds an offer selling `value / v_sell` units of `sell` for `buy` at `limit`, clamped into
    /// the accepted range.
    pub(crate) fn push_with_limit(
        &mut self,
        sell: usize,
        buy: usize,
        value: f64,
        limit: f64,
        valuations: &[f64],
    ) {
        debug_assert_ne!(sell, buy);
        let limit =
            Price::from_f64(limit.clamp(Price::MIN_LIMIT.to_f64(), Price::MAX_LIMIT.to_f64()))
                .clamp(Price::MIN_LIMIT, Price::MAX_LIMIT);
        let units = value / valuations[sell];
        self.units.push(units);
        self.units_per_asset[sell] += units;
        self.offers.push(Offer {
            id: OfferId(self.offers.len() as u64),
            account: AccountId(self.accounts.sample(&mut self.account_rng) as u64),
            sell: AssetId(sell as u16),
            buy: AssetId(buy as u16),
            amount: 0,
            min_price: limit,
        });
    }

    /// Fixes integer amounts with one value scale for all assets: [`NOMINAL_VALUE`], lowered
    /// where needed so that no asset's total exceeds [`MAX_GENERATED_TOTAL`].
    pub(crate) fn finish(mut self) -> Vec<Offer> {
        let heaviest = self.units_per_asset.iter().copied().fold(0.0, f64::max);
        let budget = MAX_GENERATED_TOTAL as f64;
        let scale = if heaviest * NOMINAL_VALUE > budget {
            budget / heaviest
        } else {
            NOMINAL_VALUE
        };
        for (offer, units) in self.offers.iter_mut().zip(&self.units) {
            // Saturating cast; each amount is at most its asset's total, far below u64::MAX.
            offer.amount = ((units * scale).round() as u64).max(1);
        }
        // Each rounding adds at most 1 to an asset's total: totals stay within
        // 2^60 × (1 + float error) + offers, far below MAX_AMOUNT. Checked, not assumed.
        let mut totals = vec![0u128; self.units_per_asset.len()];
        for offer in &self.offers {
            totals[offer.sell.0 as usize] += u128::from(offer.amount);
        }
        assert!(
            totals.iter().all(|&total| total <= u128::from(MAX_AMOUNT)),
            "generated asset totals exceed the issuance cap"
        );
        self.offers
    }
}

/// Puts `k` distinct uniformly random assets, in random order, at the front of `permutation`
/// (a partial Fisher–Yates shuffle of a permutation kept between calls).
pub(crate) fn choose_distinct(rng: &mut Rng, permutation: &mut [usize], k: usize) {
    let n = permutation.len();
    for i in 0..k {
        let j = i + rng.index(n - i);
        permutation.swap(i, j);
    }
}

/// Offer values: log-uniform over [`VALUE_LO`, `VALUE_HI`) (relative to the value scale).
fn random_value(rng: &mut Rng) -> f64 {
    rng.log_uniform(VALUE_LO, VALUE_HI)
}

/// Paper §7: valuations log-uniform over [0.1, 10], GBM σ = 0.02 per batch; offers along cycles
/// of 2..=7 assets with (nearly) equal values.
pub(crate) fn cycles(workload: &OfferWorkload) -> GeneratedOffers {
    const SIGMA: f64 = 0.02;
    const MIN_CYCLE: u64 = 2;
    const MAX_CYCLE: u64 = 7;
    /// Per-offer value jitter within a cycle (log-normal σ).
    const VALUE_JITTER: f64 = 0.01;
    let n = workload.assets;
    let mut valuation_rng = Rng::with_stream(workload.seed, STREAM_VALUATIONS);
    let initial = (0..n)
        .map(|_| valuation_rng.log_uniform(0.1, 10.0))
        .collect();
    let mut valuations = Valuations::new(initial, SIGMA, valuation_rng, workload.offers);
    let mut trade_rng = Rng::with_stream(workload.seed, STREAM_TRADES);
    let mut builder = Builder::new(workload);
    let mut permutation: Vec<usize> = (0..n).collect();
    while builder.len() < workload.offers {
        valuations.advance_to(builder.len());
        let k = ((MIN_CYCLE + trade_rng.below(MAX_CYCLE - MIN_CYCLE + 1)) as usize).min(n);
        choose_distinct(&mut trade_rng, &mut permutation, k);
        let value = random_value(&mut trade_rng);
        for j in 0..k {
            if builder.len() == workload.offers {
                break;
            }
            let jitter = (VALUE_JITTER * trade_rng.normal()).exp();
            let (sell, buy) = (permutation[j], permutation[(j + 1) % k]);
            builder.push(sell, buy, value * jitter, &valuations.values);
        }
    }
    GeneratedOffers {
        offers: builder.finish(),
        valuations: valuations.values,
    }
}

/// Paper §6.2: asset volume weights `1 / (rank + 1)^1.2` in shuffled rank order; sell asset drawn
/// in proportion to weight, buy asset likewise among the others. Valuations log-uniform over
/// [0.01, 100], GBM σ = 0.1 per batch.
pub(crate) fn skewed_volume(workload: &OfferWorkload) -> GeneratedOffers {
    const SIGMA: f64 = 0.1;
    const VOLUME_EXPONENT: f64 = 1.2;
    let n = workload.assets;
    let mut valuation_rng = Rng::with_stream(workload.seed, STREAM_VALUATIONS);
    let initial = (0..n)
        .map(|_| valuation_rng.log_uniform(0.01, 100.0))
        .collect();
    let mut valuations = Valuations::new(initial, SIGMA, valuation_rng, workload.offers);
    let mut trade_rng = Rng::with_stream(workload.seed, STREAM_TRADES);
    let mut weights: Vec<f64> = (0..n)
        .map(|rank| ((rank + 1) as f64).powf(-VOLUME_EXPONENT))
        .collect();
    trade_rng.shuffle(&mut weights);
    let volume = WeightedIndex::new(weights);
    let mut builder = Builder::new(workload);
    while builder.len() < workload.offers {
        valuations.advance_to(builder.len());
        let sell = volume.sample(&mut trade_rng);
        let buy = volume.sample_excluding(&mut trade_rng, sell);
        let value = random_value(&mut trade_rng);
        builder.push(sell, buy, value, &valuations.values);
    }
    GeneratedOffers {
        offers: builder.finish(),
        valuations: valuations.values,
    }
}

/// Valuations log-uniform over [1e-6, 1e6] (stratified: asset `i` gets a random point of its own
/// twelve-decades/`n` slice, slices in random order), GBM σ = 0.01 per batch. Pairs are uniform
/// over the ordered pairs whose ratio `v_sell / v_buy` lies in [1e-9, 1e9]: assets further apart
/// have no direct market in this model. Only when no pair qualifies (possible with 2 assets) are
/// pairs drawn from all pairs, their limit prices clamped to
/// [[`MIN_GENERATED_PRICE`], [`MAX_GENERATED_PRICE`]].
pub(crate) fn wide_valuations(workload: &OfferWorkload) -> GeneratedOffers {
    const SIGMA: f64 = 0.01;
    const LOG10_LO: f64 = -6.0;
    const LOG10_HI: f64 = 6.0;
    let n = workload.assets;
    let mut valuation_rng = Rng::with_stream(workload.seed, STREAM_VALUATIONS);
    let mut slices: Vec<usize> = (0..n).collect();
    valuation_rng.shuffle(&mut slices);
    let initial = slices
        .iter()
        .map(|&slice| {
            let position = (slice as f64 + valuation_rng.uniform_f64()) / n as f64;
            10f64.powf(LOG10_LO + (LOG10_HI - LOG10_LO) * position)
        })
        .collect();
    let mut valuations = Valuations::new(initial, SIGMA, valuation_rng, workload.offers);
    let mut trade_rng = Rng::with_stream(workload.seed, STREAM_TRADES);
    let mut builder = Builder::new(workload);
    let mut markets = DirectMarkets::new(&valuations.values);
    while builder.len() < workload.offers {
        if valuations.advance_to(builder.len()) {
            markets = DirectMarkets::new(&valuations.values);
        }
        let (sell, buy) = markets.sample(&mut trade_rng);
        let value = random_value(&mut trade_rng);
        builder.push(sell, buy, value, &valuations.values);
    }
    GeneratedOffers {
        offers: builder.finish(),
        valuations: valuations.values,
    }
}

/// The ordered pairs whose valuation ratio lies within [1/`MAX_RATIO`, `MAX_RATIO`], sampled
/// uniformly with exact integer arithmetic.
struct DirectMarkets {
    /// Assets in increasing valuation order.
    sorted: Vec<usize>,
    /// For sorted position `p`, the partners are sorted positions `lo[p]..hi[p]` except `p`.
    lo: Vec<usize>,
    hi: Vec<usize>,
    /// `cumulative[p]` = number of ordered pairs whose sell asset sits at positions `..=p`.
    cumulative: Vec<u64>,
}

impl DirectMarkets {
    const MAX_RATIO: f64 = 1e9;

    fn new(valuations: &[f64]) -> DirectMarkets {
        let n = valuations.len();
        let mut sorted: Vec<usize> = (0..n).collect();
        sorted.sort_by(|&a, &b| valuations[a].total_cmp(&valuations[b]).then(a.cmp(&b)));
        let value = |p: usize| valuations[sorted[p]];
        let (mut lo, mut hi, mut cumulative) = (vec![0; n], vec![0; n], Vec::with_capacity(n));
        let (mut low, mut high, mut total) = (0, 0, 0u64);
        for p in 0..n {
            while value(p) / value(low) > Self::MAX_RATIO {
                low += 1;
            }
            high = high.max(p + 1);
            while high < n && value(high) / value(p) <= Self::MAX_RATIO {
                high += 1;
            }
            lo[p] = low;
            hi[p] = high;
            total += (high - low - 1) as u64;
            cumulative.push(total);
        }
        DirectMarkets {
            sorted,
            lo,
            hi,
            cumulative,
        }
    }

    /// A uniformly random ordered pair with a direct market, or, when there is none, a uniformly
    /// random ordered pair.
    fn sample(&self, rng: &mut Rng) -> (usize, usize) {
        let n = self.sorted.len();
        let total = *self.cumulative.last().expect("at least two assets");
        if total == 0 {
            let sell = rng.index(n);
            let buy = (sell + 1 + rng.index(n - 1)) % n;
            return (sell, buy);
        }
        let draw = rng.below(total);
        let p = self.cumulative.partition_point(|&c| c <= draw);
        let before = if p == 0 { 0 } else { self.cumulative[p - 1] };
        let mut q = self.lo[p] + (draw - before) as usize;
        if q >= p {
            q += 1; // skip the sell asset itself
        }
        debug_assert!(q < self.hi[p]);
        (self.sorted[p], self.sorted[q])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::generate_offers;
    use std::collections::HashSet;

    fn workload(model: OfferModel, assets: usize, offers: usize, seed: u64) -> OfferWorkload {
        OfferWorkload {
            assets,
            offers,
            seed,
            model,
            market: MarketShape::default(),
        }
    }

    /// Every invariant a generated workload promises, whatever the model.
    fn assert_valid(workload: &OfferWorkload, generated: &GeneratedOffers) {
        let GeneratedOffers { offers, valuations } = generated;
        assert_eq!(offers.len(), workload.offers);
        assert_eq!(valuations.len(), workload.assets);
        assert!(
            valuations.iter().all(|v| v.is_finite() && *v > 0.0),
            "{valuations:?}"
        );
        let mut totals = vec![0u128; workload.assets];
        let pool = (workload.offers / 4).max(MIN_ACCOUNTS) as u64;
        for (index, offer) in offers.iter().enumerate() {
            assert_eq!(offer.id, OfferId(index as u64));
            assert!(
                (offer.sell.0 as usize) < workload.assets
                    && (offer.buy.0 as usize) < workload.assets
            );
            assert_ne!(offer.sell, offer.buy);
            assert!(offer.amount > 0);
            assert!(offer.account.0 < pool);
            assert!(offer.min_price >= Price::MIN_LIMIT && offer.min_price <= Price::MAX_LIMIT);
            totals[offer.sell.0 as usize] += u128::from(offer.amount);
        }
        for total in totals {
            assert!(total <= u128::from(MAX_GENERATED_TOTAL) + workload.offers as u128);
            assert!(total <= u128::from(MAX_AMOUNT));
        }
    }

    #[test]
    fn the_generated_price_range_converts_into_the_accepted_range() {
        assert_eq!(Price::from_f64(MIN_GENERATED_PRICE), Price::MIN_LIMIT);
        assert_eq!(Price::from_f64(MAX_GENERATED_PRICE), Price::MAX_LIMIT);
    }

    #[test]
    fn every_model_makes_valid_offers_at_the_edges() {
        for model in OfferModel::ALL {
            for assets in [2, 3, 100] {
                for offers in [0, 1, 2, 7, 41, 3_000] {
                    for seed in [0, 1, u64::MAX] {
                        let workload = workload(model, assets, offers, seed);
                        assert_valid(&workload, &generate_offers(&workload));
                    }
                }
            }
            let largest = workload(model, MAX_ASSETS, 2_000, 5);
            assert_valid(&largest, &generate_offers(&largest));
        }
    }

    #[test]
    fn same_seed_same_offers_other_seed_other_offers() {
        for model in OfferModel::ALL {
            let a = generate_offers(&workload(model, 50, 5_000, 17));
            let b = generate_offers(&workload(model, 50, 5_000, 17));
            let c = generate_offers(&workload(model, 50, 5_000, 18));
            assert_eq!(a, b);
            assert_ne!(a.offers, c.offers);
            assert_ne!(a.valuations, c.valuations);
        }
    }

    #[test]
    fn amounts_are_large_integers() {
        for model in [OfferModel::Cycles, OfferModel::SkewedVolume] {
            let generated = generate_offers(&workload(model, 50, 20_000, 3));
            let small = generated
                .offers
                .iter()
                .filter(|offer| offer.amount < 1_000)
                .count();
            assert_eq!(small, 0, "{model}");
        }
        let wide = generate_offers(&workload(OfferModel::WideValuations, 50, 20_000, 3));
        let small = wide
            .offers
            .iter()
            .filter(|offer| offer.amount < 1_000)
            .count();
        assert!(
            small < wide.offers.len() / 20,
            "{small} wide offers below 1000 units"
        );
    }

    #[test]
    fn cycles_are_cycles() {
        let generated = generate_offers(&workload(OfferModel::Cycles, 50, 5_000, 9));
        let offers = &generated.offers;
        let mut start = 0;
        let mut lengths = HashSet::new();
        'cycles: while start < offers.len() {
            let mut end = start;
            let mut assets = HashSet::from([offers[start].sell]);
            while offers[end].buy != offers[start].sell {
                if end + 1 == offers.len() {
                    break 'cycles; // the last cycle was cut short by the offer count
                }
                assert_eq!(offers[end].buy, offers[end + 1].sell);
                end += 1;
                assert!(assets.insert(offers[end].sell), "cycle revisits an asset");
            }
            let length = end - start + 1;
            assert!((2..=7).contains(&length), "cycle of {length}");
            lengths.insert(length);
            // Values along a cycle are about equal at the valuations of the time.
            let values: Vec<f64> = offers[start..=end]
                .iter()
                .map(|offer| offer.amount as f64 * generated.valuations[offer.sell.0 as usize])
                .collect();
            let (lo, hi) = values
                .iter()
                .fold((f64::MAX, 0.0f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
            assert!(hi / lo < 2.0, "cycle values {values:?}");
            start = end + 1;
        }
        assert_eq!(lengths.len(), 6, "cycle lengths seen: {lengths:?}");
    }

    fn in_the_money_share(generated: &GeneratedOffers) -> f64 {
        let v = &generated.valuations;
        let in_the_money = generated
            .offers
            .iter()
            .filter(|offer| {
                offer.min_price.to_f64() <= v[offer.sell.0 as usize] / v[offer.buy.0 as usize]
            })
            .count();
        in_the_money as f64 / generated.offers.len() as f64
    }

    #[test]
    fn cycles_offers_are_mostly_in_the_money_at_the_final_valuations() {
        for seed in 0..4 {
            let generated = generate_offers(&workload(OfferModel::Cycles, 50, 20_000, seed));
            let share = in_the_money_share(&generated);
            assert!(share >= 0.6, "seed {seed}: {share}");
        }
    }

    #[test]
    fn skewed_volume_concentrates_on_a_few_assets() {
        for seed in 0..4 {
            let generated = generate_offers(&workload(OfferModel::SkewedVolume, 50, 20_000, seed));
            let mut sold = vec![0.0; 50];
            for offer in &generated.offers {
                let sell = offer.sell.0 as usize;
                sold[sell] += offer.amount as f64 * generated.valuations[sell];
            }
            sold.sort_by(f64::total_cmp);
            let (median, top) = (sold[25], sold[49]);
            assert!(
                top >= 5.0 * median,
                "seed {seed}: top {top:e}, median {median:e}"
            );
        }
    }

    #[test]
    fn wide_valuations_span_nine_decades_without_far_markets() {
        for (assets, seed) in [(50, 0), (50, 1), (100, 2), (20, 3)] {
            let generated =
                generate_offers(&workload(OfferModel::WideValuations, assets, 10_000, seed));
            let v = &generated.valuations;
            let max = v.iter().copied().fold(0.0, f64::max);
            let min = v.iter().copied().fold(f64::MAX, f64::min);
            assert!(
                max / min >= 1e9,
                "{assets} assets, seed {seed}: span {:e}",
                max / min
            );
            for offer in &generated.offers {
                let price = offer.min_price.to_f64();
                assert!((MIN_GENERATED_PRICE..=MAX_GENERATED_PRICE).contains(&price));
                // The final valuations drift a little from those at the offer's batch.
                let ratio = v[offer.sell.0 as usize] / v[offer.buy.0 as usize];
                assert!((1e-9 / 2.0..=1e9 * 2.0).contains(&ratio), "ratio {ratio:e}");
            }
            let in_the_money = in_the_money_share(&generated);
            assert!(in_the_money > 0.6, "{in_the_money}");
        }
    }

    #[test]
    fn accounts_follow_a_power_law() {
        let generated = generate_offers(&workload(OfferModel::Cycles, 10, 20_000, 4));
        let mut counts = vec![0usize; 5_000];
        for offer in &generated.offers {
            counts[offer.account.0 as usize] += 1;
        }
        let top100: usize = counts[..100].iter().sum();
        assert!(
            top100 > 20_000 / 2,
            "the 100 busiest accounts made {top100} offers"
        );
        assert!(counts.iter().filter(|&&count| count > 0).count() > 1_000);
    }

    #[test]
    fn model_names_round_trip() {
        for model in OfferModel::ALL {
            assert_eq!(model.name().parse::<OfferModel>(), Ok(model));
            assert_eq!(model.to_string(), model.name());
        }
        assert_eq!(OfferModel::default(), OfferModel::Cycles);
        let error = "zipf".parse::<OfferModel>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown offer model 'zipf' (expected one of: market, cycles, skewed, wide)"
        );
    }

    #[test]
    fn invalid_workloads_are_rejected() {
        for assets in [0, 1, MAX_ASSETS + 1] {
            assert!(workload(OfferModel::Cycles, assets, 10, 0)
                .validate()
                .is_err());
        }
        assert!(workload(OfferModel::Cycles, 2, 0, 0).validate().is_ok());
        let result =
            std::panic::catch_unwind(|| generate_offers(&workload(OfferModel::Cycles, 1, 5, 0)));
        assert!(result.is_err());
    }

    #[test]
    fn direct_markets_sample_only_close_pairs_uniformly() {
        let valuations = [1e-6, 1e-4, 1.0, 1e4, 1e6];
        let markets = DirectMarkets::new(&valuations);
        // Far pairs: (1e-6, 1e4), (1e-6, 1e6), (1e-4, 1e6), both directions: 6 of 20.
        assert_eq!(*markets.cumulative.last().unwrap(), 14);
        let mut rng = Rng::new(1);
        let mut seen = HashSet::new();
        for _ in 0..2_000 {
            let (sell, buy) = markets.sample(&mut rng);
            assert_ne!(sell, buy);
            let ratio = valuations[sell] / valuations[buy];
            assert!((1e-9..=1e9).contains(&ratio));
            seen.insert((sell, buy));
        }
        assert_eq!(seen.len(), 14);
        let apart = DirectMarkets::new(&[1e-6, 1e6]);
        assert_eq!(*apart.cumulative.last().unwrap(), 0);
        let (sell, buy) = apart.sample(&mut rng);
        assert_ne!(sell, buy);
    }
}
