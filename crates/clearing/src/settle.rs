//! Exact settlement: from valuations to integer trades that conserve every asset.
//!
//! 1. Valuations are quantised to integers ([`quantize`]); from here on nothing is a float except
//!    the LP's answer, which is only a suggestion.
//! 2. Per pair, with the exact rate `r = floor(p_S · 2^80 / p_B)` (a Q48.80 [`Price`]): `U` = amount of offers with limit
//!    `≤ r` (the most that may trade), `L` = amount of offers with limit `< floor(r · (1 − μ))` (what
//!    must trade for μ-completeness).
//! 3. The LP of appendix D picks value flows; `x = floor(y / p_S)` clamped into `[L, U]`.
//! 4. Offers fill in canonical order ([`crate::fill`]): each sells the most of its amount whose
//!    payout `floor(sold · floor(r · (1 − ε)))` still meets its limit after the commission,
//!    exactly on the integers (its *capacity*; dust or an offer at the rate may sell less than
//!    its amount, or nothing, and keeps the rest); the offer where `x` ends sells the rest, cut
//!    down to an amount that meets its limit. So `U` and `L` above are sums of capacities, and
//!    the pair's `x` is lowered to what its offers actually sell before anything else reads it.
//!    Every rounding favours the auctioneer.
//! 5. Conservation is then checked exactly: per asset, payouts must not exceed receipts. Rounding
//!    `y` down to units can leave an asset a few units short (and with ε = 0 there is no commission
//!    to absorb that). [`repair`] removes every deficit by lowering the sales *into* the short
//!    asset, preferring pairs whose seller asset has the most slack. A cut can move the deficit to
//!    the seller's asset and, around a trading cycle with no commission, back again; so each time
//!    an asset runs short again the cut asked of it doubles. Every step strictly lowers the total
//!    sold and the doubling bounds the number of visits per asset by about 64 (the bits of an
//!    amount), so it terminates; on liquid markets the floors of the many payouts leave slack and
//!    it takes a handful of steps or none.
//! 6. Postcondition, checked on every settlement from the per-offer fills: no offer sells more
//!    than it holds or above its limit, every offer's `received · 2^144 ≥ sold · limit · (2^64 −
//!    ε)`, pair totals are the sums of their fills, and every asset is conserved; a breach is an
//!    internal error, never a settlement.
//!
//! What is left over per asset — receipts minus payouts — is burned.

use crate::book::{OrderBooks, PairBook};
use crate::fill::{FillWalk, PayoutTerms, Sale};
use crate::lp::{self, LpError, PairFlowBounds};
use walras_par::ThreadPool;
use walras_types::{AssetId, Fraction, Offer, OfferId, Price, Valuation};

/// Below this many pairs the per-pair passes run on the calling thread: a pair's pass is
/// short, and a few pairs cost less than waking the pool.
const PAIRS_SERIAL_BELOW: usize = 16;

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
    /// The commission ε the payouts were computed with.
    pub epsilon: Fraction,
    /// What had to trade for μ-completeness: the capacity of the offers with limits below
    /// `floor(rate · (1 − μ))`.
    pub lower: u64,
    /// What those offers hold beyond their capacity (dust that cannot trade in full at its
    /// limit); μ-completeness fails when it is positive.
    pub lower_shortfall: u64,
    /// The capacity of the offers at limit prices at or below the rate: the most that may trade.
    pub upper: u64,
    /// Amount of `sell` sold (x of appendix D): the sum of the offers' sales.
    pub sold: u64,
    /// Amount of `buy` paid out to the pair's offers: the sum of their payouts.
    pub bought: u64,
    /// Offers (a prefix in canonical order) up to and including the last that sold something.
    pub offers_reached: usize,
    /// Those of them that sold less than their whole amount (possibly nothing; they keep the
    /// rest on the book unless the rest rule returns it), in canonical order. Every other
    /// reached offer sold its whole amount.
    pub short_fills: Vec<ShortFill>,
}

/// A reached offer that sold less than its amount.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShortFill {
    /// Position of the offer in its pair's canonical order.
    pub index: usize,
    pub sold: u64,
    /// The rest returned to the offer's account by the rest rule
    /// ([`PayoutTerms::returned_rest`]), decided once, when the pair is filled; 0 when the
    /// offer keeps it.
    pub returned: u64,
}

impl PairClearing {
    /// The terms every offer of the pair trades on.
    pub fn terms(&self) -> PayoutTerms {
        PayoutTerms::new(self.rate, self.epsilon)
    }

    /// What the offer at `index` in canonical order, holding `amount`, sold.
    pub fn sold_by(&self, index: usize, amount: u64) -> u64 {
        if index >= self.offers_reached {
            return 0;
        }
        match self
            .short_fills
            .binary_search_by_key(&index, |short| short.index)
        {
            Ok(at) => self.short_fills[at].sold,
            Err(_) => amount,
        }
    }

    /// Position of the first offer that did not sell its whole amount.
    pub fn first_unfilled(&self) -> usize {
        self.short_fills
            .first()
            .map_or(self.offers_reached, |short| short.index)
    }
}

/// The exact outcome of clearing at given valuations. Only [`settle`] and [`settle_given`] make
/// one, and both check its postcondition, so every value of this type conserves every asset and
/// pays every offer at least its limit after the commission, on the integer amounts; it is read
/// through its methods.
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
    /// The rest returned to the offer's account as the offer closes, by the rest rule
    /// ([`PayoutTerms::returned_rest`]: dust that cannot sell at the rate); 0 otherwise. The
    /// offer keeps `amount − sold − returned` on the book.
    pub returned: u64,
}

/// One pair that traded, with its offers: what a state applying the settlement needs.
#[derive(Clone, Copy, Debug)]
pub struct TradedPair<'a> {
    clearing: &'a PairClearing,
    /// The books the pair was settled on, and the pair in them.
    books: &'a OrderBooks,
    book: PairBook,
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

    /// The last offer (in canonical order) that sold something.
    pub fn last_offer(&self) -> &'a Offer {
        self.books
            .offer_at(&self.book, self.clearing.offers_reached - 1)
    }

    /// What one of this pair's offers receives for selling `sold`: `floor(sold · payout rate)`.
    pub fn payout(&self, sold: u64) -> u64 {
        u64::try_from(self.clearing.terms().payout(sold))
            .expect("conservation bounds every payout by the asset's receipts")
    }

    /// Every offer of the pair that sold something, in canonical order, with its fill. An offer
    /// whose fill sold less than its amount keeps the rest on the book, unless the rest rule
    /// returns it ([`Fill::returned`]).
    pub fn offer_fills(&self) -> impl Iterator<Item = (&'a Offer, Fill)> + 'a {
        let pair = *self;
        let mut shorts = self.clearing.short_fills.iter().peekable();
        self.books
            .offers(&self.book)
            .take(self.clearing.offers_reached)
            .enumerate()
            .filter_map(move |(index, offer)| {
                let (sold, returned) = match shorts.next_if(|short| short.index == index) {
                    Some(short) => (short.sold, short.returned),
                    None => (offer.amount, 0),
                };
                (sold > 0).then(|| {
                    let fill = Fill {
                        offer: offer.id,
                        sold,
                        bought: pair.payout(sold),
                        returned,
                    };
                    (offer, fill)
                })
            })
    }

    /// Every offer of the pair that traded, in canonical order.
    pub fn fills(&self) -> impl Iterator<Item = Fill> + 'a {
        self.offer_fills().map(|(_, fill)| fill)
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
    #[error("pair {sell}->{buy} sells {sold} but offers at or below its rate can sell only {upper} at their limits")]
    BeyondLimitPrices {
        sell: u16,
        buy: u16,
        sold: u64,
        upper: u64,
    },
    /// A given amount ends at an offer on a part that would be paid below its limit.
    #[error("pair {sell}->{buy} sells {sold}, which leaves its offer {offer} a part of {part} paid below its limit")]
    PartBelowLimit {
        sell: u16,
        buy: u16,
        sold: u64,
        offer: u64,
        part: u64,
    },
    /// Given amounts would pay out more of an asset than the auctioneer receives.
    #[error("asset {asset} not conserved: {received} received, {paid} paid out")]
    NotConserved {
        asset: usize,
        received: u128,
        paid: u128,
    },
    /// The postcondition found an offer paid below its limit, or beyond its amount or rate (a
    /// bug: never a settlement).
    #[error("internal error: offer {offer} of pair {sell}->{buy} sells {sold} for {received}, beyond its amount, rate or limit")]
    LimitBreached {
        sell: u16,
        buy: u16,
        offer: u64,
        sold: u64,
        received: u128,
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
/// is charged) so the difference absorbs rounding to whole units. The per-pair passes (bounds,
/// planned sales, fills, the postcondition) run on `pool` (`None`: the calling thread); they are
/// exact integer work on each pair alone, so the settlement, and the first error in pair order
/// when there is one, are the same for any pool.
pub fn settle(
    books: &OrderBooks,
    valuations: &[Valuation],
    epsilon: Fraction,
    mu: Fraction,
    lp_epsilon: f64,
    pool: Option<&ThreadPool>,
) -> Result<Settlement, SettleError> {
    let assets = books.assets();
    let (mut pairs, capacities) = exact_bounds(books, valuations, epsilon, mu, pool);
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
    let planning: Vec<(f64, &Capacities)> = flows.iter().copied().zip(&capacities).collect();
    let mut states: Vec<PairState> = walras_par::map_mut_in_order_on(
        pool,
        &mut pairs,
        &planning,
        PAIRS_SERIAL_BELOW,
        |pair, &(flow, capacities)| {
            let floor = if lp_with_lower_bounds { pair.lower } else { 0 };
            let units = (flow / valuations[pair.sell as usize].0 as f64).floor();
            let planned = (units.max(0.0) as u64).clamp(floor, pair.upper);
            let state = PairState::new(books, &books.pairs()[pair.book_index], capacities, planned);
            // What the offers actually sell: every total from here on is a sum of fills.
            pair.sold = state.snap(planned);
            state
        },
    );
    let repairs = repair(&mut pairs, &mut states, valuations)?;
    let finished = Finished::of(books, pairs, &capacities, valuations, pool)?;
    Ok(finished.into_settlement(lp_with_lower_bounds, repairs))
}

/// Settles the books with amounts decided elsewhere (a block header: `(sell, buy, sold)` per
/// traded pair), checking them exactly instead of computing them: every amount must be shared
/// among the pair's offers by the one fill rule ([`crate::fill`]) with every offer paid at least
/// its limit, and no asset may pay out more than it receives. μ-completeness is reported, not
/// required.
pub fn settle_given(
    books: &OrderBooks,
    valuations: &[Valuation],
    epsilon: Fraction,
    mu: Fraction,
    trades: &[(u16, u16, u64)],
    pool: Option<&ThreadPool>,
) -> Result<Settlement, SettleError> {
    let assets = books.assets();
    if valuations.len() != assets || valuations.iter().any(|valuation| valuation.0 == 0) {
        return Err(SettleError::ValuationCount {
            given: valuations.len(),
            assets,
        });
    }
    let (mut pairs, capacities) = exact_bounds(books, valuations, epsilon, mu, pool);
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
    let finished = Finished::of(books, pairs, &capacities, valuations, pool)?;
    let lower_bounds_met = finished.lower_bounds_met;
    Ok(finished.into_settlement(lower_bounds_met, 0))
}

/// Pairs with their fills decided, the postcondition checked and the burns counted: what both
/// ways of settling end with.
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
        capacities: &[Capacities],
        valuations: &[Valuation],
        pool: Option<&ThreadPool>,
    ) -> Result<Finished, SettleError> {
        let filled = walras_par::map_mut_in_order_on(
            pool,
            &mut pairs,
            capacities,
            PAIRS_SERIAL_BELOW,
            |pair, capacities| fill_pair(books, pair, capacities),
        );
        // The first failure in pair order, as one pass would meet it.
        filled
            .into_iter()
            .collect::<Result<Vec<()>, SettleError>>()?;
        let burned = check_postcondition(books, &pairs, pool)?;
        let lower_bounds_met = pairs
            .iter()
            .all(|pair| pair.sold >= pair.lower && pair.lower_shortfall == 0);
        Ok(Finished {
            valuations: valuations.to_vec(),
            pairs,
            burned,
            lower_bounds_met,
        })
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

/// Shares the pair's `sold` among its offers by the fill rule, recording who sold less than
/// their amount, and sets `bought` to the sum of the payouts. `capacities` are the pair's, from
/// [`exact_bounds`]: what [`PayoutTerms::sale`] gives each offer for its whole amount.
fn fill_pair(
    books: &OrderBooks,
    pair: &mut PairClearing,
    capacities: &Capacities,
) -> Result<(), SettleError> {
    let book = &books.pairs()[pair.book_index];
    let terms = pair.terms();
    debug_assert_eq!(terms, capacities.terms);
    let in_the_money = books.count_at_or_below(book, pair.rate);
    let offers = books.offers(book).take(in_the_money);
    let mut walk = FillWalk::new(terms, pair.sold);
    let mut next_short = 0usize;
    let (mut reached, mut bought) = (0usize, 0u128);
    let mut short_fills = Vec::new();
    for (index, offer) in offers.enumerate() {
        if walk.left() == 0 {
            break;
        }
        // Capacities in canonical order: the sparse list is walked alongside.
        let mut capacity = offer.amount;
        if let Some(&(at, short)) = capacities.short.get(next_short) {
            if at == index {
                capacity = short;
                next_short += 1;
            }
        }
        let capacity = Sale {
            sold: capacity,
            received: terms.payout(capacity),
        };
        let sale = walk
            .next_of_capacity(offer.min_price, capacity)
            .map_err(|unmet| SettleError::PartBelowLimit {
                sell: pair.sell,
                buy: pair.buy,
                sold: pair.sold,
                offer: books.offer_at(book, unmet.offer_index).id.0,
                part: unmet.sold,
            })?;
        if sale.sold < offer.amount {
            short_fills.push(ShortFill {
                index,
                sold: sale.sold,
                returned: terms.returned_rest(offer.min_price, offer.amount, sale.sold),
            });
        }
        if sale.sold > 0 {
            reached = index + 1;
        }
        bought += sale.received;
    }
    if walk.left() > 0 {
        return Err(SettleError::BeyondLimitPrices {
            sell: pair.sell,
            buy: pair.buy,
            sold: pair.sold,
            upper: pair.sold - walk.left(),
        });
    }
    short_fills.retain(|short| short.index < reached);
    pair.offers_reached = reached;
    pair.short_fills = short_fills;
    // Above u64 only if an asset is not conserved, which the postcondition then reports.
    pair.bought = u64::try_from(bought).unwrap_or(u64::MAX);
    Ok(())
}

/// The settlement's postcondition, from the per-offer fills alone: every offer sells at most
/// its amount, at a rate at or above its limit, and receives at least `sold · limit · (1 − ε)`
/// exactly; pair totals are the sums of their fills; no asset pays out more than it receives.
/// Returns the burned amount per asset.
fn check_postcondition(
    books: &OrderBooks,
    pairs: &[PairClearing],
    pool: Option<&ThreadPool>,
) -> Result<Vec<u64>, SettleError> {
    let assets = books.assets();
    let checked = walras_par::map_in_order_on(pool, pairs, PAIRS_SERIAL_BELOW, |pair| {
        check_pair_fills(books, pair)
    });
    let mut received = vec![0u128; assets];
    let mut paid = vec![0u128; assets];
    for (pair, sums) in pairs.iter().zip(checked) {
        // The first failure in pair order, as one pass would meet it.
        let (sold_sum, bought_sum) = sums?;
        received[pair.sell as usize] += sold_sum;
        paid[pair.buy as usize] += bought_sum;
    }
    if let Some(asset) = (0..assets).find(|asset| paid[*asset] > received[*asset]) {
        return Err(SettleError::NotConserved {
            asset,
            received: received[asset],
            paid: paid[asset],
        });
    }
    Ok(received
        .iter()
        .zip(&paid)
        .map(|(r, p)| u64::try_from(r - p).expect("receipts of an asset fit its supply"))
        .collect())
}

/// One pair's part of the postcondition: each reached offer's fill within its amount and at or
/// above its limit, and the pair's totals the sums of its fills. Returns (sold, bought).
fn check_pair_fills(books: &OrderBooks, pair: &PairClearing) -> Result<(u128, u128), SettleError> {
    let terms = pair.terms();
    let offers = books.offers(&books.pairs()[pair.book_index]);
    let (mut sold_sum, mut bought_sum) = (0u128, 0u128);
    let mut shorts = pair.short_fills.iter().peekable();
    for (index, offer) in offers.take(pair.offers_reached).enumerate() {
        let sold = match shorts.next_if(|short| short.index == index) {
            Some(short) => short.sold,
            None => offer.amount,
        };
        let payout = terms.payout(sold);
        let breached = SettleError::LimitBreached {
            sell: pair.sell,
            buy: pair.buy,
            offer: offer.id.0,
            sold,
            received: payout,
        };
        if sold > offer.amount
            || (sold > 0
                && (offer.min_price > pair.rate
                    || !terms.meets_limit(offer.min_price, sold, payout)))
        {
            return Err(breached);
        }
        sold_sum += u128::from(sold);
        bought_sum += payout;
    }
    if sold_sum != u128::from(pair.sold) || bought_sum != u128::from(pair.bought) {
        return Err(SettleError::NotConserved {
            asset: pair.buy as usize,
            received: sold_sum,
            paid: bought_sum,
        });
    }
    Ok((sold_sum, bought_sum))
}

/// The offers of one pair at or below its rate that cannot sell their whole amount at their
/// limit, with what they can sell (their capacity, from [`PayoutTerms::sale`]). Sparse: most
/// offers sell their whole amount, and a million-offer book should not allocate a million
/// entries for the few that do not.
struct Capacities {
    terms: PayoutTerms,
    /// (position in canonical order, capacity below the amount), ascending.
    short: Vec<(usize, u64)>,
    /// Entry m: what the first m short offers hold beyond their capacity.
    deficit_before: Vec<u64>,
}

impl Capacities {
    fn of<'b>(offers: impl Iterator<Item = &'b Offer>, terms: PayoutTerms) -> Capacities {
        let mut short = Vec::new();
        let mut deficit_before = vec![0u64];
        let mut deficit = 0u64;
        for (index, offer) in offers.enumerate() {
            let capacity = terms.sale(offer.min_price, offer.amount).sold;
            if capacity < offer.amount {
                short.push((index, capacity));
                deficit += offer.amount - capacity;
                deficit_before.push(deficit);
            }
        }
        Capacities {
            terms,
            short,
            deficit_before,
        }
    }

    /// What the first `count` offers hold beyond their capacities.
    fn deficit_of_first(&self, count: usize) -> u64 {
        self.deficit_before[self.short.partition_point(|(index, _)| *index < count)]
    }

    /// The capacity of the offer at `index`.
    fn capacity(&self, index: usize, amount: u64) -> u64 {
        match self.short.binary_search_by_key(&index, |(at, _)| *at) {
            Ok(at) => self.short[at].1,
            Err(_) => amount,
        }
    }
}

/// Exact rates and bounds (sums of capacities) for every pair with something in the money.
fn exact_bounds(
    books: &OrderBooks,
    valuations: &[Valuation],
    epsilon: Fraction,
    mu: Fraction,
    pool: Option<&ThreadPool>,
) -> (Vec<PairClearing>, Vec<Capacities>) {
    let book_indexes: Vec<usize> = (0..books.pairs().len()).collect();
    let bounded = walras_par::map_in_order_on(pool, &book_indexes, PAIRS_SERIAL_BELOW, |at| {
        pair_bounds(books, *at, valuations, epsilon, mu)
    });
    bounded.into_iter().flatten().unzip()
}

/// [`exact_bounds`] of the pair at `book_index` in the books; `None` when nothing of it is at
/// or below its rate.
fn pair_bounds(
    books: &OrderBooks,
    book_index: usize,
    valuations: &[Valuation],
    epsilon: Fraction,
    mu: Fraction,
) -> Option<(PairClearing, Capacities)> {
    let pair = &books.pairs()[book_index];
    let rate = valuations[pair.sell as usize].rate_to(valuations[pair.buy as usize]);
    let may_trade = books.count_at_or_below(pair, rate);
    if may_trade == 0 {
        return None;
    }
    let must_trade = books.count_below(pair, rate.discounted_floor(mu));
    let terms = PayoutTerms::new(rate, epsilon);
    let capacities = Capacities::of(books.offers(pair).take(may_trade), terms);
    let lower_shortfall = capacities.deficit_of_first(must_trade);
    let clearing = PairClearing {
        sell: pair.sell,
        buy: pair.buy,
        book_index,
        rate,
        payout_rate: terms.payout_rate(),
        epsilon,
        lower: books.amount_before(pair, must_trade) - lower_shortfall,
        lower_shortfall,
        upper: books.amount_before(pair, may_trade) - capacities.deficit_of_first(may_trade),
        sold: 0,
        bought: 0,
        offers_reached: 0,
        short_fills: Vec::new(),
    };
    Some((clearing, capacities))
}

/// Payout bookkeeping of one pair for amounts up to its planned sale.
///
/// A pair selling `x` shares it by the fill rule: the offers before position `j` sell their
/// capacities (`C(j)` in all, the largest `C(j) ≤ x`) and offer `j` sells the most of the rest
/// that meets its limit; [`PairState::snap`] is that total. Its payout is a sum of per-offer
/// floors, so it takes one pass over the offers before `j`. That pass is made once, for the
/// planned sale, without allocating; the prefix sums that let [`repair`] search for a smaller
/// sale are built only for the few pairs it lowers (most blocks need no repair at all, and at a
/// million offers the sums cost more than the LP).
struct PairState<'a> {
    /// The books and the pair: exact prefix sums of amounts and the offers, read in place.
    books: &'a OrderBooks,
    book: &'a PairBook,
    /// The offers at or below the rate (a prefix of the pair's).
    in_the_money: usize,
    capacities: &'a Capacities,
    initial_sold: u64,
    /// Offers selling their capacity at the planned sale, and their payout.
    initial_full: usize,
    initial_full_payout: u128,
    /// Payout of the first j offers at capacity; built on the first smaller sale asked for.
    payout_prefix: Option<Vec<u128>>,
}

impl<'a> PairState<'a> {
    fn new(
        books: &'a OrderBooks,
        book: &'a PairBook,
        capacities: &'a Capacities,
        planned: u64,
    ) -> PairState<'a> {
        let in_the_money = books.count_at_or_below(book, capacities.terms.rate());
        let mut state = PairState {
            books,
            book,
            in_the_money,
            capacities,
            initial_sold: planned,
            initial_full: 0,
            initial_full_payout: 0,
            payout_prefix: None,
        };
        let full = state.full_before(planned);
        state.initial_full = full;
        state.initial_full_payout = books
            .offers(book)
            .take(full)
            .enumerate()
            .map(|(index, offer)| {
                let capacity = capacities.capacity(index, offer.amount);
                capacities.terms.payout(capacity)
            })
            .sum();
        state
    }

    /// `C(j)`: the capacity of the first `count` offers.
    fn capacity_before(&self, count: usize) -> u64 {
        self.books.amount_before(self.book, count) - self.capacities.deficit_of_first(count)
    }

    /// The largest `j` with `C(j) ≤ sold`: the offers selling their whole capacity.
    fn full_before(&self, sold: u64) -> usize {
        let (mut low, mut high) = (0usize, self.in_the_money); // C(low) <= sold
        while low < high {
            let middle = low + (high - low).div_ceil(2);
            if self.capacity_before(middle) <= sold {
                low = middle;
            } else {
                high = middle - 1;
            }
        }
        low
    }

    /// The offers at capacity and the sale of the offer where `sold` ends.
    fn split(&self, sold: u64) -> (usize, Sale) {
        let full = self.full_before(sold);
        let rest = sold - self.capacity_before(full);
        let partial = match (full < self.in_the_money).then(|| self.books.offer_at(self.book, full))
        {
            Some(offer) => self.capacities.terms.sale(offer.min_price, rest),
            None => Sale::NONE, // sold = C(all) exactly
        };
        (full, partial)
    }

    /// What the offers sell when `sold` is asked of them (at most `sold`).
    fn snap(&self, sold: u64) -> u64 {
        let (full, partial) = self.split(sold);
        self.capacity_before(full) + partial.sold
    }

    /// Total payout when `sold` units are asked (sold ≤ the planned amount).
    fn payout(&mut self, sold: u64) -> u128 {
        debug_assert!(sold <= self.initial_sold, "a sale above the planned amount");
        let (full, partial) = self.split(sold);
        if full == self.initial_full {
            return self.initial_full_payout + partial.received;
        }
        let offers = self.books.offers(self.book).take(self.initial_full);
        let capacities = self.capacities;
        let prefix = self.payout_prefix.get_or_insert_with(|| {
            let mut total = 0u128;
            std::iter::once(0u128)
                .chain(offers.enumerate().map(|(index, offer)| {
                    total += capacities
                        .terms
                        .payout(capacities.capacity(index, offer.amount));
                    total
                }))
                .collect()
        });
        prefix[full] + partial.received
    }

    /// The largest sale (as the offers sell it) up to `sold` whose payout is at most `target`.
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
        self.snap(low)
    }
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

    /// Whether every offer with a limit below `(1 − μ)` times its rate sold its whole amount
    /// (μ-completeness holds). Dust that cannot trade in full at its limit breaks it.
    pub fn lower_bounds_met(&self) -> bool {
        self.lower_bounds_met
    }

    /// What the offers that had to trade for μ-completeness hold beyond what they can sell at
    /// their limits (summed over pairs, in each pair's sold asset): positive only when dust
    /// or an offer at its limit keeps μ-completeness from holding.
    pub fn mu_shortfall(&self) -> u128 {
        self.pairs
            .iter()
            .map(|pair| u128::from(pair.lower_shortfall))
            .sum()
    }

    /// Whether μ-completeness fails only because of [`Settlement::mu_shortfall`]: the LP kept
    /// its lower bounds and every pair sold at least what its offers below `(1 − μ) · rate` can.
    pub fn short_of_mu_by_dust_only(&self) -> bool {
        self.lp_with_lower_bounds
            && self.mu_shortfall() > 0
            && self.pairs.iter().all(|pair| pair.sold >= pair.lower)
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
                books,
                book: books.pairs()[pair.book_index],
            })
    }

    /// Every offer that traded, pair by pair in book order, offers in canonical order.
    pub fn fills<'a>(&'a self, books: &'a OrderBooks) -> impl Iterator<Item = Fill> + 'a {
        self.traded(books).flat_map(|pair| pair.fills())
    }
}
