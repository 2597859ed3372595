//! Order books laid out for demand queries (SPEEDEX appendix G, §9.2).
//!
//! Offers are grouped by ordered pair (counting sort on the pair) and sorted within a pair in the
//! canonical order (limit price, account, offer id). For each pair the book keeps one
//! [`CurvePoint`] per offer plus a sentinel: the offer's limit price and the *exclusive* prefix
//! sums of amount and amount × limit price before it. A demand query then needs, per pair, two
//! searches for partition points and reads everything it needs from the two points found — one
//! cache line each. Exact `u64` prefix sums of amounts sit beside them for settlement.

use walras_types::{Offer, Price, MAX_AMOUNT};

/// One offer's place on its pair's supply curve (floats: heuristics only).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CurvePoint {
    /// This offer's limit price; `+inf` for the sentinel after the last offer.
    pub limit: f64,
    /// Sum of the amounts of the offers before this one.
    pub cum_amount: f64,
    /// Sum of amount × limit price of the offers before this one.
    pub cum_amount_limit: f64,
}

/// The offers selling `sell` for `buy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairBook {
    pub sell: u16,
    pub buy: u16,
    offers_start: u32,
    offers_end: u32,
    points_start: u32,
}

impl PairBook {
    pub fn len(&self) -> usize {
        (self.offers_end - self.offers_start) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Why offers cannot be booked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BookError {
    AssetCount {
        assets: usize,
    },
    UnknownAsset {
        offer_id: u64,
        asset: u16,
        assets: usize,
    },
    SameAsset {
        offer_id: u64,
    },
    Amount {
        offer_id: u64,
        amount: u64,
    },
    LimitPrice {
        offer_id: u64,
    },
    AssetTotalTooLarge {
        asset: u16,
    },
    TooManyOffers {
        offers: usize,
    },
}

impl std::fmt::Display for BookError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use BookError::*;
        match self {
            AssetCount { assets } => write!(
                f,
                "{assets} assets is out of range: clearing needs 2..={}",
                walras_types::MAX_ASSETS
            ),
            UnknownAsset {
                offer_id,
                asset,
                assets,
            } => {
                write!(
                    f,
                    "offer {offer_id}: asset {asset} is not below the asset count {assets}"
                )
            }
            SameAsset { offer_id } => write!(f, "offer {offer_id} sells and buys the same asset"),
            Amount { offer_id, amount } => {
                write!(f, "offer {offer_id}: amount {amount} is not in 1..=2^63-1")
            }
            LimitPrice { offer_id } => {
                write!(
                    f,
                    "offer {offer_id}: limit price outside the accepted range 1e-10..=1e12"
                )
            }
            AssetTotalTooLarge { asset } => {
                write!(
                    f,
                    "offers of asset {asset} add up to more than the issuance cap 2^63-1"
                )
            }
            TooManyOffers { offers } => write!(f, "{offers} offers is more than 2^31 - 1"),
        }
    }
}

impl std::error::Error for BookError {}

/// All offers of one batch, indexed for clearing.
#[derive(Clone, Debug)]
pub struct OrderBooks {
    assets: usize,
    offers: Vec<Offer>,
    pairs: Vec<PairBook>,
    points: Vec<CurvePoint>,
    exact_cum_amount: Vec<u64>,
}

impl OrderBooks {
    /// Validates and indexes `offers`, sorting with up to `threads` threads.
    pub fn build(
        offers: Vec<Offer>,
        assets: usize,
        threads: usize,
    ) -> Result<OrderBooks, BookError> {
        validate(&offers, assets)?;
        let (offers, pair_bounds) = group_by_pair(offers, assets);
        let mut offers = offers;
        sort_pairs(&mut offers, &pair_bounds, threads.max(1));
        let pairs = pair_books(&pair_bounds, assets);
        let (points, exact_cum_amount) = curve_points(&offers, &pairs);
        Ok(OrderBooks {
            assets,
            offers,
            pairs,
            points,
            exact_cum_amount,
        })
    }

    pub fn assets(&self) -> usize {
        self.assets
    }

    pub fn offer_count(&self) -> usize {
        self.offers.len()
    }

    /// The non-empty pairs, ordered by (sell, buy).
    pub fn pairs(&self) -> &[PairBook] {
        &self.pairs
    }

    /// The pair's offers in canonical order.
    pub fn offers(&self, pair: &PairBook) -> &[Offer] {
        &self.offers[pair.offers_start as usize..pair.offers_end as usize]
    }

    /// The pair's curve points: one per offer, then a sentinel with limit `+inf`.
    #[inline]
    pub fn points(&self, pair: &PairBook) -> &[CurvePoint] {
        let start = pair.points_start as usize;
        &self.points[start..start + pair.len() + 1]
    }

    /// Exact prefix sums of the pair's amounts: entry j is the amount of its first j offers.
    #[inline]
    pub fn cumulative_amounts(&self, pair: &PairBook) -> &[u64] {
        let start = pair.points_start as usize;
        &self.exact_cum_amount[start..start + pair.len() + 1]
    }

    /// Exact amount of the pair's first `count` offers (in canonical order).
    #[inline]
    pub fn amount_before(&self, pair: &PairBook, count: usize) -> u64 {
        self.exact_cum_amount[pair.points_start as usize + count]
    }

    /// How many of the pair's offers have a limit price `<= rate` (they may trade at `rate`).
    pub fn count_at_or_below(&self, pair: &PairBook, rate: Price) -> usize {
        self.offers(pair)
            .partition_point(|offer| offer.min_price <= rate)
    }

    /// How many of the pair's offers have a limit price `< rate`.
    pub fn count_below(&self, pair: &PairBook, rate: Price) -> usize {
        self.offers(pair)
            .partition_point(|offer| offer.min_price < rate)
    }
}

fn validate(offers: &[Offer], assets: usize) -> Result<(), BookError> {
    if !(2..=walras_types::MAX_ASSETS).contains(&assets) {
        return Err(BookError::AssetCount { assets });
    }
    if offers.len() > i32::MAX as usize {
        return Err(BookError::TooManyOffers {
            offers: offers.len(),
        });
    }
    let mut totals = vec![0u64; assets];
    for offer in offers {
        let offer_id = offer.id.0;
        for asset in [offer.sell.0, offer.buy.0] {
            if asset as usize >= assets {
                return Err(BookError::UnknownAsset {
                    offer_id,
                    asset,
                    assets,
                });
            }
        }
        if offer.sell == offer.buy {
            return Err(BookError::SameAsset { offer_id });
        }
        if offer.amount == 0 || offer.amount > MAX_AMOUNT {
            return Err(BookError::Amount {
                offer_id,
                amount: offer.amount,
            });
        }
        if offer.min_price < Price::MIN_LIMIT || offer.min_price > Price::MAX_LIMIT {
            return Err(BookError::LimitPrice { offer_id });
        }
        let total = &mut totals[offer.sell.0 as usize];
        *total = total
            .checked_add(offer.amount)
            .filter(|sum| *sum <= MAX_AMOUNT)
            .ok_or(BookError::AssetTotalTooLarge {
                asset: offer.sell.0,
            })?;
    }
    Ok(())
}

fn pair_index(offer: &Offer, assets: usize) -> usize {
    offer.sell.0 as usize * assets + offer.buy.0 as usize
}

/// Counting sort by pair index; returns the regrouped offers and `assets² + 1` bucket bounds.
fn group_by_pair(offers: Vec<Offer>, assets: usize) -> (Vec<Offer>, Vec<usize>) {
    let mut bounds = vec![0usize; assets * assets + 1];
    for offer in &offers {
        bounds[pair_index(offer, assets) + 1] += 1;
    }
    for index in 1..bounds.len() {
        bounds[index] += bounds[index - 1];
    }
    let mut next = bounds.clone();
    let mut grouped = offers.clone();
    for offer in offers {
        let slot = &mut next[pair_index(&offer, assets)];
        grouped[*slot] = offer;
        *slot += 1;
    }
    (grouped, bounds)
}

/// Sorts every pair's bucket into canonical order, splitting the buckets among threads.
fn sort_pairs(offers: &mut [Offer], bounds: &[usize], threads: usize) {
    let sort_bucket = |bucket: &mut [Offer]| bucket.sort_unstable_by_key(|offer| offer.key());
    if threads == 1 || offers.len() < 50_000 {
        for window in bounds.windows(2) {
            sort_bucket(&mut offers[window[0]..window[1]]);
        }
        return;
    }
    // Cut the bucket sequence into `threads` runs of roughly equal offer counts.
    let target = offers.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let mut rest: &mut [Offer] = offers;
        let mut run_start = 0usize;
        let mut bucket = 0usize;
        while bucket + 1 < bounds.len() {
            let mut run_end_bucket = bucket;
            while run_end_bucket + 1 < bounds.len() && bounds[run_end_bucket] - run_start < target {
                run_end_bucket += 1;
            }
            let run_end = bounds[run_end_bucket];
            let (run, tail) = rest.split_at_mut(run_end - run_start);
            rest = tail;
            let run_bounds: Vec<usize> = bounds[bucket..=run_end_bucket]
                .iter()
                .map(|bound| bound - run_start)
                .collect();
            scope.spawn(move || {
                for window in run_bounds.windows(2) {
                    sort_bucket(&mut run[window[0]..window[1]]);
                }
            });
            run_start = run_end;
            bucket = run_end_bucket.max(bucket + 1);
        }
    });
}

fn pair_books(bounds: &[usize], assets: usize) -> Vec<PairBook> {
    let mut pairs = Vec::new();
    let mut points_start = 0u32;
    for (index, window) in bounds.windows(2).enumerate() {
        if window[0] == window[1] {
            continue;
        }
        pairs.push(PairBook {
            sell: (index / assets) as u16,
            buy: (index % assets) as u16,
            offers_start: window[0] as u32,
            offers_end: window[1] as u32,
            points_start,
        });
        points_start += (window[1] - window[0]) as u32 + 1;
    }
    pairs
}

fn curve_points(offers: &[Offer], pairs: &[PairBook]) -> (Vec<CurvePoint>, Vec<u64>) {
    let total = offers.len() + pairs.len();
    let mut points = Vec::with_capacity(total);
    let mut exact = Vec::with_capacity(total);
    for pair in pairs {
        let mut cum_amount = 0u64;
        let mut cum_amount_limit = 0.0f64;
        for offer in &offers[pair.offers_start as usize..pair.offers_end as usize] {
            let limit = offer.min_price.to_f64();
            points.push(CurvePoint {
                limit,
                cum_amount: cum_amount as f64,
                cum_amount_limit,
            });
            exact.push(cum_amount);
            cum_amount += offer.amount; // bounded by the per-asset cap checked in validate()
            cum_amount_limit += offer.amount as f64 * limit;
        }
        points.push(CurvePoint {
            limit: f64::INFINITY,
            cum_amount: cum_amount as f64,
            cum_amount_limit,
        });
        exact.push(cum_amount);
    }
    (points, exact)
}

#[cfg(test)]
mod tests {
    use super::*;
    use walras_types::{AccountId, AssetId, OfferId};

    fn offer(id: u64, sell: u16, buy: u16, amount: u64, price: f64) -> Offer {
        Offer {
            id: OfferId(id),
            account: AccountId(id % 3),
            sell: AssetId(sell),
            buy: AssetId(buy),
            amount,
            min_price: Price::from_f64(price),
        }
    }

    #[test]
    fn groups_and_sorts_canonically() {
        let offers = vec![
            offer(1, 1, 0, 5, 2.0),
            offer(2, 0, 1, 7, 1.5),
            offer(3, 0, 1, 3, 0.5),
            offer(4, 0, 1, 4, 1.5),
        ];
        for threads in [1, 2] {
            let books = OrderBooks::build(offers.clone(), 2, threads).unwrap();
            assert_eq!(books.pairs().len(), 2);
            let pair = books.pairs()[0];
            assert_eq!((pair.sell, pair.buy), (0, 1));
            let ids: Vec<u64> = books.offers(&pair).iter().map(|offer| offer.id.0).collect();
            assert_eq!(ids, vec![3, 4, 2]); // price 0.5, then 1.5 by account (1 < 2)
            let points = books.points(&pair);
            assert_eq!(points.len(), 4);
            assert_eq!(points[3].cum_amount, 14.0);
            assert_eq!(books.amount_before(&pair, 2), 7);
            assert_eq!(books.count_at_or_below(&pair, Price::from_f64(1.5)), 3);
            assert_eq!(books.count_below(&pair, Price::from_f64(1.5)), 1);
        }
    }

    #[test]
    fn rejects_invalid_offers() {
        let cases = [
            (vec![offer(1, 0, 5, 1, 1.0)], "asset 5"),
            (vec![offer(1, 0, 0, 1, 1.0)], "same asset"),
            (vec![offer(1, 0, 1, 0, 1.0)], "amount 0"),
            (vec![offer(1, 0, 1, 1, 1e-11)], "limit price"),
            (
                vec![offer(1, 0, 1, MAX_AMOUNT, 1.0), offer(2, 0, 1, 1, 1.0)],
                "issuance cap",
            ),
        ];
        for (offers, expected) in cases {
            let message = OrderBooks::build(offers, 3, 1).unwrap_err().to_string();
            assert!(message.contains(expected), "{message}");
        }
        assert!(OrderBooks::build(vec![], 1, 1).is_err());
        assert!(OrderBooks::build(vec![], 2, 1).is_ok());
    }
}
