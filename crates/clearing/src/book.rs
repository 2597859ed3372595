//! Order books laid out for demand queries (SPEEDEX appendix G, §9.2), kept from one batch to
//! the next in shared chunks, so that a batch's books cost what the batch changed rather than
//! what is open (issue 32).
//!
//! Offers are grouped by ordered pair and kept within a pair in the canonical order (limit price,
//! account, offer id). Each pair's offers are cut into [`Chunk`]s: an offer starts a chunk when a
//! hash of its account and id is 0 modulo the mean chunk length (`chunk_mean`, by default
//! [`CHUNK_OFFERS_MEAN`]), and the pair's first offer starts the first. The cut is a function of
//! the open offers alone, not of the order they came in, so books edited batch after batch are the
//! books a build from scratch makes of the same offers, float for float: a restarted node and
//! `walras replay` compute what a node that never stopped computes. A chunk is immutable and
//! shared (`Arc`) by every books that hold it, so [`OrderBooks::edited`] rebuilds only the chunks
//! an edit falls in (and the one before, when an edit removes a chunk's first offer), and copies
//! one small record per chunk of the rest.
//!
//! Inside a chunk, for demand queries, the offers are cut into [`Block`]s of [`BLOCK_OFFERS`],
//! aligned to cache lines: limit prices and the chunk's running sums of amount and amount × limit
//! as floats. Per chunk the books keep, in arrays of their own (rebuilt each batch: a few bytes
//! per chunk and per block), its first limit, the pair's float sums before it, each of its blocks'
//! first limit (the *pivots*). A search finds its chunk in the pair's small array of first
//! limits, its block among the chunk's pivots, counts the passing limits inside the block with
//! independent compares, and adds `before chunk + within chunk` ([`OrderBooks::sums_through`]).
//! Exact `u64` prefix sums of amounts sit beside the blocks for settlement, which reads only each
//! pair's in-the-money prefix. A chunk's blocks and exact sums are built the first time they are
//! read, not when the chunk is cut (see [`Chunk`]): a block's edits rebuild every chunk they fall
//! in, and most of those are never read before the next block replaces them.
//!
//! A hostile account can place many offers at one limit with ids that never start a chunk; the
//! chunk they make costs its length to rebuild on each edit inside it, as every offer did before
//! chunks (no worse), and the account locks the amounts of all of them.

use std::sync::{Arc, OnceLock};
use walras_par::prefetch::{prefetch, prefetch_slice};
use walras_types::{Offer, OfferKey, Price, MAX_AMOUNT};

/// Offers per [`Block`].
pub(crate) const BLOCK_OFFERS: usize = 16;

/// Mean offers per [`Chunk`]: an edit rebuilds about this many offers, and the books keep one
/// record per this many offers. (Chunk lengths are geometric around it: the longest of a
/// million offers is about ten times it.)
pub const CHUNK_OFFERS_MEAN: u32 = 128;

/// A refilled chunk's capacity is its length rounded up to a multiple of this (see
/// [`Chunk::refill`]), and a chunk edited in place that is full grows by this much.
const REFILL_SLACK_OFFERS: usize = 16;

/// Edits of one chunk applied where it lies at most (see [`PairCut::keeps_cut`]): each moves
/// the chunk's offers after it, so many edits of one chunk are merged into a copy instead.
const IN_PLACE_EDITS_MAX: usize = 4;

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
    /// Amount and amount × limit of the chunk's offers up to and including each slot.
    pub through: [PrefixSums; BLOCK_OFFERS],
}

/// Float prefix sums (heuristics only).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PrefixSums {
    /// Sum of the amounts.
    pub amount: f64,
    /// Sum of amount × limit price.
    pub amount_limit: f64,
}

impl PrefixSums {
    fn plus(self, other: PrefixSums) -> PrefixSums {
        PrefixSums {
            amount: self.amount + other.amount,
            amount_limit: self.amount_limit + other.amount_limit,
        }
    }
}

/// A run of consecutive offers of one pair (see the module documentation): immutable once
/// built, shared by the books that hold it.
///
/// What only a demand query or settlement reads of a chunk (its [`Block`]s and exact prefix
/// sums) is built the first time something reads it ([`ChunkDetail`]), not when the chunk is
/// cut: a block's edits rebuild every chunk they fall in, but tâtonnement and settlement read
/// only the few chunks around each pair's price, so most rebuilt chunks are never read before
/// the next block replaces them. The detail is a function of the chunk's offers alone, so
/// whether and when it was built changes no float and no result; the totals every books need
/// (for the sums before each chunk) are computed when the chunk is cut, by the same fold.
#[derive(Clone, Debug)]
pub struct Chunk {
    /// Vectors, not boxes, so that a chunk the edit replaced can be refilled in place
    /// ([`Chunk::refill`]) when nothing else holds it.
    offers: Vec<Offer>,
    /// Per offer: its limit price as `f64` (the supply table sweeps them).
    limits: Vec<f64>,
    /// Built on first read (see above).
    detail: OnceLock<ChunkDetail>,
    /// Float sums over the whole chunk: the last running sums of its blocks, bit for bit.
    total: PrefixSums,
    /// Exact amount of the chunk's offers (saturating: a chunk of more than the issuance cap
    /// is refused when its books are assembled).
    exact_total: u64,
}

/// The part of a [`Chunk`] only queries read, built on first read.
#[derive(Clone, Debug)]
struct ChunkDetail {
    blocks: Box<[Block]>,
    /// Entry j: exact amount of the chunk's first j offers (one more entry than offers). Sums
    /// saturate, as `exact_total`.
    exact_cum_amount: Box<[u64]>,
}

/// Chunks are equal when their offers are: everything else is a function of them (the lazy
/// detail is compared only through what it is built from).
impl PartialEq for Chunk {
    fn eq(&self, other: &Chunk) -> bool {
        self.offers == other.offers
            && self.limits == other.limits
            && self.total == other.total
            && self.exact_total == other.exact_total
    }
}

impl Chunk {
    /// The chunk of `offers` (at least one, canonical order, one pair) with their `limits` as
    /// `f64`.
    fn new(offers: &[Offer], limits: &[f64]) -> Chunk {
        let mut chunk = Chunk {
            offers: Vec::with_capacity(offers.len()),
            limits: Vec::with_capacity(limits.len()),
            detail: OnceLock::new(),
            total: PrefixSums::default(),
            exact_total: 0,
        };
        chunk.refill(offers, limits);
        chunk
    }

    /// Makes this chunk the chunk of `offers` with `limits` (as [`Chunk::new`] would build
    /// it), in its own allocations where they are large enough. An edit refills the chunks it
    /// replaced when it owns them: at a million open offers most chunks it cuts are out of
    /// cache, and allocating each afresh (the allocator's new pages zeroed by the kernel) was
    /// about half of the edit.
    fn refill(&mut self, offers: &[Offer], limits: &[f64]) {
        debug_assert!(!offers.is_empty() && offers.len() == limits.len());
        // Room for a few inserts before the next reallocation (a chunk cut from scratch has
        // none: most chunks are never edited).
        let capacity = offers.len().next_multiple_of(REFILL_SLACK_OFFERS);
        if self.offers.capacity() < offers.len() {
            self.offers = Vec::with_capacity(capacity);
        }
        if self.limits.capacity() < limits.len() {
            self.limits = Vec::with_capacity(capacity);
        }
        self.offers.clear();
        self.offers.extend_from_slice(offers);
        self.limits.clear();
        self.limits.extend_from_slice(limits);
        self.refold();
    }

    /// Recomputes what the chunk derives from its offers (after they changed): its totals,
    /// and its detail on the next read.
    fn refold(&mut self) {
        self.detail = OnceLock::new();
        // The same fold, in the same order, as the blocks' running sums (`ChunkDetail::of`).
        let (mut amount, mut amount_limit) = (0.0f64, 0.0f64);
        let mut exact = 0u64;
        for (offer, &limit) in self.offers.iter().zip(&self.limits) {
            amount += offer.amount as f64;
            amount_limit += offer.amount as f64 * limit;
            exact = exact.saturating_add(offer.amount);
        }
        self.total = PrefixSums {
            amount,
            amount_limit,
        };
        self.exact_total = exact;
    }

    /// The chunk's offers in canonical order.
    pub fn offers(&self) -> &[Offer] {
        &self.offers
    }

    /// The chunk's limit prices as `f64`, in canonical order.
    #[inline]
    pub fn limits(&self) -> &[f64] {
        &self.limits
    }

    /// The chunk's blocks (built on first read).
    #[inline]
    fn blocks(&self) -> &[Block] {
        &self.detail().blocks
    }

    /// Exact amount of the chunk's first `count` offers.
    #[inline]
    fn exact_amount_of_first(&self, count: usize) -> u64 {
        self.detail().exact_cum_amount[count]
    }

    /// The chunk's own allocation (behind its `Arc`) and what it points to.
    fn heap_bytes(&self) -> u64 {
        let detail = self.detail.get().map_or(0, |detail| {
            std::mem::size_of_val(&*detail.blocks)
                + std::mem::size_of_val(&*detail.exact_cum_amount)
        });
        (std::mem::size_of::<Chunk>()
            + 2 * std::mem::size_of::<usize>()
            + self.offers.capacity() * std::mem::size_of::<Offer>()
            + self.limits.capacity() * std::mem::size_of::<f64>()
            + detail) as u64
    }

    #[inline]
    fn detail(&self) -> &ChunkDetail {
        self.detail
            .get_or_init(|| ChunkDetail::of(&self.offers, &self.limits, self.total))
    }

    /// The first limit price of each of the chunk's blocks, as the blocks store it.
    fn pivots(&self) -> impl Iterator<Item = f32> + '_ {
        self.limits
            .iter()
            .step_by(BLOCK_OFFERS)
            .map(|limit| *limit as f32)
    }
}

impl ChunkDetail {
    /// The blocks and exact prefix sums of `offers` with their `limits`; `total` is what the
    /// chunk computed when it was cut, and the blocks' last running sums equal it.
    fn of(offers: &[Offer], limits: &[f64], total: PrefixSums) -> ChunkDetail {
        let mut exact_cum_amount = Vec::with_capacity(offers.len() + 1);
        let (mut amount, mut amount_limit) = (0.0f64, 0.0f64);
        let mut exact = 0u64;
        let blocks: Box<[Block]> = offers
            .chunks(BLOCK_OFFERS)
            .zip(limits.chunks(BLOCK_OFFERS))
            .map(|(offers, limits)| {
                let mut block = Block {
                    limits: [f32::INFINITY; BLOCK_OFFERS],
                    through: [PrefixSums::default(); BLOCK_OFFERS],
                };
                for (slot, (offer, &limit)) in offers.iter().zip(limits).enumerate() {
                    block.limits[slot] = limit as f32;
                    amount += offer.amount as f64;
                    amount_limit += offer.amount as f64 * limit;
                    exact_cum_amount.push(exact);
                    exact = exact.saturating_add(offer.amount);
                    block.through[slot] = PrefixSums {
                        amount,
                        amount_limit,
                    };
                }
                // Unused slots repeat the block's totals.
                for through in &mut block.through[offers.len()..] {
                    *through = PrefixSums {
                        amount,
                        amount_limit,
                    };
                }
                block
            })
            .collect();
        exact_cum_amount.push(exact);
        // Postcondition: the totals the books were assembled with are these sums, bit for bit.
        assert!(
            total.amount.to_bits() == amount.to_bits()
                && total.amount_limit.to_bits() == amount_limit.to_bits(),
            "a chunk's blocks end on other sums than its totals"
        );
        ChunkDetail {
            blocks,
            exact_cum_amount: exact_cum_amount.into_boxed_slice(),
        }
    }
}

/// The offers of the chunk being cut and their limits as `f64` (carried with the offers, so a
/// rebuilt chunk does not convert its limits again). One is kept for a whole pair's cut and
/// cleared after each chunk, with the chunks the cut replaced and owns alone, to be refilled
/// as the chunks it closes ([`Chunk::refill`]); those left over go when it does.
#[derive(Debug, Default)]
struct Run {
    offers: Vec<Offer>,
    limits: Vec<f64>,
    /// Replaced chunks nothing else holds (each `Arc`'s count is 1).
    spare: Vec<Arc<Chunk>>,
}

impl Run {
    fn push(&mut self, offer: Offer, limit: f64) {
        self.offers.push(offer);
        self.limits.push(limit);
    }

    fn extend(&mut self, offers: &[Offer], limits: &[f64]) {
        self.offers.extend_from_slice(offers);
        self.limits.extend_from_slice(limits);
    }

    fn is_empty(&self) -> bool {
        self.offers.is_empty()
    }

    fn clear(&mut self) {
        self.offers.clear();
        self.limits.clear();
    }

    /// Keeps `chunk`, which the cut has replaced, for refilling if nothing else holds it.
    fn keep_spare(&mut self, mut chunk: Arc<Chunk>) {
        if Arc::get_mut(&mut chunk).is_some() {
            self.spare.push(chunk);
        }
    }

    /// The chunk of the offers pending (not empty), in a spare chunk's allocations if there
    /// is one.
    fn cut_chunk(&mut self) -> Arc<Chunk> {
        match self.spare.pop() {
            Some(mut chunk) => {
                Arc::get_mut(&mut chunk)
                    .expect("a spare chunk is held by nothing else")
                    .refill(&self.offers, &self.limits);
                chunk
            }
            None => Arc::new(Chunk::new(&self.offers, &self.limits)),
        }
    }
}

/// Whether `offer` starts a chunk when it is not its pair's first (see the module
/// documentation): a hash of its account and id (SplitMix64's finaliser), 0 modulo `mean`.
fn starts_chunk(offer: &Offer, mean: u32) -> bool {
    let mut x = offer.id.0 ^ offer.account.0.rotate_left(29) ^ 0x9E37_79B9_7F4A_7C15;
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    x.is_multiple_of(u64::from(mean))
}

/// The offers selling `sell` for `buy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairBook {
    pub sell: u16,
    pub buy: u16,
    offers: u32,
    /// This pair's chunks (and per-chunk records) in the books.
    chunks_start: u32,
    chunks_end: u32,
}

impl PairBook {
    pub fn len(&self) -> usize {
        self.offers as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn chunk_range(&self) -> std::ops::Range<usize> {
        self.chunks_start as usize..self.chunks_end as usize
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

/// The pairs, chunks and per-chunk records an [`OrderBooks`] is made of. Emptied
/// ([`OrderBooks::into_buffers`]), they are the allocations the next books are assembled in
/// ([`OrderBooks::edited`]); the chunks themselves are shared, not reused.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BookBuffers {
    /// The non-empty pairs, ordered by (sell, buy).
    pairs: Vec<PairBook>,
    /// Every pair's chunks, pair after pair.
    chunks: Vec<Arc<Chunk>>,
    /// Per chunk (as `chunks`): its first limit price as stored in its first block.
    chunk_first_limits: Vec<f32>,
    /// Per chunk: its first offer's key (the exact limit first).
    chunk_first_keys: Vec<OfferKey>,
    /// Per chunk: its first limit price as `f64` (the supply table's searches).
    chunk_first_limits_f64: Vec<f64>,
    /// Per chunk: what a demand query reads of it besides its first limit (one cache line).
    chunk_records: Vec<ChunkRecord>,
    /// Per chunk: exact amount of its pair's offers before it.
    chunk_amount_before: Vec<u64>,
    /// Per chunk: how many of its pair's offers come before it.
    chunk_count_before: Vec<u32>,
    /// Per block of every chunk, chunk after chunk: its first limit price.
    block_pivot_limits: Vec<f32>,
    /// Per pair: total amount and amount × limit (floats).
    pair_totals: Vec<PrefixSums>,
}

impl BookBuffers {
    /// Bytes held on the heap, at the vectors' capacities: the per-pair and per-chunk arrays
    /// and every chunk (its offers, limits and, once a query built it, its detail). A chunk
    /// shared with other books (the books before an edit) is counted here too. O(chunks).
    pub fn heap_bytes(&self) -> u64 {
        fn bytes<T>(items: &Vec<T>) -> u64 {
            (items.capacity() * std::mem::size_of::<T>()) as u64
        }
        let arrays = bytes(&self.pairs)
            + bytes(&self.chunks)
            + bytes(&self.chunk_first_limits)
            + bytes(&self.chunk_first_keys)
            + bytes(&self.chunk_first_limits_f64)
            + bytes(&self.chunk_records)
            + bytes(&self.chunk_amount_before)
            + bytes(&self.chunk_count_before)
            + bytes(&self.block_pivot_limits)
            + bytes(&self.pair_totals);
        let chunks: u64 = self.chunks.iter().map(|chunk| chunk.heap_bytes()).sum();
        arrays + chunks
    }

    /// Appends `chunk`, read for its records (a chunk just cut).
    fn push_new(&mut self, chunk: Arc<Chunk>) {
        let pivots_start = self.block_pivot_limits.len() as u32;
        self.block_pivot_limits.extend(chunk.pivots());
        self.chunk_first_keys.push(chunk.offers[0].key());
        self.chunk_first_limits.push(chunk.limits[0] as f32);
        self.chunk_first_limits_f64.push(chunk.limits[0]);
        self.chunk_records.push(ChunkRecord {
            sums_before: PrefixSums::default(),
            total: chunk.total,
            exact_total: chunk.exact_total,
            len: chunk.offers.len() as u32,
            pivots_start,
            pivots_end: self.block_pivot_limits.len() as u32,
        });
        self.chunks.push(chunk);
    }

    /// Appends the consecutive chunks `at` of `previous` from `previous`'s own records, as
    /// whole runs: the chunks themselves are not read (at millions of offers, reading every
    /// chunk each batch was most of the cost), only taken from `chunks` (see [`Carried`]).
    fn push_carried(
        &mut self,
        previous: &OrderBooks,
        at: std::ops::Range<usize>,
        chunks: &mut Carried<'_>,
    ) {
        if at.is_empty() {
            return;
        }
        let arrays = &previous.arrays;
        let records = &arrays.chunk_records[at.clone()];
        let old_start = records[0].pivots_start;
        let old_end = records[records.len() - 1].pivots_end;
        debug_assert!(
            records
                .windows(2)
                .all(|two| two[0].pivots_end == two[1].pivots_start),
            "consecutive chunks' pivots lie end to end"
        );
        let new_start = self.block_pivot_limits.len() as u32;
        self.block_pivot_limits
            .extend_from_slice(&arrays.block_pivot_limits[old_start as usize..old_end as usize]);
        self.chunk_first_keys
            .extend_from_slice(&arrays.chunk_first_keys[at.clone()]);
        self.chunk_first_limits
            .extend_from_slice(&arrays.chunk_first_limits[at.clone()]);
        self.chunk_first_limits_f64
            .extend_from_slice(&arrays.chunk_first_limits_f64[at.clone()]);
        self.chunk_records
            .extend(records.iter().map(|record| ChunkRecord {
                pivots_start: record.pivots_start - old_start + new_start,
                pivots_end: record.pivots_end - old_start + new_start,
                ..record.clone()
            }));
        chunks.append_to(at, &mut self.chunks);
    }

    /// Appends every chunk of `other` (one pair's, cut alone) with its records.
    fn append(&mut self, other: BookBuffers) {
        let offset = self.block_pivot_limits.len() as u32;
        self.block_pivot_limits
            .extend_from_slice(&other.block_pivot_limits);
        self.chunk_first_keys.extend(other.chunk_first_keys);
        self.chunk_first_limits.extend(other.chunk_first_limits);
        self.chunk_first_limits_f64
            .extend(other.chunk_first_limits_f64);
        self.chunk_records
            .extend(other.chunk_records.into_iter().map(|record| ChunkRecord {
                pivots_start: record.pivots_start + offset,
                pivots_end: record.pivots_end + offset,
                ..record
            }));
        self.chunks.extend(other.chunks);
    }

    /// Removes the last chunk appended and returns it.
    fn pop_chunk(&mut self) -> Option<Arc<Chunk>> {
        let chunk = self.chunks.pop()?;
        let record = self.chunk_records.pop().expect("a record per chunk");
        self.block_pivot_limits
            .truncate(record.pivots_start as usize);
        self.chunk_first_keys.pop();
        self.chunk_first_limits.pop();
        self.chunk_first_limits_f64.pop();
        Some(chunk)
    }

    fn clear(&mut self) {
        self.pairs.clear();
        warm_reference_counts(&self.chunks);
        self.chunks.clear();
        self.chunk_first_limits.clear();
        self.chunk_first_keys.clear();
        self.chunk_first_limits_f64.clear();
        self.chunk_records.clear();
        self.chunk_amount_before.clear();
        self.chunk_count_before.clear();
        self.block_pivot_limits.clear();
        self.pair_totals.clear();
    }
}

/// Reads the reference count of each of `chunks` before they are all cloned or dropped.
/// Changing a count is a locked instruction, which waits for the loads before it: one chunk
/// after another, each change waited for its own cache miss (at 10M open offers, 78k chunks a
/// block). Plain loads first overlap those misses; the changes then find the counts in cache.
fn warm_reference_counts(chunks: &[Arc<Chunk>]) {
    for chunk in chunks {
        std::hint::black_box(Arc::strong_count(chunk));
    }
}

/// The previous books' chunks, as an edit carries them into the next books (one pair's, or
/// all of them, indexed as in the previous books from `first`).
enum Carried<'a> {
    /// Shared: the previous books stay whole, and each carried chunk's count is raised.
    Shared {
        first: usize,
        chunks: &'a [Arc<Chunk>],
    },
    /// Taken from previous books that are being consumed ([`OrderBooks::edited_from`]): a
    /// carried chunk moves, and no count changes (raising and later lowering ~78k counts a
    /// batch at 10M open offers were about a quarter of a small batch's work).
    Taken {
        first: usize,
        chunks: &'a mut [Option<Arc<Chunk>>],
    },
}

impl Carried<'_> {
    /// The previous books' chunk `at`, to read (an edited chunk of shared books).
    fn get(&self, at: usize) -> &Chunk {
        match self {
            Carried::Shared { first, chunks } => &chunks[at - first],
            Carried::Taken { first, chunks } => chunks[at - first]
                .as_deref()
                .expect("a chunk is read before it is carried, and carried once"),
        }
    }

    /// The previous books' chunk `at` if it is still here (not yet carried or taken), without
    /// reading it.
    fn peek(&self, at: usize) -> Option<&Arc<Chunk>> {
        match self {
            Carried::Shared { first, chunks } => chunks.get(at.checked_sub(*first)?),
            Carried::Taken { first, chunks } => chunks.get(at.checked_sub(*first)?)?.as_ref(),
        }
    }

    /// The previous books' chunk `at` (an edited one) when they are taken, else `None`: read
    /// it with [`Self::get`].
    fn take(&mut self, at: usize) -> Option<Arc<Chunk>> {
        match self {
            Carried::Shared { .. } => None,
            Carried::Taken { first, chunks } => Some(
                chunks[at - *first]
                    .take()
                    .expect("each of the previous books' chunks is taken once"),
            ),
        }
    }

    /// Appends the previous books' chunks `at` to `out`.
    fn append_to(&mut self, at: std::ops::Range<usize>, out: &mut Vec<Arc<Chunk>>) {
        match self {
            Carried::Shared { first, chunks } => {
                let shared = &chunks[at.start - *first..at.end - *first];
                warm_reference_counts(shared);
                out.extend_from_slice(shared);
            }
            Carried::Taken { first, chunks } => {
                out.extend(
                    chunks[at.start - *first..at.end - *first]
                        .iter_mut()
                        .map(|chunk| {
                            chunk
                                .take()
                                .expect("each of the previous books' chunks is carried once")
                        }),
                );
            }
        }
    }

    /// The parts of these chunks at `ranges` (indices in the previous books; ascending and
    /// disjoint), one per range, for the pairs to be cut on separate threads.
    fn split(&mut self, ranges: impl Iterator<Item = std::ops::Range<usize>>) -> Vec<Carried<'_>> {
        match self {
            Carried::Shared { first, chunks } => ranges
                .map(|range| Carried::Shared {
                    first: range.start,
                    chunks: &chunks[range.start - *first..range.end - *first],
                })
                .collect(),
            Carried::Taken { first, chunks } => {
                let (mut rest, mut rest_first) = (&mut chunks[..], *first);
                let mut parts = Vec::new();
                for range in ranges {
                    // An empty range (a pair new in this batch) may lie anywhere: it takes none.
                    let start = range.start.max(rest_first);
                    let (_, tail) = std::mem::take(&mut rest).split_at_mut(start - rest_first);
                    let (part, tail) = tail.split_at_mut(range.end.max(start) - start);
                    parts.push(Carried::Taken {
                        first: start,
                        chunks: part,
                    });
                    (rest, rest_first) = (tail, range.end.max(start));
                }
                parts
            }
        }
    }
}

/// All offers of one batch, indexed for clearing.
#[derive(Clone, Debug, PartialEq)]
pub struct OrderBooks {
    assets: usize,
    /// Mean offers per chunk (the cut rule's modulus).
    chunk_mean: u32,
    /// The pairs, their chunks and the per-chunk records.
    arrays: BookBuffers,
}

/// What a demand query reads of a chunk besides its first limit (its blocks, the sums before
/// it, its pivots), and what the next books carry of it without reading the chunk itself.
#[derive(Clone, Debug, PartialEq)]
struct ChunkRecord {
    /// Float sums of the pair's offers before the chunk.
    sums_before: PrefixSums,
    /// Float sums over the chunk.
    total: PrefixSums,
    /// Exact amount of the chunk's offers, and how many they are.
    exact_total: u64,
    len: u32,
    /// Where its blocks' first limits lie in the books' `block_pivot_limits`.
    pivots_start: u32,
    pivots_end: u32,
}

/// One pair's chunks in the books under assembly: its index `sell * assets + buy` and where
/// its chunks lie in the chunk list.
struct PairChunks {
    index: usize,
    chunks: std::ops::Range<usize>,
}

impl OrderBooks {
    /// Validates and indexes `offers`, sorting with up to `threads` threads.
    pub fn build(
        offers: Vec<Offer>,
        assets: usize,
        threads: usize,
    ) -> Result<OrderBooks, BookError> {
        OrderBooks::build_with_chunk_mean(offers, assets, threads, CHUNK_OFFERS_MEAN)
    }

    /// [`Self::build`] with chunks of `chunk_mean` offers on average (≥ 1): tests cut small
    /// books into many chunks with it. Books keep their mean through [`Self::edited`].
    pub fn build_with_chunk_mean(
        offers: Vec<Offer>,
        assets: usize,
        threads: usize,
        chunk_mean: u32,
    ) -> Result<OrderBooks, BookError> {
        validate(&offers, assets)?;
        let (offers, pair_bounds) = group_by_pair(offers, assets);
        let mut offers = offers;
        sort_pairs(&mut offers, &pair_bounds, threads.max(1));
        let open: Vec<(usize, &[Offer])> = pair_bounds
            .windows(2)
            .enumerate()
            .filter(|(_, bounds)| bounds[0] < bounds[1])
            .map(|(index, bounds)| (index, &offers[bounds[0]..bounds[1]]))
            .collect();
        let cut = walras_par::map_in_order(&open, threads, 2, |(_, offers)| {
            cut_pair(offers, chunk_mean)
        });
        let indexes = open.iter().map(|(index, _)| *index);
        OrderBooks::assemble(assets, chunk_mean, indexes.zip(cut), BookBuffers::default())
    }

    /// Books from offers already grouped by pair and in canonical order within each pair, as
    /// an exchange keeps its open offers: `pairs[sell * assets + buy]` holds that pair's offers.
    /// Skips [`Self::build`]'s regrouping and sort, and checks and cuts each pair on its own
    /// thread (every pair's chunks depend on its offers alone, so the result is the same for
    /// any thread count); equal to `build` of the same offers. Refuses lists out of order
    /// ([`BookError::NotCanonical`]) as well as every offer `build` refuses.
    pub fn from_sorted_pairs(
        pairs: Vec<Vec<Offer>>,
        assets: usize,
        threads: usize,
    ) -> Result<OrderBooks, BookError> {
        OrderBooks::from_sorted_pairs_with_chunk_mean(pairs, assets, threads, CHUNK_OFFERS_MEAN)
    }

    /// [`Self::from_sorted_pairs`] with chunks of `chunk_mean` offers on average (≥ 1).
    pub fn from_sorted_pairs_with_chunk_mean(
        pairs: Vec<Vec<Offer>>,
        assets: usize,
        threads: usize,
        chunk_mean: u32,
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
            check_pair(*index, offers, assets).map(|_| cut_pair(offers, chunk_mean))
        });
        let mut cut = Vec::with_capacity(open.len());
        for ((index, _), result) in open.iter().zip(checked) {
            cut.push((*index, result?));
        }
        OrderBooks::assemble(assets, chunk_mean, cut, BookBuffers::default())
    }

    /// The books of `previous`'s offers with `edits` applied: equal, field for field, to
    /// [`Self::from_sorted_pairs`] of the edited lists (with `previous`'s chunk mean), so every
    /// float a demand query reads is the same as a build from scratch and depends on the open
    /// offers alone, not on the history of edits that led to them.
    ///
    /// `edits` hold `(sell * assets + buy, edit)` in (pair, key) order, at most one per key.
    /// Offers carried over from `previous` were checked when booked; inserted ones are checked
    /// as [`Self::build`] checks them, and every asset's total against the issuance cap.
    ///
    /// Cost: the chunks edits fall in are rebuilt (about [`CHUNK_OFFERS_MEAN`] offers each);
    /// the others are shared with `previous`, one small record each copied into `buffers`.
    /// The edited pairs are cut on up to `threads` threads; the books are the same for any.
    pub fn edited(
        previous: &OrderBooks,
        edits: &[(usize, OfferEdit)],
        buffers: BookBuffers,
        threads: usize,
    ) -> Result<OrderBooks, BookError> {
        let mut edited: Vec<(usize, &[(usize, OfferEdit)])> = Vec::new();
        let mut rest = edits;
        while let Some(&(index, _)) = rest.first() {
            let count = rest.partition_point(|(pair, _)| *pair == index);
            let (mine, tail) = rest.split_at(count);
            edited.push((index, mine));
            rest = tail;
        }
        OrderBooks::edited_by_pair(previous, &edited, buffers, threads)
    }

    /// [`Self::edited`] with the edits split by pair already: `(pair index, its edits)`, in
    /// ascending pair order, each pair's edits as [`Self::edited`] takes them.
    pub fn edited_by_pair<E: AsRef<[(usize, OfferEdit)]> + Sync>(
        previous: &OrderBooks,
        edited: &[(usize, E)],
        buffers: BookBuffers,
        threads: usize,
    ) -> Result<OrderBooks, BookError> {
        let carried = Carried::Shared {
            first: 0,
            chunks: &previous.arrays.chunks,
        };
        OrderBooks::edited_with(previous, carried, edited, buffers, threads)
    }

    /// [`Self::edited_by_pair`], consuming `previous`: its chunks move into the new books
    /// instead of being shared, so no chunk's reference count changes, then or when
    /// `previous` would have been dropped. Also returns `previous`'s arrays, emptied, for
    /// the books after these to be assembled in. On an error `previous` is lost: the caller
    /// builds the next books from scratch.
    pub fn edited_from<E: AsRef<[(usize, OfferEdit)]> + Sync>(
        mut previous: OrderBooks,
        edited: &[(usize, E)],
        buffers: BookBuffers,
        threads: usize,
    ) -> Result<(OrderBooks, BookBuffers), BookError> {
        let mut chunks: Vec<Option<Arc<Chunk>>> = std::mem::take(&mut previous.arrays.chunks)
            .into_iter()
            .map(Some)
            .collect();
        let carried = Carried::Taken {
            first: 0,
            chunks: &mut chunks,
        };
        let books = OrderBooks::edited_with(&previous, carried, edited, buffers, threads)?;
        // Every chunk was carried into the books or taken by its pair's cut (which refilled
        // it or dropped it).
        debug_assert!(
            chunks.iter().all(Option::is_none),
            "a chunk was left behind"
        );
        Ok((books, previous.into_buffers()))
    }

    /// [`Self::edited_by_pair`] with the previous books' chunks taken from `carried` (all of
    /// them, indexed as in `previous`).
    fn edited_with<E: AsRef<[(usize, OfferEdit)]> + Sync>(
        previous: &OrderBooks,
        mut carried: Carried<'_>,
        edited: &[(usize, E)],
        buffers: BookBuffers,
        threads: usize,
    ) -> Result<OrderBooks, BookError> {
        let assets = previous.assets;
        let mean = previous.chunk_mean;
        let mut by_index: Vec<Option<&PairBook>> = vec![None; assets * assets];
        for pair in &previous.arrays.pairs {
            by_index[pair.sell as usize * assets + pair.buy as usize] = Some(pair);
        }
        for (at, (index, pair_edits)) in edited.iter().enumerate() {
            let after_last = at == 0 || edited[at - 1].0 < *index;
            if !after_last || *index >= by_index.len() {
                let offer_id = pair_edits.as_ref().first().map_or(0, |(_, e)| e.key().id.0);
                return Err(BookError::Edit { offer_id });
            }
        }
        let range_of = |index: usize| by_index[index].map_or(0..0, |pair| pair.chunk_range());
        // The edited pairs are cut on the threads, each into its own buffers; the rest are
        // carried as they are. Both are appended in pair order, so the books do not depend on
        // the thread count.
        let parts = carried.split(edited.iter().map(|(index, _)| range_of(*index)));
        let tasks: Vec<_> = edited.iter().zip(parts).collect();
        let cuts = walras_par::run_each(tasks, threads, |((index, pair_edits), mut part)| {
            let pair_edits = pair_edits.as_ref();
            check_edit_order(*index, pair_edits)?;
            let cut = PairCut {
                index: *index,
                assets,
                mean,
            };
            let mut out = BookBuffers::default();
            let mut pending = Run::default();
            let range = range_of(*index);
            cut.edit(
                previous,
                range,
                &mut part,
                pair_edits,
                (&mut pending, &mut out),
            )
            .map(|()| out)
        });
        let mut cuts = edited.iter().map(|(index, _)| *index).zip(cuts).peekable();
        let mut buffers = buffers;
        buffers.clear();
        let mut pairs = Vec::new();
        for index in 0..by_index.len() {
            let start = buffers.chunks.len();
            match cuts.next_if(|(edited, _)| *edited == index) {
                Some((_, cut)) => buffers.append(cut?),
                None => buffers.push_carried(previous, range_of(index), &mut carried),
            }
            if buffers.chunks.len() > start {
                pairs.push(PairChunks {
                    index,
                    chunks: start..buffers.chunks.len(),
                });
            }
        }
        OrderBooks::assemble_in(assets, mean, pairs, buffers)
    }

    /// The books of per-pair chunk lists `(pair index, chunks)`, pairs in index order.
    fn assemble(
        assets: usize,
        chunk_mean: u32,
        cut: impl IntoIterator<Item = (usize, Vec<Arc<Chunk>>)>,
        mut buffers: BookBuffers,
    ) -> Result<OrderBooks, BookError> {
        buffers.clear();
        let mut pairs = Vec::new();
        for (index, chunks) in cut {
            let start = buffers.chunks.len();
            for chunk in chunks {
                buffers.push_new(chunk);
            }
            pairs.push(PairChunks {
                index,
                chunks: start..buffers.chunks.len(),
            });
        }
        OrderBooks::assemble_in(assets, chunk_mean, pairs, buffers)
    }

    /// The books whose chunks and their records are in `buffers`, cut into `pairs`: the sums
    /// before each chunk and each pair's, from the records alone, and every asset's total
    /// against the issuance cap.
    fn assemble_in(
        assets: usize,
        chunk_mean: u32,
        pairs: Vec<PairChunks>,
        mut buffers: BookBuffers,
    ) -> Result<OrderBooks, BookError> {
        let mut totals = vec![0u64; assets];
        let mut offers_total = 0usize;
        for pair in &pairs {
            let (mut sums, mut amount, mut count) = (PrefixSums::default(), 0u64, 0usize);
            for record in &mut buffers.chunk_records[pair.chunks.clone()] {
                buffers.chunk_amount_before.push(amount);
                buffers.chunk_count_before.push(count as u32);
                record.sums_before = sums;
                sums = sums.plus(record.total);
                amount = amount.saturating_add(record.exact_total);
                count += record.len as usize;
            }
            let sell = pair.index / assets;
            totals[sell] = totals[sell]
                .checked_add(amount)
                .filter(|sum| *sum <= MAX_AMOUNT)
                .ok_or(BookError::AssetTotalTooLarge { asset: sell as u16 })?;
            offers_total += count;
            if offers_total > i32::MAX as usize {
                return Err(BookError::TooManyOffers {
                    offers: offers_total,
                });
            }
            buffers.pair_totals.push(sums);
            buffers.pairs.push(PairBook {
                sell: sell as u16,
                buy: (pair.index % assets) as u16,
                offers: count as u32,
                chunks_start: pair.chunks.start as u32,
                chunks_end: pair.chunks.end as u32,
            });
        }
        Ok(OrderBooks {
            assets,
            chunk_mean,
            arrays: buffers,
        })
    }

    /// These books' arrays, emptied, for [`Self::edited`] to assemble the next books in.
    pub fn into_buffers(self) -> BookBuffers {
        let mut buffers = self.arrays;
        buffers.clear();
        buffers
    }

    pub fn assets(&self) -> usize {
        self.assets
    }

    /// Mean offers per chunk of these books.
    pub fn chunk_mean(&self) -> u32 {
        self.chunk_mean
    }

    pub fn offer_count(&self) -> usize {
        self.arrays.pairs.iter().map(PairBook::len).sum()
    }

    /// Bytes these books hold on the heap ([`BookBuffers::heap_bytes`]).
    pub fn heap_bytes(&self) -> u64 {
        self.arrays.heap_bytes()
    }

    /// Chunks held, all pairs together.
    pub fn chunk_count(&self) -> usize {
        self.arrays.chunks.len()
    }

    /// The non-empty pairs, ordered by (sell, buy).
    pub fn pairs(&self) -> &[PairBook] {
        &self.arrays.pairs
    }

    /// The pair's chunks, in canonical order.
    #[inline]
    pub fn chunks(&self, pair: &PairBook) -> &[Arc<Chunk>] {
        &self.arrays.chunks[pair.chunk_range()]
    }

    /// The first limit price of each of the pair's chunks (as stored in its first block).
    #[inline]
    pub fn chunk_first_limits(&self, pair: &PairBook) -> &[f32] {
        &self.arrays.chunk_first_limits[pair.chunk_range()]
    }

    /// The first limit price of each of the pair's chunks as `f64`.
    #[inline]
    pub fn chunk_first_limits_f64(&self, pair: &PairBook) -> &[f64] {
        &self.arrays.chunk_first_limits_f64[pair.chunk_range()]
    }

    /// The pair's offers in canonical order.
    pub fn offers<'a>(&'a self, pair: &PairBook) -> impl Iterator<Item = &'a Offer> + 'a {
        self.chunks(pair)
            .iter()
            .flat_map(|chunk| chunk.offers.iter())
    }

    /// The pair's offer at `index` in canonical order (`index < pair.len()`).
    pub fn offer_at(&self, pair: &PairBook, index: usize) -> &Offer {
        let (chunk, within) = self.position(pair, index);
        &self.arrays.chunks[pair.chunks_start as usize + chunk].offers[within]
    }

    /// Float totals of pair `pair_index` (in [`Self::pairs`]): amount and amount × limit.
    #[inline]
    pub fn pair_totals(&self, pair_index: usize) -> PrefixSums {
        self.arrays.pair_totals[pair_index]
    }

    /// The first limit price of each block of the pair's chunk `chunk`.
    #[inline]
    pub fn chunk_pivots(&self, pair: &PairBook, chunk: usize) -> &[f32] {
        let record = &self.arrays.chunk_records[pair.chunks_start as usize + chunk];
        &self.arrays.block_pivot_limits[record.pivots_start as usize..record.pivots_end as usize]
    }

    /// The blocks of the pair's chunk `chunk`.
    #[inline]
    pub fn chunk_blocks(&self, pair: &PairBook, chunk: usize) -> &[Block] {
        self.arrays.chunks[pair.chunks_start as usize + chunk].blocks()
    }

    /// Float sums of the pair's offers up to and including slot `slot` of block `block` of its
    /// chunk `chunk`: the sums before the chunk plus the chunk's running sums there, on every
    /// path that reads a prefix sum.
    #[inline]
    pub(crate) fn sums_through(
        &self,
        pair: &PairBook,
        chunk: usize,
        block: usize,
        slot: usize,
    ) -> PrefixSums {
        let at = pair.chunks_start as usize + chunk;
        let record = &self.arrays.chunk_records[at];
        record
            .sums_before
            .plus(self.arrays.chunks[at].blocks()[block].through[slot])
    }

    /// Float sums of the pair's offers through the first `count` (≥ 1) of its chunk `chunk`.
    #[inline]
    pub(crate) fn sums_through_offer(
        &self,
        pair: &PairBook,
        chunk: usize,
        count: usize,
    ) -> PrefixSums {
        self.sums_through(
            pair,
            chunk,
            (count - 1) / BLOCK_OFFERS,
            (count - 1) % BLOCK_OFFERS,
        )
    }

    /// Exact amount of the pair's first `count` offers (in canonical order).
    pub fn amount_before(&self, pair: &PairBook, count: usize) -> u64 {
        if count == 0 {
            return 0;
        }
        let (chunk, within) = self.position(pair, count - 1);
        let at = pair.chunks_start as usize + chunk;
        self.arrays.chunk_amount_before[at]
            + self.arrays.chunks[at].exact_amount_of_first(within + 1)
    }

    /// How many of the pair's offers have a limit price `<= rate` (they may trade at `rate`).
    pub fn count_at_or_below(&self, pair: &PairBook, rate: Price) -> usize {
        self.count_passing(pair, |limit| limit <= rate)
    }

    /// How many of the pair's offers have a limit price `< rate`.
    pub fn count_below(&self, pair: &PairBook, rate: Price) -> usize {
        self.count_passing(pair, |limit| limit < rate)
    }

    /// Offers passing `below` (a prefix of the canonical order): the chunk, then inside it.
    fn count_passing(&self, pair: &PairBook, below: impl Fn(Price) -> bool) -> usize {
        let range = pair.chunk_range();
        let chunks =
            self.arrays.chunk_first_keys[range.clone()].partition_point(|key| below(key.min_price));
        if chunks == 0 {
            return 0;
        }
        let at = range.start + chunks - 1;
        let within = self.arrays.chunks[at]
            .offers
            .partition_point(|offer| below(offer.min_price));
        self.arrays.chunk_count_before[at] as usize + within
    }

    /// The chunk (in the pair) holding the pair's offer `index`, and its place in the chunk.
    fn position(&self, pair: &PairBook, index: usize) -> (usize, usize) {
        assert!(index < pair.len(), "an offer of the pair");
        let before = &self.arrays.chunk_count_before[pair.chunk_range()];
        let chunk = before.partition_point(|count| *count as usize <= index) - 1;
        (chunk, index - before[chunk] as usize)
    }
}

/// The pair being cut while [`OrderBooks::edited`] applies its edits, into buffers of its own
/// (appended to the books' in pair order).
struct PairCut {
    index: usize,
    assets: usize,
    mean: u32,
}

impl PairCut {
    /// Appends the pair's chunks after `edits` to `out`: chunks without an edit are shared,
    /// the others merged with their edits and cut again, together with the chunk before when
    /// an edit removed a chunk's first offer (its remaining offers then join that chunk).
    /// `pending` is scratch: empty before and after.
    fn edit(
        &self,
        previous: &OrderBooks,
        carried: std::ops::Range<usize>,
        chunks: &mut Carried<'_>,
        edits: &[(usize, OfferEdit)],
        (pending, out): (&mut Run, &mut BookBuffers),
    ) -> Result<(), BookError> {
        debug_assert!(pending.is_empty());
        if carried.is_empty() {
            // A pair new in this batch: its edits are all inserts.
            self.merge((&[], &[]), edits, (pending, out))?;
            self.close(pending, out);
            return Ok(());
        }
        let spans = edits_by_chunk(previous, carried.clone(), edits);
        let mut rest = edits;
        // The first chunk after the last edited one: chunks from it to the next edited one
        // are appended as one run.
        let mut unedited_start = carried.start;
        for (span, &(at, count)) in spans.iter().enumerate() {
            prefetch_ahead(&spans, span, chunks);
            let (mine, tail) = rest.split_at(count);
            rest = tail;
            if unedited_start < at {
                // Their first offers are unchanged and started chunks: they still do.
                self.close(pending, out);
                out.push_carried(previous, unedited_start..at, chunks);
            }
            unedited_start = at + 1;
            match chunks.take(at) {
                Some(mut chunk) => {
                    let in_place = self.keeps_cut(&chunk, mine);
                    match Arc::get_mut(&mut chunk).filter(|_| in_place) {
                        Some(owned) => {
                            self.close(pending, out);
                            self.edit_in_place(owned, mine)?;
                            out.push_new(chunk);
                        }
                        None => {
                            self.merge((&chunk.offers, &chunk.limits), mine, (pending, out))?;
                            pending.keep_spare(chunk);
                        }
                    }
                }
                None => {
                    let chunk = chunks.get(at);
                    self.merge((&chunk.offers, &chunk.limits), mine, (pending, out))?;
                }
            }
        }
        debug_assert!(rest.is_empty(), "every edit falls in a chunk");
        if unedited_start < carried.end {
            self.close(pending, out);
            out.push_carried(previous, unedited_start..carried.end, chunks);
        }
        self.close(pending, out);
        Ok(())
    }

    /// Adds `offer` (this pair's next in canonical order, after what `out` and `pending`
    /// hold) to the cut: it starts a chunk by the rule, or joins the chunk before it, reopened
    /// into `pending` if it was closed.
    fn push(&self, offer: Offer, limit: f64, (pending, out): (&mut Run, &mut BookBuffers)) {
        let first_of_pair = out.chunks.is_empty() && pending.is_empty();
        if first_of_pair || starts_chunk(&offer, self.mean) {
            self.close(pending, out);
        } else if pending.is_empty() {
            let last = out
                .pop_chunk()
                .expect("a chunk precedes an offer that starts none");
            pending.extend(&last.offers, &last.limits);
            pending.keep_spare(last);
        }
        pending.push(offer, limit);
    }

    /// Closes the chunk in `pending` (if any) into `out`.
    fn close(&self, pending: &mut Run, out: &mut BookBuffers) {
        if !pending.is_empty() {
            let chunk = pending.cut_chunk();
            out.push_new(chunk);
            pending.clear();
        }
    }

    /// Cuts a chunk's `offers` and `limits` (canonical, checked when booked) merged with
    /// `edits` (ascending keys, within the chunk's key range: see [`check_edit_order`]) into
    /// `pending` and `out`.
    fn merge(
        &self,
        (offers, limits): (&[Offer], &[f64]),
        edits: &[(usize, OfferEdit)],
        (pending, out): (&mut Run, &mut BookBuffers),
    ) -> Result<(), BookError> {
        // Offers between edits are copied as runs: inside a chunk only its first offer can
        // start one, so a run needs the cut rule applied to its first offer alone.
        let mut next = 0;
        for (_, edit) in edits {
            let key = edit.key();
            let at = next + offers[next..].partition_point(|offer| offer.key() < key);
            self.push_run(&offers[next..at], &limits[next..at], (pending, out));
            next = at;
            let held = offers.get(at).filter(|offer| offer.key() == key);
            if held.is_some() {
                next += 1;
            }
            if let Some((offer, limit)) =
                self.outcome(edit, held.map(|offer| (offer, limits[at])))?
            {
                self.push(offer, limit, (pending, out));
            }
        }
        self.push_run(&offers[next..], &limits[next..], (pending, out));
        Ok(())
    }

    /// What `edit` leaves at its key, given the offer the chunk holds there with its limit:
    /// nothing (a removal), or an offer with its limit; refused when it does not apply. The
    /// one rule for [`Self::merge`] and [`Self::edit_in_place`].
    fn outcome(
        &self,
        edit: &OfferEdit,
        held: Option<(&Offer, f64)>,
    ) -> Result<Option<(Offer, f64)>, BookError> {
        match (edit, held) {
            (OfferEdit::Remove(_), Some(_)) => Ok(None),
            (OfferEdit::SetAmount(key, amount), Some((offer, limit))) => {
                if *amount == 0 || *amount > MAX_AMOUNT {
                    return Err(BookError::Amount {
                        offer_id: key.id.0,
                        amount: *amount,
                    });
                }
                let offer = Offer {
                    amount: *amount,
                    ..*offer
                };
                Ok(Some((offer, limit)))
            }
            (OfferEdit::Insert(offer), None) => {
                // The per-asset totals are checked once the books are assembled.
                check_offer(offer, self.assets)?;
                if pair_index(offer, self.assets) != self.index {
                    return Err(BookError::NotCanonical {
                        offer_id: offer.id.0,
                    });
                }
                Ok(Some((*offer, offer.min_price.to_f64())))
            }
            _ => Err(BookError::Edit {
                offer_id: edit.key().id.0,
            }),
        }
    }

    /// Whether `edits` (of `chunk`, in its key range) leave the cut as it is, and are few
    /// enough to apply where the chunk lies: its first offer stays first (none removed or
    /// inserted before it) and no inserted offer starts a chunk. Then the chunk is edited in
    /// place instead of merged into a copy: at a million open offers a block's edits fall in
    /// chunks of their own, one or two each, out of cache.
    fn keeps_cut(&self, chunk: &Chunk, edits: &[(usize, OfferEdit)]) -> bool {
        let first = chunk.offers[0].key();
        edits.len() <= IN_PLACE_EDITS_MAX
            && edits.iter().all(|(_, edit)| match edit {
                OfferEdit::Remove(key) => *key > first,
                OfferEdit::SetAmount(key, _) => *key >= first,
                OfferEdit::Insert(offer) => offer.key() > first && !starts_chunk(offer, self.mean),
            })
    }

    /// Applies `edits` to `chunk` where it lies (when [`Self::keeps_cut`]): the chunk
    /// [`Self::merge`] would cut, in the same allocations.
    fn edit_in_place(
        &self,
        chunk: &mut Chunk,
        edits: &[(usize, OfferEdit)],
    ) -> Result<(), BookError> {
        for (_, edit) in edits {
            let key = edit.key();
            let at = chunk.offers.partition_point(|offer| offer.key() < key);
            let held = chunk
                .offers
                .get(at)
                .filter(|offer| offer.key() == key)
                .map(|offer| (offer, chunk.limits[at]));
            let was_held = held.is_some();
            match (self.outcome(edit, held)?, was_held) {
                (None, _) => {
                    chunk.offers.remove(at);
                    chunk.limits.remove(at);
                }
                (Some((offer, _)), true) => chunk.offers[at] = offer,
                (Some((offer, limit)), false) => {
                    if chunk.offers.len() == chunk.offers.capacity() {
                        chunk.offers.reserve_exact(REFILL_SLACK_OFFERS);
                    }
                    if chunk.limits.len() == chunk.limits.capacity() {
                        chunk.limits.reserve_exact(REFILL_SLACK_OFFERS);
                    }
                    chunk.offers.insert(at, offer);
                    chunk.limits.insert(at, limit);
                }
            }
        }
        debug_assert!(!chunk.offers.is_empty() && chunk.offers.len() == chunk.limits.len());
        chunk.refold();
        Ok(())
    }

    /// Adds consecutive offers of one chunk, as [`Self::push`] adds each: only the first
    /// can start a chunk (the others follow it inside the chunk they came from).
    fn push_run(
        &self,
        offers: &[Offer],
        limits: &[f64],
        (pending, out): (&mut Run, &mut BookBuffers),
    ) {
        let Some((first, rest)) = offers.split_first() else {
            return;
        };
        self.push(*first, limits[0], (pending, out));
        debug_assert!(rest.iter().all(|offer| !starts_chunk(offer, self.mean)));
        pending.extend(rest, &limits[1..]);
    }
}

/// Refuses one pair's edits when one names another pair or they are not in strictly
/// ascending key order (two edits of one offer included), naming the first such offer.
fn check_edit_order(index: usize, edits: &[(usize, OfferEdit)]) -> Result<(), BookError> {
    let misplaced = edits.iter().find(|(pair, _)| *pair != index);
    let out_of_order = edits
        .windows(2)
        .find(|two| two[0].1.key() >= two[1].1.key())
        .map(|two| &two[1]);
    match misplaced.or(out_of_order) {
        Some((_, edit)) => Err(BookError::Edit {
            offer_id: edit.key().id.0,
        }),
        None => Ok(()),
    }
}

/// The chunks of `carried` (a pair's, in the previous books) that `edits` (the pair's, in
/// ascending key order) fall in, as (chunk index, how many of the edits, in order, are its).
/// An edit belongs to the last chunk starting at or before its key (the first chunk also
/// takes keys before its own first offer). Reads only the books' array of first keys.
fn edits_by_chunk(
    previous: &OrderBooks,
    carried: std::ops::Range<usize>,
    edits: &[(usize, OfferEdit)],
) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut rest = edits;
    for at in carried.clone() {
        if rest.is_empty() {
            break;
        }
        let count = if at + 1 < carried.end {
            let next_key = previous.arrays.chunk_first_keys[at + 1];
            rest.partition_point(|(_, edit)| edit.key() < next_key)
        } else {
            rest.len()
        };
        if count > 0 {
            spans.push((at, count));
            rest = &rest[count..];
        }
    }
    spans
}

/// Edited chunks whose header is asked for ahead of their edit, and whose offers and limits
/// are: each edit reads its chunk whole (the search, the move of the offers after it, the
/// refold), out of cache at a million open offers; asked for ahead, the misses of the next
/// chunks overlap the edit of this one instead of following it. Headers first, further ahead,
/// since reading where a chunk's offers lie needs its header.
const HEADERS_AHEAD: usize = 3;
const BODIES_AHEAD: usize = 1;

/// Asks the cache for what the edits of `spans[span + HEADERS_AHEAD]` and
/// `spans[span + BODIES_AHEAD]` will read (a hint: no result depends on it).
fn prefetch_ahead(spans: &[(usize, usize)], span: usize, chunks: &Carried<'_>) {
    if let Some(chunk) = spans
        .get(span + HEADERS_AHEAD)
        .and_then(|&(at, _)| chunks.peek(at))
    {
        let header = Arc::as_ptr(chunk);
        // The reference counts lie just before the chunk (an in-place edit checks them).
        prefetch((header as *const i8).wrapping_sub(2 * std::mem::size_of::<usize>()));
        prefetch_slice(std::slice::from_ref(&**chunk));
    }
    if let Some(chunk) = spans
        .get(span + BODIES_AHEAD)
        .and_then(|&(at, _)| chunks.peek(at))
    {
        // A long chunk (a hostile account's run of offers that start none) is asked for in
        // part: past that the edit's own sequential reads are what the hardware prefetches.
        let offers = chunk.offers.len().min(PREFETCHED_OFFERS_MAX);
        prefetch_slice(&chunk.offers[..offers]);
        prefetch_slice(&chunk.limits[..offers]);
    }
}

/// Offers of one chunk asked for ahead at most: four times the mean chunk.
const PREFETCHED_OFFERS_MAX: usize = 4 * CHUNK_OFFERS_MEAN as usize;

/// One pair's offers (canonical order) cut into chunks by the rule.
fn cut_pair(offers: &[Offer], mean: u32) -> Vec<Arc<Chunk>> {
    let limits: Vec<f64> = offers
        .iter()
        .map(|offer| offer.min_price.to_f64())
        .collect();
    let run = |range: std::ops::Range<usize>| {
        Arc::new(Chunk::new(&offers[range.clone()], &limits[range]))
    };
    let mut chunks = Vec::with_capacity(offers.len() / mean.max(1) as usize + 1);
    let mut start = 0;
    for (at, offer) in offers.iter().enumerate().skip(1) {
        if starts_chunk(offer, mean) {
            chunks.push(run(start..at));
            start = at;
        }
    }
    if start < offers.len() {
        chunks.push(run(start..offers.len()));
    }
    chunks
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
            let ids: Vec<u64> = books.offers(&pair).map(|offer| offer.id.0).collect();
            assert_eq!(ids, vec![3, 4, 2]); // price 0.5, then 1.5 by account (1 < 2)
            assert_eq!(books.chunks(&pair).len(), 1);
            assert_eq!(books.chunk_blocks(&pair, 0).len(), 1);
            assert_eq!(books.chunk_blocks(&pair, 0)[0].limits[3], f32::INFINITY);
            assert_eq!(books.pair_totals(0).amount, 14.0);
            assert_eq!(books.amount_before(&pair, 3), 14);
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
            assert_eq!(sorted, built);
        }
        let small = OrderBooks::build_with_chunk_mean(offers.clone(), 3, 1, 4).unwrap();
        assert!(small.chunk_count() > 300, "{} chunks", small.chunk_count());
        for threads in [1, 2] {
            let sorted =
                OrderBooks::from_sorted_pairs_with_chunk_mean(lists.clone(), 3, threads, 4)
                    .unwrap();
            assert_eq!(sorted, small);
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
    /// `edits` (in pair order) split by pair, as [`OrderBooks::edited_from`] takes them.
    fn by_pair(edits: &[(usize, OfferEdit)]) -> Vec<(usize, Vec<(usize, OfferEdit)>)> {
        let mut pairs: Vec<(usize, Vec<(usize, OfferEdit)>)> = Vec::new();
        for edit in edits {
            match pairs.last_mut() {
                Some((pair, list)) if *pair == edit.0 => list.push(*edit),
                _ => pairs.push((edit.0, vec![*edit])),
            }
        }
        pairs
    }

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

    /// Every read of `books` agrees with the open offers as flat canonical lists per pair.
    fn prop_assert_flat_reads_agree(
        books: &OrderBooks,
        open: &[Offer],
        assets: usize,
    ) -> Result<(), TestCaseError> {
        let lists = lists_of(open, assets);
        let listed: Vec<&Vec<Offer>> = lists.iter().filter(|list| !list.is_empty()).collect();
        prop_assert_eq!(books.pairs().len(), listed.len());
        for (pair, list) in books.pairs().iter().zip(listed) {
            prop_assert_eq!(pair.len(), list.len());
            let offers: Vec<Offer> = books.offers(pair).copied().collect();
            prop_assert_eq!(&offers, list);
            let mut cumulative = vec![0u64];
            for offer in list {
                cumulative.push(cumulative[cumulative.len() - 1] + offer.amount);
            }
            for count in 0..=list.len() {
                prop_assert_eq!(books.amount_before(pair, count), cumulative[count]);
                if count < list.len() {
                    prop_assert_eq!(books.offer_at(pair, count), &list[count]);
                    let rate = list[count].min_price;
                    let at_or_below = list.iter().filter(|offer| offer.min_price <= rate).count();
                    let below = list.iter().filter(|offer| offer.min_price < rate).count();
                    prop_assert_eq!(books.count_at_or_below(pair, rate), at_or_below);
                    prop_assert_eq!(books.count_below(pair, rate), below);
                }
            }
            // The cut is the rule: a chunk starts at the pair's first offer or at one whose
            // hash says so, and nowhere else.
            for (at, chunk) in books.chunks(pair).iter().enumerate() {
                prop_assert!(at == 0 || starts_chunk(&chunk.offers()[0], books.chunk_mean()));
                for offer in &chunk.offers()[1..] {
                    prop_assert!(!starts_chunk(offer, books.chunk_mean()));
                }
            }
        }
        Ok(())
    }

    proptest! {
        /// Books edited in place, batch after batch (reusing the previous books' buffers),
        /// are the books a build from scratch makes of the same open offers: the same offers,
        /// the same chunks, float curves bit for bit, the same exact prefix sums; and every
        /// read (offer at, prefixes, counts, amounts) agrees with the flat list of the open
        /// offers. Covers cancels, partial and full fills, new offers, dust amounts, the
        /// extreme limits, and chunks of 1, 2, 5 and the default mean offers.
        #[test]
        fn edited_books_equal_books_built_from_scratch(
            start in proptest::collection::vec(
                (0u16..3, 0u16..3, amount_strategy(), limit_strategy()), 0..120),
            batches in proptest::collection::vec((
                proptest::collection::vec((0u8..8, any::<u64>()), 1..40),
                proptest::collection::vec(
                    (0u16..3, 0u16..3, amount_strategy(), limit_strategy()), 0..60),
                any::<bool>(),
            ), 1..4),
            mean_choice in 0usize..4,
            threads in 1usize..4,
        ) {
            let assets = 3;
            let mut next_id = 0u64;
            let (_, mut open) = apply_choices(&[], &[(0, 0)], &start, &mut next_id, assets);
            let mean = [1, 2, 5, CHUNK_OFFERS_MEAN][mean_choice];
            let mut books = OrderBooks::from_sorted_pairs_with_chunk_mean(
                lists_of(&open, assets), assets, 1, mean).unwrap();
            for (choices, created, consume) in &batches {
                let (edits, after) =
                    apply_choices(&open, choices, created, &mut next_id, assets);
                let spare = books.clone().into_buffers();
                // Consumed, the books give their chunks to the next ones instead of sharing
                // them: the same books either way.
                let edited = if *consume {
                    let (edited, emptied) =
                        OrderBooks::edited_from(books, &by_pair(&edits), spare, threads).unwrap();
                    prop_assert_eq!(emptied, BookBuffers::default());
                    edited
                } else {
                    OrderBooks::edited(&books, &edits, spare, threads).unwrap()
                };
                let scratch = OrderBooks::from_sorted_pairs_with_chunk_mean(
                    lists_of(&after, assets), assets, 2, mean).unwrap();
                // Reading builds some chunks' detail (blocks, exact sums) in the edited books
                // and none in the scratch books: they must still compare equal, and every
                // chunk's blocks, built on either side, must be the same floats.
                prop_assert_flat_reads_agree(&edited, &after, assets)?;
                prop_assert_eq!(&edited, &scratch);
                for pair in edited.pairs() {
                    for chunk in 0..edited.chunks(pair).len() {
                        prop_assert_eq!(
                            edited.chunk_blocks(pair, chunk),
                            scratch.chunk_blocks(pair, chunk)
                        );
                    }
                }
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
        // Within the chunk's keys, past its first offer: refused on the in-place path too.
        let inner_stranger = offer(8, 0, 1, 3, 1.8);
        let cases = [
            vec![(1, OfferEdit::Remove(stranger.key()))],
            vec![(1, OfferEdit::Remove(inner_stranger.key()))],
            vec![(1, OfferEdit::Insert(offers[0]))],
            vec![
                (1, OfferEdit::Remove(offers[0].key())),
                (1, OfferEdit::Remove(offers[1].key())),
            ],
            vec![(2, OfferEdit::Remove(offers[0].key()))],
        ];
        // Each refused alike by shared books and by taken ones (which edit a chunk in place
        // when its edits keep the cut).
        let refusals = |edits: &[(usize, OfferEdit)]| {
            let pair = edits[0].0;
            let shared = OrderBooks::edited(&books, edits, BookBuffers::default(), 1).unwrap_err();
            // Built afresh, not cloned: its chunks are its own, as the in-place path needs.
            let taken = OrderBooks::edited_from(
                OrderBooks::build(offers.clone(), 2, 1).unwrap(),
                &[(pair, edits.to_vec())],
                BookBuffers::default(),
                1,
            )
            .unwrap_err();
            [shared, taken]
        };
        for edits in cases {
            for error in refusals(&edits) {
                assert!(
                    matches!(error, BookError::Edit { .. }),
                    "{edits:?}: {error}"
                );
            }
        }
        let zero = [(1, OfferEdit::SetAmount(offers[0].key(), 0))];
        for error in refusals(&zero) {
            assert!(matches!(error, BookError::Amount { .. }), "{error}");
        }
        let misplaced = [(2, OfferEdit::Insert(stranger))];
        for error in refusals(&misplaced) {
            assert!(matches!(error, BookError::NotCanonical { .. }), "{error}");
        }
        // Split by pair: pairs out of order, twice, past the last, or an edit in another
        // pair's list; on one thread and on several.
        let remove = |offer: &Offer| (1, OfferEdit::Remove(offer.key()));
        type PairEdits = (usize, Vec<(usize, OfferEdit)>);
        let by_pair_cases: [Vec<PairEdits>; 4] = [
            vec![(2, vec![]), (1, vec![remove(&offers[0])])],
            vec![(1, vec![remove(&offers[0])]), (1, vec![remove(&offers[1])])],
            vec![(4, vec![(4, OfferEdit::Insert(stranger))])],
            vec![(0, vec![remove(&offers[0])])],
        ];
        for threads in [1, 3] {
            for edited in &by_pair_cases {
                let error =
                    OrderBooks::edited_by_pair(&books, edited, BookBuffers::default(), threads)
                        .unwrap_err();
                assert!(
                    matches!(error, BookError::Edit { .. }),
                    "{edited:?}: {error}"
                );
            }
        }
    }

    /// An edit rebuilds the chunk it falls in (and the one before when it removes a chunk's
    /// first offer): every other chunk is the previous books' own, shared, not copied.
    #[test]
    fn an_edit_rebuilds_its_chunk_and_shares_the_others() {
        let offers: Vec<Offer> = (0..20_000u64)
            .map(|id| offer(id, 0, 1, 1 + id % 7, 0.5 + (id % 1_000) as f64 / 500.0))
            .collect();
        let books = OrderBooks::build(offers.clone(), 2, 1).unwrap();
        let pair = books.pairs()[0];
        let chunks = books.chunks(&pair).len();
        assert!(chunks > 50, "{chunks} chunks of the default mean");
        let middle = books.offer_at(&pair, 10_000);
        let fresh = offer(99_999, 0, 1, 5, middle.min_price.to_f64());
        let edits = [
            (1, OfferEdit::SetAmount(middle.key(), 1)),
            (1, OfferEdit::Insert(fresh)),
        ];
        let mut edits = edits.to_vec();
        edits.sort_unstable_by_key(|(pair, edit)| (*pair, edit.key()));
        let edited = OrderBooks::edited(&books, &edits, BookBuffers::default(), 1).unwrap();
        let after = edited.chunks(&edited.pairs()[0]);
        let shared = after
            .iter()
            .filter(|chunk| {
                books
                    .chunks(&pair)
                    .iter()
                    .any(|old| Arc::ptr_eq(old, chunk))
            })
            .count();
        assert!(
            shared + 3 >= after.len() && after.len() + 2 >= chunks,
            "{shared} of {} chunks shared ({chunks} before)",
            after.len()
        );
        let mut open = offers;
        open.iter_mut().find(|o| o.id == middle.id).unwrap().amount = 1;
        open.push(fresh);
        assert_eq!(edited, OrderBooks::build(open, 2, 1).unwrap());
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
