//! The clearing books carried from one block to the next.
//!
//! Planning used to rebuild every block's clearing books from the state's per-pair books (a
//! tree walk and several copies of every open offer, in fresh arrays). Instead the books the
//! last block was cleared on are kept, with what that block's fills changed, and the next
//! block's books are [`OrderBooks::edited`] from them: the fills (removals and partial
//! amounts), the block's cancels and its new offers, in the previous books' buffers. The books
//! share every chunk of offers the edits do not touch (see `walras_clearing::OrderBooks`), so
//! this costs the block's edits and a small record per chunk, not a copy of every open offer.
//! A block that is to execute (a solo proposer's, a follower's) takes the carried books, whose
//! chunks then move into its own; a look (a proposal's header, a check) shares them
//! (`Use`).
//!
//! # What must be reproducible, and what only the proposer sees
//!
//! - **Bit-identical on every node and after a restart**: everything a block commits — the
//!   header's valuations and per-pair trades, checked exactly by a follower
//!   (`ExchangeState::check`, `apply`: `settle::settle_given` on integers, no tâtonnement) —
//!   and the state root. Recovery replays stored blocks with `apply`, i.e. it checks and
//!   applies the stored header; it never re-runs tâtonnement. So the exact structures
//!   (offers in canonical order, exact `u64` prefix sums) must equal a build from scratch.
//! - **The proposer's heuristic**: tâtonnement's float curves and the supply table, and the
//!   time budget `clearing_timeout` that stops it. With a time budget the proposed prices
//!   already depend on the machine; no node re-derives them. Only `walras replay` (and tests)
//!   re-run tâtonnement, with an iteration budget, and compare state roots with a manifest:
//!   for those to keep matching, the floats must be a function of the open offers alone.
//!
//! [`OrderBooks::edited`] gives both: its books are equal, field for field, to a build from
//! scratch of the same open offers (the float curves included), so a restarted node (which
//! starts from the state's books) proposes what a node that never stopped proposes, and
//! the state roots are those of a build that rebuilds every block. Debug builds assert it.

use crate::shared_books::{SharedBooks, SharedPair};
use std::sync::atomic::AtomicU32;
use std::sync::Mutex;
use walras_clearing::{BookBuffers, OfferEdit, OrderBooks};
use walras_types::{AssetId, Offer, OfferKey};

/// The last block's clearing books and the changes its fills made to them.
#[derive(Debug, Default)]
pub(crate) struct CarriedBooks {
    /// Behind a lock so that a block about to execute can take it through `&self`
    /// ([`Use::Execute`]).
    base: Mutex<Option<Base>>,
    /// The buffers of the books before `base`, for the next books to be built in.
    spare: Mutex<Option<BookBuffers>>,
    /// The last supply table's entries, for the next table to be built in
    /// (`SupplyGrid::for_mu_reusing`).
    grid_values: Mutex<Vec<AtomicU32>>,
}

#[derive(Debug)]
struct Base {
    /// The state height whose open offers are `books` with `fills` applied.
    height: u64,
    books: OrderBooks,
    /// (pair index, key, remaining amount: 0 when the offer closed, filled in full or its rest returned), in (pair, key) order.
    fills: Vec<(usize, OfferKey, u64)>,
}

/// What the books [`CarriedBooks::next_books`] gives are for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Use {
    /// Only to look at (a proposal's header, a check of another's block): the carried books
    /// stay, and the next books share their chunks.
    Look,
    /// To execute the block (a solo proposer, a follower applying a block): the carried books
    /// are taken and their chunks move into the next books, no reference count changed (at
    /// 10M open offers, ~78k chunks raised and then lowered a block). Should the block fail
    /// after all, the next block builds its books from the state's, as after a restart.
    Execute,
}

impl CarriedBooks {
    /// Bytes of the books carried to the next block and the spare arrays kept for it.
    pub(crate) fn heap_bytes(&self) -> u64 {
        let base = lock(&self.base).as_ref().map_or(0, |base| {
            base.books.heap_bytes()
                + (base.fills.capacity() * std::mem::size_of::<(usize, OfferKey, u64)>()) as u64
        });
        let spare = lock(&self.spare)
            .as_ref()
            .map_or(0, BookBuffers::heap_bytes);
        base + spare
    }

    /// The clearing books at `height` with the block's `cancelled` and `created` offers
    /// (both sorted by (pair, key)), or `None` when nothing is carried for this height (the
    /// first block after genesis or a restart): then build them from the state's books.
    pub(crate) fn next_books(
        &self,
        height: u64,
        assets: usize,
        cancelled: &[(usize, OfferKey)],
        created: &[(usize, OfferKey, u64)],
        threads: usize,
        usage: Use,
    ) -> Option<OrderBooks> {
        let mut base = lock(&self.base);
        if base.as_ref().is_none_or(|base| base.height != height) {
            return None;
        }
        let buffers = self.take_spare();
        let edited = match usage {
            Use::Look => {
                let base = base.as_ref()?;
                let edits = pair_edits(&base.fills, cancelled, created, assets, threads);
                OrderBooks::edited_by_pair(&base.books, &edits, buffers, threads)
            }
            Use::Execute => {
                let base = base.take()?;
                let edits = pair_edits(&base.fills, cancelled, created, assets, threads);
                OrderBooks::edited_from(base.books, &edits, buffers, threads).map(
                    |(books, emptied)| {
                        *lock(&self.spare) = Some(emptied);
                        books
                    },
                )
            }
        };
        let books =
            edited.unwrap_or_else(|error| panic!("carried books do not take the block: {error}"));
        Some(books)
    }

    /// Keeps `books`, the books block `height` was cleared on, and `fills`, what it did to
    /// them, in (pair, key) order (as the block's booking computes them); the books carried
    /// before (if still here) are kept as spare buffers.
    pub(crate) fn keep(
        &mut self,
        height: u64,
        books: OrderBooks,
        fills: Vec<(usize, OfferKey, u64)>,
    ) {
        debug_assert!(
            fills
                .windows(2)
                .all(|two| (two[0].0, two[0].1) < (two[1].0, two[1].1)),
            "fills in (pair, key) order"
        );
        let base = self
            .base
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let previous = base.replace(Base {
            height,
            books,
            fills,
        });
        if let (Some(previous), Ok(spare)) = (previous, self.spare.get_mut()) {
            *spare = Some(previous.books.into_buffers());
        }
    }

    /// The open offers at `height`, shared with the carried books (a reference count raised
    /// per chunk, no offer copied), or `None` when nothing is carried for `height`. While the
    /// share is held, the next books copy the chunks they edit instead of editing them in place.
    pub(crate) fn share(&self, height: u64) -> Option<SharedBooks> {
        self.share_where(height, |_| true)
    }

    /// [`Self::share`] of the pair with index `index` (`sell * assets + buy`) alone: its
    /// chunks and its fills.
    pub(crate) fn share_pair(&self, height: u64, index: usize) -> Option<SharedBooks> {
        self.share_where(height, |pair| pair == index)
    }

    /// [`Self::share`] of the pairs whose index `wanted` says.
    fn share_where(&self, height: u64, wanted: impl Fn(usize) -> bool) -> Option<SharedBooks> {
        let base = lock(&self.base);
        let base = base.as_ref().filter(|base| base.height == height)?;
        let assets = base.books.assets();
        let pairs = base
            .books
            .pairs()
            .iter()
            .map(|pair| {
                (
                    usize::from(pair.sell) * assets + usize::from(pair.buy),
                    pair,
                )
            })
            .filter(|(index, _)| wanted(*index))
            .map(|(index, pair)| SharedPair {
                index,
                offers: pair.len(),
                chunks: base.books.chunks(pair).to_vec(),
            })
            .collect();
        let fills = base
            .fills
            .iter()
            .filter(|(pair, _, _)| wanted(*pair))
            .copied()
            .collect();
        Some(SharedBooks { pairs, fills })
    }

    /// The allocation of the last supply table (empty when none was kept).
    pub(crate) fn take_grid_values(&self) -> Vec<AtomicU32> {
        std::mem::take(&mut *lock(&self.grid_values))
    }

    /// Keeps a supply table's allocation for the next.
    pub(crate) fn keep_grid_values(&self, values: Vec<AtomicU32>) {
        *lock(&self.grid_values) = values;
    }

    fn take_spare(&self) -> BookBuffers {
        lock(&self.spare).take().unwrap_or_default()
    }
}

/// The value behind `mutex`, whatever a panicking holder left: whole values only are put
/// there (a carried books or spare buffers), so a poisoned lock holds one or none.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One pair's slices of the fills, cancels and creations.
type PairSlices<'a> = (
    usize,
    &'a [(usize, OfferKey, u64)],
    &'a [(usize, OfferKey)],
    &'a [(usize, OfferKey, u64)],
);

/// [`edits`] per pair: `(pair index, its edits)` for every pair with one, in pair order, each
/// pair's merged on up to `threads` threads (a block's edits are hundreds of thousands).
fn pair_edits(
    fills: &[(usize, OfferKey, u64)],
    cancelled: &[(usize, OfferKey)],
    created: &[(usize, OfferKey, u64)],
    assets: usize,
    threads: usize,
) -> Vec<(usize, Vec<(usize, OfferEdit)>)> {
    let (mut fills, mut cancelled, mut created) = (fills, cancelled, created);
    let mut pairs: Vec<PairSlices<'_>> = Vec::new();
    loop {
        let heads = [
            fills.first().map(|(pair, _, _)| *pair),
            cancelled.first().map(|(pair, _)| *pair),
            created.first().map(|(pair, _, _)| *pair),
        ];
        let Some(pair) = heads.into_iter().flatten().min() else {
            break;
        };
        let (pair_fills, rest) = fills.split_at(fills.partition_point(|f| f.0 <= pair));
        fills = rest;
        let (pair_cancels, rest) = cancelled.split_at(cancelled.partition_point(|c| c.0 <= pair));
        cancelled = rest;
        let (pair_created, rest) = created.split_at(created.partition_point(|c| c.0 <= pair));
        created = rest;
        pairs.push((pair, pair_fills, pair_cancels, pair_created));
    }
    let merged = walras_par::map_in_order(&pairs, threads, 2, |(_, fills, cancels, created)| {
        edits(fills, cancels, created, assets)
    });
    pairs.iter().map(|(pair, ..)| *pair).zip(merged).collect()
}

/// The edits from the carried books to the block's: the last block's fills, then this
/// block's cancels and new offers, in (pair, key) order; an offer both filled in part and
/// cancelled is removed. The three lists are each in (pair, key) order already: merged, not
/// sorted (a new offer's key is never an open offer's: its id is its account's sequence).
fn edits(
    fills: &[(usize, OfferKey, u64)],
    cancelled: &[(usize, OfferKey)],
    created: &[(usize, OfferKey, u64)],
    assets: usize,
) -> Vec<(usize, OfferEdit)> {
    let fills = fills.iter().map(|(pair, key, remaining)| {
        let edit = match remaining {
            0 => OfferEdit::Remove(*key),
            amount => OfferEdit::SetAmount(*key, *amount),
        };
        (*pair, edit)
    });
    let cancels = cancelled
        .iter()
        .map(|(pair, key)| (*pair, OfferEdit::Remove(*key)));
    let creations = created.iter().map(|(pair, key, amount)| {
        let offer = Offer {
            id: key.id,
            account: key.account,
            sell: AssetId((pair / assets) as u16),
            buy: AssetId((pair % assets) as u16),
            amount: *amount,
            min_price: key.min_price,
        };
        (*pair, OfferEdit::Insert(offer))
    });
    let mut edits = Vec::with_capacity(fills.len() + cancelled.len() + created.len());
    let order = |(pair, edit): &(usize, OfferEdit)| (*pair, edit.key());
    let mut removals = merge_by(fills, cancels, order).into_iter().peekable();
    // A key both filled and cancelled comes twice in a row: the cancel (second) wins.
    while let Some(edit) = removals.next() {
        match removals.peek() {
            Some(next) if order(next) == order(&edit) => {}
            _ => edits.push(edit),
        }
    }
    merge_by(edits, creations, order)
}

/// The items of `first` and `second` (each in `order`) in `order`; of equal items, `first`'s
/// come first.
fn merge_by<T, K: Ord>(
    first: impl IntoIterator<Item = T>,
    second: impl IntoIterator<Item = T>,
    order: impl Fn(&T) -> K,
) -> Vec<T> {
    let (mut first, mut second) = (first.into_iter().peekable(), second.into_iter().peekable());
    // Sized up front: a block's edits are thousands, and a vector grown by doubling took fresh
    // pages from the allocator each block.
    let mut merged = Vec::with_capacity(first.size_hint().0 + second.size_hint().0);
    loop {
        let take_first = match (first.peek(), second.peek()) {
            (Some(a), Some(b)) => order(a) <= order(b),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return merged,
        };
        merged.extend(if take_first {
            first.next()
        } else {
            second.next()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use walras_types::{AccountId, OfferId, Price};

    fn key(id: u64, limit: f64) -> OfferKey {
        OfferKey {
            min_price: Price::from_f64(limit),
            account: AccountId(id),
            id: OfferId(id),
        }
    }

    /// An offer filled in part by the last block and cancelled in this one leaves the book:
    /// the removal wins over the remaining amount, and each key is edited once, in (pair,
    /// key) order across fills, cancels and new offers.
    #[test]
    fn an_offer_filled_in_part_then_cancelled_is_removed() {
        let (filled, cancelled, full, new) = (key(1, 1.0), key(2, 2.0), key(3, 0.5), key(4, 1.5));
        let edits = edits(
            &[(1, full, 0), (1, filled, 5), (2, cancelled, 9)],
            &[(1, filled), (2, cancelled)],
            &[(1, new, 7)],
            2,
        );
        let summary: Vec<(usize, OfferKey, Option<u64>)> = edits
            .iter()
            .map(|(pair, edit)| {
                let amount = match edit {
                    OfferEdit::Remove(_) => None,
                    OfferEdit::SetAmount(_, amount) => Some(*amount),
                    OfferEdit::Insert(offer) => Some(offer.amount),
                };
                (*pair, edit.key(), amount)
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                (1, full, None),
                (1, filled, None),
                (1, new, Some(7)),
                (2, cancelled, None)
            ]
        );
        let OfferEdit::Insert(offer) = edits[2].1 else {
            panic!("a new offer is inserted: {:?}", edits[2]);
        };
        assert_eq!((offer.sell, offer.buy), (AssetId(0), AssetId(1)));
    }
}
