//! Exact settlement: from valuations to integer trades that conserve every asset.
//!
//! 1. Valuations are quantised to integers ([`quantize`]); from here on nothing is a float except
//!    the LP's answer, which is only a suggestion.
//! 2. Per pair, with the exact rate `r = floor(p_S · 2^80 / p_B)` (a Q48.80 [`Price`]): `U` = amount of offers with limit
//!    `≤ r` (the most that may trade), `L` = amount of offers with limit `< floor(r · (1 − μ))` (what
//!    must trade for μ-completeness).
//! 3. The LP of appendix D picks value flows; `x = floor(y / p_S)` clamped into `[L, U]`.
//! 4. Offers fill in canonical order until `x` is sold; each receives
//!    `floor(sold · floor(r · (1 − ε)))`: every rounding favours the auctioneer.
//! 5. Conservation is then checked exactly: per asset, payouts must not exceed receipts. Rounding
//!    `y` down to units can leave an asset a few units short (and with ε = 0 there is no commission
//!    to absorb that). [`repair`] removes every deficit by lowering the sales *into* the short
//!    asset, preferring pairs whose seller asset has the most slack. A cut can move the deficit to
//!    the seller's asset and, around a trading cycle with no commission, back again; so each time
//!    an asset runs short again the cut asked of it doubles. Every step strictly lowers the total
//!    sold and the doubling bounds the number of visits per asset by about 64 (the bits of an
//!    amount), so it terminates; on liquid markets the floors of the many payouts leave slack and
//!    it takes a handful of steps or none.
//!
//! What is left over per asset — receipts minus payouts — is burned.

use crate::book::{OrderBooks, PairBook};
use crate::lp::{self, LpError, PairFlowBounds};
use walras_types::{AssetId, Fraction, Offer, OfferId, Price, Valuation};

/// The clearing of one pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PairClearing {
    pub sell: u16,
    pub buy: u16,
    /// Index of the pair in [`OrderBooks::pairs`].
    pub book_index: usize,
    /// Exchange rate `floor(p_sell · 2^80 / p_buy)` ([`Valuation::rate_to`]).
    pub rate: Price,
    /// Rate paid out: `floor(rate · (1 − ε))`.
    pub payout_rate: Price,
    /// Amount that had to trade for μ-completeness.
    pub lower: u64,
    /// Amount offered at limit prices at or below the rate.
    pub upper: u64,
    /// Amount of `sell` sold (x of appendix D).
    pub sold: u64,
    /// Amount of `buy` paid out to the pair's offers.
    pub bought: u64,
    /// Offers (in canonical order) that sold their whole amount.
    pub full_fills: usize,
    /// Amount sold by the next offer, which trades partially; 0 if none does.
    pub partial_sold: u64,
}

/// The exact outcome of clearing at given valuations. Only [`settle`] and [`settle_given`] make
/// one, so every value of this type conserves every asset and trades no offer beyond its limit;
/// it is read through its methods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settlement {
    valuations: Vec<Valuation>,
    /// Pairs with offers at limit prices at or below their rate, in book order.
    pairs: Vec<PairClearing>,
    /// Per asset: receipts minus payouts, burned.
    burned: Vec<u64>,
    lp_with_lower_bounds: bool,
    lower_bounds_met: bool,
    repairs: u32,
}

/// What one offer sold and received in a settlement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fill {
    pub offer: OfferId,
    pub sold: u64,
    pub bought: u64,
}

/// One pair that traded, with its offers: what a state applying the settlement needs.
#[derive(Clone, Copy, Debug)]
pub struct TradedPair<'a> {
    clearing: &'a PairClearing,
    /// The pair's offers in canonical order.
    offers: &'a [Offer],
}

impl<'a> TradedPair<'a> {
    pub fn sell(&self) -> AssetId {
        AssetId(self.clearing.sell)
    }

    pub fn buy(&self) -> AssetId {
        AssetId(self.clearing.buy)
    }

    /// Amount of the sold asset that traded (more than 0).
    pub fn sold(&self) -> u64 {
        self.clearing.sold
    }

    /// The offers that sold their whole amount, in canonical order.
    pub fn filled(&self) -> &'a [Offer] {
        &self.offers[..self.clearing.full_fills]
    }

    /// The offer after them that sold part of its amount, and that part.
    pub fn partial(&self) -> Option<(&'a Offer, u64)> {
        (self.clearing.partial_sold > 0).then(|| {
            (
                &self.offers[self.clearing.full_fills],
                self.clearing.partial_sold,
            )
        })
    }

    /// The last offer that traded: the partial one if any, else the last filled.
    pub fn last_offer(&self) -> &'a Offer {
        match self.partial() {
            Some((offer, _)) => offer,
            None => &self.offers[self.clearing.full_fills - 1],
        }
    }

    /// What one of this pair's offers receives for selling `sold`: `floor(sold · payout rate)`.
    pub fn payout(&self, sold: u64) -> u64 {
        u64::try_from(self.clearing.payout_rate.mul_amount_floor(sold))
            .expect("conservation bounds every payout by the asset's receipts")
    }

    /// Every offer of the pair that traded, in canonical order.
    pub fn fills(&self) -> impl Iterator<Item = Fill> + 'a {
        let pair = *self;
        self.filled()
            .iter()
            .map(|offer| (offer, offer.amount))
            .chain(self.partial())
            .map(move |(offer, sold)| Fill {
                offer: offer.id,
                sold,
                bought: pair.payout(sold),
            })
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettleError {
    /// Given valuations are not one positive integer per asset.
    #[error("{given} valuations given for {assets} assets (all must be positive)")]
    ValuationCount { given: usize, assets: usize },
    /// A given amount names a pair with nothing at or below its rate.
    #[error("pair {sell}->{buy} trades but no offer is at or below its rate")]
    NothingToTrade { sell: u16, buy: u16 },
    /// A given amount exceeds what the pair's offers may sell at its rate.
    #[error("pair {sell}->{buy} sells {sold} but offers at or below its rate hold only {upper}")]
    BeyondLimitPrices {
        sell: u16,
        buy: u16,
        sold: u64,
        upper: u64,
    },
    /// Given amounts would pay out more of an asset than the auctioneer receives.
    #[error("asset {asset} not conserved: {received} received, {paid} paid out")]
    NotConserved {
        asset: usize,
        received: u128,
        paid: u128,
    },
    /// Tâtonnement produced a non-finite or non-positive valuation.
    #[error("internal error: valuation of asset {asset} is not a positive number")]
    BadValuation { asset: usize },
    #[error("{0}")]
    Lp(LpError),
    /// The deficit repair did not finish within its step limit (a bug).
    #[error("internal error: conservation repair exceeded its step limit")]
    RepairLimit,
}

/// Quantises float valuations to integers, the largest becoming [`Valuation::NORMALIZED_MAX`]
/// (2^126). Each keeps the float's 53 bits while it is above 2^53 — for every asset less than
/// 10^21 times cheaper than the largest — and at least 9 significant digits up to 8.5e28 times
/// cheaper (see `walras_types::price`); a float that small rounds to 1 at least.
pub fn quantize(prices: &[f64]) -> Result<Vec<Valuation>, SettleError> {
    if let Some(asset) = prices
        .iter()
        .position(|price| !(price.is_finite() && *price > 0.0))
    {
        return Err(SettleError::BadValuation { asset });
    }
    let largest = prices.iter().cloned().fold(0.0f64, f64::max);
    let scale = Valuation::NORMALIZED_MAX as f64 / largest;
    Ok(prices
        .iter()
        .map(|price| Valuation(((price * scale).round() as u128).max(1)))
        .collect())
}

/// Settles the books at `valuations`: exact amounts, fills and burns.
///
/// `lp_epsilon` is the commission the LP plans with; it should be a little below `epsilon` (what
/// is charged) so the difference absorbs rounding to whole units.
pub fn settle(
    books: &OrderBooks,
    valuations: &[Valuation],
    epsilon: Fraction,
    mu: Fraction,
    lp_epsilon: f64,
) -> Result<Settlement, SettleError> {
    let assets = books.assets();
    let mut pairs = exact_bounds(books, valuations, epsilon, mu);
    let bounds: Vec<PairFlowBounds> = pairs
        .iter()
        .map(|pair| {
            let value = valuations[pair.sell as usize].0 as f64;
            PairFlowBounds {
                sell: pair.sell as usize,
                buy: pair.buy as usize,
                lower: pair.lower as f64 * value,
                upper: pair.upper as f64 * value,
            }
        })
        .collect();
    let (flows, lp_with_lower_bounds) = match lp::solve(assets, &bounds, lp_epsilon) {
        Ok(flows) => (flows, true),
        Err(LpError::Infeasible) => {
            let relaxed: Vec<PairFlowBounds> = bounds
                .iter()
                .map(|bound| PairFlowBounds {
                    lower: 0.0,
                    ..*bound
                })
                .collect();
            (
                lp::solve(assets, &relaxed, lp_epsilon).map_err(SettleError::Lp)?,
                false,
            )
        }
        Err(error) => return Err(SettleError::Lp(error)),
    };
    let mut states: Vec<PairState> = pairs
        .iter_mut()
        .zip(&flows)
        .map(|(pair, flow)| {
            let floor = if lp_with_lower_bounds { pair.lower } else { 0 };
            let units = (flow / valuations[pair.sell as usize].0 as f64).floor();
            pair.sold = (units.max(0.0) as u64).clamp(floor, pair.upper);
            PairState::new(books, &books.pairs()[pair.book_index], pair)
        })
        .collect();
    let repairs = repair(&mut pairs, &mut states, valuations)?;
    let finished = Finished::of(books, pairs, &mut states, valuations, assets);
    Ok(finished.into_settlement(lp_with_lower_bounds, repairs))
}

/// Settles the books with amounts decided elsewhere (a block header: `(sell, buy, sold)` per
/// traded pair), checking them exactly instead of computing them: every amount is at most what
/// the pair's offers at or below its rate hold (so no offer trades beyond its limit), and no
/// asset pays out more than it receives. μ-completeness is reported, not required.
pub fn settle_given(
    books: &OrderBooks,
    valuations: &[Valuation],
    epsilon: Fraction,
    mu: Fraction,
    trades: &[(u16, u16, u64)],
) -> Result<Settlement, SettleError> {
    let assets = books.assets();
    if valuations.len() != assets || valuations.iter().any(|valuation| valuation.0 == 0) {
        return Err(SettleError::ValuationCount {
            given: valuations.len(),
            assets,
        });
    }
    let mut pairs = exact_bounds(books, valuations, epsilon, mu);
    for &(sell, buy, sold) in trades {
        let pair = pairs
            .iter_mut()
            .find(|pair| pair.sell == sell && pair.buy == buy)
            .ok_or(SettleError::NothingToTrade { sell, buy })?;
        if sold > pair.upper {
            return Err(SettleError::BeyondLimitPrices {
                sell,
                buy,
                sold,
                upper: pair.upper,
            });
        }
        pair.sold = sold;
    }
    let mut states: Vec<PairState> = pairs
        .iter()
        .map(|pair| PairState::new(books, &books.pairs()[pair.book_index], pair))
        .collect();
    let mut received = vec![0u128; assets];
    let mut paid = vec![0u128; assets];
    for (pair, state) in pairs.iter().zip(&mut states) {
        received[pair.sell as usize] += pair.sold as u128;
        paid[pair.buy as usize] += state.payout(pair.sold);
    }
    if let Some(asset) = (0..assets).find(|asset| paid[*asset] > received[*asset]) {
        return Err(SettleError::NotConserved {
            asset,
            received: received[asset],
            paid: paid[asset],
        });
    }
    let finished = Finished::of(books, pairs, &mut states, valuations, assets);
    let lower_bounds_met = finished.lower_bounds_met;
    Ok(finished.into_settlement(lower_bounds_met, 0))
}

/// Pairs with their fills decided and the burns counted: what both ways of settling end with.
struct Finished {
    valuations: Vec<Valuation>,
    pairs: Vec<PairClearing>,
    burned: Vec<u64>,
    lower_bounds_met: bool,
}

impl Finished {
    fn of(
        books: &OrderBooks,
        mut pairs: Vec<PairClearing>,
        states: &mut [PairState],
        valuations: &[Valuation],
        assets: usize,
    ) -> Finished {
        let burned = finish_pairs(books, &mut pairs, states, assets);
        let lower_bounds_met = pairs.iter().all(|pair| pair.sold >= pair.lower);
        Finished {
            valuations: valuations.to_vec(),
            pairs,
            burned,
            lower_bounds_met,
        }
    }

    fn into_settlement(self, lp_with_lower_bounds: bool, repairs: u32) -> Settlement {
        Settlement {
            valuations: self.valuations,
            pairs: self.pairs,
            burned: self.burned,
            lp_with_lower_bounds,
            lower_bounds_met: self.lower_bounds_met,
            repairs,
        }
    }
}

/// Exact rates and bounds for every pair with something in the money.
fn exact_bounds(
    books: &OrderBooks,
    valuations: &[Valuation],
    epsilon: Fraction,
    mu: Fraction,
) -> Vec<PairClearing> {
    let mut pairs = Vec::new();
    for (book_index, pair) in books.pairs().iter().enumerate() {
        let rate = valuations[pair.sell as usize].rate_to(valuations[pair.buy as usize]);
        let may_trade = books.count_at_or_below(pair, rate);
        if may_trade == 0 {
            continue;
        }
        let must_trade = books.count_below(pair, rate.discounted_floor(mu));
        pairs.push(PairClearing {
            sell: pair.sell,
            buy: pair.buy,
            book_index,
            rate,
            payout_rate: rate.discounted_floor(epsilon),
            lower: books.amount_before(pair, must_trade),
            upper: books.amount_before(pair, may_trade),
            sold: 0,
            bought: 0,
            full_fills: 0,
            partial_sold: 0,
        });
    }
    pairs
}

/// Payout bookkeeping of one pair for amounts up to its initial `sold`.
///
/// The payout of a sale is a sum of per-offer floors, so it takes one pass over the offers filled
/// in full. That pass is made once, for the initial sale, without allocating; the prefix sums
/// that let [`repair`] search for a smaller sale are built only for the few pairs it lowers
/// (most blocks need no repair at all, and at a million offers the sums cost more than the LP).
struct PairState<'a> {
    /// Exact prefix sums of amounts (from the book), up to the initial fill point.
    cumulative: &'a [u64],
    /// The offers filled in full by the initial sale.
    full_offers: &'a [Offer],
    payout_rate: Price,
    initial_sold: u64,
    initial_payout: u128,
    /// Payout of the first j offers filled in full; built on the first smaller sale asked for.
    payout_prefix: Option<Vec<u128>>,
}

impl<'a> PairState<'a> {
    fn new(books: &'a OrderBooks, book: &PairBook, pair: &PairClearing) -> PairState<'a> {
        let cumulative = books.cumulative_amounts(book);
        let full = full_fills(cumulative, pair.sold);
        let full_offers = &books.offers(book)[..full];
        let full_payout: u128 = full_offers
            .iter()
            .map(|offer| pair.payout_rate.mul_amount_floor(offer.amount))
            .sum();
        let partial = pair.sold - cumulative[full];
        PairState {
            cumulative: &cumulative[..=full],
            full_offers,
            payout_rate: pair.payout_rate,
            initial_sold: pair.sold,
            initial_payout: full_payout + pair.payout_rate.mul_amount_floor(partial),
            payout_prefix: None,
        }
    }

    /// Total payout when `sold` units are sold (sold ≤ the initial amount).
    fn payout(&mut self, sold: u64) -> u128 {
        debug_assert!(sold <= self.initial_sold, "a sale above the initial amount");
        if sold == self.initial_sold {
            return self.initial_payout;
        }
        let (full_offers, payout_rate) = (self.full_offers, self.payout_rate);
        let prefix = self.payout_prefix.get_or_insert_with(|| {
            let mut total = 0u128;
            std::iter::once(0u128)
                .chain(full_offers.iter().map(|offer| {
                    total += payout_rate.mul_amount_floor(offer.amount);
                    total
                }))
                .collect()
        });
        let full = full_fills(self.cumulative, sold);
        let partial = sold - self.cumulative[full];
        prefix[full] + payout_rate.mul_amount_floor(partial)
    }

    /// The largest sale up to `sold` whose payout is at most `target`.
    fn largest_sale_paying_at_most(&mut self, sold: u64, target: u128) -> u64 {
        let (mut low, mut high) = (0u64, sold); // payout(low) <= target is invariant once found
        if self.payout(0) > target {
            return 0;
        }
        while low < high {
            let middle = low + (high - low).div_ceil(2);
            if self.payout(middle) <= target {
                low = middle;
            } else {
                high = middle - 1;
            }
        }
        low
    }
}

/// Number of offers filled in full when `sold` units are sold: the largest j with
/// `cumulative[j] <= sold`.
fn full_fills(cumulative: &[u64], sold: u64) -> usize {
    cumulative.partition_point(|amount| *amount <= sold) - 1
}

/// Removes every asset deficit (payouts above receipts) by lowering sales into short assets.
fn repair(
    pairs: &mut [PairClearing],
    states: &mut [PairState],
    valuations: &[Valuation],
) -> Result<u32, SettleError> {
    let assets = valuations.len();
    let mut received = vec![0u128; assets];
    let mut paid = vec![0u128; assets];
    let mut payouts: Vec<u128> = Vec::with_capacity(pairs.len());
    for (pair, state) in pairs.iter().zip(states.iter_mut()) {
        let payout = state.payout(pair.sold);
        received[pair.sell as usize] += pair.sold as u128;
        paid[pair.buy as usize] += payout;
        payouts.push(payout);
    }
    let step_limit = 130 * (pairs.len() as u32 + assets as u32) + 1024;
    let mut repairs = 0u32;
    let mut visits = vec![0u32; assets];
    while let Some(short) = (0..assets).find(|asset| paid[*asset] > received[*asset]) {
        if repairs == step_limit {
            return Err(SettleError::RepairLimit);
        }
        repairs += 1;
        let backoff = 1u128 << visits[short].min(126);
        visits[short] += 1;
        let deficit = (paid[short] - received[short]).saturating_mul(backoff);
        let slack_value = |asset: usize| {
            (received[asset] as f64 - paid[asset] as f64) * valuations[asset].0 as f64
        };
        let chosen = (0..pairs.len())
            // A pair paying nothing cannot reduce the deficit: skip it so every step makes progress.
            .filter(|index| pairs[*index].buy as usize == short && payouts[*index] > 0)
            .max_by(|a, b| {
                let (slack_a, slack_b) = (
                    slack_value(pairs[*a].sell as usize),
                    slack_value(pairs[*b].sell as usize),
                );
                slack_a.total_cmp(&slack_b).then(b.cmp(a)) // ties: lowest index
            })
            .expect("an asset with payouts has a pair paying into it");
        let pair = &mut pairs[chosen];
        let target = payouts[chosen].saturating_sub(deficit);
        let new_sold = states[chosen].largest_sale_paying_at_most(pair.sold, target);
        let new_payout = states[chosen].payout(new_sold);
        received[pair.sell as usize] -= (pair.sold - new_sold) as u128;
        paid[short] -= payouts[chosen] - new_payout;
        payouts[chosen] = new_payout;
        pair.sold = new_sold;
    }
    Ok(repairs)
}

/// Fills in payouts and fill points; returns the burned amount per asset.
fn finish_pairs(
    books: &OrderBooks,
    pairs: &mut [PairClearing],
    states: &mut [PairState],
    assets: usize,
) -> Vec<u64> {
    let mut received = vec![0u64; assets];
    let mut paid = vec![0u64; assets];
    for (pair, state) in pairs.iter_mut().zip(states) {
        let cumulative = books.cumulative_amounts(&books.pairs()[pair.book_index]);
        pair.full_fills = full_fills(cumulative, pair.sold);
        pair.partial_sold = pair.sold - cumulative[pair.full_fills];
        pair.bought = u64::try_from(state.payout(pair.sold))
            .expect("conservation bounds every payout by the asset's receipts");
        received[pair.sell as usize] += pair.sold;
        paid[pair.buy as usize] += pair.bought;
    }
    received.iter().zip(&paid).map(|(r, p)| r - p).collect()
}

impl Settlement {
    /// The integer valuations the settlement was computed at, one per asset.
    pub fn valuations(&self) -> &[Valuation] {
        &self.valuations
    }

    /// Pairs with offers at limit prices at or below their rate, in book order (traded or not).
    pub fn pairs(&self) -> &[PairClearing] {
        &self.pairs
    }

    /// Per asset: receipts minus payouts, burned.
    pub fn burned(&self) -> &[u64] {
        &self.burned
    }

    /// Whether the LP was feasible with the μ-completeness lower bounds.
    pub fn lp_with_lower_bounds(&self) -> bool {
        self.lp_with_lower_bounds
    }

    /// Whether every pair sold at least its lower bound (μ-completeness holds).
    pub fn lower_bounds_met(&self) -> bool {
        self.lower_bounds_met
    }

    /// Deficit repairs made after rounding.
    pub fn repairs(&self) -> u32 {
        self.repairs
    }

    /// The pairs that traded, in book order, with `books` (the books it was settled on).
    pub fn traded<'a>(&'a self, books: &'a OrderBooks) -> impl Iterator<Item = TradedPair<'a>> {
        self.pairs
            .iter()
            .filter(|pair| pair.sold > 0)
            .map(move |pair| TradedPair {
                clearing: pair,
                offers: books.offers(&books.pairs()[pair.book_index]),
            })
    }

    /// Every offer that traded, pair by pair in book order, offers in canonical order.
    pub fn fills<'a>(&'a self, books: &'a OrderBooks) -> impl Iterator<Item = Fill> + 'a {
        self.traded(books).flat_map(|pair| pair.fills())
    }
}
