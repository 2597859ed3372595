//! The open offers of one height, shared with the carried clearing books: what a checkpoint
//! and a book snapshot encode off the block path.
//!
//! After a block executes, the state carries the books it was cleared on and the fills that
//! block made (`crate::carried`); together they are the open offers after the block. Sharing
//! them costs a reference count per chunk on the block path instead of a copy of every open
//! offer (40 bytes each: 37 MB at 900k open offers, 400 MB at 10M); whoever holds the share
//! applies the fills as it reads. While a share is held, the next blocks copy the chunks they
//! edit instead of editing them in place.

use std::sync::Arc;
use walras_clearing::Chunk;
use walras_types::codec::Writer;
use walras_types::{AssetId, OfferKey, PairId};

/// Open offers shared with the carried books: each non-empty pair's chunks (before the
/// fills) and the fills still to apply to them.
#[derive(Debug)]
pub(crate) struct SharedBooks {
    /// In pair order.
    pub(crate) pairs: Vec<SharedPair>,
    /// (pair index, key, remaining amount: 0 when the offer closed), in (pair, key) order.
    pub(crate) fills: Vec<(usize, OfferKey, u64)>,
}

/// One pair's offers before the fills: its index `sell * assets + buy`, how many offers its
/// chunks hold, and the chunks in canonical order.
#[derive(Debug)]
pub(crate) struct SharedPair {
    pub(crate) index: usize,
    pub(crate) offers: usize,
    pub(crate) chunks: Vec<Arc<Chunk>>,
}

/// One non-empty pair after the fills: its chunks, their fills, and the offers that stay open.
pub(crate) struct OpenBook<'s> {
    pair: &'s SharedPair,
    fills: &'s [(usize, OfferKey, u64)],
    offers: usize,
}

/// Shared books whose fills name an offer their chunks do not hold (a defect in what was
/// carried): the pair index where that showed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FillsMismatch(pub(crate) usize);

impl SharedBooks {
    /// The pairs that hold open offers after the fills, in pair order.
    pub(crate) fn open_books(&self) -> Result<Vec<OpenBook<'_>>, FillsMismatch> {
        let mut fills = &self.fills[..];
        let mut open = Vec::with_capacity(self.pairs.len());
        for pair in &self.pairs {
            if fills.first().is_some_and(|fill| fill.0 < pair.index) {
                return Err(FillsMismatch(pair.index));
            }
            let (mine, rest) = fills.split_at(fills.partition_point(|fill| fill.0 <= pair.index));
            fills = rest;
            let closed = mine
                .iter()
                .filter(|(_, _, remaining)| *remaining == 0)
                .count();
            let offers = pair
                .offers
                .checked_sub(closed)
                .ok_or(FillsMismatch(pair.index))?;
            if offers > 0 {
                open.push(OpenBook {
                    pair,
                    fills: mine,
                    offers,
                });
            }
        }
        match fills.first() {
            Some((pair, _, _)) => Err(FillsMismatch(*pair)),
            None => Ok(open),
        }
    }
}

impl OpenBook<'_> {
    /// The pair's index, `sell * assets + buy`.
    pub(crate) fn index(&self) -> usize {
        self.pair.index
    }

    /// Offers open after the fills.
    pub(crate) fn offers(&self) -> usize {
        self.offers
    }

    /// Calls `each` with every open offer's key and amount, in key order: a filled offer at
    /// its remaining amount, a closed one left out. Fails when a fill names an offer the
    /// chunks do not hold (then `each` saw a wrong list).
    pub(crate) fn for_each(
        &self,
        mut each: impl FnMut(OfferKey, u64),
    ) -> Result<(), FillsMismatch> {
        let mut fills = self.fills.iter().peekable();
        let mut seen = 0;
        for offer in self.pair.chunks.iter().flat_map(|chunk| chunk.offers()) {
            let key = offer.key();
            let amount = match fills.next_if(|(_, filled, _)| *filled == key) {
                Some((_, _, 0)) => continue,
                Some((_, _, remaining)) => *remaining,
                None => offer.amount,
            };
            seen += 1;
            each(key, amount);
        }
        if fills.next().is_some() || seen != self.offers {
            return Err(FillsMismatch(self.pair.index));
        }
        Ok(())
    }
}

/// Every open offer after the block at [`BookSnapshot::height`], shared with the state's
/// carried books ([`crate::ExchangeState::share_books`]): what a store writes as a book
/// snapshot off the block path.
#[derive(Debug)]
pub struct BookSnapshot {
    pub(crate) height: u64,
    pub(crate) assets: usize,
    pub(crate) shared: SharedBooks,
}

/// Bytes of one offer in [`BookSnapshot::encode_each`]'s books (and in a checkpoint's).
pub const BOOK_OFFER_BYTES: usize = 16 + 8 + 8 + 8;

impl BookSnapshot {
    /// The height of the state whose open offers these are.
    pub fn height(&self) -> u64 {
        self.height
    }

    /// Calls `each` with every pair that holds open offers, in pair order, and its book: per
    /// offer in key order its limit (`u128`), account and id, and the amount left (`u64`s),
    /// big-endian ([`BOOK_OFFER_BYTES`] an offer). Fails, having called `each` for the pairs
    /// before, when the carried books do not take their fills (a defect, never a checkpoint).
    pub fn encode_each(&self, mut each: impl FnMut(PairId, &[u8])) -> Result<(), SharedBooksError> {
        let mut bytes = Vec::new();
        for (pair, book) in self.open_pairs()? {
            bytes.clear();
            bytes.reserve(BOOK_OFFER_BYTES * book.offers());
            book.for_each(|key, amount| put_offer(&mut bytes, key, amount))
                .map_err(|mismatch| self.error(mismatch))?;
            each(pair, &bytes);
        }
        Ok(())
    }

    /// Calls `each` with every open offer (its pair, key and amount left): pairs in order,
    /// offers in key order. Fails, having called `each` for some offers, when the carried
    /// books do not take their fills (a defect).
    pub fn for_each_offer(
        &self,
        mut each: impl FnMut(PairId, OfferKey, u64),
    ) -> Result<(), SharedBooksError> {
        for (pair, book) in self.open_pairs()? {
            book.for_each(|key, amount| each(pair, key, amount))
                .map_err(|mismatch| self.error(mismatch))?;
        }
        Ok(())
    }

    /// The pairs holding open offers, with their books.
    fn open_pairs(&self) -> Result<Vec<(PairId, OpenBook<'_>)>, SharedBooksError> {
        let open = self
            .shared
            .open_books()
            .map_err(|mismatch| self.error(mismatch))?;
        Ok(open
            .into_iter()
            .map(|book| {
                let pair = PairId {
                    sell: AssetId((book.index() / self.assets) as u16),
                    buy: AssetId((book.index() % self.assets) as u16),
                };
                (pair, book)
            })
            .collect())
    }

    fn error(&self, FillsMismatch(pair): FillsMismatch) -> SharedBooksError {
        SharedBooksError {
            height: self.height,
            pair,
        }
    }
}

/// The carried books shared for a snapshot do not take their fills: a defect, reported.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the books shared at height {height} do not take their fills (pair {pair})")]
pub struct SharedBooksError {
    pub height: u64,
    pub pair: usize,
}

/// One open offer as checkpoints and book snapshots hold it: limit (`u128`), account, id,
/// amount left, big-endian.
pub(crate) fn put_offer(bytes: &mut Vec<u8>, key: OfferKey, amount: u64) {
    bytes.put_u128(key.min_price.0);
    bytes.put_u64(key.account.0);
    bytes.put_u64(key.id.0);
    bytes.put_u64(amount);
}
