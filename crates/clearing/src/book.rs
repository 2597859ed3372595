//! Order books laid out for demand queries (SPEEDEX appendix G, §9.2).
//!
//! Offers are grouped by ordered pair (counting sort on the pair) and sorted within a pair in the
//! canonical order (limit price, account, offer id).
//!
//! For demand queries each pair's supply curve is cut into [`Block`]s of [`BLOCK_OFFERS`] offers,
//! aligned to cache lines: the offers' limit prices and the block-local running sums of amount and
//! amount × limit, as floats. Beside them, per block, a *pivot*: the block's first limit price and
//! the prefix sums before the block. A search finds its block in the small pivot array (walked in
//! pair order, so it streams through the cache), counts the passing limits inside the block with
//! independent compares, and reads one running sum of each kind. Exact `u64` prefix sums of amounts sit beside all
//! this for settlement.

use walras_types::{Offer, OfferKey, Price, MAX_AMOUNT};

/// Offers per [`Block`].
pub(crate) const BLOCK_OFFERS: usize = 16;

/// Up to [`BLOCK_OFFERS`] consecutive offers of one pair (floats: heuristics only): five cache
/// lines, of which a search reads two — the limits, and the line holding its running sums.
///
/// Limits are stored as `f32` (16 per cache line). Rounding a limit by up to 6e-8 of its value
/// moves where a demand query puts that one offer relative to the rate by as much; the smoothed
/// demand is continuous there, so the effect on tâtonnement is negligible, and nothing exact ever
/// reads these floats. Unused slots hold limit `+inf` and repeat the block's totals.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Block {
    pub limits: [f32; BLOCK_OFFERS],
    /// Amount and amount × limit of this block's offers up to and including each slot.
    pub through: [PrefixSums; BLOCK_OFFERS],
}

/// Prefix sums before a block (floats: heuristics only).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PrefixSums {
    /// Sum of the amounts of the offers before the block.
    pub amount: f64,
    /// Sum of amount × limit price of the offers before the block.
    pub amount_limit: f64,
}

/// The offers selling `sell` for `buy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairBook {
    pub sell: u16,
    pub buy: u16,
    offers_start: u32,
    offers_end: u32,
    /// First block (and pivot) of this pair.
    blocks_start: u32,
    /// First exact prefix sum of this pair (offers_start + index of the pair).
    exact_start: u32,
}

impl PairBook {
    pub fn len(&self) -> usize {
        (self.offers_end - self.offers_start) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Blocks holding this pair's offers.
    pub fn block_count(&self) -> usize {
        self.len().div_ceil(BLOCK_OFFERS)
    }
}

/// Why offers cannot be booked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BookError {
    #[error("{assets} assets is out of range: clearing needs 2..={max}", max = walras_types::MAX_ASSETS)]
    AssetCount { assets: usize },
    #[error("offer {offer_id}: asset {asset} is not below the asset count {assets}")]
    UnknownAsset {
        offer_id: u64,
        asset: u16,
        assets: usize,
    },
    #[error("offer {offer_id} sells and buys the same asset")]
    SameAsset { offer_id: u64 },
    #[error("offer {offer_id}: amount {amount} is not in 1..=2^63-1")]
    Amount { offer_id: u64, amount: u64 },
    #[error("offer {offer_id}: limit price outside the accepted range {range}", range = Price::LIMIT_RANGE_TEXT)]
    LimitPrice { offer_id: u64 },
    #[error("offers of asset {asset} add up to more than the issuance cap 2^63-1")]
    AssetTotalTooLarge { asset: u16 },
    #[error("{offers} offers is more than 2^31 - 1")]
    TooManyOffers { offers: usize },
    /// [`OrderBooks::from_sorted_pairs`] got an offer in another pair's list, or a pair's list
    /// out of canonical order (or holding one key twice).
    #[error("offer {offer_id} is out of its pair or out of canonical order")]
    NotCanonical { offer_id: u64 },
    /// [`OrderBooks::from_sorted_pairs`] got another number of pair lists than `assets²`.
    #[error("{lists} pair lists for {assets} assets: expected one per ordered pair")]
    PairLists { lists: usize, assets: usize },
    /// [`OrderBooks::edited`] got edits out of (pair, key) order, an edit of an offer the
    /// books do not hold, or a new offer whose key they already hold.
    #[error("edit of offer {offer_id} does not apply: edits must be in (pair, key) order, remove or change an offer the books hold, and insert only new keys")]
    Edit { offer_id: u64 },
}

/// One change to the open offers between two batches, for [`OrderBooks::edited`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OfferEdit {
    /// The offer leaves its book (cancelled, or filled in full).
    Remove(OfferKey),
    /// The offer stays with this remaining amount (filled in part).
    SetAmount(OfferKey, u64),
    /// A new offer.
    Insert(Offer),
}

impl OfferEdit {
    /// The key of the offer edited: edits are applied in (pair, key) order.
    pub fn key(&self) -> OfferKey {
        match self {
            OfferEdit::Remove(key) | OfferEdit::SetAmount(key, _) => *key,
            OfferEdit::Insert(offer) => offer.key(),
        }
    }
}

/// The allocations of an [`OrderBooks`] no longer needed, kept to build the next books in
/// ([`OrderBooks::into_buffers`], [`OrderBooks::edited`]): at a million offers, fresh arrays
/// each batch cost more in page faults than filling them.
#[derive(Debug, Default)]
pub struct BookBuffers {
    offers: Vec<Offer>,
    blocks: Vec<Block>,
    pivot_limits: Vec<f32>,
    pivot_sums: Vec<PrefixSums>,
    pair_totals: Vec<PrefixSums>,
    exact_cum_amount: Vec<u64>,
    limits: Vec<f64>,
}

/// All offers of one batch, indexed for clearing.
#[derive(Clone, Debug, PartialEq)]
pub struct OrderBooks {
    assets: usize,
    offers: Vec<Offer>,
    pairs: Vec<PairBook>,
    blocks: Vec<Block>,
    /// Per block: its first limit price (as stored in the block).
    pivot_limits: Vec<f32>,
    /// Per block: prefix sums before it.
    pivot_sums: Vec<PrefixSums>,
    /// Per pair: total amount and amount × limit (the prefix sums after its last offer).
    pair_totals: Vec<PrefixSums>,
    exact_cum_amount: Vec<u64>,
    /// Per offer (as `offers`): its limit price as `f64`, converted once per booking and
    /// carried by [`OrderBooks::edited`] (the supply table reads them every batch).
    limits: Vec<f64>,
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
        let curves = Curves::build(&offers, &pairs);
        Ok(OrderBooks::from_parts(assets, offers, pairs, curves))
    }

    /// Books from offers already grouped by pair and in canonical order within each pair, as
    /// an exchange keeps its open offers: `pairs[sell * assets + buy]` holds that pair's offers.
    /// Skips [`Self::build`]'s regrouping and sort, and checks and indexes each pair on its own
    /// thread (every pair's curves depend on its offers alone, so the result is the same for
    /// any thread count); equal to `build` of the same offers. Refuses lists out of order
    /// ([`BookError::NotCanonical`]) as well as every offer `build` refuses.
    pub fn from_sorted_pairs(
        pairs: Vec<Vec<Offer>>,
        assets: usize,
        threads: usize,
    ) -> Result<OrderBooks, BookError> {
        if !(2..=walras_types::MAX_ASSETS).contains(&assets) {
            return Err(BookError::AssetCount { assets });
        }
        if pairs.len() != assets * assets {
            return Err(BookError::PairLists {
                lists: pairs.len(),
                assets,
            });
        }
        let count: usize = pairs.iter().map(Vec::len).sum();
        if count > i32::MAX as usize {
            return Err(BookError::TooManyOffers { offers: count });
        }
        let open: Vec<(usize, &[Offer])> = pairs
            .iter()
            .enumerate()
            .filter(|(_, offers)| !offers.is_empty())
            .map(|(index, offers)| (index, offers.as_slice()))
            .collect();
        let checked = walras_par::map_in_order(&open, threads, 2, |(index, offers)| {
            check_pair(*index, offers, assets).map(|total| (total, Curves::of_pair(offers)))
        });
        let mut totals = vec![0u64; assets];
        let mut parts = Vec::with_capacity(open.len());
        for ((index, _), result) in open.iter().zip(checked) {
            let (total, curves) = result?;
            let sell = index / assets;
            totals[sell] = totals[sell]
                .checked_add(total)
                .filter(|sum| *sum <= MAX_AMOUNT)
                .ok_or(BookError::AssetTotalTooLarge { asset: sell as u16 })?;
            parts.push(curves);
        }
        let mut bounds = Vec::with_capacity(pairs.len() + 1);
        bounds.push(0usize);
        for offers in &pairs {
            bounds.push(bounds[bounds.len() - 1] + offers.len());
        }
        let pair_list = pair_books(&bounds, assets);
        let curves = Curves::concat(parts);
        let mut offers = Vec::with_capacity(count);
        for pair in pairs {
            offers.extend(pair);
        }
        Ok(OrderBooks::from_parts(assets, offers, pair_list, curves))
    }

    /// The books of `previous`'s offers with `edits` applied, built in `buffers` (see
    /// [`Self::into_buffers`]): equal, field for field, to [`Self::from_sorted_pairs`] of the
    /// edited lists, so every float a demand query reads is the same as a build from scratch
    /// (the curves are recomputed in the same order from the same offers) and the result
    /// depends on the open offers alone, not on the history of edits that led to them.
    ///
    /// `edits` hold `(sell * assets + buy, edit)` in (pair, key) order, at most one per key.
    /// Offers carried over from `previous` were checked when booked; inserted ones are checked
    /// as [`Self::build`] checks them, and every asset's total against the issuance cap.
    ///
    /// Cost: one pass over the offers (a copy and the curves), no sort, no tree walk. It is
    /// still linear in the open offers, not in the edits: the curves' running float sums are
    /// sequential from each pair's first offer, so an edit moves every sum after it.
    pub fn edited(
        previous: &OrderBooks,
        edits: &[(usize, OfferEdit)],
        buffers: BookBuffers,
    ) -> Result<OrderBooks, BookError> {
        let assets = previous.assets;
        let mut by_index: Vec<Option<&PairBook>> = vec![None; assets * assets];
        for pair in &previous.pairs {
            by_index[pair.sell as usize * assets + pair.buy as usize] = Some(pair);
        }
        let mut out = buffers;
        out.offers.clear();
        out.limits.clear();
        let mut bounds = Vec::with_capacity(assets * assets + 1);
        bounds.push(0usize);
        let mut rest = edits;
        let mut previous_edit: Option<(usize, OfferKey)> = None;
        for (index, pair) in by_index.iter().enumerate() {
            let count = rest.partition_point(|(edit_pair, _)| *edit_pair <= index);
            let (pair_edits, tail) = rest.split_at(count);
            rest = tail;
            if let Some(&(edit_pair, edit)) = pair_edits.first() {
                if edit_pair < index {
                    return Err(BookError::Edit {
                        offer_id: edit.key().id.0,
                    });
                }
            }
            let (carried, carried_limits) = pair.map_or((&[][..], &[][..]), |pair| {
                (previous.offers(pair), previous.limits(pair))
            });
            merge_pair(
                index,
                assets,
                (carried, carried_limits),
                pair_edits,
                &mut previous_edit,
                (&mut out.offers, &mut out.limits),
            )?;
            bounds.push(out.offers.len());
        }
        if let Some((_, edit)) = rest.first() {
            return Err(BookError::Edit {
                offer_id: edit.key().id.0,
            });
        }
        if out.offers.len() > i32::MAX as usize {
            return Err(BookError::TooManyOffers {
                offers: out.offers.len(),
            });
        }
        let pairs = pair_books(&bounds, assets);
        let mut curves = Curves {
            blocks: std::mem::take(&mut out.blocks),
            pivot_limits: std::mem::take(&mut out.pivot_limits),
            pivot_sums: std::mem::take(&mut out.pivot_sums),
            pair_totals: std::mem::take(&mut out.pair_totals),
            exact_cum_amount: std::mem::take(&mut out.exact_cum_amount),
            limits: Vec::new(),
        };
        curves.clear();
        let mut totals = vec![0u64; assets];
        for pair in &pairs {
            let range = pair.offers_start as usize..pair.offers_end as usize;
            curves.add_pair_with_limits(&out.offers[range.clone()], &out.limits[range]);
            let total = *curves.exact_cum_amount.last().unwrap_or(&0);
            let sell = pair.sell as usize;
            totals[sell] = totals[sell]
                .checked_add(total)
                .filter(|sum| *sum <= MAX_AMOUNT)
                .ok_or(BookError::AssetTotalTooLarge { asset: pair.sell })?;
        }
        curves.limits = out.limits;
        Ok(OrderBooks::from_parts(assets, out.offers, pairs, curves))
    }

    /// These books' allocations, emptied, for [`Self::edited`] to build the next books in.
    pub fn into_buffers(self) -> BookBuffers {
        let mut buffers = BookBuffers {
            offers: self.offers,
            blocks: self.blocks,
            pivot_limits: self.pivot_limits,
            pivot_sums: self.pivot_sums,
            pair_totals: self.pair_totals,
            exact_cum_amount: self.exact_cum_amount,
            limits: self.limits,
        };
        buffers.offers.clear();
        buffers.blocks.clear();
        buffers.pivot_limits.clear();
        buffers.pivot_sums.clear();
        buffers.pair_totals.clear();
        buffers.exact_cum_amount.clear();
        buffers.limits.clear();
        buffers
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

    /// The pair's blocks.
    #[inline]
    pub fn blocks(&self, pair: &PairBook) -> &[Block] {
        let start = pair.blocks_start as usize;
        &self.blocks[start..start + pair.block_count()]
    }

    /// The first limit price of each of the pair's blocks.
    #[inline]
    pub fn pivot_limits(&self, pair: &PairBook) -> &[f32] {
        let start = pair.blocks_start as usize;
        &self.pivot_limits[start..start + pair.block_count()]
    }

    /// Prefix sums before each of the pair's blocks.
    #[inline]
    pub fn pivot_sums(&self, pair: &PairBook) -> &[PrefixSums] {
        let start = pair.blocks_start as usize;
        &self.pivot_sums[start..start + pair.block_count()]
    }

    /// The pair's totals: amount and amount × limit over all its offers.
    #[inline]
    pub fn pair_totals(&self, pair_index: usize) -> PrefixSums {
        self.pair_totals[pair_index]
    }

    /// The pair's limit prices as `f64`, in canonical order (`to_f64` of each `min_price`).
    #[inline]
    pub fn limits(&self, pair: &PairBook) -> &[f64] {
        &self.limits[pair.offers_start as usize..pair.offers_end as usize]
    }

    /// Exact prefix sums of the pair's amounts: entry j is the amount of its first j offers.
    #[inline]
    pub fn cumulative_amounts(&self, pair: &PairBook) -> &[u64] {
        let start = pair.exact_start as usize;
        &self.exact_cum_amount[start..start + pair.len() + 1]
    }

    /// Exact amount of the pair's first `count` offers (in canonical order).
    #[inline]
    pub fn amount_before(&self, pair: &PairBook, count: usize) -> u64 {
        self.exact_cum_amount[pair.exact_start as usize + count]
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
        check_offer(offer, assets)?;
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

/// One offer alone: known and distinct assets, an amount in 1..=2^63-1, a limit in range.
fn check_offer(offer: &Offer, assets: usize) -> Result<(), BookError> {
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
    if !offer.min_price.is_valid_limit() {
        return Err(BookError::LimitPrice { offer_id });
    }
    Ok(())
}

/// One pair's list for [`OrderBooks::from_sorted_pairs`]: every offer valid and of pair
/// `index`, keys strictly ascending. Returns the pair's total amount.
fn check_pair(index: usize, offers: &[Offer], assets: usize) -> Result<u64, BookError> {
    validate(offers, assets)?;
    let mut previous = None;
    for offer in offers {
        let key = offer.key();
        if pair_index(offer, assets) != index || previous.is_some_and(|previous| previous >= key) {
            return Err(BookError::NotCanonical {
                offer_id: offer.id.0,
            });
        }
        previous = Some(key);
    }
    // validate() bounded the sum by the issuance cap.
    Ok(offers.iter().map(|offer| offer.amount).sum())
}

/// Appends pair `index`'s edited offers to `out`: `carried` (canonical, checked when
/// booked) merged with `edits` (this pair's, ascending keys). `last_edit` is the previous
/// edit seen across pairs, to refuse edits out of order.
fn merge_pair(
    index: usize,
    assets: usize,
    (carried, carried_limits): (&[Offer], &[f64]),
    edits: &[(usize, OfferEdit)],
    last_edit: &mut Option<(usize, OfferKey)>,
    (out, out_limits): (&mut Vec<Offer>, &mut Vec<f64>),
) -> Result<(), BookError> {
    let mut carried = carried.iter().zip(carried_limits).peekable();
    for (_, edit) in edits {
        let key = edit.key();
        let refuse = BookError::Edit { offer_id: key.id.0 };
        if last_edit.is_some_and(|last| last >= (index, key)) {
            return Err(refuse);
        }
        *last_edit = Some((index, key));
        while let Some((offer, limit)) = carried.next_if(|(offer, _)| offer.key() < key) {
            out.push(*offer);
            out_limits.push(*limit);
        }
        let held = carried.next_if(|(offer, _)| offer.key() == key);
        match (edit, held) {
            (OfferEdit::Remove(_), Some(_)) => {}
            (OfferEdit::SetAmount(_, amount), Some((offer, limit))) => {
                if *amount == 0 || *amount > MAX_AMOUNT {
                    return Err(BookError::Amount {
                        offer_id: key.id.0,
                        amount: *amount,
                    });
                }
                out.push(Offer {
                    amount: *amount,
                    ..*offer
                });
                out_limits.push(*limit);
            }
            (OfferEdit::Insert(offer), None) => {
                // The per-asset totals are checked once the books are built.
                check_offer(offer, assets)?;
                if pair_index(offer, assets) != index {
                    return Err(BookError::NotCanonical {
                        offer_id: offer.id.0,
                    });
                }
                out.push(*offer);
                out_limits.push(offer.min_price.to_f64());
            }
            _ => return Err(refuse),
        }
    }
    for (offer, limit) in carried {
        out.push(*offer);
        out_limits.push(*limit);
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

/// Sorts every pair's bucket into canonical order, the buckets spread over threads.
fn sort_pairs(offers: &mut [Offer], bounds: &[usize], threads: usize) {
    let threads = if offers.len() < 50_000 { 1 } else { threads };
    let mut buckets: Vec<&mut [Offer]> = Vec::with_capacity(bounds.len());
    let mut rest: &mut [Offer] = offers;
    for window in bounds.windows(2) {
        let (bucket, tail) = rest.split_at_mut(window[1] - window[0]);
        rest = tail;
        if bucket.len() > 1 {
            buckets.push(bucket);
        }
    }
    walras_par::for_each_mut(buckets, threads, |bucket| {
        bucket.sort_unstable_by_key(|offer| offer.key())
    });
}

fn pair_books(bounds: &[usize], assets: usize) -> Vec<PairBook> {
    let mut pairs = Vec::new();
    let mut blocks_start = 0u32;
    for (index, window) in bounds.windows(2).enumerate() {
        if window[0] == window[1] {
            continue;
        }
        let pair = PairBook {
            sell: (index / assets) as u16,
            buy: (index % assets) as u16,
            offers_start: window[0] as u32,
            offers_end: window[1] as u32,
            blocks_start,
            exact_start: (window[0] + pairs.len()) as u32,
        };
        blocks_start += pair.block_count() as u32;
        pairs.push(pair);
    }
    pairs
}

/// The float curves of every pair, and the exact prefix sums.
struct Curves {
    blocks: Vec<Block>,
    pivot_limits: Vec<f32>,
    pivot_sums: Vec<PrefixSums>,
    pair_totals: Vec<PrefixSums>,
    exact_cum_amount: Vec<u64>,
    limits: Vec<f64>,
}

impl OrderBooks {
    /// The books of `offers` (grouped by pair, canonical within each) with their `pairs` and
    /// the `curves` indexed over them: the one assembly every constructor ends with.
    fn from_parts(
        assets: usize,
        offers: Vec<Offer>,
        pairs: Vec<PairBook>,
        curves: Curves,
    ) -> OrderBooks {
        OrderBooks {
            assets,
            offers,
            pairs,
            blocks: curves.blocks,
            pivot_limits: curves.pivot_limits,
            pivot_sums: curves.pivot_sums,
            pair_totals: curves.pair_totals,
            exact_cum_amount: curves.exact_cum_amount,
            limits: curves.limits,
        }
    }
}

impl Curves {
    fn build(offers: &[Offer], pairs: &[PairBook]) -> Curves {
        let block_total = pairs.iter().map(PairBook::block_count).sum();
        let mut curves = Curves {
            blocks: Vec::with_capacity(block_total),
            pivot_limits: Vec::with_capacity(block_total),
            pivot_sums: Vec::with_capacity(block_total),
            pair_totals: Vec::with_capacity(pairs.len()),
            exact_cum_amount: Vec::with_capacity(offers.len() + pairs.len()),
            limits: Vec::with_capacity(offers.len()),
        };
        for pair in pairs {
            curves.add_pair(&offers[pair.offers_start as usize..pair.offers_end as usize]);
        }
        curves
    }

    /// One pair's curves alone (its pivots and exact sums start from zero, as in `build`).
    fn of_pair(offers: &[Offer]) -> Curves {
        let blocks = offers.len().div_ceil(BLOCK_OFFERS);
        let mut curves = Curves {
            blocks: Vec::with_capacity(blocks),
            pivot_limits: Vec::with_capacity(blocks),
            pivot_sums: Vec::with_capacity(blocks),
            pair_totals: Vec::with_capacity(1),
            exact_cum_amount: Vec::with_capacity(offers.len() + 1),
            limits: Vec::with_capacity(offers.len()),
        };
        curves.add_pair(offers);
        curves
    }

    /// Pairs' curves one after another, as `build` lays them out.
    fn concat(parts: Vec<Curves>) -> Curves {
        let blocks = parts.iter().map(|part| part.blocks.len()).sum();
        let exact = parts.iter().map(|part| part.exact_cum_amount.len()).sum();
        let mut curves = Curves {
            blocks: Vec::with_capacity(blocks),
            pivot_limits: Vec::with_capacity(blocks),
            pivot_sums: Vec::with_capacity(blocks),
            pair_totals: Vec::with_capacity(parts.len()),
            exact_cum_amount: Vec::with_capacity(exact),
            limits: Vec::with_capacity(exact),
        };
        for part in parts {
            curves.blocks.extend(part.blocks);
            curves.pivot_limits.extend(part.pivot_limits);
            curves.pivot_sums.extend(part.pivot_sums);
            curves.pair_totals.extend(part.pair_totals);
            curves.exact_cum_amount.extend(part.exact_cum_amount);
            curves.limits.extend(part.limits);
        }
        curves
    }

    fn clear(&mut self) {
        self.blocks.clear();
        self.pivot_limits.clear();
        self.pivot_sums.clear();
        self.pair_totals.clear();
        self.exact_cum_amount.clear();
        self.limits.clear();
    }

    /// One pair's curves, converting its limits (kept in `limits`).
    fn add_pair(&mut self, offers: &[Offer]) {
        let start = self.limits.len();
        self.limits
            .extend(offers.iter().map(|offer| offer.min_price.to_f64()));
        let limits = std::mem::take(&mut self.limits);
        self.add_pair_with_limits(offers, &limits[start..]);
        self.limits = limits;
    }

    /// One pair's curves from its offers and their limits as `f64` (not kept here).
    fn add_pair_with_limits(&mut self, offers: &[Offer], limits: &[f64]) {
        let mut sums = PrefixSums::default();
        let mut exact = 0u64;
        for (chunk, chunk_limits) in offers.chunks(BLOCK_OFFERS).zip(limits.chunks(BLOCK_OFFERS)) {
            let mut block = Block {
                limits: [f32::INFINITY; BLOCK_OFFERS],
                through: [PrefixSums::default(); BLOCK_OFFERS],
            };
            self.pivot_sums.push(sums);
            let (mut amount, mut amount_limit) = (0.0f64, 0.0f64);
            for slot in 0..BLOCK_OFFERS {
                if let (Some(offer), Some(&limit)) = (chunk.get(slot), chunk_limits.get(slot)) {
                    block.limits[slot] = limit as f32;
                    amount += offer.amount as f64;
                    amount_limit += offer.amount as f64 * limit;
                    self.exact_cum_amount.push(exact);
                    exact += offer.amount; // bounded by the per-asset cap checked in validate()
                }
                block.through[slot] = PrefixSums {
                    amount,
                    amount_limit,
                };
            }
            sums.amount += amount;
            sums.amount_limit += amount_limit;
            self.pivot_limits.push(block.limits[0]);
            self.blocks.push(block);
        }
        self.exact_cum_amount.push(exact);
        self.pair_totals.push(sums);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
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
            assert_eq!(books.blocks(&pair).len(), 1);
            assert_eq!(books.blocks(&pair)[0].limits[3], f32::INFINITY);
            assert_eq!(books.pair_totals(0).amount, 14.0);
            assert_eq!(books.cumulative_amounts(&pair), &[0, 3, 7, 14]);
            assert_eq!(books.amount_before(&pair, 2), 7);
            assert_eq!(books.count_at_or_below(&pair, Price::from_f64(1.5)), 3);
            assert_eq!(books.count_below(&pair, Price::from_f64(1.5)), 1);
        }
    }

    /// Books built from per-pair sorted lists equal those `build` makes of the same offers,
    /// for any thread count, and a list out of order or in the wrong pair is refused.
    #[test]
    fn books_from_sorted_pairs_equal_books_built_from_scratch() {
        let mut offers = Vec::new();
        for id in 0..3_000u64 {
            let (sell, buy) = ((id % 3) as u16, ((id / 3 + 1) % 3) as u16);
            if sell != buy {
                offers.push(offer(
                    id,
                    sell,
                    buy,
                    1 + id % 97,
                    0.5 + (id % 61) as f64 / 7.0,
                ));
            }
        }
        let built = OrderBooks::build(offers.clone(), 3, 1).unwrap();
        let mut lists = vec![Vec::new(); 9];
        for offer in &offers {
            lists[pair_index(offer, 3)].push(*offer);
        }
        for list in &mut lists {
            list.sort_unstable_by_key(Offer::key);
        }
        for threads in [1, 2, 3] {
            let sorted = OrderBooks::from_sorted_pairs(lists.clone(), 3, threads).unwrap();
            assert_eq!(sorted.offers, built.offers);
            assert_eq!(sorted.pairs, built.pairs);
            assert_eq!(sorted.blocks, built.blocks);
            assert_eq!(sorted.pivot_limits, built.pivot_limits);
            assert_eq!(sorted.pivot_sums, built.pivot_sums);
            assert_eq!(sorted.pair_totals, built.pair_totals);
            assert_eq!(sorted.exact_cum_amount, built.exact_cum_amount);
        }
        let mut unsorted = lists.clone();
        let pair = unsorted.iter_mut().find(|list| list.len() > 1).unwrap();
        pair.swap(0, 1);
        let error = OrderBooks::from_sorted_pairs(unsorted, 3, 2).unwrap_err();
        assert!(matches!(error, BookError::NotCanonical { .. }), "{error}");
        let mut misplaced = lists.clone();
        let stray = misplaced[1][0];
        misplaced[2].insert(0, stray);
        let error = OrderBooks::from_sorted_pairs(misplaced, 3, 1).unwrap_err();
        assert!(matches!(error, BookError::NotCanonical { .. }), "{error}");
        let error = OrderBooks::from_sorted_pairs(lists[..8].to_vec(), 3, 1).unwrap_err();
        assert!(matches!(error, BookError::PairLists { .. }), "{error}");
    }

    /// A random limit: often the extremes of the accepted range, else anywhere in it.
    fn limit_strategy() -> impl Strategy<Value = Price> {
        prop_oneof![
            Just(Price::MIN_LIMIT),
            Just(Price::MAX_LIMIT),
            (-12.0f64..12.0).prop_map(|exponent| Price::nearest_limit(10f64.powf(exponent))),
            (0.9f64..1.1).prop_map(Price::nearest_limit),
        ]
    }

    /// Dust (1), small and huge amounts.
    fn amount_strategy() -> impl Strategy<Value = u64> {
        prop_oneof![Just(1u64), 1u64..1_000, 1u64..(1u64 << 40)]
    }

    /// Per pair index, the lists `from_sorted_pairs` takes.
    fn lists_of(offers: &[Offer], assets: usize) -> Vec<Vec<Offer>> {
        let mut lists = vec![Vec::new(); assets * assets];
        for offer in offers {
            lists[pair_index(offer, assets)].push(*offer);
        }
        for list in &mut lists {
            list.sort_unstable_by_key(Offer::key);
        }
        lists
    }

    /// One batch's changes: per open offer a choice (keep, cancel, fill in part, fill in
    /// full) and some new offers; returns the edits in (pair, key) order and the offers open
    /// after them.
    fn apply_choices(
        open: &[Offer],
        choices: &[(u8, u64)],
        created: &[(u16, u16, u64, Price)],
        next_id: &mut u64,
        assets: usize,
    ) -> (Vec<(usize, OfferEdit)>, Vec<Offer>) {
        let mut edits = Vec::new();
        let mut after = Vec::new();
        for (offer, (choice, part)) in open.iter().zip(choices.iter().cycle()) {
            let index = pair_index(offer, assets);
            match choice % 4 {
                0 => after.push(*offer),
                1 | 2 => edits.push((index, OfferEdit::Remove(offer.key()))),
                _ => {
                    let remaining = 1 + part % offer.amount;
                    edits.push((index, OfferEdit::SetAmount(offer.key(), remaining)));
                    after.push(Offer {
                        amount: remaining,
                        ..*offer
                    });
                }
            }
        }
        for (sell, buy, amount, limit) in created {
            let (sell, buy) = (sell % assets as u16, buy % assets as u16);
            if sell == buy {
                continue;
            }
            *next_id += 1;
            let offer = Offer {
                id: OfferId(*next_id),
                account: AccountId(*next_id % 5),
                sell: AssetId(sell),
                buy: AssetId(buy),
                amount: *amount,
                min_price: *limit,
            };
            edits.push((pair_index(&offer, assets), OfferEdit::Insert(offer)));
            after.push(offer);
        }
        edits.sort_unstable_by_key(|(index, edit)| (*index, edit.key()));
        (edits, after)
    }

    proptest! {
        /// Books edited in place, batch after batch (reusing the previous books' buffers),
        /// are the books a build from scratch makes of the same open offers: the same offers,
        /// the same float curves bit for bit, the same exact prefix sums. Covers cancels,
        /// partial and full fills, new offers, dust amounts and the extreme limits.
        #[test]
        fn edited_books_equal_books_built_from_scratch(
            start in proptest::collection::vec(
                (0u16..3, 0u16..3, amount_strategy(), limit_strategy()), 0..120),
            batches in proptest::collection::vec((
                proptest::collection::vec((0u8..8, any::<u64>()), 1..40),
                proptest::collection::vec(
                    (0u16..3, 0u16..3, amount_strategy(), limit_strategy()), 0..60),
            ), 1..4),
        ) {
            let assets = 3;
            let mut next_id = 0u64;
            let (_, mut open) = apply_choices(&[], &[(0, 0)], &start, &mut next_id, assets);
            let mut books = OrderBooks::from_sorted_pairs(lists_of(&open, assets), assets, 1)
                .unwrap();
            for (choices, created) in &batches {
                let (edits, after) =
                    apply_choices(&open, choices, created, &mut next_id, assets);
                let spare = books.clone().into_buffers();
                let edited = OrderBooks::edited(&books, &edits, spare).unwrap();
                let scratch =
                    OrderBooks::from_sorted_pairs(lists_of(&after, assets), assets, 2).unwrap();
                prop_assert_eq!(&edited, &scratch);
                books = edited;
                open = after;
            }
        }
    }

    /// Edits out of order, of an offer the books do not hold, or inserting a key they hold
    /// are refused with the offer named; nothing is booked from them.
    #[test]
    fn edits_that_do_not_apply_are_refused() {
        let offers = vec![offer(1, 0, 1, 5, 2.0), offer(2, 0, 1, 7, 1.5)];
        let books = OrderBooks::build(offers.clone(), 2, 1).unwrap();
        let stranger = offer(9, 0, 1, 3, 1.0);
        let cases = [
            vec![(1, OfferEdit::Remove(stranger.key()))],
            vec![(1, OfferEdit::Insert(offers[0]))],
            vec![
                (1, OfferEdit::Remove(offers[0].key())),
                (1, OfferEdit::Remove(offers[1].key())),
            ],
            vec![(2, OfferEdit::Remove(offers[0].key()))],
        ];
        for edits in cases {
            let error = OrderBooks::edited(&books, &edits, BookBuffers::default()).unwrap_err();
            assert!(
                matches!(error, BookError::Edit { .. }),
                "{edits:?}: {error}"
            );
        }
        let zero = [(1, OfferEdit::SetAmount(offers[1].key(), 0))];
        let error = OrderBooks::edited(&books, &zero, BookBuffers::default()).unwrap_err();
        assert!(matches!(error, BookError::Amount { .. }), "{error}");
        let misplaced = [(2, OfferEdit::Insert(stranger))];
        let error = OrderBooks::edited(&books, &misplaced, BookBuffers::default()).unwrap_err();
        assert!(matches!(error, BookError::NotCanonical { .. }), "{error}");
    }

    #[test]
    fn rejects_invalid_offers() {
        let cases = [
            (vec![offer(1, 0, 5, 1, 1.0)], "asset 5"),
            (vec![offer(1, 0, 0, 1, 1.0)], "same asset"),
            (vec![offer(1, 0, 1, 0, 1.0)], "amount 0"),
            (vec![offer(1, 0, 1, 1, 1e-13)], Price::LIMIT_RANGE_TEXT),
            (vec![offer(1, 0, 1, 1, 2e12)], Price::LIMIT_RANGE_TEXT),
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
